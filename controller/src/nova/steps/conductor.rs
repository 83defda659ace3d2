//! The Conductor step: the `{name}-conductor` Deployment. No Service, no disruption budget, no
//! autoscaling: the conductor takes its work off the bus.

use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::Nova;

use crate::nova::NovaPass;
use crate::nova::workload::{self, WorkloadStep};
use crate::pipeline::StepFuture;
use crate::render::pod::Role;

/// The Conductor step's role, condition and vocabulary.
pub(crate) const STEP: WorkloadStep = WorkloadStep {
    role: Role::Conductor,
    condition: NovaConditionType::ConductorReady,
    ready: Reason::ConductorReady,
    waiting: Reason::WaitingForConductor,
    noun: "Conductor",
};

/// The Conductor step: its Deployment, then the verdict on its rollout.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    workload::run(pass, STEP)
}
