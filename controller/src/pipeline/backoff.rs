//! The per-object failure back-off (`common-types.md` §3.5): 5 ms doubling with every
//! consecutive failure of the same object, capped at 30 s, reset by a success and forgotten
//! when the object is gone, so one broken CR neither hot-loops nor delays the others, and the
//! table does not grow with every CR ever seen.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// The first retry after a failure.
pub const BASE: Duration = Duration::from_millis(5);
/// The longest wait between retries.
pub const CAP: Duration = Duration::from_secs(30);

/// Consecutive failures per object.
pub struct Backoff<K: Resource<DynamicType = ()>> {
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
}

impl<K: Resource<DynamicType = ()>> Default for Backoff<K> {
    fn default() -> Self {
        Self {
            failures: Mutex::default(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Backoff<K> {
    /// Records a failure of `object` and returns how long to wait before the retry.
    pub fn failed(&self, object: &ObjectRef<K>) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(object.clone()).or_default();
        *n = n.saturating_add(1);
        BASE.saturating_mul(2u32.saturating_pow(*n - 1)).min(CAP)
    }

    /// Forgets the failures of `object`: after a pass that succeeded, or once it is gone.
    pub fn forget(&self, object: &ObjectRef<K>) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(object);
    }

    /// How many objects are backing off.
    pub fn len(&self) -> usize {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no object is backing off.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nova_api::v1alpha1::Nova;

    #[test]
    fn doubles_per_failure_caps_resets_and_forgets() {
        let backoff = Backoff::<Nova>::default();
        let a = ObjectRef::new("a").within("ns");
        let b = ObjectRef::new("b").within("ns");
        let waits: Vec<_> = (0..4).map(|_| backoff.failed(&a)).collect();
        assert_eq!(waits, [5, 10, 20, 40].map(Duration::from_millis));
        assert_eq!(backoff.failed(&b), BASE, "objects back off independently");
        for _ in 0..40 {
            backoff.failed(&a);
        }
        assert_eq!(backoff.failed(&a), CAP);
        backoff.forget(&a);
        assert_eq!(backoff.failed(&a), BASE);
        backoff.forget(&a);
        backoff.forget(&b);
        assert!(backoff.is_empty(), "a gone object leaves nothing behind");
    }
}
