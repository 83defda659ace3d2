//! The management cluster as a [`Cluster`]: one watch per registered kind feeding a reflector
//! store, server-side apply, and deletes.
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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use super::carries::carries;
use super::{
    Applied, Caching, Cluster, ClusterError, FIELD_MANAGER, JobReport, KindSpec, Meta, SecretValues,
};
use crate::objects::{Child, Invalid, Labels, Owner, controller_of, selector_string, selects};
use crate::openstack::{Direct, Proxied, Transport};
use crate::sensitive::Sensitive;

/// The annotation `kubectl apply` keeps the whole last-applied object in (for a Secret, its
/// data): never cached.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The kinds the pipelines read, collected from every controller before the caches start.
#[derive(Clone, Default)]
pub struct Registry {
    kinds: Vec<KindSpec>,
    probe_address: Option<std::net::SocketAddr>,
    service_routes: BTreeMap<String, std::net::SocketAddr>,
}

impl Registry {
    /// Adds kinds; a kind registered twice keeps the richest caching asked for.
    pub fn register(mut self, kinds: impl IntoIterator<Item = KindSpec>) -> Self {
        for kind in kinds {
            match self
                .kinds
                .iter_mut()
                .find(|k| key(&k.resource) == key(&kind.resource))
            {
                Some(existing) => existing.caching = existing.caching.max(kind.caching),
                None => self.kinds.push(kind),
            }
        }
        self
    }

    /// Dials `address` for every Service probe instead of resolving the Service's name: for
    /// a controller running outside the cluster, which cannot resolve `*.svc.cluster.local`.
    pub fn probe_services_at(mut self, address: Option<std::net::SocketAddr>) -> Self {
        self.probe_address = address;
        self
    }

    /// Dials `routes[host:port]` for the OpenStack calls to those Service hosts instead of
    /// resolving them: for a controller outside the cluster.
    pub fn route_services(mut self, routes: BTreeMap<String, std::net::SocketAddr>) -> Self {
        self.service_routes = routes;
        self
    }
}

fn key(resource: &ApiResource) -> (String, String) {
    (resource.group.clone(), resource.kind.clone())
}

/// The caches of one kind.
struct KindCache {
    spec: KindSpec,
    served: bool,
    full: Option<Store<DynamicObject>>,
    meta: Option<Store<PartialObjectMeta<DynamicObject>>>,
    /// OnDemand content of the objects a step read, by (namespace, name).
    content: Mutex<HashMap<(String, String), Content>>,
    /// What each applied child was last seen to carry, by (namespace, name).
    carried: Mutex<HashMap<(String, String), Carried>>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<Meta>>>,
}

impl KindCache {
    fn reference<K: kube::Resource<DynamicType = ApiResource>>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> ObjectRef<K> {
        let reference = ObjectRef::new_with(name, self.spec.resource.clone());
        match namespace {
            Some(ns) if !self.spec.cluster_scoped => reference.within(ns),
            _ => reference,
        }
    }

    fn cached_meta(&self, namespace: Option<&str>, name: &str) -> Option<Meta> {
        if let Some(full) = &self.full {
            return full
                .get(&self.reference(namespace, name))
                .map(|o| meta_of(&o));
        }
        self.meta.as_ref()?.get(&self.reference(namespace, name))
    }

    fn content(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Content>> {
        self.content.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn carried(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Carried>> {
        self.carried.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the content and the record of an object that went.
    fn evict(&self, slot: &(String, String)) {
        self.content().remove(slot);
        self.carried().remove(slot);
    }

    fn notify(&self, meta: &Meta) {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|tx| tx.unbounded_send(meta.clone()).is_ok());
    }
}

fn meta_of(object: &DynamicObject) -> Meta {
    Arc::new(PartialObjectMeta {
        types: object.types.clone(),
        metadata: object.metadata.clone(),
        _phantom: Default::default(),
    })
}

/// Which `metadata.managedFields` entries a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fields {
    /// None: metadata caches, which no apply compares against.
    None,
    /// This operator's own `Apply` entry on the main resource, the one [`carries`] reads;
    /// the other managers' entries (status writers, kubectl, the kube controllers) go.
    Own,
}

/// Drops what no cache needs to hold: the last-applied annotation always, and the
/// managedFields entries `fields` does not keep.
fn strip(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, fields: Fields) {
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED);
    }
    match fields {
        Fields::None => meta.managed_fields = None,
        Fields::Own => {
            if let Some(entries) = &mut meta.managed_fields {
                entries.retain(|entry| {
                    entry.manager.as_deref() == Some(FIELD_MANAGER)
                        && entry.operation.as_deref() == Some("Apply")
                        && entry.subresource.as_deref().unwrap_or_default().is_empty()
                });
            }
        }
    }
}

/// The content of one object a step read, kept as its JSON text and parsed on each read: a
/// serde_json tree costs several times its text (every non-empty JSON object is a B-tree node
/// of eleven slots), and content is held far longer than it is read.
struct Content {
    resource_version: Option<String>,
    json: Box<str>,
}

impl Content {
    /// The content of `object`; None if it does not serialize (it is then read live again).
    fn of(object: &DynamicObject) -> Option<Content> {
        Some(Content {
            resource_version: object.metadata.resource_version.clone(),
            json: serde_json::to_string(object).ok()?.into_boxed_str(),
        })
    }

    /// The object, when the content is as new as the watched resourceVersion `watched`.
    fn object_at(&self, watched: Option<&str>) -> Option<DynamicObject> {
        if !fresh(self.resource_version.as_deref(), watched) {
            return None;
        }
        serde_json::from_str(&self.json).ok()
    }
}

/// An applied child as last seen: the object at `resource_version` carried (in the sense of
/// [`carries`]) the apply body whose [`fingerprint`] is `fingerprint`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Carried {
    resource_version: String,
    fingerprint: u64,
}

impl Carried {
    /// Whether this record settles an apply of the body `fingerprint` against the watched
    /// resourceVersion `watched`: the same body, and nothing changed the object since.
    fn settles(&self, fingerprint: u64, watched: Option<&str>) -> bool {
        self.fingerprint == fingerprint && fresh(Some(&self.resource_version), watched)
    }
}

/// A fingerprint of an apply body (its JSON text, whose object keys serde_json keeps sorted).
fn fingerprint(body: &serde_json::Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    body.to_string().hash(&mut hasher);
    hasher.finish()
}

/// Whether cached content at `content` is as new as the watched `watched` resourceVersion:
/// equal, or (an apply response cached before its own watch event arrived) numerically newer.
fn fresh(content: Option<&str>, watched: Option<&str>) -> bool {
    match (content, watched) {
        (Some(c), Some(w)) if c == w => true,
        (Some(c), Some(w)) => {
            matches!((c.parse::<u64>(), w.parse::<u64>()), (Ok(c), Ok(w)) if c > w)
        }
        _ => false,
    }
}

/// A cluster reached through one client with its own watch caches: the management cluster, or
/// (engaged by the [`super::Fleet`]) a registered target cluster.
pub struct LocalCluster {
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
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl LocalCluster {
    /// Probes the optional kinds, starts one watch per served kind and returns at once; see
    /// [`LocalCluster::synced`] for when the caches can answer.
    pub async fn start(
        client: Client,
        scope: Option<String>,
        registry: Registry,
    ) -> Arc<LocalCluster> {
        Self::start_on(None, client, scope, registry).await
    }

    /// Like [`LocalCluster::start`], for a registered target cluster.
    pub(super) async fn start_target(
        target: Target,
        client: Client,
        scope: Option<String>,
        registry: Registry,
    ) -> Arc<LocalCluster> {
        Self::start_on(Some(target), client, scope, registry).await
    }

    async fn start_on(
        target: Option<Target>,
        client: Client,
        scope: Option<String>,
        registry: Registry,
    ) -> Arc<LocalCluster> {
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
        // A target's Services are reached through its API server, never dialled.
        let transport: Arc<dyn Transport> = match &target {
            None => Arc::new(Direct::routed(registry.service_routes)),
            Some(target) => Arc::new(Proxied::new(target.proxy.clone())),
        };
        Arc::new(LocalCluster {
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

    async fn apply_child(&self, owner: &Owner, child: &Child) -> Result<Applied, ClusterError> {
        let cache = self.cache(&child.kind)?;
        if cache.spec.caching == Caching::Metadata {
            return Err(ClusterError::NotRegistered {
                kind: child.kind.kind.clone(),
                detail: " with content, which applying needs to skip unchanged objects",
            });
        }
        let body = match &self.target {
            None => child.stamped(owner)?,
            Some(_) => child.stamped(&owner.remote()?)?,
        };
        let ns = owner.namespace.as_str();
        let slot = (ns.to_owned(), child.name.clone());
        let fingerprint = fingerprint(&body);
        let watched = cache
            .cached_meta(Some(ns), &child.name)
            .and_then(|m| m.metadata.resource_version.clone());
        let settled = self.in_scope(Some(ns))
            && cache
                .carried()
                .get(&slot)
                .is_some_and(|c| c.settles(fingerprint, watched.as_deref()));
        if settled {
            return Ok(Applied::Unchanged);
        }
        if let Some(live) = self
            .lookup(&child.kind, Some(ns), &child.name, false)
            .await?
        {
            if !self.may_claim(owner, &live.metadata) {
                return Err(ClusterError::ForeignOwner {
                    kind: child.kind.kind.clone(),
                    namespace: ns.to_owned(),
                    name: child.name.clone(),
                    owner_kind: owner.kind.clone(),
                });
            }
            let live = serde_json::to_value(&*live).map_err(|e| {
                ClusterError::from(Invalid {
                    what: format!("cached {} {ns}/{}", child.kind.kind, child.name),
                    message: e.to_string(),
                })
            })?;
            if carries(&live, &body, FIELD_MANAGER) {
                self.remember(cache, slot, &live, fingerprint);
                return Ok(Applied::Unchanged);
            }
        }
        let mut applied = self
            .api(&child.kind, Some(ns))
            .patch(
                &child.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(|e| {
                ClusterError::kube(
                    format!("applying {} {ns}/{}", child.kind.kind, child.name),
                    e,
                )
            })?;
        strip(&mut applied.metadata, Fields::Own);
        let response = serde_json::to_value(&applied).map_err(|e| {
            ClusterError::from(Invalid {
                what: format!("applied {} {ns}/{}", child.kind.kind, child.name),
                message: e.to_string(),
            })
        })?;
        if carries(&response, &body, FIELD_MANAGER) {
            self.remember(cache, slot.clone(), &response, fingerprint);
        } else {
            cache.carried().remove(&slot);
        }
        // Content a step reads is refreshed with the response, saving its next read.
        if let Some(kept) = cache.content().get_mut(&slot)
            && let Some(content) = Content::of(&applied)
        {
            *kept = content;
        }
        Ok(Applied::Written)
    }

    /// Records that the object `live` (in scope) carries the body of `fingerprint`.
    fn remember(
        &self,
        cache: &KindCache,
        slot: (String, String),
        live: &serde_json::Value,
        fingerprint: u64,
    ) {
        if !self.in_scope(Some(&slot.0)) {
            return;
        }
        if let Some(version) = live["metadata"]["resourceVersion"].as_str() {
            cache.carried().insert(
                slot,
                Carried {
                    resource_version: version.to_owned(),
                    fingerprint,
                },
            );
        }
    }

    /// Whether `owner` may write over the live object: locally one no other controller
    /// controls (an uncontrolled object is adopted); on a target cluster only one it
    /// controls, since nothing there tells a stranger's object from an orphan.
    fn may_claim(
        &self,
        owner: &Owner,
        live: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> bool {
        match &self.target {
            None => {
                let ours = owner.reference.as_ref().map(|r| r.uid.as_str());
                controller_of(live).is_none_or(|c| Some(c.uid.as_str()) == ours)
            }
            Some(_) => owner.controls(live),
        }
    }

    /// The paged, metadata-only, uncached sweep of one kind (restarted once from the start
    /// when the continue token expired).
    async fn sweep_kind(&self, owner: &Owner, kind: &ApiResource) -> Result<usize, ClusterError> {
        let ns = owner.namespace.as_str();
        let api = self.api(kind, Some(ns));
        let mut params = ListParams::default().limit(SWEEP_PAGE);
        let mut restarted = false;
        let mut deleted = 0;
        loop {
            let page = match api.list_metadata(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(status)) if status.code == 410 && !restarted => {
                    restarted = true;
                    params.continue_token = None;
                    continue;
                }
                // The cluster does not serve the kind: nothing of it to sweep.
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(deleted),
                Err(source) => {
                    return Err(ClusterError::kube(
                        format!("listing {} in {ns}", kind.plural),
                        source,
                    ));
                }
            };
            let owned = page
                .items
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none() && owner.controls(&m.metadata));
            for item in owned {
                if delete_in_background(&api, kind, ns, &item.name_any()).await? {
                    deleted += 1;
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params.continue_token = Some(token),
                _ => return Ok(deleted),
            }
        }
    }

    async fn delete_object(
        &self,
        kind: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<(), ClusterError> {
        let cache = self.cache(kind)?;
        if !cache.served {
            return Ok(());
        }
        // The synced cache says it is gone: no request (a stale cache is caught next pass).
        if self.in_scope(Some(namespace)) && cache.cached_meta(Some(namespace), name).is_none() {
            return Ok(());
        }
        delete_in_background(&self.api(kind, Some(namespace)), kind, namespace, name)
            .await
            .map(drop)
    }
}

/// Deletes one object in the background; false when it was already gone.
async fn delete_in_background(
    api: &Api<DynamicObject>,
    kind: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<bool, ClusterError> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(ClusterError::kube(
            format!("deleting {} {namespace}/{name}", kind.kind),
            e,
        )),
    }
}

/// How long [`Cluster::reachable`] waits for the API server's answer.
const REACHABLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How many objects one page of a remote sweep lists.
const SWEEP_PAGE: u32 = 500;

/// The label the Job controller puts on every pod of a Job.
const JOB_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";

/// The termination message of the pod `pods` holds for the Job `job_uid`: the succeeded one,
/// else the newest; only pods that Job controls count.
pub fn report_of(pods: &[Pod], job_uid: &str) -> Option<String> {
    let ours: Vec<&Pod> = pods
        .iter()
        .filter(|p| controller_of(&p.metadata).is_some_and(|c| c.uid == job_uid))
        .collect();
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let pod = ours
        .iter()
        .find(|p| phase(p).as_deref() == Some("Succeeded"))
        .or_else(|| {
            ours.iter()
                .max_by_key(|p| p.metadata.creation_timestamp.clone())
        })?;
    pod.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
}

fn describe(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// Whether the API server serves a kind: always for built-in kinds; for another operator's
/// kind, asked through discovery (which every authenticated client may read, so the probe
/// works under a namespaced Role). A cluster-scoped kind is never watched under `--namespace`.
async fn served(client: &Client, scope: &Option<String>, spec: &KindSpec) -> bool {
    if spec.cluster_scoped && scope.is_some() {
        return false;
    }
    if !spec.optional {
        return true;
    }
    let r = &spec.resource;
    let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok(_) => true,
        Err(e) => {
            tracing::info!(kind = %r.kind, group = %r.group, error = %e, "kind not served; it reads as absent and is not watched");
            false
        }
    }
}

fn start_watch(
    client: &Client,
    scope: &Option<String>,
    spec: KindSpec,
    served: bool,
) -> (Arc<KindCache>, Option<tokio::task::AbortHandle>) {
    let resource = spec.resource.clone();
    let namespace = scope.as_deref().filter(|_| !spec.cluster_scoped);
    let mut cache = KindCache {
        served,
        full: None,
        meta: None,
        content: Mutex::default(),
        carried: Mutex::default(),
        subscribers: Mutex::default(),
        spec,
    };
    if !served {
        return (Arc::new(cache), None);
    }
    let watched = Watched {
        client,
        namespace,
        resource: &resource,
    };
    match cache.spec.caching {
        Caching::Full => {
            let writer = Writer::<DynamicObject>::new(resource.clone());
            cache.full = Some(writer.as_reader());
            let cache = Arc::new(cache);
            let task = watched.spawn(writer, cache.clone(), Fields::Own, meta_of);
            (cache, Some(task))
        }
        Caching::Metadata | Caching::OnDemand => {
            let writer = Writer::<PartialObjectMeta<DynamicObject>>::new(resource.clone());
            cache.meta = Some(writer.as_reader());
            let cache = Arc::new(cache);
            let task = watched.spawn(writer, cache.clone(), Fields::None, |o| Arc::new(o.clone()));
            (cache, Some(task))
        }
    }
}

/// Where one kind is watched.
struct Watched<'a> {
    client: &'a Client,
    namespace: Option<&'a str>,
    resource: &'a ApiResource,
}

impl Watched<'_> {
    /// Starts the watch of whole objects or of metadata (`K`), stripping what no cache holds
    /// (the managedFields entries `fields` does not keep), and drives it into `writer`.
    fn spawn<K>(
        &self,
        writer: Writer<K>,
        cache: Arc<KindCache>,
        fields: Fields,
        meta: fn(&K) -> Meta,
    ) -> tokio::task::AbortHandle
    where
        K: kube::Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let api: Api<K> = match self.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, self.resource),
            None => Api::all_with(self.client.clone(), self.resource),
        };
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .map_ok(move |event| event.modify(|o| strip(o.meta_mut(), fields)));
        tokio::spawn(drive(
            events,
            writer,
            cache,
            self.resource.kind.clone(),
            meta,
        ))
        .abort_handle()
    }
}

/// Feeds one kind's watch into its store, evicts the content of deleted objects, and tells
/// the subscribers what changed (after the store has it, so a woken pass reads the change).
async fn drive<K, S>(
    events: S,
    mut writer: Writer<K>,
    cache: Arc<KindCache>,
    kind: String,
    meta: fn(&K) -> Meta,
) where
    K: kube::Resource<DynamicType = ApiResource> + Clone + Send + Sync + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(kind = %kind, error = %e, "watch failed; retrying with back-off");
                continue;
            }
        };
        writer.apply_watcher_event(&event);
        match &event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                cache.notify(&meta(object));
            }
            watcher::Event::Delete(object) => {
                let slot = (object.namespace().unwrap_or_default(), object.name_any());
                cache.evict(&slot);
                cache.notify(&meta(object));
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

impl Cluster for LocalCluster {
    fn namespace_scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    fn served<'a>(&'a self, kind: &'a ApiResource) -> BoxFuture<'a, Result<bool, ClusterError>> {
        Box::pin(async move {
            let latched = self.cache(kind)?.served;
            match &self.target {
                Some(target) if !latched => reprobe(&target.proxy, kind).await,
                _ => Ok(latched),
            }
        })
    }

    fn probe<'a>(&'a self, url: &'a str) -> BoxFuture<'a, super::probe::Probe> {
        match &self.target {
            None => Box::pin(super::probe::get(url, self.probe_address)),
            Some(target) => Box::pin(super::probe::through_proxy(&target.proxy, url)),
        }
    }

    fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    fn get_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<DynamicObject>, ClusterError>> {
        Box::pin(async move {
            match self.api(kind, namespace).get(name).await {
                Ok(object) => Ok(Some(object)),
                // A missing object names itself in the status details; a 404 without them
                // is the API server not knowing the resource at all.
                Err(kube::Error::Api(status))
                    if status.code == 404
                        && status.details.as_ref().is_some_and(|d| d.name == name) =>
                {
                    Ok(None)
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    Err(ClusterError::NotServed {
                        kind: kind.kind.clone(),
                    })
                }
                Err(e) => Err(ClusterError::kube(
                    format!("reading {} {name}", kind.kind),
                    e,
                )),
            }
        })
    }

    fn merge_patch<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
        patch: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(async move {
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            self.api(kind, namespace)
                .patch(name, &params, &Patch::Merge(patch))
                .await
                .map(drop)
                .map_err(|e| ClusterError::kube(format!("patching {} {name}", kind.kind), e))
        })
    }

    fn list_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: &'a str,
        selector: &'a Labels,
        fields: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<DynamicObject>, ClusterError>> {
        Box::pin(async move {
            let mut params = ListParams::default().labels(&selector_string(selector));
            if let Some(fields) = fields {
                params = params.fields(fields);
            }
            self.api(kind, Some(namespace))
                .list(&params)
                .await
                .map(|list| list.items)
                .map_err(|e| ClusterError::kube(format!("listing {} in {namespace}", kind.kind), e))
        })
    }

    fn get<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<DynamicObject>>, ClusterError>> {
        Box::pin(self.get_object(kind, namespace, name))
    }

    fn list_metadata_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        selector: &'a Labels,
    ) -> BoxFuture<'a, Result<Vec<Meta>, ClusterError>> {
        Box::pin(async move {
            let params = ListParams::default().labels(&selector_string(selector));
            let listed = self
                .api(kind, namespace)
                .list_metadata(&params)
                .await
                .map_err(|e| {
                    ClusterError::kube(
                        format!("listing {} by {}", kind.plural, selector_string(selector)),
                        e,
                    )
                })?;
            Ok(listed
                .items
                .into_iter()
                .map(|mut m| {
                    strip(&mut m.metadata, Fields::None);
                    Arc::new(m)
                })
                .collect())
        })
    }

    fn metadata_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Meta>, ClusterError>> {
        Box::pin(async move {
            let read = self
                .api(kind, namespace)
                .get_metadata_opt(name)
                .await
                .map_err(|e| {
                    ClusterError::kube(
                        format!("reading {} {}", kind.kind, describe(namespace, name)),
                        e,
                    )
                })?;
            Ok(read.map(|mut m| {
                strip(&mut m.metadata, Fields::None);
                Arc::new(m)
            }))
        })
    }

    fn metadata(
        &self,
        kind: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Meta>, ClusterError> {
        let cache = self.cache(kind)?;
        Ok(cache
            .served
            .then(|| cache.cached_meta(Some(namespace), name))
            .flatten())
    }

    fn list_metadata(
        &self,
        kind: &ApiResource,
        namespace: &str,
        selector: &Labels,
    ) -> Result<Vec<Meta>, ClusterError> {
        let cache = self.cache(kind)?;
        let wanted = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            m.namespace.as_deref() == Some(namespace) && selects(selector, m.labels.as_ref())
        };
        if let Some(full) = &cache.full {
            return Ok(full
                .state()
                .iter()
                .filter(|o| wanted(&o.metadata))
                .map(|o| meta_of(o))
                .collect());
        }
        Ok(cache
            .meta
            .as_ref()
            .map(|s| s.state_filter(|m| wanted(&m.metadata)))
            .unwrap_or_default())
    }

    fn secret<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        keys: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<SecretValues>, ClusterError>> {
        Box::pin(async move {
            let kind = ApiResource::erase::<Secret>(&());
            let Some(object) = self.get_object(&kind, Some(namespace), name).await? else {
                return Ok(None);
            };
            let secret: Secret = (*object).clone().try_parse().map_err(|e| {
                ClusterError::from(Invalid {
                    what: format!("cached Secret {namespace}/{name}"),
                    message: e.to_string(),
                })
            })?;
            Ok(Some(values_of(&secret, keys)))
        })
    }

    fn job_report<'a>(
        &'a self,
        namespace: &'a str,
        job_uid: &'a str,
    ) -> BoxFuture<'a, Result<JobReport, ClusterError>> {
        Box::pin(async move {
            let remembered = self
                .reports
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(job_uid)
                .cloned();
            if let Some(message) = remembered {
                return Ok(JobReport {
                    message,
                    fresh: false,
                });
            }
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            let listed = pods
                .list(&ListParams::default().labels(&format!("{JOB_UID_LABEL}={job_uid}")))
                .await
                .map_err(|e| {
                    ClusterError::kube(format!("listing the pods of Job {namespace}/{job_uid}"), e)
                })?;
            let message = report_of(&listed.items, job_uid);
            self.reports
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(job_uid.to_owned(), message.clone());
            Ok(JobReport {
                message,
                fresh: true,
            })
        })
    }

    fn apply<'a>(
        &'a self,
        owner: &'a Owner,
        child: &'a Child,
    ) -> BoxFuture<'a, Result<Applied, ClusterError>> {
        Box::pin(self.apply_child(owner, child))
    }

    fn delete<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(self.delete_object(kind, namespace, name))
    }

    fn sweep<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
    ) -> BoxFuture<'a, Result<usize, ClusterError>> {
        Box::pin(self.sweep_kind(owner, kind))
    }

    fn reachable(&self) -> BoxFuture<'_, bool> {
        Box::pin(async {
            let answer = tokio::time::timeout(REACHABLE_TIMEOUT, self.client.apiserver_version());
            matches!(answer.await, Ok(Ok(_)))
        })
    }

    fn prune<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
        selector: &'a Labels,
        keep: &'a [String],
    ) -> BoxFuture<'a, Result<usize, ClusterError>> {
        Box::pin(async move {
            let stale: Vec<String> = self
                .list_metadata(kind, &owner.namespace, selector)?
                .iter()
                .filter(|m| owner.controls(&m.metadata))
                .map(|m| m.name_any())
                .filter(|name| !keep.contains(name))
                .collect();
            for name in &stale {
                self.delete_object(kind, &owner.namespace, name).await?;
            }
            Ok(stale.len())
        })
    }
}

/// Asks a target's API server whether it serves `kind` now (through the client without
/// retries, so a throttled or unavailable server fails the probe at once): a group or kind it
/// does not know is not served, any other failure is the probe's error.
async fn reprobe(client: &Client, kind: &ApiResource) -> Result<bool, ClusterError> {
    let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
    match kube::discovery::pinned_kind(client, &gvk).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(kube::Error::Discovery(_)) => Ok(false),
        Err(e) => Err(ClusterError::kube(
            format!("discovering {}", kind.api_version),
            e,
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_read_off_the_succeeded_pod_of_that_job() {
        let pod = |job: &str, phase: &str, created: i64, message: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "creationTimestamp": format!("2026-01-01T00:00:{created:02}Z"),
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "nova-db-sync",
                                         "uid": job, "controller": true}],
                },
                "status": {"phase": phase, "containerStatuses": [{
                    "name": "db-sync", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "message": message}}}]},
            }))
            .expect("pod")
        };
        let pods = [
            pod("old", "Succeeded", 1, "stale"),
            pod("job", "Failed", 2, "attempt 1"),
            pod("job", "Succeeded", 3, "cell0=x"),
            pod("job", "Failed", 4, "attempt 3"),
        ];
        assert_eq!(report_of(&pods, "job").as_deref(), Some("cell0=x"));
        assert_eq!(
            report_of(&pods[..2], "job").as_deref(),
            Some("attempt 1"),
            "no succeeded pod: the newest of that Job"
        );
        assert_eq!(report_of(&pods, "gone"), None);
    }

    #[test]
    fn freshness_of_cached_content() {
        assert!(fresh(Some("7"), Some("7")));
        assert!(
            fresh(Some("9"), Some("7")),
            "an apply response ahead of its watch event"
        );
        assert!(!fresh(Some("7"), Some("9")));
        assert!(!fresh(Some("a"), Some("b")));
        assert!(!fresh(None, Some("7")));
    }

    #[test]
    fn cached_content_keeps_only_our_own_apply_entry() {
        let entry = |manager: &str, operation: &str, subresource: Option<&str>| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                manager: Some(manager.into()),
                operation: Some(operation.into()),
                subresource: subresource.map(Into::into),
                fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                    serde_json::json!({"f:spec": {"f:replicas": {}}}),
                )),
                ..Default::default()
            }
        };
        let meta = || k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: Some(BTreeMap::from([(LAST_APPLIED.to_owned(), "{}".to_owned())])),
            managed_fields: Some(vec![
                entry("kube-controller-manager", "Update", Some("status")),
                entry(FIELD_MANAGER, "Apply", Some("status")),
                entry(FIELD_MANAGER, "Apply", None),
                entry("kubectl", "Update", None),
            ]),
            ..Default::default()
        };
        let mut content = meta();
        strip(&mut content, Fields::Own);
        assert_eq!(
            content.managed_fields,
            Some(vec![entry(FIELD_MANAGER, "Apply", None)])
        );
        assert_eq!(content.annotations, Some(BTreeMap::new()));
        let mut metadata = meta();
        strip(&mut metadata, Fields::None);
        assert_eq!(metadata.managed_fields, None);
    }

    #[test]
    fn content_is_the_object_while_fresh() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"replicas": 2}, "status": {"readyReplicas": 1},
        }))
        .expect("object");
        let content = Content::of(&object).expect("serializes");
        assert_eq!(content.object_at(Some("7")), Some(object));
        assert_eq!(content.object_at(Some("8")), None, "changed since");
    }

    #[test]
    fn a_record_settles_only_the_same_body_on_an_unchanged_object() {
        let body = serde_json::json!({"kind": "ConfigMap", "data": {"a": "1"}});
        let record = Carried {
            resource_version: "7".into(),
            fingerprint: fingerprint(&body),
        };
        assert!(record.settles(fingerprint(&body.clone()), Some("7")));
        assert!(
            record.settles(fingerprint(&body), Some("6")),
            "an apply response ahead of its watch event"
        );
        assert!(
            !record.settles(fingerprint(&body), Some("8")),
            "changed since"
        );
        assert!(!record.settles(fingerprint(&body), None), "gone");
        let other = serde_json::json!({"kind": "ConfigMap", "data": {"a": "2"}});
        assert!(
            !record.settles(fingerprint(&other), Some("7")),
            "another body"
        );
    }

    #[test]
    fn a_kind_registered_twice_keeps_the_richest_caching() {
        let registry = Registry::default()
            .register([KindSpec::of::<Secret>(Caching::Metadata)])
            .register([KindSpec::of::<Secret>(Caching::OnDemand)])
            .register([KindSpec::of::<Secret>(Caching::Metadata)]);
        assert_eq!(registry.kinds.len(), 1);
        assert_eq!(registry.kinds[0].caching, Caching::OnDemand);
    }
}
