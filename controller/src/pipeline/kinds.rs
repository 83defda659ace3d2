//! What a row reads or applies, declared on the row itself (`seq(..).using(step::KINDS)`): the
//! tables derive from it the kinds the handle registers, the kinds whose events wake a CR, and
//! the kinds the remote sweep lists, so adding a step adds no entry to a list elsewhere.

use kube::core::ApiResource;

use super::pass::{Reconciled, Stage, Step};
use crate::clusters::KindSpec;

/// How a row relates to a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read only: registered, so the read is served from the cache; its events wake nothing.
    Reads,
    /// Read by the name the CR gives it: its events wake the CRs that name it (the kind's
    /// reference index), here and on a target cluster.
    Names,
    /// Applied as the CR's child: its events wake the owner, and a deleting CR's remote sweep
    /// lists it on its target cluster.
    Owns,
}

/// One kind a row uses: how the handle caches it, and the row's role.
#[derive(Clone, Copy, Debug)]
pub struct Uses {
    /// The kind and its caching (a function: a `KindSpec` is built at run time).
    pub spec: fn() -> KindSpec,
    /// What the row does with it.
    pub role: Role,
}

/// A kind the row reads.
pub const fn reads(spec: fn() -> KindSpec) -> Uses {
    Uses {
        spec,
        role: Role::Reads,
    }
}

/// A kind the row reads by the name the CR gives it.
pub const fn names(spec: fn() -> KindSpec) -> Uses {
    Uses {
        spec,
        role: Role::Names,
    }
}

/// A kind the row applies as the CR's child.
pub const fn owns(spec: fn() -> KindSpec) -> Uses {
    Uses {
        spec,
        role: Role::Owns,
    }
}

fn steps<K: Reconciled>(tables: &[&'static [Stage<K>]]) -> impl Iterator<Item = &'static Step<K>> {
    tables.iter().flat_map(|table| {
        table.iter().flat_map(|stage| match stage {
            Stage::Sequential(step) => std::slice::from_ref(step),
            Stage::Parallel(members) => members,
        })
    })
}

/// Every kind the rows of `tables` use, once, in the order the rows first name them; a kind
/// two rows cache differently is cached the fuller way.
pub fn registered<K: Reconciled>(tables: &[&'static [Stage<K>]]) -> Vec<KindSpec> {
    let mut kinds: Vec<KindSpec> = Vec::new();
    for uses in steps(tables).flat_map(|step| step.kinds) {
        let spec = (uses.spec)();
        match kinds.iter_mut().find(|k| k.resource == spec.resource) {
            Some(known) => known.caching = known.caching.max(spec.caching),
            None => kinds.push(spec),
        }
    }
    kinds
}

/// The kinds the rows of `tables` use in `role`, once each, in the order first named.
pub fn in_role<K: Reconciled>(tables: &[&'static [Stage<K>]], role: Role) -> Vec<ApiResource> {
    let mut kinds: Vec<ApiResource> = Vec::new();
    for uses in steps(tables).flat_map(|step| step.kinds) {
        let kind = (uses.spec)().resource;
        if uses.role == role && !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// Kind, caching, cluster scope and optionality, sorted: what a registration amounts to (the
/// kinds' tests compare the derived one with a list).
#[cfg(test)]
pub fn registration(specs: Vec<KindSpec>) -> Vec<(String, crate::clusters::Caching, bool, bool)> {
    let mut specs: Vec<_> = specs
        .into_iter()
        .map(|s| (s.resource.kind, s.caching, s.cluster_scoped, s.optional))
        .collect();
    specs.sort();
    specs
}
