//! Stopping the real node leaves the machine as it found it: no processes, links, nftables or
//! iptables rules, mounts, cgroups, sysctls or fixed paths left behind. A binary of its own,
//! because the node it starts and stops must be the only one of its process.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use nova_test_harness::images::TOOLS_IMAGE;
use nova_test_harness::node::{self, Layout, NodeLock};
use nova_test_harness::{ControlPlane, Options, pods, testbin_dir};
use nova_testkit::wait::Wait;

/// What the node may change on the host, as comparable text per aspect.
fn snapshot() -> BTreeMap<&'static str, String> {
    let run = |program: &str, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("{program} failed: {e}"))
    };
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_else(|_| "(absent)".into());
    let mut s = BTreeMap::new();
    s.insert("links", {
        let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names.join(" ")
    });
    // Counters move with any traffic; the rules themselves must not.
    let ruleset = run("nft", &["list", "ruleset"]);
    s.insert(
        "nftables",
        ruleset
            .lines()
            .map(|l| match l.find("counter packets") {
                Some(i) => l[..i].to_owned(),
                None => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    );
    s.insert("mounts", {
        let mut targets: Vec<String> = read("/proc/self/mountinfo")
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
            .collect();
        targets.sort();
        targets.join("\n")
    });
    s.insert("cgroups", {
        let mut dirs = Vec::new();
        for h in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            for d in std::fs::read_dir(h.path()).into_iter().flatten().flatten() {
                if d.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(d.path().display().to_string());
                }
            }
        }
        dirs.sort();
        dirs.join("\n")
    });
    for path in [
        "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/net/ipv4/conf/all/route_localnet",
        "/proc/sys/net/ipv4/conf/all/forwarding",
        "/proc/sys/net/ipv6/conf/all/forwarding",
        "/proc/sys/net/bridge/bridge-nf-call-iptables",
        "/proc/sys/net/netfilter/nf_conntrack_max",
        "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established",
        "/proc/sys/kernel/panic",
        "/proc/sys/kernel/panic_on_oops",
        "/proc/sys/vm/overcommit_memory",
    ] {
        s.insert(
            path.rsplit('/').next().unwrap_or(path),
            format!("{path}={}", read(path).trim()),
        );
    }
    s.insert("fixed paths", {
        node::FIXED_PATHS
            .iter()
            .chain(node::COMPUTE_HOST_PATHS.iter())
            .map(|p| format!("{p}={}", std::path::Path::new(p).exists()))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let testbin = testbin_dir();
    s.insert("node processes", {
        let mut found: Vec<String> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path().join("exe")).ok())
            .filter(|exe| exe.starts_with(&testbin))
            .filter(|exe| {
                exe.file_name()
                    .is_some_and(|n| node::BINARIES.iter().any(|b| n == *b))
            })
            .map(|exe| exe.display().to_string())
            .collect();
        found.sort();
        found.join(" ")
    });
    s
}

#[tokio::test]
async fn stopping_the_node_leaves_the_machine_as_it_was() -> Result<()> {
    // Clean whatever a crashed run left, then look at the machine, under the node lock.
    let before = {
        let _lock = NodeLock::acquire(Duration::from_secs(3600))?;
        node::teardown(&Layout::default_dir())?;
        snapshot()
    };

    let cp = ControlPlane::start_with(Options {
        real_node: true,
        ..Options::default()
    })
    .await?;
    let client = cp.client()?;
    let ns = cp.namespace("teardown").await?;
    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "sleeper" },
        "spec": { "backoffLimit": 0, "template": { "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{ "name": "main", "image": TOOLS_IMAGE, "imagePullPolicy": "Never",
                "command": ["sh", "-c", "echo started > /dev/termination-log; exit 0"] }],
        }}}
    }))?;
    Api::<Job>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &job)
        .await?;
    pods::wait_for_job_termination(&client, &ns, "sleeper", "main", Duration::from_secs(90))
        .await?;
    // A running pod too, so teardown meets a live sandbox, its netns and its mounts.
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "running" },
        "spec": { "terminationGracePeriodSeconds": 30, "containers": [{
            "name": "main", "image": TOOLS_IMAGE, "imagePullPolicy": "Never",
            "command": ["sleep", "3600"] }] }
    }))?;
    let pods_api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
    pods_api.create(&PostParams::default(), &pod).await?;
    Wait::new("the pod to run", Duration::from_secs(60))
        .for_object(&pods_api, "running", |p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .await?;
    let during = snapshot();
    assert_ne!(
        during["links"], before["links"],
        "the node should have added its bridge"
    );
    drop(cp);

    let after = snapshot();
    for (aspect, was) in &before {
        assert_eq!(&after[aspect], was, "{aspect} differs after teardown");
    }
    Ok(())
}
