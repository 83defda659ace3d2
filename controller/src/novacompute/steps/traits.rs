//! TraitsReady (`novacompute.md` §6): the custom Placement traits of the pool's hosts. The pool
//! creates each trait a node desires in Placement first (Placement refuses to associate a trait
//! that does not exist), then writes the node's sorted desired list into its `kvm.cloud.sap/v1`
//! Hypervisor's `spec.customTraits`, where openstack-hypervisor-operator applies it to the
//! resource provider. A trait the pool created is deleted again once no live pool of the Nova
//! declares it and no pool records it on a node; Placement's 409 (still on a resource provider)
//! drops it from the pool's list without deleting it.
//!
//! Longer than 500 lines on purpose: observe, decide, effects and settle of one condition whose
//! every branch the spec names; split, the halves would share every private type.

use nova_api::conditions::NovaComputeConditionType as C;
use nova_api::events::EventReason;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::novacompute::compute_api::{PoolView, Report};
use crate::novacompute::resolved::NovaInputs;
use crate::novacompute::resolved::StatusUpdate;
use crate::novacompute::{
    NovaComputePass, NovaComputePlan, REQUEUE_COMPUTE_DRAIN_POLLING, compute_api, nova_side,
};
use crate::pipeline::{StepError, StepFuture};

use nova_api::conditions::Reason;
use nova_api::v1alpha1::{NodePhase, NovaCompute, NovaComputeNodeStatus};

use crate::clusters::Handle;
use crate::novacompute::hypervisors::{
    ClusterHypervisors, Hypervisor, HypervisorFailure, Hypervisors, failure, patch,
};
use crate::objects::EventNote;
use crate::openstack::Client;
use crate::openstack::action::{Action, Done};
use crate::openstack::placement::{TraitDeletion, TraitEnsured};
use crate::pipeline::effects::{self, Effect, Outcome as EffectOutcome};

/// The Node annotation the hypervisor operator copies into `spec.customTraits` itself; a node
/// carrying it is left to that path.
pub const ANNOTATION: &str = "nova.openstack.cloud.sap/custom-traits";

/// The desired list of `node`: `spec.traits` and the node's `hostTraits` entry, sorted and
/// de-duplicated.
pub fn desired(pool: &NovaCompute, node: &str) -> Vec<String> {
    let spec = &pool.spec;
    let set: BTreeSet<&String> = spec
        .traits
        .iter()
        .flatten()
        .chain(
            spec.host_traits
                .iter()
                .flatten()
                .filter(|h| h.node == node)
                .flat_map(|h| &h.traits),
        )
        .collect();
    set.into_iter().cloned().collect()
}

/// Every trait a pool declares, on any node.
fn declared(pool: &NovaCompute) -> BTreeSet<&str> {
    pool.spec
        .traits
        .iter()
        .flatten()
        .chain(
            pool.spec
                .host_traits
                .iter()
                .flatten()
                .flat_map(|h| &h.traits),
        )
        .map(String::as_str)
        .collect()
}

/// The `CUSTOM_` subset of a trait list, sorted.
fn custom(traits: &[String]) -> Vec<String> {
    let set: BTreeSet<&String> = traits.iter().filter(|t| t.starts_with("CUSTOM_")).collect();
    set.into_iter().cloned().collect()
}

/// What the step works on: the shared view of the pool and what only this step reads.
#[derive(Clone, Copy, Debug)]
pub struct Pool<'a> {
    /// The pool of this pass.
    pub view: &'a PoolView,
    /// Nodes whose metadata carries [`ANNOTATION`].
    pub annotated: &'a BTreeSet<String>,
}

impl Pool<'_> {
    fn created(&self) -> &[String] {
        self.view
            .cr
            .status
            .as_ref()
            .map_or(&[][..], |s| s.created_traits.as_slice())
    }
}

/// The managed nodes, split into those to read and those left to the annotation.
pub fn managed(pool: &Pool<'_>) -> (Vec<String>, Vec<String>) {
    if pool.view.deleting() {
        return (Vec::new(), Vec::new());
    }
    pool.view
        .nodes
        .iter()
        .filter(|n| matches!(n.phase, NodePhase::Pending | NodePhase::Active))
        .filter(|n| !desired(&pool.view.cr, &n.name).is_empty() || !n.traits.is_empty())
        .map(|n| n.name.clone())
        .partition(|n| !pool.annotated.contains(n))
}

/// What to do with one created trait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// A live pool (this one) still declares it.
    Keep,
    /// This pool is deleting and the named live pool declares it: drop it from the list.
    Handover(String),
    /// Nobody declares it, but a ledger still records it on a node.
    WaitForCarrier,
    /// Nobody declares or carries it: delete it from Placement.
    Delete,
}

/// The disposition of a created trait, given this pass's own trait records.
pub fn disposition(
    pool: &Pool<'_>,
    records: &BTreeMap<String, Vec<String>>,
    name: &str,
) -> Disposition {
    let view = pool.view;
    let this_declares = !view.deleting() && declared(&view.cr).contains(name);
    if this_declares {
        return Disposition::Keep;
    }
    if let Some(other) = view.live_siblings().find(|s| declared(s).contains(name)) {
        return if view.deleting() {
            Disposition::Handover(other.metadata.name.clone().unwrap_or_default())
        } else {
            Disposition::Keep
        };
    }
    let own = view
        .nodes
        .iter()
        .map(|n| records.get(&n.name).unwrap_or(&n.traits));
    let others = view
        .siblings
        .iter()
        .flat_map(|s| s.status.iter().flat_map(|st| &st.nodes))
        .map(|n| &n.traits);
    if own.chain(others).any(|t| t.iter().any(|t| t == name)) {
        Disposition::WaitForCarrier
    } else {
        Disposition::Delete
    }
}

/// What the step changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The new trait record of each node whose Hypervisor was read.
    pub records: BTreeMap<String, Vec<String>>,
    /// `status.createdTraits` after the pass, sorted.
    pub created: Vec<String>,
    /// The events.
    pub events: Vec<EventNote>,
}

fn event(reason: EventReason, note: String) -> EventNote {
    EventNote { reason, note }
}

fn false_report(reason: Reason, message: String, error: Option<String>) -> Report {
    Report {
        ok: false,
        reason,
        message,
        requeue: Some(REQUEUE_COMPUTE_DRAIN_POLLING),
        error,
    }
}

fn hypervisor_report(node: &str, verb: &str, failure: HypervisorFailure) -> Report {
    match failure {
        HypervisorFailure::NotServed => false_report(
            Reason::HypervisorOperatorNotInstalled,
            "The pool's cluster serves no kvm.cloud.sap/v1 Hypervisor: custom traits need openstack-hypervisor-operator".to_owned(),
            None,
        ),
        HypervisorFailure::Forbidden(e) => false_report(
            Reason::HypervisorsForbidden,
            format!("{verb} Hypervisor {node} is forbidden: {e}"),
            None,
        ),
        HypervisorFailure::Failed(e) => {
            let message = format!("{verb} Hypervisor {node}: {e}");
            false_report(Reason::HypervisorError, message.clone(), Some(message))
        }
    }
}

/// What the step reads: the Hypervisors of the managed nodes.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The Hypervisors found, by node.
    pub found: BTreeMap<String, Hypervisor>,
    /// The managed nodes without one.
    pub missing: Vec<String>,
    /// The managed nodes left to the annotation.
    pub annotated: Vec<String>,
    /// The read that failed, as the step's report.
    pub failure: Option<Report>,
}

/// Reads the Hypervisor of every managed node not left to the annotation, stopping at the
/// first failed read.
pub async fn observe(hypervisors: &dyn Hypervisors, pool: &Pool<'_>) -> Observed {
    let (read, annotated) = managed(pool);
    let mut observed = Observed {
        annotated,
        ..Observed::default()
    };
    for node in &read {
        match hypervisors.get(node).await {
            Ok(Some(h)) => {
                observed.found.insert(node.clone(), h);
            }
            Ok(None) => observed.missing.push(node.clone()),
            Err(failure) => {
                observed.failure = Some(hypervisor_report(node, "reading", failure));
                return observed;
            }
        }
    }
    observed
}

/// The traits to create (in Placement), the Hypervisors to patch, and the created traits to
/// delete, decided from what was read; carried out in that order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// The traits some found node wants and its Hypervisor does not show yet.
    pub create: Vec<String>,
    /// The found nodes whose `spec.customTraits` is not the desired list, with that list.
    pub patch: Vec<(String, Vec<String>)>,
    /// The new trait record of each found node.
    pub records: BTreeMap<String, Vec<String>>,
    /// The found nodes whose Hypervisor has not applied the desired list yet.
    pub lagging: Vec<String>,
    /// `status.createdTraits` before the pass.
    pub created: Vec<String>,
    /// What to do with each of them (a trait this pass creates is kept: the pool declares it).
    pub dispositions: BTreeMap<String, Disposition>,
    /// The created traits nobody declares or carries any more.
    pub delete: Vec<String>,
    /// The Nova's name, for messages.
    pub nova: String,
}

/// The pure decision over what was read.
pub fn decide(pool: &Pool<'_>, observed: &Observed) -> Decision {
    let found = &observed.found;
    let wanted: BTreeMap<&String, Vec<String>> = found
        .keys()
        .map(|node| (node, desired(&pool.view.cr, node)))
        .collect();
    let create: BTreeSet<&String> = found
        .iter()
        .flat_map(|(node, h)| wanted[node].iter().filter(|t| !h.status_traits.contains(t)))
        .collect();
    let mut decision = Decision {
        create: create.into_iter().cloned().collect(),
        ..Decision::default()
    };
    for (node, h) in found {
        let list = &wanted[node];
        if &h.custom_traits != list {
            decision.patch.push((node.clone(), list.clone()));
        }
        let applied = custom(&h.status_traits);
        if &applied != list {
            decision.lagging.push(node.clone());
        }
        let record: BTreeSet<String> = applied.into_iter().chain(list.iter().cloned()).collect();
        decision
            .records
            .insert(node.clone(), record.into_iter().collect());
    }
    decision.created = pool.created().to_vec();
    decision.dispositions = decision
        .created
        .iter()
        .map(|name| (name.clone(), disposition(pool, &decision.records, name)))
        .collect();
    decision.delete = decision
        .created
        .iter()
        .filter(|name| decision.dispositions[*name] == Disposition::Delete)
        .cloned()
        .collect();
    decision.nova = pool.view.nova().to_owned();
    decision
}

/// The effects of a decision, in order: the creates, the patches on `cluster`, the deletes.
pub fn effects(decision: &Decision, cluster: &Handle) -> Vec<Effect> {
    let creates = decision
        .create
        .iter()
        .map(|name| Effect::OpenStack(Action::EnsureTrait { name: name.clone() }));
    let patches = decision
        .patch
        .iter()
        .map(|(node, traits)| patch(cluster, node, traits));
    let deletes = decision
        .delete
        .iter()
        .map(|name| Effect::OpenStack(Action::DeleteTrait { name: name.clone() }));
    creates.chain(patches).chain(deletes).collect()
}

/// What the pass changed and its condition, given one outcome per effect carried out (the
/// batch stops at the first failure, ending the step with what was learned so far).
pub fn settle(
    observed: &Observed,
    decision: &Decision,
    outcomes: Vec<EffectOutcome>,
) -> (Outcome, Report) {
    let mut outcome = Outcome {
        created: decision.created.clone(),
        ..Outcome::default()
    };
    let mut outcomes = outcomes.into_iter();
    for name in &decision.create {
        match outcomes.next() {
            Some(EffectOutcome::OpenStack(Ok(Done::Trait(TraitEnsured::Created)))) => {
                if !outcome.created.contains(name) {
                    outcome.created.push(name.clone());
                    outcome.created.sort();
                }
                outcome.events.push(event(
                    EventReason::TraitCreated,
                    format!("Created custom trait {name} in Placement"),
                ));
            }
            Some(EffectOutcome::OpenStack(Ok(_))) => {}
            stopped => return (outcome, stopped_report(stopped)),
        }
    }
    for (node, _) in &decision.patch {
        match outcomes.next() {
            Some(EffectOutcome::Cluster(Ok(()))) => {}
            Some(EffectOutcome::Cluster(Err(e))) => {
                return (outcome, hypervisor_report(node, "patching", failure(e)));
            }
            stopped => return (outcome, stopped_report(stopped)),
        }
    }
    outcome.records = decision.records.clone();
    let mut deleted: BTreeMap<&String, Option<EffectOutcome>> = decision
        .delete
        .iter()
        .map(|name| (name, outcomes.next()))
        .collect();
    let mut waiting = Vec::new();
    for name in outcome.created.clone() {
        let drop = |outcome: &mut Outcome, reason, note| {
            outcome.created.retain(|t| *t != name);
            outcome.events.push(event(reason, note));
        };
        let disposition = decision.dispositions.get(&name).cloned();
        match disposition.unwrap_or(Disposition::Keep) {
            Disposition::Keep => {}
            Disposition::Handover(other) => drop(
                &mut outcome,
                EventReason::TraitKept,
                format!("Kept custom trait {name}: NovaCompute {other} still declares it"),
            ),
            Disposition::WaitForCarrier => waiting.push(name),
            Disposition::Delete => match deleted.remove(&name).flatten() {
                Some(EffectOutcome::OpenStack(Ok(Done::TraitDeletion(TraitDeletion::Deleted)))) => {
                    drop(
                        &mut outcome,
                        EventReason::TraitDeleted,
                        format!(
                            "Deleted custom trait {name} from Placement: no NovaCompute of Nova {} declares it",
                            decision.nova
                        ),
                    )
                }
                Some(EffectOutcome::OpenStack(Ok(Done::TraitDeletion(TraitDeletion::InUse)))) => {
                    drop(
                        &mut outcome,
                        EventReason::TraitKept,
                        format!(
                            "Kept custom trait {name}: Placement still associates it with a resource provider"
                        ),
                    )
                }
                stopped => return (outcome, stopped_report(stopped)),
            },
        }
    }
    let report = if !observed.missing.is_empty() {
        false_report(
            Reason::NodesWithoutHypervisor,
            format!("No Hypervisor exists for {}", observed.missing.join(", ")),
            None,
        )
    } else if !decision.lagging.is_empty() {
        false_report(
            Reason::WaitingForHypervisorOperator,
            format!(
                "Waiting for openstack-hypervisor-operator to apply the custom traits of {}",
                decision.lagging.join(", ")
            ),
            None,
        )
    } else {
        let mut message = format!("Custom traits applied on {} nodes", observed.found.len());
        if !observed.annotated.is_empty() {
            message.push_str(&format!(
                ", {} left to the {ANNOTATION} annotation",
                observed.annotated.len()
            ));
        }
        if !waiting.is_empty() {
            message.push_str(&format!(
                "; created traits waiting for their last carrier: {}",
                waiting.join(", ")
            ));
        }
        Report {
            ok: true,
            reason: Reason::TraitsApplied,
            message,
            requeue: (!waiting.is_empty()).then_some(REQUEUE_COMPUTE_DRAIN_POLLING),
            error: None,
        }
    };
    (outcome, report)
}

/// The report of a batch that stopped at a failed OpenStack call.
fn stopped_report(stopped: Option<EffectOutcome>) -> Report {
    let message = match stopped {
        Some(EffectOutcome::OpenStack(Err(message))) => message,
        other => format!("the batch ended early: {other:?}"),
    };
    false_report(Reason::ComputeAPIError, message, None)
}

/// The report of a pool that declares and records no custom trait: nothing to read or call.
fn none_declared(pool: &Pool<'_>, observed: &Observed) -> Option<Report> {
    let idle = observed.found.is_empty()
        && observed.missing.is_empty()
        && observed.annotated.is_empty()
        && pool.created().is_empty();
    idle.then(|| Report {
        ok: true,
        reason: Reason::NoTraitsDeclared,
        message: "No node of the pool declares a custom trait".to_owned(),
        requeue: None,
        error: None,
    })
}

/// Reads, decides, carries the effects out in order through the one executor and settles:
/// the step's whole pass, outside the engine (the unit tests and the real-services proofs).
pub async fn reconcile(
    client: &Client,
    hypervisors: &dyn Hypervisors,
    cluster: &Handle,
    pool: &Pool<'_>,
) -> (Outcome, Report) {
    let observed = observe(hypervisors, pool).await;
    if let Some(report) = observed
        .failure
        .clone()
        .or_else(|| none_declared(pool, &observed))
    {
        let outcome = Outcome {
            created: pool.created().to_vec(),
            ..Outcome::default()
        };
        return (outcome, report);
    }
    let decision = decide(pool, &observed);
    let outcomes =
        effects::carry_out(&effects(&decision, cluster), Some(client), |_, _, _| {}).await;
    settle(&observed, &decision, outcomes)
}

/// The Traits step: returns the shorter of its own poll and the one the Services step
/// handed over.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    nova_side(pass, step)
}

fn step<'a>(pass: &'a NovaComputePass, nova: &'a NovaInputs) -> StepFuture<'a, NovaCompute> {
    Box::pin(async move {
        let side = compute_api::side(pass, nova);
        let annotated = pass
            .resolved
            .nodes
            .as_ref()
            .map(|s| s.annotated.clone())
            .unwrap_or_default();
        let pool = Pool {
            view: &side.pool,
            annotated: &annotated,
        };
        let observed = observe(&ClusterHypervisors(&*pass.cluster), &pool).await;
        let services_poll = pass.resolved.services_poll;
        let created = pool.created().to_vec();
        let nodes = side.pool.nodes.clone();
        if let Some(report) = observed
            .failure
            .clone()
            .or_else(|| none_declared(&pool, &observed))
        {
            let outcome = Outcome {
                created: created.clone(),
                ..Outcome::default()
            };
            return Ok(settled_plan(
                outcome,
                report,
                &created,
                &nodes,
                services_poll,
            ));
        }
        let decision = decide(&pool, &observed);
        let list = effects(&decision, &pass.cluster);
        Ok(NovaComputePlan::effects(
            Some(side.client.clone()),
            list,
            move |outcomes| {
                let (outcome, report) = settle(&observed, &decision, outcomes);
                settled_plan(outcome, report, &created, &nodes, services_poll)
            },
        ))
    })
}

/// The step's plan: its condition, the created traits and node records that changed, its
/// events, and the shorter of its own poll and the one the Services step handed over.
fn settled_plan(
    outcome: Outcome,
    r: Report,
    created: &[String],
    nodes: &[NovaComputeNodeStatus],
    services_poll: Option<Duration>,
) -> NovaComputePlan {
    let mut plan = NovaComputePlan::proceed().report(C::TraitsReady, r.ok, r.reason, r.message);
    if outcome.created != created {
        plan = plan.set(StatusUpdate::CreatedTraits(outcome.created.clone()));
    }
    let recorded: Vec<NovaComputeNodeStatus> = nodes
        .iter()
        .cloned()
        .map(|mut n| {
            if let Some(record) = outcome.records.get(&n.name) {
                n.traits = record.clone();
            }
            n
        })
        .collect();
    if recorded != nodes {
        plan = plan.set(StatusUpdate::Nodes(recorded));
    }
    plan = compute_api::with_events(plan, outcome.events);
    let after = [r.requeue, services_poll].into_iter().flatten().min();
    if let Some(after) = after {
        plan = plan.requeue(after);
    }
    if let Some(message) = r.error {
        plan = plan.failing(StepError::Refused(message));
    }
    plan
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use nova_api::v1alpha1::NovaComputeHostTraits;

    use futures::future::BoxFuture;

    use super::*;
    use crate::clusters::MemoryCluster;
    use crate::novacompute::plan_fixtures::{entry, pool_cr, view};
    use crate::openstack::fake::{Fake, client};

    /// Hypervisors in memory, read through the seam and patched through an in-memory cluster.
    #[derive(Default)]
    struct Memory {
        objects: Mutex<BTreeMap<String, Hypervisor>>,
        cluster: Arc<MemoryCluster>,
        refuse: Option<HypervisorFailure>,
    }

    impl Memory {
        fn with(nodes: &[(&str, &[&str], &[&str])]) -> Self {
            let list = |l: &[&str]| l.iter().map(|t| (*t).to_owned()).collect();
            Self {
                objects: Mutex::new(
                    nodes
                        .iter()
                        .map(|(n, spec, status)| {
                            (
                                (*n).to_owned(),
                                Hypervisor {
                                    custom_traits: list(spec),
                                    status_traits: list(status),
                                },
                            )
                        })
                        .collect(),
                ),
                ..Self::default()
            }
        }

        /// Each patch sent, as the node and the list it set.
        fn patched(&self) -> Vec<(String, Vec<String>)> {
            self.cluster
                .patched()
                .into_iter()
                .map(|(node, patch)| {
                    let traits = serde_json::from_value(patch["spec"]["customTraits"].clone())
                        .expect("a customTraits patch");
                    (node, traits)
                })
                .collect()
        }
    }

    impl Hypervisors for Memory {
        fn get<'a>(
            &'a self,
            node: &'a str,
        ) -> BoxFuture<'a, Result<Option<Hypervisor>, HypervisorFailure>> {
            let answer = match &self.refuse {
                Some(f) => Err(f.clone()),
                None => Ok(self.objects.lock().expect("lock").get(node).cloned()),
            };
            Box::pin(async move { answer })
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// The spec's traits-bearing pool-a: CUSTOM_POOL_A everywhere, CUSTOM_GPU_A100 on node-1.
    fn pool_a(deleting: bool, nodes: Vec<NovaComputeNodeStatus>, created: &[&str]) -> NovaCompute {
        let mut cr = pool_cr("pool-a", deleting, nodes);
        cr.spec.traits = Some(strings(&["CUSTOM_POOL_A"]));
        cr.spec.host_traits = Some(vec![NovaComputeHostTraits {
            node: "node-1".into(),
            traits: strings(&["CUSTOM_GPU_A100", "CUSTOM_POOL_A"]),
        }]);
        with_created(cr, created)
    }

    fn with_created(mut cr: NovaCompute, created: &[&str]) -> NovaCompute {
        if let Some(status) = cr.status.as_mut() {
            status.created_traits = strings(created);
        }
        cr
    }

    fn nodes_of(cr: &NovaCompute) -> Vec<NovaComputeNodeStatus> {
        cr.status
            .as_ref()
            .map(|s| s.nodes.clone())
            .unwrap_or_default()
    }

    async fn run(
        cr: &NovaCompute,
        siblings: &[Arc<NovaCompute>],
        annotated: &[&str],
        fake: &Fake,
        hypervisors: &Memory,
    ) -> (Outcome, Report) {
        let view = view(cr.clone(), siblings);
        let annotated: BTreeSet<String> = annotated.iter().map(|s| (*s).to_owned()).collect();
        let pool = Pool {
            view: &view,
            annotated: &annotated,
        };
        let cluster = Handle::new(hypervisors.cluster.clone());
        reconcile(&client(fake, None), hypervisors, &cluster, &pool).await
    }

    #[test]
    fn the_desired_list_is_the_sorted_union_of_traits_and_the_nodes_host_traits() {
        let cr = pool_a(false, Vec::new(), &[]);
        assert_eq!(desired(&cr, "node-1"), ["CUSTOM_GPU_A100", "CUSTOM_POOL_A"]);
        assert_eq!(desired(&cr, "node-2"), ["CUSTOM_POOL_A"]);
        assert!(desired(&pool_cr("plain", false, Vec::new()), "node-1").is_empty());
    }

    #[test]
    fn managed_nodes_are_pending_or_active_with_a_desired_list_or_a_record() {
        let mut recorded = entry("node-4", NodePhase::Active, None);
        recorded.traits = strings(&["CUSTOM_OLD"]);
        let cr = pool_cr(
            "plain",
            false,
            vec![
                entry("node-1", NodePhase::Active, None),
                recorded.clone(),
                entry("node-5", NodePhase::Draining, None),
            ],
        );
        let nodes = nodes_of(&cr);
        let cr = view(cr, &[]);
        let none = BTreeSet::new();
        let pool = |view| Pool {
            view,
            annotated: &none,
        };
        assert_eq!(managed(&pool(&cr)), (strings(&["node-4"]), Vec::new()));
        let a = view(pool_a(false, nodes.clone(), &[]), &[]);
        let annotated = BTreeSet::from(["node-1".to_owned()]);
        let p = Pool {
            annotated: &annotated,
            ..pool(&a)
        };
        assert_eq!(managed(&p), (strings(&["node-4"]), strings(&["node-1"])));
        let leaving = view(pool_a(true, nodes.clone(), &[]), &[]);
        assert_eq!(managed(&pool(&leaving)), (Vec::new(), Vec::new()));
    }

    #[tokio::test]
    async fn no_declared_trait_and_none_created_makes_no_call() {
        let cr = pool_cr(
            "plain",
            false,
            vec![entry("node-1", NodePhase::Active, None)],
        );
        let fake = Fake::new();
        let (_, report) = run(&cr, &[], &[], &fake, &Memory::default()).await;
        assert_eq!(
            (
                report.ok,
                report.reason,
                report.message.as_str(),
                report.requeue
            ),
            (
                true,
                Reason::NoTraitsDeclared,
                "No node of the pool declares a custom trait",
                None
            )
        );
        assert!(fake.requests().is_empty(), "no token either");
    }

    #[tokio::test]
    async fn missing_traits_are_created_first_then_the_hypervisor_gets_the_sorted_list() {
        let cr = pool_a(
            false,
            vec![
                entry("node-1", NodePhase::Active, None),
                entry("node-2", NodePhase::Pending, None),
            ],
            &[],
        );
        let fake = Fake::new()
            .answer("PUT", "/traits/CUSTOM_GPU_A100", 201, "")
            .answer("PUT", "/traits/CUSTOM_POOL_A", 204, "");
        let hypervisors = Memory::with(&[
            ("node-1", &[], &["HW_CPU_X86_AVX"]),
            ("node-2", &["CUSTOM_POOL_A"], &["CUSTOM_POOL_A"]),
        ]);
        let (outcome, report) = run(&cr, &[], &[], &fake, &hypervisors).await;
        assert_eq!(
            fake.calls(),
            ["PUT /traits/CUSTOM_GPU_A100", "PUT /traits/CUSTOM_POOL_A"]
        );
        assert_eq!(
            hypervisors.patched(),
            [(
                "node-1".to_owned(),
                strings(&["CUSTOM_GPU_A100", "CUSTOM_POOL_A"])
            )],
            "node-2 already carries its list"
        );
        assert_eq!(
            outcome.created,
            ["CUSTOM_GPU_A100"],
            "the 204 was someone else's"
        );
        assert_eq!(
            outcome.records,
            BTreeMap::from([
                (
                    "node-1".to_owned(),
                    strings(&["CUSTOM_GPU_A100", "CUSTOM_POOL_A"])
                ),
                ("node-2".to_owned(), strings(&["CUSTOM_POOL_A"])),
            ])
        );
        assert_eq!(
            outcome
                .events
                .iter()
                .map(|e| e.note.as_str())
                .collect::<Vec<_>>(),
            ["Created custom trait CUSTOM_GPU_A100 in Placement"]
        );
        assert_eq!(
            (report.ok, report.reason, report.requeue),
            (
                false,
                Reason::WaitingForHypervisorOperator,
                Some(REQUEUE_COMPUTE_DRAIN_POLLING)
            )
        );
        assert_eq!(
            report.message,
            "Waiting for openstack-hypervisor-operator to apply the custom traits of node-1"
        );
    }

    #[tokio::test]
    async fn a_failed_create_patches_nothing_and_keeps_what_it_created() {
        let cr = pool_a(false, vec![entry("node-1", NodePhase::Active, None)], &[]);
        let fake = Fake::new()
            .answer("PUT", "/traits/CUSTOM_GPU_A100", 201, "")
            .answer("PUT", "/traits/CUSTOM_POOL_A", 503, "busy");
        let hypervisors = Memory::with(&[("node-1", &[], &[])]);
        let (outcome, report) = run(&cr, &[], &[], &fake, &hypervisors).await;
        assert!(hypervisors.patched().is_empty());
        assert!(outcome.records.is_empty());
        assert_eq!(outcome.created, ["CUSTOM_GPU_A100"]);
        assert_eq!(
            (report.reason, report.message.as_str(), report.requeue),
            (
                Reason::ComputeAPIError,
                "creating trait CUSTOM_POOL_A: PUT /traits/CUSTOM_POOL_A: HTTP 503: busy",
                Some(REQUEUE_COMPUTE_DRAIN_POLLING)
            )
        );
    }

    #[tokio::test]
    async fn converged_nodes_and_the_annotated_ones_are_applied() {
        let cr = pool_a(
            false,
            vec![
                entry("node-1", NodePhase::Active, None),
                entry("node-2", NodePhase::Active, None),
            ],
            &[],
        );
        let fake = Fake::new();
        let hypervisors = Memory::with(&[(
            "node-2",
            &["CUSTOM_POOL_A"],
            &["CUSTOM_POOL_A", "HW_CPU_X86_AVX"],
        )]);
        let (_, report) = run(&cr, &[], &["node-1"], &fake, &hypervisors).await;
        assert!(fake.requests().is_empty() && hypervisors.patched().is_empty());
        assert_eq!(
            (report.ok, report.reason, report.requeue),
            (true, Reason::TraitsApplied, None)
        );
        assert_eq!(
            report.message,
            "Custom traits applied on 1 nodes, 1 left to the nova.openstack.cloud.sap/custom-traits annotation"
        );
    }

    #[tokio::test]
    async fn hypervisor_failures_stop_the_step_or_collect_the_node() {
        let cr = pool_a(false, vec![entry("node-1", NodePhase::Active, None)], &[]);
        for (refuse, reason, error) in [
            (
                HypervisorFailure::NotServed,
                Reason::HypervisorOperatorNotInstalled,
                false,
            ),
            (
                HypervisorFailure::Forbidden("403".into()),
                Reason::HypervisorsForbidden,
                false,
            ),
            (
                HypervisorFailure::Failed("500".into()),
                Reason::HypervisorError,
                true,
            ),
        ] {
            let hypervisors = Memory {
                refuse: Some(refuse),
                ..Memory::default()
            };
            let (_, report) = run(&cr, &[], &[], &Fake::new(), &hypervisors).await;
            assert_eq!(
                (
                    report.ok,
                    report.reason,
                    report.requeue,
                    report.error.is_some()
                ),
                (false, reason, Some(REQUEUE_COMPUTE_DRAIN_POLLING), error)
            );
        }
        let (_, report) = run(&cr, &[], &[], &Fake::new(), &Memory::default()).await;
        assert_eq!(
            (report.reason, report.message.as_str()),
            (
                Reason::NodesWithoutHypervisor,
                "No Hypervisor exists for node-1"
            )
        );
    }

    #[test]
    fn a_created_trait_is_kept_handed_over_waited_on_or_deleted() {
        let mut carrier = entry("node-9", NodePhase::Draining, None);
        carrier.traits = strings(&["CUSTOM_CARRIED"]);
        let declaring = pool_a(false, Vec::new(), &[]);
        let mut declaring_but_deleting = pool_cr("gone", true, vec![carrier.clone()]);
        declaring_but_deleting.spec.traits = Some(strings(&["CUSTOM_GONE"]));
        let siblings = [
            Arc::new(pool_cr_named("pool-b", declaring.clone())),
            Arc::new(declaring_but_deleting),
        ];
        let none = BTreeSet::new();
        let records = BTreeMap::new();
        let this = view(pool_a(false, Vec::new(), &[]), &siblings);
        let pool = |view| Pool {
            view,
            annotated: &none,
        };
        assert_eq!(
            disposition(&pool(&this), &records, "CUSTOM_POOL_A"),
            Disposition::Keep
        );
        let leaving = view(pool_a(true, Vec::new(), &[]), &siblings);
        assert_eq!(
            disposition(&pool(&leaving), &records, "CUSTOM_POOL_A"),
            Disposition::Handover("pool-b".into())
        );
        assert_eq!(
            disposition(&pool(&leaving), &records, "CUSTOM_GONE"),
            Disposition::Delete,
            "only a live pool's declaration counts"
        );
        assert_eq!(
            disposition(&pool(&leaving), &records, "CUSTOM_CARRIED"),
            Disposition::WaitForCarrier,
            "a deleting pool's record still counts"
        );
    }

    fn pool_cr_named(name: &str, mut cr: NovaCompute) -> NovaCompute {
        cr.metadata.name = Some(name.into());
        cr
    }

    #[tokio::test]
    async fn undeclared_created_traits_are_deleted_or_kept_on_409() {
        let mut carrier = entry("node-1", NodePhase::Draining, None);
        carrier.traits = strings(&["CUSTOM_WAIT"]);
        let cr = with_created(
            pool_cr("plain", false, vec![carrier]),
            &["CUSTOM_DONE", "CUSTOM_USED", "CUSTOM_WAIT"],
        );
        let fake = Fake::new()
            .answer("DELETE", "/traits/CUSTOM_DONE", 204, "")
            .answer("DELETE", "/traits/CUSTOM_USED", 409, "in use");
        let (outcome, report) = run(&cr, &[], &[], &fake, &Memory::default()).await;
        assert_eq!(outcome.created, ["CUSTOM_WAIT"]);
        assert_eq!(
            outcome
                .events
                .iter()
                .map(|e| (e.reason.as_str(), e.note.as_str()))
                .collect::<Vec<_>>(),
            [
                (
                    "TraitDeleted",
                    "Deleted custom trait CUSTOM_DONE from Placement: no NovaCompute of Nova nova declares it"
                ),
                (
                    "TraitKept",
                    "Kept custom trait CUSTOM_USED: Placement still associates it with a resource provider"
                ),
            ]
        );
        assert_eq!(
            (report.ok, report.reason, report.requeue),
            (
                true,
                Reason::TraitsApplied,
                Some(REQUEUE_COMPUTE_DRAIN_POLLING)
            )
        );
        assert_eq!(
            report.message,
            "Custom traits applied on 0 nodes; created traits waiting for their last carrier: CUSTOM_WAIT"
        );
    }

    /// Injects, one row each, a failing read of the node's Hypervisor (kind not served,
    /// forbidden, another failure) and a failing Placement call before the deletes (HTTP 503,
    /// no answer), for a pool holding a created trait nobody declares or carries any more;
    /// asserts no row deletes the trait or drops it from `createdTraits` (the control row,
    /// read, does delete it).
    #[tokio::test]
    async fn a_failing_read_or_call_plans_no_delete() {
        use crate::openstack::TransportError;
        let cr = pool_a(
            false,
            vec![entry("node-1", NodePhase::Active, None)],
            &["CUSTOM_OLD"],
        );
        let applied = || {
            Memory::with(&[(
                "node-1",
                &["CUSTOM_GPU_A100", "CUSTOM_POOL_A"],
                &["CUSTOM_GPU_A100", "CUSTOM_POOL_A"],
            )])
        };
        let refusing = |refuse| Memory {
            refuse: Some(refuse),
            ..Memory::default()
        };
        let lagging = || Memory::with(&[("node-1", &[], &[])]);
        let rows = [
            (
                "the kind not served",
                Fake::new(),
                refusing(HypervisorFailure::NotServed),
            ),
            (
                "forbidden",
                Fake::new(),
                refusing(HypervisorFailure::Forbidden("403".into())),
            ),
            (
                "a failed read",
                Fake::new(),
                refusing(HypervisorFailure::Failed("500".into())),
            ),
            (
                "HTTP 503 on a create",
                Fake::new().answer("PUT", "/traits/CUSTOM_GPU_A100", 503, "busy"),
                lagging(),
            ),
            (
                "no answer to a create",
                Fake::new().fail(
                    "PUT",
                    "/traits/CUSTOM_GPU_A100",
                    TransportError::TimedOut("placement.test".into()),
                ),
                lagging(),
            ),
        ];
        for (what, fake, hypervisors) in rows {
            let fake = fake.answer("DELETE", "/traits/CUSTOM_OLD", 204, "");
            let (outcome, report) = run(&cr, &[], &[], &fake, &hypervisors).await;
            assert!(
                !fake.calls().iter().any(|c| c.starts_with("DELETE")),
                "{what}: {:?}",
                fake.calls()
            );
            assert_eq!(outcome.created, ["CUSTOM_OLD"], "{what}");
            assert!(!report.ok, "{what}: {report:?}");
        }
        let fake = Fake::new().answer("DELETE", "/traits/CUSTOM_OLD", 204, "");
        let (outcome, _) = run(&cr, &[], &[], &fake, &applied()).await;
        assert_eq!(
            fake.calls(),
            ["DELETE /traits/CUSTOM_OLD"],
            "the control row"
        );
        assert!(outcome.created.is_empty());
    }
}
