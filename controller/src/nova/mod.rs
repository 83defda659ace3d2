//! The Nova controller: its pipeline table, its steps (one file each), its watches and its
//! finalizer.

pub mod broker_url;
pub mod compute_config;
pub mod config;
pub mod controller;
pub mod db_connection;
pub mod dsn;
pub mod finalize;
pub mod pass;
pub mod secrets;
pub mod transport_url;

use nova_api::conditions::NovaConditionType as C;

use crate::pipeline::{Stage, Step};
use pass::NovaPass;

/// The Nova pipeline, in order. Later issues add the Database and workload steps and the
/// parallel group behind them.
pub static PIPELINE: [Stage<NovaPass>; 5] = [
    Stage::Sequential(Step {
        name: "Secrets",
        condition: C::SecretsReady.as_str(),
        run: secrets::run,
    }),
    Stage::Sequential(Step {
        name: "DBConnectionSecrets",
        condition: C::SecretsReady.as_str(),
        run: db_connection::run,
    }),
    Stage::Sequential(Step {
        name: "TransportURLSecret",
        condition: C::SecretsReady.as_str(),
        run: transport_url::run,
    }),
    Stage::Sequential(Step {
        name: "Config",
        condition: C::SecretsReady.as_str(),
        run: config::run,
    }),
    Stage::Sequential(Step {
        name: "ComputeConfig",
        condition: C::ComputeConfigReady.as_str(),
        run: compute_config::run,
    }),
];

/// The finalizer that holds a Nova until its database CRs are released.
pub const FINALIZER: &str = "nova.openstack.c5c3.io/finalizer";
