//! The Config step (`nova-reconciler.txt`, "Config"; `common-types.md` §3.14): nova.conf and
//! the four overlays into an immutable, content-addressed ConfigMap, three historical ones
//! kept, `ExtraConfigHealthy` maintained, and the last-good rule for an invalid render.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::events::EventReason;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use crate::clusters::{Caching, KindSpec};
use crate::clusters::{ClusterError, ClusterExt, ClusterReads};
use crate::nova::resolved::Resolved;
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::{Labels, Owner};
use crate::pipeline::uses::{Uses, owns, reads};
use crate::pipeline::{
    ConditionType, Plan, PlanOf, Prune, Reconciled, StepError, StepFuture, observe_then_plan,
};
use crate::render::children::{config_map, config_selector};
use crate::render::{self, RenderedConfig};

/// Historical ConfigMaps kept besides the one in use.
pub const HISTORY: usize = 3;

/// One config ConfigMap of this Nova, as cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Historical {
    /// Its name.
    pub name: String,
    /// When it was created.
    pub created: Option<Time>,
    /// Whether this Nova controls it (only those are pruned).
    pub controlled: bool,
}

/// What the Config step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The ConfigMaps the live API Deployment mounts (the last-good config), if it exists.
    pub mounted: Vec<String>,
    /// Every config ConfigMap of this Nova.
    pub history: Vec<Historical>,
}

/// The config ConfigMaps, and the API Deployment whose pods read the current one.
pub const KINDS: &[Uses] = &[
    owns(|| KindSpec::of::<ConfigMap>(Caching::OnDemand)),
    reads(|| KindSpec::of::<Deployment>(Caching::OnDemand)),
];

/// The Config step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let name = pass.cr.name_any();
    let live: Option<Deployment> = pass
        .cluster
        .get_typed(ns, &NovaNames::new(&name).api())
        .await?;
    let mounted = live
        .and_then(|d| d.spec?.template.spec?.volumes)
        .into_iter()
        .flatten()
        .filter_map(|v| v.config_map.map(|c| c.name))
        .collect();
    let history = history(&*pass.cluster, &pass.owner, &config_selector(&name))?;
    Ok(Observed { mounted, history })
}

/// The config ConfigMaps `selector` finds in the owner's namespace (from the cache), and
/// whether the owner controls each.
pub fn history(
    cluster: &dyn ClusterReads,
    owner: &Owner,
    selector: &Labels,
) -> Result<Vec<Historical>, ClusterError> {
    Ok(cluster
        .list_metadata(
            &ApiResource::erase::<ConfigMap>(&()),
            &owner.namespace,
            selector,
        )?
        .iter()
        .map(|m| Historical {
            name: m.name_any(),
            created: m.metadata.creation_timestamp.clone(),
            controlled: owner.controls(&m.metadata),
        })
        .collect())
}

/// The Config step's plan.
pub fn plan(nova: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    let name = nova.name_any();
    let rendered =
        match render::render_config(&name, &nova.namespace().unwrap_or_default(), &nova.spec) {
            Ok(rendered) => rendered,
            Err(error) => return last_good(&name, observed, &error),
        };
    let current = rendered.config_map_name(&name);
    let plan = report_extra_config(nova, &rendered)
        .apply(config_map(&name, &rendered))
        .prune(Prune {
            kind: ApiResource::erase::<ConfigMap>(&()),
            selector: config_selector(&name),
            keep: kept(&current, &observed.history),
        });
    plan.resolve(Resolved {
        config_map: Some(current),
        ..Default::default()
    })
}

/// The current ConfigMap and the newest [`HISTORY`] others this Nova controls (newest by
/// creationTimestamp, ties by name descending).
pub fn kept(current: &str, history: &[Historical]) -> Vec<String> {
    let mut others: Vec<&Historical> = history
        .iter()
        .filter(|h| h.name != current && h.controlled)
        .collect();
    others.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.name.cmp(&a.name)));
    std::iter::once(current.to_owned())
        .chain(others.iter().take(HISTORY).map(|h| h.name.clone()))
        .collect()
}

/// The ExtraConfigHealthy verdict of one render: (ok, reason, message).
pub fn extra_config_health(rendered: &RenderedConfig) -> (bool, Reason, String) {
    let entries = rendered.override_entries();
    if entries.is_empty() {
        (
            true,
            Reason::NoOwnedKeysOverridden,
            "spec.extraConfig overrides no operator-owned keys".to_owned(),
        )
    } else {
        (
            false,
            Reason::OwnedKeysOverridden,
            format!(
                "spec.extraConfig overrides operator-owned keys: {}",
                entries.join("; ")
            ),
        )
    }
}

fn report_extra_config(nova: &Nova, rendered: &RenderedConfig) -> NovaPlan {
    report_extra_config_of(nova, NovaConditionType::ExtraConfigHealthy, rendered)
}

/// Sets ExtraConfigHealthy (`type_`) of any kind, with a Warning event only when the verdict
/// is new.
pub fn report_extra_config_of<K: Reconciled>(
    cr: &K,
    type_: K::Condition,
    rendered: &RenderedConfig,
) -> PlanOf<K> {
    let (ok, reason, message) = extra_config_health(rendered);
    let mut status = cr.status().cloned().unwrap_or_default();
    let previous = K::conditions(&mut status)
        .iter()
        .find(|c| c.type_ == type_.as_str())
        .cloned();
    let new_verdict = previous.is_none_or(|c| c.status != "False" || c.message != message);
    let plan = Plan::proceed();
    let plan = if !ok && new_verdict {
        plan.event(EventReason::ExtraConfigOwnedKeyOverride, message.clone())
    } else {
        plan
    };
    plan.report(type_, ok, reason, message)
}

/// An invalid render keeps the running pods on their last-good config: the step reports
/// ConfigError naming the section (never the value) and hands on the ConfigMap the live API
/// Deployment mounts. With no live Deployment there is nothing to fall back to.
fn last_good(name: &str, observed: &Observed, error: &render::RenderError) -> NovaPlan {
    let message = format!("rendering the configuration failed: {error}");
    let plan = Plan::proceed().report(
        NovaConditionType::SecretsReady,
        false,
        Reason::ConfigError,
        message.clone(),
    );
    if !error.is_injection() {
        return plan.failing(StepError::Refused(message));
    }
    let prefix = format!("{}-", NovaNames::new(name).config_base());
    match observed.mounted.iter().find(|cm| cm.starts_with(&prefix)) {
        Some(config_map) => plan.resolve(Resolved {
            config_map: Some(config_map.clone()),
            ..Default::default()
        }),
        None => plan.failing(StepError::Refused(format!(
            "{message}; no live API Deployment mounts a last-good config to keep"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::pipeline::Flow;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Option<Time> {
        Some(Time(Timestamp::from_second(seconds).expect("time")))
    }

    fn historical(name: &str, seconds: i64, controlled: bool) -> Historical {
        Historical {
            name: name.into(),
            created: at(seconds),
            controlled,
        }
    }

    #[test]
    fn a_render_applies_the_config_map_and_keeps_three_historical_ones() {
        let nova = example();
        let observed = Observed {
            mounted: vec![],
            history: vec![
                historical("nova-config-a", 1, true),
                historical("nova-config-b", 2, true),
                historical("nova-config-c", 3, true),
                historical("nova-config-d", 4, true),
                historical("nova-config-foreign", 5, false),
            ],
        };
        let plan = plan(&nova, &observed, &Resolved::default());
        assert_eq!(plan.flow, Flow::Continue);
        let current = plan.resolved.config_map.clone().expect("resolved");
        assert!(current.starts_with("nova-config-"));
        assert_eq!(plan.children.len(), 1);
        assert_eq!(plan.children[0].name, current);
        assert_eq!(
            plan.prunes[0].keep,
            [
                current.as_str(),
                "nova-config-d",
                "nova-config-c",
                "nova-config-b"
            ]
        );
        let v = plan
            .verdict(NovaConditionType::ExtraConfigHealthy)
            .expect("verdict");
        assert_eq!((v.ok, v.reason), (true, Reason::NoOwnedKeysOverridden));
        assert!(plan.events.is_empty());
    }

    #[test]
    fn an_owned_key_override_is_reported_with_one_event_per_new_verdict() {
        let mut nova = example();
        nova.spec.extra_config = Some(
            serde_json::from_value(serde_json::json!({
                "filter_scheduler": {"build_failure_weight_multiplier": "1000000.0"}
            }))
            .expect("extraConfig"),
        );
        let first = plan(&nova, &Observed::default(), &Resolved::default());
        let v = first
            .verdict(NovaConditionType::ExtraConfigHealthy)
            .expect("verdict");
        assert_eq!(
            (v.ok, v.reason, v.message.as_str()),
            (
                false,
                Reason::OwnedKeysOverridden,
                "spec.extraConfig overrides operator-owned keys: [filter_scheduler] build_failure_weight_multiplier"
            )
        );
        assert_eq!(first.events.len(), 1);
        assert_eq!(
            first.events[0].reason,
            EventReason::ExtraConfigOwnedKeyOverride
        );

        let mut reported = nova.clone();
        let mut status = nova_api::v1alpha1::NovaStatus::default();
        crate::pipeline::conditions::set(
            &mut status.conditions,
            v.condition.as_str(),
            false,
            v.reason,
            v.message.clone(),
            Some(1),
        );
        reported.status = Some(status);
        let again = plan(&reported, &Observed::default(), &Resolved::default());
        assert!(
            again.events.is_empty(),
            "no event flood for an unchanged verdict"
        );
    }

    #[test]
    fn an_injected_section_keeps_the_last_good_config_map() {
        let mut nova = example();
        nova.spec.extra_config = Some(
            serde_json::from_value(serde_json::json!({
                "DEFAULT": {"cpu_allocation_ratio": "1.0\n[DEFAULT]\ntransport_url = evil"}
            }))
            .expect("extraConfig"),
        );
        let observed = Observed {
            mounted: vec!["other".into(), "nova-config-12345678".into()],
            history: vec![],
        };
        let plan = plan(&nova, &observed, &Resolved::default());
        let v = plan
            .verdict(NovaConditionType::SecretsReady)
            .expect("verdict");
        assert_eq!((v.ok, v.reason), (false, Reason::ConfigError));
        assert!(
            v.message.contains("\"DEFAULT\"") && !v.message.contains("evil"),
            "{}",
            v.message
        );
        assert!(plan.error.is_none());
        assert!(
            plan.children.is_empty(),
            "nothing rendered from the invalid spec"
        );
        assert_eq!(
            plan.resolved.config_map.as_deref(),
            Some("nova-config-12345678")
        );

        let nothing_live = super::plan(&nova, &Observed::default(), &Resolved::default());
        let error = nothing_live.error.as_ref().expect("fails").to_string();
        assert!(
            error.ends_with("no live API Deployment mounts a last-good config to keep"),
            "{error}"
        );
        assert_eq!(
            nothing_live
                .verdict(NovaConditionType::SecretsReady)
                .map(|v| v.reason),
            Some(Reason::ConfigError)
        );
    }
}
