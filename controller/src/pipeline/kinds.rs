//! What the tables derive from the kinds their rows declare ([`super::uses`]): the kinds the
//! handle registers, the kinds whose events wake a CR, and the kinds the remote sweep lists, so
//! adding a step adds no entry to a list elsewhere.

use kube::core::ApiResource;

use super::pass::{Reconciled, Stage, Step};
use super::uses::Role;
use crate::clusters::KindSpec;

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
