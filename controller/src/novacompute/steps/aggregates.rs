//! AggregatesReady (`novacompute.md` §4.4): one host aggregate per zone of the pool's Pending
//! and Active nodes, plus the zone-less `tenant_filter_tests` while the pool lives, because
//! openstack-hypervisor-operator puts every host it onboards into both and creates neither.
//! What the operator creates carries the marker `c5c3.io:nova=<namespace>/<nova>`; a marked
//! aggregate no pool of the Nova needs any more is deleted once it holds no host, unless someone
//! added metadata to it. Hosts are never added or removed here: onboarding adds them, and
//! deleting a compute service removes them.
//!
//! Longer than 500 lines on purpose: the required set, the kept-aggregate record and the
//! condition's precedence are one decision; split, the halves would share every private type.

use nova_api::conditions::NovaComputeConditionType as C;
use nova_api::events::EventReason;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use crate::novacompute::compute_api::{PoolView, Report};
use crate::novacompute::resolved::NovaInputs;
use crate::novacompute::resolved::Resolved;
use crate::novacompute::{
    NovaComputePass, NovaComputePlan, REQUEUE_COMPUTE_DRAIN_POLLING, compute_api, nova_side,
};
use crate::pipeline::{REQUEUE_DEPLOYMENT_POLLING, StepFuture};

use nova_api::conditions::Reason;
use nova_api::v1alpha1::{NodePhase, NovaCompute, NovaComputeNodeStatus};

use crate::objects::EventNote;
use crate::openstack::action::{Action, Done, failed};
use crate::openstack::nova::Aggregate;
use crate::openstack::{Client, OpenStackError};
use crate::pipeline::effects;

/// The metadata key of the marker (no slash: Nova restricts metadata keys).
pub const MARKER_KEY: &str = "c5c3.io:nova";
/// The aggregate the hypervisor operator's tenant filter tests need.
pub const TENANT_FILTER_TESTS: &str = "tenant_filter_tests";
/// The metadata key Nova mirrors an aggregate's zone into.
const ZONE_KEY: &str = "availability_zone";

/// The marker value, `<namespace>/<nova>`.
fn marker(pool: &PoolView) -> String {
    format!("{}/{}", pool.namespace(), pool.nova())
}

/// An aggregate to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The name (the zone, or `tenant_filter_tests`).
    pub name: String,
    /// The availability zone; none for `tenant_filter_tests`.
    pub zone: Option<String>,
}

/// What the step changes in Nova.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Missing aggregates, created and then marked.
    pub create: Vec<Wanted>,
    /// Marked, unneeded, empty aggregates without foreign metadata.
    pub delete: Vec<Aggregate>,
    /// Marked, unneeded, empty aggregates kept for their foreign metadata keys (sorted).
    pub kept: Vec<(String, Vec<String>)>,
}

/// How the pool's aggregates look, for the condition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assessment {
    /// The aggregates the pool ensures, sorted.
    pub ensured: Vec<String>,
    /// `aggregate <name> has availability zone "<az>"`, one per mismatch.
    pub mismatches: Vec<String>,
    /// Pending/Active nodes without a zone label.
    pub without_zone: Vec<String>,
    /// Active nodes in no aggregate of their zone, with the zone.
    pub outside: Vec<(String, String)>,
}

/// The zones of a ledger's Pending and Active nodes, and those nodes without a zone.
fn onboarding_zones(nodes: &[NovaComputeNodeStatus]) -> (BTreeSet<String>, Vec<String>) {
    let mut zones = BTreeSet::new();
    let mut without = Vec::new();
    for node in nodes
        .iter()
        .filter(|n| matches!(n.phase, NodePhase::Pending | NodePhase::Active))
    {
        match node.zone.as_deref().filter(|z| !z.is_empty()) {
            Some(zone) => {
                zones.insert(zone.to_owned());
            }
            None => without.push(node.name.clone()),
        }
    }
    (zones, without)
}

/// The aggregates some live pool of the Nova still needs: the zones of every ledger entry of
/// every pool that is not being deleted, and `tenant_filter_tests` while one such pool exists.
fn required(pool: &PoolView) -> BTreeSet<String> {
    let own = (!pool.deleting()).then_some(pool.nodes.as_slice());
    let live: Vec<&[NovaComputeNodeStatus]> = own
        .into_iter()
        .chain(
            pool.live_siblings()
                .map(|s| s.status.as_ref().map_or(&[][..], |st| st.nodes.as_slice())),
        )
        .collect();
    let mut names: BTreeSet<String> = live
        .iter()
        .flat_map(|nodes| nodes.iter())
        .filter_map(|n| n.zone.clone().filter(|z| !z.is_empty()))
        .collect();
    if !live.is_empty() {
        names.insert(TENANT_FILTER_TESTS.to_owned());
    }
    names
}

/// The pure part: what to create, delete and keep, and how the pool's aggregates look.
pub fn plan(pool: &PoolView, aggregates: &[Aggregate]) -> (Changes, Assessment) {
    let (zones, without_zone) = onboarding_zones(&pool.nodes);
    let mut wanted: Vec<Wanted> = zones
        .iter()
        .map(|z| Wanted {
            name: z.clone(),
            zone: Some(z.clone()),
        })
        .collect();
    if !pool.deleting() {
        wanted.push(Wanted {
            name: TENANT_FILTER_TESTS.to_owned(),
            zone: None,
        });
    }
    let by_name: BTreeMap<&str, &Aggregate> =
        aggregates.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut changes = Changes::default();
    let mut mismatches = Vec::new();
    for w in &wanted {
        match by_name.get(w.name.as_str()) {
            None => changes.create.push(w.clone()),
            Some(existing) if existing.availability_zone != w.zone.clone().unwrap_or_default() => {
                mismatches.push(format!(
                    "aggregate {} has availability zone \"{}\"",
                    w.name, existing.availability_zone
                ));
            }
            Some(_) => {}
        }
    }
    let required = required(pool);
    let marker = marker(pool);
    for a in aggregates.iter().filter(|a| {
        a.metadata.get(MARKER_KEY) == Some(&marker)
            && !required.contains(&a.name)
            && a.hosts.is_empty()
    }) {
        let foreign: Vec<String> = a
            .metadata
            .keys()
            .filter(|k| *k != MARKER_KEY && *k != ZONE_KEY)
            .cloned()
            .collect();
        if foreign.is_empty() {
            changes.delete.push(a.clone());
        } else {
            changes.kept.push((a.name.clone(), foreign));
        }
    }
    let outside = pool
        .nodes
        .iter()
        .filter(|n| n.phase == NodePhase::Active)
        .filter_map(|n| Some((n, n.zone.as_deref().filter(|z| !z.is_empty())?)))
        .filter(|(n, zone)| {
            !aggregates
                .iter()
                .any(|a| a.availability_zone == *zone && a.hosts.contains(&n.name))
        })
        .map(|(n, zone)| (n.name.clone(), zone.to_owned()))
        .collect();
    let mut ensured: Vec<String> = wanted.into_iter().map(|w| w.name).collect();
    ensured.sort();
    (
        changes,
        Assessment {
            ensured,
            mismatches,
            without_zone,
            outside,
        },
    )
}

/// How carrying out the changes ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every call succeeded.
    Completed,
    /// A create answered 409: someone created the aggregate meanwhile.
    Concurrent(String),
    /// A call failed; the message names the action.
    Failed(String),
}

/// The condition. Only a completed step goes on: a failed call and a concurrent create
/// requeue, which also holds a deleting pool's finalizer (the teardown runs only after every
/// step before it went on). By precedence: a failed call, then a concurrent create, then the
/// zone mismatches, then the zone-less nodes (both not waits: the later steps still run), then
/// the True reasons.
pub fn report(assessment: &Assessment, outcome: &Outcome) -> Report {
    let report = |ok, reason, message: String, requeue| Report {
        ok,
        reason,
        message,
        requeue,
        error: None,
    };
    match outcome {
        Outcome::Failed(message) => report(
            false,
            Reason::ComputeAPIError,
            message.clone(),
            Some(REQUEUE_COMPUTE_DRAIN_POLLING),
        ),
        Outcome::Concurrent(name) => report(
            false,
            Reason::WaitingForAggregate,
            format!("Aggregate {name} was created concurrently; reading it back"),
            Some(REQUEUE_DEPLOYMENT_POLLING),
        ),
        Outcome::Completed if !assessment.mismatches.is_empty() => report(
            false,
            Reason::AggregateZoneMismatch,
            assessment.mismatches.join("; "),
            None,
        ),
        Outcome::Completed if !assessment.without_zone.is_empty() => report(
            false,
            Reason::NodesWithoutZone,
            format!(
                "Nodes without the topology.kubernetes.io/zone label cannot be onboarded: {}",
                assessment.without_zone.join(", ")
            ),
            None,
        ),
        Outcome::Completed if !assessment.outside.is_empty() => report(
            true,
            Reason::NodesOutsideZoneAggregate,
            format!(
                "Active nodes in no aggregate of their zone: {}",
                assessment
                    .outside
                    .iter()
                    .map(|(n, z)| format!("{n} ({z})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None,
        ),
        Outcome::Completed if assessment.ensured.is_empty() => report(
            true,
            Reason::AggregatesEnsured,
            "No aggregate is required".to_owned(),
            None,
        ),
        Outcome::Completed => report(
            true,
            Reason::AggregatesEnsured,
            format!(
                "Host aggregates in place: {}",
                assessment.ensured.join(", ")
            ),
            None,
        ),
    }
}

/// The `AggregateKept` notes each pool's last completed pass reported, so the Warning is
/// recorded when an aggregate starts being kept (or its foreign keys change), not on every
/// pass while it stays kept: steady state records no event. Held in memory by the pool index;
/// a restarted controller records each kept aggregate once more.
#[derive(Debug, Default)]
pub struct KeptAggregates(Mutex<HashMap<(String, String), BTreeSet<String>>>);

impl KeptAggregates {
    /// The events of a pass of the pool `(namespace, name)`: its `AggregateKept` notes only
    /// where the pool's last completed pass did not report them, none on a failed pass (which
    /// leaves the record, so the next completed pass reports what changed meanwhile).
    pub fn transitions(
        &self,
        pool: (String, String),
        outcome: &Outcome,
        notes: Vec<EventNote>,
    ) -> Vec<EventNote> {
        let (kept, mut others): (Vec<EventNote>, Vec<EventNote>) = notes
            .into_iter()
            .partition(|n| n.reason == EventReason::AggregateKept);
        if matches!(outcome, Outcome::Failed(_)) {
            return others;
        }
        let mut record = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let before = record.remove(&pool).unwrap_or_default();
        let now: BTreeSet<String> = kept.iter().map(|n| n.note.clone()).collect();
        let new: Vec<EventNote> = kept
            .into_iter()
            .filter(|n| !before.contains(&n.note))
            .collect();
        if !now.is_empty() {
            record.insert(pool, now);
        }
        others.splice(0..0, new);
        others
    }

    /// Forgets a pool that is gone.
    pub fn forget(&self, pool: &(String, String)) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(pool);
    }
}

/// The actions that carry out `changes`, in order: the creates, then the deletes.
pub fn actions(pool: &PoolView, changes: &Changes) -> Vec<Action> {
    let marker = marker(pool);
    let creates = changes.create.iter().map(|w| Action::CreateAggregate {
        name: w.name.clone(),
        zone: w.zone.clone(),
        marker_key: MARKER_KEY.to_owned(),
        marker: marker.clone(),
    });
    let deletes = changes.delete.iter().map(|a| Action::DeleteAggregate {
        id: a.id,
        name: a.name.clone(),
    });
    creates.chain(deletes).collect()
}

/// The `AggregateKept` Warnings of the aggregates `changes` keeps.
fn kept_notes(changes: &Changes) -> Vec<EventNote> {
    changes
        .kept
        .iter()
        .map(|(name, keys)| EventNote {
 reason: EventReason::AggregateKept,
            note: format!(
                "Kept empty host aggregate {name}: it carries metadata the operator did not set ({})",
                keys.join(", ")
            ),
        })
        .collect()
}

/// The outcome and events of the [`actions`] of `changes`, given one answer per action
/// carried out (the batch stops at a failure or a concurrent create).
pub fn settle(
    nova: &str,
    changes: &Changes,
    answers: &[Result<Done, String>],
) -> (Outcome, Vec<EventNote>) {
    let mut notes = kept_notes(changes);
    let created = changes.create.iter().map(|w| {
        let note = match &w.zone {
            Some(zone) => format!(
                "Created host aggregate {} in availability zone {zone}",
                w.name
            ),
            None => format!("Created host aggregate {}", w.name),
        };
        (w.name.as_str(), EventReason::AggregateCreated, note)
    });
    let deleted = changes.delete.iter().map(|a| {
        let note = format!(
            "Deleted host aggregate {}: no NovaCompute of Nova {nova} needs it",
            a.name
        );
        (a.name.as_str(), EventReason::AggregateDeleted, note)
    });
    for ((name, reason, note), answer) in created.chain(deleted).zip(answers) {
        match answer {
            Err(message) => return (Outcome::Failed(message.clone()), notes),
            Ok(Done::AggregateConcurrent) => return (Outcome::Concurrent(name.to_owned()), notes),
            Ok(_) => notes.push(EventNote { reason, note }),
        }
    }
    (Outcome::Completed, notes)
}

/// What a pass decided from the listed aggregates (or their failed listing).
pub struct Decision {
    /// How the pool's aggregates look.
    pub assessment: Assessment,
    /// What to change.
    pub changes: Changes,
    /// The actions that change it.
    pub actions: Vec<Action>,
    /// A failed listing: nothing is decided.
    pub failure: Option<String>,
}

/// The pure decision over the listing.
pub fn decide(pool: &PoolView, listed: Result<Vec<Aggregate>, OpenStackError>) -> Decision {
    match listed {
        Ok(aggregates) => {
            let (changes, assessment) = plan(pool, &aggregates);
            let actions = actions(pool, &changes);
            Decision {
                assessment,
                changes,
                actions,
                failure: None,
            }
        }
        Err(e) => Decision {
            assessment: Assessment::default(),
            changes: Changes::default(),
            actions: Vec::new(),
            failure: Some(failed("listing aggregates", &e)),
        },
    }
}

/// Lists, decides, carries the actions out in order through the one executor and settles:
/// the step's whole pass over the aggregates, outside the engine (the real-services proofs).
pub async fn reconcile(client: &Client, pool: &PoolView) -> (Assessment, Outcome, Vec<EventNote>) {
    let decision = decide(pool, client.aggregates().await);
    if let Some(message) = decision.failure {
        return (decision.assessment, Outcome::Failed(message), Vec::new());
    }
    let outcomes = effects::carry_out(
        &effects::openstack(decision.actions),
        Some(client),
        |_, _, _| {},
    )
    .await;
    let (outcome, notes) = settle(pool.nova(), &decision.changes, &effects::answers(outcomes));
    (decision.assessment, outcome, notes)
}

/// The Aggregates step (a Nova-side step: skipped on a deleting pool whose Nova is gone).
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    nova_side(pass, step)
}

fn step<'a>(pass: &'a NovaComputePass, nova: &'a NovaInputs) -> StepFuture<'a, NovaCompute> {
    Box::pin(async move {
        let side = compute_api::side(pass, nova);
        let pool = &side.pool;
        let decision = decide(pool, side.client.aggregates().await);
        let nova = pool.nova().to_owned();
        let key = (pool.namespace().to_owned(), pool.name());
        let shared = pass.shared.clone();
        let client = side.client.clone();
        let Decision {
            assessment,
            changes,
            actions,
            failure,
        } = decision;
        let settled = move |outcome: Outcome, notes: Vec<EventNote>| {
            let events = shared.kept_aggregates().transitions(key, &outcome, notes);
            let r = report(&assessment, &outcome);
            let plan = NovaComputePlan::proceed()
                .report(C::AggregatesReady, r.ok, r.reason, r.message)
                .resolve(Resolved {
                    openstack: Some(client),
                    ..Resolved::default()
                });
            let mut plan = compute_api::with_events(plan, events);
            if let Some(after) = r.requeue {
                plan = plan.requeue(after);
            }
            plan
        };
        if let Some(message) = failure {
            return Ok(settled(Outcome::Failed(message), Vec::new()));
        }
        Ok(NovaComputePlan::effects(
            Some(side.client.clone()),
            effects::openstack(actions),
            move |outcomes| {
                let (outcome, notes) = settle(&nova, &changes, &effects::answers(outcomes));
                settled(outcome, notes)
            },
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::plan_fixtures::{entry, pool_cr, view};
    use std::sync::Arc;

    fn aggregate(
        id: i64,
        name: &str,
        zone: &str,
        hosts: &[&str],
        meta: &[(&str, &str)],
    ) -> Aggregate {
        Aggregate {
            id,
            name: name.into(),
            availability_zone: zone.into(),
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            metadata: meta
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn pool(
        deleting: bool,
        nodes: &[NovaComputeNodeStatus],
        siblings: &[Arc<NovaCompute>],
    ) -> PoolView {
        view(pool_cr("pool-a", deleting, nodes.to_vec()), siblings)
    }

    const MARK: (&str, &str) = (MARKER_KEY, "ns/nova");

    #[test]
    fn one_aggregate_per_zone_of_pending_and_active_nodes_plus_tenant_filter_tests() {
        let nodes = [
            entry("a", NodePhase::Active, Some("z1")),
            entry("b", NodePhase::Pending, Some("z2")),
            entry("c", NodePhase::Draining, Some("z3")),
            entry("d", NodePhase::Conflict, Some("z4")),
            entry("e", NodePhase::Pending, None),
        ];
        let existing = [aggregate(1, "z1", "z1", &["a"], &[MARK])];
        let (changes, assessment) = plan(&pool(false, &nodes, &[]), &existing);
        assert_eq!(
            changes.create,
            [
                Wanted {
                    name: "z2".into(),
                    zone: Some("z2".into())
                },
                Wanted {
                    name: TENANT_FILTER_TESTS.into(),
                    zone: None
                },
            ]
        );
        assert_eq!(assessment.ensured, ["tenant_filter_tests", "z1", "z2"]);
        assert_eq!(assessment.without_zone, ["e"]);
        assert!(assessment.outside.is_empty());
        let r = report(&assessment, &Outcome::Completed);
        assert_eq!(
            (r.ok, r.reason, r.requeue),
            (false, Reason::NodesWithoutZone, None)
        );
        assert_eq!(
            r.message,
            "Nodes without the topology.kubernetes.io/zone label cannot be onboarded: e"
        );
    }

    #[test]
    fn a_deleting_pool_ensures_no_tenant_filter_tests_and_frees_what_nobody_needs() {
        let nodes = [entry("a", NodePhase::Draining, Some("z1"))];
        let existing = [
            aggregate(1, "z1", "z1", &[], &[MARK]),
            aggregate(2, TENANT_FILTER_TESTS, "", &[], &[MARK]),
            aggregate(3, "z9", "z9", &[], &[]),
            aggregate(4, "z8", "z8", &["x"], &[MARK]),
            aggregate(
                5,
                "z7",
                "z7",
                &[],
                &[MARK, ("owner", "team-a"), ("availability_zone", "z7")],
            ),
            aggregate(6, "z6", "z6", &[], &[(MARKER_KEY, "other/nova")]),
        ];
        let (changes, assessment) = plan(&pool(true, &nodes, &[]), &existing);
        assert!(changes.create.is_empty());
        assert_eq!(
            changes.delete.iter().map(|a| a.id).collect::<Vec<_>>(),
            [1, 2],
            "marked, unneeded and empty; unmarked (3), holding a host (4) and another Nova's (6) stay"
        );
        assert_eq!(changes.kept, [("z7".to_owned(), vec!["owner".to_owned()])]);
        let r = report(&assessment, &Outcome::Completed);
        assert_eq!((r.ok, r.reason), (true, Reason::AggregatesEnsured));
        assert_eq!(r.message, "No aggregate is required");
    }

    #[test]
    fn the_required_set_is_the_union_over_the_live_pools_of_the_nova() {
        let live = pool_cr(
            "other",
            false,
            vec![entry("x", NodePhase::Draining, Some("z2"))],
        );
        let leaving = pool_cr(
            "leaving",
            true,
            vec![entry("y", NodePhase::Active, Some("z3"))],
        );
        let siblings = [Arc::new(live), Arc::new(leaving)];
        let existing = [
            aggregate(1, "z1", "z1", &[], &[MARK]),
            aggregate(2, "z2", "z2", &[], &[MARK]),
            aggregate(3, "z3", "z3", &[], &[MARK]),
            aggregate(4, TENANT_FILTER_TESTS, "", &[], &[MARK]),
        ];
        let (changes, _) = plan(&pool(true, &[], &siblings), &existing);
        assert_eq!(
            changes
                .delete
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>(),
            ["z1", "z3"],
            "z2 is needed by a live pool (whatever the phase), and so is tenant_filter_tests"
        );
        let (changes, _) = plan(&pool(true, &[], &[]), &existing);
        assert_eq!(changes.delete.len(), 4, "no live pool is left");
    }

    #[test]
    fn a_zone_mismatch_is_reported_first_and_the_aggregate_used_as_is() {
        let nodes = [
            entry("a", NodePhase::Active, Some("z1")),
            entry("b", NodePhase::Pending, None),
        ];
        let existing = [
            aggregate(1, "z1", "elsewhere", &["a"], &[]),
            aggregate(2, TENANT_FILTER_TESTS, "z1", &["a"], &[]),
        ];
        let (changes, assessment) = plan(&pool(false, &nodes, &[]), &existing);
        assert!(changes.create.is_empty() && changes.delete.is_empty());
        let r = report(&assessment, &Outcome::Completed);
        assert_eq!(
            (r.ok, r.reason, r.requeue),
            (false, Reason::AggregateZoneMismatch, None)
        );
        assert_eq!(
            r.message,
            "aggregate z1 has availability zone \"elsewhere\"; aggregate tenant_filter_tests has availability zone \"z1\""
        );
    }

    #[test]
    fn active_nodes_in_no_aggregate_of_their_zone_keep_the_condition_true() {
        let nodes = [
            entry("a", NodePhase::Active, Some("z1")),
            entry("b", NodePhase::Active, Some("z1")),
            entry("c", NodePhase::Pending, Some("z1")),
        ];
        let existing = [
            aggregate(1, "z1", "z1", &["a"], &[MARK]),
            aggregate(2, "rack-7", "z1", &["b"], &[]),
            aggregate(3, TENANT_FILTER_TESTS, "", &["a", "b"], &[MARK]),
        ];
        let (_, assessment) = plan(&pool(false, &nodes, &[]), &existing);
        assert!(
            assessment.outside.is_empty(),
            "b is in another aggregate of z1; c is not Active"
        );
        let moved = [
            aggregate(1, "z1", "z1", &[], &[MARK]),
            existing[1].clone(),
            existing[2].clone(),
        ];
        let nodes = [entry("a", NodePhase::Active, Some("z1"))];
        let (_, assessment) = plan(&pool(false, &nodes, &[]), &moved);
        let r = report(&assessment, &Outcome::Completed);
        assert_eq!((r.ok, r.reason), (true, Reason::NodesOutsideZoneAggregate));
        assert_eq!(
            r.message,
            "Active nodes in no aggregate of their zone: a (z1)"
        );
        let (_, assessment) = plan(&pool(false, &nodes, &[]), &existing);
        let r = report(&assessment, &Outcome::Completed);
        assert_eq!(
            r.message,
            "Host aggregates in place: tenant_filter_tests, z1"
        );
    }

    #[test]
    fn a_failed_call_retries_in_30s_and_a_concurrent_create_rereads_in_10s() {
        let assessment = Assessment::default();
        let r = report(
            &assessment,
            &Outcome::Failed("listing aggregates: boom".into()),
        );
        assert_eq!(
            (r.ok, r.reason, r.message.as_str(), r.requeue),
            (
                false,
                Reason::ComputeAPIError,
                "listing aggregates: boom",
                Some(REQUEUE_COMPUTE_DRAIN_POLLING),
            )
        );
        let r = report(&assessment, &Outcome::Concurrent("z1".into()));
        assert_eq!(
            (r.reason, r.message.as_str(), r.requeue),
            (
                Reason::WaitingForAggregate,
                "Aggregate z1 was created concurrently; reading it back",
                Some(REQUEUE_DEPLOYMENT_POLLING),
            )
        );
    }

    #[test]
    fn aggregate_kept_is_recorded_when_an_aggregate_starts_being_kept_not_while_it_stays() {
        let memo = KeptAggregates::default();
        let pool = || ("ns".to_owned(), "pool".to_owned());
        let note = |reason, text: &str| EventNote {
            reason,
            note: text.to_owned(),
        };
        let kept = |keys: &str| {
            note(
                EventReason::AggregateKept,
                &format!(
                    "Kept empty host aggregate z7: it carries metadata the operator did not set ({keys})"
                ),
            )
        };
        let deleted = || {
            note(
                EventReason::AggregateDeleted,
                "Deleted host aggregate z1: no NovaCompute of Nova nova needs it",
            )
        };
        let reasons = |notes: Vec<EventNote>| notes.into_iter().map(|n| n.note).collect::<Vec<_>>();
        let first = memo.transitions(pool(), &Outcome::Completed, vec![kept("owner"), deleted()]);
        assert_eq!(reasons(first), [kept("owner").note, deleted().note]);
        let again = memo.transitions(pool(), &Outcome::Completed, vec![kept("owner")]);
        assert!(again.is_empty(), "steady state records nothing");
        let failed = Outcome::Failed("deleting aggregate z1: boom".into());
        let during = memo.transitions(pool(), &failed, vec![kept("owner, team")]);
        assert!(during.is_empty(), "a failed pass records no AggregateKept");
        let changed = memo.transitions(pool(), &Outcome::Completed, vec![kept("owner, team")]);
        assert_eq!(
            reasons(changed),
            [kept("owner, team").note],
            "new foreign keys"
        );
        assert!(
            memo.transitions(pool(), &Outcome::Completed, vec![])
                .is_empty()
        );
        let back = memo.transitions(pool(), &Outcome::Completed, vec![kept("owner, team")]);
        assert_eq!(back.len(), 1, "kept again after it was not");
        memo.forget(&pool());
        let other = ("ns".to_owned(), "other".to_owned());
        assert_eq!(
            memo.transitions(other, &Outcome::Completed, vec![kept("owner, team")])
                .len(),
            1,
            "per pool"
        );
    }

    mod calls {
        use super::*;
        use crate::openstack::fake::{Fake, client};

        #[tokio::test]
        async fn created_aggregates_are_marked_and_an_unmarkable_one_is_deleted_again() {
            let nodes = [entry("a", NodePhase::Pending, Some("z1"))];
            let fake = Fake::new()
                .answer("GET", "/v2.1/os-aggregates", 200, r#"{"aggregates": [{"id": 9, "name": "old", "availability_zone": "old", "hosts": [], "metadata": {"c5c3.io:nova": "ns/nova"}}]}"#)
                .answer("POST", "/v2.1/os-aggregates", 200, r#"{"aggregate": {"id": 1, "name": "z1", "availability_zone": "z1"}}"#)
                .answer("POST", "/v2.1/os-aggregates", 200, r#"{"aggregate": {"id": 2, "name": "tenant_filter_tests", "availability_zone": null}}"#)
                .answer("POST", "/v2.1/os-aggregates/1/action", 200, "{}")
                .answer("POST", "/v2.1/os-aggregates/2/action", 200, "{}")
                .answer("DELETE", "/v2.1/os-aggregates/9", 200, "");
            let (_, outcome, notes) =
                reconcile(&client(&fake, None), &pool(false, &nodes, &[])).await;
            assert_eq!(outcome, Outcome::Completed);
            assert_eq!(
                fake.calls(),
                [
                    "GET /v2.1/os-aggregates",
                    "POST /v2.1/os-aggregates",
                    "POST /v2.1/os-aggregates/1/action",
                    "POST /v2.1/os-aggregates",
                    "POST /v2.1/os-aggregates/2/action",
                    "DELETE /v2.1/os-aggregates/9",
                ]
            );
            assert_eq!(
                notes.iter().map(|n| n.note.as_str()).collect::<Vec<_>>(),
                [
                    "Created host aggregate z1 in availability zone z1",
                    "Created host aggregate tenant_filter_tests",
                    "Deleted host aggregate old: no NovaCompute of Nova nova needs it",
                ]
            );

            let fake = Fake::new()
                .answer("GET", "/v2.1/os-aggregates", 200, r#"{"aggregates": []}"#)
                .answer(
                    "POST",
                    "/v2.1/os-aggregates",
                    200,
                    r#"{"aggregate": {"id": 1, "name": "z1", "availability_zone": "z1"}}"#,
                )
                .answer("POST", "/v2.1/os-aggregates/1/action", 400, "bad key")
                .answer("DELETE", "/v2.1/os-aggregates/1", 500, "stuck");
            let (_, outcome, notes) =
                reconcile(&client(&fake, None), &pool(false, &nodes, &[])).await;
            assert_eq!(
                outcome,
                Outcome::Failed(
                    "marking aggregate z1: POST /v2.1/os-aggregates/1/action: HTTP 400: bad key; \
                     deleting the unmarked aggregate z1: DELETE /v2.1/os-aggregates/1: HTTP 500: stuck"
                        .into()
                )
            );
            assert!(notes.is_empty());
        }

        #[tokio::test]
        async fn a_409_on_create_waits_and_a_failed_login_is_authenticating() {
            let nodes = [entry("a", NodePhase::Pending, Some("z1"))];
            let fake = Fake::new()
                .answer("GET", "/v2.1/os-aggregates", 200, r#"{"aggregates": []}"#)
                .answer("POST", "/v2.1/os-aggregates", 409, "exists");
            let (_, outcome, _) = reconcile(&client(&fake, None), &pool(false, &nodes, &[])).await;
            assert_eq!(outcome, Outcome::Concurrent("z1".into()));

            let fake = Fake::new().login(503, None, "down");
            let (_, outcome, _) = reconcile(&client(&fake, None), &pool(false, &nodes, &[])).await;
            assert_eq!(
                outcome,
                Outcome::Failed("authenticating: POST /v3/auth/tokens: HTTP 503: down".into())
            );
        }

        /// Injects, one row each, a failing aggregate listing (HTTP 500 and 503, no answer, an
        /// undecodable body, a failed login) for a deleting pool whose marked empty aggregate
        /// nobody needs; asserts no row deletes it (the control row, listed, does).
        #[tokio::test]
        async fn a_failing_listing_plans_no_delete() {
            use crate::openstack::TransportError;
            const LIST: &str = "/v2.1/os-aggregates";
            let nodes = [entry("a", NodePhase::Draining, Some("z1"))];
            let unneeded = r#"{"aggregates": [{"id": 9, "name": "z1", "availability_zone": "z1", "hosts": [], "metadata": {"c5c3.io:nova": "ns/nova"}}]}"#;
            let rows = [
                ("HTTP 500", Fake::new().answer("GET", LIST, 500, "db down")),
                (
                    "HTTP 503",
                    Fake::new().answer("GET", LIST, 503, "restarting"),
                ),
                (
                    "no answer",
                    Fake::new().fail("GET", LIST, TransportError::TimedOut("nova.test".into())),
                ),
                (
                    "an undecodable body",
                    Fake::new().answer("GET", LIST, 200, r#"{"aggregates": [{"#),
                ),
                ("a failed login", Fake::new().login(500, None, "down")),
            ];
            for (what, fake) in rows {
                let fake = fake.answer("DELETE", "/v2.1/os-aggregates/9", 200, "");
                let (_, outcome, notes) =
                    reconcile(&client(&fake, None), &pool(true, &nodes, &[])).await;
                assert!(matches!(outcome, Outcome::Failed(_)), "{what}: {outcome:?}");
                assert!(
                    !fake.calls().iter().any(|c| c.starts_with("DELETE")),
                    "{what}: {:?}",
                    fake.calls()
                );
                assert!(notes.is_empty(), "{what}");
            }
            let listed = Fake::new().answer("GET", LIST, 200, unneeded).answer(
                "DELETE",
                "/v2.1/os-aggregates/9",
                200,
                "",
            );
            reconcile(&client(&listed, None), &pool(true, &nodes, &[])).await;
            assert_eq!(
                listed.calls(),
                [
                    format!("GET {LIST}"),
                    "DELETE /v2.1/os-aggregates/9".to_owned()
                ],
                "the control row: listed, it goes"
            );
        }
    }
}
