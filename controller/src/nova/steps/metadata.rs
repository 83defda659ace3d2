//! The Metadata step: the `{name}-metadata` Deployment and its Service on port 8775, the
//! address the Neutron metadata agent of every compute node dials.

use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::Nova;

use crate::nova::resolved::Resolved;
use crate::nova::rollout::Rollout;
use crate::nova::workload::{self, WorkloadStep};
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::Child;
use crate::pipeline::{StepError, StepFuture, observe_then_plan};
use crate::render::pod::Role;
use crate::render::workloads;

const STEP: WorkloadStep = WorkloadStep {
    role: Role::Metadata,
    condition: NovaConditionType::MetadataReady,
    ready: Reason::MetadataReady,
    waiting: Reason::WaitingForMetadata,
    noun: "Metadata API",
};

/// The Metadata step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Option<Rollout>, StepError> {
    workload::observe_rollout(pass, STEP.role).await
}

/// The Metadata step's plan.
pub fn plan(nova: &Nova, rollout: &Option<Rollout>, resolved: &Resolved) -> NovaPlan {
    with_service(
        workload::plan_deployment(STEP, nova, rollout.as_ref(), resolved),
        &nova.name_any(),
        STEP.role,
    )
}

/// `plan` with the front end's Service added.
pub fn with_service(plan: NovaPlan, name: &str, role: Role) -> NovaPlan {
    match workloads::service(name, role) {
        Some(service) => plan.apply(Child::new::<Service>(&service)),
        None => plan,
    }
}
