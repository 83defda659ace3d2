//! The Nodes step (`novacompute.md` §4.2): the node ledger. It reads the selected Nodes, and
//! each held node the selection no longer returns, live and metadata-only (no Node informer
//! starts, which a namespace-scoped install could not sync), finds the rivals through the pool
//! index, and applies the phase rules: which node the pool takes, holds, keeps while it
//! drains, hands over, or leaves to an older pool.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaComputeConditionType, Reason};
use nova_api::events::EventReason;
use nova_api::labels::{CUSTOM_TRAITS_ANNOTATION, ZONE};
use nova_api::v1alpha1::{NodePhase, NovaCompute, NovaComputeNodeStatus};

use crate::clusters::{Caching, KindSpec};
use crate::clusters::{ClusterError, Meta};
use crate::novacompute::resolved::{NodeSets, Resolved, StatusUpdate};
use crate::novacompute::{NovaComputePass, NovaComputePlan, held, ledger, nova_side};
use crate::objects::selects;
use crate::pipeline::uses::{Uses, reads};
use crate::pipeline::{Plan, REQUEUE_SECRET_POLLING, StepError, StepFuture, observe_then_plan};

const CONDITION: NovaComputeConditionType = NovaComputeConditionType::NodesReady;

/// The metadata of one Node the rules use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeMeta {
    /// The Node's name, also the compute host name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Whether it carries the custom-traits annotation (any value).
    pub annotated: bool,
}

impl NodeMeta {
    fn of(meta: &Meta) -> Self {
        Self {
            name: meta.name_any(),
            labels: meta.labels().clone(),
            annotated: meta.annotations().contains_key(CUSTOM_TRAITS_ANNOTATION),
        }
    }

    fn zone(&self) -> Option<String> {
        self.labels.get(ZONE).cloned()
    }
}

/// What the Node reads returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeRead {
    /// The Nodes `spec.nodeSelector` selects, by name (none while the pool is deleting).
    pub selected: Vec<NodeMeta>,
    /// Each held node the selection did not return: Some while the Node exists, None once gone.
    pub unselected: BTreeMap<String, Option<NodeMeta>>,
}

/// Why the Node reads failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadFailure {
    /// The API server refused them (403).
    Forbidden(String),
    /// Any other failure.
    Failed(String),
}

/// What the step reads.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The Nodes, or why they could not be read.
    pub nodes: Result<NodeRead, ReadFailure>,
    /// The other pools of the same Nova in the namespace, on any cluster.
    pub siblings: Vec<Arc<NovaCompute>>,
}

/// Node metadata: read live, and watched for label changes on a cluster-wide install only (a
/// cluster-scoped kind is never watched under `--namespace`).
pub const KINDS: &[Uses] = &[reads(|| {
    KindSpec::of::<Node>(Caching::Metadata).cluster_scoped()
})];

/// The Nodes step.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    nova_side(pass, |pass, _| observe_then_plan(pass, observe, plan))
}

async fn observe(pass: &NovaComputePass) -> Result<Observed, StepError> {
    Ok(Observed {
        nodes: read(pass).await.map_err(|e| match e.is_forbidden() {
            true => ReadFailure::Forbidden(e.to_string()),
            false => ReadFailure::Failed(e.to_string()),
        }),
        siblings: pass.shared.siblings(&pass.cr),
    })
}

async fn read(pass: &NovaComputePass) -> Result<NodeRead, ClusterError> {
    let kind = ApiResource::erase::<Node>(&());
    let pool = &pass.cr;
    let selected: Vec<NodeMeta> = match pool.metadata.deletion_timestamp {
        Some(_) => Vec::new(),
        None => pass
            .cluster
            .list_metadata_live(&kind, None, &pool.spec.node_selector)
            .await?
            .iter()
            .map(NodeMeta::of)
            .collect(),
    };
    let mut unselected = BTreeMap::new();
    for entry in ledger(pool).iter().filter(|e| held(e)) {
        if selected.iter().any(|n| n.name == entry.name) {
            continue;
        }
        let node = pass.cluster.metadata_live(&kind, None, &entry.name).await?;
        unselected.insert(entry.name.clone(), node.as_ref().map(NodeMeta::of));
    }
    Ok(NodeRead {
        selected,
        unselected,
    })
}

/// Orders pools by age: the earlier creationTimestamp first, ties by the smaller name.
fn by_age(a: &NovaCompute, b: &NovaCompute) -> Ordering {
    (&a.metadata.creation_timestamp, a.name_any())
        .cmp(&(&b.metadata.creation_timestamp, b.name_any()))
}

fn deleting(pool: &NovaCompute) -> bool {
    pool.metadata.deletion_timestamp.is_some()
}

/// The phase of `node` in `pool`'s ledger, when the pool holds it.
fn holding(pool: &NovaCompute, node: &str) -> Option<NodePhase> {
    ledger(pool)
        .iter()
        .find(|e| e.name == node && held(e))
        .map(|e| e.phase)
}

fn selecting(pool: &NovaCompute, node: &NodeMeta) -> bool {
    selects(&pool.spec.node_selector, Some(&node.labels))
}

/// Whether two pools run on the same cluster (both local, or both naming the same one).
fn same_cluster(a: &NovaCompute, b: &NovaCompute) -> bool {
    let target = |p: &NovaCompute| p.spec.target_cluster_ref.as_ref().map(|t| t.name.clone());
    target(a) == target(b)
}

/// The phase an entry settles in: Active once a service is registered under its name.
fn settled(entry: &NovaComputeNodeStatus) -> NodePhase {
    match entry.service_id {
        Some(_) => NodePhase::Active,
        None => NodePhase::Pending,
    }
}

fn fresh(
    node: &NodeMeta,
    phase: NodePhase,
    conflicts_with: Option<String>,
) -> NovaComputeNodeStatus {
    NovaComputeNodeStatus {
        name: node.name.clone(),
        phase,
        zone: node.zone(),
        service_id: None,
        service_status: None,
        service_state: None,
        disabled_reason: None,
        instances: None,
        conflicts_with,
        traits: Vec::new(),
    }
}

/// The ledger this pass leaves, the handover set and the new conflicts (phase rules 5 to 7).
fn rules(
    pool: &NovaCompute,
    read: &NodeRead,
    rivals: &[&NovaCompute],
) -> (
    Vec<NovaComputeNodeStatus>,
    BTreeSet<String>,
    Vec<(String, String)>,
) {
    let before = ledger(pool);
    let mine = |name: &str| before.iter().find(|e| e.name == name);
    let mut next = Vec::new();
    let mut conflicts = Vec::new();
    for node in &read.selected {
        let entry = mine(&node.name);
        let holds = entry.filter(|e| held(e));
        let holder = rivals
            .iter()
            .copied()
            .filter(|r| holding(r, &node.name).is_some())
            .min_by(|a, b| by_age(a, b));
        let yield_to = match (holder, holds) {
            (Some(holder), None) => Some(holder),
            (Some(holder), Some(_)) => {
                let settled = matches!(
                    holding(holder, &node.name),
                    Some(NodePhase::Pending | NodePhase::Active)
                );
                (by_age(holder, pool) == Ordering::Less && !deleting(holder) && settled)
                    .then_some(holder)
            }
            (None, None) => rivals
                .iter()
                .copied()
                .filter(|r| by_age(r, pool) == Ordering::Less && !deleting(r) && selecting(r, node))
                .min_by(|a, b| by_age(a, b)),
            (None, Some(_)) => None,
        };
        let next_entry = match (yield_to, holds) {
            (Some(rival), _) => {
                let rival = rival.name_any();
                let new = entry.is_none_or(|e| {
                    e.phase != NodePhase::Conflict || e.conflicts_with.as_ref() != Some(&rival)
                });
                if new {
                    conflicts.push((node.name.clone(), rival.clone()));
                }
                fresh(node, NodePhase::Conflict, Some(rival))
            }
            (None, Some(held)) => {
                let mut kept = held.clone();
                kept.zone = node.zone();
                kept.instances = None;
                if matches!(kept.phase, NodePhase::Draining | NodePhase::Releasing) {
                    kept.phase = settled(&kept);
                }
                kept
            }
            (None, None) => fresh(node, NodePhase::Pending, None),
        };
        next.push(next_entry);
    }
    let mut handover = BTreeSet::new();
    for entry in before.iter().filter(|e| held(e)) {
        let Some(node) = read.unselected.get(&entry.name) else {
            continue;
        };
        let mut leaving = entry.clone();
        if let Some(node) = node {
            leaving.zone = node.zone();
        }
        let taken = node
            .as_ref()
            .is_some_and(|n| rivals.iter().any(|r| !deleting(r) && selecting(r, n)));
        if taken {
            leaving.phase = NodePhase::Releasing;
            leaving.instances = None;
            handover.insert(entry.name.clone());
        } else if leaving.phase != NodePhase::Releasing {
            leaving.phase = NodePhase::Draining;
        }
        next.push(leaving);
    }
    next.sort_by(|a, b| a.name.cmp(&b.name));
    (next, handover, conflicts)
}

fn names_in(ledger: &[NovaComputeNodeStatus], phases: &[NodePhase]) -> BTreeSet<String> {
    ledger
        .iter()
        .filter(|e| phases.contains(&e.phase))
        .map(|e| e.name.clone())
        .collect()
}

/// The Nodes step's plan: the ledger, the node sets for the later steps, one Warning per new
/// conflict, and NodesReady. Every outcome but a failed read goes on: an empty selection still
/// drains what the pool held.
pub fn plan(pool: &NovaCompute, observed: &Observed, _: &Resolved) -> NovaComputePlan {
    let read = match &observed.nodes {
        Ok(read) => read,
        Err(ReadFailure::Forbidden(message)) => {
            return Plan::proceed()
                .report(CONDITION, false, Reason::NodesForbidden, message.clone())
                .requeue(REQUEUE_SECRET_POLLING);
        }
        Err(ReadFailure::Failed(message)) => {
            return Plan::proceed()
                .report(CONDITION, false, Reason::NodeListError, message.clone())
                .failing(StepError::Refused(message.clone()));
        }
    };
    let rivals: Vec<&NovaCompute> = observed
        .siblings
        .iter()
        .map(|s| &**s)
        .filter(|s| same_cluster(s, pool))
        .collect();
    let (next, handover, conflicts) = rules(pool, read, &rivals);
    let mut plan = Plan::proceed();
    for (node, rival) in &conflicts {
        plan = plan.event(
            EventReason::NodeConflict,
            format!("Node {node} is held by NovaCompute {rival}; this pool runs no pod on it"),
        );
    }
    let excluded = names_in(&next, &[NodePhase::Conflict]);
    let leaving = next
        .iter()
        .filter(|e| matches!(e.phase, NodePhase::Draining | NodePhase::Releasing))
        .count();
    plan = if read.selected.is_empty() && !next.iter().any(held) {
        plan.report(
            CONDITION,
            false,
            Reason::NoMatchingNodes,
            "No node matches spec.nodeSelector and the pool holds none",
        )
    } else if !excluded.is_empty() {
        let held_by: Vec<String> = next
            .iter()
            .filter(|e| e.phase == NodePhase::Conflict)
            .map(|e| {
                format!(
                    "{} (held by {})",
                    e.name,
                    e.conflicts_with.as_deref().unwrap_or_default()
                )
            })
            .collect();
        plan.report(
            CONDITION,
            false,
            Reason::NodeConflict,
            format!(
                "Selected nodes another NovaCompute of the same Nova holds: {}",
                held_by.join(", ")
            ),
        )
    } else {
        plan.ready(
            CONDITION,
            Reason::NodesResolved,
            format!("{} nodes selected, {leaving} leaving", read.selected.len()),
        )
    };
    let annotated = read
        .selected
        .iter()
        .chain(read.unselected.values().flatten())
        .filter(|n| n.annotated)
        .map(|n| n.name.clone())
        .collect();
    plan.set(StatusUpdate::Nodes(next.clone()))
        .resolve(Resolved {
            nodes: Some(NodeSets {
                // Every held node that keeps its pod, not only the Draining ones: the DaemonSet
                // controller deletes a pod the moment its node stops matching the affinity, so
                // a relabelled node would lose its nova-compute before any pass could add its
                // Draining term.
                kept: names_in(
                    &next,
                    &[NodePhase::Pending, NodePhase::Active, NodePhase::Draining],
                ),
                excluded,
                handover,
                annotated,
                siblings: observed.siblings.clone(),
                ledger: next,
            }),
            ..Default::default()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::{at, pool};
    use crate::pipeline::Flow;
    use NodePhase::{Active, Conflict, Draining, Pending, Releasing};
    use nova_api::v1alpha1::NovaComputeStatus;

    const LABEL: (&str, &str) = ("openstack.c5c3.io/nova-compute-pool", "a");

    fn node(name: &str, labels: &[(&str, &str)]) -> NodeMeta {
        NodeMeta {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            annotated: false,
        }
    }

    fn zoned(name: &str) -> NodeMeta {
        node(name, &[LABEL, (ZONE, "az1")])
    }

    /// A ledger entry, with a service when `service` is set.
    fn entry(name: &str, phase: NodePhase, service: bool) -> NovaComputeNodeStatus {
        NovaComputeNodeStatus {
            service_id: service.then(|| format!("svc-{name}")),
            zone: Some("az1".into()),
            ..fresh(&node(name, &[]), phase, None)
        }
    }

    fn holding(mut pool: NovaCompute, entries: Vec<NovaComputeNodeStatus>) -> NovaCompute {
        pool.status = Some(NovaComputeStatus {
            nodes: entries,
            ..Default::default()
        });
        pool
    }

    /// A rival pool: `name`, created at `created`, selecting the same label.
    fn rival(name: &str, created: i64, entries: Vec<NovaComputeNodeStatus>) -> Arc<NovaCompute> {
        let mut rival = holding(pool(), entries);
        rival.metadata.name = Some(name.into());
        rival.metadata.uid = Some(format!("{name}-uid"));
        rival.metadata.creation_timestamp = Some(at(created));
        Arc::new(rival)
    }

    fn deleting(pool: Arc<NovaCompute>) -> Arc<NovaCompute> {
        let mut pool = (*pool).clone();
        pool.metadata.deletion_timestamp = Some(at(500));
        Arc::new(pool)
    }

    fn observed(selected: Vec<NodeMeta>, siblings: Vec<Arc<NovaCompute>>) -> Observed {
        Observed {
            nodes: Ok(NodeRead {
                selected,
                unselected: BTreeMap::new(),
            }),
            siblings,
        }
    }

    fn phases(plan: &NovaComputePlan) -> Vec<(String, NodePhase, Option<String>)> {
        plan.resolved
            .nodes
            .as_ref()
            .expect("node sets")
            .ledger
            .iter()
            .map(|e| (e.name.clone(), e.phase, e.conflicts_with.clone()))
            .collect()
    }

    fn p(name: &str, phase: NodePhase, with: Option<&str>) -> (String, NodePhase, Option<String>) {
        (name.into(), phase, with.map(str::to_owned))
    }

    /// One row: the pool's ledger, the rivals, the nodes read → the ledger and NodesReady.
    struct Row {
        what: &'static str,
        mine: Vec<NovaComputeNodeStatus>,
        rivals: Vec<Arc<NovaCompute>>,
        selected: Vec<NodeMeta>,
        unselected: Vec<(&'static str, Option<NodeMeta>)>,
        want: Vec<(String, NodePhase, Option<String>)>,
        reason: Reason,
        events: usize,
    }

    #[test]
    fn the_phase_rules() {
        let older = |entries| rival("pool-0", 50, entries);
        let younger = |entries| rival("pool-z", 200, entries);
        let rows = vec![
            Row {
                what: "a new node is taken Pending",
                mine: vec![],
                rivals: vec![],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Pending, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "held entries keep their phase; a registered one stays Active",
                mine: vec![entry("n1", Active, true), entry("n2", Pending, false)],
                rivals: vec![],
                selected: vec![zoned("n1"), zoned("n2")],
                unselected: vec![],
                want: vec![p("n1", Active, None), p("n2", Pending, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "selected again: Draining and Releasing return to their settled phase",
                mine: vec![entry("n1", Draining, true), entry("n2", Releasing, false)],
                rivals: vec![],
                selected: vec![zoned("n1"), zoned("n2")],
                unselected: vec![],
                want: vec![p("n1", Active, None), p("n2", Pending, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "a node a rival holds is always yielded when this pool does not hold it",
                mine: vec![],
                rivals: vec![younger(vec![entry("n1", Draining, true)])],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Conflict, Some("pool-z"))],
                reason: Reason::NodeConflict,
                events: 1,
            },
            Row {
                what: "an older non-deleting rival that only selects it wins a new node",
                mine: vec![],
                rivals: vec![older(vec![])],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Conflict, Some("pool-0"))],
                reason: Reason::NodeConflict,
                events: 1,
            },
            Row {
                what: "a younger rival that only selects it does not",
                mine: vec![],
                rivals: vec![younger(vec![])],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Pending, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "the race: both hold it, the older settled rival keeps it",
                mine: vec![entry("n1", Pending, false)],
                rivals: vec![older(vec![entry("n1", Active, true)])],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Conflict, Some("pool-0"))],
                reason: Reason::NodeConflict,
                events: 1,
            },
            Row {
                what: "both hold it, but the older rival drains it: this pool keeps it",
                mine: vec![entry("n1", Active, true)],
                rivals: vec![older(vec![entry("n1", Draining, true)])],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Active, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "both hold it, the rival is deleting: this pool keeps it",
                mine: vec![entry("n1", Active, true)],
                rivals: vec![deleting(older(vec![entry("n1", Active, true)]))],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Active, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "an unchanged conflict records no second event",
                mine: vec![NovaComputeNodeStatus {
                    conflicts_with: Some("pool-0".into()),
                    ..entry("n1", Conflict, false)
                }],
                rivals: vec![older(vec![entry("n1", Active, true)])],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Conflict, Some("pool-0"))],
                reason: Reason::NodeConflict,
                events: 0,
            },
            Row {
                what: "a conflict whose holder let go restarts Pending",
                mine: vec![NovaComputeNodeStatus {
                    conflicts_with: Some("pool-0".into()),
                    ..entry("n1", Conflict, false)
                }],
                rivals: vec![deleting(older(vec![]))],
                selected: vec![zoned("n1")],
                unselected: vec![],
                want: vec![p("n1", Pending, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "a deselected, a gone and a Releasing node leave; a deselected conflict is dropped",
                mine: vec![
                    entry("n1", Active, true),
                    entry("n2", Pending, false),
                    entry("n3", Releasing, true),
                    entry("n4", Conflict, false),
                ],
                rivals: vec![],
                selected: vec![],
                unselected: vec![
                    ("n1", Some(node("n1", &[(ZONE, "az2")]))),
                    ("n2", None),
                    ("n3", Some(node("n3", &[]))),
                ],
                want: vec![
                    p("n1", Draining, None),
                    p("n2", Draining, None),
                    p("n3", Releasing, None),
                ],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "a deselected node a non-deleting rival selects is handed over",
                mine: vec![entry("n1", Active, true)],
                rivals: vec![younger(vec![])],
                selected: vec![],
                unselected: vec![("n1", Some(zoned("n1")))],
                want: vec![p("n1", Releasing, None)],
                reason: Reason::NodesResolved,
                events: 0,
            },
            Row {
                what: "nothing selected, nothing held",
                mine: vec![],
                rivals: vec![],
                selected: vec![],
                unselected: vec![],
                want: vec![],
                reason: Reason::NoMatchingNodes,
                events: 0,
            },
        ];
        for row in rows {
            let pool = holding(pool(), row.mine);
            let mut observed = observed(row.selected, row.rivals);
            if let Ok(read) = &mut observed.nodes {
                read.unselected = row
                    .unselected
                    .into_iter()
                    .map(|(n, m)| (n.to_owned(), m))
                    .collect();
            }
            let plan = plan(&pool, &observed, &Resolved::default());
            assert_eq!(phases(&plan), row.want, "{}", row.what);
            let v = plan.verdict(CONDITION).expect("verdict");
            assert_eq!(v.reason, row.reason, "{}", row.what);
            assert_eq!(plan.events.len(), row.events, "{}", row.what);
            assert_eq!(plan.flow, Flow::Continue, "{}: not a wait", row.what);
        }
    }

    #[test]
    fn the_node_sets_zones_and_messages() {
        let pool = holding(
            pool(),
            vec![
                NovaComputeNodeStatus {
                    instances: Some(3),
                    ..entry("n1", Draining, true)
                },
                entry("n2", Active, true),
                entry("n3", Active, true),
            ],
        );
        let mut annotated = zoned("n4");
        annotated.annotated = true;
        let observed = Observed {
            nodes: Ok(NodeRead {
                selected: vec![annotated, node("n5", &[LABEL])],
                unselected: [
                    ("n1".to_owned(), Some(node("n1", &[(ZONE, "az9")]))),
                    ("n2".to_owned(), Some(zoned("n2"))),
                    ("n3".to_owned(), None),
                ]
                .into(),
            }),
            siblings: vec![rival("pool-z", 200, vec![])],
        };
        let plan = plan(&pool, &observed, &Resolved::default());
        let sets = plan.resolved.nodes.as_ref().expect("sets");
        assert_eq!(
            Vec::from_iter(sets.kept.iter().cloned()),
            ["n1", "n3", "n4", "n5"],
            "every held node but the handover keeps its pod"
        );
        assert_eq!(Vec::from_iter(sets.handover.iter().cloned()), ["n2"]);
        assert_eq!(Vec::from_iter(sets.annotated.iter().cloned()), ["n4"]);
        let n1 = &sets.ledger[0];
        assert_eq!(
            (n1.zone.as_deref(), n1.instances),
            (Some("az9"), Some(3)),
            "a leaving node's zone follows its label, its count stays"
        );
        assert_eq!(
            sets.ledger[2].zone.as_deref(),
            Some("az1"),
            "a gone node keeps its zone"
        );
        assert_eq!(
            sets.ledger[4].zone, None,
            "a node without the label has no zone"
        );
        assert_eq!(
            plan.verdict(CONDITION).map(|v| v.message.as_str()),
            Some("2 nodes selected, 3 leaving")
        );
        assert_eq!(
            plan.status,
            [StatusUpdate::Nodes(sets.ledger.clone())],
            "the ledger is the status"
        );

        let conflicted = plan_for_conflict();
        assert_eq!(
            conflicted.verdict(CONDITION).map(|v| v.message.as_str()),
            Some("Selected nodes another NovaCompute of the same Nova holds: n1 (held by pool-0)")
        );
        assert_eq!(
            conflicted.events[0].note,
            "Node n1 is held by NovaCompute pool-0; this pool runs no pod on it"
        );
        assert!(conflicted.events[0].reason.warning());
    }

    fn plan_for_conflict() -> NovaComputePlan {
        let observed = observed(
            vec![zoned("n1")],
            vec![rival("pool-0", 50, vec![entry("n1", Active, true)])],
        );
        plan(&pool(), &observed, &Resolved::default())
    }

    #[test]
    fn pools_on_another_cluster_never_conflict() {
        let mut remote = (*rival("pool-0", 50, vec![entry("n1", Active, true)])).clone();
        remote.spec.target_cluster_ref = Some(nova_api::v1alpha1::TargetClusterRefSpec {
            name: "edge".into(),
        });
        let plan = plan(
            &pool(),
            &observed(vec![zoned("n1")], vec![Arc::new(remote)]),
            &Resolved::default(),
        );
        assert_eq!(phases(&plan), [p("n1", Pending, None)]);
    }

    #[test]
    fn read_failures() {
        let forbidden = plan(
            &pool(),
            &Observed {
                nodes: Err(ReadFailure::Forbidden("listing nodes: forbidden".into())),
                siblings: vec![],
            },
            &Resolved::default(),
        );
        assert_eq!(
            forbidden.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::NodesForbidden)
        );
        assert_eq!(forbidden.flow, Flow::RequeueAfter(REQUEUE_SECRET_POLLING));
        assert!(forbidden.error.is_none() && forbidden.status.is_empty());
        let failed = plan(
            &pool(),
            &Observed {
                nodes: Err(ReadFailure::Failed("listing nodes: boom".into())),
                siblings: vec![],
            },
            &Resolved::default(),
        );
        assert_eq!(
            failed.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::NodeListError)
        );
        assert!(failed.error.is_some());
    }
}
