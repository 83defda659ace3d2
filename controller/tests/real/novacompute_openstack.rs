//! The NovaCompute controller, in-process, against the real Keystone, Nova and Placement on the
//! real node: every proof here is a pool the controller reconciles, never a step called by hand
//! (`openstack_client` proves the client and the steps' calls). The Nova is the harness's
//! hand-written one (`nova_test_harness::openstack::nova`), reached through its Services'
//! routes; the pools' nodes are kwok nodes (kwok plays their DaemonSet pods), one of them named
//! after the host of the real fake-driver nova-compute the harness runs on the real node: the
//! played compute service of that node.
//!
//! In order:
//! 1. Traits: a pool declaring custom traits creates them in Placement (`TraitCreated`,
//!    `status.createdTraits`) and merge-patches the sorted list onto its node's Hypervisor under
//!    `cobaltcore-operator`; the hypervisor operator's half is played (`status.traits`), which the
//!    pool sees at its poll (nothing watches Hypervisors); the converged pool is quiet; traits
//!    taken off the pool are unpatched and, once the played operator dropped them, deleted
//!    (`TraitDeleted`) or, while another resource provider carries one, kept (Placement's 409,
//!    `TraitKept`); deleting the pool deletes its last created trait before the finalizer goes.
//! 2. Aggregates: one marked aggregate per zone and `tenant_filter_tests`; an Active node in no
//!    aggregate of its zone is `NodesOutsideZoneAggregate` until the onboarding (played) adds it.
//! 3. The Nova API stopped while a relabelled node drains: `ComputeAPIError` at the Aggregates
//!    row, pass after pass, with no error returned, nothing deleted and the ledger kept; once the
//!    API is back the drain resumes and completes, and the aggregate its service emptied goes.
//! 4. An emptied marked aggregate with someone else's metadata is kept (`AggregateKept`, recorded
//!    once over later passes, which write nothing), and deleted once that metadata is gone.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::{NodePhase, NovaCompute, NovaComputeNodeStatus};
use nova_controller::clusters::Registry;
use nova_controller::metrics::Metrics;
use nova_controller::novacompute::steps::aggregates::{MARKER_KEY, TENANT_FILTER_TESTS};
use nova_controller::openstack::trust::Trust;
use nova_controller::openstack::{self as os_client, Direct};
use nova_test_harness::fault_proxy::{Fault, FaultProxy};
use nova_test_harness::http;
use nova_test_harness::openstack::nova::{
    NOVA_API_PORT, TIMEOUT, names, start_conductor_and_compute,
};
use nova_test_harness::openstack::{KEYSTONE, OpenStack, PLACEMENT, Ports, keystone_url};
use serde_json::{Value, json};

use nova_testkit::prelude::{
    POOL_LABEL, POOL_TIMEOUT, condition_of, contract, create_tainted_zoned_node, events_on,
    fake_node_tolerations, mark_mirror, pool_reason, provide_pool_nova, put_secret, quiet_window,
    start_novacompute_for_pools_in, touch, touch_five_times, wait_pool,
};
use nova_testkit::proof_nova::{
    create_hypervisor, discover_hosts, routes, scale_api, service_user, start,
};
use nova_testkit::requests::Requests;
use nova_testkit::wait::Wait;

const RELEASE: &str = "2026.1";
/// A pool of the Nova `nova` in `ns` selecting the (tainted) nodes labelled `selector`, `extra`
/// merged into its spec.
fn pool(ns: &str, name: &str, selector: &str, extra: Value) -> Result<NovaCompute> {
    let mut spec = json!({"novaRef": {"name": "nova"}, "nodeSelector": {POOL_LABEL: selector},
                          "tolerations": fake_node_tolerations()});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec
    }))?)
}

/// The ledger entry of `node`.
fn entry<'a>(pool: &'a NovaCompute, node: &str) -> Option<&'a NovaComputeNodeStatus> {
    pool.status
        .iter()
        .flat_map(|s| &s.nodes)
        .find(|n| n.name == node)
}

fn created(pool: &NovaCompute) -> Vec<String> {
    pool.status
        .as_ref()
        .map(|s| s.created_traits.clone())
        .unwrap_or_default()
}

async fn label(nodes: &Api<Node>, name: &str, value: &str) -> Result<()> {
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {POOL_LABEL: value}}})),
        )
        .await?;
    Ok(())
}

/// One admin call to the proof nova-api at `api`; its status.
async fn nova_admin(
    os: &OpenStack,
    api: SocketAddr,
    method: &str,
    path: &str,
    body: Value,
) -> Result<u16> {
    let token = os.admin_token().await?;
    let headers = [
        ("X-Auth-Token", token.as_str()),
        ("X-OpenStack-Nova-API-Version", "2.53"),
    ];
    Ok(http::request(api, method, path, &headers, Some(&body))
        .await?
        .status)
}

/// One admin call to Placement (microversion 1.20); the response.
async fn placement_admin(
    os: &OpenStack,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<http::Response> {
    let placement = os.endpoint(PLACEMENT, Ports::PLACEMENT).await?;
    let token = os.admin_token().await?;
    let headers = [
        ("X-Auth-Token", token.as_str()),
        ("OpenStack-API-Version", "placement 1.20"),
    ];
    Ok(http::request(placement, method, path, &headers, body.as_ref()).await?)
}

/// Whether Placement knows the trait.
async fn trait_exists(os: &OpenStack, name: &str) -> Result<bool> {
    let status = placement_admin(os, "GET", &format!("/traits/{name}"), None)
        .await?
        .status;
    ensure!(
        status == 204 || status == 404,
        "GET /traits/{name}: {status}"
    );
    Ok(status == 204)
}

/// The hypervisor operator, played: it applied `traits` (and a standard trait beside them) to
/// the resource provider of `node`'s Hypervisor.
async fn play_traits(
    hypervisors: &Api<DynamicObject>,
    node: &str,
    mut traits: Vec<String>,
) -> kube::Result<DynamicObject> {
    traits.push("HW_CPU_X86_AVX".into());
    hypervisors
        .patch_status(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "traits": traits, "numInstances": 0 } })),
        )
        .await
}

/// The notes of the events `reason` on the object `name`, each with how often it was recorded.
async fn notes(client: &Client, ns: &str, name: &str, reason: &str) -> Result<Vec<(String, i32)>> {
    Ok(events_on(client, ns, name)
        .await?
        .into_iter()
        .filter(|(r, _, _)| r == reason)
        .map(|(_, note, n)| (note, n))
        .collect())
}

/// What a pass over an unchanged pool may not change: the controller's NovaCompute status
/// writes, the events recorded on the pool, and the tokens it asked Keystone for (a pass
/// reuses the kept one: issue 32, "tokens and calls to OpenStack reused").
async fn quiet(
    client: &Client,
    (metrics, requests): (&Metrics, &Requests),
    ns: &str,
    name: &str,
) -> Result<(usize, i32, u64)> {
    let recorded = events_on(client, ns, name)
        .await?
        .iter()
        .map(|(_, _, n)| n)
        .sum();
    let logins = metrics
        .openstack_requests
        .total
        .with_label_values(&["keystone", "POST", "201"])
        .get();
    Ok((requests.writes("novacomputes", "status"), recorded, logins))
}

/// Touches the pool `name` (annotation `value`) and waits for the pass `passes` counts.
async fn one_pass(
    pools: &Api<NovaCompute>,
    name: &str,
    value: &str,
    passes: &impl Fn() -> u64,
) -> Result<()> {
    let before = passes();
    touch(pools, name, value).await;
    Wait::new(format!("the pass after {value}"), TIMEOUT)
        .until(|| async { Ok((passes() > before).then_some(())) })
        .await?;
    Ok(())
}

/// How long a pass may take after the step its pass count follows: its status write comes
/// at its end (nothing the controller publishes says it went idle).
const PASS_TAIL: Duration = Duration::from_secs(5);

/// Five passes over the unchanged, converged pool `name` write no status, record no event and
/// ask Keystone for no token.
/// Converged first: passes until one writes no status (the condition a test waited for can
/// hold while the pool's other rows still move, as they did on a loaded node). The counters are
/// read once the pass before has ended, and once a pass after the fifth has.
async fn five_quiet_passes(
    client: &Client,
    (metrics, requests): (&Metrics, &Requests),
    ns: &str,
    name: &str,
    step: &'static str,
) -> Result<()> {
    let passes = step_passes(metrics, step);
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    let settles = std::sync::atomic::AtomicUsize::new(0);
    Wait::new(
        format!("{name}: a pass that writes no status"),
        POOL_TIMEOUT,
    )
    .until(|| async {
        let written = requests.writes("novacomputes", "status");
        let n = settles.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        one_pass(&pools, name, &format!("{name}-settle-{n}"), &passes).await?;
        quiet_window(PASS_TAIL).await;
        Ok((requests.writes("novacomputes", "status") == written).then_some(()))
    })
    .await?;
    let before = quiet(client, (metrics, requests), ns, name).await?;
    let status = pools.get(name).await?.status;
    touch_five_times(&pools, name, name, &passes).await;
    one_pass(&pools, name, &format!("{name}-settled"), &passes).await?;
    quiet_window(PASS_TAIL).await;
    let after = quiet(client, (metrics, requests), ns, name).await?;
    ensure!(
        before == after,
        "{name} converged writes no status, records no event and asks for no token (status writes, events, tokens): {before:?} -> {after:?}\nthe status before: {}\nand after: {}",
        serde_json::to_string(&status)?,
        serde_json::to_string(&pools.get(name).await?.status)?
    );
    Ok(())
}

fn step_passes(metrics: &Metrics, step: &'static str) -> impl Fn() -> u64 + use<> {
    let metrics = metrics.clone();
    move || {
        metrics
            .reconcile_duration
            .with_label_values(&[step])
            .get_sample_count()
    }
}

/// Deletes the pool and waits until its finalizer released it.
async fn delete_pool(pools: &Api<NovaCompute>, name: &str) -> Result<()> {
    pools.delete(name, &DeleteParams::default()).await?;
    Wait::new(format!("{name} released"), POOL_TIMEOUT)
        .until(|| async { Ok(pools.get_opt(name).await?.is_none().then_some(())) })
        .await?;
    Ok(())
}

/// Step 1: the traits of a pool on a kwok node with a real `kvm.cloud.sap/v1` Hypervisor.
async fn traits(
    client: &Client,
    os: &OpenStack,
    ns: &str,
    (metrics, requests): (&Metrics, &Requests),
) -> Result<()> {
    let suffix = ns.rsplit('-').next().unwrap_or("x").to_uppercase();
    let [base, gpu, fpga] = ["POOL", "GPU", "FPGA"].map(|t| format!("CUSTOM_{t}_{suffix}"));
    let mut all = vec![base.clone(), gpu.clone(), fpga.clone()];
    all.sort();
    let node = format!("hv-{ns}");
    let selector = format!("t-{ns}");
    let nodes: Api<Node> = Api::all(client.clone());
    create_tainted_zoned_node(&nodes, &node, &selector, &format!("tz-{ns}")).await;
    let hypervisors = create_hypervisor(client, &node).await?;
    let play = |traits: Vec<String>| play_traits(&hypervisors, &node, traits);
    let custom_traits = || async {
        Ok::<_, anyhow::Error>(hypervisors.get(&node).await?.data["spec"]["customTraits"].clone())
    };

    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    let spec = json!({"traits": [base], "hostTraits": [{"node": node, "traits": [gpu, fpga]}]});
    pools
        .create(
            &PostParams::default(),
            &pool(ns, "pool-t", &selector, spec)?,
        )
        .await?;
    let p = wait_pool(&pools, "pool-t", "its traits created", |p| {
        created(p) == all
    })
    .await?;
    ensure!(
        condition_of(&p, "TraitsReady").map(|(_, r, _)| r) == Some("WaitingForHypervisorOperator"),
        "{:?}",
        condition_of(&p, "TraitsReady")
    );
    for name in &all {
        ensure!(trait_exists(os, name).await?, "{name} is in Placement");
    }
    let mut announced: Vec<String> = notes(client, ns, "pool-t", "TraitCreated")
        .await?
        .into_iter()
        .map(|(note, _)| note)
        .collect();
    announced.sort();
    ensure!(
        announced
            == all
                .iter()
                .map(|t| format!("Created custom trait {t} in Placement"))
                .collect::<Vec<_>>(),
        "{announced:?}"
    );
    let written = hypervisors.get(&node).await?;
    ensure!(
        written.data["spec"]["customTraits"] == json!(all),
        "the sorted list is patched: {:?}",
        written.data
    );
    ensure!(
        written
            .managed_fields()
            .iter()
            .any(|f| f.manager.as_deref() == Some("cobaltcore-operator")),
        "the patch is owned by cobaltcore-operator"
    );

    play(all.clone()).await?;
    let played = Instant::now();
    let p = wait_pool(&pools, "pool-t", "TraitsReady=TraitsApplied", |p| {
        condition_of(p, "TraitsReady").is_some_and(|(_, r, _)| r == "TraitsApplied")
    })
    .await?;
    eprintln!(
        "pool-t saw the played operator's status.traits {:.1}s after it was written (its poll)",
        played.elapsed().as_secs_f64()
    );
    ensure!(
        condition_of(&p, "TraitsReady").map(|(_, _, m)| m)
            == Some("Custom traits applied on 1 nodes")
    );
    ensure!(
        entry(&p, &node).map(|e| &e.traits) == Some(&all),
        "the node's trait record: {:?}",
        entry(&p, &node)
    );
    let version = hypervisors.get(&node).await?.resource_version();
    five_quiet_passes(client, (metrics, requests), ns, "pool-t", "Traits").await?;
    ensure!(
        hypervisors.get(&node).await?.resource_version() == version,
        "a converged pool writes no Hypervisor"
    );

    // Another resource provider carries the FPGA trait; the pool stops declaring both host
    // traits.
    let rp = placement_admin(
        os,
        "POST",
        "/resource_providers",
        Some(json!({ "name": format!("rp-{ns}") })),
    )
    .await?
    .json()?;
    let uuid = rp["uuid"].as_str().context("uuid")?.to_owned();
    let associated = placement_admin(
        os,
        "PUT",
        &format!("/resource_providers/{uuid}/traits"),
        Some(json!({ "resource_provider_generation": rp["generation"], "traits": [fpga] })),
    )
    .await?;
    ensure!(
        associated.status == 200,
        "associating: {}",
        associated.status
    );
    pools
        .patch(
            "pool-t",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hostTraits": null}})),
        )
        .await?;
    Wait::new("the host traits unpatched", POOL_TIMEOUT)
        .until(|| async { Ok((custom_traits().await? == json!([base])).then_some(())) })
        .await?;
    let p = pools.get("pool-t").await?;
    ensure!(
        created(&p) == all,
        "the node still records them, so they wait: {:?}",
        p.status
    );
    play(vec![base.clone()]).await?;
    wait_pool(&pools, "pool-t", "the host traits dropped", |p| {
        created(p) == [base.clone()]
    })
    .await?;
    ensure!(
        notes(client, ns, "pool-t", "TraitKept").await?
            == [(
                format!(
                    "Kept custom trait {fpga}: Placement still associates it with a resource provider"
                ),
                1
            )]
    );
    ensure!(
        notes(client, ns, "pool-t", "TraitDeleted").await?
            == [(
                format!(
                    "Deleted custom trait {gpu} from Placement: no NovaCompute of Nova nova declares it"
                ),
                1
            )]
    );
    ensure!(!trait_exists(os, &gpu).await? && trait_exists(os, &fpga).await?);

    delete_pool(&pools, "pool-t").await?;
    ensure!(
        !trait_exists(os, &base).await?,
        "the deleted pool's last created trait is gone"
    );
    ensure!(
        notes(client, ns, "pool-t", "TraitDeleted").await?.len() == 2,
        "{:?}",
        events_on(client, ns, "pool-t").await?
    );
    placement_admin(os, "DELETE", &format!("/resource_providers/{uuid}"), None).await?;
    placement_admin(os, "DELETE", &format!("/traits/{fpga}"), None).await?;
    hypervisors.delete(&node, &DeleteParams::default()).await?;
    nodes.delete(&node, &DeleteParams::default()).await?;
    Ok(())
}

/// The names of the aggregates in the real Nova, sorted.
async fn aggregate_names(view: &os_client::Client) -> Result<Vec<String>> {
    let mut names: Vec<String> = view
        .aggregates()
        .await?
        .into_iter()
        .map(|a| a.name)
        .collect();
    names.sort();
    Ok(names)
}

async fn aggregate_id(view: &os_client::Client, name: &str) -> Result<i64> {
    Ok(view
        .aggregates()
        .await?
        .into_iter()
        .find(|a| a.name == name)
        .with_context(|| format!("aggregate {name}"))?
        .id)
}

/// Steps 2 to 4: a pool on the proof Nova's compute host (zone A, the played compute service)
/// and a second kwok node (zone B, no service).
async fn aggregates_and_the_drain(
    client: &Client,
    os: &OpenStack,
    view: &os_client::Client,
    api: SocketAddr,
    ns: &str,
    (metrics, requests): (&Metrics, &Requests),
) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    put_secret(
        &secrets,
        "nova-compute-config",
        &contract(os.nova_password()),
    )
    .await;
    mark_mirror(&secrets, "nova-compute-config").await;
    let selector = format!("d-{ns}");
    let (za, zb) = (format!("za-{ns}"), format!("zb-{ns}"));
    let other = format!("agg-node-{ns}");
    let host = names(ns).host;
    let nodes: Api<Node> = Api::all(client.clone());
    create_tainted_zoned_node(&nodes, &host, &selector, &za).await;
    create_tainted_zoned_node(&nodes, &other, &selector, &zb).await;
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    pools
        .create(
            &PostParams::default(),
            &pool(ns, "pool-d", &selector, json!({}))?,
        )
        .await?;

    // 2. The zone aggregates, and the Active node outside them until it is onboarded.
    let message = pool_reason(
        &pools,
        "pool-d",
        "AggregatesReady",
        "NodesOutsideZoneAggregate",
    )
    .await?;
    ensure!(
        message == format!("Active nodes in no aggregate of their zone: {host} ({za})"),
        "{message}"
    );
    let p = pools.get("pool-d").await?;
    let service = entry(&p, &host)
        .filter(|e| e.phase == NodePhase::Active)
        .and_then(|e| e.service_id.clone())
        .with_context(|| format!("{host} Active with its service: {:?}", p.status))?;
    ensure!(
        entry(&p, &other).map(|e| e.phase) == Some(NodePhase::Pending),
        "{:?}",
        p.status
    );
    let marker = format!("{ns}/nova");
    let listed = view.aggregates().await?;
    for (name, zone) in [
        (&za, za.as_str()),
        (&zb, zb.as_str()),
        (&TENANT_FILTER_TESTS.to_owned(), ""),
    ] {
        let a = listed
            .iter()
            .find(|a| &a.name == name)
            .with_context(|| format!("{name} in Nova"))?;
        ensure!(
            a.availability_zone == zone && a.metadata.get(MARKER_KEY) == Some(&marker),
            "{a:?}"
        );
    }
    let za_id = aggregate_id(view, &za).await?;
    let add = json!({"add_host": {"host": host}});
    let path = format!("/v2.1/os-aggregates/{za_id}/action");
    ensure!(
        nova_admin(os, api, "POST", &path, add).await? == 200,
        "onboarding {host}"
    );
    touch(&pools, "pool-d", "onboarded").await;
    let mut ensured = [za.clone(), zb.clone(), TENANT_FILTER_TESTS.to_owned()];
    ensured.sort();
    let message = pool_reason(&pools, "pool-d", "AggregatesReady", "AggregatesEnsured").await?;
    ensure!(
        message == format!("Host aggregates in place: {}", ensured.join(", ")),
        "{message}"
    );

    // 3. The Nova API stops; then the host is relabelled and drains.
    scale_api(client, ns, 0).await?;
    label(&nodes, &host, "elsewhere").await?;
    let p = wait_pool(
        &pools,
        "pool-d",
        "ComputeAPIError with the host Draining",
        |p| {
            condition_of(p, "AggregatesReady").is_some_and(|(_, r, _)| r == "ComputeAPIError")
                && entry(p, &host).is_some_and(|e| e.phase == NodePhase::Draining)
        },
    )
    .await?;
    let (status, _, message) = condition_of(&p, "AggregatesReady").context("AggregatesReady")?;
    ensure!(
        status == "False" && message.starts_with("listing aggregates: GET /v2.1/os-aggregates: "),
        "{message}"
    );
    ensure!(!message.contains(os.nova_password()), "{message}");
    let draining = entry(&p, &host).cloned().context("the host")?;
    ensure!(
        draining.service_id.as_deref() == Some(service.as_str())
            && draining.zone.as_deref() == Some(za.as_str()),
        "the entry keeps its service and zone: {draining:?}"
    );
    let on_host = ListParams::default()
        .labels("app.kubernetes.io/instance=pool-d")
        .fields(&format!("spec.nodeName={host}"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    Wait::new("the held term keeps the host's pod", POOL_TIMEOUT)
        .until(|| async {
            let listed = pods.list(&on_host).await?.items;
            Ok(listed
                .iter()
                .any(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .then_some(()))
        })
        .await?;
    let ledger = p.status.as_ref().map(|s| s.nodes.clone());
    let errors = metrics
        .reconcile_errors
        .with_label_values(&["Aggregates", "AggregatesReady"]);
    let (errors_before, aggregates) = (errors.get(), step_passes(metrics, "Aggregates"));
    let mut seen = vec![(aggregates(), Instant::now())];
    while seen.len() < 3 {
        let (count, at) = *seen.last().context("a pass")?;
        ensure!(at.elapsed() < POOL_TIMEOUT, "no pass retried the Nova API");
        if aggregates() > count {
            seen.push((aggregates(), Instant::now()));
        }
        // A sampler timestamping passes (the gaps between them are the measurement), not a
        // wait for state: a coarser poll would blur the gaps.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let gaps: Vec<String> = seen
        .windows(2)
        .map(|w| format!("{:.1}s", (w[1].1 - w[0].1).as_secs_f64()))
        .collect();
    eprintln!(
        "passes while the Nova API was down came after {}",
        gaps.join(", ")
    );
    let p = pools.get("pool-d").await?;
    ensure!(
        p.status.as_ref().map(|s| s.nodes.clone()) == ledger,
        "the ledger is kept: {:?}",
        p.status
    );
    ensure!(
        condition_of(&p, "AggregatesReady").map(|(_, r, _)| r) == Some("ComputeAPIError"),
        "{:?}",
        condition_of(&p, "AggregatesReady")
    );
    ensure!(
        errors.get() == errors_before,
        "a failed call returns no error"
    );
    for reason in [
        "ComputeServiceDisabled",
        "ComputeServiceDeleted",
        "AggregateDeleted",
    ] {
        ensure!(
            notes(client, ns, "pool-d", reason).await?.is_empty(),
            "nothing happened in Nova: {reason}"
        );
    }

    scale_api(client, ns, 1).await?;
    let back = Instant::now();
    wait_pool(&pools, "pool-d", "the host released", |p| {
        entry(p, &host).is_none()
    })
    .await?;
    eprintln!(
        "the drain completed {:.1}s after the Nova API was back",
        back.elapsed().as_secs_f64()
    );
    ensure!(
        notes(client, ns, "pool-d", "ComputeServiceDisabled").await?
            == [(
                format!("Disabled the compute service of node {host}: it left the pool"),
                1
            )]
    );
    ensure!(
        notes(client, ns, "pool-d", "ComputeServiceDeleted").await?
            == [(
                format!(
                    "Deleted the compute service of node {host}; Nova dropped its host mapping with it"
                ),
                1
            )]
    );
    ensure!(
        !view
            .compute_services()
            .await?
            .iter()
            .any(|s| s.host == host),
        "the service is gone"
    );
    let mut left = vec![zb.clone(), TENANT_FILTER_TESTS.to_owned()];
    left.sort();
    Wait::new("the emptied zone aggregate deleted", POOL_TIMEOUT)
        .until(|| async { Ok((aggregate_names(view).await? == left).then_some(())) })
        .await?;
    // The pass publishes its events after its calls: the aggregate is gone from Nova a moment
    // before the event is recorded (a run read the events in between).
    let deleted = Wait::new("the AggregateDeleted event", POOL_TIMEOUT)
        .until(|| async {
            let notes = notes(client, ns, "pool-d", "AggregateDeleted").await?;
            Ok((!notes.is_empty()).then_some(notes))
        })
        .await?;
    ensure!(
        deleted
            == [(
                format!("Deleted host aggregate {za}: no NovaCompute of Nova nova needs it"),
                1
            )],
        "{deleted:?}"
    );

    // 4. The second node leaves too; its zone aggregate carries someone else's metadata.
    let zb_id = aggregate_id(view, &zb).await?;
    view.set_aggregate_metadata(zb_id, "owner", "team-a")
        .await?;
    label(&nodes, &other, "elsewhere").await?;
    let kept = format!(
        "Kept empty host aggregate {zb}: it carries metadata the operator did not set (owner)"
    );
    Wait::new("AggregateKept", POOL_TIMEOUT)
        .until(|| async {
            let recorded = notes(client, ns, "pool-d", "AggregateKept").await?;
            Ok((!recorded.is_empty()).then_some(()))
        })
        .await?;
    five_quiet_passes(client, (metrics, requests), ns, "pool-d", "Aggregates").await?;
    ensure!(
        notes(client, ns, "pool-d", "AggregateKept").await? == [(kept, 1)],
        "recorded once"
    );
    ensure!(aggregate_names(view).await? == left, "kept");
    let clear = json!({"set_metadata": {"metadata": {"owner": null}}});
    let path = format!("/v2.1/os-aggregates/{zb_id}/action");
    ensure!(nova_admin(os, api, "POST", &path, clear).await? == 200);
    touch(&pools, "pool-d", "cleared").await;
    Wait::new("the cleared aggregate deleted", POOL_TIMEOUT)
        .until(|| async {
            Ok((aggregate_names(view).await? == [TENANT_FILTER_TESTS]).then_some(()))
        })
        .await?;

    delete_pool(&pools, "pool-d").await?;
    ensure!(
        aggregate_names(view).await?.is_empty(),
        "tenant_filter_tests went with the last pool"
    );
    for node in [host.as_str(), other.as_str()] {
        nodes.delete(node, &DeleteParams::default()).await?;
    }
    Ok(())
}

#[tokio::test]
async fn pools_keep_traits_and_aggregates_and_drain_through_an_outage() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let (_, os, client, ns) = start("nc-openstack", RELEASE).await?;
    start_conductor_and_compute(&client, &ns, RELEASE).await?;
    let routes = routes(&client, os, &ns).await;
    let api = routes[&format!("nova-api.{ns}.svc.cluster.local:{NOVA_API_PORT}")];
    let view = service_user(
        Arc::new(Direct::routed(routes.clone(), Trust::default())),
        &ns,
        os.nova_password(),
    );
    let (metrics, requests) = start_pools(&client, os, &ns, routes).await;

    let t = Instant::now();
    traits(&client, os, &ns, (&metrics, &requests)).await?;
    eprintln!(
        "traits through the controller in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let host = names(&ns).host;
    Wait::new("the compute service up", TIMEOUT)
        .until(|| async {
            Ok(view
                .compute_services()
                .await?
                .into_iter()
                .find(|s| s.host == host && s.state == "up"))
        })
        .await?;
    discover_hosts(&client, &ns, RELEASE, "proof-discover-hosts").await?;
    aggregates_and_the_drain(&client, os, &view, api, &ns, (&metrics, &requests)).await?;
    eprintln!(
        "aggregates and the drain through an outage in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    nova_testkit::real::finish(&client, &ns).await;
    Ok(())
}

/// The pools' Nova in `ns` and the NovaCompute controller for its pools, in-process, reaching
/// the services through `routes`.
async fn start_pools(
    client: &Client,
    os: &OpenStack,
    ns: &str,
    routes: std::collections::BTreeMap<String, SocketAddr>,
) -> (Metrics, Arc<Requests>) {
    provide_pool_nova(client, ns, &keystone_url(), os.nova_password()).await;
    start_novacompute_for_pools_in(
        client.clone(),
        ns,
        Registry::default().route_services(routes),
    )
    .await
}

/// The first condition of `pool` at `ComputeAPIError`, as `type: message`.
fn api_error(pool: &NovaCompute) -> Option<String> {
    pool.status
        .iter()
        .flat_map(|s| &s.conditions)
        .find(|c| c.reason == "ComputeAPIError")
        .map(|c| format!("{}: {}", c.type_, c.message))
}

/// Injects: Keystone and Placement behind fault proxies on loopback
/// (`nova_test_harness::fault_proxy`, the controller's routes pointed at them): Keystone
/// answering 503, then cutting its answers after their headers, while a new pool must log in;
/// then, with the pool converged, Placement answering 503, holding every request 9 s (under the
/// client's 10 s timeout), and cutting its answers after their headers, each while the pool
/// must create a trait.
/// Asserts: each failing fault moves a condition to `ComputeAPIError` (the message naming it)
/// within the pool wait, and nothing is created or deleted meanwhile (no trait without a token;
/// the pool's traits stay in Placement and on the node's Hypervisor); the 9 s delay only slows
/// the pass; Placement's answer to a trait's creation has no body, so cut after its headers it
/// is whole and the trait is created; once a fault ends the pool converges by itself;
/// Placement's faults cost no new Keystone token (the one token is reused throughout).
#[tokio::test]
async fn keystone_and_placement_brownouts_delete_nothing_and_recover() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let (_, os, client, ns) = start("nc-brownout", RELEASE).await?;
    let mut routes = routes(&client, os, &ns).await;
    let service = |name: &str, port: u16| {
        format!(
            "{name}.{}.svc.cluster.local:{port}",
            nova_test_harness::openstack::NAMESPACE
        )
    };
    let keystone_at = service(KEYSTONE, Ports::KEYSTONE);
    let placement_at = service(PLACEMENT, Ports::PLACEMENT);
    let keystone = FaultProxy::start(routes[&keystone_at]).await?;
    let placement = FaultProxy::start(routes[&placement_at]).await?;
    routes.insert(keystone_at, keystone.addr());
    routes.insert(placement_at, placement.addr());
    let (metrics, _) = start_pools(&client, os, &ns, routes).await;
    let logins = || {
        metrics
            .openstack_requests
            .total
            .with_label_values(&["keystone", "POST", "201"])
            .get()
    };

    let suffix = ns.rsplit('-').next().unwrap_or("x").to_uppercase();
    let trait_named = |n: usize| format!("CUSTOM_BROWNOUT_{n}_{suffix}");
    let node = format!("hv-{ns}");
    let selector = format!("b-{ns}");
    let nodes: Api<Node> = Api::all(client.clone());
    create_tainted_zoned_node(&nodes, &node, &selector, &format!("bz-{ns}")).await;
    let hypervisors = create_hypervisor(&client, &node).await?;
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), &ns);
    let with_traits = |traits: &[String]| json!({"spec": {"traits": traits}});

    // Keystone browns out while the new pool must log in: nothing is created without a token.
    let mut traits = vec![trait_named(0)];
    let mut seen = String::new();
    for fault in [Fault::Unavailable, Fault::DropAfterHeaders] {
        keystone.inject(fault);
        let started = Instant::now();
        if pools.get_opt("pool-b").await?.is_none() {
            let spec = json!({"traits": traits});
            pools
                .create(
                    &PostParams::default(),
                    &pool(&ns, "pool-b", &selector, spec)?,
                )
                .await?;
        } else {
            touch(&pools, "pool-b", &format!("{fault:?}")).await;
        }
        let p = wait_pool(
            &pools,
            "pool-b",
            &format!("Keystone {fault:?} reported"),
            |p| api_error(p).is_some_and(|e| e != seen),
        )
        .await?;
        seen = api_error(&p).unwrap_or_default();
        eprintln!(
            "Keystone {fault:?}: {seen:?} after {:.1}s",
            started.elapsed().as_secs_f64()
        );
        ensure!(
            !trait_exists(os, &traits[0]).await?,
            "no trait is created without a token"
        );
    }
    keystone.inject(Fault::None);
    touch(&pools, "pool-b", "keystone-back").await;
    let play = |traits: Vec<String>| play_traits(&hypervisors, &node, traits);
    let applied = |traits: Vec<String>| {
        let pools = &pools;
        async move {
            wait_pool(pools, "pool-b", &format!("{traits:?} created"), |p| {
                created(p) == traits
            })
            .await?;
            play(traits).await?;
            wait_pool(pools, "pool-b", "TraitsReady=TraitsApplied", |p| {
                condition_of(p, "TraitsReady").is_some_and(|(_, r, _)| r == "TraitsApplied")
            })
            .await?;
            anyhow::Ok(())
        }
    };
    applied(traits.clone()).await?;
    let logged_in = logins();

    // Placement browns out while the converged pool must create a trait.
    for (n, fault) in [
        Fault::Unavailable,
        Fault::Delay(Duration::from_secs(9)),
        Fault::DropAfterHeaders,
    ]
    .into_iter()
    .enumerate()
    {
        placement.inject(fault);
        let started = Instant::now();
        let mut wanted = traits.clone();
        wanted.push(trait_named(n + 1));
        wanted.sort();
        pools
            .patch(
                "pool-b",
                &PatchParams::default(),
                &Patch::Merge(with_traits(&wanted)),
            )
            .await?;
        if fault != Fault::Unavailable {
            applied(wanted.clone()).await?;
            eprintln!(
                "Placement {fault:?}: the trait created and applied after {:.1}s",
                started.elapsed().as_secs_f64()
            );
        } else {
            let p = wait_pool(
                &pools,
                "pool-b",
                &format!("Placement {fault:?} reported"),
                |p| condition_of(p, "TraitsReady").is_some_and(|(_, r, _)| r == "ComputeAPIError"),
            )
            .await?;
            eprintln!(
                "Placement {fault:?}: {:?} after {:.1}s",
                api_error(&p),
                started.elapsed().as_secs_f64()
            );
            for name in &traits {
                ensure!(
                    trait_exists(os, name).await?,
                    "{name} kept in Placement through {fault:?}"
                );
            }
            let custom = hypervisors.get(&node).await?.data["spec"]["customTraits"].clone();
            ensure!(
                traits.iter().all(|t| custom
                    .as_array()
                    .is_some_and(|a| a.iter().any(|c| c == t.as_str()))),
                "the node's custom traits kept through {fault:?}: {custom}"
            );
            placement.inject(Fault::None);
            touch(&pools, "pool-b", &format!("placement-back-{n}")).await;
            applied(wanted.clone()).await?;
            eprintln!(
                "Placement {fault:?}: recovered {:.1}s after the fault began",
                started.elapsed().as_secs_f64()
            );
        }
        placement.inject(Fault::None);
        traits = wanted;
    }
    ensure!(
        logins() == logged_in,
        "Placement's faults cost no new token: {logged_in} logins before, {} after",
        logins()
    );
    delete_pool(&pools, "pool-b").await?;
    for name in &traits {
        ensure!(
            !trait_exists(os, name).await?,
            "{name} deleted with the pool"
        );
    }
    hypervisors.delete(&node, &DeleteParams::default()).await?;
    nodes.delete(&node, &DeleteParams::default()).await?;
    nova_testkit::real::finish(&client, &ns).await;
    Ok(())
}
