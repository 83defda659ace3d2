//! The handle's watches: which kinds the API server serves, and one reflector per served kind
//! feeding its cache and waking the kind's subscribers.

use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use super::cache::{Fields, KindCache, meta_of, strip};
use crate::clusters::{Caching, ClusterError, KindSpec, Meta};

/// Whether the API server serves a kind: always for built-in kinds; for another operator's
/// kind, asked through discovery (which every authenticated client may read, so the probe
/// works under a namespaced Role). A cluster-scoped kind is never watched under `--namespace`.
pub(super) async fn served(client: &Client, scope: &Option<String>, spec: &KindSpec) -> bool {
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

pub(super) fn start_watch(
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
pub(super) struct Watched<'a> {
    pub(super) client: &'a Client,
    pub(super) namespace: Option<&'a str>,
    pub(super) resource: &'a ApiResource,
}

impl Watched<'_> {
    /// Starts the watch of whole objects or of metadata (`K`), stripping what no cache holds
    /// (the managedFields entries `fields` does not keep), and drives it into `writer`.
    pub(super) fn spawn<K>(
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
pub(super) async fn drive<K, S>(
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

/// Asks a target's API server whether it serves `kind` now (through the client without
/// retries, so a throttled or unavailable server fails the probe at once): a group or kind it
/// does not know is not served, any other failure is the probe's error.
pub(super) async fn reprobe(client: &Client, kind: &ApiResource) -> Result<bool, ClusterError> {
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
