//! The controller OOM-killed during a real db-sync (issue 32 part 5).
//!
//! **Injects**: the controller runs as the real `nova-controller` binary (`replica.rs`, the
//! kwok tier's leadership drills' replica), scoped to the test's namespace, inside a memory
//! cgroup of its own (`/sys/fs/cgroup[/memory]/nova-test-oom-<pid>`: cgroup v2 where the
//! memory controller is there, else v1's memory hierarchy, as on this machine). Once the
//! controller has created the Nova's db-sync Job, the cgroup's limit is set just above the
//! controller's anonymous memory (its log's page cache would be reclaimed first) and the Nova
//! gets an annotation of about 200 KiB that the controller's watch must decode and cache, so
//! the kernel OOM-kills it within seconds, while the Job still runs. Then the limit is lifted and the controller started again in the same cgroup, as a
//! Deployment's restart would.
//!
//! **Asserts**: the kill is the kernel's OOM kill (the cgroup's `oom_kill` count and SIGKILL
//! as the exit status) and lands mid db-sync (the Job not complete); after the restart the
//! Nova reaches Ready with exactly one db-sync Job, the one that ran before the kill (same
//! UID, succeeded once, no failed pod), the real MariaDB holds each cell mapping once (cell0
//! and the Nova's cell: two rows) and the Nova's status lists those two cells.
//!
//! The cgroup is removed and every process in it killed on every path (`Cage`'s drop).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::replica::Replica;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;
use nova_test_harness::images::{nova_image, pinned};
use nova_testkit::prelude::*;
use nova_testkit::real::*;

/// How far above the controller's usage the limit goes: less than what decoding and caching
/// the annotated Nova takes.
const SLACK: u64 = 256 * 1024;
/// The annotation that makes the controller allocate (below the API server's 256 KiB bound
/// on a object's annotations).
const BALLAST: usize = 200 * 1024;
/// The bound on the OOM kill once the limit is set.
const KILLED: Duration = Duration::from_secs(90);

/// A memory cgroup of the test's own, removed on drop with every process in it killed.
struct Cage {
    dir: PathBuf,
    v2: bool,
}

impl Cage {
    fn create() -> Self {
        let name = format!("nova-test-oom-{}", std::process::id());
        let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
        let dir = if v2 {
            let control = Path::new("/sys/fs/cgroup/cgroup.subtree_control");
            let enabled = std::fs::read_to_string(control).expect("the root's controllers");
            if !enabled.split_whitespace().any(|c| c == "memory") {
                std::fs::write(control, "+memory").expect("enable the memory controller");
            }
            Path::new("/sys/fs/cgroup").join(name)
        } else {
            Path::new("/sys/fs/cgroup/memory").join(name)
        };
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        Self { dir, v2 }
    }

    /// The cgroup's file called `v2` under cgroup v2, `v1` under v1.
    fn file(&self, v2: &str, v1: &str) -> PathBuf {
        self.dir.join(if self.v2 { v2 } else { v1 })
    }

    fn read(&self, v2: &str, v1: &str) -> String {
        let path = self.file(v2, v1);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    /// Moves process `pid` into the cgroup.
    fn admit(&self, pid: u32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).expect("admit the process");
    }

    /// The memory the cgroup's processes use now, in bytes.
    fn usage(&self) -> u64 {
        let usage = self.read("memory.current", "memory.usage_in_bytes");
        usage.trim().parse().expect("a byte count")
    }

    /// The anonymous memory of the cgroup's processes (what reclaim cannot take back: there
    /// is no swap), in bytes.
    fn anon(&self) -> u64 {
        let key = if self.v2 { "anon " } else { "total_rss " };
        self.read("memory.stat", "memory.stat")
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|n| n.trim().parse().ok())
            .expect("the anonymous memory in memory.stat")
    }

    /// Sets the limit to the first of `bytes`, `bytes` + 1 MiB, ... the kernel accepts (v1
    /// refuses a limit below what it cannot reclaim); returns it.
    fn tighten(&self, bytes: u64) -> u64 {
        let path = self.file("memory.max", "memory.limit_in_bytes");
        (0..256)
            .map(|step| bytes + step * 1024 * 1024)
            .find(|limit| std::fs::write(&path, limit.to_string()).is_ok())
            .unwrap_or_else(|| panic!("no limit accepted above {bytes}: {}", self.state()))
    }

    /// Sets the cgroup's memory limit (`None`: none).
    fn limit(&self, bytes: Option<u64>) {
        let value = match (bytes, self.v2) {
            (Some(bytes), _) => bytes.to_string(),
            (None, true) => "max".to_owned(),
            (None, false) => "-1".to_owned(),
        };
        let path = self.file("memory.max", "memory.limit_in_bytes");
        std::fs::write(&path, &value)
            .unwrap_or_else(|e| panic!("write {value} to {}: {e}", path.display()));
    }

    /// How many processes of the cgroup the kernel OOM-killed.
    fn oom_kills(&self) -> u64 {
        self.read("memory.events", "memory.oom_control")
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// What the cgroup's counters say, for a failure's message.
    fn state(&self) -> String {
        format!(
            "usage {} bytes, limit {}, oom_kill {}",
            self.usage(),
            self.read("memory.max", "memory.limit_in_bytes").trim(),
            self.oom_kills()
        )
    }
}

impl Drop for Cage {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid])
                .status();
        }
        // A killed process leaves the cgroup once the kernel has reaped it: removing the
        // cgroup is retried for up to 5 s (a drop cannot await the test kit's waits).
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("the cgroup {} could not be removed", self.dir.display());
    }
}

/// Where a controller process runs: the cluster it reaches, the namespace it reconciles, the
/// API health probe's address and the directory it logs into.
struct Placement<'a> {
    kubeconfig: &'a Path,
    ns: &'a str,
    probe: String,
    logs: &'a Path,
}

/// Starts the controller binary as `identity` and moves it into `cage`.
fn start_controller_in(cage: &Cage, identity: &str, at: &Placement<'_>) -> Replica {
    let (ns, probe) = (at.ns, &at.probe);
    let replica = Replica::start(
        identity,
        at.kubeconfig,
        ns,
        (ns, "nova-controller"),
        at.logs,
        &[
            "--leader-elect=false".to_owned(),
            format!("--health-check-address={probe}"),
        ],
    );
    cage.admit(replica.child.id().expect("the controller runs"));
    replica
}

/// The db-sync Jobs in `ns` and the pods they ran, by Job name.
async fn db_sync_jobs(client: &Client, ns: &str, name: &str) -> (Vec<Job>, Vec<Pod>) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let all = jobs.list(&ListParams::default()).await.expect("Jobs");
    let db_sync: Vec<Job> = all
        .items
        .into_iter()
        .filter(|j| j.name_any().starts_with(name))
        .collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ran = pods
        .list(&ListParams::default().labels(&format!("job-name={name}")))
        .await
        .expect("pods")
        .items;
    (db_sync, ran)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_oom_killed_mid_db_sync_leaves_one_job_and_one_mapping_per_cell() {
    let _timed = nova_testkit::stack::timed().await;
    let prepared = prepare("controller-oom").await;
    let (client, ns) = (prepared.client.clone(), prepared.ns.clone());
    let (cp, _) = nova_testkit::stack::openstack().await;
    let image = pinned(&nova_image(RELEASE)).expect("the nova image");
    let logs = tempfile::tempdir().expect("log dir");
    let at = Placement {
        kubeconfig: cp.kubeconfig_path(),
        ns: &ns,
        probe: prepared.probe.to_string(),
        logs: logs.path(),
    };
    let cage = Cage::create();
    let first = start_controller_in(&cage, "oom-before", &at);

    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    novas
        .create(&PostParams::default(), &real_nova(&ns, &image))
        .await
        .expect("create Nova");
    let name = NovaNames::new("nova").db_sync();
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let job = Wait::new(format!("the Job {name}"), REAL_TIMEOUT)
        .until(|| async { Ok::<_, anyhow::Error>(jobs.get_opt(&name).await?) })
        .await
        .expect("the db-sync Job");
    let uid = job.uid().expect("a uid");

    // The page cache the controller's log writes are charged with is reclaimed before any
    // OOM kill: the limit goes just above its anonymous memory.
    let (usage, anon) = (cage.usage(), cage.anon());
    let limit = cage.tighten(anon + SLACK);
    eprintln!("the controller uses {usage} bytes, {anon} anonymous; limit set to {limit}");
    let mut ballast = 0u32;
    Wait::new("the controller OOM-killed", KILLED)
        .every(Duration::from_secs(2))
        .until(|| {
            ballast += 1;
            let (novas, cage) = (&novas, &cage);
            let value = format!("{ballast}{}", "x".repeat(BALLAST));
            async move {
                if cage.oom_kills() > 0 {
                    return Seen::Done(());
                }
                touch(novas, "nova", &value).await;
                Seen::Saw(cage.state())
            }
        })
        .await
        .expect("the kernel kills the controller");
    let (status, log) = first.exit(KILLED).await;
    eprintln!(
        "the controller was OOM-killed ({}) after {ballast} annotations; its last lines: {}",
        cage.state(),
        log.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
    );
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status}");
    assert_eq!(cage.oom_kills(), 1, "{}", cage.state());
    let job = jobs.get(&name).await.expect("the db-sync Job");
    assert_eq!(job.uid().as_deref(), Some(uid.as_str()));
    assert!(
        job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) == 0,
        "the kill landed mid db-sync: {:?}",
        job.status
    );

    // Restored: no limit, the controller started again in the same cgroup.
    cage.limit(None);
    let _second = start_controller_in(&cage, "oom-after", &at);
    let nova = wait_nova(&client, &ns, "Ready=True after the restart", |n| {
        holds(n, "Ready", "True")
    })
    .await;

    let (db_sync, ran) = db_sync_jobs(&client, &ns, &name).await;
    let uids: Vec<Option<String>> = db_sync.iter().map(ResourceExt::uid).collect();
    assert_eq!(
        uids,
        vec![Some(uid)],
        "one db-sync Job, the one from before the kill"
    );
    let status = db_sync[0].status.clone().unwrap_or_default();
    assert_eq!(
        (status.succeeded, status.failed.unwrap_or(0)),
        (Some(1), 0),
        "{status:?}"
    );
    eprintln!("the db-sync Job ran {} pod(s)", ran.len());
    let counts = schemas(&client, &ns, "oom-schemas").await;
    let (tables, mappings) = counts.split_once(',').expect("t,c");
    eprintln!("the schemas hold {tables} tables and {mappings} cell mappings");
    assert_eq!(mappings, "2", "cell0 and cell1, once each");
    let listed = cells(&nova);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed.contains(&("cell0".to_owned(), CELL0.to_owned())),
        "{listed:?}"
    );
    finish(&client, &ns).await;
}
