//! The MetadataHTTPRoute step (parallel group): spec.metadata.gateway's route
//! `{name}-metadata` to the metadata Service on port 8775, the hostname an agent on a compute
//! cluster dials.

use nova_api::conditions::NovaConditionType;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use crate::nova::NovaPass;
use crate::nova::route::{self, RouteStep};
use crate::pipeline::StepFuture;
use crate::render::workloads::METADATA_PORT;

/// The metadata route.
pub(crate) const STEP: RouteStep = RouteStep {
    condition: NovaConditionType::MetadataHTTPRouteReady,
    block_path: "spec.metadata.gateway",
    noun: "Nova metadata API",
    block: |nova| nova.spec.metadata.gateway.as_ref(),
    route: |name| NovaNames::new(name).metadata(),
    service: |name| NovaNames::new(name).metadata(),
    port: METADATA_PORT,
};

/// The MetadataHTTPRoute step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    route::run(pass, STEP)
}
