//! The pool index every NovaCompute pass shares (`novacompute.md` §4.1, the `spec.novaRef.name`
//! field index of the reference): the pools of each Nova, kept current from the pool watch, so
//! a pass finds its siblings and an event on a Nova or its contract finds its pools by lookup.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::core::ApiResource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{Nova, NovaCompute};

use super::aggregates::KeptAggregates;
use crate::openstack::Sessions;
use crate::pipeline::index::{ObjectKey, ReferenceIndex};

/// What one pool references by name: its Nova and the Nova's compute contract Secret.
pub fn references(pool: &NovaCompute) -> Vec<ObjectKey> {
    let ns = pool.namespace().unwrap_or_default();
    let nova = &pool.spec.nova_ref.name;
    vec![
        nova_key(&ns, nova),
        ObjectKey::new(
            &ApiResource::erase::<Secret>(&()),
            &ns,
            &NovaNames::new(nova).compute_config(),
        ),
    ]
}

/// The index key of the Nova `name` in `namespace`.
pub fn nova_key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey::new(&ApiResource::erase::<Nova>(&()), namespace, name)
}

/// The pools by what they reference, the pools as the watch last saw them, the aggregates
/// each pool last reported kept, and the OpenStack tokens their passes share.
pub struct Pools {
    index: ReferenceIndex<NovaCompute>,
    store: Option<Store<NovaCompute>>,
    kept: KeptAggregates,
    sessions: Arc<Sessions>,
}

impl Default for Pools {
    /// No pool is known (`render`, unit tests).
    fn default() -> Self {
        Self {
            index: ReferenceIndex::new(references),
            store: None,
            kept: KeptAggregates::default(),
            sessions: Arc::default(),
        }
    }
}

impl Pools {
    /// The pools of the watch feeding `store`, their passes sharing `sessions`.
    pub fn new(store: Store<NovaCompute>, sessions: Sessions) -> Self {
        Self {
            store: Some(store),
            sessions: Arc::new(sessions),
            ..Self::default()
        }
    }

    /// The OpenStack tokens (and request counter) every pass's client shares.
    pub fn sessions(&self) -> Arc<Sessions> {
        self.sessions.clone()
    }

    /// Follows one event of the pool watch.
    pub fn follow(&self, event: &watcher::Event<NovaCompute>) {
        self.index.apply(event);
        if let watcher::Event::Delete(pool) = event {
            self.kept
                .forget(&(pool.namespace().unwrap_or_default(), pool.name_any()));
        }
    }

    /// The `AggregateKept` notes each pool last reported.
    pub fn kept_aggregates(&self) -> &KeptAggregates {
        &self.kept
    }

    /// The pools referencing `key` (a Nova, or its contract Secret).
    pub fn referencing(&self, key: &ObjectKey) -> Vec<ObjectRef<NovaCompute>> {
        self.index.lookup(key)
    }

    /// The other pools of `pool`'s Nova in its namespace, on any cluster, deleting ones
    /// included, sorted by name.
    pub fn siblings(&self, pool: &NovaCompute) -> Vec<Arc<NovaCompute>> {
        let Some(store) = &self.store else {
            return Vec::new();
        };
        let ns = pool.namespace().unwrap_or_default();
        let mut siblings: Vec<Arc<NovaCompute>> = self
            .referencing(&nova_key(&ns, &pool.spec.nova_ref.name))
            .iter()
            .filter(|r| r.name != pool.name_any())
            .filter_map(|r| store.get(r))
            .collect();
        siblings.sort_by_key(|p| p.name_any());
        siblings
    }

    /// Every pool the watch holds.
    pub fn all(&self) -> Vec<Arc<NovaCompute>> {
        self.store.as_ref().map(Store::state).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::pool;
    use kube::runtime::reflector;

    fn named(name: &str, nova: &str) -> NovaCompute {
        let mut pool = pool();
        pool.metadata.name = Some(name.into());
        pool.spec.nova_ref.name = nova.into();
        pool
    }

    #[test]
    fn siblings_are_the_other_pools_of_the_same_nova() {
        let (store, mut writer) = reflector::store();
        let pools = Pools::new(store, Sessions::default());
        for pool in [
            named("pool-c", "nova"),
            named("pool-a", "nova"),
            named("pool-b", "nova"),
            named("other", "nova-2"),
        ] {
            let event = watcher::Event::Apply(pool);
            writer.apply_watcher_event(&event);
            pools.follow(&event);
        }
        let names =
            |found: Vec<Arc<NovaCompute>>| found.iter().map(|p| p.name_any()).collect::<Vec<_>>();
        assert_eq!(
            names(pools.siblings(&named("pool-a", "nova"))),
            ["pool-b", "pool-c"]
        );
        assert!(pools.siblings(&named("other", "nova-2")).is_empty());
        let contract = ObjectKey::new(
            &ApiResource::erase::<Secret>(&()),
            "openstack",
            "nova-compute-config",
        );
        assert_eq!(
            pools.referencing(&contract).len(),
            3,
            "the contract wakes its pools"
        );
        let gone = watcher::Event::Delete(named("pool-b", "nova"));
        writer.apply_watcher_event(&gone);
        pools.follow(&gone);
        assert_eq!(names(pools.siblings(&named("pool-a", "nova"))), ["pool-c"]);
        assert!(
            Pools::default().siblings(&pool()).is_empty(),
            "no watch, no sibling"
        );
    }
}
