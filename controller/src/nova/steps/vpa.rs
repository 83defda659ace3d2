//! The VPA step (parallel group, `common-types.md` §3.18): a VerticalPodAutoscaler for each of
//! the five Deployments (the proxy's while it is enabled) whose block opts in, and the
//! deletion of the ones this Nova controls that no block wants any more.

use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::{Nova, VerticalAutoscalingSpec};

use super::console_proxy::enabled as proxy_enabled;
use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::Resolved;
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::kinds;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{Plan, StepError, StepFuture, capability, observe_then_plan};
use crate::render::autoscaling::vpa;
use crate::render::pod::Role;

const CONDITION: NovaConditionType = NovaConditionType::VPAReady;

/// What the step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Whether the cluster serves VerticalPodAutoscaler.
    pub served: bool,
    /// The VPAs carrying the Nova's labels that it controls.
    pub controlled: Vec<String>,
    /// Why the capability probe failed.
    pub probe_failed: Option<String>,
}

/// The workloads' VPAs (another operator's kind, read whole).
pub const KINDS: &[Uses] = &[owns(|| {
    KindSpec::external(kinds::vertical_pod_autoscaler(), Caching::Full)
})];

/// The VPA step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let kind = kinds::vertical_pod_autoscaler();
    let gate = capability::unserved(&*pass.cluster, &kind, |o: &mut Observed| {
        &mut o.probe_failed
    });
    if let Some(observed) = gate.await {
        return Ok(observed);
    }
    let controlled = pass
        .cluster
        .list_metadata(&kind, &pass.owner.namespace, &pass.owner.labels)?
        .iter()
        .filter(|m| pass.owner.controls(&m.metadata))
        .map(|m| m.name_any())
        .collect();
    Ok(Observed {
        served: true,
        controlled,
        probe_failed: None,
    })
}

/// The Deployments that opt in, in pipeline order, with their settings.
fn wanted(nova: &Nova) -> Vec<(String, &VerticalAutoscalingSpec)> {
    let name = nova.name_any();
    Role::WORKLOADS
        .into_iter()
        .filter(|role| *role != Role::NovncProxy || proxy_enabled(nova))
        .filter_map(|role| {
            let spec = role.deployment(&nova.spec)?.vertical_autoscaling.as_ref()?;
            Some((role.deployment_name(&name)?, spec))
        })
        .collect()
}

/// The VPA step's plan.
pub fn plan(nova: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    if let Some(message) = &observed.probe_failed {
        return Plan::probe_failed(CONDITION, message);
    }
    let wanted = wanted(nova);
    let names: Vec<&str> = wanted.iter().map(|(n, _)| n.as_str()).collect();
    if !observed.served {
        return if wanted.is_empty() {
            not_required(Plan::proceed())
        } else {
            Plan::proceed().report(
                CONDITION,
                false,
                Reason::VPANotInstalled,
                capability::vpa_not_installed(
                    nova.spec.target_cluster_ref.is_some(),
                    &names.join(", "),
                ),
            )
        };
    }
    let mut plan = Plan::proceed();
    for (deployment, spec) in &wanted {
        plan = plan.apply(vpa(deployment, spec));
    }
    for stale in observed
        .controlled
        .iter()
        .filter(|c| !names.contains(&c.as_str()))
    {
        plan = plan.remove(kinds::vertical_pod_autoscaler(), stale.clone());
    }
    if wanted.is_empty() {
        return not_required(plan);
    }
    plan.ready(
        CONDITION,
        Reason::VPAReady,
        format!(
            "VerticalPodAutoscalers are configured: {}",
            names.join(", ")
        ),
    )
}

fn not_required(plan: NovaPlan) -> NovaPlan {
    plan.ready(
        CONDITION,
        Reason::VPANotRequired,
        "no workload opts into vertical autoscaling",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::nova::workload::tests::{body, children};
    use nova_api::v1alpha1::{DeploymentSpec, NovaSchedulerSpec, VPAUpdateMode};

    fn opted_in() -> Nova {
        let mut nova = example();
        nova.spec.scheduler = Some(NovaSchedulerSpec {
            deployment: Some(DeploymentSpec {
                vertical_autoscaling: Some(VerticalAutoscalingSpec {
                    update_mode: VPAUpdateMode::Initial,
                    min_allowed: None,
                    max_allowed: Some(
                        [(
                            "memory".to_owned(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity("2Gi".into()),
                        )]
                        .into(),
                    ),
                    min_replicas: Some(2),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        nova
    }

    #[test]
    fn an_opted_in_workload_gets_its_vpa_and_a_stale_one_goes() {
        let observed = Observed {
            served: true,
            controlled: vec!["nova-conductor".into(), "nova-scheduler".into()],
            probe_failed: None,
        };
        let plan = plan(&opted_in(), &observed, &Resolved::default());
        assert_eq!(
            children(&plan),
            [("VerticalPodAutoscaler", "nova-scheduler")]
        );
        assert_eq!(
            body(&plan, 0)["spec"],
            serde_json::json!({
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nova-scheduler"},
                "updatePolicy": {"updateMode": "Initial", "minReplicas": 2},
                "resourcePolicy": {"containerPolicies": [{
                    "containerName": "*", "controlledValues": "RequestsOnly",
                    "controlledResources": ["cpu", "memory"], "maxAllowed": {"memory": "2Gi"}
                }]}
            })
        );
        assert_eq!(plan.removals[0].name, "nova-conductor");
        let v = plan.verdict(CONDITION).expect("verdict");
        assert_eq!(
            (v.ok, v.reason, v.message.as_str()),
            (
                true,
                Reason::VPAReady,
                "VerticalPodAutoscalers are configured: nova-scheduler"
            )
        );
    }

    #[test]
    fn without_the_vpa_kind_an_opt_in_is_reported_and_none_is_not_required() {
        let missing = plan(&opted_in(), &Observed::default(), &Resolved::default());
        let v = missing.verdict(CONDITION).expect("verdict");
        assert_eq!((v.ok, v.reason), (false, Reason::VPANotInstalled));
        assert!(v.message.contains("opted-in workloads: nova-scheduler"));
        let none = plan(&example(), &Observed::default(), &Resolved::default());
        assert_eq!(
            none.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::VPANotRequired)
        );
    }
}
