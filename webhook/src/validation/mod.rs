//! Validation of both kinds as pure functions of (new, old, operation, lookups).
//!
//! Every rule appends to one error list, so a response names every violated field at once.
//! Lookups that need the API server (PriorityClass, the Nova a pool joins) arrive as one
//! resolved snapshot (`crate::lookups::Lookups`), which keeps these functions synchronous.

pub mod behavior;
pub mod common;
pub mod deployment;
pub mod extra_config;
pub mod extra_volumes;
pub mod nova;
pub mod novacompute;
pub mod pod_metadata;
pub mod probes;
pub mod quantity;
pub mod urls;

use crate::field::Violations;

/// The admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// CREATE.
    Create,
    /// UPDATE.
    Update,
    /// DELETE (never registered; admitted).
    Delete,
    /// CONNECT (never registered; admitted).
    Connect,
}

impl Operation {
    /// Parses the review's operation.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            "CONNECT" => Some(Operation::Connect),
            _ => None,
        }
    }

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// What validation found: the errors (rejection when non-empty) and the warnings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Every violated field (the first hundred listed, the rest counted).
    pub errors: Violations,
    /// Warnings returned beside the verdict.
    pub warnings: Vec<String>,
}

impl Outcome {
    /// Whether the object is admitted.
    pub fn allowed(&self) -> bool {
        self.errors.is_empty()
    }
}

pub use nova_api::ini_text::has_line_break;

/// The message of the control-character guard on typed fields rendered into nova.conf and
/// nova-compute.conf (`common-types.md` §3.24).
pub const RENDERED_CRLF: &str = "value must not contain a newline or carriage return: it is rendered verbatim into nova.conf and nova-compute.conf, so a newline injects arbitrary config lines";

#[cfg(test)]
pub(crate) mod testing;
