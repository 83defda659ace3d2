//! The admission cost at a create burst: N Nova creates, `parallelism` at once, into a
//! namespace the real `nova-webhook` (release build, a child process) is registered for, and
//! into one it is not; latency measured client-side per create and, from the API server's
//! `apiserver_request_duration_seconds` for POST novas, as a bucket-interpolated p99.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, PostParams};
use nova_api::v1alpha1::Nova;
use nova_test_harness::{
    Canary, CanaryExpectation, WebhookEndpoint, WebhookRegistration, register_webhooks,
    unregister_webhooks, wait_for_webhook,
};

use super::super::nova_support::example;
use super::controller_process::free_port;
use super::prometheus;

const GROUP: &str = "nova.openstack.c5c3.io";

/// One burst's latencies.
pub struct Burst {
    pub creates: usize,
    pub elapsed: Duration,
    /// Client-side p50 and p99, seconds.
    pub client_p50: f64,
    pub client_p99: f64,
    /// The API server's p99 for POST novas over the burst (bucket-interpolated), seconds.
    pub server_p99: Option<f64>,
}

/// The nova-webhook child process, killed on drop.
struct Webhook(Child);

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The release `nova-webhook` beside the bench's `nova-controller` (built once when missing;
/// `NOVA_WEBHOOK_BIN` names another).
fn webhook_binary() -> PathBuf {
    if let Ok(path) = std::env::var("NOVA_WEBHOOK_BIN") {
        return path.into();
    }
    let controller = Path::new(env!("CARGO_BIN_EXE_nova-controller"));
    let binary = controller.with_file_name("nova-webhook");
    if !binary.exists() {
        let target = controller
            .parent()
            .and_then(Path::parent)
            .expect("target dir");
        let built = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--release",
                "-p",
                "nova-webhook",
                "--bin",
                "nova-webhook",
            ])
            .arg("--target-dir")
            .arg(target)
            .status()
            .expect("cargo build nova-webhook");
        assert!(built.success(), "building nova-webhook failed");
    }
    binary
}

/// Starts nova-webhook and registers it for `ns` alone; returns once the API server calls it.
async fn start_webhook(client: &Client, kubeconfig: &Path, ns: &str, dir: &Path) -> Webhook {
    let bundle = nova_certs::ServingBundle::generate("nova-webhook", &["127.0.0.1"])
        .expect("serving bundle");
    bundle.write_to_dir(dir).expect("certificates");
    let (port, metrics) = (free_port(), free_port());
    let log = std::fs::File::create(dir.join("nova-webhook.log")).expect("webhook log");
    let child = Command::new(webhook_binary())
        .arg(format!("--bind-address=127.0.0.1:{port}"))
        .arg(format!("--metrics-bind-address=127.0.0.1:{metrics}"))
        .arg(format!("--tls-cert-file={}", dir.join("tls.crt").display()))
        .arg(format!(
            "--tls-private-key-file={}",
            dir.join("tls.key").display()
        ))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .stdout(Stdio::from(log.try_clone().expect("webhook log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start nova-webhook");
    let webhook = Webhook(child);
    let endpoint = |name: &str, kind: &str, plural: &str| {
        WebhookEndpoint::new(
            name,
            format!("/{kind}-nova-openstack-c5c3-io-v1alpha1-nova"),
            GROUP,
            &["v1alpha1"],
            &[plural],
        )
        .only_in_namespaces(&[ns])
    };
    let registration = WebhookRegistration {
        name: format!("nova-webhook-{ns}"),
        url_base: format!("https://127.0.0.1:{port}"),
        ca_bundle_pem: bundle.ca_pem.clone(),
        mutating: vec![endpoint("mnova.nova.openstack.c5c3.io", "mutate", "novas")],
        validating: vec![endpoint(
            "vnova.nova.openstack.c5c3.io",
            "validate",
            "novas",
        )],
    };
    register_webhooks(client, &registration)
        .await
        .expect("register nova-webhook");
    let mut canary = serde_json::to_value(example(ns)).expect("canary");
    canary["metadata"]["name"] = "canary-api".into();
    wait_for_webhook(
        client,
        &Canary {
            resource: kube::api::ApiResource::erase::<Nova>(&()),
            namespace: Some(ns.to_owned()),
            object: canary,
            expect: CanaryExpectation::DeniedWith("name must not end in \"-api\"".into()),
        },
        Duration::from_secs(60),
    )
    .await
    .expect("the API server calls nova-webhook");
    webhook
}

/// The API server's POST novas duration histogram now.
async fn create_histogram(client: &Client) -> Vec<(f64, f64)> {
    let text = crate::nova_support::apiserver_metrics(client).await;
    prometheus::buckets(&text, "apiserver_request_duration_seconds", |s| {
        s.label("verb") == "POST" && s.label("resource") == "novas"
    })
}

/// `creates` Novas into `ns`, `parallelism` at once.
async fn burst(client: &Client, ns: &str, creates: usize, parallelism: usize) -> Burst {
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    let before = create_histogram(client).await;
    let started = Instant::now();
    let mut latencies: Vec<f64> = futures::stream::iter((0..creates).map(|i| {
        let (novas, mut nova) = (novas.clone(), example(ns));
        nova.metadata.name = Some(format!("burst-{i:04}"));
        async move {
            let sent = Instant::now();
            novas.create(&PostParams::default(), &nova).await?;
            Ok::<f64, kube::Error>(sent.elapsed().as_secs_f64())
        }
    }))
    .buffer_unordered(parallelism)
    .try_collect()
    .await
    .expect("burst create");
    let elapsed = started.elapsed();
    let after = create_histogram(client).await;
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| {
        latencies[((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    Burst {
        creates,
        elapsed,
        client_p50: at(0.5),
        client_p99: at(0.99),
        server_p99: prometheus::quantile(&prometheus::minus(&after, &before), 0.99),
    }
}

/// The two bursts: (without the webhook, with it). Both namespaces are created here.
pub async fn compare(
    client: &Client,
    cp: &nova_test_harness::ControlPlane,
    creates: usize,
    parallelism: usize,
) -> (Burst, Burst) {
    let off = cp.namespace("burst-off").await.expect("namespace");
    let on = cp.namespace("burst-on").await.expect("namespace");
    let dir = tempfile::tempdir().expect("webhook dir");
    let webhook = start_webhook(client, cp.kubeconfig_path(), &on, dir.path()).await;
    let without = burst(client, &off, creates, parallelism).await;
    let with = burst(client, &on, creates, parallelism).await;
    unregister_webhooks(client, &format!("nova-webhook-{on}"))
        .await
        .expect("unregister nova-webhook");
    drop(webhook);
    (without, with)
}
