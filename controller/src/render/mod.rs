//! Pure renderers: nova.conf and the role overlays, the compute contract, as functions of the
//! CR (DESIGN.md, principle 1). Nothing here performs I/O, reads a Secret or depends on the
//! defaulting webhook having run: every unset field resolves to its documented default at
//! render time. Every map is a `BTreeMap`, so one input renders to one byte sequence whatever
//! the insertion order of its maps.
//!
//! Entry points:
//! - [`render_config`]: the config ConfigMap's documents, their hash and the owned keys
//!   spec.extraConfig overrides (the Config step, the `render` command);
//! - [`pod`]: the building blocks of every pod template (environment, mounts, digest
//!   annotations, security context, resources, placement, topology spread);
//! - [`render_compute_fragment`] and [`contract_static_keys`]: the `nova-compute.conf`
//!   fragment of the in-cluster or remote contract, and the contract keys the renderer owns
//!   (the ComputeConfig step adds [`secret_contract_keys`] from Secrets);
//! - [`dsn`] and [`broker_url`]: the connection strings the derived Secrets carry, built from
//!   values the steps read.
//!
//! No rendered document ever carries a credential: the identity sections have no password,
//! the database sections hold a placeholder DSN, and each credential reaches the pods as an
//! environment override from its Secret.

pub mod autoscaling;
pub mod broker_url;
pub mod children;
mod compute_contract;
pub mod compute_daemonset;
pub mod compute_pool;
mod config_map;
pub mod db_jobs;
pub mod db_scripts;
pub mod discover_hosts;
pub mod dsn;
mod error;
pub mod extra_config;
pub mod http_route;
pub mod ini;
mod inputs;
mod logging;
pub mod mariadb;
pub mod network_policy;
pub mod nova_conf;
pub mod overlays;
pub mod paths;
pub mod pod;
pub mod workloads;

pub use compute_contract::{
    ContractVariant, contract_keys, contract_static_keys, render_compute_fragment,
    secret_contract_keys,
};
pub use config_map::{RenderedConfig, data_hash, data_hash8, render_config};
pub use error::RenderError;
