//! Validation of both kinds as pure functions of (new, old, operation, lookups).
//!
//! Every rule appends to one error list, so a response names every violated field at once.
//! Lookups that need the API server (PriorityClass, the Nova a pool joins) are resolved by the
//! caller before validation runs, which keeps these functions synchronous and testable.

pub mod behavior;
pub mod common;
pub mod deployment;
pub mod extra_config;
pub mod nova;
pub mod novacompute;
pub mod quantity;
pub mod urls;

use std::collections::BTreeMap;

use crate::field::FieldError;

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

/// The answer of a PriorityClass lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriorityClassLookup {
    /// The class exists.
    Exists,
    /// The API server says it does not.
    NotFound,
    /// The API server could not be asked; the check fails closed.
    Unavailable(String),
}

/// The lookups validation needs from the API server, already resolved.
pub trait Lookups {
    /// Whether the PriorityClass `name` exists. `None`: no client is configured, so the check
    /// is skipped (unit tests without a cluster).
    fn priority_class(&self, name: &str) -> Option<PriorityClassLookup>;
}

/// Lookups backed by a map resolved before validation.
#[derive(Clone, Debug, Default)]
pub struct ResolvedLookups {
    /// PriorityClass name → answer.
    pub priority_classes: BTreeMap<String, PriorityClassLookup>,
    /// Whether the map is authoritative; when false every lookup is skipped.
    pub enabled: bool,
}

impl Lookups for ResolvedLookups {
    fn priority_class(&self, name: &str) -> Option<PriorityClassLookup> {
        if !self.enabled {
            return None;
        }
        Some(
            self.priority_classes
                .get(name)
                .cloned()
                .unwrap_or_else(|| PriorityClassLookup::Unavailable("not resolved".into())),
        )
    }
}

/// No client: lookups skipped.
pub struct NoLookups;

impl Lookups for NoLookups {
    fn priority_class(&self, _name: &str) -> Option<PriorityClassLookup> {
        None
    }
}

/// What validation found: the errors (rejection when non-empty) and the warnings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Every violated field.
    pub errors: Vec<FieldError>,
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
