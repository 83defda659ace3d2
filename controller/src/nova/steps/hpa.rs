//! The HPA step (parallel group): the API's HorizontalPodAutoscaler while spec.autoscaling is
//! set, deleted when it is not. Its failures propagate as errors; it has no False reason.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::Nova;

use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::Resolved;
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::Child;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};
use crate::render::autoscaling::api_hpa;

const CONDITION: NovaConditionType = NovaConditionType::HPAReady;

/// The API autoscaler.
pub const KINDS: &[Uses] = &[owns(|| {
    KindSpec::of::<HorizontalPodAutoscaler>(Caching::OnDemand)
})];

/// The HPA step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

/// Whether an HPA of the API's name that this Nova controls exists.
async fn observe(pass: &NovaPass) -> Result<bool, StepError> {
    Ok(pass
        .cluster
        .metadata(
            &ApiResource::erase::<HorizontalPodAutoscaler>(&()),
            &pass.owner.namespace,
            &pass.cr.name_any(),
        )?
        .is_some_and(|m| pass.owner.controls(&m.metadata)))
}

/// The HPA step's plan.
pub fn plan(nova: &Nova, controlled: &bool, _: &Resolved) -> NovaPlan {
    let name = nova.name_any();
    match &nova.spec.autoscaling {
        Some(autoscaling) => Plan::proceed()
            .apply(Child::new(&api_hpa(&name, &nova.spec, autoscaling)))
            .ready(
                CONDITION,
                Reason::HPAReady,
                "HorizontalPodAutoscaler is configured",
            ),
        None => {
            let plan = if *controlled {
                Plan::proceed().remove(ApiResource::erase::<HorizontalPodAutoscaler>(&()), name)
            } else {
                Plan::proceed()
            };
            plan.ready(
                CONDITION,
                Reason::HPANotRequired,
                "Autoscaling is not configured",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::nova::workload::tests::body;
    use nova_api::v1alpha1::AutoscalingSpec;

    #[test]
    fn autoscaling_applies_the_hpa_and_its_absence_deletes_ours() {
        let mut nova = example();
        let off = plan(&nova, &true, &Resolved::default());
        assert_eq!(off.removals.len(), 1);
        assert_eq!(off.removals[0].name, "nova");
        let verdict = off.verdict(CONDITION).expect("verdict");
        assert_eq!((verdict.ok, verdict.reason), (true, Reason::HPANotRequired));
        assert!(
            plan(&nova, &false, &Resolved::default())
                .removals
                .is_empty()
        );

        nova.spec.autoscaling = Some(AutoscalingSpec {
            max_replicas: 6,
            target_cpu_utilization: Some(70),
            target_memory_utilization: Some(80),
            ..Default::default()
        });
        let on = plan(&nova, &false, &Resolved::default());
        assert_eq!(
            body(&on, 0)["spec"],
            serde_json::json!({
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nova"},
                "minReplicas": 3,
                "maxReplicas": 6,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                    {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 80}}}
                ]
            })
        );
        assert_eq!(
            on.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::HPAReady)
        );
    }
}
