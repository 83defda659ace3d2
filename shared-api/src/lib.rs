//! The contract between `nova-webhook` and `nova-controller`: the custom resource types and
//! every name, condition, owned key and resolved value both binaries must agree on, and the
//! runtime log filter both follow.

pub mod claims;
pub mod conditions;
pub mod crd;
pub mod defaults;
pub mod effective;
pub mod events;
pub mod ini_text;
pub mod labels;
pub mod logging;
pub mod names;
pub mod owned_keys;
pub mod reference;
pub mod v1alpha1;
pub mod volumes;
