//! The Novas every Nova pass shares, as the controller's watch last saw them: what the Database
//! step checks its schema claims against (`nova_api::claims`), so two Novas that reached the
//! API server together (or past a bypassed webhook) never provision or migrate one schema.

use kube::runtime::reflector::Store;
use nova_api::claims::{self, Conflict};
use nova_api::v1alpha1::Nova;

/// The cached Novas; none without a watch (`render`, unit tests).
#[derive(Default)]
pub struct Claimants {
    store: Option<Store<Nova>>,
}

impl Claimants {
    /// The Novas of the watch feeding `store`.
    pub fn new(store: Store<Nova>) -> Self {
        Self { store: Some(store) }
    }

    /// The first schema of `nova` an older Nova (by creationTimestamp, then namespace/name)
    /// already claims on the same server: the younger one waits. Served from the cache.
    pub fn held_by_older(&self, nova: &Nova) -> Option<Conflict> {
        let store = self.store.as_ref()?;
        let older: Vec<_> = store
            .state()
            .into_iter()
            .filter(|other| claims::older(other, nova))
            .collect();
        claims::conflicts(nova, older.iter().map(|n| &**n))
            .into_iter()
            .next()
    }
}
