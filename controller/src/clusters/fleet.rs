//! The registered target clusters (`common-types.md` §3.17): one watch on the registration
//! Secrets of `--clusters-namespace`, each accepted Secret engaged asynchronously as a
//! [`KubeCluster`] of its own (its own client and watch caches, claiming by ownership
//! labels), re-engaged when its hash changes, dropped when it is deleted or refused.
//!
//! Only the registration Secrets are read (a label-selected watch in that one namespace), and
//! an engaged cluster's caches are watches on that cluster, so a placed CR's steady state
//! costs the management cluster's API server nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::client::ClientBuilder;
use kube::config::KubeConfigOptions;
use kube::core::ApiResource;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config, ResourceExt};
use tokio::task::{AbortHandle, JoinHandle};

use super::kube_cluster::Target;
use super::registration::{self, LABEL, Registration};
use super::{CLUSTER_NOT_FOUND, Cluster, KubeCluster, Meta, Registry};
use crate::bounded::{Answering, RequestTimeoutLayer};

/// How long start-up waits for the clusters registered at that moment to engage before the
/// controllers run (an unreachable one is left to engage later).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The engaged handles of one cluster: one cluster-wide, or one per registered namespace.
#[derive(Clone)]
enum Handles {
    ClusterWide(Arc<KubeCluster>),
    Namespaced(BTreeMap<String, Arc<KubeCluster>>),
}

impl Handles {
    fn all(&self) -> Vec<Arc<KubeCluster>> {
        match self {
            Handles::ClusterWide(handle) => vec![handle.clone()],
            Handles::Namespaced(handles) => handles.values().cloned().collect(),
        }
    }
}

/// One registered cluster: the hash it was engaged for, when that registration was accepted,
/// its handles once engaged, and the engaging task (stopped when the registration changes or
/// goes).
struct Engagement {
    hash: String,
    registered: std::time::SystemTime,
    handles: Option<Handles>,
    engaging: Option<AbortHandle>,
}

impl Drop for Engagement {
    fn drop(&mut self) {
        if let Some(task) = &self.engaging {
            task.abort();
        }
    }
}

/// A subscriber to one kind's changes on every engaged cluster.
struct Follower {
    kind: ApiResource,
    tx: mpsc::UnboundedSender<(String, Meta)>,
}

/// The registered target clusters.
pub struct Fleet {
    registry: Registry,
    abandon_after: Duration,
    request_timeout: Duration,
    clusters: Mutex<HashMap<String, Engagement>>,
    followers: Mutex<Vec<Follower>>,
    settled: tokio::sync::watch::Receiver<bool>,
}

impl Fleet {
    /// Watches the registration Secrets in `namespace` (through `client`, the management
    /// cluster) and engages each accepted one with the kinds of `registry`; a deleting CR
    /// whose cluster does not resolve for `abandon_after` abandons its remote children
    /// ([`super::ABANDON_AFTER`] outside tests); a target's requests are bounded by
    /// `request_timeout`, and one that times out marks the cluster silent.
    pub fn start(
        client: Client,
        namespace: &str,
        registry: Registry,
        abandon_after: Duration,
        request_timeout: Duration,
    ) -> Arc<Fleet> {
        let (settle, settled) = tokio::sync::watch::channel(false);
        let fleet = Arc::new(Fleet {
            registry,
            abandon_after,
            request_timeout,
            clusters: Mutex::default(),
            followers: Mutex::default(),
            settled,
        });
        let api: Api<Secret> = Api::namespaced(client, namespace);
        tokio::spawn(fleet.clone().follow(api, settle));
        fleet
    }

    /// Resolves once the registrations present at start-up were listed and have engaged, or
    /// after [`SETTLE_TIMEOUT`] (an unreachable cluster, or registrations that cannot be
    /// listed, engage later), so a restart does not report a registered cluster as unavailable
    /// while it engages.
    pub async fn settled(&self) {
        let mut settled = self.settled.clone();
        let _ = tokio::time::timeout(SETTLE_TIMEOUT, settled.wait_for(|done| *done)).await;
    }

    /// How long a deleting CR waits for an unresolved cluster.
    pub fn abandon_after(&self) -> Duration {
        self.abandon_after
    }

    /// The handle of the engaged cluster `name` for a CR in `namespace`, or the error text
    /// of the TargetClusterUnavailable condition.
    pub fn resolve(&self, name: &str, namespace: &str) -> Result<Arc<dyn Cluster>, String> {
        let clusters = self.clusters();
        let Some(handles) = clusters.get(name).and_then(|e| e.handles.as_ref()) else {
            return Err(CLUSTER_NOT_FOUND.to_owned());
        };
        let handle = match handles {
            Handles::ClusterWide(handle) => handle.clone(),
            Handles::Namespaced(handles) => match handles.get(namespace) {
                Some(handle) => handle.clone(),
                None => {
                    return Err(format!(
                        "cluster {name} is registered for namespaces {}, not {namespace}",
                        handles.keys().cloned().collect::<Vec<_>>().join(",")
                    ));
                }
            },
        };
        // A silent cluster would hold a reconcile slot for a request timeout per request.
        match handle.silent_since() {
            Some(since) => Err(silent(name, since)),
            None => Ok(handle),
        }
    }

    /// Every registered cluster with when it stopped answering: `None` while it answers, and
    /// the time its registration was accepted while it has not engaged yet (an unreachable
    /// cluster never engages).
    pub fn silences(&self) -> BTreeMap<String, Option<std::time::SystemTime>> {
        self.clusters()
            .iter()
            .map(|(name, engagement)| {
                let since = match &engagement.handles {
                    Some(handles) => handles.all().first().and_then(|h| h.silent_since()),
                    None => Some(engagement.registered),
                };
                (name.clone(), since)
            })
            .collect()
    }

    /// Every change of `kind` on every engaged cluster from now on (clusters engaged later
    /// included), with the name of the cluster it happened on.
    pub fn subscribe(&self, kind: &ApiResource) -> mpsc::UnboundedReceiver<(String, Meta)> {
        let (tx, rx) = mpsc::unbounded();
        let follower = Follower {
            kind: kind.clone(),
            tx,
        };
        for (name, engagement) in self.clusters().iter() {
            if let Some(handles) = &engagement.handles {
                attach(name, handles, &follower);
            }
        }
        self.followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(follower);
        rx
    }

    fn clusters(&self) -> MutexGuard<'_, HashMap<String, Engagement>> {
        self.clusters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows the registration Secrets until the process ends. After every (re-)list, the
    /// clusters whose Secret is gone are dropped.
    async fn follow(self: Arc<Self>, api: Api<Secret>, settle: tokio::sync::watch::Sender<bool>) {
        let config = watcher::Config::default().labels(&format!("{LABEL}=true"));
        let events = watcher(api, config).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut listed = BTreeSet::new();
        let mut engaging = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Err(e) => {
                    tracing::warn!(error = %e, "watching the target-cluster registrations failed; retrying with back-off");
                }
                Ok(watcher::Event::Init) => listed.clear(),
                Ok(watcher::Event::InitApply(secret)) => {
                    listed.insert(secret.name_any());
                    engaging.extend(self.register(&secret));
                }
                Ok(watcher::Event::InitDone) => {
                    let gone: Vec<String> = self
                        .clusters()
                        .keys()
                        .filter(|name| !listed.contains(*name))
                        .cloned()
                        .collect();
                    for name in gone {
                        self.deregister(&name, "its registration Secret is gone");
                    }
                    let pending = std::mem::take(&mut engaging);
                    let settle = settle.clone();
                    tokio::spawn(async move {
                        futures::future::join_all(pending).await;
                        let _ = settle.send(true);
                    });
                }
                Ok(watcher::Event::Apply(secret)) => {
                    self.register(&secret);
                }
                Ok(watcher::Event::Delete(secret)) => {
                    self.deregister(&secret.name_any(), "its registration Secret was deleted");
                }
            }
        }
    }

    /// Engages an accepted registration whose hash changed (dropping the previous
    /// engagement), or drops a refused one; returns the engaging task.
    fn register(self: &Arc<Self>, secret: &Secret) -> Option<JoinHandle<()>> {
        let name = secret.name_any();
        let registration = match registration::parse(secret) {
            Ok(registration) => registration,
            Err(refusal) => {
                tracing::warn!(cluster = %name, reason = %refusal, "target-cluster registration refused; the cluster does not resolve");
                self.deregister(&name, "its registration was refused");
                return None;
            }
        };
        let mut clusters = self.clusters();
        if clusters
            .get(&name)
            .is_some_and(|e| e.hash == registration.hash)
        {
            return None;
        }
        let hash = registration.hash.clone();
        let task = tokio::spawn(self.clone().engage(registration));
        let replaced = clusters.insert(
            name.clone(),
            Engagement {
                hash,
                registered: std::time::SystemTime::now(),
                handles: None,
                engaging: Some(task.abort_handle()),
            },
        );
        drop(clusters);
        match replaced {
            Some(_) => {
                tracing::info!(cluster = %name, "target-cluster registration changed; re-engaging")
            }
            None => tracing::info!(cluster = %name, "target cluster registered; engaging"),
        }
        Some(task)
    }

    fn deregister(&self, name: &str, why: &str) {
        if self.clusters().remove(name).is_some() {
            tracing::info!(cluster = %name, "target cluster dropped: {why}");
        }
    }

    /// Starts the cluster's caches, waits for them, and publishes the handles unless the
    /// registration changed meanwhile.
    async fn engage(self: Arc<Self>, registration: Registration) {
        let name = registration.name.clone();
        let answering = Arc::new(Answering::default());
        let clients = client_for(&registration, self.request_timeout, &answering).await;
        let (client, proxy) = match clients {
            Ok(clients) => clients,
            Err(e) => {
                tracing::warn!(cluster = %name, error = %e, "engaging the target cluster failed; it does not resolve");
                return;
            }
        };
        let target = || Target {
            proxy: proxy.clone(),
            answering: answering.clone(),
        };
        let handles = match &registration.namespaces {
            None => Handles::ClusterWide(
                KubeCluster::start_target(target(), client, None, self.registry.clone()).await,
            ),
            Some(namespaces) => {
                let mut handles = BTreeMap::new();
                for ns in namespaces {
                    let handle = KubeCluster::start_target(
                        target(),
                        client.clone(),
                        Some(ns.clone()),
                        self.registry.clone(),
                    )
                    .await;
                    handles.insert(ns.clone(), handle);
                }
                Handles::Namespaced(handles)
            }
        };
        for handle in handles.all() {
            handle.synced().await;
        }
        {
            let mut clusters = self.clusters();
            match clusters.get_mut(&name) {
                Some(engagement) if engagement.hash == registration.hash => {
                    engagement.handles = Some(handles.clone());
                    engagement.engaging = None;
                }
                _ => return,
            }
        }
        for follower in self
            .followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            attach(&name, &handles, follower);
        }
        tracing::info!(cluster = %name, "target cluster engaged; its watch caches synced");
    }
}

/// Forwards `follower`'s kind from every handle of the cluster `name`; a forward ends when
/// its handle is dropped.
fn attach(name: &str, handles: &Handles, follower: &Follower) {
    for handle in handles.all() {
        let mut changes = handle.subscribe(&follower.kind);
        let (name, tx) = (name.to_owned(), follower.tx.clone());
        tokio::spawn(async move {
            while let Some(meta) = changes.next().await {
                if tx.unbounded_send((name.clone(), meta)).is_err() {
                    return;
                }
            }
        });
    }
}

/// The condition message of a target cluster that stopped answering at `since`.
fn silent(name: &str, since: std::time::SystemTime) -> String {
    let since = Timestamp::try_from(since).map_or_else(|_| "-".to_owned(), |t| t.to_string());
    format!("cluster {name} does not answer: a request got no answer in time (since {since})")
}

/// The clients of a registration (its credentials were checked to be inline): the API
/// client, reporting to `answering`, and one without retries for what the service proxy
/// carries; both bounded by `timeout`.
async fn client_for(
    registration: &Registration,
    timeout: Duration,
    answering: &Arc<Answering>,
) -> Result<(Client, Client), String> {
    let config = Config::from_custom_kubeconfig(
        registration.kubeconfig.clone(),
        &KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| format!("loading the kubeconfig: {e}"))?;
    let mut proxy = config.clone();
    proxy.default_retry = false;
    let bounded = RequestTimeoutLayer::new(timeout);
    let build = |config, layer: &RequestTimeoutLayer| {
        ClientBuilder::try_from(config)
            .map(|builder| builder.with_layer(layer).build())
            .map_err(|e| format!("building the client: {e}"))
    };
    Ok((
        build(config, &bounded.clone().reporting(answering.clone()))?,
        build(proxy, &bounded)?,
    ))
}
