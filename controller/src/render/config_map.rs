//! The config ConfigMap's data (`common-types.md` §3.14): nova.conf (with extraConfig merged),
//! the four overlays, and logging.ini while the format is json; its content hash and name.

use std::collections::BTreeMap;

use nova_api::names::NovaNames;
use nova_api::owned_keys::OwnedKey;
use nova_api::v1alpha1::NovaSpec;
use sha2::{Digest, Sha256};

use super::error::RenderError;
use super::inputs::SharedInputs;
use super::paths::{
    CONDUCTOR_CONF, LOGGING_INI, METADATA_CONF, NOVA_CONF, NOVNCPROXY_CONF, SCHEDULER_CONF,
};
use super::{extra_config, logging, nova_conf, overlays};

/// One render of the config ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedConfig {
    /// The ConfigMap data: nova.conf, metadata.conf, scheduler.conf, conductor.conf,
    /// novncproxy.conf, and logging.ini while the format is json.
    pub documents: BTreeMap<String, String>,
    /// The first 8 hex characters of [`data_hash`] over `documents`.
    pub hash8: String,
    /// The operator-owned keys spec.extraConfig overrides, sorted by section then key.
    pub overridden_owned_keys: Vec<OwnedKey>,
}

impl RenderedConfig {
    /// The ConfigMap name, `{name}-config-<hash8>`.
    pub fn config_map_name(&self, name: &str) -> String {
        NovaNames::new(name).config(&self.hash8)
    }

    /// The `[section] key (impact)` entries of the OwnedKeysOverridden message, in order.
    pub fn override_entries(&self) -> Vec<String> {
        self.overridden_owned_keys
            .iter()
            .map(OwnedKey::override_entry)
            .collect()
    }

    /// nova.conf.
    pub fn nova_conf(&self) -> &str {
        self.documents.get(NOVA_CONF).map_or("", String::as_str)
    }
}

/// SHA-256, lowercase hex, over the keys in sorted order, each written as
/// `<len(key)>:<key>=<len(value)>:<value>\n` (lengths in bytes).
pub fn data_hash(data: &BTreeMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    for (key, value) in data {
        hasher.update(format!("{}:", key.len()));
        hasher.update(key);
        hasher.update(format!("={}:", value.len()));
        hasher.update(value);
        hasher.update("\n");
    }
    hex::encode(hasher.finalize())
}

/// The first 8 hex characters of [`data_hash`], the ConfigMap name suffix.
pub fn data_hash8(data: &BTreeMap<String, String>) -> String {
    let mut hash = data_hash(data);
    hash.truncate(8);
    hash
}

/// Renders the config ConfigMap of the Nova `name` in `namespace`.
pub fn render_config(
    name: &str,
    namespace: &str,
    spec: &NovaSpec,
) -> Result<RenderedConfig, RenderError> {
    let inputs = SharedInputs::resolve(name, namespace, spec)?;
    let mut doc = nova_conf::operator_document(spec, &inputs)?;
    let overridden_owned_keys = extra_config::merge(&mut doc, spec.extra_config.as_ref())?;
    let nova_conf = doc.render().map_err(|e| RenderError::Section {
        document: NOVA_CONF,
        section: e.section,
    })?;

    let mut documents = BTreeMap::new();
    documents.insert(NOVA_CONF.to_owned(), nova_conf);
    documents.insert(METADATA_CONF.to_owned(), overlays::metadata_conf());
    documents.insert(SCHEDULER_CONF.to_owned(), overlays::scheduler_conf(spec)?);
    documents.insert(CONDUCTOR_CONF.to_owned(), overlays::conductor_conf(spec)?);
    documents.insert(NOVNCPROXY_CONF.to_owned(), overlays::novncproxy_conf());
    if let Some(ini) = logging::logging_ini(spec)? {
        documents.insert(LOGGING_INI.to_owned(), ini);
    }
    let hash8 = data_hash8(&documents);
    Ok(RenderedConfig {
        documents,
        hash8,
        overridden_owned_keys,
    })
}
