//! The Gateway API flow the three route steps share (`common-types.md` §3.19): the capability
//! probe, the route's lifecycle with its block, and `Accepted` read from the route's parent
//! status.

use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::{GatewaySpec, Nova};

use super::resolved::Resolved;
use super::{NovaPass, NovaPlan};
use crate::clusters::{Caching, KindSpec};
use crate::objects::kinds;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{Plan, REQUEUE_DEPLOYMENT_POLLING, StepError, StepFuture, capability};
use crate::render::http_route::{accepted, http_route};

/// A route step's HTTPRoute (another operator's kind, read whole).
pub const KINDS: &[Uses] = &[owns(|| {
    KindSpec::external(kinds::http_route(), Caching::Full)
})];

/// One of the three routes.
#[derive(Clone, Copy, Debug)]
pub struct RouteStep {
    /// Its condition.
    pub condition: NovaConditionType,
    /// The gateway block's path, as messages name it.
    pub block_path: &'static str,
    /// What the route exposes, as messages name it.
    pub noun: &'static str,
    /// The gateway block, None while unset (or, for the console, while the proxy is off).
    pub block: fn(&Nova) -> Option<&GatewaySpec>,
    /// The route's name for a Nova name.
    pub route: fn(&str) -> String,
    /// The backend Service's name for a Nova name.
    pub service: fn(&str) -> String,
    /// The backend port.
    pub port: u16,
}

/// What a route step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Whether the cluster serves HTTPRoute.
    pub served: bool,
    /// Whether a live route of the name exists under this Nova's control (what may be deleted).
    pub controlled: bool,
    /// Whether the live route's status reports a parent's acceptance.
    pub accepted: bool,
    /// Why the capability probe failed.
    pub probe_failed: Option<String>,
}

async fn observe(pass: &NovaPass, step: RouteStep) -> Result<Observed, StepError> {
    let kind = kinds::http_route();
    let gate = capability::unserved(&*pass.cluster, &kind, |o: &mut Observed| {
        &mut o.probe_failed
    });
    if let Some(observed) = gate.await {
        return Ok(observed);
    }
    let name = (step.route)(&pass.cr.name_any());
    let Some(live) = pass
        .cluster
        .get(&kind, Some(&pass.owner.namespace), &name)
        .await?
    else {
        return Ok(Observed {
            served: true,
            ..Observed::default()
        });
    };
    let body = serde_json::to_value(&*live)
        .map_err(|e| StepError::Refused(format!("HTTPRoute {name} is unreadable: {e}")))?;
    Ok(Observed {
        served: true,
        controlled: pass.owner.controls(&live.metadata),
        accepted: accepted(&body),
        probe_failed: None,
    })
}

/// Runs a route step.
pub fn run(pass: &NovaPass, step: RouteStep) -> StepFuture<'_, Nova> {
    Box::pin(async move {
        let observed = observe(pass, step).await?;
        Ok(plan(step, &pass.cr, &observed, &pass.resolved))
    })
}

/// A route step's plan.
pub fn plan(step: RouteStep, nova: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    if let Some(message) = &observed.probe_failed {
        return Plan::probe_failed(step.condition, message);
    }
    let block = (step.block)(nova);
    let not_required = |plan: NovaPlan| {
        plan.ready(
            step.condition,
            Reason::HTTPRouteNotRequired,
            format!(
                "External {} exposure via Gateway API is not configured",
                step.noun
            ),
        )
    };
    if !observed.served {
        return match block {
            None => not_required(Plan::proceed()),
            Some(_) => Plan::proceed().report(
                step.condition,
                false,
                Reason::GatewayAPINotInstalled,
                gateway_not_installed(step, nova),
            ),
        };
    }
    let name = nova.name_any();
    let route = (step.route)(&name);
    let Some(gateway) = block else {
        let plan = if observed.controlled {
            Plan::proceed().remove(kinds::http_route(), route)
        } else {
            Plan::proceed()
        };
        return not_required(plan);
    };
    let plan = Plan::proceed().apply(http_route(
        &route,
        gateway,
        &(step.service)(&name),
        step.port,
    ));
    if observed.accepted {
        plan.ready(
            step.condition,
            Reason::HTTPRouteAccepted,
            "HTTPRoute accepted by Gateway",
        )
    } else {
        plan.report(
            step.condition,
            false,
            Reason::HTTPRouteNotAccepted,
            "HTTPRoute not yet accepted by Gateway",
        )
        .requeue(REQUEUE_DEPLOYMENT_POLLING)
    }
}

/// The `GatewayAPINotInstalled` message: a local cluster is probed once at start-up; a
/// target, named, on every reconcile, and only a new engagement starts the route's watch there.
fn gateway_not_installed(step: RouteStep, nova: &Nova) -> String {
    let (block, noun) = (step.block_path, step.noun);
    match &nova.spec.target_cluster_ref {
        None => format!(
            "{block} is set but the gateway.networking.k8s.io/v1 HTTPRoute CRD is not installed in this cluster; install Gateway API and restart the operator to enable external {noun} exposure"
        ),
        Some(target) => format!(
            "{block} is set but the gateway.networking.k8s.io/v1 HTTPRoute CRD is not installed in target cluster {}; install Gateway API there to enable external {noun} exposure (the operator re-checks on every reconcile; rotate the cluster's kubeconfig Secret to restore the HTTPRoute drift watch)",
            target.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::nova::workload::tests::{body, children};
    use crate::nova::{console_http_route, http_route, metadata_http_route};
    use crate::pipeline::Flow;
    use nova_api::v1alpha1::NovaConsoleProxySpec;

    fn served(route: Option<bool>) -> Observed {
        Observed {
            served: true,
            controlled: route.is_some(),
            accepted: route == Some(true),
            probe_failed: None,
        }
    }

    fn verdict(plan: &NovaPlan, step: RouteStep) -> (bool, Reason, String) {
        let v = plan.verdict(step.condition).expect("verdict");
        (v.ok, v.reason, v.message.clone())
    }

    #[test]
    fn without_gateway_api_a_set_block_reports_it_and_an_unset_one_is_not_required() {
        let nova = example();
        let console = console_http_route::STEP;
        let plan = plan(console, &nova, &Observed::default(), &Resolved::default());
        assert!(plan.children.is_empty() && plan.removals.is_empty());
        assert_eq!(
            verdict(&plan, console),
            (
                false,
                Reason::GatewayAPINotInstalled,
                "spec.consoleProxy.gateway is set but the gateway.networking.k8s.io/v1 HTTPRoute CRD is not installed in this cluster; install Gateway API and restart the operator to enable external Nova console proxy exposure".into()
            )
        );
        let api = http_route::STEP;
        assert_eq!(
            verdict(&plan_of(api, &nova, Observed::default()), api),
            (
                true,
                Reason::HTTPRouteNotRequired,
                "External Nova API exposure via Gateway API is not configured".into()
            )
        );
    }

    fn plan_of(step: RouteStep, nova: &Nova, observed: Observed) -> NovaPlan {
        plan(step, nova, &observed, &Resolved::default())
    }

    #[test]
    fn on_a_target_the_missing_kind_names_it_and_a_failed_probe_fails_the_step() {
        let mut nova = example();
        nova.spec.target_cluster_ref = Some(nova_api::v1alpha1::TargetClusterRefSpec {
            name: "east".into(),
        });
        let console = console_http_route::STEP;
        let (ok, reason, message) = verdict(&plan_of(console, &nova, Observed::default()), console);
        assert_eq!((ok, reason), (false, Reason::GatewayAPINotInstalled));
        assert_eq!(
            message,
            "spec.consoleProxy.gateway is set but the gateway.networking.k8s.io/v1 HTTPRoute CRD is not installed in target cluster east; install Gateway API there to enable external Nova console proxy exposure (the operator re-checks on every reconcile; rotate the cluster's kubeconfig Secret to restore the HTTPRoute drift watch)"
        );
        let failed = Observed {
            probe_failed: Some(
                "Probing the target cluster for the HTTPRoute kind failed: x".into(),
            ),
            ..Observed::default()
        };
        let plan = plan_of(console, &nova, failed);
        assert_eq!(
            verdict(&plan, console),
            (
                false,
                Reason::CapabilityProbeFailed,
                "Probing the target cluster for the HTTPRoute kind failed: x".into()
            )
        );
        assert!(plan.error.is_some() && plan.children.is_empty() && plan.removals.is_empty());
    }

    #[test]
    fn a_set_block_applies_the_route_and_waits_for_acceptance() {
        let nova = example();
        let console = console_http_route::STEP;
        let waiting = plan_of(console, &nova, served(None));
        assert_eq!(children(&waiting), [("HTTPRoute", "nova-console")]);
        assert_eq!(
            body(&waiting, 0)["spec"],
            serde_json::json!({
                "parentRefs": [{"name": "openstack-gw"}],
                "hostnames": ["console.example.com"],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"kind": "Service", "name": "nova-novncproxy", "port": 6080}]
                }]
            })
        );
        assert_eq!(verdict(&waiting, console).1, Reason::HTTPRouteNotAccepted);
        assert_eq!(waiting.flow, Flow::RequeueAfter(REQUEUE_DEPLOYMENT_POLLING));
        let accepted = plan_of(console, &nova, served(Some(true)));
        assert_eq!(
            verdict(&accepted, console),
            (
                true,
                Reason::HTTPRouteAccepted,
                "HTTPRoute accepted by Gateway".into()
            )
        );
        assert_eq!(accepted.flow, Flow::Continue);
    }

    #[test]
    fn an_unset_block_or_a_disabled_proxy_deletes_the_route() {
        let mut nova = example();
        let metadata = metadata_http_route::STEP;
        let gone = plan_of(metadata, &nova, served(Some(false)));
        assert_eq!(gone.removals[0].name, "nova-metadata");
        assert_eq!(verdict(&gone, metadata).1, Reason::HTTPRouteNotRequired);
        nova.spec.console_proxy = Some(NovaConsoleProxySpec {
            enabled: Some(false),
            ..nova.spec.console_proxy.clone().unwrap_or_default()
        });
        let console = console_http_route::STEP;
        let off = plan_of(console, &nova, served(Some(true)));
        assert!(off.children.is_empty());
        assert_eq!(off.removals[0].name, "nova-console");
        assert_eq!(verdict(&off, console).1, Reason::HTTPRouteNotRequired);
    }
}
