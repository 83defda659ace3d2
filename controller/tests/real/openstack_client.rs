//! The NovaCompute steps' OpenStack client, and the Aggregates, Services and Traits steps'
//! calls, against the real services on the real node: a real Keystone issues the token (once
//! per client) and the catalog Placement is found in; a real nova-api (hand-written templates,
//! `nova_test_harness::openstack::nova`) answers the aggregate, service, hypervisor and server
//! calls while a fake-driver nova-compute registers; a real Placement creates, refuses (409 while
//! a resource provider carries it) and deletes traits; a real `kvm.cloud.sap/v1` Hypervisor in
//! the API server takes the merge patch (the hypervisor operator's status is played). The steps
//! run as functions over a hand-built ledger: the Aggregates step creates marked per-zone
//! aggregates and keeps one with foreign metadata; the Services walk moves the node Pending
//! (unmapped) → Active (after a real discover_hosts) → Draining (disabled once, no server) →
//! Releasing → dropped once its pod is gone (its service deleted); the Traits step creates,
//! patches and garbage-collects. The client dials the cluster-local Service names through
//! routes to the pods' addresses, the way a controller outside the cluster reaches them.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Event, Node, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nova_api::conditions::Reason;
use nova_api::v1alpha1::{
    NodePhase, NovaCompute, NovaComputeHostTraits, NovaComputeNodeStatus, NovaComputeStatus,
};
use nova_controller::clusters::{ClusterReads, Handle, KubeCluster, Registry};
use nova_controller::novacompute::compute_api::PoolView;
use nova_controller::novacompute::hypervisors;
use nova_controller::novacompute::steps::{aggregates, services, traits};
use nova_controller::openstack::nova::ServiceDeletion;
use nova_controller::openstack::placement::{TraitDeletion, TraitEnsured};
use nova_controller::openstack::{Client, OpenStackError};
use nova_test_harness::openstack::nova::{TIMEOUT, names, start_conductor_and_compute};
use nova_test_harness::openstack::{OpenStack, PLACEMENT, Ports, keystone_url};
use nova_test_harness::{ControlPlane, http};
use serde_json::json;

use nova_testkit::prelude::{
    POOL_LABEL, create_tainted_zoned_node, fake_node_tolerations, occurrences, pool_reason,
    provide_pool_nova, quiet_window, start_novacompute_for_pools_in, touch_five_times,
};
use nova_testkit::proof_nova::{create_hypervisor, discover_hosts, routes, service_user, start};
use nova_testkit::wait::Wait;

const RELEASE: &str = "2026.1";

/// The management cluster's handle as the steps use it, its Service URLs routed to Keystone,
/// Placement and nova-api (the controller runs outside the cluster here).
async fn handle(cp: &ControlPlane, os: &OpenStack, ns: &str) -> Result<Arc<KubeCluster>> {
    let kube = cp.client()?;
    let registry = Registry::default().route_services(routes(&kube, os, ns).await);
    Ok(KubeCluster::start(kube, None, registry).await)
}

/// The client of one pass as the NovaCompute steps build it, over the handle's transport.
fn pass_client(cluster: &KubeCluster, ns: &str, password: &str) -> Client {
    service_user(cluster.transport(), ns, password)
}

fn node(name: &str, phase: NodePhase, zone: &str) -> NovaComputeNodeStatus {
    NovaComputeNodeStatus {
        zone: Some(zone.into()),
        ..node_entry(name, phase)
    }
}

fn node_entry(name: &str, phase: NodePhase) -> NovaComputeNodeStatus {
    NovaComputeNodeStatus {
        name: name.into(),
        phase,
        zone: None,
        service_id: None,
        service_status: None,
        service_state: None,
        disabled_reason: None,
        instances: None,
        conflicts_with: None,
        traits: Vec::new(),
    }
}

/// NovaCompute `pool-a` of Nova `nova` in `ns`, deleting or not.
fn pool_a(ns: &str, deleting: bool) -> NovaCompute {
    let mut pool = NovaCompute::new(
        "pool-a",
        serde_json::from_value(json!({
            "novaRef": { "name": "nova" },
            "nodeSelector": { "pool": "a" },
        }))
        .unwrap_or_else(|e| panic!("a NovaCompute spec: {e}")),
    );
    pool.metadata.namespace = Some(ns.into());
    if deleting {
        pool.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
    }
    pool
}

/// `pool` as the OpenStack steps see it, holding the ledger `nodes`, alone in its Nova.
fn view(pool: NovaCompute, nodes: Vec<NovaComputeNodeStatus>) -> PoolView {
    PoolView {
        cr: Arc::new(pool),
        nodes,
        siblings: Vec::new(),
    }
}

/// The Aggregates step against the real Nova: a live pool gets one marked aggregate per zone
/// of its Pending and Active nodes and tenant_filter_tests; a second pass changes nothing; once
/// the pool is deleting, the empty marked aggregates go, except one someone added metadata to.
async fn aggregates_step(client: &Client, ns: &str) -> Result<()> {
    let z1 = format!("z1-{ns}");
    let z2 = format!("z2-{ns}");
    let live = [
        node("node-a", NodePhase::Pending, &z1),
        node("node-b", NodePhase::Active, &z2),
        node("node-c", NodePhase::Draining, &z2),
    ];
    let pool =
        |deleting, nodes: &[NovaComputeNodeStatus]| view(pool_a(ns, deleting), nodes.to_vec());
    let (assessment, outcome, events) = aggregates::reconcile(client, &pool(false, &live)).await;
    ensure!(outcome == aggregates::Outcome::Completed, "{outcome:?}");
    let created: Vec<&str> = events.iter().map(|e| e.note.as_str()).collect();
    ensure!(
        created
            == [
                format!("Created host aggregate {z1} in availability zone {z1}"),
                format!("Created host aggregate {z2} in availability zone {z2}"),
                "Created host aggregate tenant_filter_tests".to_owned(),
            ],
        "{created:?}"
    );
    let report = aggregates::report(&assessment, &outcome);
    ensure!(
        report.ok && report.reason == Reason::NodesOutsideZoneAggregate,
        "node-b is Active and in no host list: {report:?}"
    );
    let marker = format!("{ns}/nova");
    let listed = client.aggregates().await?;
    for (name, zone) in [
        (&z1, z1.as_str()),
        (&z2, z2.as_str()),
        (&"tenant_filter_tests".to_owned(), ""),
    ] {
        let a = listed
            .iter()
            .find(|a| &a.name == name)
            .with_context(|| format!("{name} exists"))?;
        ensure!(
            a.availability_zone == zone && a.metadata.get(aggregates::MARKER_KEY) == Some(&marker),
            "{a:?}"
        );
    }
    let (_, again, events) = aggregates::reconcile(client, &pool(false, &live)).await;
    ensure!(
        again == aggregates::Outcome::Completed && events.is_empty(),
        "a converged pass changes nothing: {events:?}"
    );

    let z2_id = listed.iter().find(|a| a.name == z2).context("z2")?.id;
    client
        .set_aggregate_metadata(z2_id, "owner", "team-a")
        .await?;
    let leaving = live.clone().map(|mut n| {
        n.phase = NodePhase::Draining;
        n
    });
    let (assessment, outcome, events) = aggregates::reconcile(client, &pool(true, &leaving)).await;
    ensure!(outcome == aggregates::Outcome::Completed, "{outcome:?}");
    let notes: Vec<(bool, &str)> = events
        .iter()
        .map(|e| (e.reason.warning(), e.reason.as_str()))
        .collect();
    ensure!(
        notes
            == [
                (true, "AggregateKept"),
                (false, "AggregateDeleted"),
                (false, "AggregateDeleted")
            ],
        "{events:?}"
    );
    let names = aggregate_names(client).await?;
    ensure!(
        names == [z2.clone()],
        "only the aggregate with foreign metadata stays: {names:?}"
    );
    ensure!(aggregates::report(&assessment, &outcome).requeue.is_none());
    client.delete_aggregate(z2_id).await?;
    Ok(())
}

/// The names of the aggregates in the real Nova.
async fn aggregate_names(client: &Client) -> Result<Vec<String>> {
    Ok(client
        .aggregates()
        .await?
        .into_iter()
        .map(|a| a.name)
        .collect())
}

/// The NovaCompute controller with its OpenStack rows, on a handle routed to the real services:
/// a pool on a kwok node gets its zone aggregate and tenant_filter_tests in the real Nova,
/// marked; a second pool of the Nova that selects no node is deleted and released (the mirror
/// stays: the first pool uses it); deleting the first pool releases its node (no server on it,
/// so it leaves Draining at once), its pod goes, then the pass that begins with no node held
/// deletes both aggregates, reaps the labelled contract mirror (never the unlabelled Secret)
/// and releases the finalizer.
async fn pools_through_the_controller(
    cp: &ControlPlane,
    os: &OpenStack,
    client: &Client,
    ns: &str,
) -> Result<()> {
    let kube = cp.client()?;
    let zone = format!("pz-{ns}");
    let node_name = format!("pool-node-{ns}");
    let nodes: Api<Node> = Api::all(kube.clone());
    create_tainted_zoned_node(&nodes, &node_name, ns, &zone).await;
    provide_pool_nova(&kube, ns, &keystone_url(), os.nova_password()).await;
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), ns);
    let (metrics, requests) = start_novacompute_for_pools_in(
        kube.clone(),
        ns,
        Registry::default().route_services(routes(&kube, os, ns).await),
    )
    .await;

    let pools: Api<NovaCompute> = Api::namespaced(kube.clone(), ns);
    let pool = |name: &str, value: &str| -> Result<NovaCompute> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
            "kind": "NovaCompute",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {POOL_LABEL: value},
                     "tolerations": fake_node_tolerations()}
        }))?)
    };
    pools
        .create(&PostParams::default(), &pool("pool-a", ns)?)
        .await?;
    let message = pool_reason(&pools, "pool-a", "AggregatesReady", "AggregatesEnsured").await?;
    ensure!(
        message == format!("Host aggregates in place: {zone}, tenant_filter_tests")
            || message == format!("Host aggregates in place: tenant_filter_tests, {zone}"),
        "{message}"
    );
    pool_reason(&pools, "pool-a", "DaemonSetReady", "DaemonSetReady").await?;

    // Steady state with the OpenStack rows running: five passes over the unchanged pool write
    // no status and record no event.
    let quiet = || async {
        let events: Api<Event> = Api::namespaced(kube.clone(), ns);
        let on_pool = events
            .list(&ListParams::default().fields("involvedObject.name=pool-a"))
            .await?
            .items
            .iter()
            .map(occurrences)
            .sum::<i32>();
        Ok::<_, anyhow::Error>((requests.writes("novacomputes", "status"), on_pool))
    };
    quiet_window(Duration::from_secs(3)).await;
    let before = quiet().await?;
    let passes = || {
        metrics
            .reconcile_duration
            .with_label_values(&["Aggregates"])
            .get_sample_count()
    };
    touch_five_times(&pools, "pool-a", "pool-a", passes).await;
    quiet_window(Duration::from_secs(2)).await;
    let after = quiet().await?;
    ensure!(
        before == after,
        "a converged pool writes no status and records no event: {before:?} -> {after:?}"
    );

    let marker = format!("{ns}/nova");
    let listed = client.aggregates().await?;
    for name in [zone.as_str(), "tenant_filter_tests"] {
        let a = listed
            .iter()
            .find(|a| a.name == name)
            .with_context(|| format!("{name} in Nova"))?;
        ensure!(
            a.metadata.get(aggregates::MARKER_KEY) == Some(&marker),
            "{a:?}"
        );
    }

    pools
        .create(&PostParams::default(), &pool("pool-none", "none")?)
        .await?;
    pool_reason(&pools, "pool-none", "NodesReady", "NoMatchingNodes").await?;
    pools.delete("pool-none", &DeleteParams::default()).await?;
    Wait::new("pool-none released", TIMEOUT)
        .until(|| async { Ok(pools.get_opt("pool-none").await?.is_none().then_some(())) })
        .await?;
    ensure!(
        secrets.get_opt("nova-compute-config").await?.is_some(),
        "pool-a still uses the mirror"
    );
    ensure!(
        client.aggregates().await?.len() == 2,
        "pool-a still needs both aggregates"
    );

    pools.delete("pool-a", &DeleteParams::default()).await?;
    Wait::new("pool-a released", TIMEOUT)
        .until(|| async { Ok(pools.get_opt("pool-a").await?.is_none().then_some(())) })
        .await?;
    let left = aggregate_names(client).await?;
    ensure!(
        left.is_empty(),
        "the aggregates went with the last pool: {left:?}"
    );
    ensure!(
        secrets.get_opt("nova-compute-config").await?.is_none(),
        "the mirror is reaped"
    );
    ensure!(
        secrets
            .get_opt("nova-hypervisor-operator-auth")
            .await?
            .is_some(),
        "an unlabelled Secret is never reaped"
    );
    nodes.delete(&node_name, &DeleteParams::default()).await?;
    Ok(())
}

/// [`pool_a`] declaring `traits` on every node and `gpu` on `node`.
fn traits_pool(ns: &str, node: &str, traits: &str, gpu: &str, deleting: bool) -> NovaCompute {
    let mut pool = pool_a(ns, deleting);
    pool.spec.traits = Some(vec![traits.to_owned()]);
    pool.spec.host_traits = Some(vec![NovaComputeHostTraits {
        node: node.to_owned(),
        traits: vec![gpu.to_owned()],
    }]);
    pool
}

/// The Traits step against the real Placement and a real `kvm.cloud.sap/v1` Hypervisor in
/// the API server (the hypervisor operator's half, applying the traits and reporting them in
/// `status.traits`, is played by the test): the traits are created in Placement first, the
/// sorted list is merge-patched into `spec.customTraits` under `cobaltcore-operator`, and once
/// the pool is gone its created traits are deleted, except one a resource provider still
/// carries (409: kept).
async fn traits_step(
    cp: &ControlPlane,
    os: &OpenStack,
    cluster: &Arc<KubeCluster>,
    client: &Client,
    ns: &str,
) -> Result<()> {
    let suffix = ns.rsplit('-').next().unwrap_or("x").to_uppercase();
    let (traits, gpu) = (
        format!("CUSTOM_POOL_{suffix}"),
        format!("CUSTOM_GPU_{suffix}"),
    );
    let node = format!("hv-{ns}");
    let hypervisors = create_hypervisor(&cp.client()?, &node).await?;
    let handle = hypervisors::ClusterHypervisors(&**cluster);
    let patches = Handle::new(cluster.clone());
    let mut entry = node_entry(&node, NodePhase::Active);
    let live = traits_pool(ns, &node, &traits, &gpu, false);
    let run = |pool: &NovaCompute, nodes: Vec<NovaComputeNodeStatus>| {
        let view = view(pool.clone(), nodes);
        let (handle, patches) = (&handle, &patches);
        async move {
            let annotated = BTreeSet::new();
            let pool = traits::Pool {
                view: &view,
                annotated: &annotated,
            };
            traits::reconcile(client, handle, patches, &pool).await
        }
    };
    let (outcome, report) = run(&live, vec![entry.clone()]).await;
    let mut sorted = vec![gpu.clone(), traits.clone()];
    sorted.sort();
    ensure!(
        outcome.created == sorted,
        "both were created by this pool: {outcome:?}"
    );
    ensure!(
        report.reason == Reason::WaitingForHypervisorOperator,
        "{report:?}"
    );
    let written = hypervisors.get(&node).await?;
    ensure!(
        written.data["spec"]["customTraits"] == json!(sorted),
        "{:?}",
        written.data
    );
    ensure!(
        written
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|f| f.manager.as_deref() == Some("cobaltcore-operator")),
        "the patch is owned by cobaltcore-operator"
    );

    // The hypervisor operator (played) applies them and reports them in status.traits.
    let mut applied = sorted.clone();
    applied.push("HW_CPU_X86_AVX".into());
    hypervisors
        .patch_status(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "traits": applied, "numInstances": 0 } })),
        )
        .await?;
    let (outcome, report) = run(&live, vec![entry.clone()]).await;
    ensure!(report.reason == Reason::TraitsApplied, "{report:?}");
    ensure!(outcome.records.get(&node) == Some(&sorted), "{outcome:?}");

    // The pool is deleting: the node still records the traits, so they wait for it; once the
    // node is released they are deleted, except the one a resource provider still carries.
    let mut leaving = traits_pool(ns, &node, &traits, &gpu, true);
    leaving.status = Some(NovaComputeStatus {
        created_traits: sorted.clone(),
        ..Default::default()
    });
    entry.phase = NodePhase::Draining;
    entry.traits = sorted.clone();
    let (outcome, report) = run(&leaving, vec![entry]).await;
    ensure!(
        outcome.created == sorted && report.requeue.is_some(),
        "{outcome:?} {report:?}"
    );
    let placement = os.endpoint(PLACEMENT, Ports::PLACEMENT).await?;
    let admin = os.admin_token().await?;
    let headers = [
        ("X-Auth-Token", admin.as_str()),
        ("OpenStack-API-Version", "placement 1.20"),
    ];
    let rp = http::request(
        placement,
        "POST",
        "/resource_providers",
        &headers,
        Some(&json!({ "name": format!("rp-traits-{ns}") })),
    )
    .await?
    .json()?;
    let uuid = rp["uuid"].as_str().context("uuid")?.to_owned();
    let associated = http::request(
        placement,
        "PUT",
        &format!("/resource_providers/{uuid}/traits"),
        &headers,
        Some(&json!({ "resource_provider_generation": rp["generation"], "traits": [gpu] })),
    )
    .await?;
    ensure!(
        associated.status == 200,
        "associating: {}",
        associated.status
    );
    let (outcome, report) = run(&leaving, Vec::new()).await;
    ensure!(
        outcome.created.is_empty() && report.ok,
        "{outcome:?} {report:?}"
    );
    let events: Vec<(&str, &str)> = outcome
        .events
        .iter()
        .map(|e| (e.reason.as_str(), e.note.as_str()))
        .collect();
    ensure!(
        events
            == [
                ("TraitKept", format!("Kept custom trait {gpu}: Placement still associates it with a resource provider").as_str()),
                ("TraitDeleted", format!("Deleted custom trait {traits} from Placement: no NovaCompute of Nova nova declares it").as_str()),
            ],
        "{events:?}"
    );
    ensure!(
        client.delete_trait(&traits).await? == TraitDeletion::Deleted,
        "already gone"
    );
    http::request(
        placement,
        "DELETE",
        &format!("/resource_providers/{uuid}"),
        &headers,
        None,
    )
    .await?;
    ensure!(client.delete_trait(&gpu).await? == TraitDeletion::Deleted);
    hypervisors.delete(&node, &DeleteParams::default()).await?;
    Ok(())
}

/// One Services walk of pool `pool-a` over `nodes`, with a pod of the pool on `pods_on`.
async fn walk_once(
    client: &Client,
    ns: &str,
    nodes: Vec<NovaComputeNodeStatus>,
    pods_on: &[&str],
) -> services::Walk {
    let pool = services::Pool {
        view: view(pool_a(ns, false), nodes),
        handover: BTreeSet::new(),
        pods_on: pods_on.iter().map(|s| (*s).to_owned()).collect(),
    };
    services::walk(client, &pool).await
}

#[tokio::test]
async fn the_client_drives_the_real_keystone_nova_and_placement() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let (cp, os, kube, ns) = start("osclient", RELEASE).await?;

    // A wrong password: Keystone's 401, naming neither the password nor a token.
    let cluster = handle(cp, os, &ns).await?;
    let refused = pass_client(&cluster, &ns, "not-the-password-4711");
    let err = refused.aggregates().await.expect_err("refused");
    let text = err.to_string();
    ensure!(
        text.starts_with("POST /v3/auth/tokens: HTTP 401: "),
        "{text}"
    );
    ensure!(!text.contains("not-the-password-4711"), "{text}");
    ensure!(
        refused.compute_services().await.expect_err("kept") == err,
        "the failed login is kept for the pass"
    );

    let t = Instant::now();
    let client = pass_client(&cluster, &ns, os.nova_password());

    // Aggregates: create (zoned and not), 409 on a second create, mark, list, delete.
    let zone = format!("zone-{ns}");
    let zoned = client
        .create_aggregate(&zone, Some(&zone))
        .await?
        .context("a new name is created")?;
    ensure!(zoned.availability_zone == zone, "{zoned:?}");
    ensure!(
        client.create_aggregate(&zone, Some(&zone)).await?.is_none(),
        "a second create of the name answers 409"
    );
    let plain = client
        .create_aggregate("tenant_filter_tests", None)
        .await?
        .context("created")?;
    ensure!(plain.availability_zone.is_empty(), "{plain:?}");
    client
        .set_aggregate_metadata(zoned.id, "c5c3.io:nova", &format!("{ns}/nova"))
        .await?;
    let listed = client.aggregates().await?;
    let marked = listed.iter().find(|a| a.id == zoned.id).context("listed")?;
    ensure!(
        marked.metadata.get("c5c3.io:nova") == Some(&format!("{ns}/nova"))
            && marked.metadata.get("availability_zone") == Some(&zone),
        "{marked:?}"
    );
    client.delete_aggregate(zoned.id).await?;
    client.delete_aggregate(zoned.id).await?; // 404 counts as deleted
    client.delete_aggregate(plain.id).await?;
    ensure!(
        client.aggregates().await?.is_empty(),
        "both aggregates are gone"
    );
    let unknown = client
        .set_aggregate_metadata(zoned.id, "k", "v")
        .await
        .expect_err("no such aggregate")
        .to_string();
    ensure!(
        unknown.starts_with(&format!(
            "POST /v2.1/os-aggregates/{}/action: HTTP 404: ",
            zoned.id
        )),
        "{unknown}"
    );
    ensure!(!unknown.contains("gAAAA"), "a Fernet token in {unknown}");

    aggregates_step(&client, &ns).await?;
    traits_step(cp, os, &cluster, &client, &ns).await?;
    pools_through_the_controller(cp, os, &client, &ns).await?;

    // Traits: create, exist, 409 while a resource provider carries it, delete, gone.
    let name = format!(
        "CUSTOM_OSCLIENT_{}",
        ns.rsplit('-').next().unwrap_or("X").to_uppercase()
    );
    ensure!(client.ensure_trait(&name).await? == TraitEnsured::Created);
    ensure!(client.ensure_trait(&name).await? == TraitEnsured::Existed);
    let placement = os.endpoint(PLACEMENT, Ports::PLACEMENT).await?;
    let admin = os.admin_token().await?;
    let headers = [
        ("X-Auth-Token", admin.as_str()),
        ("OpenStack-API-Version", "placement 1.20"),
    ];
    let rp = http::request(
        placement,
        "POST",
        "/resource_providers",
        &headers,
        Some(&json!({ "name": format!("rp-{ns}") })),
    )
    .await?;
    ensure!(
        rp.status == 200,
        "creating a resource provider: {}",
        rp.status
    );
    let rp = rp.json()?;
    let uuid = rp["uuid"].as_str().context("uuid")?.to_owned();
    let associated = http::request(
        placement,
        "PUT",
        &format!("/resource_providers/{uuid}/traits"),
        &headers,
        Some(&json!({ "resource_provider_generation": rp["generation"], "traits": [name] })),
    )
    .await?;
    ensure!(
        associated.status == 200,
        "associating: {}",
        associated.status
    );
    ensure!(client.delete_trait(&name).await? == TraitDeletion::InUse);
    let removed = http::request(
        placement,
        "DELETE",
        &format!("/resource_providers/{uuid}"),
        &headers,
        None,
    )
    .await?;
    ensure!(
        removed.status == 204,
        "deleting the provider: {}",
        removed.status
    );
    ensure!(client.delete_trait(&name).await? == TraitDeletion::Deleted);
    ensure!(
        client.delete_trait(&name).await? == TraitDeletion::Deleted,
        "404 counts as deleted"
    );
    ensure!(
        matches!(
            client.ensure_trait("HW_CPU_X86_AVX").await,
            Err(OpenStackError::Status { status: 400, .. })
        ),
        "a standard trait is not a custom one"
    );
    eprintln!(
        "aggregates and traits against the real Nova and Placement in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    // Services: a fake-driver compute registers, is unmapped until discovery, then disabled,
    // counted and deleted once its pod is gone.
    let t = Instant::now();
    let host = names(&ns).host;
    start_conductor_and_compute(&kube, &ns, RELEASE).await?;
    let service = Wait::new("the compute service registering", TIMEOUT)
        .until(|| async {
            let client = pass_client(&cluster, &ns, os.nova_password());
            Ok(client
                .compute_services()
                .await?
                .into_iter()
                .find(|s| s.host == host && s.state == "up"))
        })
        .await?;
    ensure!(
        service.status == "enabled" && service.id.len() == 36,
        "{service:?}"
    );
    ensure!(
        !client.mapped_hosts().await?.contains(&host),
        "an undiscovered host is not listed"
    );

    // The Services step's walk over the node's life: registered but unmapped, mapped, leaving
    // (disabled once, no server counted), released (its pod still there, then gone).
    let w = walk_once(
        &client,
        &ns,
        vec![node_entry(&host, NodePhase::Pending)],
        &[],
    )
    .await;
    ensure!(
        w.unmapped == [host.clone()] && w.nodes[0].phase == NodePhase::Pending,
        "{w:?}"
    );
    ensure!(
        w.nodes[0].service_id.as_deref() == Some(service.id.as_str()),
        "{w:?}"
    );
    ensure!(
        services::report(&w, None).reason == Reason::WaitingForHostMapping,
        "{w:?}"
    );
    discover_hosts(&kube, &ns, RELEASE, "proof-discover-hosts").await?;
    let w = walk_once(&client, &ns, w.nodes, &[]).await;
    ensure!(
        w.nodes[0].phase == NodePhase::Active && w.unmapped.is_empty(),
        "{w:?}"
    );
    let mut leaving = w.nodes;
    leaving[0].phase = NodePhase::Draining;
    let w = walk_once(&client, &ns, leaving, &[]).await;
    ensure!(
        w.failure.is_none() && w.nodes[0].phase == NodePhase::Releasing,
        "{w:?}"
    );
    ensure!(
        w.events
            .iter()
            .map(|e| e.reason.as_str())
            .collect::<Vec<_>>()
            == ["ComputeServiceDisabled"],
        "{w:?}"
    );
    let reason = format!("c5c3.io: leaving NovaCompute {ns}/pool-a");
    let disabled = client
        .compute_services()
        .await?
        .into_iter()
        .find(|s| s.host == host)
        .context("still listed")?;
    ensure!(
        disabled.status == "disabled" && disabled.disabled_reason == reason,
        "{disabled:?}"
    );
    let w = walk_once(&client, &ns, w.nodes, &[host.as_str()]).await;
    ensure!(
        w.nodes.len() == 1 && w.events.is_empty(),
        "the service stays while the pod runs: {w:?}"
    );
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(kube.clone(), &ns);
    deployments
        .delete("nova-compute", &kube::api::DeleteParams::foreground())
        .await?;
    let w = walk_once(&client, &ns, w.nodes, &[]).await;
    ensure!(
        w.nodes.is_empty()
            && w.events
                .iter()
                .map(|e| e.reason.as_str())
                .collect::<Vec<_>>()
                == ["ComputeServiceDeleted"],
        "{w:?}"
    );
    ensure!(
        client.delete_service(&service.id).await? == ServiceDeletion::Deleted,
        "404 counts as deleted"
    );
    ensure!(
        !client
            .compute_services()
            .await?
            .iter()
            .any(|s| s.host == host),
        "the service is gone"
    );
    ensure!(
        !client.mapped_hosts().await?.contains(&host),
        "its host mapping went with it"
    );
    eprintln!(
        "the compute service registered, mapped, disabled and deleted in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
