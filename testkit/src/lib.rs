//! The one test kit of the kwok and real tiers (`tests/README.md`): the harness handles, the
//! bounded wait that fails with what it saw ([`wait::Wait`]), typed condition readers for both
//! kinds ([`conditions::Conditioned`]), the fixtures loaded one way ([`fixtures`]), what the
//! other operators would have created ([`inputs`]), the controllers started in-process
//! ([`controllers`]), the API server's request counters ([`apiserver`]) and a controller's own
//! ([`requests`]), helm against a control plane ([`charts`]), and the real tier's shared stack
//! ([`real`], [`proof_nova`], [`stack`]).
//!
//! Dev-only: no product crate depends on it.

pub mod admission_load;
pub mod apiserver;
pub mod charts;
pub mod conditions;
pub mod controllers;
pub mod diagnose;
pub mod events;
pub mod fixtures;
pub mod inputs;
pub mod logs;
pub mod novas;
pub mod proof_nova;
pub mod real;
pub mod requests;
pub mod stack;
pub mod wait;

pub use nova_test_harness as harness;
pub use nova_test_harness::{ControlPlane, shared, shared_real_node};

/// What most kwok-tier suites import.
pub mod prelude {
    pub use crate::apiserver::*;
    pub use crate::charts::*;
    pub use crate::conditions::{Conditioned, condition_of, holds, reason};
    pub use crate::controllers::*;
    pub use crate::events::*;
    pub use crate::fixtures::*;
    pub use crate::inputs::*;
    pub use crate::novas::*;
    pub use crate::wait::{Seen, Timeout, Wait};
}
