//! `nova.openstack.c5c3.io/v1alpha1`: the Nova and NovaCompute kinds and their shared blocks.

pub mod common;
pub mod nova;
pub mod novacompute;
pub mod upstream;

pub use common::*;
pub use nova::*;
pub use novacompute::*;
