//! The kinds the pipelines read, collected from every controller before the handle starts.

use std::collections::BTreeMap;

use super::cache::key;
use crate::clusters::KindSpec;
use crate::openstack::trust::Trust;

/// The kinds the pipelines read, collected from every controller before the caches start.
#[derive(Clone, Default)]
pub struct Registry {
    pub(super) kinds: Vec<KindSpec>,
    pub(super) probe_address: Option<std::net::SocketAddr>,
    pub(super) service_routes: BTreeMap<String, std::net::SocketAddr>,
    pub(super) trust: Trust,
}

impl Registry {
    /// Adds kinds; a kind registered twice keeps the richest caching asked for.
    pub fn register(mut self, kinds: impl IntoIterator<Item = KindSpec>) -> Self {
        for kind in kinds {
            match self
                .kinds
                .iter_mut()
                .find(|k| key(&k.resource) == key(&kind.resource))
            {
                Some(existing) => existing.caching = existing.caching.max(kind.caching),
                None => self.kinds.push(kind),
            }
        }
        self
    }

    /// Dials `address` for every Service probe instead of resolving the Service's name: for
    /// a controller running outside the cluster, which cannot resolve `*.svc.cluster.local`.
    pub fn probe_services_at(mut self, address: Option<std::net::SocketAddr>) -> Self {
        self.probe_address = address;
        self
    }

    /// Dials `routes[host:port]` for the OpenStack calls to those Service hosts instead of
    /// resolving them: for a controller outside the cluster.
    pub fn route_services(mut self, routes: BTreeMap<String, std::net::SocketAddr>) -> Self {
        self.service_routes = routes;
        self
    }

    /// Verifies the https OpenStack endpoints this controller dials against `trust` (the
    /// system's roots and `--ca-file`).
    pub fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Secret;

    use super::*;
    use crate::clusters::Caching;

    #[test]
    fn a_kind_registered_twice_keeps_the_richest_caching() {
        let registry = Registry::default()
            .register([KindSpec::of::<Secret>(Caching::Metadata)])
            .register([KindSpec::of::<Secret>(Caching::OnDemand)])
            .register([KindSpec::of::<Secret>(Caching::Metadata)]);
        assert_eq!(registry.kinds.len(), 1);
        assert_eq!(registry.kinds[0].caching, Caching::OnDemand);
    }
}
