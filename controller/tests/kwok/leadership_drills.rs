//! Leadership that cannot split (issue 32 part 2): a standby whose wall clock runs ahead, a
//! leader frozen past its lease whose writes the API server's audit log must not show once a
//! standby took over, and the hand-over on SIGTERM. Each replica is the real binary
//! (`replica.rs`); what is measured is printed, never asserted as a time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::replica::Replica;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use nova_api::v1alpha1::Nova;
use nova_test_harness::{ControlPlane, Options};
use nova_testkit::prelude::*;

/// The lease duration the binary declares (`leadership::LEASE_DURATION`).
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// The Lease `name` in `leases`, as the API server has it now.
async fn lease(leases: &Api<Lease>, name: &str) -> Option<Lease> {
    leases.get_opt(name).await.ok().flatten()
}

/// The holder the Lease names, if any.
fn holder(lease: &Option<Lease>) -> Option<String> {
    lease.as_ref()?.spec.as_ref()?.holder_identity.clone()
}

/// Waits until the Lease `name` names `identity`; fails with the Lease it last saw.
async fn until_held_by(leases: &Api<Lease>, name: &str, identity: &str, timeout: Duration) {
    Wait::new(format!("{identity} to hold the Lease {name}"), timeout)
        .every(Duration::from_millis(50))
        .until(|| async {
            let seen = lease(leases, name).await;
            if holder(&seen).as_deref() == Some(identity) {
                Seen::Done(())
            } else {
                Seen::Saw(format!("the Lease: {seen:?}"))
            }
        })
        .await
        .expect("the holder");
}

/// A Lease in a namespace of its own on the shared control plane, and where its replicas log.
struct Election {
    kubeconfig: PathBuf,
    ns: String,
    name: &'static str,
    leases: Api<Lease>,
    logs: tempfile::TempDir,
}

impl Election {
    async fn new(prefix: &str, name: &'static str) -> Self {
        let cp = nova_test_harness::shared().await.expect("control plane");
        let ns = cp.namespace(prefix).await.expect("namespace");
        Self {
            kubeconfig: cp.kubeconfig_path().to_owned(),
            leases: Api::namespaced(cp.client().expect("client"), &ns),
            ns,
            name,
            logs: tempfile::tempdir().expect("log dir"),
        }
    }

    /// Starts the replica `identity` with `env` added to its environment.
    fn replica(&self, identity: &str, env: &[(&str, &str)]) -> Replica {
        Replica::start_with_env(
            identity,
            &self.kubeconfig,
            &self.ns,
            (&self.ns, self.name),
            self.logs.path(),
            &["--clusters-namespace=".to_owned()],
            env,
        )
    }

    async fn until_held_by(&self, identity: &str, timeout: Duration) {
        until_held_by(&self.leases, self.name, identity, timeout).await;
    }
}

/// The libfaketime preload library of the `libfaketime` package
/// (`tests/install-host-packages.sh` installs it).
fn libfaketime() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.path().join("faketime/libfaketime.so.1"))
        .find(|lib| lib.exists());
    found.expect("libfaketime.so.1 is not installed: run tests/install-host-packages.sh")
}

/// The wall-clock time of the first line `log` holds (the tracing timestamp that leads it).
fn first_logged_at(log: &Path) -> Option<Timestamp> {
    std::fs::read_to_string(log)
        .ok()?
        .lines()
        .next()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Injects a standby whose wall clock runs 30 s ahead (libfaketime, `FAKETIME=+30s`, its
/// monotonic clock left true with `DONT_FAKE_MONOTONIC=1`) beside a leader that renews; to
/// that standby the leader's renewTime always looks 30 s old, twice the lease duration.
/// Asserts that the skew is in effect (its log's timestamps run ahead) and that for three
/// lease durations every sample of the Lease names the leader and the skewed standby never
/// reports itself leader.
#[tokio::test(flavor = "multi_thread")]
async fn a_standby_whose_clock_runs_ahead_never_takes_a_renewed_lease() {
    let election = Election::new("lease-skew", "nova-operator-skew").await;
    let leader = election.replica("leader", &[]);
    election.until_held_by("leader", TIMEOUT).await;

    let preload = libfaketime();
    let skewed = election.replica(
        "skewed",
        &[
            ("LD_PRELOAD", preload.to_str().expect("path")),
            ("FAKETIME", "+30s"),
            ("DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    let logged_at = Wait::new("the skewed standby's first log line", TIMEOUT)
        .until(|| async { first_logged_at(&skewed.log) })
        .await
        .expect("a log line");
    let ahead = logged_at.duration_since(Timestamp::now());
    println!("the skewed standby's clock runs {ahead:#} ahead");
    assert!(
        ahead.as_secs() >= 20,
        "libfaketime did not move the standby's clock: it logged at {logged_at}, {ahead:#} ahead"
    );

    let sampled = Instant::now();
    let mut samples = 0;
    while sampled.elapsed() < 3 * LEASE_DURATION {
        let seen = lease(&election.leases, election.name).await;
        assert_eq!(
            holder(&seen).as_deref(),
            Some("leader"),
            "the skewed standby took a renewed lease after {:.1}s: {seen:?}",
            sampled.elapsed().as_secs_f64()
        );
        assert_eq!(
            skewed.metric("nova_operator_leader").await,
            0.0,
            "the skewed standby reports itself leader"
        );
        samples += 1;
        // The sampler's tick, not a wait for state.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "{samples} samples over {:.0}s: the Lease named the leader throughout",
        sampled.elapsed().as_secs_f64()
    );
    let skewed_log = skewed.kill().await;
    leader.kill().await;
    assert!(
        !skewed_log.contains("acquired leadership"),
        "the skewed standby led"
    );
}

/// Injects SIGTERM into the leader of two replicas, as a rolling update of the controller
/// does. Asserts that the leader exits cleanly (status 0) having handed the Lease back, and
/// that the standby holds the Lease within a bounded wait (5 s, failing with the Lease it
/// saw); prints the measured gap from the signal to the standby's lead.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_on_the_leader_hands_the_lease_to_the_standby() {
    let election = Election::new("lease-handover", "nova-operator-handover").await;
    let leader = election.replica("first", &[]);
    election.until_held_by("first", TIMEOUT).await;
    let standby = election.replica("second", &[]);
    // The standby looks at the Lease before the signal.
    Wait::new("the standby to wait for leadership", TIMEOUT)
        .until(|| async {
            std::fs::read_to_string(&standby.log)
                .is_ok_and(|log| log.contains("waiting for leadership"))
        })
        .await
        .expect("the standby waits");

    let signalled = Instant::now();
    leader.signal("TERM");
    election
        .until_held_by("second", Duration::from_secs(5))
        .await;
    let gap = signalled.elapsed();
    println!(
        "SIGTERM to the leader: the standby held the Lease {:.2}s later",
        gap.as_secs_f64()
    );
    let (status, log) = leader.exit(Duration::from_secs(30)).await;
    assert!(status.success(), "the leader exited with {status}:\n{log}");
    assert!(log.contains("handed the lease back"), "{log}");
    Wait::new("the standby to report the lead", TIMEOUT)
        .until(|| async { standby.metric("nova_operator_leader").await == 1.0 })
        .await
        .expect("the standby leads");
    standby.kill().await;
}

/// One write the API server's audit log recorded: who sent it, when it arrived, what it did.
struct Write {
    user_agent: String,
    received: Timestamp,
    verb: String,
    resource: String,
    name: String,
    code: u16,
}

/// Every completed write in the audit log at `path`.
fn audited_writes(path: &Path) -> Vec<Write> {
    let text = std::fs::read_to_string(path).expect("the audit log");
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete")
        .filter(|event| {
            matches!(
                event["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .map(|event| Write {
            user_agent: event["userAgent"].as_str().unwrap_or_default().to_owned(),
            received: event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("requestReceivedTimestamp"),
            verb: event["verb"].as_str().unwrap_or_default().to_owned(),
            resource: event["objectRef"]["resource"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            name: event["objectRef"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            code: event["responseStatus"]["code"]
                .as_u64()
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or_default(),
        })
        .collect()
}

/// Whether the replica `identity` sent `write` (the binary's user agent names it).
fn sent_by(write: &Write, identity: &str) -> bool {
    write.user_agent.ends_with(&format!("({identity})"))
}

/// Injects a leader frozen (SIGSTOP) mid-convergence of two Novas until the standby took its
/// lapsed lease and converged them, then thawed (SIGCONT) with its reconciles mid-pass and its
/// caches stale. Asserts, from the API server's audit log (each replica's writes told apart by
/// the user agent naming it), that the thawed replica started no write after the standby's
/// write that took the Lease: the only writes of it the API server received after the takeover
/// are requests already past its fence when it froze, which its HTTP connections send on
/// thawing (received within [`IN_FLIGHT_WINDOW`] of the thaw; they are printed with the
/// answers they got). Also that it stopped leading and exited; prints how many writes its
/// fence kept back.
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_frozen_past_its_lease_writes_nothing_after_the_takeover() {
    const NAME: &str = "nova-operator-audit";
    /// How many of its children the leader has written when it is frozen.
    const WRITES_BEFORE_FREEZE: usize = 6;
    let cp = ControlPlane::start_with(Options {
        audit_log: true,
        ..Options::default()
    })
    .await
    .expect("control plane");
    let client = cp.client().expect("client");
    let mut namespaces = Vec::new();
    for i in 0..2 {
        let ns = cp
            .namespace(&format!("lease-audit-{i}"))
            .await
            .expect("namespace");
        provide_inputs(&client, &ns).await;
        namespaces.push(ns);
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let logs = tempfile::tempdir().expect("log dir");
    let extra = [
        format!("--health-check-address={}", simulated_nova_api().await),
        "--clusters-namespace=".to_owned(),
    ];
    let start = |identity: &str| {
        Replica::start(
            identity,
            cp.kubeconfig_path(),
            "",
            ("default", NAME),
            logs.path(),
            &extra,
        )
    };
    let frozen = start("frozen");
    until_held_by(&leases, NAME, "frozen", TIMEOUT).await;
    let standby = start("standby");
    for ns in &namespaces {
        Api::<Nova>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &example(ns))
            .await
            .expect("create Nova");
    }
    // Mid-convergence, mid-pass: as soon as the audit log shows the leader writing.
    let audit = cp.audit_log_path().expect("an audit log");
    Wait::new("the leader's writes", TIMEOUT)
        .every(Duration::from_millis(20))
        .until(|| async {
            let written = audited_writes(audit)
                .iter()
                .filter(|w| sent_by(w, "frozen") && w.resource != "leases")
                .count();
            (written >= WRITES_BEFORE_FREEZE).then_some(())
        })
        .await
        .expect("the leader writes");
    frozen.signal("STOP");
    let stopped = Instant::now();
    until_held_by(&leases, NAME, "standby", 4 * LEASE_DURATION).await;
    println!(
        "the standby took the Lease {:.1}s after the leader froze",
        stopped.elapsed().as_secs_f64()
    );
    for ns in &namespaces {
        wait_converged(&Api::<Nova>::namespaced(client.clone(), ns), "nova", || {
            Ok(())
        })
        .await;
    }
    let thawed = Timestamp::now();
    frozen.signal("CONT");
    let (status, log) = frozen.exit(Duration::from_secs(30)).await;
    assert!(!status.success(), "the thawed leader went on: {status}");
    assert!(log.contains("stopped leading"), "{log}");
    let kept_back = log.matches("a write was kept back").count();
    standby.kill().await;

    let writes = audited_writes(audit);
    let takeover = writes
        .iter()
        .filter(|w| sent_by(w, "standby") && w.resource == "leases" && w.name == NAME)
        .find(|w| (200..300).contains(&w.code))
        .expect("the standby's write that took the Lease")
        .received;
    let (before, after): (Vec<&Write>, Vec<&Write>) = writes
        .iter()
        .filter(|w| sent_by(w, "frozen"))
        .partition(|w| w.received <= takeover);
    println!(
        "the frozen leader: {} writes before the takeover at {takeover}, {} after; its fence kept back {kept_back} on thawing; the standby: {} writes",
        before.len(),
        after.len(),
        writes.iter().filter(|w| sent_by(w, "standby")).count()
    );
    assert!(
        !before.is_empty(),
        "the leader's writes were not told apart"
    );
    let shown = |w: &&Write| {
        format!(
            "{} {}/{} ({}) at {}",
            w.verb, w.resource, w.name, w.code, w.received
        )
    };
    println!(
        "in flight at the freeze, received after the takeover: {:?}",
        after.iter().map(shown).collect::<Vec<_>>()
    );
    let window = k8s_openapi::jiff::SignedDuration::try_from(IN_FLIGHT_WINDOW).expect("window");
    let started_later: Vec<String> = after
        .iter()
        .filter(|w| w.received < thawed || w.received > thawed + window)
        .map(shown)
        .collect();
    assert!(
        started_later.is_empty(),
        "writes after the takeover that were not in flight at the freeze (thawed at {thawed}): {started_later:#?}"
    );
}

/// How soon after a thaw the requests that were in flight at the freeze reach the API server.
const IN_FLIGHT_WINDOW: Duration = Duration::from_secs(2);
