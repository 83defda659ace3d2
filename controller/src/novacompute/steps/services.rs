//! ServicesReady (`novacompute.md` §4.3): the ledger follows Nova's compute services. Pending
//! and Active follow the registration (and a registered node turns Active only once its host is
//! mapped into the cell); a Draining node's service is disabled once and its servers counted;
//! a Releasing node's service is deleted once no pod of the pool runs there. The pool never
//! migrates a server and never enables a service. Deleting the service is the point of no
//! return: Nova drops the host from every aggregate, its resource providers and its mapping.
//!
//! Longer than 500 lines on purpose: the ledger walk's observe, decide and settle, the drain's
//! order and the discovery Job's hand-off are one state machine; split, they would share it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::NovaComputeConditionType as C;
use nova_api::events::EventReason;
use nova_api::labels::novacompute_selector;
use nova_api::v1alpha1::NovaCompute;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::clusters::ClusterError;
use crate::clusters::{Caching, KindSpec};
use crate::novacompute::compute_api::{PoolView, Report};
use crate::novacompute::resolved::NovaInputs;
use crate::novacompute::resolved::{NodeSets, Resolved, StatusUpdate};
use crate::novacompute::{
    NovaComputePass, NovaComputePlan, REQUEUE_COMPUTE_DRAIN_POLLING,
    REQUEUE_COMPUTE_RELEASE_POLLING, REQUEUE_COMPUTE_SERVICE_POLLING,
    REQUEUE_HOST_DISCOVERY_POLLING, compute_api, discover_hosts, nova_side,
};
use crate::pipeline::StepFuture;
use crate::pipeline::uses::{Uses, reads};

use nova_api::conditions::Reason;
use nova_api::v1alpha1::{NodePhase, NovaComputeNodeStatus};

use crate::objects::EventNote;
use crate::openstack::Client;
use crate::openstack::action::{Action, Done};
use crate::openstack::nova::{ComputeService, ServiceDeletion};
use crate::pipeline::effects;

use crate::openstack::action::failed;

/// The poll a node needs in `phase`.
fn poll(phase: NodePhase) -> Duration {
    match phase {
        NodePhase::Releasing => REQUEUE_COMPUTE_RELEASE_POLLING,
        NodePhase::Draining | NodePhase::Pending => REQUEUE_COMPUTE_DRAIN_POLLING,
        NodePhase::Active | NodePhase::Conflict => REQUEUE_COMPUTE_SERVICE_POLLING,
    }
}

/// What the walk works on (owned: the step's settle keeps it): the shared view of the pool,
/// whose ledger the Nodes step left sorted by name, and what only this step reads.
#[derive(Clone, Debug)]
pub struct Pool {
    /// The pool of this pass.
    pub view: PoolView,
    /// Releasing nodes another pool took over: dropped without a call.
    pub handover: BTreeSet<String>,
    /// Nodes on which a non-finished pod of this pool still runs (listed only while a node is
    /// Releasing).
    pub pods_on: BTreeSet<String>,
}

/// Where the walk left the ledger.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Walk {
    /// The new ledger (dropped entries removed; unwalked entries unchanged after a failure).
    pub nodes: Vec<NovaComputeNodeStatus>,
    /// Pending nodes with a registered service and no host mapping yet (host discovery).
    pub unmapped: Vec<String>,
    /// The events.
    pub events: Vec<EventNote>,
    /// The failed call that stopped the walk, as the condition message.
    pub failure: Option<String>,
    /// The failed hypervisor listing (those nodes stayed Pending, the walk went on).
    pub mapping_failure: Option<String>,
    /// The shortest poll any node needs at entry or at exit.
    pub poll: Duration,
}

fn copy_service(entry: &mut NovaComputeNodeStatus, service: Option<&ComputeService>) {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    entry.service_id = service.and_then(|s| some(&s.id));
    entry.service_status = service.and_then(|s| some(&s.status));
    entry.service_state = service.and_then(|s| some(&s.state));
    entry.disabled_reason = service.and_then(|s| some(&s.disabled_reason));
}

/// What the walk reads before it decides.
#[derive(Clone, Debug)]
pub struct Listed {
    /// The compute services by host, or the failed listing's message.
    pub services: Result<BTreeMap<String, ComputeService>, String>,
    /// The hosts mapped into the cell; None when their listing failed.
    pub mapped: Option<BTreeSet<String>>,
    /// The failed hypervisor listing.
    pub mapping_failure: Option<String>,
}

/// Lists the services once, and the mapped hosts when a Pending node has registered.
pub async fn observe(client: &Client, pool: &Pool) -> Listed {
    let services: BTreeMap<String, ComputeService> = match client.compute_services().await {
        Ok(listed) => listed.into_iter().map(|s| (s.host.clone(), s)).collect(),
        Err(e) => {
            return Listed {
                services: Err(failed("listing compute services", &e)),
                mapped: None,
                mapping_failure: None,
            };
        }
    };
    let needs_mapping = pool
        .view
        .nodes
        .iter()
        .any(|n| n.phase == NodePhase::Pending && services.contains_key(&n.name));
    let (mapped, mapping_failure) = if needs_mapping {
        match client.mapped_hosts().await {
            Ok(hosts) => (Some(hosts), None),
            Err(e) => (None, Some(failed("listing hypervisors", &e))),
        }
    } else {
        (Some(BTreeSet::new()), None)
    };
    Listed {
        services: Ok(services),
        mapped,
        mapping_failure,
    }
}

/// How the reason a pool disables a leaving node's service with begins.
const LEAVING: &str = "c5c3.io: leaving NovaCompute ";

/// The reason a leaving node's service is disabled with.
fn disable_reason(pool: &Pool) -> String {
    format!("{LEAVING}{}/{}", pool.view.namespace(), pool.view.name())
}

/// Whether a held node's service is one a pool disabled when the node left it: the node came
/// back (relabelled, or its Node deleted and created again), and the pool never enables a
/// service, so it stays disabled until someone enables it in Nova.
fn left_disabled(n: &NovaComputeNodeStatus) -> bool {
    matches!(n.phase, NodePhase::Pending | NodePhase::Active)
        && n.service_status.as_deref() == Some("disabled")
        && n.disabled_reason
            .as_deref()
            .is_some_and(|r| r.starts_with(LEAVING))
}

/// What the walk calls for one leaving entry.
enum Call<'s> {
    /// Draining: disable the service when it is enabled, then count the host's servers.
    Drain(Option<&'s ComputeService>),
    /// Releasing with a pod of the pool still on the node: keep it, no call.
    Hold,
    /// Releasing with no service left, or handed over to another pool: drop it, no call.
    Drop,
    /// Releasing: delete the service.
    Delete(&'s ComputeService),
}

/// The call for a Draining or Releasing entry; None for the others.
fn call_for<'s>(
    pool: &Pool,
    entry: &NovaComputeNodeStatus,
    service: Option<&'s ComputeService>,
) -> Option<Call<'s>> {
    match entry.phase {
        NodePhase::Draining => Some(Call::Drain(service.filter(|s| s.status == "enabled"))),
        NodePhase::Releasing if pool.pods_on.contains(&entry.name) => Some(Call::Hold),
        NodePhase::Releasing => match service.filter(|_| !pool.handover.contains(&entry.name)) {
            Some(s) => Some(Call::Delete(s)),
            None => Some(Call::Drop),
        },
        _ => None,
    }
}

/// The phase of a Pending or Active entry, and whether it waits for its host mapping.
fn onboarding(
    entry: &NovaComputeNodeStatus,
    registered: bool,
    mapped: Option<&BTreeSet<String>>,
) -> (NodePhase, bool) {
    if !registered {
        return (NodePhase::Pending, false);
    }
    let is_mapped = mapped.is_some_and(|m| m.contains(&entry.name));
    if entry.phase == NodePhase::Active || is_mapped {
        (NodePhase::Active, false)
    } else {
        (NodePhase::Pending, mapped.is_some())
    }
}

/// The calls of the walk, in ledger order.
pub fn actions(pool: &Pool, listed: &Listed) -> Vec<Action> {
    let Ok(services) = &listed.services else {
        return Vec::new();
    };
    let reason = disable_reason(pool);
    let mut actions = Vec::new();
    for entry in &pool.view.nodes {
        match call_for(pool, entry, services.get(&entry.name)) {
            Some(Call::Drain(enabled)) => {
                if let Some(s) = enabled {
                    actions.push(Action::DisableService {
                        id: s.id.clone(),
                        host: entry.name.clone(),
                        reason: reason.clone(),
                    });
                }
                actions.push(Action::CountServers {
                    host: entry.name.clone(),
                });
            }
            Some(Call::Delete(s)) => actions.push(Action::DeleteService {
                id: s.id.clone(),
                host: entry.name.clone(),
            }),
            Some(Call::Hold | Call::Drop) | None => {}
        }
    }
    actions
}

/// The registered Pending nodes whose host is not mapped yet, once every call succeeded: the
/// hosts the discovery Job maps.
pub fn unmapped(pool: &Pool, listed: &Listed) -> Vec<String> {
    let Ok(services) = &listed.services else {
        return Vec::new();
    };
    pool.view
        .nodes
        .iter()
        .filter(|n| matches!(n.phase, NodePhase::Pending | NodePhase::Active))
        .filter(|n| onboarding(n, services.contains_key(&n.name), listed.mapped.as_ref()).1)
        .map(|n| n.name.clone())
        .collect()
}

/// Walks the ledger in order with the answers of its [`actions`] (a prefix, when a call
/// failed): the first failed call stops the walk and keeps the entries not yet walked as they
/// were.
pub fn settle(pool: &Pool, listed: &Listed, answers: &[Result<Done, String>]) -> Walk {
    let mut out = Walk {
        nodes: pool.view.nodes.clone(),
        poll: REQUEUE_COMPUTE_SERVICE_POLLING,
        ..Walk::default()
    };
    for n in &pool.view.nodes {
        out.poll = out.poll.min(poll(n.phase));
    }
    let services = match &listed.services {
        Ok(services) => services,
        Err(message) => {
            out.failure = Some(message.clone());
            out.poll = out.poll.min(REQUEUE_COMPUTE_DRAIN_POLLING);
            return out;
        }
    };
    out.mapping_failure = listed.mapping_failure.clone();
    let reason = disable_reason(pool);
    let mut answers = answers.iter();
    let mut kept = Vec::with_capacity(out.nodes.len());
    let mut entries = std::mem::take(&mut out.nodes).into_iter();
    for mut entry in entries.by_ref() {
        let service = services.get(&entry.name);
        let call = call_for(pool, &entry, service);
        if entry.phase != NodePhase::Conflict {
            copy_service(&mut entry, service);
        }
        match call {
            None if entry.phase == NodePhase::Conflict => {}
            None => {
                let (phase, unmapped) =
                    onboarding(&entry, service.is_some(), listed.mapped.as_ref());
                entry.phase = phase;
                if unmapped {
                    out.unmapped.push(entry.name.clone());
                }
            }
            Some(Call::Drain(enabled)) => {
                if enabled.is_some() {
                    match answers.next() {
                        Some(Ok(_)) => {
                            entry.service_status = Some("disabled".to_owned());
                            entry.disabled_reason = Some(reason.clone());
                            out.events.push(EventNote {
                                reason: EventReason::ComputeServiceDisabled,
                                note: format!(
                                    "Disabled the compute service of node {}: it left the pool",
                                    entry.name
                                ),
                            });
                        }
                        stopped => {
                            out.failure = stopped.and_then(|a| a.clone().err());
                            kept.push(entry);
                            break;
                        }
                    }
                }
                match answers.next() {
                    Some(Ok(Done::Servers(0))) => {
                        entry.phase = NodePhase::Releasing;
                        entry.instances = None;
                    }
                    Some(Ok(Done::Servers(count))) => {
                        entry.instances = Some(i32::try_from(*count).unwrap_or(i32::MAX));
                    }
                    stopped => {
                        out.failure = stopped.and_then(|a| a.clone().err());
                        kept.push(entry);
                        break;
                    }
                }
            }
            Some(Call::Hold) => {
                kept.push(entry);
                continue;
            }
            Some(Call::Drop) => {
                out.poll = out.poll.min(REQUEUE_COMPUTE_RELEASE_POLLING);
                continue;
            }
            Some(Call::Delete(_)) => match answers.next() {
                Some(Ok(Done::Service(ServiceDeletion::Deleted))) => {
                    out.poll = out.poll.min(REQUEUE_COMPUTE_RELEASE_POLLING);
                    out.events.push(EventNote {
 reason: EventReason::ComputeServiceDeleted,
                        note: format!(
                            "Deleted the compute service of node {}; Nova dropped its host mapping with it",
                            entry.name
                        ),
                    });
                    continue;
                }
                Some(Ok(Done::Service(ServiceDeletion::InUse))) => {
                    entry.phase = NodePhase::Draining;
                }
                stopped => {
                    out.failure = stopped.and_then(|a| a.clone().err());
                    kept.push(entry);
                    break;
                }
            },
        }
        out.poll = out.poll.min(poll(entry.phase));
        kept.push(entry);
    }
    kept.extend(entries);
    out.nodes = kept;
    if out.failure.is_some() || out.mapping_failure.is_some() {
        out.poll = out.poll.min(REQUEUE_COMPUTE_DRAIN_POLLING);
    }
    if !out.unmapped.is_empty() {
        out.poll = out.poll.min(REQUEUE_HOST_DISCOVERY_POLLING);
    }
    out
}

/// Lists, decides, carries the calls out in order through the one executor and settles: the
/// step's whole walk, outside the engine (the unit tests and the real-services proofs).
pub async fn walk(client: &Client, pool: &Pool) -> Walk {
    let listed = observe(client, pool).await;
    let outcomes = effects::carry_out(
        &effects::openstack(actions(pool, &listed)),
        Some(client),
        |_, _, _| {},
    )
    .await;
    settle(pool, &listed, &effects::answers(outcomes))
}

/// The condition of the walk (its poll goes to the Traits step; `discovery` is the host
/// discovery's note, or its failure), by precedence: a failed call, a failed discovery, then
/// WaitingForServices, WaitingForHostMapping, ServicesDown, ServicesDisabled (a node back in
/// the pool whose service a pool disabled when it left), Draining and ServicesUp.
pub fn report(walk: &Walk, discovery: Option<&Result<String, String>>) -> Report {
    let report = |ok, reason, message: String| Report {
        ok,
        reason,
        message,
        requeue: None,
        error: None,
    };
    if let Some(message) = walk.failure.as_ref().or(walk.mapping_failure.as_ref()) {
        return report(false, Reason::ComputeAPIError, message.clone());
    }
    if let Some(Err(message)) = discovery {
        return report(false, Reason::HostDiscoveryError, message.clone());
    }
    let names = |filter: &dyn Fn(&NovaComputeNodeStatus) -> bool| -> Vec<String> {
        walk.nodes
            .iter()
            .filter(|n| filter(n))
            .map(|n| n.name.clone())
            .collect()
    };
    let unregistered = names(&|n| n.phase == NodePhase::Pending && n.service_id.is_none());
    if !unregistered.is_empty() {
        return report(
            false,
            Reason::WaitingForServices,
            format!(
                "Waiting for a compute service to register on {}",
                unregistered.join(", ")
            ),
        );
    }
    if !walk.unmapped.is_empty() {
        let note = discovery
            .and_then(|d| d.as_ref().ok())
            .cloned()
            .unwrap_or_default();
        return report(
            false,
            Reason::WaitingForHostMapping,
            format!(
                "Waiting for the host mapping of {}: {note}",
                walk.unmapped.join(", ")
            ),
        );
    }
    let down = names(&|n| {
        matches!(n.phase, NodePhase::Pending | NodePhase::Active)
            && n.service_state.as_deref() == Some("down")
    });
    if !down.is_empty() {
        return report(
            false,
            Reason::ServicesDown,
            format!(
                "Nova reports the compute service down on {}",
                down.join(", ")
            ),
        );
    }
    let disabled: Vec<String> = walk
        .nodes
        .iter()
        .filter(|n| left_disabled(n))
        .map(|n| {
            format!(
                "{} (disabled reason \"{}\")",
                n.name,
                n.disabled_reason.as_deref().unwrap_or_default()
            )
        })
        .collect();
    if !disabled.is_empty() {
        return report(
            false,
            Reason::ServicesDisabled,
            format!(
                "Compute services stay disabled on {}: each was disabled when its node left a pool, and the pool never enables a service; enable it in Nova once the node may take servers again",
                disabled.join(", ")
            ),
        );
    }
    let leaving: Vec<String> = walk
        .nodes
        .iter()
        .filter_map(|n| match n.phase {
            NodePhase::Draining => Some(format!(
                "{}: {} instances",
                n.name,
                n.instances.unwrap_or_default()
            )),
            NodePhase::Releasing => Some(format!("{}: released", n.name)),
            _ => None,
        })
        .collect();
    if !leaving.is_empty() {
        return report(
            true,
            Reason::Draining,
            format!("Draining {}", leaving.join(", ")),
        );
    }
    report(
        true,
        Reason::ServicesUp,
        "Every node's compute service is registered and up".to_owned(),
    )
}

/// The Nova's discovery Job and API Deployment, read as the Nova controller caches them (the
/// pool's pods are listed live).
pub const KINDS: &[Uses] = &[
    reads(|| KindSpec::of::<Job>(Caching::OnDemand)),
    reads(|| KindSpec::of::<Deployment>(Caching::OnDemand)),
];

/// The Services step: lists the pool's pods while a node is Releasing (uncached: the operator
/// never watches pods), walks the ledger, runs the host discovery while a registered host is
/// unmapped, and hands its poll to the Traits step instead of ending the pass with it.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    nova_side(pass, step)
}

fn step<'a>(pass: &'a NovaComputePass, nova: &'a NovaInputs) -> StepFuture<'a, NovaCompute> {
    Box::pin(async move {
        let side = compute_api::side(pass, nova);
        let sets = pass.resolved.nodes.clone().unwrap_or_default();
        let pods_on = match pods_on(pass, &side.pool.nodes).await {
            Ok(pods_on) => pods_on,
            Err(e) => {
                return Ok(NovaComputePlan::proceed()
                    .report(C::ServicesReady, false, Reason::PodListError, e.to_string())
                    .failing(e.into()));
            }
        };
        let client = side.client;
        let pool = Pool {
            view: side.pool,
            handover: sets.handover.clone(),
            pods_on,
        };
        let listed = observe(&client, &pool).await;
        let actions = actions(&pool, &listed);
        let unmapped = unmapped(&pool, &listed);
        let (discovery, job) = match unmapped.is_empty() {
            true => (None, None),
            false => {
                let (decision, job) = discover_hosts::ensure(nova, &unmapped).await;
                (Some(decision), job)
            }
        };
        let walked = actions.len();
        let list = effects::openstack(actions).into_iter().chain(job).collect();
        Ok(NovaComputePlan::effects(
            Some(client.clone()),
            list,
            move |outcomes| {
                let mut answers = effects::answers(outcomes);
                let written = answers.split_off(walked.min(answers.len())).pop();
                let walk = settle(&pool, &listed, &answers);
                let discovery = discovery
                    .filter(|_| walk.failure.is_none())
                    .map(|d| discover_hosts::settled(d, written.map(|w| w.map(drop))));
                settled_plan(walk, discovery, client, sets)
            },
        ))
    })
}

/// The step's plan once the walk and the discovery settled.
fn settled_plan(
    walk: Walk,
    discovery: Option<discover_hosts::Decision>,
    client: std::sync::Arc<Client>,
    sets: NodeSets,
) -> NovaComputePlan {
    let note = discovery.as_ref().map(|d| d.note.clone());
    if let Some(Err(message)) = &note {
        tracing::warn!(error = %message, "host discovery");
    }
    let r = report(&walk, note.as_ref());
    let plan = NovaComputePlan::proceed()
        .report(C::ServicesReady, r.ok, r.reason, r.message)
        .set(StatusUpdate::Nodes(walk.nodes.clone()))
        .resolve(Resolved {
            openstack: Some(client),
            nodes: Some(NodeSets {
                ledger: walk.nodes.clone(),
                ..sets
            }),
            services_poll: Some(walk.poll),
            ..Resolved::default()
        });
    let events = walk
        .events
        .into_iter()
        .chain(discovery.and_then(|d| d.event));
    compute_api::with_events(plan, events)
}

/// The nodes a non-finished pod of the pool runs on, listed only while a node is Releasing
/// (on that node alone when it is the only one).
async fn pods_on(
    pass: &NovaComputePass,
    nodes: &[NovaComputeNodeStatus],
) -> Result<BTreeSet<String>, ClusterError> {
    let releasing: Vec<&str> = nodes
        .iter()
        .filter(|n| n.phase == NodePhase::Releasing)
        .map(|n| n.name.as_str())
        .collect();
    if releasing.is_empty() {
        return Ok(BTreeSet::new());
    }
    let field = match releasing.as_slice() {
        [only] => Some(format!("spec.nodeName={only}")),
        _ => None,
    };
    let pods = pass
        .cluster
        .list_live(
            &ApiResource::erase::<Pod>(&()),
            &pass.owner.namespace,
            &novacompute_selector(&pass.cr.name_any()),
            field.as_deref(),
        )
        .await?;
    Ok(pods
        .iter()
        .filter(|p| {
            !matches!(
                p.data["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|p| p.data["spec"]["nodeName"].as_str().map(str::to_owned))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::plan_fixtures::{entry, pool_cr, view};
    use crate::openstack::fake::{Fake, client};

    const SERVICES: &str = "/v2.1/os-services?binary=nova-compute";
    const HYPERVISORS: &str = "/v2.1/os-hypervisors/detail?limit=500";

    fn service(host: &str, status: &str, state: &str) -> String {
        format!(
            r#"{{"id": "id-{host}", "host": "{host}", "status": "{status}", "state": "{state}", "disabled_reason": null}}"#
        )
    }

    fn listing(services: &[String]) -> String {
        format!(r#"{{"services": [{}]}}"#, services.join(","))
    }

    /// A fake Nova listing `services`.
    fn listed(services: &[String]) -> Fake {
        Fake::new().answer("GET", SERVICES, 200, &listing(services))
    }

    /// The path of the server count on `host`.
    fn count(host: &str) -> String {
        format!("/v2.1/servers?all_tenants=1&host={host}")
    }

    fn registered(name: &str, phase: NodePhase) -> NovaComputeNodeStatus {
        NovaComputeNodeStatus {
            service_id: Some(format!("id-{name}")),
            service_status: Some("enabled".into()),
            service_state: Some("up".into()),
            ..entry(name, phase, Some("z1"))
        }
    }

    async fn run(
        fake: &Fake,
        nodes: &[NovaComputeNodeStatus],
        handover: &[&str],
        pods_on: &[&str],
    ) -> Walk {
        let handover = handover.iter().map(|s| (*s).to_owned()).collect();
        let pods_on = pods_on.iter().map(|s| (*s).to_owned()).collect();
        let pool = Pool {
            view: view(pool_cr("pool-a", false, nodes.to_vec()), &[]),
            handover,
            pods_on,
        };
        walk(&client(fake, None), &pool).await
    }

    fn phases(walk: &Walk) -> Vec<(&str, NodePhase)> {
        walk.nodes
            .iter()
            .map(|n| (n.name.as_str(), n.phase))
            .collect()
    }

    #[tokio::test]
    async fn pending_and_active_follow_registration_and_mapping() {
        let fake = Fake::new()
            .answer(
                "GET",
                SERVICES,
                200,
                &listing(&[
                    service("a", "enabled", "up"),
                    service("b", "enabled", "up"),
                    service("d", "enabled", "down"),
                ]),
            )
            .answer(
                "GET",
                HYPERVISORS,
                200,
                r#"{"hypervisors": [{"id": "h-a", "service": {"host": "a"}}]}"#,
            )
            .answer(
                "GET",
                "/v2.1/os-hypervisors/detail?limit=500&marker=h-a",
                200,
                r#"{"hypervisors": []}"#,
            );
        let nodes = [
            entry("a", NodePhase::Pending, Some("z1")),
            entry("b", NodePhase::Pending, Some("z1")),
            entry("c", NodePhase::Pending, Some("z1")),
            registered("d", NodePhase::Active),
            registered("e", NodePhase::Active),
            entry("f", NodePhase::Conflict, Some("z1")),
        ];
        let w = run(&fake, &nodes, &[], &[]).await;
        assert_eq!(
            phases(&w),
            [
                ("a", NodePhase::Active),
                ("b", NodePhase::Pending),
                ("c", NodePhase::Pending),
                ("d", NodePhase::Active),
                ("e", NodePhase::Pending),
                ("f", NodePhase::Conflict),
            ],
            "a is mapped; b is not yet; d is never re-checked; e lost its service"
        );
        assert_eq!(w.unmapped, ["b"]);
        assert_eq!(w.nodes[0].service_id.as_deref(), Some("id-a"));
        assert_eq!(
            w.nodes[4].service_id, None,
            "fields cleared with the service"
        );
        assert_eq!(w.poll, REQUEUE_HOST_DISCOVERY_POLLING);
        let r = report(&w, None);
        assert_eq!(
            (r.ok, r.reason, r.message.as_str()),
            (
                false,
                Reason::WaitingForServices,
                "Waiting for a compute service to register on c, e"
            )
        );
    }

    #[tokio::test]
    async fn an_active_pool_reads_no_hypervisors_and_polls_every_minute() {
        let fake = Fake::new().answer(
            "GET",
            SERVICES,
            200,
            &listing(&[service("a", "enabled", "up")]),
        );
        let w = run(&fake, &[registered("a", NodePhase::Active)], &[], &[]).await;
        assert_eq!(fake.calls(), [format!("GET {SERVICES}")]);
        assert_eq!(w.poll, REQUEUE_COMPUTE_SERVICE_POLLING);
        let r = report(&w, None);
        assert_eq!((r.ok, r.reason), (true, Reason::ServicesUp));
    }

    #[tokio::test]
    async fn a_draining_node_is_disabled_once_and_counted() {
        let fake = Fake::new()
            .answer(
                "GET",
                SERVICES,
                200,
                &listing(&[
                    service("a", "enabled", "up"),
                    service("b", "disabled", "up"),
                ]),
            )
            .answer("PUT", "/v2.1/os-services/id-a", 200, "{}")
            .answer(
                "GET",
                "/v2.1/servers?all_tenants=1&host=a",
                200,
                r#"{"servers": [{"id": "1"}, {"id": "2"}]}"#,
            )
            .answer(
                "GET",
                "/v2.1/servers?all_tenants=1&host=b",
                200,
                r#"{"servers": []}"#,
            )
            .answer(
                "GET",
                "/v2.1/servers?all_tenants=1&host=c",
                200,
                r#"{"servers": []}"#,
            );
        let nodes = [
            registered("a", NodePhase::Draining),
            registered("b", NodePhase::Draining),
            entry("c", NodePhase::Draining, None),
        ];
        let w = run(&fake, &nodes, &[], &[]).await;
        assert_eq!(
            fake.calls(),
            [
                format!("GET {SERVICES}"),
                "PUT /v2.1/os-services/id-a".to_owned(),
                "GET /v2.1/servers?all_tenants=1&host=a".to_owned(),
                "GET /v2.1/servers?all_tenants=1&host=b".to_owned(),
                "GET /v2.1/servers?all_tenants=1&host=c".to_owned(),
            ],
            "b was disabled by someone else and keeps that; c has no service but is counted"
        );
        assert_eq!(
            phases(&w),
            [
                ("a", NodePhase::Draining),
                ("b", NodePhase::Releasing),
                ("c", NodePhase::Releasing)
            ]
        );
        assert_eq!(w.nodes[0].instances, Some(2));
        assert_eq!(w.nodes[0].service_status.as_deref(), Some("disabled"));
        assert_eq!(
            w.nodes[0].disabled_reason.as_deref(),
            Some("c5c3.io: leaving NovaCompute ns/pool-a")
        );
        assert_eq!(
            w.events.iter().map(|e| e.note.as_str()).collect::<Vec<_>>(),
            ["Disabled the compute service of node a: it left the pool"]
        );
        assert_eq!(w.poll, REQUEUE_COMPUTE_RELEASE_POLLING);
        let r = report(&w, None);
        assert_eq!(
            (r.ok, r.reason, r.message.as_str()),
            (
                true,
                Reason::Draining,
                "Draining a: 2 instances, b: released, c: released"
            )
        );
    }

    #[tokio::test]
    async fn a_releasing_node_waits_for_its_pod_then_its_service_is_deleted() {
        let fake = Fake::new()
            .answer(
                "GET",
                SERVICES,
                200,
                &listing(&[
                    service("a", "disabled", "up"),
                    service("b", "disabled", "down"),
                    service("c", "disabled", "down"),
                    service("d", "disabled", "down"),
                ]),
            )
            .answer("DELETE", "/v2.1/os-services/id-b", 204, "")
            .answer("DELETE", "/v2.1/os-services/id-c", 409, "instances");
        let nodes = [
            registered("a", NodePhase::Releasing),
            registered("b", NodePhase::Releasing),
            registered("c", NodePhase::Releasing),
            registered("d", NodePhase::Releasing),
            registered("e", NodePhase::Releasing),
        ];
        let w = run(&fake, &nodes, &["d"], &["a"]).await;
        assert_eq!(
            fake.calls(),
            [
                format!("GET {SERVICES}"),
                "DELETE /v2.1/os-services/id-b".to_owned(),
                "DELETE /v2.1/os-services/id-c".to_owned(),
            ],
            "a's pod still runs; d was handed over; e has no service left"
        );
        assert_eq!(
            phases(&w),
            [("a", NodePhase::Releasing), ("c", NodePhase::Draining)]
        );
        assert_eq!(
            w.events.iter().map(|e| e.note.as_str()).collect::<Vec<_>>(),
            ["Deleted the compute service of node b; Nova dropped its host mapping with it"]
        );
        assert_eq!(w.poll, REQUEUE_COMPUTE_RELEASE_POLLING);
    }

    #[tokio::test]
    async fn the_first_failed_call_stops_the_walk_and_keeps_the_rest() {
        let fake = Fake::new()
            .answer(
                "GET",
                SERVICES,
                200,
                &listing(&[service("a", "enabled", "up"), service("b", "enabled", "up")]),
            )
            .answer(
                "PUT",
                "/v2.1/os-services/id-a",
                503,
                "nova-api is restarting",
            );
        let nodes = [
            registered("a", NodePhase::Draining),
            registered("b", NodePhase::Draining),
        ];
        let w = run(&fake, &nodes, &[], &[]).await;
        assert_eq!(w.nodes, nodes, "nothing learned, nothing lost");
        assert_eq!(w.poll, REQUEUE_COMPUTE_DRAIN_POLLING);
        let r = report(&w, None);
        assert_eq!(
            (r.ok, r.reason, r.message.as_str()),
            (
                false,
                Reason::ComputeAPIError,
                "disabling the compute service of a: PUT /v2.1/os-services/id-a: HTTP 503: nova-api is restarting"
            )
        );

        let down = Fake::new().answer(
            "GET",
            SERVICES,
            200,
            r#"{"services": [{"host": "x", "status": "UNKNOWN"}]}"#,
        );
        let w = run(&down, &nodes, &[], &[]).await;
        assert_eq!(w.nodes, nodes);
        assert_eq!(
            report(&w, None).message,
            "listing compute services: the cell of host x did not answer, so the service list is incomplete"
        );
    }

    #[tokio::test]
    async fn a_failed_hypervisor_listing_keeps_pending_nodes_and_moves_the_others() {
        let fake = Fake::new()
            .answer(
                "GET",
                SERVICES,
                200,
                &listing(&[
                    service("a", "enabled", "up"),
                    service("b", "disabled", "up"),
                ]),
            )
            .answer("GET", HYPERVISORS, 500, "db down")
            .answer(
                "GET",
                "/v2.1/servers?all_tenants=1&host=b",
                200,
                r#"{"servers": []}"#,
            );
        let nodes = [
            entry("a", NodePhase::Pending, None),
            registered("b", NodePhase::Draining),
        ];
        let w = run(&fake, &nodes, &[], &[]).await;
        assert_eq!(
            phases(&w),
            [("a", NodePhase::Pending), ("b", NodePhase::Releasing)]
        );
        assert!(w.unmapped.is_empty(), "no discovery on a guess");
        let r = report(&w, None);
        assert_eq!(
            (r.reason, r.message.as_str()),
            (
                Reason::ComputeAPIError,
                "listing hypervisors: GET /v2.1/os-hypervisors/detail?limit=500: HTTP 500: db down"
            )
        );
    }

    #[test]
    fn the_condition_ranks_discovery_then_down_then_draining() {
        let walk = |nodes: Vec<NovaComputeNodeStatus>, unmapped: &[&str]| Walk {
            nodes,
            unmapped: unmapped.iter().map(|s| (*s).to_owned()).collect(),
            ..Walk::default()
        };
        let mut down = registered("b", NodePhase::Active);
        down.service_state = Some("down".into());
        let w = walk(
            vec![registered("a", NodePhase::Pending), down.clone()],
            &["a"],
        );
        let note = Ok("discovery Job ns/nova-discover-hosts is running".to_owned());
        let r = report(&w, Some(&note));
        assert_eq!(
            (r.reason, r.message.as_str()),
            (
                Reason::WaitingForHostMapping,
                "Waiting for the host mapping of a: discovery Job ns/nova-discover-hosts is running"
            )
        );
        let r = report(
            &w,
            Some(&Err("creating Job ns/nova-discover-hosts: forbidden".into())),
        );
        assert_eq!(r.reason, Reason::HostDiscoveryError);
        let w = walk(vec![down, registered("c", NodePhase::Draining)], &[]);
        let r = report(&w, None);
        assert_eq!(
            (r.ok, r.reason, r.message.as_str()),
            (
                false,
                Reason::ServicesDown,
                "Nova reports the compute service down on b"
            )
        );
    }

    /// Injects a server count that holds a down cell's record (status UNKNOWN) for a Draining
    /// node with servers, the node after it Releasing; asserts the node stays Draining (its
    /// disable kept), the walk stops before any delete, and ServicesReady names why.
    #[tokio::test]
    async fn a_down_cell_keeps_the_node_draining_and_says_why() {
        let down_cell = r#"{"servers": [{"id": "s-1", "status": "UNKNOWN"}]}"#;
        let fake = listed(&[
            service("a", "enabled", "up"),
            service("b", "disabled", "down"),
        ])
        .answer("PUT", "/v2.1/os-services/id-a", 200, "{}")
        .answer("GET", &count("a"), 200, down_cell)
        .answer("DELETE", "/v2.1/os-services/id-b", 204, "");
        let nodes = [
            registered("a", NodePhase::Draining),
            registered("b", NodePhase::Releasing),
        ];
        let w = run(&fake, &nodes, &[], &[]).await;
        assert_eq!(
            fake.calls(),
            [
                format!("GET {SERVICES}"),
                "PUT /v2.1/os-services/id-a".to_owned(),
                format!("GET {}", count("a")),
            ]
        );
        assert_eq!(
            phases(&w),
            [("a", NodePhase::Draining), ("b", NodePhase::Releasing)]
        );
        assert_eq!(
            (w.nodes[0].service_status.as_deref(), w.nodes[0].instances),
            (Some("disabled"), None),
            "the disable is recorded; no count is invented"
        );
        assert_eq!(w.nodes[1], nodes[1], "the unwalked entry is kept");
        assert_eq!(w.poll, REQUEUE_COMPUTE_RELEASE_POLLING);
        let r = report(&w, None);
        assert_eq!(
            (r.ok, r.reason, r.message.as_str()),
            (
                false,
                Reason::ComputeAPIError,
                "counting the servers on a: a cell did not answer (Nova listed a server with status UNKNOWN), so the servers on host a cannot be counted"
            )
        );
    }

    /// Injects, one row each, a failing read (HTTP 500 and 503, no answer, an undecodable body,
    /// a down cell) into the service listing and into the server count, with a Releasing node
    /// whose service would be deleted and a Draining node with servers; asserts no row deletes
    /// a service or releases a node, and the ledger keeps what the failure could not confirm.
    #[tokio::test]
    async fn a_failing_read_plans_no_delete() {
        use crate::openstack::TransportError;
        let count_a = count("a");
        let services = [
            service("a", "disabled", "up"),
            service("b", "disabled", "down"),
        ];
        let failures: [(&str, Option<TransportError>, u16, &str); 5] = [
            ("HTTP 500", None, 500, "db down"),
            ("HTTP 503", None, 503, "restarting"),
            (
                "no answer",
                Some(TransportError::TimedOut("nova.test:8774".into())),
                0,
                "",
            ),
            ("an undecodable body", None, 200, r#"{"services": [{"#),
            (
                "a down cell",
                None,
                200,
                r#"{"services": [{"host": "a", "status": "UNKNOWN"}], "servers": [{"status": "UNKNOWN"}]}"#,
            ),
        ];
        let nodes = [
            registered("a", NodePhase::Draining),
            registered("b", NodePhase::Releasing),
        ];
        for (what, transport, status, body) in failures {
            for read in [SERVICES, count_a.as_str()] {
                let fail = |fake: Fake| match &transport {
                    Some(e) => fake.fail("GET", read, e.clone()),
                    None => fake.answer("GET", read, status, body),
                };
                let fake = match read {
                    SERVICES => fail(Fake::new()),
                    _ => fail(listed(&services)),
                }
                .answer("DELETE", "/v2.1/os-services/id-b", 204, "");
                let w = run(&fake, &nodes, &[], &[]).await;
                let calls = fake.calls();
                assert!(
                    !calls.iter().any(|c| c.starts_with("DELETE")),
                    "{what} at {read}: {calls:?}"
                );
                assert_eq!(
                    phases(&w),
                    [("a", NodePhase::Draining), ("b", NodePhase::Releasing)],
                    "{what} at {read}"
                );
                let r = report(&w, None);
                assert_eq!(
                    (r.ok, r.reason),
                    (false, Reason::ComputeAPIError),
                    "{what} at {read}: {}",
                    r.message
                );
            }
        }
    }

    /// Injects Nova's listing of services of Active nodes: one a pool disabled when its node
    /// left (the node came back), one disabled by someone else, one enabled; asserts the walk
    /// makes no other call (the pool never enables a service), the entries carry Nova's status
    /// and reason, and ServicesReady says which service stays disabled and why.
    #[tokio::test]
    async fn a_node_back_in_the_pool_keeps_its_service_disabled_and_says_so() {
        let disabled = |host: &str, reason: &str| {
            format!(
                r#"{{"id": "id-{host}", "host": "{host}", "status": "disabled", "state": "up", "disabled_reason": "{reason}"}}"#
            )
        };
        let fake = listed(&[
            disabled("a", "c5c3.io: leaving NovaCompute ns/pool-a"),
            disabled("b", "maintenance"),
            service("c", "enabled", "up"),
        ]);
        let nodes = [
            registered("a", NodePhase::Active),
            registered("b", NodePhase::Active),
            registered("c", NodePhase::Active),
        ];
        let w = run(&fake, &nodes, &[], &[]).await;
        assert_eq!(fake.calls(), [format!("GET {SERVICES}")]);
        assert_eq!(
            phases(&w),
            [
                ("a", NodePhase::Active),
                ("b", NodePhase::Active),
                ("c", NodePhase::Active)
            ]
        );
        assert_eq!(
            (
                w.nodes[0].service_status.as_deref(),
                w.nodes[0].disabled_reason.as_deref()
            ),
            (
                Some("disabled"),
                Some("c5c3.io: leaving NovaCompute ns/pool-a")
            )
        );
        let r = report(&w, None);
        assert_eq!(
            (r.ok, r.reason, r.message.as_str()),
            (
                false,
                Reason::ServicesDisabled,
                "Compute services stay disabled on a (disabled reason \"c5c3.io: leaving NovaCompute ns/pool-a\"): each was disabled when its node left a pool, and the pool never enables a service; enable it in Nova once the node may take servers again"
            ),
            "b's was disabled by someone else, for their own reason"
        );

        let enabled = listed(&[service("a", "enabled", "up")]);
        let w = run(&enabled, &[w.nodes[0].clone()], &[], &[]).await;
        assert_eq!(
            report(&w, None).reason,
            Reason::ServicesUp,
            "enabled in Nova by someone, the condition clears"
        );
    }
}
