//! The NovaCompute controller against the real API server, with kwok nodes carrying zone
//! labels as the pool's nodes (kwok plays their DaemonSet pods: they become Ready, no container
//! runs). No OpenStack runs here: the Nova's Keystone is a loopback port nothing listens on,
//! so every pass that reaches the Aggregates row reports `ComputeAPIError` and ends there (the
//! Services and Traits rows, and the teardown, are driven against the real services in
//! `openstack_client`). In order: a waiting pool and a converged pool cost no write and no read
//! beyond the one live Node list a pass makes; a pool comes up (ledger, ConfigMap, DaemonSet
//! with its affinity, ready pods, installed image); a relabelled node leaves and keeps its pod;
//! two pools selecting the same node give exactly one Conflict; a deleting pool keeps its
//! finalizer while its OpenStack calls fail, and every draining node's pod.
//!
//! One test on its own control plane: the controller runs cluster-wide (the Node label watch
//! exists only there), and the request counters must see no other test's passes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::{NodePhase, Nova, NovaCompute};
use nova_controller::clusters::Registry;
use nova_controller::metrics::Metrics;
use nova_testkit::prelude::{
    POOL_LABEL, READ_VERBS, WRITE_VERBS, about_pool, absence_window, create_zoned_node,
    occurrences, pool, pool_condition, pool_reason_for, provide_pool_nova, quiet_window, requests,
    start_novacompute, touch_five_times, unreachable_keystone, wait_pool_for, writes,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

async fn label_node(nodes: &Api<Node>, name: &str, labels: Value) {
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .expect("label node");
}

fn passes(metrics: &Metrics) -> u64 {
    metrics
        .reconcile_duration
        .with_label_values(&["NovaRef"])
        .get_sample_count()
}

async fn wait_for(pools: &Api<NovaCompute>, name: &str, type_: &str, reason: &str) -> String {
    pool_reason_for(pools, name, type_, reason, WAIT)
        .await
        .expect("the pool's condition")
}

/// Waits until `check` holds for the pool.
async fn wait_until(
    pools: &Api<NovaCompute>,
    name: &str,
    what: &str,
    check: impl Fn(&NovaCompute) -> bool,
) -> NovaCompute {
    wait_pool_for(pools, name, what, WAIT, check)
        .await
        .expect("the pool's state")
}

fn ledger(pool: &NovaCompute) -> Vec<(String, NodePhase, Option<String>)> {
    pool.status
        .iter()
        .flat_map(|s| &s.nodes)
        .map(|e| (e.name.clone(), e.phase, e.conflicts_with.clone()))
        .collect()
}

fn entry(name: &str, phase: NodePhase, with: Option<&str>) -> (String, NodePhase, Option<String>) {
    (name.to_owned(), phase, with.map(str::to_owned))
}

/// The node-selector terms of a DaemonSet.
fn terms(ds: &DaemonSet) -> Value {
    serde_json::to_value(ds).expect("ds")["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .clone()
}

/// The nodes the pool's DaemonSet pods run on.
async fn pod_nodes(client: &Client, ns: &str, pool: &str) -> Vec<String> {
    pods_by_node(client, ns, pool).await.into_keys().collect()
}

/// The uid of the pool's DaemonSet pod on each node (a pod deleted and recreated has a new one).
async fn pods_by_node(client: &Client, ns: &str, pool: &str) -> BTreeMap<String, String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let selector = format!(
        "app.kubernetes.io/name=novacompute,app.kubernetes.io/instance={pool},app.kubernetes.io/component=nova-compute"
    );
    pods.list(&ListParams::default().labels(&selector))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.spec?.node_name?, p.metadata.uid?)))
        .collect()
}

/// What a pool pass could write, and what it reads besides the Node list.
#[derive(Debug, PartialEq, Eq)]
struct Cost {
    writes: u64,
    reads: u64,
    node_lists: u64,
    node_gets: u64,
}

async fn cost_now(client: &Client) -> Cost {
    let written = [
        "secrets",
        "configmaps",
        "events",
        "daemonsets",
        "verticalpodautoscalers",
    ];
    let read = [
        "secrets",
        "configmaps",
        "daemonsets",
        "verticalpodautoscalers",
        "novas",
    ];
    Cost {
        writes: writes(client, "daemonsets", "").await
            + requests(client, &written[..3], &WRITE_VERBS).await
            + requests(client, &written[4..], &WRITE_VERBS).await
            + writes(client, "novacomputes", "status").await,
        reads: requests(client, &read, &READ_VERBS).await,
        node_lists: requests(client, &["nodes"], &["LIST"]).await,
        node_gets: requests(client, &["nodes"], &["GET"]).await,
    }
}

/// Wakes the pool five times without changing anything it reads (an annotation edit passes the
/// watch's predicate) and returns what the passes cost, and how many ran.
async fn five_passes(
    client: &Client,
    pools: &Api<NovaCompute>,
    metrics: &Metrics,
    name: &str,
) -> (Cost, u64) {
    quiet_window(Duration::from_secs(3)).await;
    let before = cost_now(client).await;
    let passes_before = passes(metrics);
    touch_five_times(pools, name, name, || passes(metrics)).await;
    quiet_window(Duration::from_secs(2)).await;
    let after = cost_now(client).await;
    let ran = passes(metrics) - passes_before;
    let cost = Cost {
        writes: after.writes - before.writes,
        reads: after.reads - before.reads,
        node_lists: after.node_lists - before.node_lists,
        node_gets: after.node_gets - before.node_gets,
    };
    println!("{name}: {ran} passes cost {cost:?}");
    (cost, ran)
}

async fn node_conflict_events(client: &Client, ns: &str, pool: &str) -> usize {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let listed = events.list(&ListParams::default()).await.expect("events");
    listed
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("NodeConflict"))
        .filter(|e| e.involved_object.name.as_deref() == Some(pool))
        .map(|e| occurrences(e) as usize)
        .sum()
}

async fn remove_finalizers(pools: &Api<NovaCompute>, name: &str) {
    pools
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("drop finalizers");
}

/// Deletes a pool whose Aggregates call fails: the failed call holds the drain finalizer
/// (`novacompute.md` §4.6); then the manual escape, the finalizer removed by hand.
async fn deletion_held(pools: &Api<NovaCompute>, name: &str) {
    pools
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete");
    wait_until(pools, name, "deleting", |p| {
        p.metadata.deletion_timestamp.is_some()
    })
    .await;
    wait_for(pools, name, "AggregatesReady", "ComputeAPIError").await;
    absence_window(Duration::from_secs(3)).await;
    let held = pools.get_opt(name).await.expect("get").expect("held");
    assert!(
        held.finalizers()
            .contains(&"nova.openstack.c5c3.io/compute-drain".to_owned()),
        "{name}: the drain finalizer holds"
    );
    remove_finalizers(pools, name).await;
    wait_gone(pools, name).await;
}

async fn wait_gone(pools: &Api<NovaCompute>, name: &str) {
    about_pool(pools, name, format!("{name} released"), WAIT)
        .for_deletion(pools, name)
        .await
        .expect("the pool is gone");
}

#[tokio::test(flavor = "multi_thread")]
async fn node_pools_on_kwok_nodes() {
    // Its own control plane: the counters it reads are the whole server's.
    let cp = &nova_test_harness::ControlPlane::start()
        .await
        .expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("pools").await.expect("namespace");
    let nodes: Api<Node> = Api::all(client.clone());
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), &ns);
    let (_keystone_port, keystone) = unreachable_keystone();
    provide_pool_nova(&client, &ns, &keystone, "service-Pa55").await;
    create_zoned_node(&nodes, "pool-node-1", "a", "az1").await;
    create_zoned_node(&nodes, "pool-node-2", "a", "az2").await;
    let metrics = start_novacompute(client.clone(), Registry::default()).await;

    // Waiting: a pool of a Nova that does not exist costs nothing.
    pools
        .create(
            &PostParams::default(),
            &pool(&ns, "waiting", "missing", json!({POOL_LABEL: "none"})),
        )
        .await
        .expect("create");
    let message = wait_for(&pools, "waiting", "NovaReady", "NovaNotFound").await;
    assert_eq!(message, format!("Nova {ns}/missing not found"));
    let (waiting, _) = five_passes(&client, &pools, &metrics, "waiting").await;
    assert_eq!(
        waiting,
        Cost {
            writes: 0,
            reads: 0,
            node_lists: 0,
            node_gets: 0
        },
        "a waiting pool is reconciled without writes and without uncached reads"
    );
    pools
        .delete("waiting", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&pools, "waiting").await;

    // A pool comes up on its two nodes.
    pools
        .create(
            &PostParams::default(),
            &pool(&ns, "pool-a", "nova", json!({POOL_LABEL: "a"})),
        )
        .await
        .expect("create");
    let message = wait_for(&pools, "pool-a", "DaemonSetReady", "DaemonSetReady").await;
    assert_eq!(
        message,
        "The nova-compute DaemonSet runs a ready pod on 2 nodes"
    );
    let up = pools.get("pool-a").await.expect("pool");
    assert!(
        up.finalizers()
            .contains(&"nova.openstack.c5c3.io/compute-drain".to_owned())
    );
    let status = up.status.clone().expect("status");
    assert_eq!(
        ledger(&up),
        [
            entry("pool-node-1", NodePhase::Pending, None),
            entry("pool-node-2", NodePhase::Pending, None)
        ]
    );
    assert_eq!(
        status
            .nodes
            .iter()
            .map(|e| e.zone.clone())
            .collect::<Vec<_>>(),
        [Some("az1".to_owned()), Some("az2".to_owned())]
    );
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.number_ready,
            status.installed_image.as_deref()
        ),
        (2, 2, Some("ghcr.io/c5c3/nova-compute:2026.1"))
    );
    for (type_, reason) in [
        ("NovaReady", "NovaResolved"),
        ("NodesReady", "NodesResolved"),
        ("ConfigReady", "ConfigRendered"),
        ("VPAReady", "VPANotRequired"),
        ("ExtraConfigHealthy", "NoOwnedKeysOverridden"),
    ] {
        let (s, r, _) = pool_condition(&pools, "pool-a", type_).await.expect(type_);
        assert_eq!((s.as_str(), r.as_str()), ("True", reason), "{type_}");
    }
    let message = wait_for(&pools, "pool-a", "AggregatesReady", "ComputeAPIError").await;
    assert!(
        message.starts_with("authenticating: "),
        "the unreachable Keystone: {message}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let listed = config_maps
        .list(&ListParams::default().labels("cobaltcore.c5c3.io/config-base=pool-a-config"))
        .await
        .expect("config maps");
    assert_eq!(listed.items.len(), 1);
    let conf = &listed.items[0].data.as_ref().expect("data")["compute-pool.conf"];
    assert!(
        conf.contains("compute_driver = fake.FakeDriverWithoutFakeNodes"),
        "{conf}"
    );
    assert_eq!(listed.items[0].immutable, Some(true));
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), &ns);
    let ds = daemonsets
        .get("pool-a-nova-compute")
        .await
        .expect("daemonset");
    // The selector's term, and one per held node: a pod stays whatever its node's labels say
    // until a pass releases the node.
    let held = |node: &str| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]});
    assert_eq!(
        terms(&ds),
        json!([
            {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": ["a"]}]},
            held("pool-node-1"),
            held("pool-node-2")
        ])
    );
    assert_eq!(
        pod_nodes(&client, &ns, "pool-a").await,
        ["pool-node-1", "pool-node-2"]
    );

    // Converged: no write; the one live Node list per pass is the only read.
    let (converged, ran) = five_passes(&client, &pools, &metrics, "pool-a").await;
    assert_eq!(
        converged,
        Cost {
            writes: 0,
            reads: 0,
            node_lists: ran,
            node_gets: 0
        },
        "a converged pool writes nothing and reads only its Node list, live"
    );

    // A relabelled node leaves: Draining, held by a term of its own, its pod kept (the same
    // pod: the DaemonSet controller deletes the pod of a node that stops matching the
    // affinity at once, before any pass could add a term).
    let before = pods_by_node(&client, &ns, "pool-a").await;
    label_node(&nodes, "pool-node-2", json!({POOL_LABEL: "elsewhere"})).await;
    wait_until(&pools, "pool-a", "drains pool-node-2", |p| {
        ledger(p).contains(&entry("pool-node-2", NodePhase::Draining, None))
    })
    .await;
    assert_eq!(
        pool_condition(&pools, "pool-a", "NodesReady")
            .await
            .map(|c| c.2),
        Some("1 nodes selected, 1 leaving".to_owned())
    );
    let ds = daemonsets
        .get("pool-a-nova-compute")
        .await
        .expect("daemonset");
    assert_eq!(
        terms(&ds)[2],
        held("pool-node-2"),
        "the draining node's term stays"
    );
    absence_window(Duration::from_secs(2)).await;
    assert_eq!(
        pods_by_node(&client, &ns, "pool-a").await,
        before,
        "a draining node keeps its nova-compute pod"
    );

    // Two pools selecting the same node: exactly one Conflict, on the younger pool.
    label_node(
        &nodes,
        "pool-node-1",
        json!({"test.nova.c5c3.io/chassis": "true"}),
    )
    .await;
    pools
        .create(
            &PostParams::default(),
            &pool(
                &ns,
                "pool-b",
                "nova",
                json!({"test.nova.c5c3.io/chassis": "true"}),
            ),
        )
        .await
        .expect("create");
    let message = wait_for(&pools, "pool-b", "NodesReady", "NodeConflict").await;
    assert_eq!(
        message,
        "Selected nodes another NovaCompute of the same Nova holds: pool-node-1 (held by pool-a)"
    );
    let b = pools.get("pool-b").await.expect("pool-b");
    assert_eq!(
        ledger(&b),
        [entry("pool-node-1", NodePhase::Conflict, Some("pool-a"))]
    );
    wait_for(&pools, "pool-b", "DaemonSetReady", "DaemonSetReady").await;
    let ds = daemonsets
        .get("pool-b-nova-compute")
        .await
        .expect("pool-b daemonset");
    assert_eq!(
        terms(&ds)[0]["matchFields"],
        json!([{"key": "metadata.name", "operator": "NotIn", "values": ["pool-node-1"]}])
    );
    let _ = five_passes(&client, &pools, &metrics, "pool-b").await;
    assert_eq!(
        node_conflict_events(&client, &ns, "pool-b").await,
        1,
        "one NodeConflict event"
    );
    assert!(
        ledger(&pools.get("pool-a").await.expect("pool-a")).contains(&entry(
            "pool-node-1",
            NodePhase::Pending,
            None
        ))
    );
    assert!(pod_nodes(&client, &ns, "pool-b").await.is_empty());

    // A ConfigMap of the pool's name that another owner controls is refused, not adopted.
    let hash = listed.items[0]
        .name_any()
        .rsplit('-')
        .next()
        .expect("hash")
        .to_owned();
    let nova_uid = Api::<Nova>::namespaced(client.clone(), &ns)
        .get("nova")
        .await
        .expect("nova")
        .uid()
        .expect("uid");
    let foreign: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": format!("pool-f-config-{hash}"), "ownerReferences": [{
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1", "kind": "Nova", "name": "nova",
            "uid": nova_uid, "controller": true}]},
        "data": {"compute-pool.conf": "foreign"}
    }))
    .expect("config map");
    config_maps
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign config map");
    pools
        .create(
            &PostParams::default(),
            &pool(&ns, "pool-f", "nova", json!({POOL_LABEL: "none"})),
        )
        .await
        .expect("create");
    let message = wait_for(&pools, "pool-f", "ConfigReady", "ConfigError").await;
    assert!(
        message.starts_with("refusing to adopt pre-existing ConfigMap"),
        "{message}"
    );
    deletion_held(&pools, "pool-f").await;

    // The pool that holds only a conflict: its finalizer holds while Keystone is unreachable.
    deletion_held(&pools, "pool-b").await;

    // Deleting pool-a drains both nodes: the finalizer holds and every pod stays.
    pools
        .delete("pool-a", &DeleteParams::default())
        .await
        .expect("delete");
    let draining = wait_until(&pools, "pool-a", "drains both nodes", |p| {
        ledger(p)
            == [
                entry("pool-node-1", NodePhase::Draining, None),
                entry("pool-node-2", NodePhase::Draining, None),
            ]
    })
    .await;
    assert!(draining.metadata.deletion_timestamp.is_some());
    absence_window(Duration::from_secs(3)).await;
    let ds = daemonsets
        .get("pool-a-nova-compute")
        .await
        .expect("kept daemonset");
    assert_eq!(
        terms(&ds),
        json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["pool-node-1"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["pool-node-2"]}]}
        ]),
        "a deleting pool keeps only its draining nodes"
    );
    assert_eq!(
        pod_nodes(&client, &ns, "pool-a").await,
        ["pool-node-1", "pool-node-2"],
        "no draining node loses its nova-compute pod"
    );
    assert!(
        pools.get_opt("pool-a").await.expect("get").is_some(),
        "the drain finalizer holds"
    );
    // The manual escape: the drain finalizer removed by hand.
    remove_finalizers(&pools, "pool-a").await;
    wait_gone(&pools, "pool-a").await;

    for name in ["pool-node-1", "pool-node-2"] {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
}
