//! Stall drills on the real node against the real OpenStack (issue 32 part 5): the peers of
//! the Nova do not go away, they stop answering. The in-process controller keeps running
//! throughout; nothing is restarted but what an SRE would touch.
//!
//! - MariaDB black-holed mid db-sync: a drop rule in the harness's own nftables table
//!   (`nova_test_harness::node::black_hole`, removed afterwards, and by the node's teardown if the test
//!   dies) drops every packet of a connection to the cluster IP of the namespace's own MariaDB
//!   Service (the one `openstack_outages` builds), so the tests beside it keep their database
//!   and the Nova's clients get no refusal, only silence. A config change (`logging.debug`)
//!   re-runs the db-sync Job into it; the Nova's `spec.jobs.migrationDeadlineSeconds` is the
//!   minimum, 60.
//! - RabbitMQ frozen past its heartbeat: every process of the namespace's broker pod gets
//!   SIGSTOP, found by its cgroup on the node, for longer than oslo.messaging's
//!   `heartbeat_timeout_threshold` (60 s, the default: the operator does not set it), then
//!   SIGCONT.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_test_harness::images::{nova_image, pinned};
use nova_test_harness::node;
use nova_test_harness::openstack::{MARIADB, RABBITMQ};
use nova_testkit::prelude::{holds, reason};
use nova_testkit::real::*;
use serde_json::json;

use super::openstack_outages::{change_spec, children, lost, own_mariadb_service, watch_until};

/// The Nova's `spec.jobs.migrationDeadlineSeconds`: the least the API accepts.
const DEADLINE: i64 = 60;
/// How long the broker stays frozen: past the 60 s heartbeat threshold, with room for the
/// heartbeat thread's check interval.
const FREEZE: Duration = Duration::from_secs(90);

/// Undoes the drill's faults if it fails midway, so the next test on the node does not meet
/// them.
#[derive(Default)]
struct Faults {
    frozen: Vec<u32>,
}

impl Drop for Faults {
    fn drop(&mut self) {
        node::resume(&self.frozen);
        let _ = node::restore_links();
    }
}

/// Waits until the db-sync Job that is not `old` has failed, returning its failure reason and
/// how long it ran (from its start time to its Failed condition).
async fn db_sync_fails(
    client: &Client,
    ns: &str,
    old: &str,
    timeout: Duration,
) -> (String, Option<i64>) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let mut seen = None;
    while started.elapsed() < timeout {
        if let Some(job) = jobs.get_opt("nova-db-sync").await.expect("db-sync Job")
            && job.uid().as_deref() != Some(old)
        {
            let status = job.status.as_ref();
            let failed = status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Failed" && c.status == "True"));
            if let Some(failed) = failed {
                let ran = status
                    .and_then(|s| s.start_time.as_ref())
                    .zip(failed.last_transition_time.as_ref())
                    .map(|(start, end)| end.0.as_second() - start.0.as_second());
                return (failed.reason.clone().unwrap_or_default(), ran);
            }
            seen = job.status;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    dump(client, ns).await;
    panic!("the re-run db-sync Job did not fail within {timeout:?}; its status: {seen:?}");
}

/// Injects: a Nova with the minimum migration deadline, Ready; its MariaDB black-holed (a drop
/// rule) before a config change re-runs db-sync. Asserts: the Job fails by its deadline
/// (`DeadlineExceeded`, within the deadline plus a bounded margin), `DatabaseReady` goes
/// False/`DBSyncFailed`; with the rule removed and the failed Job deleted (the spec's recovery,
/// common-types §3.10) the Nova is Ready again with the same controller. Then injects the
/// namespace's broker frozen (SIGSTOP) past the heartbeat threshold and resumed; asserts the
/// Nova is Ready again by itself. Throughout: no child lost but the Job and ConfigMap the config
/// change replaces, and the schemas' tables and cell mappings unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn black_holed_mariadb_fails_db_sync_by_its_deadline_and_a_frozen_broker_recovers() {
    let _timed = nova_testkit::stack::timed().await;
    let setup = start("stalls").await;
    let (client, ns) = (setup.client.clone(), setup.ns.clone());
    own_mariadb_service(&client, setup.os, &ns).await;
    let mariadb_ip = Api::<Service>::namespaced(client.clone(), &ns)
        .get(MARIADB)
        .await
        .expect("the MariaDB Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .expect("the MariaDB Service's cluster IP");
    let image = pinned(&nova_image(RELEASE)).expect("the nova image's digest");
    let mut nova = real_nova(&ns, &image);
    nova.spec
        .jobs
        .get_or_insert_with(Default::default)
        .migration_deadline_seconds = Some(DEADLINE);
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let owner = novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create Nova")
        .uid()
        .expect("uid");
    watch_until(&client, &ns, "Ready=True", REAL_TIMEOUT, |n| {
        holds(n, "Ready", "True")
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let synced = jobs.get("nova-db-sync").await.expect("db-sync Job");
    assert_eq!(
        synced.spec.as_ref().and_then(|s| s.active_deadline_seconds),
        Some(DEADLINE)
    );
    let schemas_before = schemas(&client, &ns, "schemas-before").await;
    let before = children(&client, &ns, &owner).await;
    let mut faults = Faults::default();

    node::black_hole(mariadb_ip).expect("the MariaDB black hole");
    let outage = Instant::now();
    eprintln!("drill: MariaDB at {mariadb_ip} black-holed");
    change_spec(&client, &ns, json!({"logging": {"debug": true}})).await;
    let margin = Duration::from_secs(120);
    let (why, ran) = db_sync_fails(
        &client,
        &ns,
        &synced.uid().unwrap_or_default(),
        Duration::from_secs(DEADLINE as u64) + margin,
    )
    .await;
    eprintln!(
        "drill: db-sync Job failed ({why}) {:.0}s after the black hole, having run {ran:?} s",
        outage.elapsed().as_secs_f64()
    );
    assert_eq!(why, "DeadlineExceeded");
    watch_until(
        &client,
        &ns,
        "DatabaseReady=False/DBSyncFailed",
        REAL_TIMEOUT,
        |n| {
            holds(n, "DatabaseReady", "False") && reason(n, "DatabaseReady") == Some("DBSyncFailed")
        },
    )
    .await;
    let nova = novas.get("nova").await.expect("nova");
    let message = nova
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == "DatabaseReady")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains(&format!("job has permanently failed: {ns}/nova-db-sync")),
        "{message}"
    );

    node::restore_links().expect("the MariaDB black hole removed");
    // The spec's recovery from a permanently failed Job: delete it; the operator runs it anew.
    jobs.delete("nova-db-sync", &DeleteParams::background())
        .await
        .expect("delete the failed db-sync Job");
    let restored = Instant::now();
    watch_until(&client, &ns, "MariaDB: Ready again", REAL_TIMEOUT, |n| {
        holds(n, "Ready", "True")
    })
    .await;
    eprintln!(
        "drill: MariaDB recovered {:.0}s after the rule's removal and the Job's deletion ({:.0}s in all)",
        restored.elapsed().as_secs_f64(),
        outage.elapsed().as_secs_f64()
    );
    let after = children(&client, &ns, &owner).await;
    assert_eq!(
        lost(&before, &after, &["Job", "ConfigMap"]),
        Vec::<String>::new()
    );
    assert_eq!(
        schemas(&client, &ns, "schemas-after-mariadb").await,
        schemas_before
    );

    let selector = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get(RABBITMQ)
        .await
        .expect("the broker Deployment")
        .spec
        .and_then(|s| s.selector.match_labels)
        .expect("the broker's selector");
    let selector: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let broker = pods
        .list(&ListParams::default().labels(&selector.join(",")))
        .await
        .expect("the broker pods")
        .items;
    let [broker] = broker.as_slice() else {
        panic!("one broker pod expected: {broker:?}");
    };
    let broker_uid = broker.uid().expect("the broker pod's uid");
    faults.frozen = node::pod_pids(&broker_uid);
    assert!(
        !faults.frozen.is_empty(),
        "no process of pod {broker_uid} on the node"
    );
    let before = after;
    node::stop(&faults.frozen);
    let frozen = Instant::now();
    eprintln!("drill: broker frozen ({} processes)", faults.frozen.len());
    watch_until(&client, &ns, "RabbitMQ: frozen", FREEZE * 2, |_| {
        frozen.elapsed() >= FREEZE
    })
    .await;
    node::resume(&faults.frozen);
    let resumed = Instant::now();
    watch_until(&client, &ns, "RabbitMQ: Ready again", REAL_TIMEOUT, |n| {
        holds(n, "Ready", "True")
    })
    .await;
    eprintln!(
        "drill: RabbitMQ recovered {:.0}s after SIGCONT",
        resumed.elapsed().as_secs_f64()
    );
    let broker = pods.get(&broker.name_any()).await.expect("the broker pod");
    eprintln!(
        "drill: broker container restarts: {:?}",
        broker
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .map(|c| c.restart_count)
            .collect::<Vec<_>>()
    );
    assert_eq!(broker.uid().as_deref(), Some(broker_uid.as_str()));
    assert_eq!(
        lost(&before, &children(&client, &ns, &owner).await, &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        schemas(&client, &ns, "schemas-after-rabbitmq").await,
        schemas_before
    );
    drop(faults);
    finish(&client, &ns).await;
}
