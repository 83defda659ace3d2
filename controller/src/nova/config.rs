//! The Config step (`nova-reconciler.txt`, "Config"; `common-types.md` §3.14): nova.conf and
//! the four overlays into an immutable, content-addressed ConfigMap, three historical ones
//! kept, `ExtraConfigHealthy` maintained, and the last-good rule for an invalid render.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PartialObjectMeta, PostParams};
use kube::runtime::events::EventType;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::names::NovaNames;

use super::pass::NovaPass;
use crate::pipeline::status::FIELD_MANAGER;
use crate::pipeline::{Flow, StepError, StepFuture, delete_if_present};
use crate::render::{self, RenderError, RenderedConfig};

/// The label that selects every config ConfigMap of one CR, for pruning.
pub const CONFIG_BASE_LABEL: &str = "cobaltcore.c5c3.io/config-base";
/// Historical ConfigMaps kept besides the one in use.
pub const HISTORY: usize = 3;

/// The ConfigMap one render produces, claimed by `owner` when given.
pub fn desired_config_map(
    nova: &str,
    rendered: &RenderedConfig,
    mut labels: BTreeMap<String, String>,
    owner: Option<OwnerReference>,
) -> ConfigMap {
    labels.insert(
        CONFIG_BASE_LABEL.to_owned(),
        NovaNames::new(nova).config_base(),
    );
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(rendered.config_map_name(nova)),
            labels: Some(labels),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(rendered.documents.clone()),
        immutable: Some(true),
        ..Default::default()
    }
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

/// The Config step.
pub fn run(pass: &mut NovaPass) -> StepFuture<'_> {
    Box::pin(async move {
        let name = pass.name();
        let rendered = match render::render_config(&name, &pass.namespace(), &pass.nova.spec) {
            Ok(rendered) => rendered,
            Err(error) => return last_good(pass, error).await,
        };
        report_extra_config(pass, &rendered).await;
        let current = rendered.config_map_name(&name);
        ensure(pass, &rendered).await?;
        prune(pass, &current).await?;
        pass.resolved.config_map = Some(current);
        Ok(Flow::Continue)
    })
}

/// Sets ExtraConfigHealthy, with a Warning event only when the verdict is new.
async fn report_extra_config(pass: &mut NovaPass, rendered: &RenderedConfig) {
    let (ok, reason, message) = extra_config_health(rendered);
    let type_ = NovaConditionType::ExtraConfigHealthy;
    let previous = pass
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == type_.as_str());
    let new_verdict = previous.is_none_or(|c| c.status != "False" || c.message != message);
    if !ok && new_verdict {
        pass.publish(EventType::Warning, "ExtraConfigOwnedKeyOverride", &message)
            .await;
    }
    pass.set_condition(type_, ok, reason, message);
}

/// Creates the ConfigMap unless it exists; an existing one another CR controls is refused.
async fn ensure(pass: &NovaPass, rendered: &RenderedConfig) -> Result<(), StepError> {
    let ns = pass.namespace();
    let name = pass.name();
    let api: Api<ConfigMap> = Api::namespaced(pass.ctx.client.clone(), &ns);
    let desired = desired_config_map(
        &name,
        rendered,
        pass.common_labels(),
        Some(pass.owner_reference()?),
    );
    let target = desired.name_any();
    let existing = api
        .get_metadata_opt(&target)
        .await
        .map_err(|e| StepError::kube(format!("reading ConfigMap {ns}/{target}"), e))?;
    match existing {
        Some(existing) if controlled_by(&existing.metadata, pass) => Ok(()),
        Some(_) => Err(StepError::Refused(format!(
            "ConfigMap {ns}/{target} exists and is not controlled by Nova {name}"
        ))),
        None => {
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..Default::default()
            };
            api.create(&params, &desired)
                .await
                .map_err(|e| StepError::kube(format!("creating ConfigMap {ns}/{target}"), e))?;
            Ok(())
        }
    }
}

fn controlled_by(meta: &ObjectMeta, pass: &NovaPass) -> bool {
    let uid = pass.nova.uid().unwrap_or_default();
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Keeps the current ConfigMap and the newest [`HISTORY`] others this CR controls.
async fn prune(pass: &NovaPass, current: &str) -> Result<(), StepError> {
    let ns = pass.namespace();
    let name = pass.name();
    let api: Api<ConfigMap> = Api::namespaced(pass.ctx.client.clone(), &ns);
    let selector = format!(
        "{CONFIG_BASE_LABEL}={}",
        NovaNames::new(&name).config_base()
    );
    let listed = api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| StepError::kube(format!("listing the config ConfigMaps of {ns}/{name}"), e))?;
    let mut history: Vec<PartialObjectMeta<ConfigMap>> = listed
        .items
        .into_iter()
        .filter(|cm| cm.name_any() != current && controlled_by(&cm.metadata, pass))
        .collect();
    history.sort_by(|a, b| {
        b.creation_timestamp()
            .cmp(&a.creation_timestamp())
            .then_with(|| b.name_any().cmp(&a.name_any()))
    });
    for stale in history.iter().skip(HISTORY) {
        let stale = stale.name_any();
        delete_if_present(&api, &stale, &format!("ConfigMap {ns}/{stale}")).await?;
    }
    Ok(())
}

/// An invalid render keeps the running pods on their last-good config: the step reports
/// ConfigError naming the section (never the value) and hands on the ConfigMap the live API
/// Deployment mounts. With no live Deployment there is nothing to fall back to.
async fn last_good(pass: &mut NovaPass, error: RenderError) -> Result<Flow, StepError> {
    let message = format!("rendering the configuration failed: {error}");
    pass.set_condition(
        NovaConditionType::SecretsReady,
        false,
        Reason::ConfigError,
        message.clone(),
    );
    if !error.is_injection() {
        return Err(StepError::Refused(message));
    }
    let name = pass.name();
    let ns = pass.namespace();
    let api: Api<Deployment> = Api::namespaced(pass.ctx.client.clone(), &ns);
    let live = api
        .get_opt(&NovaNames::new(&name).api())
        .await
        .map_err(|e| StepError::kube(format!("reading Deployment {ns}/{name}"), e))?;
    let prefix = format!("{}-", NovaNames::new(&name).config_base());
    let mounted = live
        .and_then(|d| d.spec?.template.spec?.volumes)
        .into_iter()
        .flatten()
        .filter_map(|v| v.config_map.map(|c| c.name))
        .find(|cm| cm.starts_with(&prefix));
    match mounted {
        Some(config_map) => {
            pass.resolved.config_map = Some(config_map);
            Ok(Flow::Continue)
        }
        None => Err(StepError::Refused(format!(
            "{message}; no live API Deployment mounts a last-good config to keep"
        ))),
    }
}
