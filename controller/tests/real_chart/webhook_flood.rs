//! The chart's webhook under an exhaustion flood from inside the cluster, on the real node
//! (issue 33: limits that keep admission up).
//!
//! Injects, from two pods of the tools image in the release's namespace: `h2load` (nghttp2's
//! load client) for 60 s on 4 HTTP/2 connections of up to 200 streams each, every stream
//! POSTing a 3 MB body to the validating webhook's pod; then, from the second pod (another
//! address), a bash loop opening 3,000 TCP connections to it that never send a byte. Meanwhile the API server's own
//! reviews: a server-side dry-run create of the sample Nova every 200 ms.
//! Asserts: every one of the API server's reviews is answered (its latencies printed, p50 and
//! p99), the webhook container is never restarted (no OOM kill under its chart limit), and its
//! peak resident memory (`VmHWM`, printed) stays under that limit; h2load's own summary is
//! printed.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_test_harness::images::tools_pod_spec;
use nova_test_harness::node;
use nova_testkit::prelude::*;
use serde_json::json;

use crate::chart_install::{available, on_the_real_node};

/// The webhook container's memory limit in the chart's values.
const WEBHOOK_MEMORY_LIMIT: u64 = 128 * 1024 * 1024;
/// The validating webhook's path for a Nova.
const VALIDATE: &str = "/validate-nova-openstack-c5c3-io-v1alpha1-nova";
/// The bound of the flood: h2load runs for 60 s.
const FLOOD_BOUND: Duration = Duration::from_secs(240);

/// A pod of the tools image running `script`.
fn tools_pod(name: &str, script: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": tools_pod_spec(&["bash", "-c", script]),
    }))
    .expect("pod")
}

/// The one webhook pod of the release in `ns`.
pub(crate) async fn webhook_pod(client: &Client, ns: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels("app.kubernetes.io/component=webhook"))
        .await
        .expect("pods");
    let mut running: Vec<Pod> = pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    assert_eq!(running.len(), 1, "one webhook replica");
    running.remove(0)
}

/// The peak resident memory of the webhook's process in the pod with uid `uid` (found by its
/// cgroup on the node), from `/proc/<pid>/status`.
fn webhook_peak_rss(uid: &str) -> u64 {
    let pid = node::pod_pids(uid)
        .into_iter()
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "nova-webhook")
        })
        .expect("the webhook's process on the node");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib * 1024
}

/// The restarts of the webhook pod's container.
pub(crate) fn restarts(pod: &Pod) -> i32 {
    pod.status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .map(|c| c.restart_count)
        .sum()
}

/// Whether the pod `name` has ended (succeeded or failed).
async fn ended(pods: &Api<Pod>, name: &str) -> bool {
    pods.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.status?.phase)
        .is_some_and(|phase| phase == "Succeeded" || phase == "Failed")
}

#[tokio::test]
async fn the_webhook_stays_up_under_an_exhaustion_flood_from_the_cluster() {
    let _timed = nova_testkit::stack::timed().await;
    let (cp, client, home, chart) = on_the_real_node().await;
    let ns = cp.namespace("nova-flood").await.expect("namespace");
    helm_ok(
        home.path(),
        cp,
        &scoped_install_args("nova-flood", &ns, &chart),
    );
    available(&client, &ns, "nova-flood-nova-operator-webhook").await;
    // The Deployment is Available before kube-proxy maps its Service to the pod: until then the
    // API server's calls are refused (a run's first reviews failed so). The flood starts once
    // the API server reaches the webhook through the Service.
    webhook_denies(&client, &ns).await;
    let webhook = webhook_pod(&client, &ns).await;
    let ip = webhook
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("pod IP");
    let uid = webhook.uid().expect("uid");
    let target = format!("{ip}:9443");

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let streams = format!(
        "head -c 3000000 /dev/zero | tr '\\0' ' ' > /tmp/body && \
         h2load -c 4 -m 200 -D 60 -d /tmp/body -H 'content-type: application/json' \
         https://{target}{VALIDATE}"
    );
    pods.create(&PostParams::default(), &tools_pod("streams", &streams))
        .await
        .expect("the stream flood's pod");
    let idle = format!(
        "for i in $(seq 3000); do exec {{fd}}<>/dev/tcp/{ip}/9443 || true; done 2>/dev/null; \
         echo opened; sleep 60"
    );
    pods.create(&PostParams::default(), &tools_pod("idle", &idle))
        .await
        .expect("the idle flood's pod");

    // The API server's reviews meanwhile, until h2load is done.
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let (mut answered, mut failed) = (Vec::new(), Vec::new());
    let started = Instant::now();
    while !ended(&pods, "streams").await {
        assert!(
            started.elapsed() < FLOOD_BOUND,
            "h2load still running after {FLOOD_BOUND:?}"
        );
        let review = Instant::now();
        match novas.create(&dry_run, &example(&ns)).await {
            Ok(_) => answered.push(review.elapsed()),
            Err(e) => failed.push(e.to_string()),
        }
        // The pace of an operator's writes, not a wait for state.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let flooded = started.elapsed();
    let h2load = nova_test_harness::pods::logs(&client, &ns, "streams", "main")
        .await
        .expect("h2load's log");
    let idle_log = nova_test_harness::pods::logs(&client, &ns, "idle", "main")
        .await
        .expect("the idle flood's log");
    let after = webhook_pod(&client, &ns).await;
    let peak = webhook_peak_rss(&uid);
    answered.sort();
    let at = |q: f64| answered[((answered.len() - 1) as f64 * q) as usize];
    let summary: Vec<&str> = h2load
        .lines()
        .filter(|l| l.starts_with("requests:") || l.starts_with("status codes:"))
        .collect();
    println!(
        "exhaustion flood: {flooded:?}; h2load {summary:?}; idle flood {:?}; the API server's reviews: {} answered, p50 {:?}, p99 {:?}, {} failed; webhook peak RSS {} MiB (limit {} MiB), {} restarts",
        idle_log.trim(),
        answered.len(),
        at(0.5),
        at(0.99),
        failed.len(),
        peak / (1024 * 1024),
        WEBHOOK_MEMORY_LIMIT / (1024 * 1024),
        restarts(&after)
    );
    assert!(
        failed.is_empty(),
        "the API server's reviews failed: {failed:?}"
    );
    assert!(summary.len() == 2, "h2load ran to its summary:\n{h2load}");
    assert_eq!(after.uid(), Some(uid), "the same webhook pod");
    assert_eq!(restarts(&after), 0, "the webhook was never restarted");
    assert!(peak < WEBHOOK_MEMORY_LIMIT, "peak RSS {peak} bytes");

    for name in ["streams", "idle"] {
        let _ = pods.delete(name, &DeleteParams::default()).await;
    }
    helm_ok(
        home.path(),
        cp,
        &["uninstall", "nova-flood", "--namespace", &ns, "--wait"],
    );
}
