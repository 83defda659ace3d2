//! The spec.extraConfig merge (`common-types.md` §3.14, `nova-crd.txt` "extraConfig"):
//! operator defaults < extraConfig, into nova.conf only, and the list of operator-owned keys
//! the CR overrides.
//!
//! oslo.config folds group names to lower case (all but `DEFAULT`), and within one file a
//! later section wins. A user section that names an operator section in another case
//! (`[Placement]`) is therefore merged into the operator's section, so the user value is the
//! one in force, exactly as the ExtraConfigHealthy report says. Keys compare verbatim.
//!
//! Every key is merged, rejected owned keys included: refusing those is admission's job, and
//! a rejected key that reached the renderer anyway is merged and reported like any other
//! owned key. What the renderer refuses is what would change the meaning of the file beyond
//! the one option the CR names: a newline or carriage return in a section name, key or value,
//! and a key oslo.config would read back as a different key (see [`RenderError`]).

use std::collections::BTreeMap;

use nova_api::ini_text::misread_key;
use nova_api::owned_keys::{self, OwnedKey, section_matches};
use nova_api::v1alpha1::ExtraConfig;

use super::error::RenderError;
use super::ini::{IniDocument, has_line_break};

/// Refuses an extraConfig the renderer cannot write verbatim, naming the section.
pub fn check(extra: &ExtraConfig) -> Result<(), RenderError> {
    for (section, options) in extra {
        if section.is_empty() {
            return Err(RenderError::ExtraConfigEmptySection);
        }
        let line_break = has_line_break(section)
            || options
                .iter()
                .any(|(k, v)| has_line_break(k) || has_line_break(v));
        if line_break {
            return Err(RenderError::ExtraConfigControlCharacter {
                section: section.clone(),
            });
        }
        if options.keys().any(|k| misread_key(k)) {
            return Err(RenderError::ExtraConfigUnreadableKey {
                section: section.clone(),
            });
        }
    }
    Ok(())
}

/// The keys one kind's renderer owns (`owned_keys::nova`, `owned_keys::novacompute`).
pub type Registry<I> = fn() -> I;

/// The Nova-owned keys `extra` sets, sorted by section then key, each once.
pub fn overridden_owned_keys(extra: &ExtraConfig) -> Vec<OwnedKey> {
    overridden_keys_of(extra, owned_keys::nova)
}

/// The keys of `registry` that `extra` sets, sorted by section then key, each once.
pub fn overridden_keys_of<I: Iterator<Item = &'static OwnedKey>>(
    extra: &ExtraConfig,
    registry: Registry<I>,
) -> Vec<OwnedKey> {
    let mut found: BTreeMap<(&str, &str), OwnedKey> = BTreeMap::new();
    for (section, options) in extra {
        for key in options.keys() {
            if let Some(owned) =
                registry().find(|owned| owned.key == key && section_matches(owned.section, section))
            {
                found.insert((owned.section, owned.key), *owned);
            }
        }
    }
    found.into_values().collect()
}

/// Checks `extra` and merges it over nova.conf's `doc` (user wins), returning the overridden
/// Nova-owned keys.
pub(crate) fn merge(
    doc: &mut IniDocument,
    extra: Option<&ExtraConfig>,
) -> Result<Vec<OwnedKey>, RenderError> {
    merge_over(doc, extra, owned_keys::nova)
}

/// Checks `extra` and merges it over `doc` (user wins), returning the overridden keys of
/// `registry`.
pub(crate) fn merge_over<I: Iterator<Item = &'static OwnedKey>>(
    doc: &mut IniDocument,
    extra: Option<&ExtraConfig>,
    registry: Registry<I>,
) -> Result<Vec<OwnedKey>, RenderError> {
    let Some(extra) = extra else {
        return Ok(Vec::new());
    };
    check(extra)?;
    for (section, options) in extra {
        let target = doc
            .sections()
            .keys()
            .find(|existing| section_matches(existing, section))
            .cloned()
            .unwrap_or_else(|| section.clone());
        let merged = doc.section_mut(&target);
        for (key, value) in options {
            merged.insert(key.clone(), value.clone());
        }
    }
    Ok(overridden_keys_of(extra, registry))
}
