//! Fixtures shared by the validation tests.

use std::collections::BTreeMap;

use nova_api::defaults::default_nova;
use nova_api::v1alpha1::{DeploymentSpec, Nova, NovaCompute};

use super::{Lookups, Outcome, PriorityClassLookup};

/// The lead's `examples/nova.yaml`: the spec's Example Nova.
pub const EXAMPLE_NOVA_YAML: &str = include_str!("../../../examples/nova.yaml");
/// The lead's `examples/novacompute.yaml`.
pub const EXAMPLE_NOVACOMPUTE_YAML: &str = include_str!("../../../examples/novacompute.yaml");

/// The Example Nova as written.
pub fn example_nova() -> Nova {
    serde_saphyr::from_str(EXAMPLE_NOVA_YAML).expect("examples/nova.yaml parses")
}

/// The Example Nova as the validating webhook sees it: past the defaulting webhook.
pub fn nova() -> Nova {
    let mut n = example_nova();
    default_nova(&mut n.spec);
    n
}

/// The example pool.
pub fn novacompute() -> NovaCompute {
    serde_saphyr::from_str(EXAMPLE_NOVACOMPUTE_YAML).expect("examples/novacompute.yaml parses")
}

/// Lookups answering from a fixed table; names not in it do not exist.
pub struct FakeLookups(pub BTreeMap<String, PriorityClassLookup>);

impl FakeLookups {
    /// Every name in `exists` exists; `down` makes every lookup fail.
    pub fn new(exists: &[&str]) -> Self {
        Self(
            exists
                .iter()
                .map(|n| ((*n).to_owned(), PriorityClassLookup::Exists))
                .collect(),
        )
    }
}

impl Lookups for FakeLookups {
    fn priority_class(&self, name: &str) -> Option<PriorityClassLookup> {
        Some(
            self.0
                .get(name)
                .cloned()
                .unwrap_or(PriorityClassLookup::NotFound),
        )
    }
}

/// The rendered errors of an outcome.
pub fn errors(outcome: &Outcome) -> Vec<String> {
    outcome.errors.iter().map(ToString::to_string).collect()
}

/// A deployment block, created when absent.
pub fn block(d: &mut Option<DeploymentSpec>) -> &mut DeploymentSpec {
    d.get_or_insert_with(DeploymentSpec::default)
}
