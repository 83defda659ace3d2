//! The PoolConfig step (`novacompute.md` §5.2–5.5): the contract gate, `compute-pool.conf` into
//! the immutable `{name}-config-<hash>` ConfigMap with three older ones kept, ExtraConfigHealthy,
//! and the digest of the contract the pod template carries.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaComputeConditionType, Reason};
use nova_api::v1alpha1::NovaCompute;

use crate::clusters::ClusterExt;
use crate::clusters::{Caching, KindSpec};
use crate::nova::steps::config::{Historical, history, kept, report_extra_config_of};
use crate::novacompute::resolved::{PoolConfig, Resolved};
use crate::novacompute::{NovaComputePass, NovaComputePlan, nova_side};
use crate::pipeline::uses::{Uses, names, owns};
use crate::pipeline::{
    Plan, Prune, REQUEUE_SECRET_POLLING, StepError, StepFuture, observe_then_plan,
};
use crate::render::compute_pool::{
    contract_hash, pool_config_map, pool_config_map_name, pool_config_selector, render_compute_pool,
};
use crate::render::contract_keys;

const CONDITION: NovaComputeConditionType = NovaComputeConditionType::ConfigReady;

/// The contract keys a pool needs, each non-empty.
pub const REQUIRED: [&str; 3] = [
    contract_keys::NOVA_COMPUTE_CONF,
    contract_keys::TRANSPORT_URL,
    contract_keys::PASSWORD,
];

/// The contract Secret, as far as the plan needs it (never a value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contract {
    /// The required keys it carries with a non-empty value.
    pub present: BTreeSet<String>,
    /// The digest of its data.
    pub hash: String,
}

/// What the step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The contract Secret's name.
    pub secret: String,
    /// The contract, when the Secret exists.
    pub contract: Option<Contract>,
    /// Every ConfigMap of this pool's history.
    pub history: Vec<Historical>,
}

/// The Nova's compute contract Secret, by name (its events wake the pools), and the pool's
/// ConfigMaps.
pub const KINDS: &[Uses] = &[
    names(|| KindSpec::of::<Secret>(Caching::OnDemand)),
    owns(|| KindSpec::of::<ConfigMap>(Caching::OnDemand)),
];

/// The PoolConfig step.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    nova_side(pass, |pass, _| observe_then_plan(pass, observe, plan))
}

async fn observe(pass: &NovaComputePass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let secret = pass
        .resolved
        .nova
        .as_ref()
        .map(|n| n.contract_secret.clone())
        .unwrap_or_default();
    let contract = pass
        .cluster
        .get_typed::<Secret>(ns, &secret)
        .await?
        .map(|s| {
            let data: BTreeMap<String, Vec<u8>> = s
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            Contract {
                present: REQUIRED
                    .iter()
                    .filter(|k| data.get(**k).is_some_and(|v| !v.is_empty()))
                    .map(|k| (*k).to_owned())
                    .collect(),
                hash: contract_hash(&data),
            }
        });
    let history = history(
        &*pass.cluster,
        &pass.owner,
        &pool_config_selector(&pass.cr.name_any()),
    )?;
    Ok(Observed {
        secret,
        contract,
        history,
    })
}

/// The PoolConfig step's plan.
pub fn plan(pool: &NovaCompute, observed: &Observed, _: &Resolved) -> NovaComputePlan {
    let ns = pool.namespace().unwrap_or_default();
    let secret = &observed.secret;
    let Some(contract) = &observed.contract else {
        let cluster = match &pool.spec.target_cluster_ref {
            Some(target) => format!("target cluster {}", target.name),
            None => "the local cluster".to_owned(),
        };
        return Plan::proceed()
            .report(
                CONDITION,
                false,
                Reason::WaitingForComputeConfig,
                format!(
                    "compute-contract Secret {secret} not found in namespace {ns} on {cluster}; the ControlPlane mirrors it for a ControlPlane-managed Nova; otherwise copy it (docs/guides/nova/connect-a-compute-cluster.md)"
                ),
            )
            .requeue(REQUEUE_SECRET_POLLING);
    };
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|k| !contract.present.contains(*k))
        .collect();
    if !missing.is_empty() {
        return Plan::proceed()
            .report(
                CONDITION,
                false,
                Reason::ComputeConfigIncomplete,
                format!(
                    "compute-contract Secret {ns}/{secret} lacks {}",
                    missing.join(", ")
                ),
            )
            .requeue(REQUEUE_SECRET_POLLING);
    }
    let name = pool.name_any();
    let rendered = match render_compute_pool(&pool.spec) {
        Ok(rendered) => rendered,
        Err(error) => {
            let message = format!("rendering compute-pool.conf failed: {error}");
            return Plan::proceed()
                .report(CONDITION, false, Reason::ConfigError, message.clone())
                .failing(StepError::Refused(message));
        }
    };
    let current = pool_config_map_name(&name, &rendered);
    report_extra_config_of(
        pool,
        NovaComputeConditionType::ExtraConfigHealthy,
        &rendered,
    )
    .apply(pool_config_map(&name, &rendered))
    .prune(Prune {
        kind: ApiResource::erase::<ConfigMap>(&()),
        selector: pool_config_selector(&name),
        keep: kept(&current, &observed.history),
    })
    .ready(
        CONDITION,
        Reason::ConfigRendered,
        format!("Rendered compute-pool.conf into ConfigMap {current}"),
    )
    .resolve(Resolved {
        config: Some(PoolConfig {
            config_map: current,
            contract_hash: contract.hash.clone(),
        }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::{at, pool};
    use crate::pipeline::Flow;

    fn contract(keys: &[&str]) -> Option<Contract> {
        Some(Contract {
            present: keys.iter().map(|k| (*k).to_owned()).collect(),
            hash: "abc".into(),
        })
    }

    fn observed(contract: Option<Contract>) -> Observed {
        Observed {
            secret: "nova-compute-config".into(),
            contract,
            history: Vec::new(),
        }
    }

    #[test]
    fn the_contract_gates_the_render() {
        let absent = plan(&pool(), &observed(None), &Resolved::default());
        let v = absent.verdict(CONDITION).expect("verdict");
        assert_eq!(v.reason, Reason::WaitingForComputeConfig);
        assert!(v.message.starts_with(
            "compute-contract Secret nova-compute-config not found in namespace openstack on the local cluster;"
        ));
        assert_eq!(absent.flow, Flow::RequeueAfter(REQUEUE_SECRET_POLLING));
        let mut placed = pool();
        placed.spec.target_cluster_ref = Some(nova_api::v1alpha1::TargetClusterRefSpec {
            name: "east".into(),
        });
        let absent = plan(&placed, &observed(None), &Resolved::default());
        assert!(
            absent
                .verdict(CONDITION)
                .is_some_and(|v| v.message.contains("openstack on target cluster east;")),
            "the message names the pool's cluster"
        );
        let partial = plan(
            &pool(),
            &observed(contract(&["nova-compute.conf"])),
            &Resolved::default(),
        );
        assert_eq!(
            partial
                .verdict(CONDITION)
                .map(|v| (v.reason, v.message.as_str())),
            Some((
                Reason::ComputeConfigIncomplete,
                "compute-contract Secret openstack/nova-compute-config lacks transport_url, password"
            ))
        );
        assert!(partial.children.is_empty());
    }

    #[test]
    fn a_render_applies_the_config_map_keeps_three_and_hands_on_the_hash() {
        let mut observed = observed(contract(&REQUIRED));
        observed.history = (1..=5)
            .map(|i| Historical {
                name: format!("pool-a-config-old{i}"),
                created: Some(at(i)),
                controlled: true,
            })
            .collect();
        let plan = plan(&pool(), &observed, &Resolved::default());
        let config = plan.resolved.config.clone().expect("config");
        assert!(config.config_map.starts_with("pool-a-config-"));
        assert_eq!(config.contract_hash, "abc");
        assert_eq!(plan.children[0].name, config.config_map);
        assert_eq!(
            plan.prunes[0].keep,
            [
                config.config_map.clone(),
                "pool-a-config-old5".into(),
                "pool-a-config-old4".into(),
                "pool-a-config-old3".into()
            ]
        );
        assert_eq!(
            plan.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::ConfigRendered)
        );
        assert_eq!(
            plan.verdict(NovaComputeConditionType::ExtraConfigHealthy)
                .map(|v| v.reason),
            Some(Reason::NoOwnedKeysOverridden)
        );
        assert_eq!(plan.flow, Flow::Continue);
    }
}
