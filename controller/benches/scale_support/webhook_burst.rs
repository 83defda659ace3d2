//! The admission cost at a create burst: N Nova creates, at each in-flight level, into a
//! namespace the real `nova-webhook` (release build, a child process) is registered for, and
//! into one it is not, alternating, for a few rounds. Measured per burst: the latency of each
//! create client-side; from the API server's /metrics, the p99 of POST novas
//! (`apiserver_request_duration_seconds`) and, per webhook, the time the API server spent
//! calling it (`apiserver_admission_webhook_admission_duration_seconds`); from the webhook's
//! /metrics, its own handler time and the connections the API server opened to it; the CPU
//! seconds of both processes. In flight 1
//! is how `kubectl apply -f dir/` sends them (the per-request cost); the higher levels add
//! queueing on a shared machine.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use nova_api::v1alpha1::Nova;
use nova_test_harness::{
    Canary, CanaryExpectation, WebhookEndpoint, WebhookRegistration, register_webhooks,
    unregister_webhooks, wait_for_webhook,
};

use super::controller_process::{free_port, usage_of};
use super::prometheus::{self, Sample};
use nova_testkit::fixtures::{example, own_schemas};

const GROUP: &str = "nova.openstack.c5c3.io";

/// The two endpoints: (configuration name, the API server's `type` label, nova-webhook path).
pub const ENDPOINTS: [(&str, &str, &str); 2] = [
    (
        "mnova.nova.openstack.c5c3.io",
        "admit",
        "/mutate-nova-openstack-c5c3-io-v1alpha1-nova",
    ),
    (
        "vnova.nova.openstack.c5c3.io",
        "validating",
        "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
    ),
];

/// What the bursts are: creates per burst, the in-flight levels, rounds of each.
pub struct Settings {
    pub creates: usize,
    pub in_flight: Vec<usize>,
    pub rounds: usize,
}

/// A histogram's change over one burst; the quantiles are bucket-interpolated, the mean and the
/// share within 5 ms exact.
pub struct Latency {
    pub count: f64,
    pub mean: f64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    /// The share of observations at or below 5 ms (a bucket bound of both histograms read).
    pub within_5ms: Option<f64>,
}

impl Latency {
    /// Histogram `name` over the series `keep` accepts, from `before` to `after`.
    fn between(before: &str, after: &str, name: &str, keep: impl Fn(&Sample) -> bool) -> Self {
        let buckets = prometheus::minus(
            &prometheus::buckets(after, name, &keep),
            &prometheus::buckets(before, name, &keep),
        );
        let delta = |suffix: &str| {
            let series = format!("{name}{suffix}");
            prometheus::total(after, &series, &keep) - prometheus::total(before, &series, &keep)
        };
        let count = delta("_count");
        Self {
            count,
            mean: delta("_sum") / count.max(1.0),
            p50: prometheus::quantile(&buckets, 0.5),
            p99: prometheus::quantile(&buckets, 0.99),
            within_5ms: prometheus::share_within(&buckets, 0.005),
        }
    }
}

/// One webhook as the API server and nova-webhook saw it over one burst.
pub struct Admission {
    pub name: &'static str,
    pub kind: &'static str,
    /// The API server's call of the webhook, round trip included.
    pub apiserver: Latency,
    /// nova-webhook's handler (`nova_webhook_request_duration_seconds`).
    pub handler: Latency,
}

/// One burst.
pub struct Burst {
    pub in_flight: usize,
    pub round: usize,
    /// Whether nova-webhook was registered for the namespace.
    pub webhook: bool,
    pub creates: usize,
    pub elapsed: Duration,
    /// Client-side p50 and p99, seconds.
    pub client_p50: f64,
    pub client_p99: f64,
    /// The API server's p99 for POST novas over the burst (bucket-interpolated), seconds.
    pub server_p99: Option<f64>,
    /// Per webhook; empty without it.
    pub admissions: Vec<Admission>,
    /// Admission connections nova-webhook accepted during the burst, by ALPN, and open after it.
    pub connections: Option<(Vec<(String, f64)>, f64)>,
    /// CPU seconds over the burst: the API server's (`process_cpu_seconds_total`) and
    /// nova-webhook's (/proc/PID/stat).
    pub apiserver_cpu: f64,
    pub webhook_cpu: Option<f64>,
    /// /proc/loadavg after the burst.
    pub load: String,
}

/// The nova-webhook child process, killed on drop, with its metrics port.
struct Webhook {
    child: Child,
    metrics: u16,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let webhook = Webhook { child, metrics };
    let [mutating, validating] = ENDPOINTS.map(|(name, _, path)| {
        WebhookEndpoint::new(name, path, GROUP, &["v1alpha1"], &["novas"]).only_in_namespaces(&[ns])
    });
    let registration = WebhookRegistration {
        name: format!("nova-webhook-{ns}"),
        url_base: format!("https://127.0.0.1:{port}"),
        ca_bundle_pem: bundle.ca_pem.clone(),
        mutating: vec![mutating],
        validating: vec![validating],
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

/// Admission connections nova-webhook accepted between two scrapes, by ALPN; and open now.
fn connections(before: &str, after: &str) -> (Vec<(String, f64)>, f64) {
    const NAME: &str = "nova_webhook_connections_total";
    let accepted = prometheus::samples(after, NAME)
        .into_iter()
        .map(|s| {
            let alpn = s.label("alpn").to_owned();
            let earlier = prometheus::total(before, NAME, |b| b.label("alpn") == alpn);
            (alpn, s.value - earlier)
        })
        .collect();
    let open = prometheus::total(after, "nova_webhook_open_connections", |_| true);
    (accepted, open)
}

/// `creates` Novas into `ns`, `in_flight` at once, then deleted again.
async fn burst(
    client: &Client,
    ns: &str,
    in_flight: usize,
    round: usize,
    creates: usize,
    webhook: Option<&Webhook>,
) -> Burst {
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    let scrape_webhook = async || match webhook {
        Some(w) => prometheus::scrape(w.metrics).await,
        None => String::new(),
    };
    let webhook_cpu = || webhook.map(|w| usage_of(w.child.id()).cpu_seconds);
    let (apiserver_before, webhook_before, webhook_cpu_before) = (
        nova_testkit::apiserver::apiserver_metrics(client).await,
        scrape_webhook().await,
        webhook_cpu(),
    );
    let started = Instant::now();
    let mut latencies: Vec<f64> = futures::stream::iter((0..creates).map(|i| {
        let (novas, mut nova) = (novas.clone(), example(ns));
        nova.metadata.name = Some(format!("burst-{i:04}"));
        let nova = own_schemas(nova);
        async move {
            let sent = Instant::now();
            novas.create(&PostParams::default(), &nova).await?;
            Ok::<f64, kube::Error>(sent.elapsed().as_secs_f64())
        }
    }))
    .buffer_unordered(in_flight)
    .try_collect()
    .await
    .expect("burst create");
    let elapsed = started.elapsed();
    let (apiserver_after, webhook_after, webhook_cpu_after) = (
        nova_testkit::apiserver::apiserver_metrics(client).await,
        scrape_webhook().await,
        webhook_cpu(),
    );
    let apiserver_cpu = |text: &str| prometheus::total(text, "process_cpu_seconds_total", |_| true);
    let load = crate::load();
    novas
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete the burst's Novas");
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| {
        latencies[((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    let create = Latency::between(
        &apiserver_before,
        &apiserver_after,
        "apiserver_request_duration_seconds",
        |s| s.label("verb") == "POST" && s.label("resource") == "novas",
    );
    let admissions = match webhook {
        None => Vec::new(),
        Some(_) => ENDPOINTS
            .iter()
            .map(|&(name, kind, path)| Admission {
                name,
                kind,
                apiserver: Latency::between(
                    &apiserver_before,
                    &apiserver_after,
                    "apiserver_admission_webhook_admission_duration_seconds",
                    |s| s.label("name") == name,
                ),
                handler: Latency::between(
                    &webhook_before,
                    &webhook_after,
                    "nova_webhook_request_duration_seconds",
                    |s| s.label("webhook") == path,
                ),
            })
            .collect(),
    };
    Burst {
        in_flight,
        round,
        webhook: webhook.is_some(),
        creates,
        elapsed,
        client_p50: at(0.5),
        client_p99: at(0.99),
        server_p99: create.p99,
        admissions,
        connections: webhook.map(|_| connections(&webhook_before, &webhook_after)),
        apiserver_cpu: apiserver_cpu(&apiserver_after) - apiserver_cpu(&apiserver_before),
        webhook_cpu: webhook_cpu_after
            .zip(webhook_cpu_before)
            .map(|(a, b)| a - b),
        load,
    }
}

/// The bursts, for each round and in-flight level one without the webhook, then one with it
/// (alternating, so a change of the machine's load hits both). Both namespaces are created
/// here.
pub async fn compare(
    client: &Client,
    cp: &nova_test_harness::ControlPlane,
    settings: &Settings,
) -> Vec<Burst> {
    let off = cp.namespace("burst-off").await.expect("namespace");
    let on = cp.namespace("burst-on").await.expect("namespace");
    let dir = tempfile::tempdir().expect("webhook dir");
    let webhook = start_webhook(client, cp.kubeconfig_path(), &on, dir.path()).await;
    let mut bursts = Vec::new();
    for round in 1..=settings.rounds {
        for &in_flight in &settings.in_flight {
            for (ns, webhook) in [(&off, None), (&on, Some(&webhook))] {
                let b = burst(client, ns, in_flight, round, settings.creates, webhook).await;
                println!(
                    "  burst round {round}, {in_flight} in flight, webhook {}: client p50 {:.1} ms, p99 {:.1} ms in {:.1} s; load {}",
                    b.webhook,
                    b.client_p50 * 1000.0,
                    b.client_p99 * 1000.0,
                    b.elapsed.as_secs_f64(),
                    b.load
                );
                bursts.push(b);
            }
        }
    }
    unregister_webhooks(client, &format!("nova-webhook-{on}"))
        .await
        .expect("unregister nova-webhook");
    drop(webhook);
    bursts
}
