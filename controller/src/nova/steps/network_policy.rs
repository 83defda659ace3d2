//! The NetworkPolicy step (parallel group): while spec.networkPolicy is set, the main policy
//! and, while the console proxy is enabled, `{name}-novncproxy`; otherwise both are deleted.
//! An empty ingress list is refused (fail closed: an empty `from` would allow everything).

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use super::console_proxy::enabled as proxy_enabled;
use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::Resolved;
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::Child;
use crate::pipeline::uses::{Uses, owns};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};
use crate::render::network_policy::{PolicyInputs, main_policy, proxy_policy};

const CONDITION: NovaConditionType = NovaConditionType::NetworkPolicyReady;

/// The environment variable naming the operator's own namespace (the downward API).
pub const OPERATOR_NAMESPACE_ENV: &str = "POD_NAMESPACE";

/// What the step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Whether the main policy exists under this Nova's control.
    pub main: bool,
    /// Whether the proxy policy exists under this Nova's control.
    pub proxy: bool,
    /// The operator's namespace, when the process knows it.
    pub operator_namespace: Option<String>,
}

/// The NetworkPolicies.
pub const KINDS: &[Uses] = &[owns(|| KindSpec::of::<NetworkPolicy>(Caching::OnDemand))];

/// The NetworkPolicy step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let name = pass.cr.name_any();
    let names = NovaNames::new(&name);
    let kind = ApiResource::erase::<NetworkPolicy>(&());
    let ns = pass.owner.namespace.as_str();
    let controlled = |name: &str| -> Result<bool, StepError> {
        Ok(pass
            .cluster
            .metadata(&kind, ns, name)?
            .is_some_and(|m| pass.owner.controls(&m.metadata)))
    };
    Ok(Observed {
        main: controlled(&names.api())?,
        proxy: controlled(&names.novncproxy())?,
        operator_namespace: std::env::var(OPERATOR_NAMESPACE_ENV)
            .ok()
            .filter(|n| !n.is_empty()),
    })
}

/// The NetworkPolicy step's plan.
pub fn plan(nova: &Nova, observed: &Observed, resolved: &Resolved) -> NovaPlan {
    let name = nova.name_any();
    let names = NovaNames::new(&name);
    let kind = ApiResource::erase::<NetworkPolicy>(&());
    let Some(block) = &nova.spec.network_policy else {
        let mut plan = Plan::proceed();
        if observed.main {
            plan = plan.remove(kind.clone(), names.api());
        }
        if observed.proxy {
            plan = plan.remove(kind, names.novncproxy());
        }
        return plan.ready(
            CONDITION,
            Reason::NetworkPolicyNotRequired,
            "Network isolation is not configured",
        );
    };
    if block.ingress.is_empty() {
        return Plan::fail(StepError::Refused(
            "spec.networkPolicy.ingress must not be empty: refusing to create NetworkPolicy that would allow all ingress"
                .to_owned(),
        ));
    }
    let namespace = nova.namespace().unwrap_or_default();
    let enabled = proxy_enabled(nova);
    let inputs = PolicyInputs {
        name: &name,
        namespace: &namespace,
        broker_port: resolved.broker_port,
        operator_namespace: observed.operator_namespace.as_deref(),
        proxy_enabled: enabled,
    };
    let mut plan = Plan::proceed().apply(Child::new(&main_policy(&inputs, &nova.spec, block)));
    if enabled {
        plan = plan.apply(Child::new(&proxy_policy(&name)));
    } else if observed.proxy {
        plan = plan.remove(kind, names.novncproxy());
    }
    plan.ready(
        CONDITION,
        Reason::NetworkPolicyReady,
        "NetworkPolicy is configured",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::nova::workload::tests::{body, children};
    use nova_api::v1alpha1::{NetworkPolicyIngressSource, NetworkPolicySpec, NovaConsoleProxySpec};
    use serde_json::json;

    fn with_policy() -> Nova {
        let mut nova = example();
        nova.spec.network_policy = Some(NetworkPolicySpec {
            ingress: vec![NetworkPolicyIngressSource {
                namespace_selector: serde_json::from_value(
                    json!({"matchLabels": {"team": "edge"}}),
                )
                .expect("selector"),
                pod_selector: None,
            }],
            additional_egress: Some(vec![
                serde_json::from_value(json!({"ports": [{"protocol": "TCP", "port": 4242}]}))
                    .expect("rule"),
            ]),
        });
        nova
    }

    fn resolved() -> Resolved {
        Resolved {
            broker_port: Some(5671),
            ..Default::default()
        }
    }

    #[test]
    fn the_main_policy_opens_the_front_ends_and_derives_egress_in_order() {
        let nova = with_policy();
        let observed = Observed {
            operator_namespace: Some("nova-system".into()),
            ..Default::default()
        };
        let plan = plan(&nova, &observed, &resolved());
        assert_eq!(
            children(&plan),
            [
                ("NetworkPolicy", "nova"),
                ("NetworkPolicy", "nova-novncproxy")
            ]
        );
        let spec = &body(&plan, 0)["spec"];
        assert_eq!(
            spec["podSelector"],
            json!({"matchLabels": {"app.kubernetes.io/instance": "nova", "app.kubernetes.io/name": "nova"}})
        );
        assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
        let tcp = |p: u16| json!({"protocol": "TCP", "port": p});
        assert_eq!(
            spec["ingress"],
            json!([{
                "ports": [tcp(8774), tcp(8775), tcp(6080)],
                "from": [
                    {"namespaceSelector": {"matchLabels": {"team": "edge"}}},
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openstack"}}},
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "nova-system"}}}
                ]
            }]),
            "declared sources, the console gateway's namespace, the operator's"
        );
        let rule =
            |ports: &[u16]| json!({"ports": ports.iter().map(|p| tcp(*p)).collect::<Vec<_>>()});
        assert_eq!(
            spec["egress"],
            json!([
                {"ports": [{"protocol": "UDP", "port": 53}, tcp(53)]},
                rule(&[3306]),
                rule(&[3306]),
                rule(&[11211]),
                rule(&[5000]),
                rule(&[8778, 9696, 9292]),
                rule(&[5671]),
                rule(&[4242])
            ])
        );
        let proxy = &body(&plan, 1)["spec"];
        assert_eq!(proxy["policyTypes"], json!(["Egress"]));
        assert_eq!(
            proxy["egress"],
            json!([{"ports": [{"protocol": "TCP", "port": 5900, "endPort": 65535}]}])
        );
        assert_eq!(
            proxy["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
            "novncproxy"
        );
    }

    #[test]
    fn a_disabled_proxy_drops_its_policy_and_its_gateway_namespace() {
        let mut nova = with_policy();
        nova.spec.console_proxy = Some(NovaConsoleProxySpec {
            enabled: Some(false),
            ..Default::default()
        });
        let observed = Observed {
            main: true,
            proxy: true,
            operator_namespace: None,
        };
        let plan = plan(&nova, &observed, &Resolved::default());
        assert_eq!(children(&plan), [("NetworkPolicy", "nova")]);
        assert_eq!(plan.removals[0].name, "nova-novncproxy");
        let spec = &body(&plan, 0)["spec"];
        assert_eq!(
            spec["ingress"][0]["from"].as_array().map(Vec::len),
            Some(1),
            "no gateway fronts a disabled proxy"
        );
        assert_eq!(
            spec["egress"].as_array().map(Vec::len),
            Some(7),
            "no broker rule before the transport URL is materialised"
        );
    }

    #[test]
    fn no_block_deletes_both_and_an_empty_ingress_list_is_refused() {
        let observed = Observed {
            main: true,
            proxy: true,
            operator_namespace: None,
        };
        let off = plan(&example(), &observed, &Resolved::default());
        let removed: Vec<&str> = off.removals.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(removed, ["nova", "nova-novncproxy"]);
        assert_eq!(
            off.verdict(CONDITION).map(|v| (v.ok, v.reason)),
            Some((true, Reason::NetworkPolicyNotRequired))
        );
        let mut open = with_policy();
        if let Some(block) = open.spec.network_policy.as_mut() {
            block.ingress.clear();
        }
        let refused = plan(&open, &Observed::default(), &Resolved::default());
        assert!(refused.children.is_empty());
        assert_eq!(
            refused.error.map(|e| e.to_string()).as_deref(),
            Some(
                "spec.networkPolicy.ingress must not be empty: refusing to create NetworkPolicy that would allow all ingress"
            )
        );
    }
}
