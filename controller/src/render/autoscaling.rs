//! The API's HorizontalPodAutoscaler (`common-types.md` §3.16, "HPA flow") and the
//! VerticalPodAutoscalers the workloads opt into (§3.18).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec,
    MetricTarget, ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nova_api::v1alpha1::{AutoscalingSpec, NovaSpec, VerticalAutoscalingSpec};
use serde_json::json;

use super::pod::Role;
use super::workloads::api_floor;

fn utilization(resource: &str, percent: i32) -> MetricSpec {
    MetricSpec {
        type_: "Resource".to_owned(),
        resource: Some(ResourceMetricSource {
            name: resource.to_owned(),
            target: MetricTarget {
                type_: "Utilization".to_owned(),
                average_utilization: Some(percent),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

/// The HPA of the API Deployment `name`: named like it, its minimum explicit or the effective
/// API replicas, one Resource metric per set target (cpu, then memory), the behavior verbatim.
pub fn api_hpa(
    name: &str,
    spec: &NovaSpec,
    autoscaling: &AutoscalingSpec,
) -> HorizontalPodAutoscaler {
    let deployment = Role::Api.deployment_name(name).unwrap_or_default();
    let metrics: Vec<MetricSpec> = [
        ("cpu", autoscaling.target_cpu_utilization),
        ("memory", autoscaling.target_memory_utilization),
    ]
    .into_iter()
    .filter_map(|(resource, target)| target.map(|t| utilization(resource, t)))
    .collect();
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some(deployment.clone()),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".to_owned()),
                kind: "Deployment".to_owned(),
                name: deployment,
            },
            min_replicas: Some(api_floor(spec)),
            max_replicas: autoscaling.max_replicas,
            metrics: (!metrics.is_empty()).then_some(metrics),
            behavior: autoscaling.behavior.clone(),
        },
        ..Default::default()
    }
}

/// The VerticalPodAutoscaler of the Deployment `deployment` (`common-types.md` §3.18): the
/// requests of every container, cpu and memory, within the opted-in bounds.
pub fn vpa(deployment: &str, spec: &VerticalAutoscalingSpec) -> crate::objects::Child {
    vpa_of("Deployment", deployment, spec)
}

/// The VerticalPodAutoscaler named like the `apps/v1` workload it targets (`target_kind`
/// `workload`).
pub fn vpa_of(
    target_kind: &str,
    workload: &str,
    spec: &VerticalAutoscalingSpec,
) -> crate::objects::Child {
    let kind = crate::objects::kinds::vertical_pod_autoscaler();
    let mut update_policy = json!({ "updateMode": spec.update_mode });
    if let Some(min) = spec.min_replicas {
        update_policy["minReplicas"] = json!(min);
    }
    let mut container = json!({
        "containerName": "*",
        "controlledValues": "RequestsOnly",
        "controlledResources": ["cpu", "memory"],
    });
    if let Some(min) = spec.min_allowed.as_ref() {
        container["minAllowed"] = json!(min);
    }
    if let Some(max) = spec.max_allowed.as_ref() {
        container["maxAllowed"] = json!(max);
    }
    let body = json!({
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": { "name": workload },
        "spec": {
            "targetRef": { "apiVersion": "apps/v1", "kind": target_kind, "name": workload },
            "updatePolicy": update_policy,
            "resourcePolicy": { "containerPolicies": [container] }
        }
    });
    crate::objects::Child::dynamic(kind, workload, body)
}
