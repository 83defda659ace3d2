//! `nova-webhook` as a local process beside the control plane, for the suites that need the
//! real binary behind the real API server, and the fault drills that kill or re-certify it.
//!
//! The process is started through the harness spawner, so it dies with the test binary however
//! that ends; [`LocalWebhook::kill`] SIGKILLs it (a crash, not a drain) and
//! [`LocalWebhook::restart`] starts it again on the same ports, as a restarted pod behind the
//! same Service would be. The serving pair lives in a [`CertDir`] laid out like a Kubernetes
//! Secret volume, so a rotation is the kubelet's atomic `..data` re-point.

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::process::{self, ChildSpec, Component, Lifetime};
use crate::webhook::{WebhookEndpoint, WebhookRegistration};
use crate::{ControlPlane, Error, Result, io_err};

/// The API group of the Nova kinds.
pub const NOVA_GROUP: &str = "nova.openstack.c5c3.io";

/// The match condition of every webhook of the chart (`templates/admission.yaml`, pinned there
/// by `controller/tests/kwok/chart.rs`): only a CREATE, or an UPDATE that may change the spec,
/// is sent, so metadata-only updates (a finalizer's removal) do not depend on the webhook.
/// `scripts/run.sh` registers the same (checked by `tests/tests/kwok/dev_commands.rs`).
pub const ADMISSION_MATCH_CONDITION: (&str, &str) = (
    "create-or-spec-change",
    "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec",
);

/// A directory holding `tls.crt` and `tls.key` as symlinks through `..data`, which
/// [`CertDir::rotate`] re-points atomically (what the kubelet does on a Secret update).
#[derive(Debug)]
pub struct CertDir {
    root: PathBuf,
    generation: usize,
}

impl CertDir {
    /// Lays out the directory at `root` (created) with the first pair.
    pub fn new(root: &Path, cert_pem: &str, key_pem: &str) -> Result<Self> {
        let mut dir = Self {
            root: root.to_owned(),
            generation: 0,
        };
        dir.rotate(cert_pem, key_pem)?;
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), root.join(file))
                .map_err(io_err(format!("linking {file} in {}", root.display())))?;
        }
        Ok(dir)
    }

    /// Writes the pair into a fresh version directory and re-points `..data` at it in one
    /// rename.
    pub fn rotate(&mut self, cert_pem: &str, key_pem: &str) -> Result<()> {
        self.generation += 1;
        let version = format!("..v{}", self.generation);
        let dir = self.root.join(&version);
        std::fs::create_dir_all(&dir).map_err(io_err(format!("creating {}", dir.display())))?;
        nova_certs::write_file(&dir.join("tls.crt"), cert_pem, false)?;
        nova_certs::write_file(&dir.join("tls.key"), key_pem, true)?;
        let tmp = self.root.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&version, &tmp)
            .map_err(io_err(format!("linking {}", tmp.display())))?;
        std::fs::rename(&tmp, self.root.join("..data"))
            .map_err(io_err("re-pointing ..data".to_owned()))
    }

    /// The certificate path the webhook reads.
    pub fn cert(&self) -> PathBuf {
        self.root.join("tls.crt")
    }

    /// The key path the webhook reads.
    pub fn key(&self) -> PathBuf {
        self.root.join("tls.key")
    }
}

/// A running (or killed) `nova-webhook` process on loopback ports chosen by the OS.
#[derive(Debug)]
pub struct LocalWebhook {
    spec: ChildSpec,
    port: u16,
    metrics_port: u16,
    running: Option<Component>,
}

impl LocalWebhook {
    /// Starts `program` (the test's `CARGO_BIN_EXE_nova-webhook`) serving the pair in
    /// `certs`, its lookups going to `cp`'s API server, logging to `nova-webhook-{label}.log`
    /// among `cp`'s logs, and waits until it reports ready.
    pub async fn start(
        program: &Path,
        certs: &CertDir,
        cert_poll_seconds: u64,
        cp: &ControlPlane,
        label: &str,
    ) -> Result<Self> {
        let certificate = vec![
            format!("--tls-cert-file={}", certs.cert().display()),
            format!("--tls-private-key-file={}", certs.key().display()),
            format!("--cert-poll-seconds={cert_poll_seconds}"),
        ];
        Self::start_with(program, certificate, cp, label).await
    }

    /// Starts `program` with `certificate`, the flags that say where its serving certificate
    /// comes from (files, or the self-signed mode's Secret), as [`LocalWebhook::start`] does.
    pub async fn start_with(
        program: &Path,
        certificate: Vec<String>,
        cp: &ControlPlane,
        label: &str,
    ) -> Result<Self> {
        let kubeconfig = cp.kubeconfig_path();
        let log = cp.log_dir().join(format!("nova-webhook-{label}.log"));
        let (port, metrics_port) = (free_port()?, free_port()?);
        let mut args = vec![
            format!("--bind-address=127.0.0.1:{port}"),
            format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
            format!("--kubeconfig={}", kubeconfig.display()),
        ];
        args.extend(certificate);
        let spec = ChildSpec::new(
            "nova-webhook",
            program.to_owned(),
            args,
            log,
            Lifetime::TiedToParent,
        );
        let mut webhook = Self {
            spec,
            port,
            metrics_port,
            running: None,
        };
        webhook.restart().await?;
        Ok(webhook)
    }

    /// The plain-HTTP port of `/metrics`, `/healthz` and `/readyz`.
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
    }

    /// `https://127.0.0.1:<port>`, for [`WebhookRegistration::url_base`].
    pub fn url_base(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// How many lines of the process's log (over every start) contain `text`.
    pub fn log_lines_containing(&self, text: &str) -> usize {
        std::fs::read_to_string(&self.spec.log)
            .map(|log| log.lines().filter(|l| l.contains(text)).count())
            .unwrap_or(0)
    }

    /// The last `lines` lines of the process's log, for a failure message.
    pub fn log_tail(&self, lines: usize) -> String {
        process::log_tail(&self.spec.log, lines)
    }

    /// Whether its `/readyz` answers 200 now.
    pub async fn ready(&self) -> bool {
        readyz(self.metrics_port).await
    }

    /// SIGKILLs the process and reaps it; the ports are free once this returns.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(mut component) = self.running.take() {
            component.kill().map_err(io_err("killing nova-webhook"))?;
        }
        Ok(())
    }

    /// Starts the process again with the same arguments (killing a running one first) and
    /// waits until its `/readyz` answers 200.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill()?;
        let component =
            process::spawn(self.spec.clone()).map_err(io_err("starting nova-webhook"))?;
        self.running = Some(component);
        self.wait_ready(Duration::from_secs(30)).await
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if readyz(self.metrics_port).await {
                return Ok(());
            }
            if let Some(status) = self.running.as_mut().and_then(Component::exited) {
                return Err(Error::ComponentExited {
                    component: "nova-webhook".into(),
                    status: status.to_string(),
                    log: self.spec.log.clone(),
                    tail: process::log_tail(&self.spec.log, 30),
                });
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "nova-webhook's /readyz".into(),
                    after: timeout,
                    detail: String::new(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for LocalWebhook {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// The four endpoints of the chart (defaulting and validation of Nova and NovaCompute),
/// failing closed, with the chart's match condition, limited to `namespace`, under the
/// configuration name `name`.
pub fn nova_registration(
    name: &str,
    namespace: &str,
    url_base: &str,
    ca_bundle_pem: &str,
) -> WebhookRegistration {
    let endpoint = |prefix: &str, verb: &str, kind: &str, plural: &str| {
        WebhookEndpoint::new(
            format!("{prefix}{kind}.{NOVA_GROUP}"),
            format!("/{verb}-nova-openstack-c5c3-io-v1alpha1-{kind}"),
            NOVA_GROUP,
            &["v1alpha1"],
            &[plural],
        )
        .only_in_namespaces(&[namespace])
        .matching(ADMISSION_MATCH_CONDITION.0, ADMISSION_MATCH_CONDITION.1)
    };
    WebhookRegistration {
        name: name.to_owned(),
        url_base: url_base.to_owned(),
        ca_bundle_pem: ca_bundle_pem.to_owned(),
        mutating: vec![
            endpoint("m", "mutate", "nova", "novas"),
            endpoint("m", "mutate", "novacompute", "novacomputes"),
        ],
        validating: vec![
            endpoint("v", "validate", "nova", "novas"),
            endpoint("v", "validate", "novacompute", "novacomputes"),
        ],
    }
}

/// A loopback port the OS considers free now.
fn free_port() -> Result<u16> {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io_err("choosing a free port"))
}

/// Whether `/readyz` on the plain metrics port answers 200.
async fn readyz(port: u16) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if stream.write_all(request).await.is_err() {
        return false;
    }
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out).await;
    out.starts_with(b"HTTP/1.1 200")
}

/// The `ApiResource` of a Nova kind (`Nova`/`novas`, `NovaCompute`/`novacomputes`).
pub fn nova_resource(kind: &str, plural: &str) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: NOVA_GROUP.into(),
        version: "v1alpha1".into(),
        api_version: format!("{NOVA_GROUP}/v1alpha1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// An example manifest (YAML) as JSON, renamed to `name` in `namespace`.
pub fn example_named(yaml: &str, name: &str, namespace: &str) -> Result<serde_json::Value> {
    let mut value: serde_json::Value =
        serde_saphyr::from_str(yaml).map_err(|e| Error::Invalid {
            context: "an example manifest".into(),
            message: e.to_string(),
        })?;
    value["metadata"] = serde_json::json!({"name": name, "namespace": namespace});
    Ok(value)
}
