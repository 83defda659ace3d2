//! Target clusters (`common-types.md` §3.17) with two real control planes: the shared one is
//! the management cluster (the Novas, their status, finalizers and events, the registration
//! Secrets), a second one of its own (its own etcd and API server, kwok playing pods) is the
//! target the Novas' children and a pool's DaemonSet are placed on. The MariaDB operator is
//! simulated on the target.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use nova_api::labels::ownership;
use nova_api::v1alpha1::{
    Nova, NovaCompute, TargetClusterRefSpec, VPAUpdateMode, VerticalAutoscalingSpec,
};
use nova_controller::clusters::registration::{KUBECONFIG_KEY, LABEL, NAMESPACES_KEY};
use nova_controller::clusters::{Fleet, Registry};
use nova_controller::metrics::Metrics;
use nova_controller::objects::kinds as external;
use nova_controller::{nova, novacompute};
use nova_test_harness::ControlPlane;
use nova_testkit::prelude::*;
use serde_json::json;

/// The abandon window of this suite (five minutes outside tests).
const WINDOW: Duration = Duration::from_secs(10);
const REMOTE_CHILDREN: &str = "openstack.c5c3.io/remote-children";

fn placed(ns: &str, cluster: &str) -> Nova {
    let mut nova = example(ns);
    nova.spec.target_cluster_ref = Some(TargetClusterRefSpec {
        name: cluster.to_owned(),
    });
    nova
}

/// Registers the cluster `name`, restricted to the namespace `ns` when given.
async fn register(
    client: &Client,
    clusters_ns: &str,
    name: &str,
    kubeconfig: &str,
    ns: Option<&str>,
) {
    let mut data = BTreeMap::from([(KUBECONFIG_KEY, kubeconfig)]);
    data.extend(ns.map(|ns| (NAMESPACES_KEY, ns)));
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "stringData": data,
    }))
    .expect("registration");
    Api::<Secret>::namespaced(client.clone(), clusters_ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create registration");
}

/// The VerticalPodAutoscaler CRD.
const VPA_CRD: &str = "verticalpodautoscalers.autoscaling.k8s.io";

/// The VerticalPodAutoscaler CRD as the harness installs it.
fn vpa_crd() -> CustomResourceDefinition {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/crds/third-party/vpa-v1-crd-gen.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the VPA CRDs");
    text.split("\n---\n")
        .filter_map(|doc| serde_saphyr::from_str::<CustomResourceDefinition>(doc).ok())
        .find(|crd| crd.metadata.name.as_deref() == Some(VPA_CRD))
        .expect("the VPA CRD")
}

/// Creates the namespace `ns` on a target (a prerequisite of placing CRs there).
async fn namespace_on(client: &Client, ns: &str) {
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("the namespace on the target");
}

/// The objects of `kind` in `ns` labelled as owned by the CR `name`.
async fn owned_by(
    client: &Client,
    ns: &str,
    kind: &kube::core::ApiResource,
    name: &str,
) -> Vec<DynamicObject> {
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, kind);
    api.list(&ListParams::default().labels(&format!("{}={name}", ownership::NAME)))
        .await
        .expect("list")
        .items
}

/// Waits until no object of `kinds` in `ns` owned by `owner` is left but those being deleted
/// (the sweep deletes in the background).
async fn swept(client: &Client, ns: &str, kinds: &[&kube::core::ApiResource], owner: &str) {
    for kind in kinds {
        eventually(
            &format!("no {} of {owner} left", kind.kind),
            || async move {
                owned_by(client, ns, kind, owner)
                    .await
                    .iter()
                    .all(|o| o.meta().deletion_timestamp.is_some())
            },
        )
        .await;
    }
}

/// Waits until `check` holds: two control planes share the two cores, so a state may take a
/// few of the fleet's and the controller's polls.
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    Wait::new(what, SETTLE).until(check).await.expect(what);
}

/// What the API server counted so far, per resource: the writes of every child kind and of
/// the Novas' status, and the GETs and LISTs of what a pass reads.
async fn requests_now(client: &Client) -> BTreeMap<String, (u64, u64)> {
    let mut counted = BTreeMap::new();
    // The Jobs too: the waiting Novas' db-sync Jobs are theirs.
    let jobs = ["jobs"];
    for resource in WRITTEN_RESOURCES
        .iter()
        .chain(&jobs)
        .chain(READ_RESOURCES.iter())
    {
        let counts = (
            requests(client, &[resource], &WRITE_VERBS).await,
            requests(client, &[resource], &READ_VERBS).await,
        );
        counted.insert((*resource).to_owned(), counts);
    }
    counted.insert(
        "novas/status".to_owned(),
        (writes(client, "novas", "status").await, 0),
    );
    counted
}

/// What was counted between two readings, the resources that saw any request.
fn cost(
    before: &BTreeMap<String, (u64, u64)>,
    after: &BTreeMap<String, (u64, u64)>,
) -> BTreeMap<String, (u64, u64)> {
    after
        .iter()
        .map(|(r, (w, g))| {
            let (w0, g0) = before.get(r).copied().unwrap_or_default();
            (r.clone(), (w - w0, g - g0))
        })
        .filter(|(_, c)| *c != (0, 0))
        .collect()
}

/// The conditions of the Nova `name` that are not True, sorted.
async fn not_true(novas: &Api<Nova>, name: &str) -> Vec<String> {
    let nova = novas.get(name).await.expect("nova");
    let mut types: Vec<String> = nova
        .status
        .map(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.status != "True")
        .map(|c| c.type_)
        .collect();
    types.sort();
    types
}

/// Where a placed Nova settles here: every step has run (kwok completed the db-sync Job and
/// readied the Deployments' pods) and only what no Gateway controller and no pod answers on
/// the target stays False: the console route's acceptance and the API health (its probe goes
/// through the target's service proxy to a kwok pod that serves nothing).
/// The bound of every wait here.
const SETTLE: Duration = Duration::from_secs(150);

const SETTLED: [&str; 3] = ["ConsoleHTTPRouteReady", "NovaAPIReady", "Ready"];

async fn finalizers(novas: &Api<Nova>, name: &str) -> Vec<String> {
    novas.get(name).await.expect("nova").finalizers().to_vec()
}

/// A management control plane and a target of their own, with a namespace of the same name on
/// both (the Novas' inputs provided on the target) and the registrations' namespace at home.
struct TwoClusters {
    home: ControlPlane,
    target: ControlPlane,
    home_client: Client,
    target_client: Client,
    ns: String,
    clusters_ns: String,
}

async fn two_clusters(prefix: &str) -> TwoClusters {
    let home = ControlPlane::start()
        .await
        .expect("management control plane");
    let target = ControlPlane::start().await.expect("target control plane");
    let home_client = home.client().expect("client");
    let target_client = target.client().expect("target client");
    let ns = home.namespace(prefix).await.expect("namespace");
    let clusters_ns = home
        .namespace(&format!("{prefix}-clusters"))
        .await
        .expect("clusters namespace");
    namespace_on(&target_client, &ns).await;
    provide_inputs(&target_client, &ns).await;
    TwoClusters {
        home,
        target,
        home_client,
        target_client,
        ns,
        clusters_ns,
    }
}

/// The fleet of the registrations in `clusters_ns`, engaging the kinds of `registry` with
/// requests bounded by `request_timeout`.
fn fleet_of(
    home_client: &Client,
    clusters_ns: &str,
    registry: Registry,
    request_timeout: Duration,
) -> std::sync::Arc<Fleet> {
    Fleet::start(
        home_client.clone(),
        clusters_ns,
        registry,
        WINDOW,
        request_timeout,
    )
}

/// The kinds of both controllers, as one process running both engages them.
fn both_kinds() -> Registry {
    Registry::default()
        .register(nova::controller::kinds())
        .register(novacompute::controller::kinds())
}

#[tokio::test(flavor = "multi_thread")]
async fn novas_placed_on_a_registered_target_cluster() {
    nova_testkit::logs::capture();
    // A management control plane of its own: the counters it reads are the whole server's.
    let TwoClusters {
        home: _home,
        target,
        home_client,
        target_client,
        ns,
        clusters_ns,
    } = two_clusters("placed").await;
    let fleet = fleet_of(
        &home_client,
        &clusters_ns,
        Registry::default().register(nova::controller::kinds()),
        nova_controller::bounded::REQUEST_TIMEOUT,
    );
    let mut remote_secrets = fleet.subscribe(&kube::core::ApiResource::erase::<Secret>(&()));
    let metrics = start_controller_placing(
        home_client.clone(),
        &ns,
        simulated_nova_api().await,
        Some(fleet.clone()),
    )
    .await;
    let novas: Api<Nova> = Api::namespaced(home_client.clone(), &ns);

    // Refused and unregistered clusters: the gate says so, no finalizer, nothing created.
    let exec = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: \"{}\"}}\nusers:\n- name: plugin\n  user:\n    exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: plugin}}\ncurrent-context: t\n",
        target.server_url()
    );
    register(&home_client, &clusters_ns, "exec-cluster", &exec, Some(&ns)).await;
    for (name, cluster) in [("nova-exec", "exec-cluster"), ("nova-nowhere", "nowhere")] {
        let mut nova = placed(&ns, cluster);
        nova.metadata.name = Some(name.to_owned());
        novas
            .create(&PostParams::default(), &own_schemas(nova))
            .await
            .expect("create");
        let message = wait_for_reason(&novas, name, "TargetClusterUnavailable").await;
        assert_eq!(message, "cluster not found", "{name}");
        assert!(finalizers(&novas, name).await.is_empty(), "{name}");
    }
    let refusal = nova_testkit::logs::logged();
    assert!(
        refusal
            .lines()
            .any(|l| l.contains("target-cluster registration refused")
                && l.contains("exec-cluster")
                && l.contains("user plugin uses exec, which is refused")),
        "the refusal is logged with its reason"
    );

    // A registered target: every child there, with the ownership labels, none at home.
    let kubeconfig = std::fs::read_to_string(target.kubeconfig_path()).expect("kubeconfig");
    register(&home_client, &clusters_ns, "target", &kubeconfig, Some(&ns)).await;
    for name in ["nova", "nova-b"] {
        let mut nova = placed(&ns, "target");
        nova.metadata.name = Some(name.to_owned());
        novas
            .create(&PostParams::default(), &own_schemas(nova))
            .await
            .expect("create");
    }
    let secret = kube::core::ApiResource::erase::<Secret>(&());
    let config_map = kube::core::ApiResource::erase::<ConfigMap>(&());
    let [database, ..] = external::mariadb_children();
    let (there, namespace, novas_ref) = (&target_client, ns.as_str(), &novas);
    for kind in [&secret, &config_map, &database] {
        eventually(
            &format!("{} of the Nova on the target", kind.kind),
            || async move { !owned_by(there, namespace, kind, "nova").await.is_empty() },
        )
        .await;
        for child in owned_by(&target_client, &ns, kind, "nova").await {
            let labels = child.labels();
            assert_eq!(labels[ownership::KIND], "Nova", "{}", child.name_any());
            assert_eq!(labels[ownership::NAMESPACE], ns, "{}", child.name_any());
            assert!(
                child.meta().owner_references.is_none(),
                "{} {}: an owner reference does not cross clusters",
                kind.kind,
                child.name_any()
            );
        }
    }
    let home_children = Api::<Secret>::namespaced(home_client.clone(), &ns)
        .list(&ListParams::default().labels("app.kubernetes.io/instance=nova"))
        .await
        .expect("list");
    assert!(home_children.items.is_empty(), "no child at home");
    for name in ["nova-exec", "nova-nowhere"] {
        for kind in [&secret, &config_map, &database] {
            assert!(owned_by(&target_client, &ns, kind, name).await.is_empty());
            let at_home = Api::<DynamicObject>::namespaced_with(home_client.clone(), &ns, kind)
                .list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={name}")))
                .await
                .expect("list");
            assert!(at_home.items.is_empty(), "{name}: no {} at home", kind.kind);
        }
    }
    assert_eq!(
        finalizers(&novas, "nova").await,
        [nova::FINALIZER, REMOTE_CHILDREN],
        "both finalizers, each in its own pass"
    );

    // The children's events come back from the target, named after it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let next = tokio::time::timeout_at(deadline.into(), remote_secrets.next()).await;
        let (cluster, meta) = next.expect("a Secret event from the target").expect("open");
        if meta.labels().get(ownership::NAME).map(String::as_str) == Some("nova") {
            assert_eq!(cluster, "target");
            break;
        }
    }

    // Steady state of a placed Nova: once both settled (a measurement that began while one
    // still converged counted its writes: 9 at home and 3 on the target in one earlier run,
    // when this waited only for DBSyncInProgress, which kwok ends within a second), passes
    // over them cost neither API server a write or a GET/LIST.
    for name in ["nova", "nova-b"] {
        eventually(&format!("{name} settles"), || async move {
            not_true(novas_ref, name).await == SETTLED
        })
        .await;
    }
    quiet_window(Duration::from_secs(3)).await;
    let (home_before, target_before) = (
        requests_now(&home_client).await,
        requests_now(&target_client).await,
    );
    touch_five_times(&novas, "nova", "placed", || passes(&metrics)).await;
    quiet_window(Duration::from_secs(2)).await;
    let (home_after, target_after) = (
        requests_now(&home_client).await,
        requests_now(&target_client).await,
    );
    let (home_cost, target_cost) = (
        cost(&home_before, &home_after),
        cost(&target_before, &target_after),
    );
    println!("placed steady state: management {home_cost:?}, target {target_cost:?}");
    assert!(home_cost.is_empty(), "management cluster: {home_cost:?}");
    assert!(target_cost.is_empty(), "target cluster: {target_cost:?}");

    // A remote child deleted on the target comes back: its event re-reconciles the owner.
    let child = owned_by(&target_client, &ns, &secret, "nova")
        .await
        .into_iter()
        .next()
        .expect("a Secret of the Nova on the target");
    let (name, uid) = (child.name_any(), child.uid());
    let target_secrets: Api<Secret> = Api::namespaced(target_client.clone(), &ns);
    target_secrets
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the remote child");
    let deleted = Instant::now();
    let (secrets_ref, name_ref, uid_ref) = (&target_secrets, name.as_str(), &uid);
    eventually(&format!("{name} recreated on the target"), || async move {
        secrets_ref
            .get_opt(name_ref)
            .await
            .expect("get")
            .is_some_and(|s| s.uid() != *uid_ref)
    })
    .await;
    println!(
        "remote child {name} recreated {:?} after its deletion (the Nova's poll is 30 s)",
        deleted.elapsed()
    );

    // Deleting the Nova sweeps the target clean.
    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the Nova is gone", || async move {
        novas_ref.get_opt("nova").await.expect("get").is_none()
    })
    .await;
    swept(
        &target_client,
        &ns,
        &[&secret, &config_map, &database],
        "nova",
    )
    .await;
    assert!(
        !owned_by(&target_client, &ns, &secret, "nova-b")
            .await
            .is_empty(),
        "the sweep takes only what the deleted Nova owns"
    );

    // The target's API server stops during the deletion of the second Nova: it waits, then
    // abandons the children after the window and leaves.
    drop(target);
    novas
        .delete("nova-b", &DeleteParams::default())
        .await
        .expect("delete");
    let message = wait_for_reason(&novas, "nova-b", "TargetClusterUnavailable").await;
    assert!(message.contains("does not answer"), "{message}");
    eventually("the Nova leaves after the window", || async move {
        novas_ref.get_opt("nova-b").await.expect("get").is_none()
    })
    .await;
    let events = Api::<Event>::namespaced(home_client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("events");
    let abandoned = events
        .items
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("RemoteChildrenAbandoned")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nova-b")
        })
        .expect("a RemoteChildrenAbandoned event");
    assert_eq!(abandoned.type_.as_deref(), Some("Warning"));
    assert!(
        abandoned
            .note
            .as_deref()
            .is_some_and(|n| n.contains("stay behind")),
        "{abandoned:?}"
    );
}

/// Waits until the pool's condition `type_` has `reason`; returns its message.
async fn wait_for_pool(pools: &Api<NovaCompute>, name: &str, type_: &str, reason: &str) -> String {
    pool_reason_for(pools, name, type_, reason, SETTLE)
        .await
        .expect("the pool's condition")
}

/// The node names of a pool's ledger.
async fn ledger_names(pools: &Api<NovaCompute>, name: &str) -> Vec<String> {
    let pool = pools.get_opt(name).await.expect("pool");
    pool.and_then(|p| p.status)
        .map(|s| s.nodes.into_iter().map(|e| e.name).collect())
        .unwrap_or_default()
}

/// A NovaCompute placed on a target (`novacompute.md` §4.6, §5, §7.1): its Nova lives at home
/// and is itself placed on the target (no Nova controller runs: the Nova carries the status a
/// converged one publishes), so the pool reads the Nova at home, the service-user password and
/// the contract on the target (waiting, named, until it is mirrored there, whose event wakes
/// it), lists the target's kwok nodes and runs its DaemonSet there; its
/// Keystone call goes through the target API server's service proxy (the Keystone Service there
/// has no endpoint, so the proxy's own answer comes back). Its VPA opt-in is reported while the
/// target serves no VerticalPodAutoscaler and applied there once the CRD is installed (the
/// capability is asked again on every pass of a placed CR). A target node relabelled into the
/// selection joins the ledger; deleting the pool (after its Nova) reaps the mirrors on the
/// target, not the same-named Secret at home, and sweeps the target.
#[tokio::test(flavor = "multi_thread")]
async fn a_pool_placed_on_a_registered_target_cluster() {
    // A management cluster of its own: the pool controller runs cluster-wide there, and the
    // other test's request counters must not see its passes.
    let home = ControlPlane::start()
        .await
        .expect("management control plane");
    let target = ControlPlane::start().await.expect("target control plane");
    let home_client = home.client().expect("client");
    let target_client = target.client().expect("target client");
    let ns = home.namespace("pool-placed").await.expect("namespace");
    let clusters_ns = home
        .namespace("pool-clusters")
        .await
        .expect("clusters namespace");
    namespace_on(&target_client, &ns).await;

    let novas: Api<Nova> = Api::namespaced(home_client.clone(), &ns);
    let mut nova = placed(&ns, "east");
    nova.spec.keystone_endpoint = format!("http://keystone.{ns}.svc:5000/v3");
    create_published(&home_client, &nova).await;
    let contract = contract(SERVICE_PASSWORD);
    let there: Api<Secret> = Api::namespaced(target_client.clone(), &ns);
    put_secret(&there, "nova-keystone", &[("password", SERVICE_PASSWORD)]).await;
    put_secret(
        &there,
        "nova-hypervisor-operator-auth",
        &[("password", "x")],
    )
    .await;
    mark_mirror(&there, "nova-hypervisor-operator-auth").await;
    let at_home: Api<Secret> = Api::namespaced(home_client.clone(), &ns);
    put_secret(&at_home, "nova-compute-config", &contract).await;
    mark_mirror(&at_home, "nova-compute-config").await;
    let keystone: Service = serde_json::from_value(json!({
        "metadata": {"name": "keystone"},
        "spec": {"selector": {"app": "keystone"}, "ports": [{"port": 5000}]}
    }))
    .expect("service");
    Api::<Service>::namespaced(target_client.clone(), &ns)
        .create(&PostParams::default(), &keystone)
        .await
        .expect("the Keystone Service on the target");
    let target_nodes: Api<Node> = Api::all(target_client.clone());
    create_zoned_node(&target_nodes, "east-0", "east", "az1").await;
    create_zoned_node(&target_nodes, "east-1", "later", "az1").await;

    // The target serves no VerticalPodAutoscaler when it engages (the group stays, with its
    // checkpoints): the pool's opt-in is reported, and re-checked on every pass.
    let crds: Api<CustomResourceDefinition> = Api::all(target_client.clone());
    crds.delete(VPA_CRD, &DeleteParams::default())
        .await
        .expect("delete the VPA CRD");
    let crds_ref = &crds;
    eventually("the VPA CRD is gone", || async move {
        crds_ref.get_opt(VPA_CRD).await.expect("get").is_none()
    })
    .await;

    // Registered cluster-wide: the target's Nodes are watched only then.
    let kubeconfig = std::fs::read_to_string(target.kubeconfig_path()).expect("kubeconfig");
    register(&home_client, &clusters_ns, "east", &kubeconfig, None).await;
    let fleet = fleet_of(
        &home_client,
        &clusters_ns,
        both_kinds(),
        nova_controller::bounded::REQUEST_TIMEOUT,
    );
    fleet.settled().await;
    start_novacompute_placing(home_client.clone(), Registry::default(), Some(fleet)).await;

    let pools: Api<NovaCompute> = Api::namespaced(home_client.clone(), &ns);
    let mut east = pool(&ns, "east-pool", "nova", json!({POOL_LABEL: "east"}));
    east.spec.target_cluster_ref = Some(TargetClusterRefSpec {
        name: "east".into(),
    });
    east.spec.vertical_autoscaling = Some(VerticalAutoscalingSpec {
        update_mode: VPAUpdateMode::Initial,
        min_allowed: None,
        max_allowed: None,
        min_replicas: None,
    });
    pools
        .create(&PostParams::default(), &east)
        .await
        .expect("create pool");
    let pools_ref = &pools;

    // The contract is read on the pool's cluster: missing there (though present at home), the
    // pool waits naming the target; mirrored onto the target, its event wakes the pool.
    let waiting = wait_for_pool(
        &pools,
        "east-pool",
        "ConfigReady",
        "WaitingForComputeConfig",
    )
    .await;
    assert!(
        waiting.contains(&format!(
            "not found in namespace {ns} on target cluster east;"
        )),
        "{waiting}"
    );
    put_secret(&there, "nova-compute-config", &contract).await;
    mark_mirror(&there, "nova-compute-config").await;
    let mirrored = Instant::now();
    eventually("the mirrored contract renders the config", || async move {
        pool_condition(pools_ref, "east-pool", "ConfigReady")
            .await
            .is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    println!(
        "the contract mirrored onto the target rendered the config after {:?} (the wait polls at 15 s)",
        mirrored.elapsed()
    );

    // The DaemonSet and the config run on the target, claimed by the ownership labels, and
    // its pod runs on the target's kwok node; nothing at home.
    eventually(
        "the DaemonSet runs a ready pod on the target's node",
        || async move {
            pool_condition(pools_ref, "east-pool", "DaemonSetReady")
                .await
                .is_some_and(|(status, _, _)| status == "True")
        },
    )
    .await;
    assert_eq!(ledger_names(&pools, "east-pool").await, ["east-0"]);
    let daemonset = kube::core::ApiResource::erase::<DaemonSet>(&());
    let config_map = kube::core::ApiResource::erase::<ConfigMap>(&());
    for kind in [&daemonset, &config_map] {
        let children = owned_by(&target_client, &ns, kind, "east-pool").await;
        assert!(!children.is_empty(), "{} on the target", kind.kind);
        for child in children {
            let labels = child.labels();
            assert_eq!(labels[ownership::KIND], "NovaCompute");
            assert_eq!(labels[ownership::NAMESPACE], ns);
            assert!(
                child.meta().owner_references.is_none(),
                "{}",
                child.name_any()
            );
        }
        let at_home = Api::<DynamicObject>::namespaced_with(home_client.clone(), &ns, kind)
            .list(&ListParams::default().labels("app.kubernetes.io/instance=east-pool"))
            .await
            .expect("list");
        assert!(at_home.items.is_empty(), "no {} at home", kind.kind);
    }

    // The VPA kind missing on the target is reported as such, and found once installed.
    let (_, reason, message) = pool_condition(&pools, "east-pool", "VPAReady")
        .await
        .expect("VPAReady");
    assert_eq!(reason, "VPANotInstalled");
    assert!(
        message.starts_with("the target cluster does not serve autoscaling.k8s.io/v1 VerticalPodAutoscaler; opted-in workloads: east-pool-nova-compute (the operator re-checks on every reconcile"),
        "{message}"
    );
    crds.create(&PostParams::default(), &vpa_crd())
        .await
        .expect("install the VPA CRD");
    eventually("the VPA found on the target", || async move {
        pool_condition(pools_ref, "east-pool", "VPAReady")
            .await
            .is_some_and(|(status, reason, _)| status == "True" && reason == "VPAReady")
    })
    .await;
    let vpa = external::vertical_pod_autoscaler();
    assert_eq!(
        owned_by(&target_client, &ns, &vpa, "east-pool")
            .await
            .iter()
            .map(|v| v.name_any())
            .collect::<Vec<_>>(),
        ["east-pool-nova-compute"]
    );

    // The Keystone call went through the target's service proxy: the proxy answers for the
    // Service without endpoint (a direct call would not resolve the Service name).
    eventually(
        "the Keystone call answered through the proxy",
        || async move {
            pool_condition(pools_ref, "east-pool", "AggregatesReady")
                .await
                .is_some_and(|(_, reason, _)| reason == "ComputeAPIError")
        },
    )
    .await;
    let (_, _, authenticating) = pool_condition(&pools, "east-pool", "AggregatesReady")
        .await
        .expect("AggregatesReady");
    println!("placed pool's Keystone call: {authenticating}");
    assert!(
        authenticating.starts_with("authenticating: POST /v3/auth/tokens: HTTP "),
        "{authenticating}"
    );
    assert!(!authenticating.contains(SERVICE_PASSWORD));

    // A target node relabelled into the selection wakes the pool (its poll is 30 s).
    let relabelled = Instant::now();
    target_nodes
        .patch(
            "east-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {POOL_LABEL: "east"}}})),
        )
        .await
        .expect("relabel");
    eventually(
        "the relabelled target node joins the ledger",
        || async move { ledger_names(pools_ref, "east-pool").await == ["east-0", "east-1"] },
    )
    .await;
    println!(
        "relabelled target node in the ledger after {:?}",
        relabelled.elapsed()
    );

    // Deleting the pool (its Nova gone first: the Nova side is skipped) reaps the mirrors on
    // the target, leaves the home Secret of the same name, and sweeps the target.
    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete Nova");
    pools
        .delete("east-pool", &DeleteParams::default())
        .await
        .expect("delete pool");
    eventually("the pool is gone", || async move {
        pools_ref.get_opt("east-pool").await.expect("get").is_none()
    })
    .await;
    swept(
        &target_client,
        &ns,
        &[&daemonset, &config_map, &vpa],
        "east-pool",
    )
    .await;
    for mirror in ["nova-compute-config", "nova-hypervisor-operator-auth"] {
        let there = &there;
        eventually(&format!("{mirror} reaped on the target"), || async move {
            there.get_opt(mirror).await.expect("get").is_none()
        })
        .await;
    }
    assert!(
        at_home
            .get_opt("nova-compute-config")
            .await
            .expect("get")
            .is_some(),
        "the Secret at home is not on the pool's cluster"
    );
    // Counted over events and their series: a repeated note is a series, distinct ones are events.
    let reaped: i32 = Api::<Event>::namespaced(home_client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ComputeConfigMirrorReaped"))
        .map(|e| e.series.map_or(1, |s| s.count))
        .sum();
    assert_eq!(reaped, 2, "one event per reaped mirror");
}

/// The request timeout of the silent-target drill: short, so the drill is quick.
const DRILL_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// How long the Nova `name` takes to settle (its database synced, and every condition True
/// but those [`SETTLED`] allows), since it was created at `created`.
async fn settles(novas: &Api<Nova>, name: &str, created: Instant) -> Duration {
    eventually(&format!("{name} settles"), || async move {
        let nova = novas.get(name).await.expect("nova");
        nova.reason(Nova::type_named("DatabaseReady")) == Some("DatabaseSynced")
            && not_true(novas, name)
                .await
                .iter()
                .all(|t| SETTLED.contains(&t.as_str()))
    })
    .await;
    created.elapsed()
}

/// How long a local pool may take to start draining a relabelled node while a target is
/// silent (issue 32: "the local pool still drains within 60 s").
const LOCAL_DRAIN_BOUND: Duration = Duration::from_secs(60);

/// The availability series of the target cluster `cluster` in `metrics`: answering (1 or 0)
/// and seconds silent.
fn availability(metrics: &Metrics, cluster: &str) -> (f64, f64) {
    let text = metrics.render();
    let value = |name: &str| {
        let prefix = format!("{name}{{cluster=\"{cluster}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix}in:\n{text}"))
    };
    (
        value("nova_operator_target_cluster_answering"),
        value("nova_operator_target_cluster_silent_seconds"),
    )
}

/// Injects: the target cluster's API server SIGSTOPped (connections open, nothing answers)
/// while a Nova placed there must write a changed Deployment; meanwhile a Nova at home is
/// created and a node of a pool at home is relabelled out of its selection; then SIGCONT. One
/// fleet engages both controllers' kinds on the target, as the controller binary does.
/// Asserts: the placed Nova's write times out, the target is marked silent and the Nova
/// reports `TargetClusterUnavailable` ("does not answer") instead of holding a reconcile slot;
/// `nova_operator_target_cluster_answering` is 0 and `_silent_seconds` counts; the Nova at
/// home settles meanwhile (its time is printed beside an undisturbed one's) and the pool at
/// home marks its relabelled node Draining within [`LOCAL_DRAIN_BOUND`] (printed); after SIGCONT
/// the target resolves again without a restart, answers in the metric, and the changed
/// Deployment lands.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_target_cluster_holds_no_slot_and_recovers() {
    nova_testkit::logs::capture();
    let TwoClusters {
        home,
        target,
        home_client,
        target_client,
        ns,
        clusters_ns,
    } = two_clusters("silent").await;
    provide_inputs(&home_client, &ns).await;
    let fleet = fleet_of(
        &home_client,
        &clusters_ns,
        both_kinds(),
        DRILL_REQUEST_TIMEOUT,
    );
    let kubeconfig = std::fs::read_to_string(target.kubeconfig_path()).expect("kubeconfig");
    register(&home_client, &clusters_ns, "far", &kubeconfig, Some(&ns)).await;
    fleet.settled().await;
    let metrics = start_controller_placing(
        home_client.clone(),
        &ns,
        simulated_nova_api().await,
        Some(fleet.clone()),
    )
    .await;
    // A pool at home, of a Nova of its own namespace that no Nova controller reconciles (it
    // carries a converged Nova's status); its Keystone refuses, as no OpenStack runs here.
    let pool_ns = home.namespace("silent-pools").await.expect("namespace");
    let (_keystone_port, keystone) = unreachable_keystone();
    provide_pool_nova(&home_client, &pool_ns, &keystone, "service-Pa55").await;
    let nodes: Api<Node> = Api::all(home_client.clone());
    create_zoned_node(&nodes, "local-1", "local", "az1").await;
    create_zoned_node(&nodes, "local-2", "local", "az1").await;
    start_novacompute_placing(home_client.clone(), Registry::default(), Some(fleet)).await;
    let pools: Api<NovaCompute> = Api::namespaced(home_client.clone(), &pool_ns);
    pools
        .create(
            &PostParams::default(),
            &pool(&pool_ns, "local", "nova", json!({POOL_LABEL: "local"})),
        )
        .await
        .expect("create the pool at home");
    let novas: Api<Nova> = Api::namespaced(home_client.clone(), &ns);
    let mut far = placed(&ns, "far");
    far.metadata.name = Some("far".into());
    novas
        .create(&PostParams::default(), &far)
        .await
        .expect("create the placed Nova");
    let mut near = example(&ns);
    near.metadata.name = Some("near".into());
    let created = Instant::now();
    novas
        .create(&PostParams::default(), &near)
        .await
        .expect("create a Nova at home");
    let (_, undisturbed) = tokio::join!(
        settles(&novas, "far", created),
        settles(&novas, "near", created)
    );
    pool_reason(&pools, "local", "DaemonSetReady", "DaemonSetReady")
        .await
        .expect("the pool at home runs on its two nodes");
    assert_eq!(availability(&metrics, "far"), (1.0, 0.0), "far answers");

    target
        .pause_apiserver()
        .expect("SIGSTOP the target's API server");
    let paused = Instant::now();
    let replicas = json!({"spec": {"api": {"deployment": {"replicas": 2}}}});
    novas
        .patch("far", &PatchParams::default(), &Patch::Merge(&replicas))
        .await
        .expect("scale the placed Nova's API");
    // Its own schemas: the Nova `near` claims the example's on the same MariaDB.
    let mut during = example(&ns);
    during.metadata.name = Some("near-during".into());
    let during = own_schemas(during);
    let created = Instant::now();
    novas
        .create(&PostParams::default(), &during)
        .await
        .expect("create a Nova at home while the target is silent");
    let relabelled = Instant::now();
    nodes
        .patch(
            "local-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {POOL_LABEL: "elsewhere"}}})),
        )
        .await
        .expect("relabel a node of the pool at home");
    wait_pool_for(
        &pools,
        "local",
        "drains local-2 while the target is silent",
        LOCAL_DRAIN_BOUND,
        |p| {
            p.status
                .iter()
                .flat_map(|s| &s.nodes)
                .any(|e| e.name == "local-2" && e.phase == nova_api::v1alpha1::NodePhase::Draining)
        },
    )
    .await
    .expect("the pool at home drains its relabelled node");
    let drained = relabelled.elapsed();
    let message = wait_for_reason(&novas, "far", "TargetClusterUnavailable").await;
    assert!(message.contains("cluster far does not answer"), "{message}");
    let marked = paused.elapsed();
    let disturbed = settles(&novas, "near-during", created).await;
    let (answering, silent_for) = availability(&metrics, "far");
    assert_eq!(answering, 0.0, "far is reported silent");
    assert!(silent_for > 0.0, "far's silence is counted: {silent_for}");
    println!(
        "silent target: marked unavailable {marked:?} after SIGSTOP (request timeout {DRILL_REQUEST_TIMEOUT:?}), silent for {silent_for:.1} s in the metric; a Nova at home settled in {disturbed:?} meanwhile, {undisturbed:?} before; the pool at home marked its relabelled node Draining {drained:?} after the relabel"
    );

    let resumed = target
        .resume_apiserver(Duration::from_secs(60))
        .await
        .expect("SIGCONT the target's API server");
    let thawed = Instant::now();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(target_client.clone(), &ns);
    let deployments_ref = &deployments;
    eventually("the scaled Deployment lands on the target", || async move {
        deployments_ref
            .get_opt("far")
            .await
            .ok()
            .flatten()
            .and_then(|d| d.spec?.replicas)
            == Some(2)
    })
    .await;
    let novas_ref = &novas;
    eventually("the placed Nova resolves again", || async move {
        novas_ref
            .get("far")
            .await
            .expect("far")
            .reason(Nova::type_named("SecretsReady"))
            != Some("TargetClusterUnavailable")
    })
    .await;
    let metrics_ref = &metrics;
    eventually("far answers again in the metric", || async move {
        availability(metrics_ref, "far") == (1.0, 0.0)
    })
    .await;
    println!(
        "silent target: ready {resumed:?} after SIGCONT; the placed Nova's change landed {:?} after that",
        thawed.elapsed()
    );
}
