//! The NovaCompute controller's watches (`nova-reconciler.txt`, "Watches"): its pools
//! (status-only updates filtered), the DaemonSet, ConfigMaps and VPA they own, a Nova's spec
//! and the two status fields a pool waits on, the siblings of a pool whose spec, deletion or
//! held nodes changed, the `<nova>-compute-config` Secret, and Node label changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Node;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use nova_api::v1alpha1::{NodePhase, Nova, NovaCompute};

use super::pools::{Pools, nova_key};
use super::{TABLES, held, ledger};
use crate::clusters::{ClusterExt, ClusterReads, Fleet, KindSpec, KubeCluster, Meta};
use crate::metrics::Metrics;
use crate::objects::selects;
use crate::openstack::Sessions;
use crate::pipeline::Reconciled;
use crate::pipeline::index::ObjectKey;
use crate::pipeline::kinds::{in_role, registered};
use crate::pipeline::runner::{self, placed_on};
use crate::pipeline::uses::Role;

/// Every kind the NovaCompute steps read or the controller watches, as the rows declare them
/// (each step file's `KINDS`): the Nova, the Secrets, the owned ConfigMaps, DaemonSet and VPA,
/// the Nova's discovery Job and API Deployment, and Node metadata.
pub fn kinds() -> Vec<KindSpec> {
    registered(TABLES)
}

/// The kinds the rows own (their events wake the owner), then those they read by name (their
/// events wake the pools that name the object): the legs every cluster watches for them.
fn waking() -> (Vec<ApiResource>, Vec<ApiResource>) {
    (in_role(TABLES, Role::Owns), in_role(TABLES, Role::Names))
}

/// What a pool's siblings react to: its spec, the start of its deletion, and which nodes it
/// holds in which phase and zone.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    generation: Option<i64>,
    deleting: bool,
    held: Vec<(String, NodePhase, Option<String>)>,
}

impl Fingerprint {
    fn of(pool: &NovaCompute) -> Self {
        Self {
            generation: pool.metadata.generation,
            deleting: pool.metadata.deletion_timestamp.is_some(),
            held: ledger(pool)
                .iter()
                .filter(|e| held(e))
                .map(|e| (e.name.clone(), e.phase, e.zone.clone()))
                .collect(),
        }
    }
}

/// Wakes the siblings of a pool whose fingerprint changed (or that is gone).
struct SiblingWake {
    pools: Arc<Pools>,
    seen: Mutex<HashMap<ObjectRef<NovaCompute>, Fingerprint>>,
    wake: mpsc::UnboundedSender<ObjectRef<NovaCompute>>,
}

impl SiblingWake {
    fn follow(&self, event: &watcher::Event<NovaCompute>) {
        let (pool, gone) = match event {
            watcher::Event::Apply(pool) | watcher::Event::InitApply(pool) => (pool, false),
            watcher::Event::Delete(pool) => (pool, true),
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        let key = ObjectRef::from_obj(pool);
        let changed = {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if gone {
                seen.remove(&key);
                true
            } else {
                let now = Fingerprint::of(pool);
                seen.insert(key.clone(), now.clone())
                    .is_none_or(|before| before != now)
            }
        };
        if !changed {
            return;
        }
        let ns = pool.namespace().unwrap_or_default();
        for sibling in self
            .pools
            .referencing(&nova_key(&ns, &pool.spec.nova_ref.name))
        {
            if sibling != key {
                let _ = self.wake.unbounded_send(sibling);
            }
        }
    }
}

/// The pools owning an object (controller reference to a NovaCompute).
fn owners(meta: &Meta) -> Vec<ObjectRef<NovaCompute>> {
    let ns = meta.namespace().unwrap_or_default();
    let api_version = NovaCompute::api_version(&());
    meta.owner_references()
        .iter()
        .filter(|o| o.kind == "NovaCompute" && o.api_version == api_version)
        .map(|o| ObjectRef::new(&o.name).within(&ns))
        .collect()
}

/// What a pool waits on in its Nova.
type NovaView = (Option<i64>, Option<String>, Option<String>);

fn nova_view(nova: &Nova) -> NovaView {
    let status = nova.status.as_ref();
    (
        nova.metadata.generation,
        status.and_then(|s| s.installed_release.clone()),
        status.and_then(|s| s.compute_config_secret_ref.as_ref().map(|r| r.name.clone())),
    )
}

/// The pools of `cluster` (None = the management cluster) a Node of that cluster concerns when
/// its labels changed: those selecting it before or after, and those holding it.
fn pools_of_node(
    pools: &Pools,
    cluster: Option<&str>,
    name: &str,
    before: Option<&BTreeMap<String, String>>,
    after: Option<&BTreeMap<String, String>>,
) -> Vec<ObjectRef<NovaCompute>> {
    pools
        .all()
        .iter()
        .filter(|p| p.target_cluster() == cluster)
        .filter(|p| {
            let selector = &p.spec.node_selector;
            selects(selector, before)
                || selects(selector, after)
                || ledger(p).iter().any(|e| e.name == name)
        })
        .map(|p| ObjectRef::from_obj(&**p))
        .collect()
}

/// The labels last seen on each Node of each cluster (None = the management cluster), so a
/// Node event wakes pools only when the labels changed (kwok and kubelets rewrite Node status
/// all the time).
#[derive(Default)]
struct NodeLabels(Mutex<HashMap<NodeKey, BTreeMap<String, String>>>);

/// A Node by cluster (None = the management cluster) and name.
type NodeKey = (Option<String>, String);

impl NodeLabels {
    /// The pools an event of the Node `name` on `cluster` wakes; `after` is its labels, None
    /// once it is gone.
    fn wake(
        &self,
        pools: &Pools,
        cluster: Option<&str>,
        name: &str,
        after: Option<BTreeMap<String, String>>,
    ) -> Vec<ObjectRef<NovaCompute>> {
        let before = {
            let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (cluster.map(str::to_owned), name.to_owned());
            match &after {
                Some(labels) => seen.insert(key, labels.clone()),
                None => seen.remove(&key),
            }
        };
        if before == after {
            return Vec::new();
        }
        pools_of_node(pools, cluster, name, before.as_ref(), after.as_ref())
    }
}

/// How the controller runs.
pub use crate::pipeline::runner::Options;

/// Runs the NovaCompute controller over `cluster` (whose caches must have synced) until
/// `shutdown` resolves.
pub async fn run(
    client: Client,
    metrics: Metrics,
    cluster: Arc<KubeCluster>,
    options: Options,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (reader, writer) = reflector::store();
    let sessions = Sessions::counted(metrics.openstack_requests.clone());
    let pools = Arc::new(Pools::new(reader.clone(), sessions));
    let ctx = runner::context::<NovaCompute>(
        &client,
        cluster.clone(),
        metrics,
        "novacompute-controller",
        &options,
        pools.clone(),
    );
    let (wake, woken) = mpsc::unbounded();
    let siblings = SiblingWake {
        pools: pools.clone(),
        seen: Mutex::default(),
        wake,
    };
    let follow = {
        let pools = pools.clone();
        move |event: &watcher::Event<NovaCompute>| {
            pools.follow(event);
            siblings.follow(event);
        }
    };
    let (owned_kinds, named_kinds) = waking();
    let owned = futures::stream::select_all(owned_kinds.iter().map(|kind| cluster.subscribe(kind)))
        .flat_map(|meta| futures::stream::iter(owners(&meta)));
    let named = futures::stream::select_all(named_kinds.into_iter().map(|kind| {
        let pools = pools.clone();
        cluster.subscribe(&kind).flat_map(move |meta| {
            let key = ObjectKey::new(
                &kind,
                &meta.namespace().unwrap_or_default(),
                &meta.name_any(),
            );
            futures::stream::iter(pools.referencing(&key))
        })
    }));
    let novas = {
        let pools = pools.clone();
        let seen: Arc<Mutex<HashMap<(String, String), NovaView>>> = Arc::default();
        let reader = cluster.clone();
        cluster
            .subscribe(&ApiResource::erase::<Nova>(&()))
            .then(move |meta| {
                let reader = reader.clone();
                async move {
                    let (ns, name) = (meta.namespace().unwrap_or_default(), meta.name_any());
                    let view = match reader.get_typed::<Nova>(&ns, &name).await {
                        Ok(nova) => nova.as_ref().map(nova_view),
                        Err(_) => None,
                    };
                    (ns, name, view)
                }
            })
            .flat_map(move |(ns, name, view)| {
                let changed = {
                    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
                    let key = (ns.clone(), name.clone());
                    match view {
                        Some(view) => seen.insert(key, view.clone()).is_none_or(|b| b != view),
                        None => seen.remove(&key).is_some(),
                    }
                };
                let woken = match changed {
                    true => pools.referencing(&nova_key(&ns, &name)),
                    false => Vec::new(),
                };
                futures::stream::iter(woken)
            })
    };
    let node_labels = Arc::new(NodeLabels::default());
    let nodes = {
        let (pools, cluster, seen) = (pools.clone(), cluster.clone(), node_labels.clone());
        let kind = ApiResource::erase::<Node>(&());
        cluster.subscribe(&kind).flat_map(move |meta| {
            let name = meta.name_any();
            let exists = matches!(cluster.metadata(&kind, "", &name), Ok(Some(_)));
            let after = exists.then(|| meta.labels().clone());
            futures::stream::iter(seen.wake(&pools, None, &name, after))
        })
    };
    let remote = options
        .targets
        .iter()
        .flat_map(|fleet| remote(fleet, &reader, &pools, &node_labels))
        .collect::<Vec<_>>();
    let triggers = futures::stream::select_all(
        [
            owned.boxed(),
            named.boxed(),
            novas.boxed(),
            nodes.boxed(),
            woken.boxed(),
        ]
        .into_iter()
        .chain(remote),
    );
    runner::run(ctx, &options, (reader, writer), follow, triggers, shutdown).await;
}

/// The legs on every engaged target cluster (`nova-reconciler.txt` "Watches"): the owned
/// DaemonSet, ConfigMaps and VPA and the `<nova>-compute-config` Secret, each mapped by the
/// ownership labels and the pool index to the pools placed on the cluster the event came from
/// (as the management cache holds them); and Node label changes, which wake the pools placed
/// there that select or hold the node.
fn remote(
    fleet: &Arc<Fleet>,
    store: &Store<NovaCompute>,
    pools: &Arc<Pools>,
    node_labels: &Arc<NodeLabels>,
) -> Vec<BoxStream<'static, ObjectRef<NovaCompute>>> {
    let (owned, named) = waking();
    let mut legs: Vec<BoxStream<'static, ObjectRef<NovaCompute>>> = owned
        .into_iter()
        .chain(named)
        .map(|kind| {
            let (store, pools) = (store.clone(), pools.clone());
            fleet
                .subscribe(&kind)
                .flat_map(move |(target, meta)| {
                    let key = ObjectKey::new(
                        &kind,
                        &meta.namespace().unwrap_or_default(),
                        &meta.name_any(),
                    );
                    let placed = placed_on(&store, &target, &meta, pools.referencing(&key));
                    futures::stream::iter(placed)
                })
                .boxed()
        })
        .collect();
    let (fleet, pools, seen) = (fleet.clone(), pools.clone(), node_labels.clone());
    let kind = ApiResource::erase::<Node>(&());
    let nodes = fleet.subscribe(&kind).flat_map(move |(target, meta)| {
        let name = meta.name_any();
        // Nodes are watched only by a cluster-wide registration, whose handle serves every
        // namespace.
        let exists = fleet
            .resolve(&target, "")
            .is_ok_and(|cluster| matches!(cluster.metadata(&kind, "", &name), Ok(Some(_))));
        let after = exists.then(|| meta.labels().clone());
        futures::stream::iter(seen.wake(&pools, Some(&target), &name, after))
    });
    legs.push(nodes.boxed());
    legs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clusters::Caching;
    use crate::novacompute::fixtures::pool;
    use crate::objects::kinds;
    use crate::pipeline::kinds::registration;
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use nova_api::v1alpha1::{NovaComputeNodeStatus, NovaComputeStatus};

    fn entry(name: &str, phase: NodePhase) -> NovaComputeNodeStatus {
        NovaComputeNodeStatus {
            name: name.into(),
            phase,
            zone: Some("az1".into()),
            service_id: None,
            service_status: None,
            service_state: None,
            disabled_reason: None,
            instances: None,
            conflicts_with: None,
            traits: Vec::new(),
        }
    }

    #[test]
    fn siblings_wake_on_held_nodes_phase_and_zone_not_on_other_status() {
        let mut pool = pool();
        let before = Fingerprint::of(&pool);
        pool.status = Some(NovaComputeStatus {
            number_ready: 3,
            ..Default::default()
        });
        assert_eq!(
            Fingerprint::of(&pool),
            before,
            "counters do not wake siblings"
        );
        pool.status = Some(NovaComputeStatus {
            nodes: vec![entry("n1", NodePhase::Conflict)],
            ..Default::default()
        });
        assert_eq!(Fingerprint::of(&pool), before, "a conflict holds nothing");
        pool.status = Some(NovaComputeStatus {
            nodes: vec![entry("n1", NodePhase::Pending)],
            ..Default::default()
        });
        let pending = Fingerprint::of(&pool);
        assert_ne!(pending, before);
        pool.status = Some(NovaComputeStatus {
            nodes: vec![entry("n1", NodePhase::Active)],
            ..Default::default()
        });
        assert_ne!(Fingerprint::of(&pool), pending, "a phase change wakes them");
    }

    #[test]
    fn a_node_label_change_wakes_the_pools_of_its_cluster_selecting_it_before_or_after_or_holding_it()
     {
        let (store, mut writer) = kube::runtime::reflector::store();
        let pools = Pools::new(store, Sessions::default());
        let selecting = |name: &str, value: &str| {
            let mut p = pool();
            p.metadata.name = Some(name.into());
            p.spec.node_selector = BTreeMap::from([("pool".to_owned(), value.to_owned())]);
            p
        };
        let mut holder = selecting("holder", "c");
        holder.status = Some(NovaComputeStatus {
            nodes: vec![entry("n1", NodePhase::Draining)],
            ..Default::default()
        });
        let mut placed = selecting("placed", "b");
        placed.spec.target_cluster_ref = Some(nova_api::v1alpha1::TargetClusterRefSpec {
            name: "east".into(),
        });
        for p in [
            selecting("was", "a"),
            selecting("now", "b"),
            holder,
            selecting("other", "d"),
            placed,
        ] {
            let event = watcher::Event::Apply(p);
            writer.apply_watcher_event(&event);
            pools.follow(&event);
        }
        let labels = |value: &str| BTreeMap::from([("pool".to_owned(), value.to_owned())]);
        let seen = NodeLabels::default();
        let woken = |cluster: Option<&str>, value: &str| {
            let mut names: Vec<String> = seen
                .wake(&pools, cluster, "n1", Some(labels(value)))
                .into_iter()
                .map(|r| r.name)
                .collect();
            names.sort();
            names
        };
        assert_eq!(woken(None, "a"), ["holder", "was"], "first sight");
        assert!(woken(None, "a").is_empty(), "unchanged labels wake nobody");
        assert_eq!(woken(None, "b"), ["holder", "now", "was"]);
        assert_eq!(
            woken(Some("east"), "b"),
            ["placed"],
            "a target's node wakes only the pools placed there"
        );
        assert!(woken(Some("west"), "b").is_empty());
        let mut gone: Vec<String> = seen
            .wake(&pools, None, "n1", None)
            .into_iter()
            .map(|r| r.name)
            .collect();
        gone.sort();
        assert_eq!(
            gone,
            ["holder", "now"],
            "a deleted node: who selected or held it"
        );
    }

    #[test]
    fn a_nova_wakes_its_pools_on_its_spec_and_the_two_status_fields() {
        let mut nova = crate::novacompute::fixtures::nova();
        let view = nova_view(&nova);
        if let Some(s) = nova.status.as_mut() {
            s.observed_generation = Some(9);
        }
        assert_eq!(nova_view(&nova), view, "other status fields do not");
        if let Some(s) = nova.status.as_mut() {
            s.installed_release = Some("2026.2".into());
        }
        assert_ne!(nova_view(&nova), view);
    }

    #[test]
    fn the_rows_register_and_watch_what_the_controller_listed_by_hand() {
        let listed = vec![
            KindSpec::of::<Nova>(Caching::Full),
            KindSpec::of::<Secret>(Caching::OnDemand),
            KindSpec::of::<ConfigMap>(Caching::OnDemand),
            KindSpec::of::<DaemonSet>(Caching::OnDemand),
            KindSpec::of::<Job>(Caching::OnDemand),
            KindSpec::of::<Deployment>(Caching::OnDemand),
            KindSpec::external(kinds::vertical_pod_autoscaler(), Caching::Full),
            KindSpec::of::<Node>(Caching::Metadata).cluster_scoped(),
        ];
        assert_eq!(registration(kinds()), registration(listed));
        let (owned, named) = waking();
        let owned: Vec<&str> = owned.iter().map(|k| k.kind.as_str()).collect();
        assert_eq!(owned, ["ConfigMap", "DaemonSet", "VerticalPodAutoscaler"]);
        assert_eq!(named, [ApiResource::erase::<Secret>(&())]);
        assert_eq!(
            <NovaCompute as Reconciled>::remote_kinds(),
            in_role(TABLES, Role::Owns),
            "the remote sweep lists what the rows own"
        );
    }

    #[test]
    fn the_discovery_glue_reads_its_job_and_deployment_as_the_nova_controller_caches_them() {
        let caching = |specs: Vec<KindSpec>, kind: ApiResource| {
            specs
                .into_iter()
                .find(|s| s.resource == kind)
                .map(|s| (s.caching, s.cluster_scoped))
        };
        for kind in [
            ApiResource::erase::<Job>(&()),
            ApiResource::erase::<Deployment>(&()),
        ] {
            let own = caching(kinds(), kind.clone());
            assert_eq!(own, Some((Caching::OnDemand, false)), "{}", kind.kind);
            assert_eq!(
                own,
                caching(crate::nova::controller::kinds(), kind.clone()),
                "{}: both controllers register it alike",
                kind.kind
            );
        }
    }
}
