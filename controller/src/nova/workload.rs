//! What the five workload steps share (`nova-reconciler.txt`, "Pipeline"; `common-types.md`
//! §3.12 and §3.16): reading a Deployment's rollout, building its apply from the pod blocks,
//! and the verdict. Outside an upgrade a step reports its condition and goes on, so a
//! workload still starting never keeps the later steps from running; during the RollingUpdate
//! phase a step whose rollout has not converged ends the pass, which is what rolls the roles
//! in pipeline order.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::{Nova, UpgradePhase};

use super::resolved::Resolved;
use super::rollout::{self, Rollout};
use super::{NovaPass, NovaPlan};
use crate::clusters::ClusterExt;
use crate::clusters::{Caching, KindSpec};
use crate::objects::Child;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{Plan, REQUEUE_DEPLOYMENT_POLLING, StepError, StepFuture, Waiting};
use crate::render::pod::{PodInputs, Role};
use crate::render::workloads::{self, LiveReplicas};

/// The live Deployment of `role`, as a rollout.
pub async fn observe_rollout(pass: &NovaPass, role: Role) -> Result<Option<Rollout>, StepError> {
    let Some(name) = role.deployment_name(&pass.cr.name_any()) else {
        return Ok(None);
    };
    let live: Option<Deployment> = pass.cluster.get_typed(&pass.owner.namespace, &name).await?;
    Ok(live.as_ref().map(Rollout::of))
}

/// A workload step's Deployment.
pub const KINDS: &[Uses] = &[owns(|| KindSpec::of::<Deployment>(Caching::OnDemand))];

/// A front end's Deployment and Service.
pub const WITH_SERVICE: &[Uses] = &[
    owns(|| KindSpec::of::<Deployment>(Caching::OnDemand)),
    owns(|| KindSpec::of::<Service>(Caching::OnDemand)),
];

/// The condition, reasons and noun of one workload step.
#[derive(Clone, Copy, Debug)]
pub struct WorkloadStep {
    /// The role.
    pub role: Role,
    /// Its condition.
    pub condition: NovaConditionType,
    /// The True reason.
    pub ready: Reason,
    /// The False reason.
    pub waiting: Reason,
    /// How messages name the workload.
    pub noun: &'static str,
}

/// The pod inputs of this pass, or why the step cannot build a template yet.
pub fn pod_inputs<'a>(
    nova: &'a Nova,
    name: &'a str,
    resolved: &'a Resolved,
) -> Result<PodInputs<'a>, StepError> {
    let config_map = resolved.config_map.as_deref().ok_or_else(|| {
        StepError::Refused("a workload step ran before the config was rendered".to_owned())
    })?;
    Ok(PodInputs {
        name,
        spec: &nova.spec,
        config_map,
        digests: &resolved.digests,
        installed_release: resolved.installed_release.as_deref().or(nova
            .status
            .as_ref()
            .and_then(|s| s.installed_release.as_deref())),
        broker_port: resolved.broker_port,
    })
}

/// Whether the release upgrade is rolling the workloads.
pub fn rolling_update(nova: &Nova) -> bool {
    nova.status.as_ref().and_then(|s| s.upgrade_phase) == Some(UpgradePhase::RollingUpdate)
}

/// The verdict on a rollout (after `children` were added to `plan`): True once ready; else
/// False and, during the RollingUpdate phase, the end of the pass until it has converged.
pub fn verdict(
    step: WorkloadStep,
    nova: &Nova,
    plan: NovaPlan,
    rollout: Option<&Rollout>,
) -> NovaPlan {
    let name = step
        .role
        .deployment_name(&nova.name_any())
        .unwrap_or_default();
    let desired = step.role.replicas(&nova.spec);
    let image = nova.spec.image.reference();
    let upgrading = rolling_update(nova);
    let ready = rollout.is_some_and(|r| {
        if upgrading {
            r.converged(&image)
        } else {
            r.ready()
        }
    });
    if ready {
        let r = rollout.cloned().unwrap_or_default();
        return plan.ready(
            step.condition,
            step.ready,
            format!(
                "{} Deployment {name} is available ({}/{} ready)",
                step.noun, r.ready, r.desired
            ),
        );
    }
    let message = match rollout {
        None => format!("{} Deployment {name} is being created", step.noun),
        Some(r) if upgrading => format!(
            "{} Deployment {name} is rolling onto {image} ({}/{} updated, {} ready)",
            step.noun, r.updated, r.desired, r.ready
        ),
        Some(r) => format!(
            "{} Deployment {name} is not yet available ({}/{} ready)",
            step.noun,
            r.ready,
            r.desired.max(desired)
        ),
    };
    let waiting = Waiting {
        reason: step.waiting,
        message,
    };
    let plan = plan.waiting(step.condition, waiting);
    if upgrading {
        plan.requeue(REQUEUE_DEPLOYMENT_POLLING)
    } else {
        plan
    }
}

/// Runs a workload step without a Service: observe its rollout, then [`plan_deployment`].
pub fn run(pass: &NovaPass, step: WorkloadStep) -> StepFuture<'_, Nova> {
    Box::pin(async move {
        let rollout = observe_rollout(pass, step.role).await?;
        Ok(plan_deployment(
            step,
            &pass.cr,
            rollout.as_ref(),
            &pass.resolved,
        ))
    })
}

/// The plan of a workload step without a Service: apply the Deployment, then the verdict.
pub fn plan_deployment(
    step: WorkloadStep,
    nova: &Nova,
    rollout: Option<&Rollout>,
    resolved: &Resolved,
) -> NovaPlan {
    let name = nova.name_any();
    let inputs = match pod_inputs(nova, &name, resolved) {
        Ok(inputs) => inputs,
        Err(error) => return Plan::fail(error),
    };
    let live = rollout.map_or(LiveReplicas::Absent, Rollout::live_replicas);
    let mut deployment = workloads::deployment(&inputs, step.role, live);
    let plan = match rollout::track(nova, rollout, &mut deployment) {
        Some(note) => Plan::proceed().event(note.reason, note.note),
        None => Plan::proceed(),
    };
    verdict(step, nova, plan.apply(Child::new(&deployment)), rollout)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::pipeline::Flow;

    /// What the steps before the workloads resolve on a converged pass.
    pub(crate) fn resolved() -> Resolved {
        Resolved {
            config_map: Some("nova-config-12345678".into()),
            broker_port: Some(5672),
            digests: crate::render::pod::Digests {
                authtoken: "k".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A rollout of `nova`'s `role`, converged onto its image and the template a pass with
    /// [`resolved`] applies.
    pub(crate) fn converged(nova: &Nova, role: Role) -> Rollout {
        let n = role.replicas(&nova.spec);
        let name = nova.name_any();
        let resolved = resolved();
        let inputs = pod_inputs(nova, &name, &resolved).expect("inputs");
        let mut applied = workloads::deployment(&inputs, role, LiveReplicas::Absent);
        rollout::track(nova, None, &mut applied);
        Rollout {
            generation: 1,
            observed_generation: 1,
            desired: n,
            replicas_owned: true,
            replicas: n,
            ready: n,
            updated: n,
            available: true,
            images: vec![nova.spec.image.reference()],
            ..Rollout::of(&applied)
        }
    }

    use crate::nova::steps::conductor::STEP;

    /// The (kind, name) of each child a plan applies.
    pub(crate) fn children(plan: &NovaPlan) -> Vec<(&str, &str)> {
        plan.children
            .iter()
            .map(|c| (c.kind.kind.as_str(), c.name.as_str()))
            .collect()
    }

    /// The body a plan's `index`th child is applied with.
    pub(crate) fn body(plan: &NovaPlan, index: usize) -> serde_json::Value {
        plan.children[index]
            .stamped(&crate::objects::Owner {
                kind: "Nova".into(),
                namespace: "openstack".into(),
                reference: None,
                labels: Default::default(),
            })
            .expect("stamps")
    }

    #[test]
    fn a_workload_applies_its_deployment_and_reports_without_stopping() {
        let nova = example();
        let fresh = plan_deployment(STEP, &nova, None, &resolved());
        assert_eq!(fresh.children.len(), 1);
        assert_eq!(fresh.children[0].name, "nova-conductor");
        assert_eq!(
            fresh.flow,
            Flow::Continue,
            "a starting workload never ends the pass"
        );
        let verdict = fresh.verdict(STEP.condition).expect("verdict");
        assert_eq!(
            (verdict.ok, verdict.reason, verdict.message.as_str()),
            (
                false,
                Reason::WaitingForConductor,
                "Conductor Deployment nova-conductor is being created"
            )
        );
        let ready = plan_deployment(
            STEP,
            &nova,
            Some(&converged(&nova, Role::Conductor)),
            &resolved(),
        );
        let verdict = ready.verdict(STEP.condition).expect("verdict");
        assert_eq!(
            (verdict.ok, verdict.reason, verdict.message.as_str()),
            (
                true,
                Reason::ConductorReady,
                "Conductor Deployment nova-conductor is available (1/1 ready)"
            )
        );
        let failed = plan_deployment(STEP, &nova, None, &Resolved::default());
        assert!(failed.error.is_some(), "no config, no template");
    }

    #[test]
    fn during_the_rolling_update_an_unconverged_workload_ends_the_pass() {
        let mut nova = example();
        nova.status = Some(nova_api::v1alpha1::NovaStatus {
            upgrade_phase: Some(UpgradePhase::RollingUpdate),
            installed_release: Some("2025.2".into()),
            ..Default::default()
        });
        let old = Rollout {
            images: vec!["ghcr.io/c5c3/nova:2025.2".into()],
            ..converged(&nova, Role::Conductor)
        };
        assert!(old.ready());
        let plan = plan_deployment(STEP, &nova, Some(&old), &resolved());
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DEPLOYMENT_POLLING));
        let verdict = plan.verdict(STEP.condition).expect("verdict");
        assert!(!verdict.ok);
        assert!(
            verdict
                .message
                .contains("is rolling onto ghcr.io/c5c3/nova:2026.1"),
            "{}",
            verdict.message
        );
        let done = plan_deployment(
            STEP,
            &nova,
            Some(&converged(&nova, Role::Conductor)),
            &resolved(),
        );
        assert_eq!(done.flow, Flow::Continue);
        assert!(done.verdict(STEP.condition).is_some_and(|v| v.ok));
    }

    #[test]
    fn the_installed_release_of_this_pass_wins_over_the_stored_one() {
        let mut nova = example();
        nova.status = Some(nova_api::v1alpha1::NovaStatus {
            installed_release: Some("2025.2".into()),
            ..Default::default()
        });
        let name = "nova".to_owned();
        let stored = resolved();
        assert_eq!(
            pod_inputs(&nova, &name, &stored)
                .expect("inputs")
                .installed_release,
            Some("2025.2")
        );
        let promoted = Resolved {
            installed_release: Some("2026.1".into()),
            ..resolved()
        };
        assert_eq!(
            pod_inputs(&nova, &name, &promoted)
                .expect("inputs")
                .installed_release,
            Some("2026.1")
        );
    }

    fn rollout(f: impl FnOnce(&mut Rollout)) -> Rollout {
        let mut r = Rollout {
            generation: 2,
            observed_generation: 2,
            desired: 2,
            replicas_owned: true,
            replicas: 2,
            ready: 2,
            updated: 2,
            available: true,
            images: vec!["img:1".into()],
            ..Rollout::default()
        };
        f(&mut r);
        r
    }

    #[test]
    fn readiness_is_surge_tolerant_and_convergence_strict() {
        assert!(rollout(|_| {}).ready());
        assert!(rollout(|_| {}).converged("img:1"));
        let surging = rollout(|r| {
            r.replicas = 3;
            r.ready = 3;
            r.updated = 1;
        });
        assert!(surging.ready());
        assert!(!surging.converged("img:1"));
        assert!(!rollout(|_| {}).converged("img:2"), "still the old image");
        assert!(!rollout(|r| r.observed_generation = 1).ready());
        assert!(!rollout(|r| r.available = false).ready());
        assert!(!rollout(|r| r.ready = 1).ready());
    }
}
