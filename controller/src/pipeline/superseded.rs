//! The cached copies a pass must not run on. A status write replaces the copy the pass ran on,
//! but the CR cache holds that copy until the write's own watch event arrives. A pass woken in
//! between (by a child's event) would plan from the old status: announce again a transition the
//! write already recorded (a pool's NodeConflict Warning twice) and have its own status write
//! refused as stale. The skeleton remembers the replaced resourceVersion and waits for the
//! cache to move past it instead. A pass that stamped its counted Jobs on the CR before its
//! status write replaced two copies, the cached one and the stamped one, and both wait.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// Per object, the resourceVersions its last status write replaced.
pub struct Superseded<K: Resource<DynamicType = ()>> {
    versions: Mutex<HashMap<ObjectRef<K>, Vec<String>>>,
}

impl<K: Resource<DynamicType = ()>> Default for Superseded<K> {
    fn default() -> Self {
        Self {
            versions: Mutex::default(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Superseded<K> {
    /// Records that a status write moved `object` from the copies `replaced` to `written`. A
    /// write the API server found to change nothing keeps the version, and supersedes nothing.
    pub fn wrote(&self, object: &ObjectRef<K>, replaced: &[&str], written: &str) {
        let mut versions = self.versions.lock().unwrap_or_else(PoisonError::into_inner);
        let replaced: Vec<String> = replaced
            .iter()
            .filter(|v| **v != written)
            .map(|v| (*v).to_owned())
            .collect();
        if replaced.is_empty() {
            versions.remove(object);
        } else {
            versions.insert(object.clone(), replaced);
        }
    }

    /// Whether `version` is a copy of `object` a status write of this process replaced.
    /// Any other version means the cache moved on, and the record is dropped.
    pub fn is_superseded(&self, object: &ObjectRef<K>, version: Option<&str>) -> bool {
        let mut versions = self.versions.lock().unwrap_or_else(PoisonError::into_inner);
        match versions.get(object) {
            Some(replaced) if version.is_some_and(|v| replaced.iter().any(|r| r == v)) => true,
            Some(_) => {
                versions.remove(object);
                false
            }
            None => false,
        }
    }

    /// Forgets `object`, once it is gone.
    pub fn forget(&self, object: &ObjectRef<K>) {
        self.versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(object);
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.versions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nova_api::v1alpha1::Nova;

    fn nova() -> ObjectRef<Nova> {
        ObjectRef::new("nova").within("ns")
    }

    #[test]
    fn the_replaced_copy_waits_until_the_cache_moves_past_it() {
        let superseded = Superseded::<Nova>::default();
        superseded.wrote(&nova(), &["10"], "11");
        assert!(superseded.is_superseded(&nova(), Some("10")));
        assert!(
            superseded.is_superseded(&nova(), Some("10")),
            "still the old copy"
        );
        assert!(!superseded.is_superseded(&nova(), Some("11")));
        assert!(superseded.is_empty(), "the fresh copy drops the record");
        assert!(!superseded.is_superseded(&nova(), Some("10")));
    }

    #[test]
    fn the_cached_and_the_stamped_copy_both_wait() {
        let superseded = Superseded::<Nova>::default();
        superseded.wrote(&nova(), &["10", "11"], "12");
        assert!(superseded.is_superseded(&nova(), Some("10")));
        assert!(
            superseded.is_superseded(&nova(), Some("11")),
            "the stamp's own watch event"
        );
        assert!(!superseded.is_superseded(&nova(), Some("12")));
        assert!(superseded.is_empty());
    }

    #[test]
    fn a_write_that_changed_nothing_supersedes_nothing() {
        let superseded = Superseded::<Nova>::default();
        superseded.wrote(&nova(), &["10"], "11");
        superseded.wrote(&nova(), &["11"], "11");
        assert!(!superseded.is_superseded(&nova(), Some("11")));
        superseded.wrote(&nova(), &[], "12");
        assert!(superseded.is_empty());
    }

    #[test]
    fn a_gone_object_leaves_nothing_behind() {
        let superseded = Superseded::<Nova>::default();
        superseded.wrote(&nova(), &["10"], "11");
        superseded.forget(&nova());
        assert!(superseded.is_empty());
    }
}
