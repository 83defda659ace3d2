//! The contract between `nova-webhook` and `nova-controller`: the custom resource types and
//! every name, condition, owned key and resolved value both binaries must agree on.

pub mod crd;
pub mod v1alpha1;
