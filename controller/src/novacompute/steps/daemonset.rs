//! The DaemonSet step (`novacompute.md` §5.6–5.9): `{name}-nova-compute` on the selected and
//! held nodes, deleted once no affinity term remains (a deleting pool holding no Draining
//! node), its counters mirrored, `DaemonSetProgressing` while a rollout is in flight (not a
//! wait: the later steps still run), and `status.installedImage` once every node runs a ready
//! pod of the current template.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaComputeConditionType, Reason};
use nova_api::names::NovaComputeNames;
use nova_api::v1alpha1::NovaCompute;
use serde_json::Value;

use crate::clusters::ClusterExt;
use crate::clusters::carries::holds_values;
use crate::clusters::{Caching, KindSpec};
use crate::novacompute::resolved::{Resolved, StatusUpdate};
use crate::novacompute::{NovaComputePass, NovaComputePlan, nova_side};
use crate::objects::Child;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};
use crate::render::compute_daemonset::{PoolInputs, daemonset, node_affinity};

const CONDITION: NovaComputeConditionType = NovaComputeConditionType::DaemonSetReady;

/// The live DaemonSet, as far as the plan needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    /// Whether this pool controls it.
    pub controlled: bool,
    /// Its pod template, as stored.
    pub template: Value,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// `status.desiredNumberScheduled`.
    pub desired: i32,
    /// `status.numberReady`.
    pub ready: i32,
    /// `status.updatedNumberScheduled`.
    pub updated: i32,
}

impl Live {
    fn rolled_out(&self) -> bool {
        self.generation.is_some()
            && self.observed_generation == self.generation
            && self.ready == self.updated
            && self.updated == self.desired
    }
}

/// What the step reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// The DaemonSet, when it exists.
    pub live: Option<Live>,
}

/// The pool's DaemonSet.
pub const KINDS: &[Uses] = &[owns(|| KindSpec::of::<DaemonSet>(Caching::OnDemand))];

/// The DaemonSet step.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    nova_side(pass, |pass, _| observe_then_plan(pass, observe, plan))
}

async fn observe(pass: &NovaComputePass) -> Result<Observed, StepError> {
    let name = NovaComputeNames::new(&pass.cr.name_any()).daemonset();
    let live: Option<DaemonSet> = pass.cluster.get_typed(&pass.owner.namespace, &name).await?;
    Ok(Observed {
        live: live.map(|ds| {
            let status = ds.status.unwrap_or_default();
            Live {
                controlled: pass.owner.controls(&ds.metadata),
                template: ds
                    .spec
                    .and_then(|s| serde_json::to_value(s.template).ok())
                    .unwrap_or_default(),
                generation: ds.metadata.generation,
                observed_generation: status.observed_generation,
                desired: status.desired_number_scheduled,
                ready: status.number_ready,
                updated: status.updated_number_scheduled.unwrap_or_default(),
            }
        }),
    })
}

fn refused(message: String) -> NovaComputePlan {
    Plan::proceed()
        .report(CONDITION, false, Reason::DaemonSetError, message.clone())
        .failing(StepError::Refused(message))
}

/// The DaemonSet step's plan.
pub fn plan(pool: &NovaCompute, observed: &Observed, resolved: &Resolved) -> NovaComputePlan {
    let (Some(nova), Some(config), Some(nodes)) =
        (&resolved.nova, &resolved.config, &resolved.nodes)
    else {
        return refused("the NovaRef, Nodes and PoolConfig steps resolved no input".to_owned());
    };
    let name = pool.name_any();
    let ds_name = NovaComputeNames::new(&name).daemonset();
    let ns = pool.namespace().unwrap_or_default();
    if observed.live.as_ref().is_some_and(|l| !l.controlled) {
        return refused(format!(
            "DaemonSet {ns}/{ds_name} exists and this NovaCompute does not control it"
        ));
    }
    let deleting = pool.metadata.deletion_timestamp.is_some();
    let Some(affinity) = node_affinity(
        &pool.spec.node_selector,
        &nodes.excluded,
        &nodes.kept,
        deleting,
    ) else {
        let plan = match observed.live {
            Some(_) => Plan::proceed().remove(ApiResource::erase::<DaemonSet>(&()), ds_name),
            None => Plan::proceed(),
        };
        return plan
            .set(StatusUpdate::Counters {
                desired: 0,
                ready: 0,
            })
            .ready(
                CONDITION,
                Reason::DaemonSetReady,
                "No node is selected or held; the nova-compute DaemonSet is removed",
            );
    };
    let desired = daemonset(&PoolInputs {
        name: &name,
        spec: &pool.spec,
        image: &nova.image,
        contract_secret: &nova.contract_secret,
        config_map: &config.config_map,
        contract_hash: &config.contract_hash,
        affinity,
    });
    let template = desired
        .spec
        .as_ref()
        .and_then(|s| serde_json::to_value(&s.template).ok())
        .unwrap_or_default();
    let live = observed.live.clone().unwrap_or_default();
    let plan = Plan::proceed()
        .apply(Child::new(&desired))
        .set(StatusUpdate::Counters {
            desired: live.desired,
            ready: live.ready,
        })
        .resolve(Resolved {
            daemonset_applied: true,
            ..Default::default()
        });
    // A template this pass changes is rolling out, whatever the old one's pods report.
    if observed.live.is_some() && holds_values(&live.template, &template) && live.rolled_out() {
        plan.set(StatusUpdate::InstalledImage(nova.image.reference()))
            .ready(
                CONDITION,
                Reason::DaemonSetReady,
                format!(
                    "The nova-compute DaemonSet runs a ready pod on {} nodes",
                    live.desired
                ),
            )
    } else {
        plan.report(
            CONDITION,
            false,
            Reason::DaemonSetProgressing,
            format!(
                "Waiting for the nova-compute DaemonSet: {} of {} nodes run a ready pod",
                live.ready, live.desired
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::{at, pool};
    use crate::novacompute::resolved::{NodeSets, NovaInputs, PoolConfig, ServiceCredentials};
    use crate::pipeline::Flow;
    use crate::sensitive::Sensitive;
    use std::sync::Arc;

    fn resolved(kept: &[&str]) -> Resolved {
        Resolved {
            nova: Some(NovaInputs {
                nova: Arc::new(crate::novacompute::fixtures::nova()),
                image: nova_api::effective::compute_image(None, Some("2026.1")).expect("image"),
                contract_secret: "nova-compute-config".into(),
                keystone_url: "http://keystone".into(),
                compute_url: "http://nova".into(),
                credentials: ServiceCredentials {
                    username: "nova".into(),
                    project_name: "service".into(),
                    user_domain_name: "Default".into(),
                    project_domain_name: "Default".into(),
                    password: Sensitive::new("p"),
                },
                endpoint_ca: None,
                cluster: crate::novacompute::fixtures::home(),
            }),
            nodes: Some(NodeSets {
                kept: kept.iter().map(|n| (*n).to_owned()).collect(),
                ..Default::default()
            }),
            config: Some(PoolConfig {
                config_map: "pool-a-config-12345678".into(),
                contract_hash: "abc".into(),
            }),
            ..Default::default()
        }
    }

    /// The live DaemonSet as the current plan would leave it, rolled out or not.
    fn live(rolled_out: bool) -> Live {
        let plan = plan(&pool(), &Observed::default(), &resolved(&[]));
        let template = plan.children[0]
            .stamped(&crate::objects::Owner::of(&pool(), Default::default()))
            .expect("stamps")["spec"]["template"]
            .clone();
        Live {
            controlled: true,
            template,
            generation: Some(2),
            observed_generation: Some(2),
            desired: 3,
            ready: if rolled_out { 3 } else { 2 },
            updated: 3,
        }
    }

    fn verdict(plan: &NovaComputePlan) -> (bool, Reason, String) {
        let v = plan.verdict(CONDITION).expect("verdict");
        (v.ok, v.reason, v.message.clone())
    }

    #[test]
    fn a_rolled_out_template_is_ready_and_stamps_the_image() {
        let plan = plan(
            &pool(),
            &Observed {
                live: Some(live(true)),
            },
            &resolved(&[]),
        );
        assert_eq!(
            verdict(&plan),
            (
                true,
                Reason::DaemonSetReady,
                "The nova-compute DaemonSet runs a ready pod on 3 nodes".into()
            )
        );
        assert!(plan.status.contains(&StatusUpdate::InstalledImage(
            "ghcr.io/c5c3/nova-compute:2026.1".into()
        )));
        assert!(plan.status.contains(&StatusUpdate::Counters {
            desired: 3,
            ready: 3
        }));
        assert!(plan.resolved.daemonset_applied);
    }

    #[test]
    fn a_rollout_in_flight_or_a_changed_template_progresses_without_stopping() {
        for (what, live) in [
            ("a NotReady node", live(false)),
            (
                "a changed template",
                Live {
                    template: serde_json::json!({"spec": {}}),
                    ..live(true)
                },
            ),
            (
                "an unobserved generation",
                Live {
                    observed_generation: Some(1),
                    ..live(true)
                },
            ),
        ] {
            let plan = plan(
                &pool(),
                &Observed {
                    live: Some(live.clone()),
                },
                &resolved(&[]),
            );
            assert_eq!(verdict(&plan).1, Reason::DaemonSetProgressing, "{what}");
            assert_eq!(plan.flow, Flow::Continue, "{what}");
            assert!(
                !plan
                    .status
                    .iter()
                    .any(|s| matches!(s, StatusUpdate::InstalledImage(_))),
                "{what}"
            );
        }
        let first = plan(&pool(), &Observed::default(), &resolved(&[]));
        assert_eq!(
            verdict(&first),
            (
                false,
                Reason::DaemonSetProgressing,
                "Waiting for the nova-compute DaemonSet: 0 of 0 nodes run a ready pod".into()
            )
        );
    }

    #[test]
    fn a_deleting_pool_keeps_its_draining_nodes_and_removes_the_daemonset_after() {
        let mut deleting = pool();
        deleting.metadata.deletion_timestamp = Some(at(500));
        let draining = plan(
            &deleting,
            &Observed {
                live: Some(live(true)),
            },
            &resolved(&["n1"]),
        );
        assert_eq!(draining.children.len(), 1, "a held term keeps the pod");
        let affinity = &draining.children[0]
            .stamped(&crate::objects::Owner::of(&deleting, Default::default()))
            .expect("stamps")["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        assert_eq!(
            affinity,
            &serde_json::json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])
        );
        let removed = plan(
            &deleting,
            &Observed {
                live: Some(live(true)),
            },
            &resolved(&[]),
        );
        assert!(removed.children.is_empty());
        assert_eq!(removed.removals[0].name, "pool-a-nova-compute");
        assert_eq!(
            verdict(&removed),
            (
                true,
                Reason::DaemonSetReady,
                "No node is selected or held; the nova-compute DaemonSet is removed".into()
            )
        );
        assert!(removed.status.contains(&StatusUpdate::Counters {
            desired: 0,
            ready: 0
        }));
    }

    #[test]
    fn a_daemonset_another_owner_controls_is_refused() {
        let foreign = Live {
            controlled: false,
            ..live(true)
        };
        let plan = plan(
            &pool(),
            &Observed {
                live: Some(foreign),
            },
            &resolved(&[]),
        );
        assert_eq!(verdict(&plan).1, Reason::DaemonSetError);
        assert!(plan.error.is_some() && plan.children.is_empty());
    }
}
