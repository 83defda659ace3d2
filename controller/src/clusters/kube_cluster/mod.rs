//! One Kubernetes API server as a [`Cluster`] (the management cluster, or a registered target
//! cluster engaged by the [`super::Fleet`]): one watch per registered kind feeding a reflector
//! store, server-side apply, and deletes. Its rooms: `cache` (the records of one kind),
//! `registry` (the kinds to watch), `watch` (discovery and the reflectors), `writes` (apply,
//! delete, sweep), `job_report` (a Job's termination message) and `as_cluster` (the trait).
//!
//! What is cached, and why:
//! - [`Caching::Metadata`] kinds (the owned kinds that only wake their owner, the MariaDB
//!   objects the finalizer checks): names, labels, owners and timestamps, with
//!   `managedFields` and the `last-applied-configuration` annotation dropped.
//! - [`Caching::OnDemand`] kinds (Secrets, ConfigMaps, Deployments): the same metadata of
//!   every object in scope, plus the content of exactly the objects a step read, fetched once
//!   and reused while the watched resourceVersion stays the same (kept as JSON text, parsed
//!   per read), dropped when the object goes. So the process holds the content of the Secrets a CR references, never of every
//!   Secret of the cluster.
//! - [`Caching::Full`] kinds (the store kinds, ExternalSecrets, RabbitmqClusters): whole
//!   objects, for the few small objects of other operators whose status a step reads.
//!
//! Content and whole objects keep, of `metadata.managedFields`, only this operator's own
//! `Apply` entry (what [`carries`] and a step checking its own field ownership read). An
//! applied child leaves no content behind, only a [`Carried`] record: the resourceVersion at
//! which the object was seen to carry a body, and that body's fingerprint. While the watched
//! resourceVersion stays the same, an apply of the same body is skipped on the record alone,
//! so a steady pass neither reads nor holds the children it only writes.
//!
//! Under `--namespace` every watch is namespaced and cluster-scoped kinds are not watched.

mod as_cluster;
mod cache;
mod job_report;
mod registry;
mod watch;
mod writes;

pub use job_report::report_of;
pub use registry::Registry;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;

use crate::bounded::Answering;
use crate::clusters::{Caching, ClusterError, Meta, SecretValues};
use crate::openstack::{Direct, Proxied, Transport};
use crate::sensitive::Sensitive;
use cache::{Content, Fields, KindCache, key, strip};
use watch::{served, start_watch};

/// A cluster reached through one client with its own watch caches: the management cluster, or
/// (engaged by the [`super::Fleet`]) a registered target cluster.
pub struct KubeCluster {
    client: Client,
    /// The target cluster this handle reaches; None for the management cluster. A target
    /// claims children by ownership labels and reaches Services through its API server.
    target: Option<Target>,
    scope: Option<String>,
    probe_address: Option<std::net::SocketAddr>,
    transport: Arc<dyn Transport>,
    kinds: HashMap<(String, String), Arc<KindCache>>,
    synced: tokio::sync::watch::Receiver<bool>,
    /// The termination message read for each Job UID, so a Job's pods are listed once.
    reports: Mutex<HashMap<String, Option<String>>>,
    /// The watch tasks, stopped when the handle goes (a target cluster dropped or re-engaged).
    tasks: Vec<tokio::task::AbortHandle>,
}

/// What a handle knows of the registered target cluster it reaches.
pub(super) struct Target {
    /// A client of the same registration without the API client's retries of 429, 503 and
    /// 504: what the service proxy carries is a Service's answer (a Nova API down, a Keystone
    /// without endpoint), reported as it comes rather than retried for minutes.
    pub proxy: Client,
    /// Whether the cluster answers the API client's requests.
    pub answering: Arc<Answering>,
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// How often a silent cluster is asked whether it answers again.
const SILENT_PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// While the cluster is silent, asks it for its version every [`SILENT_PROBE_EVERY`]; the
/// client's timeout layer clears the silence on the first answer.
async fn probe_while_silent(client: Client, answering: Arc<Answering>) {
    loop {
        answering.fell_silent().await;
        while answering.silent_since().is_some() {
            tokio::time::sleep(SILENT_PROBE_EVERY).await;
            if let Err(e) = client.apiserver_version().await {
                tracing::debug!(error = %e, "a silent target cluster still does not answer");
            }
        }
    }
}

impl KubeCluster {
    /// Probes the optional kinds, starts one watch per served kind and returns at once; see
    /// [`KubeCluster::synced`] for when the caches can answer.
    pub async fn start(
        client: Client,
        scope: Option<String>,
        registry: Registry,
    ) -> Arc<KubeCluster> {
        Self::start_on(None, client, scope, registry).await
    }

    /// Like [`KubeCluster::start`], for a registered target cluster.
    pub(super) async fn start_target(
        target: Target,
        client: Client,
        scope: Option<String>,
        registry: Registry,
    ) -> Arc<KubeCluster> {
        Self::start_on(Some(target), client, scope, registry).await
    }

    async fn start_on(
        target: Option<Target>,
        client: Client,
        scope: Option<String>,
        registry: Registry,
    ) -> Arc<KubeCluster> {
        let mut kinds = HashMap::new();
        let mut tasks = Vec::new();
        for spec in registry.kinds {
            let served = served(&client, &scope, &spec).await;
            let (cache, task) = start_watch(&client, &scope, spec, served);
            tasks.extend(task);
            kinds.insert(key(&cache.spec.resource), cache);
        }
        // One task waits on the stores: a reflector store wakes only the last of several
        // concurrent `wait_until_ready` callers, so every other caller waits on this flag.
        let (tx, synced) = tokio::sync::watch::channel(false);
        let stores: Vec<Arc<KindCache>> = kinds.values().cloned().collect();
        let waiter = tokio::spawn(async move {
            for cache in stores {
                if let Some(store) = &cache.full {
                    let _ = store.wait_until_ready().await;
                }
                if let Some(store) = &cache.meta {
                    let _ = store.wait_until_ready().await;
                }
            }
            let _ = tx.send(true);
        });
        tasks.push(waiter.abort_handle());
        if let Some(target) = &target {
            let probe = tokio::spawn(probe_while_silent(client.clone(), target.answering.clone()));
            tasks.push(probe.abort_handle());
        }
        // A target's Services are reached through its API server, never dialled.
        let transport: Arc<dyn Transport> = match &target {
            None => Arc::new(Direct::routed(registry.service_routes, registry.trust)),
            Some(target) => Arc::new(Proxied::new(target.proxy.clone())),
        };
        Arc::new(KubeCluster {
            client,
            target,
            scope,
            probe_address: registry.probe_address,
            transport,
            kinds,
            synced,
            reports: Mutex::default(),
            tasks,
        })
    }

    /// Resolves once every watch cache holds its first complete list; any number of callers
    /// may wait at once.
    pub async fn synced(&self) {
        let mut synced = self.synced.clone();
        let _ = synced.wait_for(|done| *done).await;
    }

    /// Since when this target cluster has not answered, while it does not (never for the
    /// management cluster).
    pub fn silent_since(&self) -> Option<std::time::SystemTime> {
        self.target.as_ref()?.answering.silent_since()
    }

    /// Whether a kind is registered and served.
    pub fn serves(&self, kind: &ApiResource) -> bool {
        self.kinds.get(&key(kind)).is_some_and(|c| c.served)
    }

    /// Every change of a kind from now on, as the changed object's metadata (the controllers'
    /// triggers). A kind that is not served yields nothing.
    pub fn subscribe(&self, kind: &ApiResource) -> mpsc::UnboundedReceiver<Meta> {
        let (tx, rx) = mpsc::unbounded();
        if let Some(cache) = self.kinds.get(&key(kind)) {
            cache
                .subscribers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(tx);
        }
        rx
    }

    fn cache(&self, kind: &ApiResource) -> Result<&Arc<KindCache>, ClusterError> {
        self.kinds
            .get(&key(kind))
            .ok_or_else(|| ClusterError::NotRegistered {
                kind: kind.kind.clone(),
                detail: "",
            })
    }

    fn in_scope(&self, namespace: Option<&str>) -> bool {
        match (&self.scope, namespace) {
            (Some(scope), Some(ns)) => scope == ns,
            _ => true,
        }
    }

    fn api(&self, kind: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, kind),
            None => Api::all_with(self.client.clone(), kind),
        }
    }

    /// A live read, for objects outside the watched scope and OnDemand content not cached yet.
    async fn read(
        &self,
        kind: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<DynamicObject>, ClusterError> {
        let mut object = self.api(kind, namespace).get_opt(name).await.map_err(|e| {
            ClusterError::kube(
                format!("reading {} {}", kind.kind, describe(namespace, name)),
                e,
            )
        })?;
        if let Some(object) = &mut object {
            strip(&mut object.metadata, Fields::Own);
        }
        Ok(object)
    }

    /// An object a step reads: OnDemand content read live is kept for the next read.
    async fn get_object(
        &self,
        kind: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, ClusterError> {
        self.lookup(kind, namespace, name, true).await
    }

    /// An object from the caches, else read live; OnDemand content read live is kept when
    /// `keep` (a step's read), not for an apply's comparison (a child only written keeps its
    /// [`Carried`] record instead).
    async fn lookup(
        &self,
        kind: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        keep: bool,
    ) -> Result<Option<Arc<DynamicObject>>, ClusterError> {
        let cache = self.cache(kind)?;
        if !cache.served {
            return Ok(None);
        }
        let namespace = namespace.filter(|_| !cache.spec.cluster_scoped);
        if !self.in_scope(namespace) {
            return Ok(self.read(kind, namespace, name).await?.map(Arc::new));
        }
        match cache.spec.caching {
            Caching::Full => Ok(cache
                .full
                .as_ref()
                .and_then(|s| s.get(&cache.reference(namespace, name)))),
            Caching::Metadata => Err(ClusterError::NotRegistered {
                kind: kind.kind.clone(),
                detail: " with content (it is cached metadata-only)",
            }),
            Caching::OnDemand => {
                let slot = (namespace.unwrap_or_default().to_owned(), name.to_owned());
                let Some(watched) = cache.cached_meta(namespace, name) else {
                    cache.evict(&slot);
                    return Ok(None);
                };
                let kept = cache.content().get(&slot).and_then(|content| {
                    content.object_at(watched.metadata.resource_version.as_deref())
                });
                if let Some(object) = kept {
                    return Ok(Some(Arc::new(object)));
                }
                let object = self.read(kind, namespace, name).await?.map(Arc::new);
                match &object {
                    Some(object) if keep => {
                        if let Some(content) = Content::of(object) {
                            cache.content().insert(slot, content);
                        }
                    }
                    Some(_) => {}
                    None => cache.evict(&slot),
                };
                Ok(object)
            }
        }
    }
}

pub(super) fn describe(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// The values of `keys` a Secret holds as UTF-8 (data, or stringData not yet converted).
pub fn values_of(secret: &Secret, keys: &[&str]) -> SecretValues {
    let mut values = BTreeMap::new();
    for key in keys {
        let value = secret
            .data
            .as_ref()
            .and_then(|d| d.get(*key))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .or_else(|| secret.string_data.as_ref()?.get(*key).cloned());
        if let Some(value) = value {
            values.insert((*key).to_owned(), Sensitive::new(value));
        }
    }
    SecretValues(values)
}
