//! Fixtures shared by the Nova controller suites that run against the real API server.

#![allow(dead_code)] // each suite uses its own subset

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Secret};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::{Client, ResourceExt};
use nova_api::labels::COMPUTE_CONFIG_MIRROR;
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_controller::clusters::{LocalCluster, Registry, kinds as external};
use nova_controller::metrics::Metrics;
use nova_controller::pipeline::runner::Options;
use nova_controller::{nova, novacompute};
use serde_json::json;

pub mod proof_nova;
pub mod real;
pub mod replica;

pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const API_DB_PASSWORD: &str = "api-db-Pa55:word/1";
pub const CELL_DB_PASSWORD: &str = "cell-db-Pa55@word";
pub const SERVICE_PASSWORD: &str = "service-user-Pa55";
pub const SHARED_SECRET: &str = "metadata-shared-s3cret";
pub const RABBIT_PASSWORD: &str = "rabbit-Pa55";

pub fn example(ns: &str) -> Nova {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/nova.yaml");
    let mut nova: Nova =
        serde_saphyr::from_str(&std::fs::read_to_string(path).expect("sample")).expect("parses");
    nova.metadata.namespace = Some(ns.to_owned());
    nova.spec.secret_store_ref = Some(nova_api::v1alpha1::SecretStoreRefSpec {
        kind: Some(nova_api::v1alpha1::SecretStoreKind::SecretStore),
        name: "vault".into(),
    });
    nova
}

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
    start_on(client, None, registry, None, |c, m, cluster, o| {
        nova::controller::run(c, m, cluster, o, futures::future::pending())
    })
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
    let scope = Some(ns.to_owned());
    start_on(client, scope, registry, targets, |c, m, cluster, o| {
        nova::controller::run(c, m, cluster, o, futures::future::pending())
    })
    .await
}

/// Starts a controller (`run`) in-process on a handle over `registry` watching `scope` (and
/// the target clusters `targets`), once the handle's caches synced; returns the controller's
/// metrics.
async fn start_on<F, Run>(
    client: Client,
    scope: Option<String>,
    registry: Registry,
    targets: Option<Arc<nova_controller::clusters::Fleet>>,
    run: F,
) -> Metrics
where
    F: FnOnce(Client, Metrics, Arc<LocalCluster>, Options) -> Run,
    Run: Future<Output = ()> + Send + 'static,
{
    let metrics = Metrics::new().expect("metrics");
    let cluster = LocalCluster::start(client.clone(), scope.clone(), registry).await;
    cluster.synced().await;
    let options = Options {
        scope,
        concurrency: 2,
        instance: None,
        targets,
    };
    tokio::spawn(run(client, metrics.clone(), cluster, options));
    metrics
}

/// The label the pools of these suites select their kwok nodes by.
pub const POOL_LABEL: &str = "test.nova.c5c3.io/pool";

/// A kwok node with the pool label `pool` and a zone.
pub async fn create_zoned_node(nodes: &Api<Node>, name: &str, pool: &str, zone: &str) {
    nodes
        .create(&PostParams::default(), &zoned_node(name, pool, zone))
        .await
        .expect("create node");
}

/// The kwok node [`create_zoned_node`] creates.
pub fn zoned_node(name: &str, pool: &str, zone: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", POOL_LABEL: pool,
                       "topology.kubernetes.io/zone": zone}
        },
        "status": {
            "allocatable": {"cpu": "1k", "memory": "4Ti", "pods": "1000"},
            "capacity": {"cpu": "1k", "memory": "4Ti", "pods": "1000"}
        }
    }))
    .expect("node")
}

/// The sample pool (`examples/novacompute.yaml`: its resources and the fake driver through
/// extraConfig) in `ns`, selecting the nodes labelled [`POOL_LABEL`]`=selector`; without the
/// sample's traits (no hypervisor operator runs here).
pub fn sample_pool(ns: &str, selector: &str) -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/novacompute.yaml");
    let mut pool: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).expect("sample")).expect("parses");
    pool["metadata"]["namespace"] = json!(ns);
    pool["spec"]["nodeSelector"] = json!({POOL_LABEL: selector});
    let spec = pool["spec"].as_object_mut().expect("spec");
    spec.remove("traits");
    spec.remove("hostTraits");
    pool
}

/// The Nova `nova` pools join, at `keystone` with its service user's `password`, with the
/// status a converged Nova publishes (no Nova controller runs beside the pools), its
/// service-user Secret, its compute contract mirrored (labelled) into the namespace, and an
/// unlabelled hypervisor-operator auth Secret.
pub async fn provide_pool_nova(client: &Client, ns: &str, keystone: &str, password: &str) {
    let mut nova = example(ns);
    nova.spec.keystone_endpoint = keystone.to_owned();
    create_published(client, &nova).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    put_secret(&secrets, "nova-keystone", &[("password", password)]).await;
    put_secret(&secrets, "nova-compute-config", &contract(password)).await;
    put_secret(
        &secrets,
        "nova-hypervisor-operator-auth",
        &[("password", "x")],
    )
    .await;
    mark_mirror(&secrets, "nova-compute-config").await;
}

/// Creates `nova` with the status a converged Nova publishes (its release installed, its
/// contract published), as no Nova controller runs beside the pools.
pub async fn create_published(client: &Client, nova: &Nova) {
    let novas: Api<Nova> = Api::namespaced(client.clone(), &nova.namespace().unwrap_or_default());
    novas
        .create(&PostParams::default(), nova)
        .await
        .expect("create Nova");
    novas
        .patch_status(
            &nova.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "installedRelease": "2026.1",
                "computeConfigSecretRef": {"name": "nova-compute-config"}
            }})),
        )
        .await
        .expect("Nova status");
}

/// The keys of a compute contract whose service user has `password`.
pub fn contract(password: &str) -> [(&str, &str); 3] {
    [
        ("nova-compute.conf", "[DEFAULT]\n"),
        ("transport_url", "rabbit://u:p@rabbit:5672/"),
        ("password", password),
    ]
}

/// Labels a Secret as a ControlPlane's compute-config mirror.
pub async fn mark_mirror(secrets: &Api<Secret>, name: &str) {
    let mirror = json!({"metadata": {"labels": {COMPUTE_CONFIG_MIRROR: "true"}}});
    secrets
        .patch(name, &PatchParams::default(), &Patch::Merge(mirror))
        .await
        .expect("mirror label");
}

/// The (status, reason, message) of a pool condition.
pub async fn pool_condition(
    pools: &Api<NovaCompute>,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let pool = pools.get_opt(name).await.expect("pool")?;
    let c = pool
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status, c.reason, c.message))
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
    let registry = registry
        .register(nova::controller::kinds())
        .register(novacompute::controller::kinds());
    start_on(client, None, registry, targets, |c, m, cluster, o| {
        novacompute::controller::run(c, m, cluster, o, futures::future::pending())
    })
    .await
}

/// A pool of the Nova `nova` selecting `selector`, running the fake driver.
pub fn pool(ns: &str, name: &str, nova: &str, selector: serde_json::Value) -> NovaCompute {
    serde_json::from_value(json!({
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "novaRef": {"name": nova},
            "nodeSelector": selector,
            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "768Mi"}},
            "extraConfig": {"DEFAULT": {"compute_driver": "fake.FakeDriverWithoutFakeNodes"}}
        }
    }))
    .expect("pool")
}

/// A Keystone URL on a loopback port nothing listens on: no OpenStack runs in these suites, so
/// every Aggregates pass fails its login at once (connection refused), without traffic leaving
/// the machine. The returned socket holds the port bound (never listening, never accepting,
/// without `SO_REUSEADDR`, so nothing else can bind it) for as long as the caller keeps it.
pub fn unreachable_keystone() -> (tokio::net::TcpSocket, String) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let port = socket.local_addr().expect("address").port();
    (socket, format!("http://127.0.0.1:{port}/v3"))
}

pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "stringData": data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }))
    .expect("secret")
}

pub async fn put_secret(api: &Api<Secret>, name: &str, data: &[(&str, &str)]) {
    let body = secret(name, data);
    match api.get_opt(name).await.expect("get") {
        Some(mut existing) => {
            existing.data = None;
            existing.string_data = body.string_data;
            api.replace(name, &PostParams::default(), &existing)
                .await
                .expect("replace");
        }
        None => {
            api.create(&PostParams::default(), &body)
                .await
                .expect("create");
        }
    }
}

/// Creates an object of another operator's kind and sets its status.
pub async fn create_with_status(
    api: &Api<DynamicObject>,
    object: serde_json::Value,
    status: serde_json::Value,
) {
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    let name = object.name_any();
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("status");
}

/// Waits until the Nova's SecretsReady condition carries `reason`; returns its message.
pub async fn wait_for_reason(novas: &Api<Nova>, name: &str, reason: &str) -> String {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let nova = novas.get(name).await.expect("nova");
        let condition = nova.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "SecretsReady")
                .cloned()
        });
        if let Some(c) = &condition
            && c.reason == reason
        {
            return c.message.clone();
        }
        assert!(
            Instant::now() < deadline,
            "SecretsReady never became {reason}; last: {condition:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Deletes the Nova `nova` and waits until its finalizer released it.
pub async fn delete_until_gone(novas: &Api<Nova>) {
    novas
        .delete("nova", &kube::api::DeleteParams::default())
        .await
        .expect("delete");
    let deadline = Instant::now() + TIMEOUT;
    while novas.get_opt("nova").await.expect("get").is_some() {
        assert!(
            Instant::now() < deadline,
            "the finalizer was never released"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every event reason published in `ns`, oldest first.
pub async fn event_reasons(client: &Client, ns: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut listed = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items;
    listed.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    listed.into_iter().filter_map(|e| e.reason).collect()
}

/// The (status, reason, message) of one condition of the Nova `nova`, once it exists.
pub async fn condition(novas: &Api<Nova>, type_: &str) -> Option<(String, String, String)> {
    let nova = novas.get("nova").await.expect("nova");
    let c = nova
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status, c.reason, c.message))
}

/// Waits until condition `type_` of the Nova `nova` carries `reason`; returns its message.
pub async fn wait_for(novas: &Api<Nova>, type_: &str, reason: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let current = condition(novas, type_).await;
        if let Some((_, r, message)) = &current
            && r == reason
        {
            return message.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{type_} never became {reason}; last: {current:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn data_of(api: &Api<Secret>, name: &str) -> Option<(String, String)> {
    let secret = api.get_opt(name).await.expect("get")?;
    let (key, value) = secret.data?.into_iter().next()?;
    Some((key, String::from_utf8(value.0).expect("utf8")))
}

pub async fn wait_for_data(api: &Api<Secret>, name: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some((_, value)) = data_of(api, name).await
            && check(&value)
        {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "Secret {name} never reached the expected data"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The resources a Nova pass reads, as the API server's metrics name them (the Nova itself is
/// left out: the tests poll it).
pub const READ_RESOURCES: [&str; 16] = [
    "secrets",
    "configmaps",
    "deployments",
    "services",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "networkpolicies",
    "httproutes",
    "verticalpodautoscalers",
    "secretstores",
    "clustersecretstores",
    "externalsecrets",
    "rabbitmqclusters",
    "databases",
    "users",
    "grants",
];

/// Read verbs that reach the API server (a WATCH is the cache, not a read).
pub const READ_VERBS: [&str; 2] = ["GET", "LIST"];
/// Every resource a Nova pass could write besides the Nova itself (its events included).
pub const WRITTEN_RESOURCES: [&str; 11] = [
    "secrets",
    "configmaps",
    "events",
    "deployments",
    "services",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "networkpolicies",
    "databases",
    "users",
    "grants",
];
/// Write verbs.
pub const WRITE_VERBS: [&str; 5] = ["POST", "PUT", "PATCH", "APPLY", "DELETE"];

/// The API server's own metrics, as text.
pub async fn apiserver_metrics(client: &Client) -> String {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    client
        .request_text(request)
        .await
        .expect("apiserver metrics")
}

/// The API server's request count (`apiserver_request_total`, summed) over the series whose
/// labels pass `selected`.
async fn request_total(client: &Client, selected: impl Fn(&str) -> bool) -> u64 {
    let text = apiserver_metrics(client).await;
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && selected(l))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn has_label(series: &str, label: &str, values: &[&str]) -> bool {
    values.iter().any(|v| {
        series.contains(&format!(",{label}=\"{v}\""))
            || series.contains(&format!("{{{label}=\"{v}\""))
    })
}

/// The API server's count of write requests for one resource and subresource.
pub async fn writes(client: &Client, resource: &str, subresource: &str) -> u64 {
    request_total(client, |l| {
        has_label(l, "resource", &[resource])
            && has_label(l, "subresource", &[subresource])
            && has_label(l, "verb", &WRITE_VERBS)
    })
    .await
}

/// The API server's count of requests with one of `verbs` against one of `resources`, any
/// subresource.
pub async fn requests(client: &Client, resources: &[&str], verbs: &[&str]) -> u64 {
    request_total(client, |l| {
        has_label(l, "resource", resources) && has_label(l, "verb", verbs)
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

/// How often an event was recorded: kube's Recorder records a repeat within its cache window
/// as `series.count` on the same Event (a patch), never as a new Event or in `count`.
pub fn occurrences(event: &Event) -> i32 {
    let series = event.series.as_ref().and_then(|s| s.count).unwrap_or(1);
    series.max(event.count.unwrap_or(1))
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
        let deadline = Instant::now() + TIMEOUT;
        while passes() < passes_before + i + 1 {
            assert!(
                Instant::now() < deadline,
                "touch {i} did not wake the controller"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub fn passes(metrics: &Metrics) -> u64 {
    metrics
        .reconcile_duration
        .with_label_values(&["Secrets"])
        .get_sample_count()
}

/// Creates the Ready SecretStore `vault` the example selects.
pub async fn create_secret_store(client: &Client, ns: &str) {
    let stores =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::secret_store());
    create_with_status(
        &stores,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "vault"},
               "spec": {"provider": {"fake": {"data": []}}}}),
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Valid", "message": "store validated"}]}),
    )
    .await;
}

/// Creates the example's RabbitmqCluster, its status naming the default-user Secret its
/// operator would create.
pub async fn create_rabbitmq_cluster(client: &Client, ns: &str) {
    let rabbits =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::rabbitmq_cluster());
    create_with_status(
        &rabbits,
        json!({"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster", "metadata": {"name": "openstack-rabbitmq"}, "spec": {}}),
        json!({"conditions": [], "defaultUser": {"secretReference": {
            "name": "openstack-rabbitmq-default-user", "namespace": ns,
            "keys": {"username": "username", "password": "password"}}}}),
    )
    .await;
}

/// Creates the RabbitmqCluster's default-user Secret, as its operator would.
pub async fn put_default_user(client: &Client, ns: &str) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    put_secret(
        &secrets,
        "openstack-rabbitmq-default-user",
        &[
            ("username", "default_user"),
            ("password", RABBIT_PASSWORD),
            ("host", "openstack-rabbitmq.svc"),
            ("port", "5672"),
        ],
    )
    .await;
}

/// Creates the example's RabbitmqCluster with its default-user Secret, as its operator would.
pub async fn create_rabbitmq(client: &Client, ns: &str) {
    put_default_user(client, ns).await;
    create_rabbitmq_cluster(client, ns).await;
}

/// Creates every input the Secrets step reads: a Ready SecretStore and the four credential
/// Secrets.
pub async fn provide_credentials(client: &Client, ns: &str) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    create_secret_store(client, ns).await;
    put_secret(
        &secrets,
        "nova-api-db",
        &[("username", "u"), ("password", API_DB_PASSWORD)],
    )
    .await;
    put_secret(
        &secrets,
        "nova-db",
        &[("username", "u"), ("password", CELL_DB_PASSWORD)],
    )
    .await;
    put_secret(&secrets, "nova-keystone", &[("password", SERVICE_PASSWORD)]).await;
    put_secret(
        &secrets,
        "nova-metadata-secret",
        &[("shared_secret", SHARED_SECRET)],
    )
    .await;
}

/// Creates every input the pipeline reads: the credentials, a RabbitmqCluster with its
/// default-user Secret, and a Ready MariaDB cluster with the simulated MariaDB operator.
pub async fn provide_inputs(client: &Client, ns: &str) {
    provide_credentials(client, ns).await;
    create_rabbitmq(client, ns).await;
    provide_database(client, ns).await;
}

/// A Ready MariaDB cluster `openstack-mariadb`, and the simulated MariaDB operator: every
/// Database, User and Grant of `ns` is reported Ready, as its operator would once the schema,
/// user or grant exists. It follows the three kinds with watches (never a LIST after the
/// first), so the steady-state counters see nothing of it once everything is Ready.
pub async fn provide_database(client: &Client, ns: &str) {
    let clusters = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::mariadb());
    create_with_status(
        &clusters,
        json!({"apiVersion": "k8s.mariadb.com/v1alpha1", "kind": "MariaDB",
               "metadata": {"name": "openstack-mariadb"}, "spec": {}}),
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Running",
               "message": "simulated mariadb-operator", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    )
    .await;
    for kind in external::mariadb_children() {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kind);
        tokio::spawn(async move {
            let objects = kube::runtime::watcher(api.clone(), Default::default())
                .default_backoff()
                .applied_objects();
            futures::pin_mut!(objects);
            while let Some(object) = objects.next().await {
                let Ok(object) = object else { continue };
                if external::is_ready(&object) {
                    continue;
                }
                let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                    "reason": "Created", "message": "simulated mariadb-operator: created",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
                // Retried as its operator would requeue: the watch does not deliver the object
                // again, so a write lost to an API server or etcd outage would never be redone.
                let deadline = Instant::now() + TIMEOUT;
                while let Err(e) = api
                    .patch_status(
                        &object.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(status.clone()),
                    )
                    .await
                {
                    let gone = matches!(&e, kube::Error::Api(s) if s.code == 404);
                    if gone || Instant::now() >= deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    }
}

/// The conditions of the pipeline so far, all True once a Nova converged.
pub const CONVERGED: [&str; 16] = [
    "SecretsReady",
    "ComputeConfigReady",
    "DatabaseReady",
    "ConductorReady",
    "SchedulerReady",
    "MetadataReady",
    "ConsoleProxyReady",
    "DeploymentReady",
    "DBArchiveReady",
    "HTTPRouteReady",
    "MetadataHTTPRouteReady",
    "ConsoleHTTPRouteReady",
    "NovaAPIReady",
    "HPAReady",
    "VPAReady",
    "NetworkPolicyReady",
];

/// Plays the Gateway controller (simulated): every HTTPRoute of the Nova `name` without a
/// parent status is marked Accepted by its first parent.
pub async fn accept_routes(client: &Client, ns: &str) {
    let routes = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::http_route());
    for route in routes
        .list(&Default::default())
        .await
        .expect("routes")
        .items
    {
        if route.data["status"]["parents"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
        {
            continue;
        }
        let parent = route.data["spec"]["parentRefs"][0].clone();
        let status = json!({"status": {"parents": [{
            "parentRef": parent,
            "controllerName": "example.com/simulated-gateway",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "message": "accepted by the simulated gateway", "lastTransitionTime": "2026-01-01T00:00:00Z",
                            "observedGeneration": route.metadata.generation.unwrap_or(1)}]
        }]}});
        routes
            .patch_status(
                &route.name_any(),
                &PatchParams::default(),
                &Patch::Merge(status),
            )
            .await
            .expect("route status");
    }
}

/// Waits until every condition of the pipeline so far of the Nova `name` is True (kwok makes
/// the workloads' pods ready, [`accept_routes`] plays the Gateway, the controller probes a
/// [`simulated_nova_api`]); `alive` fails early (a process that exited).
pub async fn wait_converged(
    novas: &Api<Nova>,
    name: &str,
    alive: impl FnMut() -> Result<(), String>,
) {
    wait_true(novas, name, &CONVERGED, alive).await;
}

/// Waits until each of `conditions` of the Nova `name` is True, playing the Gateway meanwhile.
pub async fn wait_true(
    novas: &Api<Nova>,
    name: &str,
    conditions: &[&str],
    mut alive: impl FnMut() -> Result<(), String>,
) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Err(why) = alive() {
            panic!("{why}");
        }
        let nova = novas.get(name).await.expect("nova");
        accept_routes(
            &novas.clone().into_client(),
            &nova.namespace().unwrap_or_default(),
        )
        .await;
        let pending: Vec<String> = conditions
            .iter()
            .filter_map(|t| {
                let c = nova
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == *t));
                match c {
                    Some(c) if c.status == "True" => None,
                    Some(c) => Some(format!("{t}={} {}: {}", c.status, c.reason, c.message)),
                    None => Some(format!("{t} absent")),
                }
            })
            .collect();
        if pending.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the Nova {}/{name} never converged: {pending:#?}",
            nova.namespace().unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The resourceVersions of some Secrets, to tell which ones a change rewrote.
pub async fn versions(api: &Api<Secret>, names: &[&str]) -> Vec<String> {
    let mut versions = Vec::new();
    for name in names {
        versions.push(
            api.get(name)
                .await
                .expect("get")
                .resource_version()
                .unwrap_or_default(),
        );
    }
    versions
}

/// Every planted credential value; none may ever appear in a log, event or condition.
pub const PLANTED: [&str; 5] = [
    API_DB_PASSWORD,
    CELL_DB_PASSWORD,
    SERVICE_PASSWORD,
    SHARED_SECRET,
    RABBIT_PASSWORD,
];
