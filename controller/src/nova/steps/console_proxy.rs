//! The ConsoleProxy step: the `{name}-novncproxy` Deployment and its Service on port 6080, or,
//! while spec.consoleProxy.enabled is false, the deletion of both. A disabled proxy is a
//! posture, not a failure: the condition stays True under ConsoleProxyDisabled.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::Nova;

use super::metadata::with_service;
use crate::nova::resolved::Resolved;
use crate::nova::rollout::Rollout;
use crate::nova::workload::{self, WorkloadStep};
use crate::nova::{NovaPass, NovaPlan};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};
use crate::render::pod::Role;

const STEP: WorkloadStep = WorkloadStep {
    role: Role::NovncProxy,
    condition: NovaConditionType::ConsoleProxyReady,
    ready: Reason::ConsoleProxyReady,
    waiting: Reason::WaitingForConsoleProxy,
    noun: "Console proxy",
};

/// What the step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The live proxy Deployment.
    pub rollout: Option<Rollout>,
    /// Whether a proxy Deployment this Nova controls exists.
    pub deployment: bool,
    /// Whether a proxy Service this Nova controls exists.
    pub service: bool,
}

/// Whether spec.consoleProxy.enabled resolves true (the default).
pub fn enabled(nova: &Nova) -> bool {
    nova.spec
        .console_proxy
        .as_ref()
        .and_then(|c| c.enabled)
        .unwrap_or(true)
}

/// The ConsoleProxy step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let name = STEP
        .role
        .deployment_name(&pass.cr.name_any())
        .unwrap_or_default();
    let ns = pass.owner.namespace.as_str();
    let controlled = |kind: ApiResource| -> Result<bool, StepError> {
        Ok(pass
            .cluster
            .metadata(&kind, ns, &name)?
            .is_some_and(|m| pass.owner.controls(&m.metadata)))
    };
    Ok(Observed {
        rollout: if enabled(&pass.cr) {
            workload::observe_rollout(pass, STEP.role).await?
        } else {
            None
        },
        deployment: controlled(ApiResource::erase::<Deployment>(&()))?,
        service: controlled(ApiResource::erase::<Service>(&()))?,
    })
}

/// The ConsoleProxy step's plan.
pub fn plan(nova: &Nova, observed: &Observed, resolved: &Resolved) -> NovaPlan {
    let name = nova.name_any();
    if enabled(nova) {
        return with_service(
            workload::plan_deployment(STEP, nova, observed.rollout.as_ref(), resolved),
            &name,
            STEP.role,
        );
    }
    let proxy = STEP.role.deployment_name(&name).unwrap_or_default();
    let mut plan = Plan::proceed();
    if observed.deployment {
        plan = plan.remove(ApiResource::erase::<Deployment>(&()), proxy.clone());
    }
    if observed.service {
        plan = plan.remove(ApiResource::erase::<Service>(&()), proxy);
    }
    plan.ready(
        STEP.condition,
        Reason::ConsoleProxyDisabled,
        "The console proxy is disabled (spec.consoleProxy.enabled is false)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::nova::workload::tests::{children, resolved};
    use nova_api::v1alpha1::NovaConsoleProxySpec;

    #[test]
    fn an_enabled_proxy_gets_its_deployment_and_service() {
        let plan = plan(&example(), &Observed::default(), &resolved());
        assert_eq!(
            children(&plan),
            [
                ("Deployment", "nova-novncproxy"),
                ("Service", "nova-novncproxy")
            ]
        );
        assert!(plan.removals.is_empty());
    }

    #[test]
    fn a_disabled_proxy_deletes_what_this_nova_controls_and_stays_true() {
        let mut nova = example();
        nova.spec.console_proxy = Some(NovaConsoleProxySpec {
            enabled: Some(false),
            ..Default::default()
        });
        let observed = Observed {
            rollout: None,
            deployment: true,
            service: true,
        };
        let plan = plan(&nova, &observed, &resolved());
        assert!(plan.children.is_empty());
        let removed: Vec<(&str, &str)> = plan
            .removals
            .iter()
            .map(|r| (r.kind.kind.as_str(), r.name.as_str()))
            .collect();
        assert_eq!(
            removed,
            [
                ("Deployment", "nova-novncproxy"),
                ("Service", "nova-novncproxy")
            ]
        );
        let verdict = plan.verdict(STEP.condition).expect("verdict");
        assert_eq!(
            (verdict.ok, verdict.reason),
            (true, Reason::ConsoleProxyDisabled)
        );
        let gone = super::plan(&nova, &Observed::default(), &resolved());
        assert!(gone.removals.is_empty(), "nothing left to delete");
    }
}
