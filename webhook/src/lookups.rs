//! The lookups that need the API server, as one snapshot resolved before validation runs (so
//! validation stays synchronous and pure): PriorityClass existence (cached briefly), the
//! Nova a NovaCompute joins (uncached) and every Nova, for the schema claim check (uncached).
//! An unreachable API server never stops the webhook from answering: the PriorityClass and
//! claim checks fail closed on their fields, the Nova read fails the NovaCompute admission as
//! an internal error.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::Api;
use nova_api::v1alpha1::Nova;

/// How long a PriorityClass answer is reused.
pub const PRIORITY_CLASS_TTL: Duration = Duration::from_secs(10);
/// The longest a lookup may take before it counts as unreachable (the API server's own
/// webhook timeout defaults to 10 s).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);

/// The answer of a PriorityClass lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriorityClassLookup {
    /// The class exists.
    Exists,
    /// The API server says it does not.
    NotFound,
    /// The API server could not be asked; the check fails closed.
    Unavailable(String),
}

/// The referenced Nova, as far as the catalog check needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NovaRelease {
    /// The Nova exists; its spec.openStackRelease.
    Found(String),
    /// The Nova does not exist (yet).
    NotFound,
}

/// The Nova a NovaCompute joins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NovaRef {
    /// Its namespace (the pool's).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// The Novas of the cluster, as the schema claim check needs them.
#[derive(Clone, Debug, PartialEq)]
pub enum NovaList {
    /// Every Nova the API server listed.
    Listed(Vec<Nova>),
    /// The API server could not be asked; the claim check fails closed.
    Unavailable(String),
}

/// What one admission needs asked of the API server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// The PriorityClass names the rules look up, sorted and unique.
    pub priority_classes: Vec<String>,
    /// The Nova to read, when the catalog check runs.
    pub nova: Option<NovaRef>,
    /// Whether to list every Nova, when the schema claim check runs.
    pub novas: bool,
}

impl Needs {
    /// Whether nothing has to be asked.
    pub fn is_empty(&self) -> bool {
        self.priority_classes.is_empty() && self.nova.is_none() && !self.novas
    }
}

/// The answers of one admission's lookups.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lookups {
    /// The PriorityClass answers; `None` without a cluster, and then the checks are skipped. A
    /// name the map holds no answer for counts as absent.
    pub priority_classes: Option<BTreeMap<String, PriorityClassLookup>>,
    /// The Nova a NovaCompute joins, when it was read.
    pub nova: Option<NovaRelease>,
    /// Every Nova, when they were listed; `None` skips the claim check.
    pub novas: Option<NovaList>,
}

impl Lookups {
    /// Whether the PriorityClass `name` exists; `None` when the check is skipped.
    pub fn priority_class(&self, name: &str) -> Option<PriorityClassLookup> {
        self.priority_classes.as_ref().map(|answers| {
            answers
                .get(name)
                .cloned()
                .unwrap_or(PriorityClassLookup::NotFound)
        })
    }
}

/// Resolves the lookups of an admission. `Err` is why the Nova could not be read; it fails the
/// admission as an internal error.
pub trait Resolver: Send + Sync {
    /// Asks what `needs` names.
    fn resolve<'a>(&'a self, needs: &'a Needs) -> BoxFuture<'a, Result<Lookups, String>>;
}

/// A resolver without a cluster: every PriorityClass and claim check skipped, every Nova
/// absent.
pub struct Offline;

impl Resolver for Offline {
    fn resolve<'a>(&'a self, needs: &'a Needs) -> BoxFuture<'a, Result<Lookups, String>> {
        Box::pin(std::future::ready(Ok(Lookups {
            priority_classes: None,
            nova: needs.nova.as_ref().map(|_| NovaRelease::NotFound),
            novas: None,
        })))
    }
}

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
        let answer = |exists| {
            if exists {
                PriorityClassLookup::Exists
            } else {
                PriorityClassLookup::NotFound
            }
        };
        if let Some(exists) = self.cached(name) {
            return answer(exists);
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
                answer(found.is_some())
            }
        }
    }

    async fn nova(&self, nova: &NovaRef) -> Result<NovaRelease, String> {
        let Some(client) = &self.client else {
            return Err(self.why_no_client.clone());
        };
        let api: Api<Nova> = Api::namespaced(client.clone(), &nova.namespace);
        match tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(&nova.name)).await {
            Err(_) => Err(format!(
                "the Kubernetes API did not answer within {}s",
                LOOKUP_TIMEOUT.as_secs()
            )),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(None)) => Ok(NovaRelease::NotFound),
            Ok(Ok(Some(found))) => Ok(NovaRelease::Found(found.spec.open_stack_release)),
        }
    }
}

impl KubeResolver {
    async fn novas(&self) -> NovaList {
        let Some(client) = &self.client else {
            return NovaList::Unavailable(self.why_no_client.clone());
        };
        let api: Api<Nova> = Api::all(client.clone());
        match tokio::time::timeout(LOOKUP_TIMEOUT, api.list(&Default::default())).await {
            Err(_) => NovaList::Unavailable(format!(
                "the Kubernetes API did not answer within {}s",
                LOOKUP_TIMEOUT.as_secs()
            )),
            Ok(Err(e)) => NovaList::Unavailable(format!("the Kubernetes API is unavailable: {e}")),
            Ok(Ok(list)) => NovaList::Listed(list.items),
        }
    }
}

impl Resolver for KubeResolver {
    fn resolve<'a>(&'a self, needs: &'a Needs) -> BoxFuture<'a, Result<Lookups, String>> {
        Box::pin(async move {
            let answers = futures::future::join_all(
                needs
                    .priority_classes
                    .iter()
                    .map(|n| self.priority_class(n)),
            )
            .await;
            let nova = match &needs.nova {
                None => None,
                Some(r) => Some(self.nova(r).await?),
            };
            let novas = match needs.novas {
                false => None,
                true => Some(self.novas().await),
            };
            Ok(Lookups {
                priority_classes: Some(
                    needs
                        .priority_classes
                        .iter()
                        .cloned()
                        .zip(answers)
                        .collect(),
                ),
                nova,
                novas,
            })
        })
    }
}
