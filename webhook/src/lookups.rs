//! The lookups that need the API server: PriorityClass existence (cached briefly) and the Nova
//! a NovaCompute joins (uncached). An unreachable API server never stops the webhook from
//! answering: the PriorityClass check fails closed on its field, the Nova read fails the
//! NovaCompute admission as an internal error.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::Api;
use nova_api::v1alpha1::Nova;

use crate::review::Resolver;
use crate::validation::novacompute::NovaRelease;
use crate::validation::{PriorityClassLookup, ResolvedLookups};

/// How long a PriorityClass answer is reused.
pub const PRIORITY_CLASS_TTL: Duration = Duration::from_secs(10);
/// The longest a lookup may take before it counts as unreachable (the API server's own
/// webhook timeout defaults to 10 s).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// Lookups through a kube client.
pub struct KubeResolver {
    client: Option<kube::Client>,
    why_no_client: String,
    cache: Mutex<HashMap<String, (Instant, bool)>>,
}

impl KubeResolver {
    /// A resolver over `client`; without one every PriorityClass check fails closed with
    /// `why_no_client` and every Nova read fails with it.
    pub fn new(client: Option<kube::Client>, why_no_client: impl Into<String>) -> Self {
        Self {
            client,
            why_no_client: why_no_client.into(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, name: &str) -> Option<bool> {
        let cache = self.cache.lock().ok()?;
        cache
            .get(name)
            .filter(|(at, _)| at.elapsed() < PRIORITY_CLASS_TTL)
            .map(|(_, exists)| *exists)
    }

    fn remember(&self, name: &str, exists: bool) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.retain(|_, (at, _)| at.elapsed() < PRIORITY_CLASS_TTL);
            cache.insert(name.to_owned(), (Instant::now(), exists));
        }
    }

    async fn priority_class(&self, name: &str) -> PriorityClassLookup {
        if let Some(exists) = self.cached(name) {
            return if exists {
                PriorityClassLookup::Exists
            } else {
                PriorityClassLookup::NotFound
            };
        }
        let Some(client) = &self.client else {
            return PriorityClassLookup::Unavailable(self.why_no_client.clone());
        };
        let api: Api<PriorityClass> = Api::all(client.clone());
        match tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(name)).await {
            Err(_) => PriorityClassLookup::Unavailable(format!(
                "the Kubernetes API did not answer within {}s",
                LOOKUP_TIMEOUT.as_secs()
            )),
            Ok(Err(e)) => {
                PriorityClassLookup::Unavailable(format!("the Kubernetes API is unavailable: {e}"))
            }
            Ok(Ok(found)) => {
                self.remember(name, found.is_some());
                if found.is_some() {
                    PriorityClassLookup::Exists
                } else {
                    PriorityClassLookup::NotFound
                }
            }
        }
    }
}

impl Resolver for KubeResolver {
    async fn priority_classes(&self, names: &[String]) -> ResolvedLookups {
        let answers = futures::future::join_all(names.iter().map(|n| self.priority_class(n))).await;
        ResolvedLookups {
            priority_classes: names.iter().cloned().zip(answers).collect(),
            enabled: true,
        }
    }

    async fn nova(&self, namespace: &str, name: &str) -> Result<NovaRelease, String> {
        let Some(client) = &self.client else {
            return Err(self.why_no_client.clone());
        };
        let api: Api<Nova> = Api::namespaced(client.clone(), namespace);
        match tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(name)).await {
            Err(_) => Err(format!(
                "the Kubernetes API did not answer within {}s",
                LOOKUP_TIMEOUT.as_secs()
            )),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(None)) => Ok(NovaRelease::NotFound),
            Ok(Ok(Some(nova))) => Ok(NovaRelease::Found(nova.spec.open_stack_release)),
        }
    }
}
