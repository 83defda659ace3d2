//! The real tier's one stack per run. Every real test is a module of one test binary
//! (`controller/tests/real`), so the real node and each release's OpenStack are started once,
//! on first use, and shared (`harness::shared_real_node`, `harness::openstack::shared`).
//!
//! What they share is guarded by one tier lock: a test that only adds its own namespace's
//! objects holds it [`shared`]; a test that stops a shared service (the outage drills), changes
//! what every test sees (the Keystone catalog, the node's labels, the proof Nova's schemas and
//! compute host) or shares the MariaDB users of a Nova named `nova` holds it [`exclusive`], and
//! restores what it stopped before the guard drops.

use nova_test_harness::openstack::{self, OpenStack};
use nova_test_harness::simulated::{self, SimulatedOperators};
use nova_test_harness::{ControlPlane, shared_real_node};
use tokio::sync::{OnceCell, RwLock, RwLockReadGuard, RwLockWriteGuard};

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

/// Holds the stack alone.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    TIER.write().await
}
