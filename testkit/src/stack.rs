//! The real tier's one stack per run. Every real test is a module of one test binary
//! (`controller/tests/real`), so the real node and each release's OpenStack are started once,
//! on first use, and shared (`harness::shared_real_node`, `harness::openstack::shared`).
//!
//! What they share is guarded by one tier lock: a test that only adds its own namespace's
//! objects holds it [`shared`]; a test that stops a shared service (the outage drills), changes
//! what every test sees (the Keystone catalog, the node's labels, the proof Nova's schemas and
//! compute host) or shares the MariaDB users of a Nova named `nova` holds it [`exclusive`], and
//! restores what it stopped before the guard drops. An exclusive holder starts from a quiet
//! stack: the namespaces earlier tests left are deleted and their pods waited out first.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use nova_test_harness::openstack::{self, OpenStack};
use nova_test_harness::simulated::{self, SimulatedOperators};
use nova_test_harness::{ControlPlane, shared_real_node};
use tokio::sync::{OnceCell, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::wait::{Seen, Wait};

static TIER: RwLock<()> = RwLock::const_new(());

/// The release whose OpenStack the real tier deploys (the nova images of every release run
/// against it; an upgrade changes the operator's images, not the services').
pub const RELEASE: &str = "2026.1";

/// The real node and the tier's OpenStack, with the simulated MariaDB, RabbitMQ and External
/// Secrets operators running for every namespace: all started on first use, once per run.
/// One instance of the operators serves the whole run (two would race on the same objects).
pub async fn openstack() -> (&'static ControlPlane, &'static OpenStack) {
    static OPERATORS: OnceCell<SimulatedOperators> = OnceCell::const_new();
    let cp = shared_real_node().await.expect("the real node");
    let os = openstack::shared(cp, RELEASE).await.expect("the OpenStack");
    OPERATORS
        .get_or_init(|| async { simulated::start(os).expect("the simulated operators") })
        .await;
    (cp, os)
}

/// Holds the stack beside other shared holders.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    TIER.read().await
}

/// Holds the stack alone, from a quiet start: what earlier tests left is cleared first.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    let alone = TIER.write().await;
    clear_leftovers().await;
    alone
}

/// The namespaces that are not a test's.
const KEPT: [&str; 5] = [
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    openstack::NAMESPACE,
];

/// How long the pods of earlier tests may take to go (a nova process stops within its 30 s
/// grace period, a busy node takes longer to reap it).
const LEFTOVERS_GONE: Duration = Duration::from_secs(180);

/// Deletes every test namespace (holding the lock alone, each is what an earlier test left,
/// finished or failed) and waits until no pod of theirs runs. Their nova processes would
/// otherwise still consume the shared broker's queues (a conductor of another test's cell
/// answered a new compute's calls) and take the node's CPU.
async fn clear_leftovers() {
    let (cp, _) = openstack().await;
    let client = cp.client().expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = namespaces
        .list(&ListParams::default())
        .await
        .expect("namespaces");
    for ns in listed.items {
        let name = ns.name_any();
        if !KEPT.contains(&name.as_str()) && ns.metadata.deletion_timestamp.is_none() {
            let _ = namespaces.delete(&name, &DeleteParams::background()).await;
        }
    }
    let pods: Api<Pod> = Api::all(client);
    Wait::new("the pods earlier tests left to go", LEFTOVERS_GONE)
        .until(|| async {
            let listed = match pods.list(&ListParams::default()).await {
                Ok(listed) => listed,
                Err(e) => return Seen::Saw(format!("listing the pods: {e}")),
            };
            let left: Vec<String> = listed
                .items
                .iter()
                .filter(|p| !KEPT.contains(&p.namespace().unwrap_or_default().as_str()))
                .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
                .collect();
            if left.is_empty() {
                Seen::Done(())
            } else {
                Seen::Saw(format!("{left:?}"))
            }
        })
        .await
        .expect("a quiet stack");
}
