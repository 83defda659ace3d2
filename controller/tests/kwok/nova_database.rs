//! The Database and DBArchive steps against a real API server. The MariaDB operator is
//! simulated (`nova_testkit::inputs::provide_database`), and the test plays the kubelet for the migration Job's pods: the
//! Job pods are held off the scheduler by a node selector no node carries, then annotated with
//! the exit code and termination message the kwok stage ends them with, and bound to the kwok
//! node. Everything else (the Job controller, the CronJob controller, garbage collection) is
//! the real control plane.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::{JobSpec, NodePlacementSpec, Nova};
use nova_controller::metrics::{JobMetrics, Metrics};
use nova_controller::objects::kinds;
use nova_test_harness::kwok;
use nova_testkit::prelude::*;
use serde_json::json;

/// The node-selector label that keeps the operator's Job pods unscheduled until the test
/// plays the kubelet for them.
const HOLD: (&str, &str) = ("test.nova.c5c3.io/held", "true");

/// A report as the db-sync script writes it, with stray output the parser must drop.
const REPORT: &str = "WARNING: stray line\ncell0=00000000-0000-0000-0000-000000000000\ncell1=2f1e6f3c-7a0b-4d4c-9a51-0c3a1d5f0e11\n";

/// The example Nova whose Job pods wait for the test.
fn held_nova(ns: &str) -> Nova {
    let mut nova = example(ns);
    nova.spec.jobs = Some(JobSpec {
        placement: NodePlacementSpec {
            node_selector: Some(BTreeMap::from([(HOLD.0.into(), HOLD.1.into())])),
            ..Default::default()
        },
        ..Default::default()
    });
    nova
}

/// Plays the kubelet for every held pod of Job `job`: it ends with `exit_code` and `message`.
async fn end_held_pods(
    client: &Client,
    ns: &str,
    job: &str,
    exit_code: i32,
    message: &str,
) -> usize {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let held = pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("pods");
    let mut ended = 0;
    for pod in held.items {
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some();
        if bound || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.name_any();
        pods.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                kwok::EXIT_CODE_ANNOTATION: exit_code.to_string(),
                kwok::TERMINATION_MESSAGE_ANNOTATION: message,
            }}})),
        )
        .await
        .expect("annotate pod");
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                             "target": {"apiVersion": "v1", "kind": "Node", "name": kwok::NODE_NAME}});
        pods.create_subresource::<serde_json::Value, serde_json::Value>(
            "binding",
            &name,
            &PostParams::default(),
            &binding,
        )
        .await
        .expect("bind pod");
        ended += 1;
    }
    ended
}

/// Every event note, for the planted-value check.
async fn event_notes(client: &Client, ns: &str) -> String {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter_map(|e| e.message)
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_no_planted(what: &str, text: &str) {
    for planted in PLANTED {
        assert!(!text.contains(planted), "{what} carries a credential");
    }
}

/// A namespace with every input (the simulated MariaDB operator among them) and a running
/// controller, and the held Nova created in it.
async fn setup(prefix: &str) -> (Client, String, Api<Nova>) {
    let (client, ns, novas, _) = setup_measured(prefix).await;
    (client, ns, novas)
}

/// [`setup`], with the controller's metrics.
async fn setup_measured(prefix: &str) -> (Client, String, Api<Nova>, Metrics) {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace(prefix).await.expect("namespace");
    provide_inputs(&client, &ns).await;
    let metrics = start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    novas
        .create(&PostParams::default(), &held_nova(&ns))
        .await
        .expect("create Nova");
    (client, ns, novas, metrics)
}

/// The per-CR Job counters of the Nova `nova` in `ns`: (succeeded, failed).
fn counted(jobs: &JobMetrics, ns: &str) -> (u64, u64) {
    let total = |result| jobs.total.with_label_values(&["nova", ns, result]).get();
    (total("succeeded"), total("failed"))
}

/// Waits until the counters read `expected` (a stamp that lost a race with another write of
/// the Nova is retried on the next pass), then checks they stay there over more passes.
async fn assert_counted(jobs: &JobMetrics, novas: &Api<Nova>, ns: &str, expected: (u64, u64)) {
    Wait::new(format!("the Job counters to read {expected:?}"), TIMEOUT)
        .until(|| async {
            match counted(jobs, ns) {
                now if now == expected => Seen::Done(()),
                now => Seen::Saw(format!("{now:?}")),
            }
        })
        .await
        .expect("the counters");
    poke(novas, 100 + 10 * expected.0 as u32 + expected.1 as u32).await;
    absence_window(Duration::from_secs(1)).await;
    assert_eq!(
        counted(jobs, ns),
        expected,
        "a terminal Job is counted once"
    );
}

/// Runs the fresh install to DatabaseReady=True.
async fn install(client: &Client, ns: &str, novas: &Api<Nova>) {
    assert_eq!(
        wait_for(novas, "DatabaseReady", "DBSyncInProgress").await,
        "db_sync job is running"
    );
    Wait::new("the db-sync Job to make a pod", TIMEOUT)
        .until(|| async { end_held_pods(client, ns, "nova-db-sync", 0, REPORT).await > 0 })
        .await
        .expect("the db-sync pod");
    assert_eq!(
        wait_for(novas, "DatabaseReady", "DatabaseSynced").await,
        "Database schema is up to date (revision verified)"
    );
}

/// Wakes the controller without changing anything it reads.
async fn poke(novas: &Api<Nova>, n: u32) {
    novas
        .patch(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"test.nova/poke": n.to_string()}}})),
        )
        .await
        .expect("poke");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_install_provisions_syncs_maps_the_cells_and_schedules_the_archive() {
    let (client, ns, novas) = setup("nova-db-install").await;

    // The MariaDB objects, each sized and granted as the flow specifies.
    let objects = |kind| Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &kind);
    let [databases, users, grants] = kinds::mariadb_children().map(objects);
    wait_for(&novas, "DatabaseReady", "DBSyncInProgress").await;
    let user = |name: &'static str| {
        let users = users.clone();
        async move { users.get(name).await.expect("user").data["spec"].clone() }
    };
    assert_eq!(user("nova-api").await["maxUserConnections"], 44);
    assert_eq!(user("nova").await["maxUserConnections"], 48);
    assert_eq!(
        user("nova").await["passwordSecretKeyRef"],
        json!({"name": "nova-db", "key": "password"})
    );
    let cell0 = grants
        .get("nova-nova-cell0")
        .await
        .expect("cell0 grant")
        .data["spec"]
        .clone();
    assert_eq!(
        (&cell0["database"], &cell0["username"]),
        (&json!("nova_cell0"), &json!("nova"))
    );
    assert_eq!(
        databases.get("nova-nova-cell0").await.expect("cell0").data["spec"]["name"],
        "nova_cell0"
    );

    // The db-sync Job carries no credential, only references to the derived Secrets.
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let job = jobs.get("nova-db-sync").await.expect("db-sync Job");
    assert_no_planted(
        "the db-sync Job",
        &serde_json::to_string(&job).expect("json"),
    );
    assert_eq!(job.spec.as_ref().and_then(|s| s.backoff_limit), Some(4));

    install(&client, &ns, &novas).await;
    let status = novas
        .get("nova")
        .await
        .expect("nova")
        .status
        .expect("status");
    assert_eq!(status.installed_release.as_deref(), Some("2026.1"));
    let cells: Vec<(String, String)> = status.cells.into_iter().map(|c| (c.name, c.uuid)).collect();
    assert_eq!(
        cells,
        [
            (
                "cell0".into(),
                "00000000-0000-0000-0000-000000000000".into()
            ),
            (
                "cell1".into(),
                "2f1e6f3c-7a0b-4d4c-9a51-0c3a1d5f0e11".into()
            )
        ]
    );
    assert_eq!(
        wait_for(&novas, "DBArchiveReady", "DBArchiveScheduled").await,
        "DB archive CronJob nova-db-archive runs on schedule \"@daily\""
    );
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), &ns);
    let cron = cron_jobs.get("nova-db-archive").await.expect("CronJob");
    assert_eq!(cron.spec.concurrency_policy.as_deref(), Some("Forbid"));

    // A downgrade, a skipped release and an image naming another release are refused, and
    // nothing is promoted.
    for (release, tag, reason) in [
        ("2025.2", "2025.2", "DowngradeNotSupported"),
        ("2027.1", "2027.1", "UpgradePathInvalid"),
        ("2026.1", "2026.2", "ImageReleaseMismatch"),
    ] {
        novas
            .patch(
                "nova",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"openStackRelease": release, "image": {"tag": tag}}}),
                ),
            )
            .await
            .expect("bump");
        wait_for(&novas, "DatabaseReady", reason).await;
        let status = novas
            .get("nova")
            .await
            .expect("nova")
            .status
            .expect("status");
        assert_eq!(
            status.installed_release.as_deref(),
            Some("2026.1"),
            "{reason}"
        );
        assert_eq!(status.upgrade_phase, None, "{reason}");
    }
    let reasons = event_reasons(&client, &ns).await;
    for expected in ["DowngradeNotSupported", "UpgradePathInvalid"] {
        assert!(
            reasons.iter().any(|r| r == expected),
            "{expected}: {reasons:?}"
        );
    }
    assert!(
        !reasons.iter().any(|r| r == "DatabaseSynced"),
        "DatabaseReady turning True is the record, no event repeats it: {reasons:?}"
    );
    assert_no_planted("an event", &event_notes(&client, &ns).await);
    let conditions =
        serde_json::to_string(&novas.get("nova").await.expect("nova").status).expect("json");
    assert_no_planted("a condition", &conditions);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_db_sync_job_reports_db_sync_failed() {
    let (client, ns, novas) = setup("nova-db-failing").await;
    wait_for(&novas, "DatabaseReady", "DBSyncInProgress").await;
    // Five attempts (backoffLimit 4), the Job controller backing off 10, 20, 40 and 80 s
    // between them.
    // Each look also ends the attempt's pod (the test plays the kubelet).
    let message = about_nova(
        &novas,
        "nova",
        "DatabaseReady=DBSyncFailed",
        Duration::from_secs(300),
    )
    .until(|| async {
        end_held_pods(&client, &ns, "nova-db-sync", 1, "").await;
        Ok(condition(&novas, "DatabaseReady")
            .await
            .filter(|(_, reason, _)| reason == "DBSyncFailed")
            .map(|(_, _, message)| message))
    })
    .await
    .expect("the db-sync Job failed");
    assert_eq!(
        message,
        format!("db_sync job failed: job has permanently failed: {ns}/nova-db-sync")
    );
    assert!(
        event_reasons(&client, &ns)
            .await
            .iter()
            .any(|r| r == "DBSyncFailed")
    );
    let status = novas
        .get("nova")
        .await
        .expect("nova")
        .status
        .expect("status");
    assert_eq!(status.installed_release, None, "nothing promoted");
}

/// A run of the archive, created as the CronJob controller would (controlled by the CronJob,
/// carrying its labels), ending with `exit_code`.
async fn archive_run(client: &Client, ns: &str, cron: &CronJob, name: &str, exit_code: i32) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let labels = cron
        .spec
        .job_template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels, "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": cron.name_any(),
            "uid": cron.uid(), "controller": true}]},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": {kwok::EXIT_CODE_ANNOTATION: exit_code.to_string()}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "db-archive", "image": "nova"}]}}}
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("create run");
    Wait::new(format!("the run {name} to end"), TIMEOUT)
        .for_object(&jobs, name, |job| {
            job.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True"
                    })
                })
        })
        .await
        .expect("the run ended");
}

#[tokio::test(flavor = "multi_thread")]
async fn archive_runs_fail_recover_and_a_suspension_outranks_a_failure_then_deletion_releases() {
    let (client, ns, novas, metrics) = setup_measured("nova-db-archive").await;
    install(&client, &ns, &novas).await;
    // The db-sync Job is counted once, its UID stamped on the Nova, however often it is seen.
    assert_counted(&metrics.db_sync, &novas, &ns, (1, 0)).await;
    let sync_uid = Api::<Job>::namespaced(client.clone(), &ns)
        .get("nova-db-sync")
        .await
        .expect("db-sync Job")
        .uid();
    let stamped = novas.get("nova").await.expect("nova");
    assert_eq!(
        stamped
            .annotations()
            .get("cobaltcore.c5c3.io/last-db-sync-job-uid"),
        sync_uid.as_ref()
    );
    wait_for(&novas, "DBArchiveReady", "DBArchiveScheduled").await;
    let cron_jobs: Api<CronJob> = Api::namespaced(client.clone(), &ns);
    let cron = cron_jobs.get("nova-db-archive").await.expect("CronJob");

    archive_run(&client, &ns, &cron, "nova-db-archive-1", 1).await;
    poke(&novas, 1).await;
    assert_eq!(
        wait_for(&novas, "DBArchiveReady", "DBArchiveJobFailed").await,
        "DB archive Job nova-db-archive-1 failed"
    );
    assert_counted(&metrics.db_archive, &novas, &ns, (0, 1)).await;
    assert!(
        event_reasons(&client, &ns)
            .await
            .iter()
            .any(|r| r == "DBArchiveJobFailed")
    );

    // Creation timestamps have a one-second resolution: the next run must be the younger.
    tokio::time::sleep(Duration::from_secs(1)).await;
    archive_run(&client, &ns, &cron, "nova-db-archive-2", 0).await;
    poke(&novas, 2).await;
    wait_for(&novas, "DBArchiveReady", "DBArchiveScheduled").await;
    assert_counted(&metrics.db_archive, &novas, &ns, (1, 1)).await;
    assert_eq!(
        metrics
            .db_archive
            .duration
            .with_label_values(&["nova", &ns])
            .get_sample_count(),
        2
    );

    // Creation timestamps have a one-second resolution: the next run must be the younger.
    tokio::time::sleep(Duration::from_secs(1)).await;
    archive_run(&client, &ns, &cron, "nova-db-archive-3", 1).await;
    novas
        .patch(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"dbArchive": {"suspend": true}}})),
        )
        .await
        .expect("suspend");
    assert_eq!(
        wait_for(&novas, "DBArchiveReady", "DBArchiveSuspended").await,
        "DB archive CronJob nova-db-archive is suspended; its last run, Job nova-db-archive-3, failed"
    );
    assert_eq!(
        condition(&novas, "DBArchiveReady")
            .await
            .map(|c| c.0)
            .as_deref(),
        Some("True")
    );
    let cron = cron_jobs.get("nova-db-archive").await.expect("CronJob");
    assert_eq!(cron.spec.suspend, Some(true));
    assert_counted(&metrics.db_archive, &novas, &ns, (1, 2)).await;

    // Deletion: the MariaDB objects of both schemas go, the finalizer is held exactly one
    // more pass while they were live, and the user's credential Secrets stay.
    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete");
    about_nova(
        &novas,
        "nova",
        "the finalizer released",
        Duration::from_secs(120),
    )
    .for_deletion(&novas, "nova")
    .await
    .expect("the Nova is gone");
    // The controller drops the series once the pass that released the finalizer ends, which
    // may be after the watch saw the Nova go.
    let series = format!("namespace=\"{ns}\"");
    Wait::new("the deleted Nova's series to be dropped", TIMEOUT)
        .until(|| async {
            let exported = metrics.render();
            if exported.contains(&series) {
                Seen::Saw(exported)
            } else {
                Seen::Done(())
            }
        })
        .await
        .expect("the series dropped");
    let reasons = event_reasons(&client, &ns).await;
    let count = |reason: &str| reasons.iter().filter(|r| *r == reason).count();
    assert_eq!(
        (count("FinalizingDatabase"), count("DatabaseFinalized")),
        (1, 1),
        "{reasons:?}"
    );
    for kind in kinds::mariadb_children() {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &kind);
        assert!(
            api.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .is_empty()
        );
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    for owned_by_user in [
        "nova-api-db",
        "nova-db",
        "nova-keystone",
        "nova-metadata-secret",
    ] {
        assert!(
            secrets.get_opt(owned_by_user).await.expect("get").is_some(),
            "{owned_by_user} was deleted"
        );
    }
}
