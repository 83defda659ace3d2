//! The controllers under test, started in-process on the test's runtime once their caches
//! synced, and the probes of their progress (passes counted from their own metrics, a CR woken
//! without a change).

use std::future::Future;
use std::sync::Arc;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_controller::clusters::{KubeCluster, Registry, availability};
use nova_controller::crd_currency::{self, Notice};
use nova_controller::metrics::Metrics;
use nova_controller::pipeline::runner::Options;
use nova_controller::{nova, novacompute};
use serde_json::json;

use crate::fixtures::TIMEOUT;
use crate::logs;
use crate::requests::{self, Requests};
use crate::wait::{Seen, Wait};

/// A simulated nova-api (no pod runs under kwok): on 127.0.0.1, it answers every request with
/// 200 and a version document, the HealthCheck step's target in these suites.
pub async fn simulated_nova_api() -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let body = r#"{"versions": [{"id": "v2.1", "status": "CURRENT"}]}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    address
}

/// Starts the Nova controller in-process, scoped to one namespace, once its caches synced; its
/// API health probes reach a [`simulated_nova_api`].
pub async fn start_controller(client: Client, ns: &str) -> Metrics {
    start_controller_probing(client, ns, simulated_nova_api().await).await
}

/// Starts the Nova controller in-process, scoped to one namespace, once its caches synced; its
/// API health probes connect to `probe` (it runs outside the cluster, where Service names do
/// not resolve).
pub async fn start_controller_probing(
    client: Client,
    ns: &str,
    probe: std::net::SocketAddr,
) -> Metrics {
    start_controller_placing(client, ns, probe, None).await
}

/// Starts the Nova controller in-process over every namespace, once its caches synced; its
/// API health probes connect to `probe`.
pub async fn start_controller_everywhere(client: Client, probe: std::net::SocketAddr) -> Metrics {
    let registry = Registry::default()
        .register(nova::controller::kinds())
        .probe_services_at(Some(probe));
    start_on::<Nova, _, _>(
        client,
        Scope::everywhere(),
        registry,
        None,
        |c, m, cluster, o| nova::controller::run(c, m, cluster, o, futures::future::pending()),
    )
    .await
}

/// Like [`start_controller_probing`], with the registered target clusters `targets`.
pub async fn start_controller_placing(
    client: Client,
    ns: &str,
    probe: std::net::SocketAddr,
    targets: Option<Arc<nova_controller::clusters::Fleet>>,
) -> Metrics {
    let registry = Registry::default()
        .register(nova::controller::kinds())
        .probe_services_at(Some(probe));
    start_on::<Nova, _, _>(
        client,
        Scope::within(ns),
        registry,
        targets,
        |c, m, cluster, o| nova::controller::run(c, m, cluster, o, futures::future::pending()),
    )
    .await
}

/// Where an in-process controller watches: its handle's scope, and the namespace of the CRs it
/// reconciles (None: every namespace).
struct Scope {
    handle: Option<String>,
    crs: Option<String>,
}

impl Scope {
    /// Every namespace, as a cluster-wide install.
    fn everywhere() -> Self {
        Self {
            handle: None,
            crs: None,
        }
    }

    /// One namespace, as an install under `--namespace`.
    fn within(ns: &str) -> Self {
        Self {
            handle: Some(ns.to_owned()),
            crs: Some(ns.to_owned()),
        }
    }

    /// The CRs of one namespace on a cluster-wide handle (whose watches, the Node labels'
    /// among them, exist only there).
    fn crs_in(ns: &str) -> Self {
        Self {
            handle: None,
            crs: Some(ns.to_owned()),
        }
    }
}

/// Starts a controller (`run`) in-process on a handle over `registry` watching `scope` (and
/// the target clusters `targets`), once the handle's caches synced; returns the controller's
/// metrics.
async fn start_on<K, F, Run>(
    client: Client,
    scope: Scope,
    registry: Registry,
    targets: Option<Arc<nova_controller::clusters::Fleet>>,
    run: F,
) -> Metrics
where
    K: kube::Resource<DynamicType = ()>,
    F: FnOnce(Client, Metrics, Arc<KubeCluster>, Options) -> Run,
    Run: Future<Output = ()> + Send + 'static,
{
    logs::capture();
    let metrics = Metrics::new().expect("metrics");
    let crds = crd_currency::check(&client).await;
    crd_currency::report(&metrics, &crds);
    if let Some(targets) = &targets {
        availability::register(&metrics.registry, targets).expect("target-cluster metrics");
    }
    let cluster = KubeCluster::start(client.clone(), scope.handle, registry).await;
    cluster.synced().await;
    let options = Options {
        scope: scope.crs,
        concurrency: 2,
        instance: None,
        targets,
        pass_deadline: nova_controller::pipeline::deadline::PASS_DEADLINE,
        crd: Arc::new(Notice::of::<K>(&crds)),
    };
    tokio::spawn(run(client, metrics.clone(), cluster, options));
    metrics
}

/// Starts the NovaCompute controller in-process, cluster-wide (the Node label watch exists only
/// there), on a handle with both controllers' kinds added to `registry`, once its caches synced.
pub async fn start_novacompute(client: Client, registry: Registry) -> Metrics {
    start_novacompute_placing(client, registry, None).await
}

/// Like [`start_novacompute`], with the registered target clusters `targets`.
pub async fn start_novacompute_placing(
    client: Client,
    registry: Registry,
    targets: Option<Arc<nova_controller::clusters::Fleet>>,
) -> Metrics {
    start_novacompute_on(client, Scope::everywhere(), registry, targets).await
}

/// Like [`start_novacompute`], reconciling the pools in `ns` alone: the handle stays
/// cluster-wide for the Node label watch, and the tests beside it (the real tier's run side by
/// side on one cluster) keep their pools to their own controllers. The controller's requests
/// are counted by its client (the API server's counters count the tests beside it too).
pub async fn start_novacompute_for_pools_in(
    client: Client,
    ns: &str,
    registry: Registry,
) -> (Metrics, Arc<Requests>) {
    let (client, requests) = requests::counted(client);
    let metrics = start_novacompute_on(client, Scope::crs_in(ns), registry, None).await;
    (metrics, requests)
}

async fn start_novacompute_on(
    client: Client,
    scope: Scope,
    registry: Registry,
    targets: Option<Arc<nova_controller::clusters::Fleet>>,
) -> Metrics {
    let registry = registry
        .register(nova::controller::kinds())
        .register(novacompute::controller::kinds());
    start_on::<NovaCompute, _, _>(client, scope, registry, targets, |c, m, cluster, o| {
        novacompute::controller::run(c, m, cluster, o, futures::future::pending())
    })
    .await
}

/// Wakes the CR `name` without changing anything it reads: an annotation edit (to `value`)
/// passes the CR watch's predicate.
pub async fn touch<K>(api: &Api<K>, name: &str, value: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let touch = json!({"metadata": {"annotations": {"test.nova/touch": value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(touch))
        .await
        .expect("touch");
}

/// Wakes the CR `name` five times without changing anything it reads (an annotation edit
/// passes the CR watch's predicate), each time waiting for the pass `passes` counts.
pub async fn touch_five_times<K>(api: &Api<K>, name: &str, label: &str, passes: impl Fn() -> u64)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let passes_before = passes();
    for i in 0..5u64 {
        touch(api, name, &format!("{label}-{i}")).await;
        let wanted = passes_before + i + 1;
        Wait::new(format!("touch {i} to wake the controller"), TIMEOUT)
            .until(|| async {
                match passes() {
                    n if n >= wanted => Seen::Done(()),
                    n => Seen::Saw(format!("{n} passes, {wanted} wanted")),
                }
            })
            .await
            .expect("the touch woke the controller");
    }
}

pub fn passes(metrics: &Metrics) -> u64 {
    metrics
        .reconcile_duration
        .with_label_values(&["Secrets"])
        .get_sample_count()
}

/// A namespace of the binary's shared control plane named after `prefix`, with every input
/// (`provide_inputs`) and the Nova controller running in it, and its Novas.
pub async fn started_namespace(prefix: &str) -> (Client, String, Api<nova_api::v1alpha1::Nova>) {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace(prefix).await.expect("namespace");
    crate::inputs::provide_inputs(&client, &ns).await;
    start_controller(client.clone(), &ns).await;
    let novas = Api::namespaced(client.clone(), &ns);
    (client, ns, novas)
}
