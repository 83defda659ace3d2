//! Starting the real node's processes against a running control plane.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};

use super::{BRIDGE_IP, CLUSTER_DNS_IP, Layout, NODE_LABEL, NODE_NAME, NodeLock, NodePorts};
use crate::control_plane::{ControlPlane, Options, free_ports, invalid};
use crate::process::{self, ChildSpec};
use crate::{Result, images, io_err, kube_err};

/// A node's hold on the machine: the lock, and the teardown registered to run at exit.
pub(crate) struct Session {
    pub layout: Layout,
    exit_hook: u64,
    _lock: NodeLock,
}

impl Session {
    /// Takes the machine-wide lock, cleans what an earlier crashed run left, and prepares the
    /// host (bridge, guard, cgroups, fixed paths) so the API server can bind the bridge address.
    pub fn begin(options: &Options) -> Result<Self> {
        if options.lifetime == crate::Lifetime::Detached {
            // Its teardown runs when the process that started it exits.
            return Err(crate::Error::Invalid {
                context: "starting the real node".into(),
                message: "the real node lives only as long as the process that starts it; \
                          it cannot be detached"
                    .into(),
            });
        }
        if !nix_root() {
            return Err(crate::Error::Invalid {
                context: "starting the real node".into(),
                message: "the kubelet, containerd and the bridge need root".into(),
            });
        }
        // flock does not exclude a second open file in the same process: it would wait on
        // itself until the timeout. Refuse at once instead.
        if IN_THIS_PROCESS.swap(true, Ordering::SeqCst) {
            return Err(crate::Error::Invalid {
                context: "starting the real node".into(),
                message:
                    "this process already runs the machine's real node (use shared_real_node() \
                          for every test of a binary)"
                        .into(),
            });
        }
        let waited = Instant::now();
        let lock = NodeLock::acquire(super::lock_timeout()).inspect_err(|_| {
            IN_THIS_PROCESS.store(false, Ordering::SeqCst);
        })?;
        if waited.elapsed() > Duration::from_secs(1) {
            eprintln!(
                "nova-test-harness: got the real node lock after {:.1}s",
                waited.elapsed().as_secs_f64()
            );
        }
        let layout = Layout::default_dir();
        super::teardown(&layout).map_err(|e| crate::Error::Invalid {
            context: "cleaning what an earlier real node left behind".into(),
            message: e.to_string(),
        })?;
        let exit_layout = layout.clone();
        let exit_hook = process::at_exit(Box::new(move || {
            if let Err(e) = super::teardown(&exit_layout) {
                eprintln!("nova-test-harness: {e}");
            }
        }));
        let session = Self {
            layout,
            exit_hook,
            _lock: lock,
        };
        if let Err(e) = super::prepare_host(&session.layout, &options.testbin) {
            // Undo the half-prepared host while still holding the lock.
            let _ = session.end();
            return Err(e);
        }
        Ok(session)
    }

    /// Runs the teardown now (the owner stops earlier than process exit).
    pub fn end(self) -> Result<()> {
        let result = match process::take_exit_hook(self.exit_hook) {
            Some(hook) => {
                drop(hook);
                super::teardown(&self.layout)
            }
            None => Ok(()),
        };
        IN_THIS_PROCESS.store(false, Ordering::SeqCst);
        result
    }
}

static IN_THIS_PROCESS: AtomicBool = AtomicBool::new(false);

fn nix_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// When each part of the node was up, from the start of the control plane.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeTimings {
    /// containerd answered and the images were imported.
    pub containerd_ready: Duration,
    /// The Node was Ready.
    pub node_ready: Duration,
    /// kube-proxy and CoreDNS answered their health checks.
    pub total: Duration,
}

impl ControlPlane {
    /// Starts containerd, the kubelet, kube-proxy and CoreDNS and waits until the node is Ready
    /// and cluster DNS answers.
    pub(crate) async fn start_node(
        &self,
        options: &Options,
        layout: &Layout,
        started: Instant,
    ) -> Result<NodeTimings> {
        let mut timings = NodeTimings::default();
        let [proxy_healthz, proxy_metrics, dns_health, dns_ready] = free_ports("127.0.0.1")?;
        let ports = NodePorts {
            proxy_healthz,
            proxy_metrics,
            dns_health,
            dns_ready,
        };
        let pod_logs = self.log_dir().join("pods");
        std::fs::create_dir_all(&pod_logs)
            .map_err(io_err(format!("creating {}", pod_logs.display())))?;
        let binds = super::write_configs(layout, &ports, &pod_logs)?;
        self.write_node_credentials(layout)?;
        let bin = |name: &str| options.testbin.join(name);
        let cfg = layout.config();
        let path = |p: PathBuf| p.display().to_string();

        // containerd finds its shim on PATH; runc stays Debian's (named in the config).
        let mut containerd = ChildSpec::new(
            "containerd",
            bin("containerd"),
            vec![format!("--config={}", path(cfg.join("containerd.toml")))],
            self.log_dir().join("containerd.log"),
            options.lifetime,
        );
        containerd.env.push((
            "PATH".into(),
            format!(
                "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                options.testbin.display()
            ),
        ));
        self.spawn_spec(containerd)?;
        self.wait("containerd's socket", options.timeout, || async {
            Path::new(super::CONTAINERD_SOCKET).exists().then_some(())
        })
        .await?;
        images::import_all(&bin("ctr"), &images::manifest_path(), layout)?;
        timings.containerd_ready = started.elapsed();

        let client = self.client()?;
        bind_nodes_group(&client).await?;
        let mut kubelet = ChildSpec::new(
            "kubelet",
            bin("kubelet"),
            vec![
                format!("--config={}", path(cfg.join("kubelet.yaml"))),
                format!("--kubeconfig={}", path(cfg.join("kubelet.kubeconfig"))),
                format!("--root-dir={}", path(layout.kubelet_root())),
                format!("--cert-dir={}", path(layout.pki().join("kubelet"))),
                format!("--node-ip={BRIDGE_IP}"),
                format!("--hostname-override={NODE_NAME}"),
                format!("--node-labels={}={}", NODE_LABEL.0, NODE_LABEL.1),
                "--v=1".into(),
            ],
            self.log_dir().join("kubelet.log"),
            options.lifetime,
        );
        kubelet.private_binds = binds;
        self.spawn_spec(kubelet)?;

        let nodes: Api<Node> = Api::all(client.clone());
        self.wait("the real node to become Ready", options.timeout, || {
            let nodes = nodes.clone();
            async move {
                let node = nodes.get(NODE_NAME).await.ok()?;
                node.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
                    .then_some(())
            }
        })
        .await?;
        timings.node_ready = started.elapsed();

        self.spawn_spec(ChildSpec::new(
            "kube-proxy",
            bin("kube-proxy"),
            vec![
                format!("--config={}", path(cfg.join("kube-proxy.yaml"))),
                "--v=1".into(),
            ],
            self.log_dir().join("kube-proxy.log"),
            options.lifetime,
        ))?;
        self.spawn_spec(ChildSpec::new(
            "coredns",
            bin("coredns"),
            vec!["-conf".into(), path(cfg.join("Corefile"))],
            self.log_dir().join("coredns.log"),
            options.lifetime,
        ))?;
        create_dns_service(&client).await?;
        for (what, port, path) in [
            ("kube-proxy /healthz", ports.proxy_healthz, "/healthz"),
            ("CoreDNS /ready", ports.dns_ready, "/ready"),
        ] {
            self.wait(what, options.timeout, || async move {
                http_ok(port, path).await.then_some(())
            })
            .await?;
        }
        timings.total = started.elapsed();
        Ok(timings)
    }

    /// The kubelet's client certificate (CN `system:node:<node>`, O `system:nodes`) and
    /// kubeconfig, the CA it trusts clients with, and the admin kubeconfig kube-proxy and
    /// CoreDNS use.
    fn write_node_credentials(&self, layout: &Layout) -> Result<()> {
        let ca = self.ca().ok_or_else(|| {
            invalid(
                "writing the node's credentials",
                "the control plane has no CA yet",
            )
        })?;
        let node_cert = ca.issue_client(&format!("system:node:{NODE_NAME}"), &["system:nodes"])?;
        nova_certs::write_file(&layout.pki().join("ca.crt"), self.ca_pem(), false)?;
        crate::pki::write_kubeconfig_for(
            &layout.config().join("kubelet.kubeconfig"),
            self.server_url(),
            self.ca_pem(),
            &node_cert.cert_pem,
            &node_cert.key_pem,
        )?;
        for name in ["kube-proxy.kubeconfig", "coredns.kubeconfig"] {
            let to = layout.config().join(name);
            std::fs::copy(self.kubeconfig_path(), &to)
                .map_err(io_err(format!("writing {}", to.display())))?;
        }
        Ok(())
    }
}

/// The test API server has no Node authorizer: the kubelets' group gets ClusterRole
/// `system:node` by RBAC.
async fn bind_nodes_group(client: &kube::Client) -> Result<()> {
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "nova-test-harness:nodes" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes" }]
    }))
    .map_err(|e| invalid("building the nodes' RBAC binding", e))?;
    create_or_keep(&api, &binding, "the nodes' RBAC binding").await
}

/// `kube-dns` at the cluster DNS address, with one endpoint: CoreDNS on the bridge address.
async fn create_dns_service(client: &kube::Client) -> Result<()> {
    let ns = "kube-system";
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "kube-dns", "labels": { "k8s-app": "kube-dns" } },
        "spec": {
            "clusterIP": CLUSTER_DNS_IP,
            "ports": [
                { "name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53 },
                { "name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53 }
            ]
        }
    }))
    .map_err(|e| invalid("building the kube-dns Service", e))?;
    create_or_keep(&services, &service, "the kube-dns Service").await?;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "kube-dns-coredns",
            "labels": {
                "kubernetes.io/service-name": "kube-dns",
                "endpointslice.kubernetes.io/managed-by": "nova-test-harness"
            }
        },
        "addressType": "IPv4",
        "endpoints": [{ "addresses": [BRIDGE_IP], "conditions": { "ready": true }, "nodeName": NODE_NAME }],
        "ports": [
            { "name": "dns", "port": 53, "protocol": "UDP" },
            { "name": "dns-tcp", "port": 53, "protocol": "TCP" }
        ]
    }))
    .map_err(|e| invalid("building the kube-dns EndpointSlice", e))?;
    create_or_keep(&slices, &slice, "the kube-dns EndpointSlice").await
}

async fn create_or_keep<K>(api: &Api<K>, object: &K, what: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(kube_err(format!("creating {what}"))(e)),
    }
}

/// A plain HTTP GET on loopback answering 200.
async fn http_ok(port: u16, path: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(Ok(mut stream)) = tokio::time::timeout(
        Duration::from_secs(1),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    else {
        return false;
    };
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    matches!(
        tokio::time::timeout(Duration::from_secs(1), stream.read_exact(&mut head)).await,
        Ok(Ok(_))
    ) && head.starts_with(b"HTTP/1.")
        && &head[9..12] == b"200"
}
