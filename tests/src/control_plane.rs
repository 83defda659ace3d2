//! Starting, sharing and stopping the control plane.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::OnceCell;

use crate::node::{self, NodeTimings, Session};
use crate::process::{self, ChildSpec, Component, Lifetime};
use crate::{Error, Result, binaries, crds, egress, io_err, kube_err, kwok, pki};

mod faults;
pub use faults::FrozenApiServer;

/// The audit policy of [`Options::audit_log`]: who wrote what, without bodies; reads are not
/// logged.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
";

/// The Service CIDR (`--service-cluster-ip-range`); pods on the real node route only it and
/// the pod subnet.
pub(crate) const SERVICE_CIDR: &str = "10.96.0.0/24";

/// The Service range of a kwok-only control plane: room for the scale run's thousands of
/// Services (three per Nova, twice over with the raw replay); nothing routes it.
const KWOK_SERVICE_CIDR: &str = "10.96.0.0/16";

/// The Service range: the real node's routed /24, or the kwok-only plane's /16.
fn service_cidr(real_node: bool) -> &'static str {
    if real_node {
        SERVICE_CIDR
    } else {
        KWOK_SERVICE_CIDR
    }
}

/// How to start a control plane. `Options::default()` is what [`shared`] uses.
#[derive(Clone, Debug)]
pub struct Options {
    /// Directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
    /// kwok (default: `NOVA_TESTBIN` or the build script's cache directory).
    pub testbin: PathBuf,
    /// Directories whose `*.yaml` CRDs are installed (default: [`crds::default_crd_dirs`]).
    pub crd_dirs: Vec<PathBuf>,
    /// Where state, certificates and logs go; `None` means a fresh temporary directory that is
    /// removed on exit unless a test failed or `NOVA_KEEP_CONTROL_PLANE=1`.
    pub state_dir: Option<PathBuf>,
    /// Whether the components die with this process (tests) or outlive it (`up`).
    pub lifetime: Lifetime,
    /// Upper bound for each start-up wait.
    pub timeout: Duration,
    /// Also start the machine's one real node (kubelet, containerd, kube-proxy, CoreDNS) beside
    /// the kwok node: pods then run for real, the API server listens on the pod bridge
    /// (`https://10.88.0.1:<port>`) so pods reach it through the `kubernetes` Service, and the
    /// kwok node is tainted so only pods that tolerate it land there. Needs root and the
    /// binaries of `tests/build-node.sh`; waits for the machine-wide node lock.
    pub real_node: bool,
    /// Have the API server write an audit log of every write request (create, update, patch,
    /// delete; metadata level, at ResponseComplete) to [`ControlPlane::audit_log_path`]: for
    /// a drill that asks who wrote what when. Off by default: the file grows with every write.
    pub audit_log: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            testbin: binaries::testbin_dir(),
            crd_dirs: crds::default_crd_dirs(),
            state_dir: None,
            lifetime: Lifetime::TiedToParent,
            timeout: Duration::from_secs(120),
            real_node: false,
            audit_log: false,
        }
    }
}

/// How long start-up took, measured from the call to [`ControlPlane::start`].
#[derive(Clone, Copy, Debug, Default)]
pub struct StartupTimings {
    /// Until kube-apiserver answered `/readyz` with ok: the API server is usable.
    pub api_ready: Duration,
    /// Until every CRD was Established.
    pub crds_established: Duration,
    /// Until the controller-manager, scheduler and kwok were working (fake node Ready), and
    /// the real node too when one was asked for.
    pub total: Duration,
    /// The real node's parts, when one was started.
    pub node: Option<NodeTimings>,
}

/// A running control plane. Dropping an owned one stops it; the [`shared`] one lives until the
/// test process exits (see `process` for how its children are reaped).
pub struct ControlPlane {
    dir: PathBuf,
    owns_dir: bool,
    kubeconfig: PathBuf,
    server: String,
    ca_pem: String,
    ca: Option<nova_certs::CertificateAuthority>,
    node: Option<Session>,
    config: Option<kube::Config>,
    components: Mutex<Vec<Component>>,
    crds: Vec<String>,
    timings: StartupTimings,
    audit_log: Option<PathBuf>,
    detached: bool,
    failed: bool,
}

/// The control plane shared by every test in this test binary, started on first use.
///
/// A failed start is remembered, so the remaining tests fail fast with the same message
/// instead of each retrying a slow start.
pub async fn shared() -> Result<&'static ControlPlane> {
    static SHARED: OnceCell<std::result::Result<ControlPlane, String>> = OnceCell::const_new();
    shared_in(&SHARED, Options::default()).await
}

/// Like [`shared`], with the machine's real node: one control plane with the node per test
/// binary, started on first use (waiting for the machine-wide node lock) and torn down when
/// the process exits. Don't use it beside another real-node control plane in the same binary.
pub async fn shared_real_node() -> Result<&'static ControlPlane> {
    static SHARED: OnceCell<std::result::Result<ControlPlane, String>> = OnceCell::const_new();
    let options = Options {
        real_node: true,
        ..Options::default()
    };
    shared_in(&SHARED, options).await
}

async fn shared_in(
    cell: &'static OnceCell<std::result::Result<ControlPlane, String>>,
    options: Options,
) -> Result<&'static ControlPlane> {
    let started = cell
        .get_or_init(|| async {
            match ControlPlane::start_with(options).await {
                Ok(cp) => {
                    process::clean_at_exit(&cp.dir);
                    Ok(cp)
                }
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    started
        .as_ref()
        .map_err(|e| Error::SharedStartFailed(e.clone()))
}

impl ControlPlane {
    /// Starts a control plane with the default [`Options`].
    pub async fn start() -> Result<Self> {
        Self::start_with(Options::default()).await
    }

    /// Starts etcd, kube-apiserver, installs the CRDs, then kube-controller-manager,
    /// kube-scheduler and kwok with one fake node, and waits until all of them work.
    pub async fn start_with(options: Options) -> Result<Self> {
        let started = Instant::now();
        // kube's rustls needs a process-wide crypto provider; another caller may have set it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        binaries::check(&options.testbin, binaries::CONTROL_PLANE)?;
        if options.real_node {
            binaries::check(&options.testbin, binaries::NODE)?;
        }
        let (dir, owns_dir) = match &options.state_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(io_err(format!("creating {}", dir.display())))?;
                (dir.clone(), false)
            }
            None => {
                let tmp = tempfile::Builder::new()
                    .prefix("nova-control-plane-")
                    .tempdir()
                    .map_err(io_err("creating the control plane's temporary directory"))?;
                (tmp.keep(), true)
            }
        };
        let mut cp = ControlPlane {
            kubeconfig: dir.join("admin.kubeconfig"),
            dir,
            owns_dir,
            server: String::new(),
            ca_pem: String::new(),
            ca: None,
            node: None,
            config: None,
            components: Mutex::new(Vec::new()),
            crds: Vec::new(),
            timings: StartupTimings::default(),
            audit_log: None,
            detached: false,
            failed: false,
        };
        match cp.boot(&options, started).await {
            Ok(()) => {
                eprintln!(
                    "nova-test-harness: control plane up in {:.1}s (API server usable after \
                     {:.1}s, {} CRDs established after {:.1}s); kubeconfig {}; component logs in {}",
                    cp.timings.total.as_secs_f64(),
                    cp.timings.api_ready.as_secs_f64(),
                    cp.crds.len(),
                    cp.timings.crds_established.as_secs_f64(),
                    cp.kubeconfig.display(),
                    cp.log_dir().display(),
                );
                Ok(cp)
            }
            Err(e) => {
                // Drop stops what was started; the logs stay for the error's reader.
                cp.failed = true;
                Err(e)
            }
        }
    }

    async fn boot(&mut self, options: &Options, started: Instant) -> Result<()> {
        let log_dir = self.log_dir();
        std::fs::create_dir_all(&log_dir)
            .map_err(io_err(format!("creating {}", log_dir.display())))?;
        std::fs::write(self.dir.join(STATE_MARKER), "")
            .map_err(io_err(format!("writing into {}", self.dir.display())))?;
        if options.real_node {
            // First, so the API server can bind the bridge address.
            self.node = Some(Session::begin(options)?);
        }
        let api_ip = if options.real_node {
            node::BRIDGE_IP
        } else {
            "127.0.0.1"
        };
        let [etcd_port, etcd_peer_port] = free_ports("127.0.0.1")?;
        let [api_port] = free_ports(api_ip)?;
        self.server = format!("https://{api_ip}:{api_port}");
        let (pki, ca) = pki::generate(&self.dir.join("pki"))?;
        self.ca_pem = pki.ca_pem.clone();
        self.ca = Some(ca);
        pki::write_kubeconfig(&self.kubeconfig, &self.server, &pki)?;

        let bin = |name: &str| options.testbin.join(name);
        let dir = self.dir.clone();
        let path = |p: &Path| p.display().to_string();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_peer = format!("http://127.0.0.1:{etcd_peer_port}");
        self.spawn(
            options,
            "etcd",
            bin("etcd"),
            vec![
                format!("--data-dir={}", path(&dir.join("etcd"))),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={etcd_peer}"),
                format!("--initial-advertise-peer-urls={etcd_peer}"),
                format!("--initial-cluster=default={etcd_peer}"),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
        )?;
        let mut apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--bind-address={api_ip}"),
            format!("--advertise-address={api_ip}"),
            format!("--secure-port={api_port}"),
            format!("--tls-cert-file={}", path(&pki.apiserver_crt)),
            format!("--tls-private-key-file={}", path(&pki.apiserver_key)),
            format!("--client-ca-file={}", path(&pki.ca_crt)),
            format!("--service-account-issuer={}", self.server),
            format!("--service-account-key-file={}", path(&pki.sa_pub)),
            format!("--service-account-signing-key-file={}", path(&pki.sa_key)),
            format!(
                "--service-cluster-ip-range={}",
                service_cidr(options.real_node)
            ),
            "--authorization-mode=RBAC".into(),
            "--allow-privileged=true".into(),
            // This plugin taints new nodes not-ready until the node-lifecycle controller,
            // which is disabled below, clears it: the kwok node would never take pods.
            "--disable-admission-plugins=TaintNodesByCondition".into(),
            format!("--cert-dir={}", path(&dir.join("apiserver"))),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        if options.real_node {
            // The `kubernetes` Service gets the bridge endpoint (default lease reconciler), and
            // the API server reaches the kubelet on the node IP with a CA-signed certificate.
            apiserver_args.extend([
                "--kubelet-preferred-address-types=InternalIP".into(),
                format!(
                    "--kubelet-client-certificate={}",
                    path(&dir.join("pki/admin.crt"))
                ),
                format!("--kubelet-client-key={}", path(&dir.join("pki/admin.key"))),
            ]);
        } else {
            // Nothing could reach an endpoint; the `kubernetes` Service stays empty.
            apiserver_args.push("--endpoint-reconciler-type=none".into());
        }
        if options.audit_log {
            let (policy, log) = (dir.join("audit-policy.yaml"), log_dir.join("audit.log"));
            std::fs::write(&policy, AUDIT_POLICY)
                .map_err(io_err(format!("writing {}", policy.display())))?;
            apiserver_args.extend([
                format!("--audit-policy-file={}", path(&policy)),
                format!("--audit-log-path={}", path(&log)),
                "--audit-log-format=json".into(),
                "--audit-log-mode=blocking".into(),
            ]);
            self.audit_log = Some(log);
        }
        if options.lifetime == Lifetime::TiedToParent {
            // The guard lives in this process; a detached control plane outlives it.
            // With the real node, its pod subnet and the Service range its kube-proxy maps
            // onto it (a Service-referenced webhook is called at its cluster IP).
            let subnets: &[&str] = if options.real_node {
                &[node::POD_SUBNET, SERVICE_CIDR]
            } else {
                &[]
            };
            apiserver_args.push(egress::apiserver_flag(&dir, subnets)?);
        }
        self.spawn(
            options,
            "kube-apiserver",
            bin("kube-apiserver"),
            apiserver_args,
        )?;

        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| invalid("reading the admin kubeconfig", e))?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| invalid("loading the admin kubeconfig", e))?;
        // Loopback only: never route the API server through an HTTPS_PROXY from the environment.
        config.proxy_url = None;
        config.connect_timeout = Some(Duration::from_secs(5));
        self.config = Some(config);
        let client = self.client()?;

        self.wait_for_readyz(options.timeout).await?;
        self.timings.api_ready = started.elapsed();

        let files = crds::crd_files(&options.crd_dirs)?;
        let (crd_names, ()) = tokio::try_join!(
            crds::install_crds(&client, &files, options.timeout),
            create_node(&client, options.real_node),
        )?;
        self.crds = crd_names;
        self.timings.crds_established = started.elapsed();

        // Started after the CRDs exist so the garbage collector's first discovery already
        // includes them (it otherwise re-syncs only every 30 s).
        let kubeconfig_arg = format!("--kubeconfig={}", path(&self.kubeconfig));
        self.spawn(
            options,
            "kube-controller-manager",
            bin("kube-controller-manager"),
            vec![
                kubeconfig_arg.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                "--secure-port=0".into(),
                format!("--service-account-private-key-file={}", path(&pki.sa_key)),
                format!("--root-ca-file={}", path(&pki.ca_crt)),
                format!("--cluster-signing-cert-file={}", path(&pki.ca_crt)),
                format!("--cluster-signing-key-file={}", path(&pki.ca_key)),
                // kwok renews node leases, but nothing here needs node health handling, and a
                // missed heartbeat must never evict a test's pods.
                "--controllers=*,-node-lifecycle-controller,-taint-eviction-controller".into(),
                "--v=1".into(),
            ],
        )?;
        self.spawn(
            options,
            "kube-scheduler",
            bin("kube-scheduler"),
            vec![
                kubeconfig_arg.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                "--secure-port=0".into(),
                "--v=1".into(),
            ],
        )?;
        let stages = kwok::write_stages(&dir.join("kwok"))?;
        let mut kwok_args = vec![
            kubeconfig_arg,
            // Only its own fake nodes: a real kubelet's node must never be taken over.
            format!(
                "--manage-nodes-with-annotation-selector={}",
                kwok::NODE_ANNOTATION_SELECTOR
            ),
            "--node-ip=127.0.0.1".into(),
            "--cidr=10.244.0.0/16".into(),
            "--node-lease-duration-seconds=40".into(),
        ];
        kwok_args.extend(stages.iter().map(|s| format!("--config={}", path(s))));
        self.spawn(options, "kwok", bin("kwok"), kwok_args)?;

        let nodes: Api<Node> = Api::all(client.clone());
        self.wait("the kwok node to become Ready", options.timeout, || {
            let nodes = nodes.clone();
            async move {
                let node = nodes.get(kwok::NODE_NAME).await.ok()?;
                let ready = node
                    .status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                ready.then_some(())
            }
        })
        .await?;
        // The controller-manager is working once it created the default ServiceAccount.
        self.wait_for_default_service_account(&client, "default", options.timeout)
            .await?;
        if let Some(layout) = self.node.as_ref().map(|s| s.layout.clone()) {
            self.timings.node = Some(self.start_node(options, &layout, started).await?);
        }
        self.timings.total = started.elapsed();
        Ok(())
    }

    fn spawn(
        &self,
        options: &Options,
        name: &str,
        program: PathBuf,
        args: Vec<String>,
    ) -> Result<()> {
        self.spawn_spec(ChildSpec::new(
            name,
            program,
            args,
            self.log_dir().join(format!("{name}.log")),
            options.lifetime,
        ))
    }

    /// Starts a component and records it (for [`check_alive`](Self::check_alive) and stop).
    pub(crate) fn spawn_spec(&self, spec: ChildSpec) -> Result<()> {
        let name = spec.name.clone();
        let component = process::spawn(spec).map_err(io_err(format!("starting {name}")))?;
        self.components
            .lock()
            .map_err(|_| poisoned())?
            .push(component);
        Ok(())
    }

    /// Fails if a component has exited, with the end of its log.
    pub fn check_alive(&self) -> Result<()> {
        let mut components = self.components.lock().map_err(|_| poisoned())?;
        for c in components.iter_mut() {
            if let Some(status) = c.exited() {
                return Err(Error::ComponentExited {
                    component: c.name.clone(),
                    status: status.to_string(),
                    log: c.log.clone(),
                    tail: process::log_tail(&c.log, 30),
                });
            }
        }
        Ok(())
    }

    /// Waits until kube-apiserver answers `/readyz` with ok.
    pub(crate) async fn wait_for_readyz(&self, timeout: Duration) -> Result<()> {
        let client = self.client()?;
        self.wait("kube-apiserver /readyz", timeout, || {
            let client = client.clone();
            async move {
                let req = hyper::Request::get("/readyz").body(Vec::new()).ok()?;
                client
                    .request_text(req)
                    .await
                    .ok()
                    .filter(|b| b.trim() == "ok")
                    .map(|_| ())
            }
        })
        .await
    }

    /// Polls `probe` every 100 ms until it yields a value, failing early if a component dies.
    pub(crate) async fn wait<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive()?;
            if let Some(v) = probe().await {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    after: timeout,
                    detail: format!("; component logs in {}", self.log_dir().display()),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_for_default_service_account(
        &self,
        client: &kube::Client,
        namespace: &str,
        timeout: Duration,
    ) -> Result<()> {
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        self.wait(
            &format!("the default ServiceAccount in namespace {namespace}"),
            timeout,
            || {
                let sas = sas.clone();
                async move { sas.get_opt("default").await.ok().flatten().map(|_| ()) }
            },
        )
        .await
    }

    /// A new client for this control plane.
    ///
    /// Built per call on purpose: every `#[tokio::test]` has its own runtime, and a kube
    /// client's connection tasks die with the runtime that created it, so a client shared
    /// across tests would fail in every test but the first.
    pub fn client(&self) -> Result<kube::Client> {
        let config = self.config.clone().ok_or_else(|| Error::Invalid {
            context: "creating a client".into(),
            message: "the control plane has no API server yet".into(),
        })?;
        kube::Client::try_from(config).map_err(kube_err("creating a kube client"))
    }

    /// The client configuration (admin, loopback, no proxy).
    pub fn kube_config(&self) -> Option<&kube::Config> {
        self.config.as_ref()
    }

    /// Creates a namespace `<prefix>-<unique suffix>` for one test and waits until its
    /// `default` ServiceAccount exists (pods are refused before that).
    pub async fn namespace(&self, prefix: &str) -> Result<String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        let suffix = format!("{:06x}", hasher.finish() & 0xff_ffff);
        let mut base: String = prefix
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        base.truncate(50);
        let base = base.trim_matches('-');
        let name = if base.is_empty() {
            format!("test-{suffix}")
        } else {
            format!("{base}-{suffix}")
        };
        let client = self.client()?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "nova-test-harness": "true" } }
        }))
        .map_err(|e| invalid("building a namespace", e))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(kube_err(format!("creating namespace {name}")))?;
        self.wait_for_default_service_account(&client, &name, Duration::from_secs(60))
            .await?;
        Ok(name)
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server
    }

    /// The admin kubeconfig (certificates embedded).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// PEM of the CA that signed the API server's certificate and the admin client cert.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA itself, for components that need a certificate of their own (the kubelet).
    pub(crate) fn ca(&self) -> Option<&nova_certs::CertificateAuthority> {
        self.ca.as_ref()
    }

    /// The API server's audit log (JSON lines), when [`Options::audit_log`] asked for one.
    pub fn audit_log_path(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Whether this control plane runs the real node.
    pub fn has_real_node(&self) -> bool {
        self.node.is_some()
    }

    /// The state directory (PKI, etcd data, kwok stages, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where each component writes `<component>.log`.
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// Names of the CRDs installed at start-up.
    pub fn crds(&self) -> &[String] {
        &self.crds
    }

    /// How long start-up took.
    pub fn timings(&self) -> StartupTimings {
        self.timings
    }

    /// `(component, pid)` of every started process.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.components
            .lock()
            .map(|c| c.iter().map(|c| (c.name.clone(), c.pid)).collect())
            .unwrap_or_default()
    }

    /// Leaves the (detached) processes running and the state directory in place, returning
    /// the PIDs so the caller can record them for `down`.
    pub fn detach(mut self) -> Vec<(String, u32)> {
        self.detached = true;
        self.pids()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        let pids: Vec<u32> = self.pids().into_iter().map(|(_, pid)| pid).collect();
        process::kill_and_reap(&pids, Duration::from_secs(5));
        process::forget(&pids);
        if let Some(node) = self.node.take()
            && let Err(e) = node.end()
        {
            eprintln!("nova-test-harness: {e}");
        }
        if self.failed {
            eprintln!(
                "nova-test-harness: control plane failed to start; state and logs kept in {}",
                self.dir.display()
            );
        } else if self.owns_dir {
            // Removed (or kept, if a test failed) when the process exits.
            process::clean_at_exit(&self.dir);
        }
    }
}

/// Marks a directory as a control-plane state directory (so `up` may wipe it).
pub(crate) const STATE_MARKER: &str = ".nova-control-plane";

async fn create_node(client: &kube::Client, beside_real_node: bool) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(kwok::node(beside_real_node))
        .map_err(|e| invalid("building the kwok node", e))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(kube_err("creating the kwok node")(e)),
    }
}

/// Picks distinct free ports on `ip` by holding all listeners until every port is chosen.
pub(crate) fn free_ports<const N: usize>(ip: &str) -> Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind((ip, 0)))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io_err("finding free loopback ports"))?;
    let mut ports = [0u16; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(io_err("finding free loopback ports"))?
            .port();
    }
    Ok(ports)
}

pub(crate) fn invalid(context: &str, e: impl std::fmt::Display) -> Error {
    Error::Invalid {
        context: context.to_owned(),
        message: e.to_string(),
    }
}

fn poisoned() -> Error {
    Error::Invalid {
        context: "control plane".into(),
        message: "internal lock poisoned by an earlier panic".into(),
    }
}
