//! The teardown of a deleting pool (`novacompute.md` §4.6), the last row of both deletion
//! tables: it holds the finalizers while the pass began with a node held (the pass that
//! releases the last node keeps them: deleting its service empties the aggregates after the
//! Aggregates step ran), and otherwise reaps the contract and auth mirrors unless another pool
//! of the Nova on this cluster still needs them, and lets the skeleton release the finalizer.
//! It runs only when every step before it went on, so a failed or waiting step (an OpenStack
//! call, a created trait still carried) holds the finalizer too.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::events::EventReason;
use nova_api::labels::COMPUTE_CONFIG_MIRROR;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::NovaCompute;

use crate::novacompute::resolved::Resolved;
use crate::novacompute::{
    FINALIZER, NovaComputePass, NovaComputePlan, REQUEUE_COMPUTE_DRAIN_POLLING, held, ledger,
};
use crate::pipeline::{Plan, REQUEUE_NEXT_PASS, StepError, StepFuture, observe_then_plan};

/// A mirrored Secret the reap deletes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// Its name.
    pub name: String,
    /// Its UID as read: the delete removes that object only.
    pub uid: String,
    /// What it mirrors, for the event.
    pub what: &'static str,
}

/// What the step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Whether the finalizers may go: the pass began with no node held, or the Nova is gone.
    pub release: bool,
    /// The mirrors to reap: those present in the namespace carrying the mirror label (read
    /// live), none while another pool of the Nova on this cluster is live or still drains.
    pub mirrors: Vec<Mirror>,
}

/// The teardown step.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaComputePass) -> Result<Observed, StepError> {
    let pool = &pass.cr;
    let release = pass.resolved.nova.is_none() || !ledger(pool).iter().any(held);
    if !release {
        return Ok(Observed::default());
    }
    let target = |p: &NovaCompute| p.spec.target_cluster_ref.as_ref().map(|t| t.name.clone());
    let needed = pass
        .shared
        .siblings(pool)
        .into_iter()
        .filter(|s| target(s) == target(pool))
        .any(|s| {
            s.metadata.deletion_timestamp.is_none()
                || (s.finalizers().iter().any(|f| f == FINALIZER) && ledger(&s).iter().any(held))
        });
    let mut mirrors = Vec::new();
    if !needed {
        let names = NovaNames::new(&pool.spec.nova_ref.name);
        let secret = ApiResource::erase::<Secret>(&());
        for (name, what) in [
            (names.compute_config(), "compute-contract mirror"),
            (
                names.hypervisor_operator_auth(),
                "hypervisor-operator auth mirror",
            ),
        ] {
            let meta = pass
                .cluster
                .metadata_live(&secret, Some(&pass.owner.namespace), &name)
                .await?;
            let mirrored = meta.filter(|m| {
                m.labels().get(COMPUTE_CONFIG_MIRROR).map(String::as_str) == Some("true")
            });
            if let Some(uid) = mirrored.and_then(|m| m.metadata.uid.clone()) {
                mirrors.push(Mirror { name, uid, what });
            }
        }
    }
    Ok(Observed { release, mirrors })
}

/// The teardown's plan: hold (30 s, or 1 s when this pass emptied the ledger, so the pass that
/// begins empty follows at once), or reap the mirrors and go on, which releases the finalizer.
pub fn plan(pool: &NovaCompute, observed: &Observed, resolved: &Resolved) -> NovaComputePlan {
    if !observed.release {
        let emptied = resolved
            .nodes
            .as_ref()
            .is_some_and(|n| !n.ledger.iter().any(held));
        return Plan::proceed().requeue(match emptied {
            true => REQUEUE_NEXT_PASS,
            false => REQUEUE_COMPUTE_DRAIN_POLLING,
        });
    }
    let nova = &pool.spec.nova_ref.name;
    let mut plan = Plan::proceed();
    for mirror in &observed.mirrors {
        plan = plan
            .remove_seen(
                ApiResource::erase::<Secret>(&()),
                mirror.name.clone(),
                mirror.uid.clone(),
            )
            .event(EventReason::ComputeConfigMirrorReaped,
                format!(
                    "Deleted the {} {}: no other NovaCompute of Nova {nova} uses it on this cluster",
                    mirror.what, mirror.name
                ),
            );
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::pool;
    use crate::novacompute::resolved::NodeSets;
    use crate::pipeline::Flow;
    use nova_api::v1alpha1::{NodePhase, NovaComputeNodeStatus};

    #[test]
    fn a_pass_that_began_with_a_node_held_keeps_the_finalizer() {
        let held = plan(&pool(), &Observed::default(), &Resolved::default());
        assert_eq!(held.flow, Flow::RequeueAfter(REQUEUE_COMPUTE_DRAIN_POLLING));
        let emptied = Resolved {
            nodes: Some(NodeSets {
                ledger: vec![NovaComputeNodeStatus {
                    name: "n1".into(),
                    phase: NodePhase::Conflict,
                    zone: None,
                    service_id: None,
                    service_status: None,
                    service_state: None,
                    disabled_reason: None,
                    instances: None,
                    conflicts_with: Some("pool-0".into()),
                    traits: Vec::new(),
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let next = plan(&pool(), &Observed::default(), &emptied);
        assert_eq!(next.flow, Flow::RequeueAfter(REQUEUE_NEXT_PASS));
    }

    #[test]
    fn the_release_reaps_the_mirrors_it_found() {
        let observed = Observed {
            release: true,
            mirrors: vec![Mirror {
                name: "nova-compute-config".into(),
                uid: "5f0c".into(),
                what: "compute-contract mirror",
            }],
        };
        let plan = plan(&pool(), &observed, &Resolved::default());
        assert_eq!(plan.flow, Flow::Continue);
        assert_eq!(plan.removals[0].name, "nova-compute-config");
        assert_eq!(
            plan.removals[0].uid.as_deref(),
            Some("5f0c"),
            "the mirror it read, which the pool does not control"
        );
        assert_eq!(
            plan.events[0].note,
            "Deleted the compute-contract mirror nova-compute-config: no other NovaCompute of Nova nova uses it on this cluster"
        );
    }
}
