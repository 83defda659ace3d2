//! The Database step (`nova-reconciler.txt`, "Database"; `common-types.md` §3.9–3.12): both
//! schemas and cell0 provisioned through the MariaDB operator, then the config wait and the
//! image/release gate that run before anything advances release tracking.

use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::Nova;

use super::db_provision::{self, BlockObserved, Outcome};
use super::resolved::Resolved;
use super::{NovaPass, NovaPlan, release};
use crate::clusters::kinds;
use crate::pipeline::{
    Plan, REQUEUE_DATABASE_WAIT, StepError, StepFuture, Waiting, observe_then_plan,
};

const CONDITION: NovaConditionType = NovaConditionType::DatabaseReady;

/// What the Database step reads: per block, the MariaDB cluster's readiness and which of the
/// block's objects report Ready.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The nova_api block, then the cell block.
    pub blocks: [BlockObserved; 2],
}

/// The Database step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let mut observed = Observed::default();
    for (block, seen) in db_provision::blocks(&pass.cr)
        .iter()
        .zip(observed.blocks.iter_mut())
    {
        let Some(cluster) = block.cluster() else {
            continue;
        };
        seen.cluster_ready = pass
            .cluster
            .get(&kinds::mariadb(), Some(ns), cluster)
            .await?
            .is_some_and(|c| kinds::is_ready(&c));
        for (kind, name) in block.objects() {
            let object = pass.cluster.get(&kind.resource(), Some(ns), &name).await?;
            if object.is_some_and(|o| kinds::is_ready(&o)) {
                seen.ready.insert((kind, name));
            }
        }
    }
    Ok(observed)
}

/// The Database step's plan.
pub fn plan(nova: &Nova, observed: &Observed, resolved: &Resolved) -> NovaPlan {
    let mut plan = Plan::proceed();
    for (block, seen) in db_provision::blocks(nova).iter().zip(&observed.blocks) {
        let (children, outcome) = db_provision::provision(block, seen);
        plan = children.into_iter().fold(plan, Plan::apply);
        match outcome {
            Outcome::Ready => {}
            Outcome::Wait(waiting) => return wait(plan, waiting),
            Outcome::Refused(message) => return plan.failing(StepError::Refused(message)),
        }
    }
    if resolved.config_map.is_none() {
        return wait(
            plan,
            Waiting {
                reason: Reason::WaitingForConfig,
                message: format!(
                    "Waiting for the rendered config ConfigMap of {} before the migration Jobs can mount it",
                    nova.name_any()
                ),
            },
        );
    }
    let spec = &nova.spec;
    if let Some(message) = release::image_mismatch(&spec.image, &spec.open_stack_release) {
        return wait(
            plan,
            Waiting {
                reason: Reason::ImageReleaseMismatch,
                message,
            },
        );
    }
    plan
}

fn wait(plan: NovaPlan, waiting: Waiting) -> NovaPlan {
    plan.waiting(CONDITION, waiting)
        .requeue(REQUEUE_DATABASE_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::pipeline::Flow;

    fn provisioned(nova: &Nova) -> Observed {
        let mut observed = Observed::default();
        for (block, seen) in db_provision::blocks(nova)
            .iter()
            .zip(observed.blocks.iter_mut())
        {
            seen.cluster_ready = true;
            seen.ready = block.objects().into_iter().collect();
        }
        observed
    }

    fn configured() -> Resolved {
        Resolved {
            config_map: Some("nova-config-0123abcd".into()),
            ..Default::default()
        }
    }

    fn reason(plan: &NovaPlan) -> Option<(Reason, &str)> {
        plan.verdict(CONDITION)
            .map(|v| (v.reason, v.message.as_str()))
    }

    #[test]
    fn the_api_block_gates_before_the_cell_block_is_touched() {
        let nova = example();
        let mut observed = provisioned(&nova);
        observed.blocks[0].cluster_ready = false;
        let plan = plan(&nova, &observed, &configured());
        assert!(plan.children.is_empty());
        assert_eq!(
            reason(&plan),
            Some((
                Reason::ClusterNotReady,
                "MariaDB cluster \"openstack-mariadb\" is not ready"
            ))
        );
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }

    #[test]
    fn both_blocks_provision_then_the_config_wait_comes() {
        let nova = example();
        let plan = plan(&nova, &provisioned(&nova), &Resolved::default());
        let names: Vec<String> = plan
            .children
            .iter()
            .map(|c| format!("{}/{}", c.kind.kind, c.name))
            .collect();
        assert_eq!(
            names,
            [
                "Database/nova-api",
                "User/nova-api",
                "Grant/nova-api",
                "Database/nova",
                "Database/nova-nova-cell0",
                "User/nova",
                "Grant/nova",
                "Grant/nova-nova-cell0"
            ]
        );
        assert_eq!(reason(&plan).map(|r| r.0), Some(Reason::WaitingForConfig));
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }

    #[test]
    fn a_refused_schema_fails_the_step_without_applying() {
        let mut nova = example();
        nova.spec.api_database.database = "nova-api".into();
        let plan = plan(&nova, &provisioned(&nova), &configured());
        assert!(plan.children.is_empty());
        assert!(matches!(plan.error, Some(StepError::Refused(_))));
    }

    #[test]
    fn an_image_naming_another_release_waits() {
        let mut nova = example();
        nova.spec.image.tag = Some("2025.2".into());
        let plan = plan(&nova, &provisioned(&nova), &configured());
        assert_eq!(
            reason(&plan).map(|r| r.0),
            Some(Reason::ImageReleaseMismatch)
        );
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }
}
