//! The NovaCompute pipeline's rows, one file each: observe through the cluster handle, then a pure
//! plan, its writes beyond its children as effects (the tables are `novacompute/mod.rs`; the
//! flows and helpers the rows share sit beside this folder).

pub mod aggregates;
pub mod compute_vpa;
pub mod daemonset;
pub mod nodes;
pub mod nova_ref;
pub mod pool_config;
pub mod services;
pub mod teardown;
pub mod traits;
