//! The HTTPRoute step (parallel group): spec.gateway's route `{name}` to the API Service on
//! port 8774.

use nova_api::conditions::NovaConditionType;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use crate::nova::NovaPass;
use crate::nova::route::{self, RouteStep};
use crate::pipeline::StepFuture;
use crate::render::workloads::API_PORT;

/// The API route.
pub(crate) const STEP: RouteStep = RouteStep {
    condition: NovaConditionType::HTTPRouteReady,
    block_path: "spec.gateway",
    noun: "Nova API",
    block: |nova| nova.spec.gateway.as_ref(),
    route: |name| NovaNames::new(name).api(),
    service: |name| NovaNames::new(name).api(),
    port: API_PORT,
};

/// The HTTPRoute step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    route::run(pass, STEP)
}
