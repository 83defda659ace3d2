//! The ConsoleHTTPRoute step (parallel group): spec.consoleProxy.gateway's route
//! `{name}-console` to the proxy Service on port 6080. A disabled proxy is handled as an
//! absent block, so the route goes in the same pass as the proxy.

use nova_api::conditions::NovaConditionType;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use super::console_proxy::enabled;
use crate::nova::NovaPass;
use crate::nova::route::{self, RouteStep};
use crate::pipeline::StepFuture;
use crate::render::paths::NOVNCPROXY_PORT;

/// The console route.
pub(crate) const STEP: RouteStep = RouteStep {
    condition: NovaConditionType::ConsoleHTTPRouteReady,
    block_path: "spec.consoleProxy.gateway",
    noun: "Nova console proxy",
    block: |nova| {
        nova.spec
            .console_proxy
            .as_ref()
            .filter(|_| enabled(nova))
            .and_then(|c| c.gateway.as_ref())
    },
    route: |name| NovaNames::new(name).console_route(),
    service: |name| NovaNames::new(name).novncproxy(),
    port: NOVNCPROXY_PORT,
};

/// The ConsoleHTTPRoute step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    route::run(pass, STEP)
}
