//! Leader election with two nova-controller processes: only the lease holder reconciles, a
//! standby takes over within the lease duration once the leader dies, and neither process
//! logs a secret value.

mod nova_support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use nova_api::v1alpha1::Nova;
use nova_support::*;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

const LEASE: &str = "nova-operator-test";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A controller process with its metrics port and its log file.
struct Replica {
    identity: &'static str,
    child: Child,
    metrics: u16,
    log: std::path::PathBuf,
}

/// Starts a replica logging at debug level into a file (a pipe nobody drains would block it).
fn spawn(
    identity: &'static str,
    kubeconfig: &std::path::Path,
    ns: &str,
    dir: &std::path::Path,
) -> Replica {
    let metrics = free_port();
    let log = dir.join(format!("{identity}.log"));
    let file = std::fs::File::create(&log).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_nova-controller"))
        .args([
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--namespace",
            ns,
        ])
        .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
        .args([
            "--health-probe-bind-address",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .args([
            "--leader-election-namespace",
            ns,
            "--leader-election-id",
            LEASE,
        ])
        .env("POD_NAME", identity)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::from(file.try_clone().expect("log file")))
        .stderr(Stdio::from(file))
        .kill_on_drop(true)
        .spawn()
        .expect("start nova-controller");
    Replica {
        identity,
        child,
        metrics,
        log,
    }
}

/// The value of one un-labelled or summed metric on a replica, 0 when absent.
async fn metric(port: u16, name: &str) -> f64 {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0.0;
    };
    let request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .is_err()
    {
        return 0.0;
    }
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body).await;
    body.lines()
        .filter(|l| {
            l.starts_with(name)
                && (l[name.len()..].starts_with(' ') || l[name.len()..].starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
}

/// Kills a replica and returns everything it logged.
async fn stop(mut replica: Replica) -> String {
    let _ = replica.child.kill().await;
    std::fs::read_to_string(&replica.log).expect("log")
}

#[tokio::test(flavor = "multi_thread")]
async fn one_leader_reconciles_and_a_standby_takes_over() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-leader").await.expect("namespace");
    provide_inputs(&client, &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);

    let logs = tempfile::tempdir().expect("log dir");
    let mut replicas = vec![
        spawn("replica-a", cp.kubeconfig_path(), &ns, logs.path()),
        spawn("replica-b", cp.kubeconfig_path(), &ns, logs.path()),
    ];
    let deadline = Instant::now() + TIMEOUT;
    let leader = loop {
        if let Some(h) = holder(&leases).await {
            break h;
        }
        assert!(Instant::now() < deadline, "nobody acquired the lease");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    wait_for_reason(&novas, "nova", "SecretsAvailable").await;

    let (lead, standby): (Vec<_>, Vec<_>) = replicas.drain(..).partition(|r| r.identity == leader);
    let (lead, standby) = (
        lead.into_iter().next().expect("leader process"),
        standby.into_iter().next().expect("standby"),
    );
    let reconciled = "nova_operator_reconcile_duration_seconds_count";
    assert!(
        metric(lead.metrics, reconciled).await > 0.0,
        "the leader reconciles"
    );
    assert_eq!(metric(lead.metrics, "nova_operator_leader").await, 1.0);
    assert_eq!(
        metric(standby.metrics, reconciled).await,
        0.0,
        "the standby does not reconcile"
    );
    assert_eq!(metric(standby.metrics, "nova_operator_leader").await, 0.0);

    // Kill the leader without letting it release the lease: the standby must wait it out.
    let killed = Instant::now();
    let lead_log = stop(lead).await;
    let deadline = Instant::now() + Duration::from_secs(45);
    while metric(standby.metrics, "nova_operator_leader").await != 1.0 {
        assert!(Instant::now() < deadline, "the standby never took over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let takeover = killed.elapsed();
    println!(
        "leader {leader} killed; {} took over after {:.1}s",
        standby.identity,
        takeover.as_secs_f64()
    );
    assert_eq!(holder(&leases).await.as_deref(), Some(standby.identity));

    // The new leader reconciles: a touched Nova is processed by it.
    let before = metric(standby.metrics, reconciled).await;
    let touch = serde_json::json!({"metadata": {"annotations": {"test.nova/touch": "1"}}});
    novas
        .patch(
            "nova",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(touch),
        )
        .await
        .expect("touch");
    let deadline = Instant::now() + TIMEOUT;
    while metric(standby.metrics, reconciled).await <= before {
        assert!(Instant::now() < deadline, "the new leader never reconciled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let standby_log = stop(standby).await;
    for log in [&lead_log, &standby_log] {
        assert!(
            log.contains("reconcile") || log.contains("leadership"),
            "the logs were captured"
        );
        for value in PLANTED {
            assert!(
                !log.contains(value),
                "a controller log line carries a planted secret value"
            );
        }
    }
}
