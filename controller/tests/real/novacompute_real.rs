//! NovaCompute pools run for real against the operator's Nova on the real node
//! (`nova_testkit::real`), one Nova for every scenario, with the invariant sampler of issue 13
//! beside them all (`pools::sampler`: no node with servers on it ever loses its
//! nova-compute pod; a compute service is deleted only after its pod is gone).
//!
//! 1. A pool selects the real node and switches nova-compute to the fake driver through
//!    `extraConfig`, the way a user does on a host without KVM. Its DaemonSet pod runs the real
//!    `nova-compute` from the digest-pinned compute image with the operator's contract and pool
//!    ConfigMap; it registers through the real RabbitMQ and conductor and reports to the real
//!    Placement, the controller's `<nova>-discover-hosts` Job maps the host, and the node goes
//!    Pending → Active with `status.installedImage` stamped. Deleting the pool drains the node
//!    (no server on it), releases it, deletes its compute service once the pod is gone, deletes
//!    the aggregates and releases the finalizer.
//! 2. A pool selects three kwok nodes in two zones. kwok runs no container, so the suite PLAYS
//!    each node's pod (`pools::played`: the same pod on the real node as the nova-compute
//!    of the kwok node's name); the Job maps the played hosts, the nodes go Active, and the
//!    real Nova holds one marked aggregate per zone. Once the PLAYED onboarding of
//!    openstack-hypervisor-operator put each host into its zone's aggregate, the pool reports
//!    the aggregates ensured rather than the nodes outside them.
//! 3. Fake-driver servers booted on one of those nodes (the SIMULATED Glance and Neutron of the
//!    harness answer nova's image and port lookups) keep it when it is relabelled: its service
//!    is disabled once, its servers are counted, its pod stays while it drains; once they are
//!    deleted it is released and its service deleted after its pod is gone.
//! 4. A node carrying a server flaps out of the pool and back (relabelled as soon as the pool
//!    drained it, well within 30 s), then its Node object is deleted and created again: each
//!    time it returns `Active` with its service still disabled, the entry carrying Nova's status
//!    and the reason, and ServicesReady `ServicesDisabled` saying so (the pool never enables a
//!    service); no service is deleted while the host carries its server (the sampler). Enabled
//!    in Nova as its admin would, the condition clears.
//! 5. Deleting the zoned pool releases the other two and deletes every aggregate once Nova
//!    dropped the hosts with their services.
//!
//! The Nova calls Keystone and Placement over https (issue 30): its `spec.keystoneEndpoint` is
//! the shared Keystone's https listener, its Placement override the https Placement, and its
//! `spec.tls` names the harness CA that issued their certificate. So every service-user login
//! of nova-api (token validation included), the scheduler and the conductor goes to Keystone
//! over TLS, nova-api, the scheduler and the nova-computes call Placement over TLS, and the
//! pools' own calls verify against the Nova's bundle. (Token validation itself goes to the
//! identity endpoint of the catalog, which names only the http listeners: one region, so that
//! no client of the other tests picks an endpoint it has no CA for.)
//!
//! The node has no Open vSwitch, so its OVN chassis is simulated
//! (`nova_test_harness::simulated::ovn_chassis`). The NovaCompute controller runs in-process
//! outside the cluster, so its OpenStack calls to the Service URLs are routed to the Services'
//! addresses.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::pools::compute::Admin;
use crate::pools::played::{PLAYED_FOR, Player, played_name};
use crate::pools::sampler::Sampler;
use crate::pools::{pool_pods, running};
use k8s_openapi::api::core::v1::{Node, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::{NodePhase, Nova, NovaCompute};
use nova_controller::clusters::Registry;
use nova_controller::metrics::Metrics;
use nova_controller::novacompute::steps::aggregates::MARKER_KEY;
use nova_controller::openstack::trust::CaBundle;
use nova_controller::openstack::trust::Trust;
use nova_controller::openstack::{self as os_client, Credentials, Direct, Endpoints};
use nova_controller::sensitive::Sensitive;
use nova_test_harness::images::{nova_compute_image, pinned};
use nova_test_harness::node::NODE_NAME;
use nova_test_harness::openstack::{OpenStack, keystone_tls_url, placement_tls_url};
use nova_test_harness::simulated;
use nova_testkit::prelude::*;
use nova_testkit::real::*;
use serde_json::json;

/// The pool on the real node.
pub(crate) const REAL_POOL: &str = "pool-a";
/// The pool on the zoned kwok nodes.
const ZONED_POOL: &str = "pool-zones";
/// The zoned kwok nodes and their zones.
const ZONED: [(&str, &str); 3] = [
    ("kwok-z1-a", "zone-1"),
    ("kwok-z1-b", "zone-1"),
    ("kwok-z2-a", "zone-2"),
];
/// The zoned node that carries servers and is relabelled.
const DRAINED: &str = "kwok-z1-b";
/// The zoned node that carries a server, flaps out of the pool and back, and has its Node
/// deleted and created again.
const FLAPPED: (&str, &str) = ("kwok-z2-a", "zone-2");
/// The aggregate every onboarded host joins.
const TENANT_AGGREGATE: &str = "tenant_filter_tests";

/// The address of Service `name`'s ClusterIP at `port`, which the test process reaches through
/// the node's kube-proxy.
async fn cluster_ip(client: &Client, ns: &str, name: &str, port: u16) -> SocketAddr {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let ip = services
        .get(name)
        .await
        .expect("Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    SocketAddr::new(ip.parse().expect("an IP"), port)
}

/// The Service URLs a pool's OpenStack client dials: Keystone and Placement of the shared
/// OpenStack, and the Nova's API Service.
async fn pool_routes(os: &OpenStack, client: &Client, ns: &str) -> BTreeMap<String, SocketAddr> {
    let mut routes = openstack_routes(os).await;
    routes.insert(
        format!("nova.{ns}.svc.cluster.local:8774"),
        cluster_ip(client, ns, "nova", 8774).await,
    );
    routes
}

/// The test's own view of the Nova, as the pool's service user sees it: over https, trusting
/// the harness CA.
fn nova_view(os: &OpenStack, ns: &str, routes: BTreeMap<String, SocketAddr>) -> os_client::Client {
    let ca = CaBundle::from_pem("the harness CA", os.tls_ca_pem().as_bytes()).expect("the CA");
    os_client::Client::new(
        Arc::new(Direct::routed(routes, Trust::system_and(Some(ca)))),
        Endpoints {
            keystone: keystone_tls_url(),
            nova: format!("http://nova.{ns}.svc.cluster.local:8774"),
            placement: Some(placement_tls_url()),
            region: None,
        },
        Credentials {
            username: "nova".into(),
            password: Sensitive::new(os.nova_password()),
            project_name: "service".into(),
            user_domain_name: "Default".into(),
            project_domain_name: "Default".into(),
        },
    )
}

/// The sample pool named `name` in `ns` selecting `selector`, on the digest-pinned compute
/// image.
fn real_pool(ns: &str, name: &str, selector: &str, image: &str) -> NovaCompute {
    let mut pool = sample_pool(ns, selector);
    let (repository, digest) = image.split_once('@').expect("a digest reference");
    pool["metadata"]["name"] = json!(name);
    pool["spec"]["image"] = json!({"repository": repository, "digest": digest});
    serde_json::from_value(pool).expect("a NovaCompute")
}

/// Prints the pool's status, then the namespace's Nova conditions and pods.
async fn dump_pool(client: &Client, ns: &str, name: &str) {
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    if let Ok(pool) = pools.get(name).await {
        eprintln!(
            "pool {name} status: {}",
            serde_json::to_string_pretty(&pool.status).unwrap_or_default()
        );
    }
    dump(client, ns).await;
}

/// Waits until `check` passes on pool `name`; dumps and fails after [`REAL_TIMEOUT`].
pub(crate) async fn wait_real_pool(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&NovaCompute) -> bool,
) -> NovaCompute {
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    match wait_pool_for(&pools, name, what, REAL_TIMEOUT, check).await {
        Ok(pool) => pool,
        Err(timeout) => {
            dump_pool(client, ns, name).await;
            panic!("{timeout}");
        }
    }
}

/// Deletes pool `name` and waits until its finalizers are released.
pub(crate) async fn delete_pool(client: &Client, ns: &str, name: &str) {
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    pools
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete the pool");
    let released = about_pool(&pools, name, format!("pool {name} released"), REAL_TIMEOUT)
        .for_deletion(&pools, name)
        .await;
    if let Err(timeout) = released {
        dump_pool(client, ns, name).await;
        panic!("{timeout}");
    }
}

/// The ledger entry of `node`.
pub(crate) fn entry<'a>(
    pool: &'a NovaCompute,
    node: &str,
) -> Option<&'a nova_api::v1alpha1::NovaComputeNodeStatus> {
    pool.status
        .iter()
        .flat_map(|s| s.nodes.iter())
        .find(|n| n.name == node)
}

/// The ledger phase of `node`.
pub(crate) fn phase(pool: &NovaCompute, node: &str) -> Option<NodePhase> {
    entry(pool, node).map(|n| n.phase)
}

/// The (status, reason) of condition `type_` of the pool.
pub(crate) fn status_reason(pool: &NovaCompute, type_: &str) -> Option<(String, String)> {
    condition_of(pool, type_).map(|(status, reason, _)| (status.to_owned(), reason.to_owned()))
}

/// The events recorded on pool `name`, oldest first, as (reason, occurrences): one event per
/// distinct note, its repeats counted in its series.
pub(crate) async fn pool_events(client: &Client, ns: &str, name: &str) -> Vec<(String, i32)> {
    events_on(client, ns, name)
        .await
        .expect("events")
        .into_iter()
        .map(|(reason, _, n)| (reason, n))
        .collect()
}

/// How often `reason` was recorded.
pub(crate) fn times(events: &[(String, i32)], reason: &str) -> i32 {
    events
        .iter()
        .filter(|(r, _)| r == reason)
        .map(|(_, n)| n)
        .sum()
}

/// Labels (or, with `None`, unlabels) `node` with `key`.
pub(crate) async fn label_node(client: &Client, node: &str, key: &str, value: Option<&str>) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .expect("label the node");
}

/// The Secret of the harness CA the Nova's `spec.tls` names.
const KEYSTONE_CA: &str = "keystone-ca";

/// The real Nova of these tests, calling Keystone and Placement over https (the module's
/// header): the scheduler's periodic host discovery is switched off through `extraConfig` (a
/// reported key), so the pool's `<nova>-discover-hosts` Job is what maps a host (the periodic
/// would race it).
fn pool_nova(ns: &str, image: &str) -> Nova {
    let mut nova = real_nova(ns, image);
    let mut spec = serde_json::to_value(&nova.spec).expect("spec");
    spec["extraConfig"] = json!({"scheduler": {"discover_hosts_in_cells_interval": "-1"}});
    spec["keystoneEndpoint"] = json!(keystone_tls_url());
    spec["endpoints"] = json!({"placement": {"override": placement_tls_url()}});
    spec["tls"] = json!({"caBundleSecretRef": {"name": KEYSTONE_CA}});
    nova.spec = serde_json::from_value(spec).expect("spec");
    nova
}

/// The node's nova and compute images, pinned by digest.
fn images() -> (String, String) {
    (
        pinned(&nova_test_harness::images::nova_image(RELEASE)).expect("the nova image"),
        pinned(&nova_compute_image(RELEASE)).expect("the compute image"),
    )
}

/// The names of the running pods of pool `pool` on `node`, and of the played pods for it.
pub(crate) async fn pods_on(
    client: &Client,
    ns: &str,
    pool: &str,
    node: &str,
) -> (Vec<String>, Vec<String>) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let names = |listed: Vec<Pod>| -> Vec<String> {
        listed
            .iter()
            .filter(|p| running(p))
            .map(ResourceExt::name_any)
            .collect()
    };
    let of_pool = pods
        .list(&on_node.labels(&pool_pods(pool)))
        .await
        .expect("pool pods");
    let played = pods
        .list(&ListParams::default().labels(&format!("{PLAYED_FOR}={node}")))
        .await
        .expect("played pods");
    (names(of_pool.items), names(played.items))
}

/// The compute service Nova registers on `host`, as the pool's service user lists it.
pub(crate) async fn service_of(
    view: &os_client::Client,
    host: &str,
) -> Option<os_client::nova::ComputeService> {
    view.compute_services()
        .await
        .expect("services")
        .into_iter()
        .find(|s| s.host == host)
}

/// How many Services steps the NovaCompute controller has run.
fn services_passes(metrics: &Metrics) -> u64 {
    metrics
        .reconcile_duration
        .with_label_values(&["Services"])
        .get_sample_count()
}

/// What every scenario shares: one Nova, the test's views of it, the controller's metrics.
pub(crate) struct Suite {
    pub(crate) client: Client,
    pub(crate) ns: String,
    pub(crate) compute_image: String,
    pub(crate) view: os_client::Client,
    pub(crate) admin: Admin,
    pub(crate) metrics: Metrics,
}

impl Suite {
    /// A namespace named after `prefix` with the real Nova of these tests Ready, the simulated
    /// OVN chassis, the in-process NovaCompute controller for its pools, and the test's views
    /// of the Nova.
    pub(crate) async fn start(prefix: &str) -> Self {
        let setup = start(prefix).await;
        let (os, client, ns) = (setup.os, setup.client.clone(), setup.ns.clone());
        let (nova_image, compute_image) = images();
        // Before any token reaches nova-api: it caches the catalog of a token it validated.
        os.image_network_stub()
            .await
            .expect("the SIMULATED Glance and Neutron");
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        put_secret(&secrets, KEYSTONE_CA, &[("ca.crt", os.tls_ca_pem())]).await;
        let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
        let t = Instant::now();
        novas
            .create(&PostParams::default(), &pool_nova(&ns, &nova_image))
            .await
            .expect("create Nova");
        wait_nova(&client, &ns, "Ready=True", |n| holds(n, "Ready", "True")).await;
        eprintln!("the Nova is Ready after {:.0}s", t.elapsed().as_secs_f64());

        simulated::ovn_chassis(&client, &ns, &nova_image, REAL_TIMEOUT)
            .await
            .expect("the simulated OVN chassis");
        let routes = pool_routes(os, &client, &ns).await;
        let view = nova_view(os, &ns, routes.clone());
        let (metrics, _) = start_novacompute_for_pools_in(
            client.clone(),
            &ns,
            Registry::default().route_services(routes),
        )
        .await;
        let admin = Admin {
            api: cluster_ip(&client, &ns, "nova", 8774).await,
            token: os.admin_token().await.expect("an admin token"),
        };
        Self {
            client,
            ns,
            compute_image,
            view,
            admin,
            metrics,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_on_the_real_node_run_real_nova_computes_and_never_strand_a_server() {
    let _timed = nova_testkit::stack::timed().await;
    let suite = Suite::start("pool-real").await;
    let (client, ns) = (suite.client.clone(), suite.ns.clone());
    let sampler = Sampler::start(client.clone(), &ns, suite.admin.clone());

    let t = Instant::now();
    a_pool_on_the_real_node_goes_active_and_is_torn_down(&suite).await;
    sampler.assert_held("the real node's pool").await;
    eprintln!(
        "scenario 1 (the real node's pool) took {:.0}s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let player = zoned_kwok_nodes_go_active_with_one_aggregate_per_zone(&suite).await;
    sampler.assert_held("the zoned pool comes up").await;
    eprintln!(
        "scenario 2 (zoned kwok nodes, played) took {:.0}s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    a_relabelled_node_with_servers_drains_and_is_released(&suite).await;
    let with_servers = sampler.assert_held("the drain with servers").await;
    assert!(
        with_servers > 0,
        "the sampler saw the servers on their host"
    );
    eprintln!(
        "scenario 3 (drain with servers) took {:.0}s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    a_node_with_a_server_flaps_and_returns_with_its_service_disabled(&suite).await;
    let with_servers = sampler
        .assert_held("the flap and the re-created Node")
        .await;
    assert!(with_servers > 0, "the sampler saw the server on its host");
    eprintln!(
        "scenario 4 (flap and re-created Node with a server) took {:.0}s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    the_zoned_pool_is_torn_down(&suite, player).await;
    sampler.assert_held("the zoned pool's teardown").await;
    eprintln!(
        "scenario 5 (zoned teardown) took {:.0}s",
        t.elapsed().as_secs_f64()
    );
    drop(sampler);
    finish(&client, &ns).await;
}

/// Labels the real node into a zone of the namespace's own and into the pool [`REAL_POOL`],
/// creates the pool and waits until the node is `Active` and the pool Ready; returns the pool
/// and the zone.
pub(crate) async fn real_node_pool_ready(s: &Suite) -> (NovaCompute, String) {
    let (client, ns) = (&s.client, s.ns.as_str());
    let zone = format!("zone-{ns}");
    label_node(
        client,
        NODE_NAME,
        "topology.kubernetes.io/zone",
        Some(&zone),
    )
    .await;
    label_node(client, NODE_NAME, POOL_LABEL, Some(ns)).await;

    let t = Instant::now();
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    pools
        .create(
            &PostParams::default(),
            &real_pool(ns, REAL_POOL, ns, &s.compute_image),
        )
        .await
        .expect("create the pool");
    let pool = wait_real_pool(client, ns, REAL_POOL, "the real node Active", |p| {
        phase(p, NODE_NAME) == Some(NodePhase::Active)
    })
    .await;
    eprintln!(
        "the real node went Active {:.0}s after the pool was created",
        t.elapsed().as_secs_f64()
    );
    let pool = if status_reason(&pool, "Ready").is_some_and(|(s, _)| s == "True") {
        pool
    } else {
        wait_real_pool(client, ns, REAL_POOL, "the pool Ready", |p| {
            status_reason(p, "Ready").is_some_and(|(s, _)| s == "True")
        })
        .await
    };
    (pool, zone)
}

/// Scenario 1: the real node's pool.
async fn a_pool_on_the_real_node_goes_active_and_is_torn_down(s: &Suite) {
    let (client, ns, view) = (&s.client, s.ns.as_str(), &s.view);
    let (pool, zone) = real_node_pool_ready(s).await;
    let status = pool.status.as_ref().expect("status");
    assert_eq!(
        status.installed_image.as_deref(),
        Some(s.compute_image.as_str())
    );
    let entry = &status.nodes[0];
    assert_eq!(entry.zone.as_deref(), Some(zone.as_str()));
    assert_eq!(
        (
            entry.service_status.as_deref(),
            entry.service_state.as_deref()
        ),
        (Some("enabled"), Some("up")),
        "{entry:?}"
    );
    // AggregatesReady is True either way: AggregatesEnsured from the pass that still saw the
    // node Pending, NodesOutsideZoneAggregate from the next (the pool never adds hosts to
    // aggregates, novacompute.md §4.4).
    assert_eq!(
        status_reason(&pool, "AggregatesReady").map(|(s, _)| s),
        Some("True".to_owned())
    );
    for (type_, reason) in [
        ("ServicesReady", "ServicesUp"),
        ("DaemonSetReady", "DaemonSetReady"),
    ] {
        assert_eq!(
            status_reason(&pool, type_),
            Some(("True".to_owned(), reason.to_owned())),
            "{type_}"
        );
    }
    let events = pool_events(client, ns, REAL_POOL).await;
    assert!(
        times(&events, "HostDiscoveryStarted") >= 1,
        "the discovery Job mapped the host: {events:?}"
    );

    // What the real Nova says: the service of the node is up and its id is the ledger's, the
    // host is mapped, and the zone aggregate carries the pool's marker.
    let services = view.compute_services().await.expect("services");
    let service = services
        .iter()
        .find(|s| s.host == NODE_NAME)
        .expect("the node's compute service");
    assert_eq!(entry.service_id.as_deref(), Some(service.id.as_str()));
    assert!(
        view.mapped_hosts()
            .await
            .expect("hypervisors")
            .contains(NODE_NAME)
    );
    let aggregates = view.aggregates().await.expect("aggregates");
    let marker = format!("{ns}/nova");
    assert!(
        aggregates.iter().any(|a| a.name == zone
            && a.availability_zone == zone
            && a.metadata.get(MARKER_KEY) == Some(&marker)),
        "{aggregates:?}"
    );

    // Deleting the pool drains the node (no server), releases it, deletes its service once the
    // pod is gone, deletes the aggregates and releases the finalizer. (The disable's
    // ComputeServiceDisabled is not asserted: under load nova-api's disable RPC to the compute
    // can outlast the 10 s request bound, and the next pass finds the service already disabled.)
    let t = Instant::now();
    tear_down(s, REAL_POOL, &[NODE_NAME], 1, 2).await;
    eprintln!(
        "the pool was torn down {:.0}s after its deletion",
        t.elapsed().as_secs_f64()
    );
    let (left, _) = pods_on(client, ns, REAL_POOL, NODE_NAME).await;
    assert!(left.is_empty(), "no pod of the pool is left: {left:?}");
    label_node(client, NODE_NAME, POOL_LABEL, None).await;
    label_node(client, NODE_NAME, "topology.kubernetes.io/zone", None).await;
}

/// Deletes pool `name` and checks its teardown in the real Nova: `services` compute services
/// and `aggregates` aggregates deleted (as its events count them), no service of `hosts` left,
/// and no aggregate at all (the aggregates of a deleting pool are no longer required, so the
/// empty ones go; a host leaves its aggregates with its service).
async fn tear_down(s: &Suite, name: &str, hosts: &[&str], services: i32, aggregates: i32) {
    delete_pool(&s.client, &s.ns, name).await;
    let events = pool_events(&s.client, &s.ns, name).await;
    assert_eq!(
        times(&events, "ComputeServiceDeleted"),
        services,
        "{events:?}"
    );
    assert_eq!(times(&events, "AggregateDeleted"), aggregates, "{events:?}");
    let left = s.view.compute_services().await.expect("services");
    assert!(
        !left.iter().any(|s| hosts.contains(&s.host.as_str())),
        "the services of {hosts:?} are deleted: {left:?}"
    );
    assert!(
        s.view.aggregates().await.expect("aggregates").is_empty(),
        "the aggregates went with the last pool"
    );
}

/// Checks the hosts of every aggregate in the real Nova, by aggregate name.
async fn assert_aggregate_hosts(s: &Suite, expected: &[(&str, &[&str])]) {
    let actual: BTreeMap<String, BTreeSet<String>> = s
        .view
        .aggregates()
        .await
        .expect("aggregates")
        .into_iter()
        .map(|a| (a.name, a.hosts.into_iter().collect()))
        .collect();
    let expected: BTreeMap<String, BTreeSet<String>> = expected
        .iter()
        .map(|(name, hosts)| {
            let hosts = hosts.iter().map(|h| (*h).to_owned()).collect();
            ((*name).to_owned(), hosts)
        })
        .collect();
    assert_eq!(actual, expected);
}

/// The zoned nodes, as names.
fn zoned_nodes() -> Vec<&'static str> {
    ZONED.iter().map(|(n, _)| *n).collect()
}

/// Scenario 2: three kwok nodes in two zones, their pods played on the real node.
async fn zoned_kwok_nodes_go_active_with_one_aggregate_per_zone(s: &Suite) -> Player {
    let (client, ns, view) = (&s.client, s.ns.as_str(), &s.view);
    let selector = format!("{ns}-zones");
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, zone) in ZONED {
        create_tainted_zoned_node(&nodes, name, &selector, zone).await;
    }
    let player = Player::start(client.clone(), ns, ZONED_POOL, &zoned_nodes());
    // OnDelete: the release of a node changes the pod template (its term goes), which under
    // RollingUpdate restarts every other pod of the pool (novacompute.md §2.4), played ones too.
    let mut pool = real_pool(ns, ZONED_POOL, &selector, &s.compute_image);
    let mut spec = serde_json::to_value(&pool.spec).expect("spec");
    spec["tolerations"] = fake_node_tolerations();
    spec["updateStrategy"] = json!({"type": "OnDelete"});
    pool.spec = serde_json::from_value(spec).expect("spec");
    let t = Instant::now();
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    pools
        .create(&PostParams::default(), &pool)
        .await
        .expect("create the zoned pool");
    let pool = wait_real_pool(client, ns, ZONED_POOL, "the zoned nodes Active", |p| {
        ZONED
            .iter()
            .all(|(n, _)| phase(p, n) == Some(NodePhase::Active))
    })
    .await;
    eprintln!(
        "the played nodes went Active {:.0}s after the pool was created",
        t.elapsed().as_secs_f64()
    );
    let services: BTreeMap<String, String> = view
        .compute_services()
        .await
        .expect("services")
        .into_iter()
        .map(|s| (s.host, s.id))
        .collect();
    let mapped = view.mapped_hosts().await.expect("hypervisors");
    for (name, zone) in ZONED {
        let e = entry(&pool, name).expect("a ledger entry");
        assert_eq!(e.zone.as_deref(), Some(zone), "{e:?}");
        assert_eq!(e.service_id.as_ref(), services.get(name), "{e:?}");
        assert!(mapped.contains(name), "{name} is mapped: {mapped:?}");
        let (of_pool, played) = pods_on(client, ns, ZONED_POOL, name).await;
        assert_eq!((of_pool.len(), played), (1, vec![played_name(name)]));
    }
    let events = pool_events(client, ns, ZONED_POOL).await;
    assert!(
        times(&events, "HostDiscoveryStarted") >= 1,
        "the discovery Job mapped the played hosts: {events:?}"
    );
    // One marked aggregate per zone (and tenant_filter_tests), with no host yet: the pool never
    // adds one, so its Active nodes are reported outside their zone's aggregate.
    let marker = format!("{ns}/nova");
    let aggregates = view.aggregates().await.expect("aggregates");
    for (name, zone) in [
        ("zone-1", "zone-1"),
        ("zone-2", "zone-2"),
        (TENANT_AGGREGATE, ""),
    ] {
        assert!(
            aggregates.iter().any(|a| a.name == name
                && a.availability_zone == zone
                && a.metadata.get(MARKER_KEY) == Some(&marker)
                && a.hosts.is_empty()),
            "{name}: {aggregates:?}"
        );
    }
    assert_eq!(aggregates.len(), 3, "{aggregates:?}");
    wait_real_pool(client, ns, ZONED_POOL, "NodesOutsideZoneAggregate", |p| {
        status_reason(p, "AggregatesReady")
            == Some(("True".into(), "NodesOutsideZoneAggregate".into()))
    })
    .await;
    // The PLAYED onboarding of openstack-hypervisor-operator: each host into its zone's
    // aggregate and tenant_filter_tests. The pool then reports the aggregates ensured.
    let ids: BTreeMap<String, i64> = aggregates.iter().map(|a| (a.name.clone(), a.id)).collect();
    for (name, zone) in ZONED {
        s.admin.onboard(ids[zone], name).await;
        s.admin.onboard(ids[TENANT_AGGREGATE], name).await;
    }
    let pool = wait_real_pool(client, ns, ZONED_POOL, "AggregatesEnsured", |p| {
        status_reason(p, "AggregatesReady") == Some(("True".into(), "AggregatesEnsured".into()))
    })
    .await;
    assert_aggregate_hosts(
        s,
        &[
            ("zone-1", &["kwok-z1-a", "kwok-z1-b"]),
            ("zone-2", &["kwok-z2-a"]),
            (TENANT_AGGREGATE, &zoned_nodes()),
        ],
    )
    .await;
    let status = pool.status.as_ref().expect("status");
    assert_eq!(
        status.installed_image.as_deref(),
        Some(s.compute_image.as_str())
    );
    assert_eq!(
        status_reason(&pool, "Ready"),
        Some(("True".into(), "AllReady".into()))
    );
    player
}

/// Scenario 3: fake-driver servers keep a relabelled node until they are gone.
async fn a_relabelled_node_with_servers_drains_and_is_released(s: &Suite) {
    let (client, ns, view) = (&s.client, s.ns.as_str(), &s.view);
    s.admin.ensure_flavor().await;
    let mut servers = Vec::new();
    for i in 0..2 {
        servers.push(
            s.admin
                .boot(&format!("drain-{i}"), "zone-1", DRAINED, REAL_TIMEOUT)
                .await,
        );
    }
    assert_eq!(view.count_servers(DRAINED).await.expect("count"), 2);

    label_node(client, DRAINED, POOL_LABEL, None).await;
    let pool = wait_draining(s, ZONED_POOL, DRAINED, 2).await;
    assert_eq!(
        status_reason(&pool, "ServicesReady"),
        Some(("True".into(), "Draining".into()))
    );
    let reason = format!("c5c3.io: leaving NovaCompute {ns}/{ZONED_POOL}");
    let service = service_of(view, DRAINED)
        .await
        .expect("the drained node's service");
    assert_eq!(
        (service.status.as_str(), service.disabled_reason.as_str()),
        ("disabled", reason.as_str())
    );
    // Held over the passes that follow (the sampler watches in between): still Draining with
    // both servers counted, its pod and played pod in place, the service disabled once.
    let seen = services_passes(&s.metrics);
    Wait::new("two further Services passes", REAL_TIMEOUT)
        .until(|| async { services_passes(&s.metrics) >= seen + 2 })
        .await
        .expect("the passes");
    let (of_pool, played) = still_draining(s, ZONED_POOL, DRAINED, 2).await;
    assert_eq!((of_pool.len(), played), (1, vec![played_name(DRAINED)]));
    let events = pool_events(client, ns, ZONED_POOL).await;
    assert_eq!(times(&events, "ComputeServiceDisabled"), 1, "{events:?}");

    // Without servers the node is released: Releasing, its pod goes, then its service (the
    // sampler fails the test if the service went first).
    s.admin.delete_servers(&servers, REAL_TIMEOUT).await;
    released_once(s, ZONED_POOL, DRAINED).await;
    // Nova dropped the host from its aggregates with the service.
    assert_aggregate_hosts(
        s,
        &[
            ("zone-1", &["kwok-z1-a"]),
            ("zone-2", &["kwok-z2-a"]),
            (TENANT_AGGREGATE, &["kwok-z1-a", "kwok-z2-a"]),
        ],
    )
    .await;
}

/// Waits until pool `name` released `node` (its entry gone), recording every phase the entry
/// passes through and how long after the call it was first seen; dumps and fails with them
/// after [`REAL_TIMEOUT`].
pub(crate) async fn phases_until_released(
    s: &Suite,
    name: &str,
    node: &str,
) -> Vec<(Option<NodePhase>, f64)> {
    let pools: Api<NovaCompute> = Api::namespaced(s.client.clone(), &s.ns);
    let since = Instant::now();
    let seen_phases = std::sync::Mutex::new(Vec::new());
    let released = about_pool(&pools, name, format!("{node} released"), REAL_TIMEOUT)
        .until(|| async {
            let pool = pools.get(name).await?;
            let now = phase(&pool, node);
            let mut phases = seen_phases.lock().expect("phases");
            if phases.last().map(|(p, _)| p) != Some(&now) {
                phases.push((now, since.elapsed().as_secs_f64()));
            }
            Ok::<_, anyhow::Error>(now.is_none().then_some(()))
        })
        .await;
    let phases = seen_phases.into_inner().expect("phases");
    if let Err(timeout) = released {
        dump_pool(&s.client, &s.ns, name).await;
        panic!("{timeout}; phases: {phases:?}");
    }
    phases
}

/// Waits until pool `name` released `node` and checks it went through `Releasing`, its pod is
/// gone and its compute service deleted, disabled and deleted once (by the pool's events);
/// returns the phases it went through, each with when it was first seen.
pub(crate) async fn released_once(
    s: &Suite,
    name: &str,
    node: &str,
) -> Vec<(Option<NodePhase>, f64)> {
    let phases = phases_until_released(s, name, node).await;
    assert!(
        phases.iter().any(|(p, _)| *p == Some(NodePhase::Releasing)),
        "{phases:?}"
    );
    let events = pool_events(&s.client, &s.ns, name).await;
    assert_eq!(times(&events, "ComputeServiceDisabled"), 1, "{events:?}");
    assert_eq!(times(&events, "ComputeServiceDeleted"), 1, "{events:?}");
    assert!(
        service_of(&s.view, node).await.is_none(),
        "the released node's service is deleted"
    );
    let (of_pool, _) = pods_on(&s.client, &s.ns, name, node).await;
    assert!(of_pool.is_empty(), "{of_pool:?}");
    phases
}

/// Checks that `node` is still Draining with `servers` counted on pool `name`; returns the
/// names of its running pods of the pool and of its played pods.
pub(crate) async fn still_draining(
    s: &Suite,
    name: &str,
    node: &str,
    servers: i32,
) -> (Vec<String>, Vec<String>) {
    let pools: Api<NovaCompute> = Api::namespaced(s.client.clone(), &s.ns);
    let pool = pools.get(name).await.expect("pool");
    let e = entry(&pool, node).expect("the draining entry");
    assert_eq!(
        (e.phase, e.instances),
        (NodePhase::Draining, Some(servers)),
        "{e:?}"
    );
    pods_on(&s.client, &s.ns, name, node).await
}

/// Waits until `node` is Draining with `servers` counted on pool `name`; returns the pool.
pub(crate) async fn wait_draining(s: &Suite, name: &str, node: &str, servers: i32) -> NovaCompute {
    wait_real_pool(
        &s.client,
        &s.ns,
        name,
        &format!("{node} Draining with {servers} servers"),
        |p| {
            entry(p, node)
                .is_some_and(|e| e.phase == NodePhase::Draining && e.instances == Some(servers))
        },
    )
    .await
}

/// Waits until `node` is back `Active` on the zoned pool and ServicesReady says its service
/// stays disabled; checks the entry carries Nova's status and `reason`, the message names the
/// node and the reason, and Nova still disables the service (the pool enabled nothing).
async fn assert_back_disabled(s: &Suite, node: &str, reason: &str) {
    let pool = wait_real_pool(
        &s.client,
        &s.ns,
        ZONED_POOL,
        &format!("{node} Active with ServicesReady=False/ServicesDisabled"),
        |p| {
            phase(p, node) == Some(NodePhase::Active)
                && status_reason(p, "ServicesReady")
                    == Some(("False".into(), "ServicesDisabled".into()))
        },
    )
    .await;
    let e = entry(&pool, node).expect("the entry");
    assert_eq!(
        (e.service_status.as_deref(), e.disabled_reason.as_deref()),
        (Some("disabled"), Some(reason)),
        "{e:?}"
    );
    let (_, _, message) = condition_of(&pool, "ServicesReady").expect("ServicesReady");
    assert!(
        message.contains(&format!("{node} (disabled reason \"{reason}\")"))
            && message.contains("the pool never enables a service"),
        "{message}"
    );
    let service = service_of(&s.view, node)
        .await
        .expect("the service is still registered");
    assert_eq!(
        (service.status.as_str(), service.disabled_reason.as_str()),
        ("disabled", reason)
    );
}

/// Scenario 4: a node carrying a server flaps out of the pool and back, then its Node is
/// deleted and created again; it returns with its service disabled, and says so.
async fn a_node_with_a_server_flaps_and_returns_with_its_service_disabled(s: &Suite) {
    let (client, ns) = (&s.client, s.ns.as_str());
    let (node, zone) = FLAPPED;
    let selector = format!("{ns}-zones");
    let reason = format!("c5c3.io: leaving NovaCompute {ns}/{ZONED_POOL}");
    let server = s.admin.boot("flap-0", zone, node, REAL_TIMEOUT).await;

    // Out of the pool and, as soon as the pool drained it, back in.
    label_node(client, node, POOL_LABEL, None).await;
    let out = Instant::now();
    wait_draining(s, ZONED_POOL, node, 1).await;
    label_node(client, node, POOL_LABEL, Some(&selector)).await;
    eprintln!(
        "{node} was out of the pool for {:.1}s",
        out.elapsed().as_secs_f64()
    );
    assert_back_disabled(s, node, &reason).await;

    // The Node object deleted and created again (a kubelet re-registering it).
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete(node, &DeleteParams::default())
        .await
        .expect("delete the Node");
    let gone = Instant::now();
    Wait::new(format!("the Node {node} deleted"), REAL_TIMEOUT)
        .for_deletion(&nodes, node)
        .await
        .expect("the Node is deleted");
    wait_draining(s, ZONED_POOL, node, 1).await;
    create_tainted_zoned_node(&nodes, node, &selector, zone).await;
    eprintln!(
        "the Node {node} was gone for {:.1}s",
        gone.elapsed().as_secs_f64()
    );
    assert_back_disabled(s, node, &reason).await;
    Wait::new(format!("{node}'s pod and played pod back"), REAL_TIMEOUT)
        .until(|| async {
            let (of_pool, played) = pods_on(client, ns, ZONED_POOL, node).await;
            of_pool.len() == 1 && played == [played_name(node)]
        })
        .await
        .expect("the pool's term brings the pod back");
    let events = pool_events(client, ns, ZONED_POOL).await;
    assert_eq!(times(&events, "ComputeServiceDeleted"), 1, "{events:?}");

    // Its admin enables the service: the condition clears at the next pass.
    let id = service_of(&s.view, node).await.expect("the service").id;
    let enabled = s
        .admin
        .call(
            "PUT",
            &format!("/os-services/{id}"),
            Some(json!({"status": "enabled"})),
        )
        .await
        .expect("the compute API answers");
    assert_eq!(enabled.status, 200, "enabling the service");
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    touch(&pools, ZONED_POOL, "enabled").await;
    wait_real_pool(client, ns, ZONED_POOL, "ServicesReady=True", |p| {
        status_reason(p, "ServicesReady").is_some_and(|(status, _)| status == "True")
    })
    .await;
    s.admin.delete_servers(&[server], REAL_TIMEOUT).await;
}

/// Scenario 5: deleting the zoned pool releases its nodes and deletes the aggregates.
async fn the_zoned_pool_is_torn_down(s: &Suite, player: Player) {
    let (client, ns) = (&s.client, s.ns.as_str());
    // Both zones and tenant_filter_tests; the services of all three nodes (one in scenario 3).
    tear_down(s, ZONED_POOL, &zoned_nodes(), 3, 3).await;
    player.stop(client, ns, REAL_TIMEOUT).await;
    let nodes: Api<Node> = Api::all(client.clone());
    for name in zoned_nodes() {
        nodes
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete a zoned node");
    }
}
