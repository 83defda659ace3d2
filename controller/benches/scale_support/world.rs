//! What the scale run reconciles: N Novas with their inputs ready (one shared set of input
//! Secrets, the SIMULATED MariaDB operator marking every Database, User and Grant Ready, a
//! RabbitmqCluster with its default user, a Ready SecretStore), the SIMULATED Gateway accepting
//! every HTTPRoute, and N/10 NovaCompute pools, each of the Nova of the same index, selecting
//! 10 kwok nodes of its own.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_controller::objects::kinds as external;
use serde_json::json;

use super::openstack_double::Hosts;
use nova_testkit::fixtures::{POOL_LABEL, example, own_schemas, pool, zoned_node};
use nova_testkit::inputs::provide_inputs;

/// Nodes per pool.
pub const NODES_PER_POOL: usize = 10;
/// How many creates the set-up runs at once.
const SETUP_PARALLELISM: usize = 16;
/// The Keystone endpoint of the example Nova, which the pools log in to.
const KEYSTONE_SERVICE: &str = "keystone.openstack.svc.cluster.local:5000";
/// The port of a Nova's API Service.
const NOVA_API_PORT: u16 = 8774;

pub fn nova_name(i: usize) -> String {
    format!("nova-{i:04}")
}

fn pool_name(p: usize) -> String {
    format!("pool-{p:03}")
}

fn node_name(p: usize, j: usize) -> String {
    format!("scale-p{p:03}-n{j}")
}

/// The kwok node names of each pool's Nova, by the Nova's name (what the OpenStack double
/// registers).
pub fn hosts(n: usize) -> Hosts {
    (0..n / 10)
        .map(|p| {
            let nodes = (0..NODES_PER_POOL).map(|j| node_name(p, j)).collect();
            (nova_name(p), nodes)
        })
        .collect()
}

/// The Services the controller's OpenStack calls go to, all routed to `double`: Keystone and
/// the API Service of every Nova a pool joins.
pub fn routes(ns: &str, n: usize, double: SocketAddr) -> Vec<(String, SocketAddr)> {
    std::iter::once((KEYSTONE_SERVICE.to_owned(), double))
        .chain((0..n / 10).map(|p| {
            let service = format!("{}.{ns}.svc.cluster.local:{NOVA_API_PORT}", nova_name(p));
            (service, double)
        }))
        .collect()
}

/// Creates the inputs, starts the SIMULATED operators, then the nodes, Novas and pools.
pub async fn create(client: &Client, ns: &str, n: usize) {
    provide_inputs(client, ns).await;
    tokio::spawn(accept_routes(client.clone(), ns.to_owned()));
    let pools = n / 10;
    let nodes: Api<Node> = Api::all(client.clone());
    create_all(
        (0..pools).flat_map(|p| (0..NODES_PER_POOL).map(move |j| (p, j))),
        |(p, j)| {
            let nodes = nodes.clone();
            async move {
                let node = zoned_node(&node_name(p, j), &pool_name(p), "zone-a");
                nodes.create(&PostParams::default(), &node).await.map(drop)
            }
        },
    )
    .await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    create_all(0..n, |i| {
        let (novas, mut nova) = (novas.clone(), example(ns));
        nova.metadata.name = Some(nova_name(i));
        let nova = own_schemas(nova);
        async move { novas.create(&PostParams::default(), &nova).await.map(drop) }
    })
    .await;
    let computes: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    create_all(0..pools, |p| {
        let computes = computes.clone();
        let selector = json!({POOL_LABEL: pool_name(p)});
        let pool = pool(ns, &pool_name(p), &nova_name(p), selector);
        async move {
            computes
                .create(&PostParams::default(), &pool)
                .await
                .map(drop)
        }
    })
    .await;
}

/// Runs `create` over `items`, [`SETUP_PARALLELISM`] at once; any failure ends the run.
async fn create_all<I, F, Fut>(items: I, create: F)
where
    I: Iterator,
    F: Fn(I::Item) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    futures::stream::iter(items.map(create))
        .buffer_unordered(SETUP_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await
        .expect("create");
}

/// Plays the Gateway controller (SIMULATED): every HTTPRoute of `ns` without a parent status
/// is marked Accepted by its first parent, as it appears (a watch, no polling).
async fn accept_routes(client: Client, ns: String) {
    let routes = Api::<DynamicObject>::namespaced_with(client, &ns, &external::http_route());
    let applied = kube::runtime::watcher(routes.clone(), Default::default())
        .default_backoff()
        .applied_objects();
    futures::pin_mut!(applied);
    while let Some(route) = applied.next().await {
        let Ok(route) = route else { continue };
        if route.data["status"]["parents"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
        {
            continue;
        }
        let status = json!({"status": {"parents": [{
            "parentRef": route.data["spec"]["parentRefs"][0],
            "controllerName": "example.com/simulated-gateway",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "message": "SIMULATED gateway: accepted",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                            "observedGeneration": route.metadata.generation.unwrap_or(1)}]
        }]}});
        let _ = routes
            .patch_status(
                &route.name_any(),
                &PatchParams::default(),
                &Patch::Merge(status),
            )
            .await;
    }
}

/// Whether condition `Ready` of an object's status conditions is True.
fn ready(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// How many Novas and pools are Ready, from watch caches (no request per poll).
pub struct Progress {
    novas: kube::runtime::reflector::Store<Nova>,
    pools: kube::runtime::reflector::Store<NovaCompute>,
}

impl Progress {
    /// Starts the two watches of `ns` and waits for their first lists.
    pub async fn follow(client: &Client, ns: &str) -> Self {
        let novas = cache::<Nova>(Api::namespaced(client.clone(), ns));
        let pools = cache::<NovaCompute>(Api::namespaced(client.clone(), ns));
        novas.wait_until_ready().await.expect("Nova cache");
        pools.wait_until_ready().await.expect("pool cache");
        Self { novas, pools }
    }

    /// (Ready Novas, Ready pools).
    pub fn ready(&self) -> (usize, usize) {
        let novas = self
            .novas
            .state()
            .iter()
            .filter(|n| n.status.as_ref().is_some_and(|s| ready(&s.conditions)))
            .count();
        let pools = self
            .pools
            .state()
            .iter()
            .filter(|p| p.status.as_ref().is_some_and(|s| ready(&s.conditions)))
            .count();
        (novas, pools)
    }

    /// The reasons of the conditions that are not True over every Nova and pool, counted (what
    /// a run that does not converge is waiting for).
    pub fn waiting(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        let conditions = self
            .novas
            .state()
            .iter()
            .filter_map(|n| n.status.clone())
            .flat_map(|s| s.conditions)
            .chain(
                self.pools
                    .state()
                    .iter()
                    .filter_map(|p| p.status.clone())
                    .flat_map(|s| s.conditions),
            )
            .filter(|c| c.status != "True" && c.type_ != "Ready")
            .collect::<Vec<_>>();
        for c in conditions {
            *out.entry(format!("{}={}", c.type_, c.reason)).or_default() += 1;
        }
        out
    }
}

fn cache<K>(api: Api<K>) -> kube::runtime::reflector::Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
    K: Send + Sync + 'static,
{
    let (reader, writer) = kube::runtime::reflector::store();
    let stream = kube::runtime::reflector(writer, kube::runtime::watcher(api, Default::default()))
        .default_backoff()
        .applied_objects();
    tokio::spawn(stream.for_each(|_| futures::future::ready(())));
    reader
}
