//! Fixtures shared by the validation tests.

use nova_api::defaults::default_nova;
use nova_api::v1alpha1::{DeploymentSpec, Nova, NovaCompute};

use super::Outcome;
use crate::lookups::{Lookups, PriorityClassLookup};

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

/// Lookups in which exactly the names in `exists` exist.
pub fn lookups(exists: &[&str]) -> Lookups {
    Lookups {
        priority_classes: Some(
            exists
                .iter()
                .map(|n| ((*n).to_owned(), PriorityClassLookup::Exists))
                .collect(),
        ),
        nova: None,
        novas: None,
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
