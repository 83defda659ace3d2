//! The Scheduler step: the `{name}-scheduler` Deployment, under the conductor's contract: no
//! Service, no disruption budget, no autoscaling, its work arrives over the bus.

use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::Nova;

use crate::nova::NovaPass;
use crate::nova::workload::{self, WorkloadStep};
use crate::pipeline::StepFuture;
use crate::render::pod::Role;

/// The Scheduler step's role, condition and vocabulary.
pub(crate) const STEP: WorkloadStep = WorkloadStep {
    role: Role::Scheduler,
    condition: NovaConditionType::SchedulerReady,
    ready: Reason::SchedulerReady,
    waiting: Reason::WaitingForScheduler,
    noun: "Scheduler",
};

/// The Scheduler step: its Deployment, then the verdict on its rollout.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    workload::run(pass, STEP)
}
