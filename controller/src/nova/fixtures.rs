//! Inputs shared by the plan tests of the Nova steps.

use nova_api::v1alpha1::Nova;

use crate::clusters::SecretValues;
use crate::sensitive::Sensitive;

/// The spec's Example Nova, as if admitted (uid and generation set).
pub fn example() -> Nova {
    let mut nova: Nova = serde_saphyr::from_str(include_str!("../../../examples/nova.yaml"))
        .unwrap_or_else(|e| panic!("the example parses: {e}"));
    nova.metadata.uid = Some("nova-uid".into());
    nova.metadata.generation = Some(1);
    nova
}

/// A Secret's values, key by key.
pub fn values(pairs: &[(&str, String)]) -> SecretValues {
    SecretValues(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Sensitive::new(v.clone())))
            .collect(),
    )
}
