//! The resolver (`common-types.md` §3.17 "Resolution"): which handle a CR's children live on,
//! and for a deleting CR whether to wait for its target cluster or abandon its remote
//! children.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Cluster, Fleet, Handle};

/// Whether a deleting CR abandons its remote children: only when both this process has failed
/// to resolve the target for the whole window and the deletion is that old (a restart or a
/// fresh deletion restarts the wait).
fn abandons(failing: Duration, since_deletion: Duration, window: Duration) -> bool {
    failing >= window && since_deletion >= window
}

/// What an unregistered (or not yet engaged) target cluster resolves to.
pub const CLUSTER_NOT_FOUND: &str = "cluster not found";

/// How long a deleting CR waits for its target cluster before its remote children are
/// abandoned (`common-types.md` §3.17 `AbandonAfter`).
pub const ABANDON_AFTER: Duration = Duration::from_secs(300);

/// How a deleting CR reaches its children (`common-types.md` §3.17 "Deletion and the
/// abandon window").
pub enum Teardown {
    /// Clean up through this handle.
    Through(Handle),
    /// The target does not resolve yet: keep the finalizers and look again (the message is
    /// the condition's).
    Wait(String),
    /// The target has not resolved for the whole window: release the finalizers without
    /// deleting anything (the message is the Warning event's).
    Abandon(String),
}

/// Resolves the cluster a CR's children live on (`common-types.md` §3.17 "Resolution").
pub struct Clusters {
    local: Arc<dyn Cluster>,
    targets: Option<Arc<Fleet>>,
    /// When this process first failed to resolve each target name (since its last success).
    failures: Mutex<HashMap<String, Instant>>,
}

impl Clusters {
    /// A nil ref resolves to `local`, a named one to the engaged cluster of `targets` (None
    /// when target clusters are disabled: no name resolves).
    pub fn new(local: Arc<dyn Cluster>, targets: Option<Arc<Fleet>>) -> Self {
        Self {
            local,
            targets,
            failures: Mutex::default(),
        }
    }

    /// The management cluster, where every CR, its status and its finalizers live.
    pub fn local(&self) -> Handle {
        Handle::new(self.local.clone())
    }

    /// The handle of `target` (None = the management cluster) for a CR in `namespace`, or
    /// the resolver's error text, which goes unwrapped into the TargetClusterUnavailable
    /// condition.
    pub fn resolve(&self, target: Option<&str>, namespace: &str) -> Result<Handle, String> {
        let Some(name) = target else {
            return Ok(self.local());
        };
        let resolved = self.lookup(name, namespace);
        self.remember(name, resolved.is_ok());
        resolved
    }

    fn lookup(&self, name: &str, namespace: &str) -> Result<Handle, String> {
        match &self.targets {
            Some(fleet) => fleet.resolve(name, namespace).map(Handle::new),
            None => Err(CLUSTER_NOT_FOUND.to_owned()),
        }
    }

    /// The deletion variant of [`Clusters::resolve`] for a CR deleted `since_deletion` ago. A
    /// target must also answer now (one request, deletion passes only): a stopped API server
    /// counts as not resolving. Abandon only when both this process has failed to resolve
    /// the target for the whole window and the deletion is that old.
    pub async fn resolve_for_deletion(
        &self,
        target: Option<&str>,
        namespace: &str,
        since_deletion: Duration,
    ) -> Teardown {
        let Some(name) = target else {
            return Teardown::Through(self.local());
        };
        let error = match self.lookup(name, namespace) {
            Ok(cluster) if cluster.reachable().await => {
                self.remember(name, true);
                return Teardown::Through(cluster);
            }
            Ok(_) => format!("the API server of cluster {name} does not answer"),
            Err(error) => error,
        };
        self.remember(name, false);
        let window = self.abandon_after();
        let failing = self
            .failures()
            .get(name)
            .map(Instant::elapsed)
            .unwrap_or_default();
        if abandons(failing, since_deletion, window) {
            return Teardown::Abandon(format!(
                "Target cluster {name} has not resolved for {}s ({error}): the objects labelled as owned by this object stay behind on it; releasing the finalizers",
                window.as_secs()
            ));
        }
        Teardown::Wait(format!(
            "Target cluster {name} does not resolve ({error}); its remote children are abandoned once it has not resolved for {}s",
            window.as_secs()
        ))
    }

    /// Keeps the first failure of this process to resolve `name`, forgotten once it resolves.
    fn remember(&self, name: &str, resolved: bool) {
        let mut failures = self.failures();
        if resolved {
            failures.remove(name);
        } else {
            failures.entry(name.to_owned()).or_insert_with(Instant::now);
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The abandon window: the fleet's, or [`ABANDON_AFTER`] when target clusters are off.
    fn abandon_after(&self) -> Duration {
        self.targets
            .as_ref()
            .map_or(ABANDON_AFTER, |fleet| fleet.abandon_after())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_abandon_window_needs_both_clocks() {
        let (window, s) = (ABANDON_AFTER, Duration::from_secs);
        assert!(abandons(s(300), s(300), window));
        assert!(abandons(s(900), s(301), window));
        assert!(
            !abandons(s(299), s(900), window),
            "this process failed too recently"
        );
        assert!(!abandons(s(900), s(299), window), "deleted too recently");
        assert!(!abandons(Duration::ZERO, Duration::ZERO, window));
    }
}
