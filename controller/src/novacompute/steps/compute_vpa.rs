//! The ComputeVPA step (`novacompute.md` §5.9, `common-types.md` §3.18): a
//! VerticalPodAutoscaler for the pool DaemonSet while `spec.verticalAutoscaling` opts in and
//! the DaemonSet step applied it in this pass, and the deletion of the one this pool controls
//! otherwise.

use kube::ResourceExt;
use nova_api::conditions::{NovaComputeConditionType, Reason};
use nova_api::names::NovaComputeNames;
use nova_api::v1alpha1::NovaCompute;

use crate::clusters::{Caching, KindSpec};
use crate::novacompute::resolved::Resolved;
use crate::novacompute::{NovaComputePass, NovaComputePlan, nova_side};
use crate::objects::kinds;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{Plan, StepError, StepFuture, capability, observe_then_plan};
use crate::render::autoscaling::vpa_of;

const CONDITION: NovaComputeConditionType = NovaComputeConditionType::VPAReady;

/// What the step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Whether the cluster serves VerticalPodAutoscaler.
    pub served: bool,
    /// Whether a VPA of the DaemonSet's name exists that this pool controls.
    pub controlled: bool,
    /// Why the capability probe failed.
    pub probe_failed: Option<String>,
}

/// The pool's VPA (another operator's kind, read whole).
pub const KINDS: &[Uses] = &[owns(|| {
    KindSpec::external(kinds::vertical_pod_autoscaler(), Caching::Full)
})];

/// The ComputeVPA step.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    nova_side(pass, |pass, _| observe_then_plan(pass, observe, plan))
}

async fn observe(pass: &NovaComputePass) -> Result<Observed, StepError> {
    let kind = kinds::vertical_pod_autoscaler();
    let gate = capability::unserved(&*pass.cluster, &kind, |o: &mut Observed| {
        &mut o.probe_failed
    });
    if let Some(observed) = gate.await {
        return Ok(observed);
    }
    let name = NovaComputeNames::new(&pass.cr.name_any()).daemonset();
    let controlled = pass
        .cluster
        .metadata(&kind, &pass.owner.namespace, &name)?
        .is_some_and(|m| pass.owner.controls(&m.metadata));
    Ok(Observed {
        served: true,
        controlled,
        probe_failed: None,
    })
}

/// The ComputeVPA step's plan. A missing VPA kind is reported, not waited on.
pub fn plan(pool: &NovaCompute, observed: &Observed, resolved: &Resolved) -> NovaComputePlan {
    if let Some(message) = &observed.probe_failed {
        return Plan::probe_failed(CONDITION, message);
    }
    let name = NovaComputeNames::new(&pool.name_any()).daemonset();
    let wanted = pool
        .spec
        .vertical_autoscaling
        .as_ref()
        .filter(|_| resolved.daemonset_applied);
    let Some(spec) = wanted else {
        let plan = match observed.controlled {
            true => Plan::proceed().remove(kinds::vertical_pod_autoscaler(), name),
            false => Plan::proceed(),
        };
        return plan.ready(
            CONDITION,
            Reason::VPANotRequired,
            "the nova-compute DaemonSet does not opt into vertical autoscaling",
        );
    };
    if !observed.served {
        return Plan::proceed().report(
            CONDITION,
            false,
            Reason::VPANotInstalled,
            capability::vpa_not_installed(pool.spec.target_cluster_ref.is_some(), &name),
        );
    }
    Plan::proceed()
        .apply(vpa_of("DaemonSet", &name, spec))
        .ready(
            CONDITION,
            Reason::VPAReady,
            format!("VerticalPodAutoscalers are configured: {name}"),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::pool;
    use nova_api::v1alpha1::{VPAUpdateMode, VerticalAutoscalingSpec};

    fn opted_in() -> NovaCompute {
        let mut pool = pool();
        pool.spec.vertical_autoscaling = Some(VerticalAutoscalingSpec {
            update_mode: VPAUpdateMode::Auto,
            min_allowed: None,
            max_allowed: None,
            min_replicas: None,
        });
        pool
    }

    fn applied() -> Resolved {
        Resolved {
            daemonset_applied: true,
            ..Default::default()
        }
    }

    #[test]
    fn the_vpa_targets_the_applied_daemonset() {
        let served = Observed {
            served: true,
            ..Observed::default()
        };
        let plan = plan(&opted_in(), &served, &applied());
        let body = plan.children[0]
            .stamped(&crate::objects::Owner::of(&pool(), Default::default()))
            .expect("stamps");
        assert_eq!(
            body["spec"]["targetRef"],
            serde_json::json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "pool-a-nova-compute"})
        );
        assert_eq!(
            plan.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::VPAReady)
        );
        let missing = plan_for(&opted_in(), Observed::default(), &applied());
        assert_eq!(missing, (false, Reason::VPANotInstalled));
        let mut placed = opted_in();
        placed.spec.target_cluster_ref = Some(nova_api::v1alpha1::TargetClusterRefSpec {
            name: "east".into(),
        });
        let remote = super::plan(&placed, &Observed::default(), &applied());
        assert_eq!(
            remote.verdict(CONDITION).map(|v| v.message.as_str()),
            Some(
                "the target cluster does not serve autoscaling.k8s.io/v1 VerticalPodAutoscaler; opted-in workloads: pool-a-nova-compute (the operator re-checks on every reconcile; rotate the cluster's kubeconfig Secret to restore the VerticalPodAutoscaler drift watch)"
            )
        );
        let failed = Observed {
            probe_failed: Some(
                "Probing the target cluster for the VerticalPodAutoscaler kind failed: x".into(),
            ),
            ..Observed::default()
        };
        let failing = super::plan(&placed, &failed, &applied());
        assert_eq!(
            failing.verdict(CONDITION).map(|v| (v.ok, v.reason)),
            Some((false, Reason::CapabilityProbeFailed))
        );
        assert!(failing.error.is_some() && failing.children.is_empty());
    }

    fn plan_for(pool: &NovaCompute, observed: Observed, resolved: &Resolved) -> (bool, Reason) {
        let plan = plan(pool, &observed, resolved);
        let v = plan.verdict(CONDITION).expect("verdict");
        (v.ok, v.reason)
    }

    #[test]
    fn without_an_opt_in_or_a_daemonset_the_controlled_vpa_goes() {
        let controlled = Observed {
            served: true,
            controlled: true,
            probe_failed: None,
        };
        for (pool, resolved) in [(pool(), applied()), (opted_in(), Resolved::default())] {
            let plan = plan(&pool, &controlled, &resolved);
            assert_eq!(plan.removals[0].name, "pool-a-nova-compute");
            assert_eq!(
                plan.verdict(CONDITION).map(|v| v.reason),
                Some(Reason::VPANotRequired)
            );
        }
    }
}
