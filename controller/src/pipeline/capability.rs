//! The capability probe of an optional kind on the cluster a CR's children live on
//! (`common-types.md` §3.17 "Capability probes"), shared by the HTTPRoute and VPA steps: the
//! probe a step observes, the plan of a probe that failed, and the VPA step's message for a
//! kind not served.

use kube::core::ApiResource;
use nova_api::conditions::Reason;

use super::{Plan, StepError};
use crate::clusters::ClusterReads;

/// Whether `cluster` serves `kind`, or the condition message of a probe that failed (an
/// unreachable or throttled target).
pub async fn probe(cluster: &dyn ClusterReads, kind: &ApiResource) -> Result<bool, String> {
    cluster.served(kind).await.map_err(|e| {
        format!(
            "Probing the target cluster for the {} kind failed: {e}",
            kind.kind
        )
    })
}

/// The gate the steps of an optional kind open their observation with: `None` when `cluster`
/// serves `kind` (the step reads on), otherwise what the step observed: its default (the kind
/// not served) or, when the probe failed, the default with `probe_failed` holding why.
pub async fn unserved<O: Default>(
    cluster: &dyn ClusterReads,
    kind: &ApiResource,
    probe_failed: fn(&mut O) -> &mut Option<String>,
) -> Option<O> {
    match probe(cluster, kind).await {
        Ok(true) => None,
        Ok(false) => Some(O::default()),
        Err(message) => {
            let mut observed = O::default();
            *probe_failed(&mut observed) = Some(message);
            Some(observed)
        }
    }
}

impl<C, S, R: Default> Plan<C, S, R> {
    /// The plan of a step whose capability probe failed: its condition False with
    /// `CapabilityProbeFailed`, and the step's error.
    pub fn probe_failed(condition: C, message: &str) -> Self {
        Self::proceed()
            .report(condition, false, Reason::CapabilityProbeFailed, message)
            .failing(StepError::Refused(message.to_owned()))
    }
}

/// The `VPANotInstalled` message for the opted-in `workloads` (joined by `, `): a local cluster
/// is probed once at start-up, a target on every reconcile.
pub fn vpa_not_installed(on_target: bool, workloads: &str) -> String {
    match on_target {
        false => format!(
            "the cluster does not serve autoscaling.k8s.io/v1 VerticalPodAutoscaler; opted-in workloads: {workloads} (install the VerticalPodAutoscaler and restart the operator)"
        ),
        true => format!(
            "the target cluster does not serve autoscaling.k8s.io/v1 VerticalPodAutoscaler; opted-in workloads: {workloads} (the operator re-checks on every reconcile; rotate the cluster's kubeconfig Secret to restore the VerticalPodAutoscaler drift watch)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Flow;
    use nova_api::conditions::NovaConditionType as C;

    #[test]
    fn a_failed_probe_reports_and_fails_the_step() {
        let plan: crate::nova::NovaPlan = Plan::probe_failed(C::VPAReady, "Probing failed: x");
        let v = plan.verdict(C::VPAReady).expect("verdict");
        assert_eq!(
            (v.ok, v.reason, v.message.as_str()),
            (false, Reason::CapabilityProbeFailed, "Probing failed: x")
        );
        assert!(plan.error.is_some());
        assert_eq!(plan.flow, Flow::Continue);
    }
}
