//! A NovaCompute pool run for real against the operator's Nova on the real node
//! (`nova_support::real`): the pool selects the real node and switches nova-compute to the fake
//! driver through `extraConfig`, the way a user does on a host without KVM. Its DaemonSet pod
//! runs the real `nova-compute` from the digest-pinned compute image with the operator's
//! contract and pool ConfigMap; it registers through the real RabbitMQ and conductor and
//! reports to the real Placement, the controller's `<nova>-discover-hosts` Job maps the host,
//! and the node goes Pending → Active with `status.installedImage` stamped. Deleting the pool
//! drains the node (no server on it), releases it, deletes its compute service once the pod is
//! gone, deletes the aggregates and releases the finalizer.
//!
//! The node has no Open vSwitch, so its OVN chassis is simulated
//! (`nova_test_harness::simulated::ovn_chassis`). The NovaCompute controller runs in-process
//! outside the cluster, so its OpenStack calls to the Service URLs are routed to the Services'
//! addresses.

mod nova_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::{NodePhase, Nova, NovaCompute};
use nova_controller::clusters::Registry;
use nova_controller::novacompute::aggregates::MARKER_KEY;
use nova_controller::openstack::{self as os_client, Credentials, Direct, Endpoints};
use nova_controller::sensitive::Sensitive;
use nova_support::real::*;
use nova_support::*;
use nova_test_harness::images::{nova_compute_image, pinned};
use nova_test_harness::node::NODE_NAME;
use nova_test_harness::openstack::{OpenStack, keystone_url};
use nova_test_harness::simulated;
use serde_json::json;

/// The pool's name.
const POOL: &str = "pool-a";

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

/// The test's own view of the Nova, as the pool's service user sees it.
fn nova_view(os: &OpenStack, ns: &str, routes: BTreeMap<String, SocketAddr>) -> os_client::Client {
    os_client::Client::new(
        Arc::new(Direct::routed(routes)),
        Endpoints {
            keystone: keystone_url(),
            nova: format!("http://nova.{ns}.svc.cluster.local:8774"),
            placement: None,
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

/// The sample pool in `ns` selecting `selector`, on the digest-pinned compute image.
fn real_pool(ns: &str, selector: &str, image: &str) -> NovaCompute {
    let mut pool = sample_pool(ns, selector);
    let (repository, digest) = image.split_once('@').expect("a digest reference");
    pool["spec"]["image"] = json!({"repository": repository, "digest": digest});
    serde_json::from_value(pool).expect("a NovaCompute")
}

/// Prints the pool's status, then the namespace's Nova conditions and pods.
async fn dump_pool(client: &Client, ns: &str) {
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    if let Ok(pool) = pools.get(POOL).await {
        eprintln!(
            "pool status: {}",
            serde_json::to_string_pretty(&pool.status).unwrap_or_default()
        );
    }
    dump(client, ns).await;
}

/// Waits until `check` passes on the pool; dumps and fails after [`REAL_TIMEOUT`].
async fn wait_pool(
    client: &Client,
    ns: &str,
    what: &str,
    check: impl Fn(&NovaCompute) -> bool,
) -> NovaCompute {
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + REAL_TIMEOUT;
    loop {
        let pool = pools.get(POOL).await.expect("pool");
        if check(&pool) {
            return pool;
        }
        if Instant::now() > deadline {
            dump_pool(client, ns).await;
            panic!("{what} not within {REAL_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Deletes the pool and waits until its finalizers are released.
async fn delete_pool(client: &Client, ns: &str) {
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    pools
        .delete(POOL, &DeleteParams::default())
        .await
        .expect("delete the pool");
    let deadline = Instant::now() + REAL_TIMEOUT;
    while pools.get_opt(POOL).await.expect("get").is_some() {
        if Instant::now() > deadline {
            dump_pool(client, ns).await;
            panic!("the pool was never released");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The ledger phase of `node`.
fn phase(pool: &NovaCompute, node: &str) -> Option<NodePhase> {
    pool.status
        .iter()
        .flat_map(|s| s.nodes.iter())
        .find(|n| n.name == node)
        .map(|n| n.phase)
}

/// The (status, reason) of condition `type_` of the pool.
fn pool_condition(pool: &NovaCompute, type_: &str) -> Option<(String, String)> {
    pool.status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// The events recorded on the pool, oldest first, as (reason, occurrences): the recorder keeps
/// one event per reason and counts repeats in its series.
async fn pool_events(client: &Client, ns: &str) -> Vec<(String, i32)> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut listed = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={POOL}")))
        .await
        .expect("events")
        .items;
    listed.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    listed
        .into_iter()
        .filter_map(|e| {
            let repeats = e.series.as_ref().and_then(|s| s.count).unwrap_or(1);
            Some((e.reason?, repeats.max(e.count.unwrap_or(1))))
        })
        .collect()
}

/// How often `reason` was recorded.
fn occurrences(events: &[(String, i32)], reason: &str) -> i32 {
    events
        .iter()
        .filter(|(r, _)| r == reason)
        .map(|(_, n)| n)
        .sum()
}

/// Labels (or, with `None`, unlabels) `node` with `key`.
async fn label_node(client: &Client, node: &str, key: &str, value: Option<&str>) {
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

/// The real Nova of these tests: the scheduler's periodic host discovery is switched off
/// through `extraConfig` (a reported key), so the pool's `<nova>-discover-hosts` Job is what
/// maps a host (the periodic would race it).
fn pool_nova(ns: &str, image: &str) -> Nova {
    let mut nova = real_nova(ns, image);
    let mut spec = serde_json::to_value(&nova.spec).expect("spec");
    spec["extraConfig"] = json!({"scheduler": {"discover_hosts_in_cells_interval": "-1"}});
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

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_on_the_real_node_runs_the_real_nova_compute_and_goes_active() {
    let _serial = SERIAL.lock().await;
    let setup = start("pool-real").await;
    let (os, client, ns) = (setup.os, setup.client.clone(), setup.ns.clone());
    let (nova_image, compute_image) = images();
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
    start_novacompute(client.clone(), Registry::default().route_services(routes)).await;
    let zone = format!("zone-{ns}");
    label_node(
        &client,
        NODE_NAME,
        "topology.kubernetes.io/zone",
        Some(&zone),
    )
    .await;
    label_node(&client, NODE_NAME, POOL_LABEL, Some(&ns)).await;

    let t = Instant::now();
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), &ns);
    pools
        .create(&PostParams::default(), &real_pool(&ns, &ns, &compute_image))
        .await
        .expect("create the pool");
    let pool = wait_pool(&client, &ns, "the real node Active", |p| {
        phase(p, NODE_NAME) == Some(NodePhase::Active)
    })
    .await;
    eprintln!(
        "the real node went Active {:.0}s after the pool was created",
        t.elapsed().as_secs_f64()
    );
    let pool = if pool_condition(&pool, "Ready").is_some_and(|(s, _)| s == "True") {
        pool
    } else {
        wait_pool(&client, &ns, "the pool Ready", |p| {
            pool_condition(p, "Ready").is_some_and(|(s, _)| s == "True")
        })
        .await
    };
    let status = pool.status.as_ref().expect("status");
    assert_eq!(
        status.installed_image.as_deref(),
        Some(compute_image.as_str())
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
        pool_condition(&pool, "AggregatesReady").map(|(s, _)| s),
        Some("True".to_owned())
    );
    for (type_, reason) in [
        ("ServicesReady", "ServicesUp"),
        ("DaemonSetReady", "DaemonSetReady"),
    ] {
        assert_eq!(
            pool_condition(&pool, type_),
            Some(("True".to_owned(), reason.to_owned())),
            "{type_}"
        );
    }
    let events = pool_events(&client, &ns).await;
    assert!(
        occurrences(&events, "HostDiscoveryStarted") >= 1,
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
    // pod is gone, deletes the aggregates and releases the finalizer.
    let t = Instant::now();
    delete_pool(&client, &ns).await;
    eprintln!(
        "the pool was torn down {:.0}s after its deletion",
        t.elapsed().as_secs_f64()
    );
    // The aggregates of a deleting pool are no longer required, so the empty ones go at once;
    // the service goes once the pod is gone. (The disable's ComputeServiceDisabled is not
    // asserted: under load nova-api's disable RPC to the compute can outlast the 10 s request
    // bound, and the next pass finds the service already disabled.)
    let events = pool_events(&client, &ns).await;
    assert_eq!(
        occurrences(&events, "AggregateDeleted"),
        2,
        "the zone and tenant_filter_tests: {events:?}"
    );
    assert_eq!(
        occurrences(&events, "ComputeServiceDeleted"),
        1,
        "{events:?}"
    );
    let services = view.compute_services().await.expect("services");
    assert!(
        !services.iter().any(|s| s.host == NODE_NAME),
        "the node's service is deleted: {services:?}"
    );
    assert!(
        view.aggregates().await.expect("aggregates").is_empty(),
        "the aggregates went with the last pool"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let left: Vec<String> = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=novacompute"))
        .await
        .expect("pods")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert!(left.is_empty(), "no pod of the pool is left: {left:?}");
    label_node(&client, NODE_NAME, POOL_LABEL, None).await;
    label_node(&client, NODE_NAME, "topology.kubernetes.io/zone", None).await;
    finish(&client, &ns).await;
}
