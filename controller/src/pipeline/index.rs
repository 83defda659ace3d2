//! A reverse index from the objects CRs reference by name (Secrets, stores, broker and database
//! clusters) to the CRs referencing them (`common-types.md` §3.23), kept current from the CR
//! watch, so an event on a referenced object maps to its CRs by lookup instead of a scan of
//! every CR.

use std::collections::{HashMap, HashSet};
use std::sync::{PoisonError, RwLock};

use kube::Resource;
use kube::core::ApiResource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

/// A referenced object: its kind, namespace ("" when cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

impl ObjectKey {
    /// The object `name` of `kind` in `namespace`.
    pub fn new(kind: &ApiResource, namespace: &str, name: &str) -> Self {
        Self {
            group: kind.group.clone(),
            kind: kind.kind.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

struct State<K: Resource<DynamicType = ()>> {
    by_target: HashMap<ObjectKey, HashSet<ObjectRef<K>>>,
    by_owner: HashMap<ObjectRef<K>, Vec<ObjectKey>>,
    /// The CRs seen since the watch restarted, while it relists.
    relisting: Option<HashSet<ObjectRef<K>>>,
}

impl<K: Resource<DynamicType = ()>> State<K> {
    fn set(&mut self, owner: ObjectRef<K>, targets: Vec<ObjectKey>) {
        self.remove(&owner);
        for target in &targets {
            self.by_target
                .entry(target.clone())
                .or_default()
                .insert(owner.clone());
        }
        self.by_owner.insert(owner, targets);
    }

    fn remove(&mut self, owner: &ObjectRef<K>) {
        for target in self.by_owner.remove(owner).unwrap_or_default() {
            if let Some(owners) = self.by_target.get_mut(&target) {
                owners.remove(owner);
                if owners.is_empty() {
                    self.by_target.remove(&target);
                }
            }
        }
    }
}

/// Referenced object → the CRs of kind `K` referencing it.
pub struct ReferenceIndex<K: Resource<DynamicType = ()>> {
    state: RwLock<State<K>>,
    references: fn(&K) -> Vec<ObjectKey>,
}

impl<K: Resource<DynamicType = ()>> ReferenceIndex<K> {
    /// An empty index; `references` lists what one CR references.
    pub fn new(references: fn(&K) -> Vec<ObjectKey>) -> Self {
        Self {
            state: RwLock::new(State {
                by_target: HashMap::new(),
                by_owner: HashMap::new(),
                relisting: None,
            }),
            references,
        }
    }

    /// Follows one event of the CR watch (a relist replaces the index once it completes).
    pub fn apply(&self, event: &watcher::Event<K>) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Apply(cr) => state.set(ObjectRef::from_obj(cr), (self.references)(cr)),
            watcher::Event::Delete(cr) => state.remove(&ObjectRef::from_obj(cr)),
            watcher::Event::Init => state.relisting = Some(HashSet::new()),
            watcher::Event::InitApply(cr) => {
                let owner = ObjectRef::from_obj(cr);
                if let Some(seen) = &mut state.relisting {
                    seen.insert(owner.clone());
                }
                state.set(owner, (self.references)(cr));
            }
            watcher::Event::InitDone => {
                if let Some(seen) = state.relisting.take() {
                    let gone: Vec<ObjectRef<K>> = state
                        .by_owner
                        .keys()
                        .filter(|owner| !seen.contains(*owner))
                        .cloned()
                        .collect();
                    for owner in gone {
                        state.remove(&owner);
                    }
                }
            }
        }
    }

    /// The CRs referencing `target`.
    pub fn lookup(&self, target: &ObjectKey) -> Vec<ObjectRef<K>> {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .by_target
            .get(target)
            .map(|owners| owners.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;
    use nova_api::v1alpha1::Nova;

    fn secret(name: &str) -> ObjectKey {
        ObjectKey::new(&ApiResource::erase::<Secret>(&()), "ns", name)
    }

    fn nova(name: &str, annotation: &str) -> Nova {
        let mut nova = crate::nova::fixtures::example();
        nova.metadata.name = Some(name.into());
        nova.metadata.namespace = Some("ns".into());
        nova.metadata.annotations = Some([("refs".to_owned(), annotation.to_owned())].into());
        nova
    }

    fn refs(nova: &Nova) -> Vec<ObjectKey> {
        nova.metadata.annotations.as_ref().map_or(Vec::new(), |a| {
            a["refs"]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(secret)
                .collect()
        })
    }

    fn names(found: Vec<ObjectRef<Nova>>) -> Vec<String> {
        let mut names: Vec<String> = found.into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    #[test]
    fn follows_changes_deletions_and_relists() {
        let index = ReferenceIndex::new(refs);
        index.apply(&watcher::Event::Apply(nova("a", "db,keystone")));
        index.apply(&watcher::Event::Apply(nova("b", "db")));
        assert_eq!(names(index.lookup(&secret("db"))), ["a", "b"]);
        index.apply(&watcher::Event::Apply(nova("a", "keystone")));
        assert_eq!(
            names(index.lookup(&secret("db"))),
            ["b"],
            "a dropped reference"
        );
        index.apply(&watcher::Event::Delete(nova("b", "db")));
        assert!(index.lookup(&secret("db")).is_empty());

        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(nova("c", "db")));
        index.apply(&watcher::Event::InitDone);
        assert_eq!(names(index.lookup(&secret("db"))), ["c"]);
        assert!(
            index.lookup(&secret("keystone")).is_empty(),
            "a CR gone while the watch was down is dropped by the relist"
        );
    }
}
