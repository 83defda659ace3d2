//! The Nova the operator builds, run for real: the controller (in-process, as the other suites
//! run it) reconciles a Nova on the real node against the harness's real OpenStack (MariaDB,
//! RabbitMQ, memcached, Keystone, Placement), the MariaDB, RabbitMQ and External Secrets
//! operators simulated with real effects (`nova_test_harness::simulated`). The operator's
//! `{name}-db-sync` Job runs the real `nova-manage` and `status.cells` lists the cells nova
//! mapped; the five Deployments run as real pods from the operator's ConfigMap, Secrets and
//! environment; the API and metadata front ends serve their root documents through their
//! Services; the conductor and scheduler register as nova services; the HealthCheck step
//! probes the real nova-api through its Service; the Nova reaches `Ready=True`. Then a second
//! db-sync maps no duplicate cell and the archive CronJob's Job runs the real
//! `nova-manage db archive_deleted_rows` over a row that was really soft-deleted.
//!
//! The Nova names its image by digest (the harness tags the node's images with their digests):
//! a tag-pinned image renders `imagePullPolicy: Always`, which a node without a registry cannot
//! satisfy. The NetworkPolicy objects are rendered, but the node's CNI does not enforce them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_test_harness::images::{TOOLS_IMAGE, nova_image, pinned};
use nova_test_harness::{http, pods};
use nova_testkit::prelude::{Seen, Wait, holds, reason, wait_nova_for};
use nova_testkit::real::*;
use serde_json::{Value, json};

/// The five Deployments and their containers.
const WORKLOADS: [(&str, &str); 5] = [
    ("nova-conductor", "nova-conductor"),
    ("nova-scheduler", "nova-scheduler"),
    ("nova-metadata", "nova-metadata"),
    ("nova-novncproxy", "nova-novncproxy"),
    ("nova", "nova-api"),
];

/// `nova` with network isolation on: the policies are rendered and reported, but the node's
/// CNI bridge does not enforce NetworkPolicies, so they change no traffic here.
fn isolated(mut nova: Nova) -> Nova {
    let mut spec = serde_json::to_value(&nova.spec).expect("spec");
    spec["networkPolicy"] =
        json!({"ingress": [{"namespaceSelector": {"matchLabels": {"team": "edge"}}}]});
    nova.spec = serde_json::from_value(spec).expect("spec");
    nova
}

/// cell0 with the nil UUID and cell1 with a generated one, nothing else.
fn assert_two_cells(cells: &[(String, String)]) {
    assert_eq!(cells.len(), 2, "{cells:?}");
    assert!(cells.contains(&("cell0".into(), CELL0.into())), "{cells:?}");
    let cell1 = cells.iter().find(|(n, _)| n == "cell1").expect("cell1");
    assert!(
        cell1.1.len() == 36
            && cell1.1 != CELL0
            && cell1.1.chars().filter(|c| *c == '-').count() == 4,
        "{cells:?}"
    );
}

/// The (first) pod of a Job.
async fn job_pod(client: &Client, ns: &str, job: &str) -> Option<Pod> {
    let all: Api<Pod> = Api::namespaced(client.clone(), ns);
    all.list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("pods")
        .items
        .into_iter()
        .next()
}

/// Soft-deletes a security group named `name` in the cell schema `days_ago` days ago, for
/// each pair, as nova marks a deleted row.
async fn soft_delete(client: &Client, ns: &str, job: &str, rows: &[(&str, u32)]) {
    let values: Vec<String> = rows
        .iter()
        .map(|(name, days)| {
            format!("(NOW(), NOW() - INTERVAL {days} DAY, 1, '{name}', 'x', 'u', 'p')")
        })
        .collect();
    let sql = format!(
        "INSERT INTO {}.security_groups (created_at, deleted_at, deleted, name, description, user_id, project_id) VALUES {}; SELECT 1",
        cell_schema(ns),
        values.join(", ")
    );
    query(client, ns, job, &sql).await;
}

/// (rows in the shadow table, rows left in the table) of the security group `name`.
async fn archived(client: &Client, ns: &str, job: &str, name: &str) -> (u32, u32) {
    let counts = query(
        client,
        ns,
        job,
        &format!(
            "SELECT (SELECT COUNT(*) FROM {schema}.shadow_security_groups WHERE name = '{name}'), \
             (SELECT COUNT(*) FROM {schema}.security_groups WHERE name = '{name}')",
            schema = cell_schema(ns)
        ),
    )
    .await;
    let counts: Vec<u32> = counts
        .split_whitespace()
        .map(|c| c.parse().expect("a count"))
        .collect();
    (counts[0], counts[1])
}

/// Runs the archive CronJob's job template now, as the CronJob controller would (controlled
/// by the CronJob, its labels), and waits for it to succeed.
async fn run_archive(client: &Client, ns: &str, name: &str) {
    let crons: Api<CronJob> = Api::namespaced(client.clone(), ns);
    let cron = crons.get("nova-db-archive").await.expect("CronJob");
    let template = cron.spec.job_template.clone();
    let job: Job = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": template.metadata.as_ref().and_then(|m| m.labels.clone()),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": cron.name_any(),
                                 "uid": cron.uid(), "controller": true}]
        },
        "spec": template.spec,
    }))
    .expect("Job");
    Api::<Job>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &job)
        .await
        .expect("archive Job");
    let ended = pods::wait_for_job_termination(client, ns, name, "db-archive", REAL_TIMEOUT)
        .await
        .expect("archive ended");
    assert_eq!(ended.exit_code, 0, "{name}: {ended:?}");
}

/// The pods of the Nova's API Deployment.
async fn api_pods(client: &Client, ns: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(
            &ListParams::default()
                .labels("app.kubernetes.io/component=api,app.kubernetes.io/instance=nova"),
        )
        .await
        .expect("API pods")
        .items
}

/// GETs `path` of Service `service` from a pod (the cluster's own DNS and kube-proxy).
async fn get_through_service(
    client: &Client,
    ns: &str,
    job: &str,
    service: &str,
    port: u16,
) -> String {
    probe_job(
        client,
        ns,
        job,
        TOOLS_IMAGE,
        &format!("curl -sf --max-time 10 http://{service}.{ns}.svc:{port}/ | head -c 3000 > /dev/termination-log"),
        json!([]),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operators_nova_runs_for_real_and_reaches_ready() {
    let _timed = nova_testkit::stack::timed().await;
    let setup = start("nova-real").await;
    let (os, metrics) = (setup.os, &setup.metrics);
    let (client, ns) = (setup.client.clone(), setup.ns.clone());
    let image = pinned(&nova_image(RELEASE)).expect("the nova image's digest");
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let t = Instant::now();
    novas
        .create(&PostParams::default(), &isolated(real_nova(&ns, &image)))
        .await
        .expect("create Nova");

    // The db-sync Job the operator created ran the real nova-manage.
    let nova = wait_nova(&client, &ns, "DatabaseReady=True", |n| {
        holds(n, "DatabaseReady", "True")
    })
    .await;
    let first = cells(&nova);
    assert_two_cells(&first);
    let sync = job_pod(&client, &ns, "nova-db-sync")
        .await
        .expect("the db-sync pod");
    let container = &sync.spec.as_ref().expect("spec").containers[0];
    assert_eq!(container.image.as_deref(), Some(image.as_str()));
    assert_eq!(container.image_pull_policy.as_deref(), Some("IfNotPresent"));
    let report =
        pods::wait_for_job_termination(&client, &ns, "nova-db-sync", "db-sync", REAL_TIMEOUT)
            .await
            .expect("db-sync ended");
    assert_eq!(report.exit_code, 0, "{report:?}");
    for (name, uuid) in &first {
        assert!(
            report.message.contains(&format!("{name}={uuid}")),
            "{report:?}"
        );
    }
    eprintln!(
        "db-sync: real nova-manage mapped {first:?} after {:.0}s",
        t.elapsed().as_secs_f64()
    );

    // The five workloads run as real pods, and the Nova reaches Ready through the real probe.
    let nova = wait_nova(&client, &ns, "Ready=True", |n| holds(n, "Ready", "True")).await;
    assert_eq!(reason(&nova, "NovaAPIReady"), Some("APIHealthy"));
    assert_eq!(
        reason(&nova, "NetworkPolicyReady"),
        Some("NetworkPolicyReady")
    );
    let policies: Api<k8s_openapi::api::networking::v1::NetworkPolicy> =
        Api::namespaced(client.clone(), &ns);
    for policy in ["nova", "nova-novncproxy"] {
        assert!(
            policies.get_opt(policy).await.expect("get").is_some(),
            "NetworkPolicy {policy} (rendered; the node does not enforce it)"
        );
    }
    assert_eq!(
        metrics.nova_ready.with_label_values(&["nova", &ns]).get(),
        1
    );
    assert_eq!(
        metrics
            .db_sync
            .total
            .with_label_values(&["nova", &ns, "succeeded"])
            .get(),
        1,
        "the real db-sync Job is counted once"
    );
    eprintln!("Ready=True after {:.0}s", t.elapsed().as_secs_f64());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    for (name, container) in WORKLOADS {
        let d = deployments.get(name).await.expect("Deployment");
        let ready = d
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        assert!(ready >= 1, "{name} has no ready pod");
        let spec = d.spec.expect("spec").template.spec.expect("pod spec");
        let c = spec
            .containers
            .iter()
            .find(|c| c.name == container)
            .expect("container");
        assert_eq!(c.image.as_deref(), Some(image.as_str()), "{name}");
    }

    // The front ends answer their root documents through their Services.
    let root: Value = serde_json::from_str(
        &get_through_service(&client, &ns, "get-api-root", "nova", 8774).await,
    )
    .expect("the API root is JSON");
    let ids: Vec<&str> = root["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert!(ids.contains(&"v2.1"), "{root}");
    let metadata =
        get_through_service(&client, &ns, "get-metadata-root", "nova-metadata", 8775).await;
    assert!(metadata.lines().any(|l| l == "latest"), "{metadata:?}");

    // The conductor and the scheduler registered as nova services.
    let api_pod = api_pods(&client, &ns)
        .await
        .into_iter()
        .find_map(|p| p.status?.pod_ip)
        .expect("an API pod IP");
    let api: SocketAddr = format!("{api_pod}:8774").parse().expect("address");
    let token = os.admin_token().await.expect("token");
    Wait::new("nova-conductor and nova-scheduler up", REAL_TIMEOUT)
        .until(|| async {
            let r = http::request(
                api,
                "GET",
                "/v2.1/os-services",
                &[("X-Auth-Token", &token)],
                None,
            )
            .await
            .expect("GET /os-services");
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let body = r.json().expect("JSON");
            let up = |binary: &str| {
                body["services"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|s| s["binary"] == binary && s["state"] == "up")
            };
            if up("nova-conductor") && up("nova-scheduler") {
                Seen::Done(())
            } else {
                Seen::Saw(body.to_string())
            }
        })
        .await
        .expect("the services came up");

    // A second db-sync (the Job deleted, the operator runs it anew) maps no duplicate cell.
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let first_uid = jobs.get("nova-db-sync").await.expect("Job").uid();
    jobs.delete("nova-db-sync", &DeleteParams::foreground())
        .await
        .expect("delete");
    let second = Wait::new("the db-sync Job to run again", REAL_TIMEOUT)
        .until(|| async {
            let job = jobs.get_opt("nova-db-sync").await?;
            Ok::<_, anyhow::Error>(job.filter(|job| {
                job.uid() != first_uid
                    && job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0
            }))
        })
        .await
        .expect("the second db-sync Job");
    let report =
        pods::wait_for_job_termination(&client, &ns, "nova-db-sync", "db-sync", REAL_TIMEOUT)
            .await
            .expect("second db-sync ended");
    assert_eq!(report.exit_code, 0, "{report:?}");
    let reported: Vec<&str> = report.message.lines().collect();
    assert_eq!(reported.len(), 2, "{reported:?}");
    let nova = wait_nova(&client, &ns, "DatabaseReady=True again", |n| {
        holds(n, "DatabaseReady", "True")
    })
    .await;
    assert_eq!(cells(&nova), first, "the second run changed the cells");
    eprintln!(
        "second db-sync (Job {:?}) mapped no duplicate cell",
        second.uid()
    );

    // The archive CronJob's Job runs the real nova-manage over really soft-deleted rows: all
    // of them without a retention window, only those deleted before it with one.
    soft_delete(&client, &ns, "soft-delete", &[("now-by-nova-real", 0)]).await;
    run_archive(&client, &ns, "nova-db-archive-now").await;
    assert_eq!(
        archived(&client, &ns, "archived", "now-by-nova-real").await,
        (1, 0)
    );
    let nova = wait_nova(&client, &ns, "DBArchiveReady=True", |n| {
        holds(n, "DBArchiveReady", "True")
    })
    .await;
    assert_eq!(reason(&nova, "DBArchiveReady"), Some("DBArchiveScheduled"));
    novas
        .patch(
            "nova",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"dbArchive": {"retentionDays": 2}}})),
        )
        .await
        .expect("retention window");
    let crons: Api<CronJob> = Api::namespaced(client.clone(), &ns);
    Wait::new("the window to reach the CronJob", REAL_TIMEOUT)
        .until(|| async {
            let cron = crons.get("nova-db-archive").await?;
            let spec = serde_json::to_string(&cron.spec).expect("json");
            Ok::<_, anyhow::Error>(
                spec.contains(r#"{"name":"RETENTION_DAYS","value":"2"}"#)
                    .then_some(()),
            )
        })
        .await
        .expect("the CronJob carries the window");
    soft_delete(
        &client,
        &ns,
        "soft-delete-windowed",
        &[("old-by-nova-real", 10), ("recent-by-nova-real", 0)],
    )
    .await;
    run_archive(&client, &ns, "nova-db-archive-windowed").await;
    assert_eq!(
        archived(&client, &ns, "archived-old", "old-by-nova-real").await,
        (1, 0)
    );
    assert_eq!(
        archived(&client, &ns, "archived-recent", "recent-by-nova-real").await,
        (0, 1),
        "a row deleted within the window stays"
    );
    Wait::new("the two archive runs counted", Duration::from_secs(60))
        .until(|| async {
            let counted = metrics
                .db_archive
                .total
                .with_label_values(&["nova", &ns, "succeeded"])
                .get();
            if counted == 2 {
                Seen::Done(())
            } else {
                Seen::Saw(format!("{counted} counted"))
            }
        })
        .await
        .expect("the archive runs counted");
    eprintln!(
        "archive: real nova-manage moved the soft-deleted rows to their shadow table, the window kept the recent one"
    );

    // uWSGI stops on the SIGTERM after the preStop sleep (without --die-on-term, uWSGI 2.0
    // reloads on SIGTERM and is killed only when the 30-second grace period ends).
    let api_pod = api_pods(&client, &ns)
        .await
        .into_iter()
        .next()
        .expect("an API pod")
        .name_any();
    let t = Instant::now();
    let all: Api<Pod> = Api::namespaced(client.clone(), &ns);
    all.delete(&api_pod, &DeleteParams::default())
        .await
        .expect("delete the API pod");
    Wait::new("the API pod to go away", Duration::from_secs(60))
        .until(|| async { Ok(all.get_opt(&api_pod).await?.is_none().then_some(())) })
        .await
        .expect("the API pod went away");
    let took = t.elapsed();
    eprintln!(
        "the API pod stopped {:.1}s after its deletion (preStop 5 s, grace 30 s)",
        took.as_secs_f64()
    );
    assert!(
        took < Duration::from_secs(20),
        "uWSGI did not stop on SIGTERM: {took:?}"
    );
    finish(&client, &ns).await;
}

/// A release upgrade 2026.1 → 2026.2 on the real node: the expand, migrate and contract Jobs
/// run the real nova-manage of the target release's image against the schemas 2026.1 made,
/// the five roles roll onto the new image, and `installedRelease` is promoted.
#[tokio::test(flavor = "multi_thread")]
async fn a_release_upgrade_runs_the_target_releases_phase_jobs_for_real() {
    let _timed = nova_testkit::stack::timed().await;
    let setup = start("nova-upgrade").await;
    let (client, ns) = (setup.client.clone(), setup.ns.clone());
    let from = pinned(&nova_image("2026.1")).expect("the 2026.1 image");
    let to = pinned(&nova_image("2026.2")).expect("the 2026.2 image");
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let mut nova = real_nova(&ns, &from);
    nova.spec.api_database.database = "nova_upg_api".into();
    nova.spec.database.database = "nova_upg".into();
    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create Nova");
    let t = Instant::now();
    wait_nova(&client, &ns, "Ready=True at 2026.1", |n| {
        holds(n, "Ready", "True")
    })
    .await;
    eprintln!("2026.1 Ready after {:.0}s", t.elapsed().as_secs_f64());

    let t = Instant::now();
    let digest = to.split_once('@').expect("digest").1;
    novas
        .patch(
            "nova",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"openStackRelease": "2026.2", "image": {"digest": digest}}}),
            ),
        )
        .await
        .expect("upgrade");
    wait_nova_for(
        &client,
        &ns,
        "installedRelease 2026.2",
        Duration::from_secs(1200),
        |n| {
            n.status.as_ref().is_some_and(|s| {
                s.installed_release.as_deref() == Some("2026.2") && s.upgrade_phase.is_none()
            })
        },
    )
    .await;
    // The promoting pass said so; the next one already re-runs db-sync from the new image
    // (its pod template changed), so the condition has moved on by now.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("UpgradeComplete"))
        .filter_map(|e| e.message)
        .collect();
    assert_eq!(
        notes,
        ["Database schema is up to date (upgraded 2026.1 → 2026.2)"]
    );
    for (job, container) in [
        ("nova-db-expand", "db-expand"),
        ("nova-db-migrate", "db-migrate"),
        ("nova-db-contract", "db-contract"),
    ] {
        let pod = job_pod(&client, &ns, job).await.expect("phase pod");
        let image = pod.spec.as_ref().expect("spec").containers[0].image.clone();
        assert_eq!(image.as_deref(), Some(to.as_str()), "{job}");
        let ended = pods::wait_for_job_termination(&client, &ns, job, container, REAL_TIMEOUT)
            .await
            .expect("phase ended");
        assert_eq!(ended.exit_code, 0, "{job}: {ended:?}");
    }
    eprintln!(
        "upgraded 2026.1 → 2026.2 after {:.0}s",
        t.elapsed().as_secs_f64()
    );
    wait_nova_for(
        &client,
        &ns,
        "Ready=True at 2026.2",
        Duration::from_secs(900),
        |n| holds(n, "Ready", "True"),
    )
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    for (name, container) in WORKLOADS {
        let d = deployments.get(name).await.expect("Deployment");
        let spec = d.spec.expect("spec").template.spec.expect("pod spec");
        let c = spec
            .containers
            .iter()
            .find(|c| c.name == container)
            .expect("container");
        assert_eq!(c.image.as_deref(), Some(to.as_str()), "{name}");
    }
    eprintln!("2026.2 Ready after {:.0}s", t.elapsed().as_secs_f64());
    finish(&client, &ns).await;
}
