//! The real tier's one stack per run. Every real test is a module of one test binary
//! (`controller/tests/real`), so the real node and each release's OpenStack are started once,
//! on first use, and shared (`harness::shared_real_node`, `harness::openstack::shared`).
//!
//! The tests can run side by side (`NOVA_REAL_TEST_THREADS`, `scripts/test.sh`), each in a
//! namespace of its own, and nothing one does reaches another: its Nova's schemas are named after its namespace, its RabbitmqCluster gets a broker
//! of its own (Nova's RPC topics are the same in every cell), the harness's hand-written proof
//! Nova names its schemas, database user and compute host after its namespace, its pools select
//! nodes by labels of its own, and the outage drills take away only what the namespace reaches
//! (its broker, its own MariaDB Service, its nova-api). A drill that must stop a shared service
//! (the management API server frozen during a drain) holds the tier alone ([`timed_alone`]);
//! every other test holds it beside the others ([`timed`]).

use std::io::Write;
use std::sync::OnceLock;
use std::time::Instant;

use nova_test_harness::openstack::{self, OpenStack};
use nova_test_harness::simulated::{self, SimulatedOperators};
use nova_test_harness::{ControlPlane, shared_real_node};
use tokio::sync::{OnceCell, RwLock, RwLockReadGuard, RwLockWriteGuard};

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

/// The tier lock: every real test holds it, shared, for its whole run; a drill that stops a
/// service every test uses holds it alone.
static TIER: RwLock<()> = RwLock::const_new(());

/// Holds the tier beside the other tests and starts timing the test: when it ends, its line of
/// the tier's timeline is printed and the tier is let go.
pub async fn timed() -> Timed {
    let tier = Tier::Shared(TIER.read().await);
    Timed::holding(tier)
}

/// Holds the tier alone (the tests running beside it finish first, none starts until it ends)
/// and starts timing the test: for a drill that stops a service every test uses. The drill
/// restores the service before the guard drops.
pub async fn timed_alone() -> Timed {
    let tier = Tier::Alone(TIER.write().await);
    Timed::holding(tier)
}

/// How a test holds the tier (the guard is only held, never read).
#[allow(dead_code)]
enum Tier {
    Shared(RwLockReadGuard<'static, ()>),
    Alone(RwLockWriteGuard<'static, ()>),
}

/// When the first real test of the run started.
static RUN: OnceLock<Instant> = OnceLock::new();

/// A real test's time, printed when it ends (passed or failed) past libtest's capture, so a
/// passing run shows the tier's timeline too.
pub struct Timed {
    since: Instant,
    _tier: Tier,
}

impl Timed {
    fn holding(tier: Tier) -> Self {
        RUN.get_or_init(Instant::now);
        Self {
            since: Instant::now(),
            _tier: tier,
        }
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("a test");
        // Written to the stderr handle itself: libtest captures only the print macros.
        let run = RUN.get().map_or(0.0, |run| run.elapsed().as_secs_f64());
        let _ = writeln!(
            std::io::stderr(),
            "[real tier] {test}: {:.0}s, ended {run:.0}s into the run",
            self.since.elapsed().as_secs_f64()
        );
    }
}
