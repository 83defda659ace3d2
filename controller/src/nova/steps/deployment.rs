//! The Deployment step: the API Deployment `{name}`, its Service on port 8774 and its
//! PodDisruptionBudget, and `status.endpoint`. During the RollingUpdate phase of a release
//! upgrade it flips the phase to Contracting once every rendered role has converged onto the
//! new image: the contract phase rewrites rows the old code still reads.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::events::EventReason;
use nova_api::v1alpha1::{Nova, UpgradePhase};

use super::console_proxy::enabled as proxy_enabled;
use super::metadata::with_service;
use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::{Resolved, StatusUpdate};
use crate::nova::rollout::Rollout;
use crate::nova::workload::{self, WorkloadStep};
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::Child;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{
    REQUEUE_DEPLOYMENT_POLLING, REQUEUE_NEXT_PASS, StepError, StepFuture, Waiting,
    observe_then_plan,
};
use crate::render::pod::Role;
use crate::render::workloads;

const STEP: WorkloadStep = WorkloadStep {
    role: Role::Api,
    condition: NovaConditionType::DeploymentReady,
    ready: Reason::DeploymentReady,
    waiting: Reason::WaitingForDeployment,
    noun: "API",
};

/// What the step reads: the rollout of every role, by role (the flip checks them all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The live Deployment of each of the five roles that exists.
    pub rollouts: Vec<(Role, Rollout)>,
}

impl Observed {
    fn of(&self, role: Role) -> Option<&Rollout> {
        self.rollouts
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, rollout)| rollout)
    }
}

/// The API Deployment, its Service and its disruption budget.
pub const KINDS: &[Uses] = &[
    owns(|| KindSpec::of::<Deployment>(Caching::OnDemand)),
    owns(|| KindSpec::of::<Service>(Caching::OnDemand)),
    owns(|| KindSpec::of::<PodDisruptionBudget>(Caching::OnDemand)),
];

/// The Deployment step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let mut rollouts = Vec::new();
    let roles: &[Role] = if workload::rolling_update(&pass.cr) {
        &Role::WORKLOADS
    } else {
        &[Role::Api]
    };
    for role in roles {
        if let Some(rollout) = workload::observe_rollout(pass, *role).await? {
            rollouts.push((*role, rollout));
        }
    }
    Ok(Observed { rollouts })
}

/// `status.endpoint`: the gateway's https URL when spec.gateway is set, else the cluster-local
/// Service URL.
pub fn endpoint(nova: &Nova) -> String {
    match nova
        .spec
        .gateway
        .as_ref()
        .filter(|g| !g.hostname.is_empty())
    {
        Some(gateway) => format!("https://{}/", gateway.hostname),
        None => workloads::api_service_url(&nova.name_any(), &nova.namespace().unwrap_or_default()),
    }
}

/// The roles this Nova renders that have not converged onto `spec.image`.
fn not_converged(nova: &Nova, observed: &Observed) -> Vec<&'static str> {
    let image = nova.spec.image.reference();
    Role::WORKLOADS
        .into_iter()
        .filter(|role| *role != Role::NovncProxy || proxy_enabled(nova))
        .filter(|role| !observed.of(*role).is_some_and(|r| r.converged(&image)))
        .map(Role::container_name)
        .collect()
}

/// The Deployment step's plan.
pub fn plan(nova: &Nova, observed: &Observed, resolved: &Resolved) -> NovaPlan {
    let name = nova.name_any();
    let api = observed.of(Role::Api);
    let plan = with_service(
        workload::plan_deployment(STEP, nova, api, resolved),
        &name,
        STEP.role,
    )
    .apply(Child::new::<PodDisruptionBudget>(&workloads::api_pdb(
        &name, &nova.spec,
    )))
    .set(StatusUpdate::Endpoint(Some(endpoint(nova))));
    let plan = NovaPlan {
        resolved: Resolved {
            endpoint: Some(endpoint(nova)),
            ..Resolved::default()
        },
        ..plan
    };
    if !workload::rolling_update(nova) || plan.flow != crate::pipeline::Flow::Continue {
        return plan;
    }
    let pending = not_converged(nova, observed);
    if !pending.is_empty() {
        return plan
            .waiting(
                STEP.condition,
                Waiting {
                    reason: STEP.waiting,
                    message: format!(
                        "Waiting for {} to converge onto {}",
                        pending.join(", "),
                        nova.spec.image.reference()
                    ),
                },
            )
            .requeue(REQUEUE_DEPLOYMENT_POLLING);
    }
    plan.set(StatusUpdate::UpgradePhase(Some(UpgradePhase::Contracting)))
        .event(
            EventReason::DeploymentRolloutComplete,
            format!(
                "Every workload runs {}; starting the contract phase",
                nova.spec.image.reference()
            ),
        )
        .requeue(REQUEUE_NEXT_PASS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::nova::workload::tests::{body, children, converged, resolved};
    use crate::pipeline::Flow;
    use nova_api::v1alpha1::{GatewayParentRefSpec, GatewaySpec, NovaStatus};

    fn all_converged(nova: &Nova) -> Observed {
        Observed {
            rollouts: Role::WORKLOADS
                .into_iter()
                .map(|r| (r, converged(nova, r)))
                .collect(),
        }
    }

    #[test]
    fn the_api_gets_its_service_budget_and_endpoint() {
        let nova = example();
        let plan = plan(&nova, &all_converged(&nova), &resolved());
        assert_eq!(
            children(&plan),
            [
                ("Deployment", "nova"),
                ("Service", "nova"),
                ("PodDisruptionBudget", "nova")
            ]
        );
        assert_eq!(
            plan.status,
            [StatusUpdate::Endpoint(Some(
                "http://nova.openstack.svc.cluster.local:8774".into()
            ))]
        );
        assert!(plan.verdict(STEP.condition).is_some_and(|v| v.ok));
        let mut gated = example();
        gated.spec.gateway = Some(GatewaySpec {
            hostname: "compute.example.com".into(),
            parent_ref: GatewayParentRefSpec {
                name: "gw".into(),
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(endpoint(&gated), "https://compute.example.com/");
    }

    fn rolling(nova: &mut Nova) {
        nova.status = Some(NovaStatus {
            upgrade_phase: Some(UpgradePhase::RollingUpdate),
            ..Default::default()
        });
    }

    #[test]
    fn the_flip_to_contracting_waits_for_every_rendered_role() {
        let mut nova = example();
        rolling(&mut nova);
        let mut observed = all_converged(&nova);
        observed
            .rollouts
            .retain(|(role, _)| *role != Role::Scheduler);
        let waiting = plan(&nova, &observed, &resolved());
        assert_eq!(waiting.flow, Flow::RequeueAfter(REQUEUE_DEPLOYMENT_POLLING));
        let verdict = waiting.verdict(STEP.condition).expect("verdict");
        assert_eq!(
            (verdict.ok, verdict.message.as_str()),
            (
                false,
                "Waiting for nova-scheduler to converge onto ghcr.io/c5c3/nova:2026.1"
            )
        );
        assert!(
            !waiting
                .status
                .contains(&StatusUpdate::UpgradePhase(Some(UpgradePhase::Contracting)))
        );

        let flipped = plan(&nova, &all_converged(&nova), &resolved());
        assert_eq!(flipped.flow, Flow::RequeueAfter(REQUEUE_NEXT_PASS));
        assert!(
            flipped
                .status
                .contains(&StatusUpdate::UpgradePhase(Some(UpgradePhase::Contracting)))
        );
        assert_eq!(
            flipped.events[0].reason,
            EventReason::DeploymentRolloutComplete
        );

        // A disabled proxy is not waited for.
        nova.spec.console_proxy = Some(nova_api::v1alpha1::NovaConsoleProxySpec {
            enabled: Some(false),
            ..Default::default()
        });
        let mut observed = all_converged(&nova);
        observed
            .rollouts
            .retain(|(role, _)| *role != Role::NovncProxy);
        assert_eq!(
            plan(&nova, &observed, &resolved()).flow,
            Flow::RequeueAfter(REQUEUE_NEXT_PASS)
        );
    }

    #[test]
    fn an_autoscaled_api_leaves_the_replica_count_to_the_hpa() {
        let mut nova = example();
        nova.spec.autoscaling = Some(nova_api::v1alpha1::AutoscalingSpec {
            max_replicas: 5,
            target_cpu_utilization: Some(70),
            ..Default::default()
        });
        let with_api = |owned: bool, desired: i32| {
            let mut observed = all_converged(&nova);
            if let Some((_, api)) = observed.rollouts.iter_mut().find(|(r, _)| *r == Role::Api) {
                api.desired = desired;
                api.replicas_owned = owned;
            }
            body(&plan(&nova, &observed, &resolved()), 0)["spec"]["replicas"].clone()
        };
        assert_eq!(
            with_api(true, 4),
            4,
            "autoscaling just switched on: the operator's own count is written back"
        );
        assert!(
            with_api(false, 4).is_null(),
            "the HPA owns the count: the apply leaves it out, whatever the cache says"
        );
        assert!(
            with_api(true, 1).is_null(),
            "a created 1 is released at once: the server's default keeps it"
        );
        let fresh = super::plan(&nova, &Observed::default(), &resolved());
        assert_eq!(
            body(&fresh, 0)["spec"]["replicas"],
            1,
            "created with one, the HPA scales it"
        );
    }
}
