//! The per-object failure back-off (`common-types.md` §3.5): 5 ms doubling with every
//! consecutive failure of the same object, capped at 30 s, reset by a success, so one broken
//! CR neither hot-loops nor delays the others.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The first retry after a failure.
pub const BASE: Duration = Duration::from_millis(5);
/// The longest wait between retries.
pub const CAP: Duration = Duration::from_secs(30);

/// Consecutive failures per object key.
#[derive(Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Records a failure of `key` and returns how long to wait before the retry.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let n = failures.entry(key.to_owned()).or_default();
        *n = n.saturating_add(1);
        BASE.saturating_mul(2u32.saturating_pow(*n - 1)).min(CAP)
    }

    /// Forgets the failures of `key` after a pass that succeeded.
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_failure_caps_and_resets() {
        let backoff = Backoff::default();
        let waits: Vec<_> = (0..4).map(|_| backoff.failed("ns/a")).collect();
        assert_eq!(waits, [5, 10, 20, 40].map(Duration::from_millis));
        assert_eq!(
            backoff.failed("ns/b"),
            BASE,
            "objects back off independently"
        );
        for _ in 0..40 {
            backoff.failed("ns/a");
        }
        assert_eq!(backoff.failed("ns/a"), CAP);
        backoff.succeeded("ns/a");
        assert_eq!(backoff.failed("ns/a"), BASE);
    }
}
