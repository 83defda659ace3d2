//! Leader election with two nova-controller processes: only the lease holder reconciles, a
//! standby takes over within the lease duration once the leader dies, and neither process
//! logs a secret value.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::replica::Replica;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use nova_api::v1alpha1::Nova;
use nova_testkit::prelude::*;

const LEASE: &str = "nova-operator-test";

fn spawn(identity: &str, kubeconfig: &Path, ns: &str, dir: &Path) -> Replica {
    Replica::start(identity, kubeconfig, ns, (ns, LEASE), dir, &[])
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
    let leader = Wait::new("a replica to acquire the lease", TIMEOUT)
        .until(|| holder(&leases))
        .await
        .expect("a leader");
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
    assert!(lead.metric(reconciled).await > 0.0, "the leader reconciles");
    assert_eq!(lead.metric("nova_operator_leader").await, 1.0);
    assert_eq!(
        standby.metric(reconciled).await,
        0.0,
        "the standby does not reconcile"
    );
    assert_eq!(standby.metric("nova_operator_leader").await, 0.0);

    // Kill the leader without letting it release the lease: the standby must wait it out.
    let killed = Instant::now();
    let lead_log = lead.kill().await;
    Wait::new("the standby to take over", Duration::from_secs(45))
        .until(|| async { standby.metric("nova_operator_leader").await == 1.0 })
        .await
        .expect("the takeover");
    let takeover = killed.elapsed();
    println!(
        "leader {leader} killed; {} took over after {:.1}s",
        standby.identity,
        takeover.as_secs_f64()
    );
    assert_eq!(
        holder(&leases).await.as_deref(),
        Some(standby.identity.as_str())
    );

    // The new leader reconciles: a touched Nova is processed by it.
    let before = standby.metric(reconciled).await;
    let touch = serde_json::json!({"metadata": {"annotations": {"test.nova/touch": "1"}}});
    novas
        .patch(
            "nova",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(touch),
        )
        .await
        .expect("touch");
    Wait::new("the new leader to reconcile", TIMEOUT)
        .until(|| async { standby.metric(reconciled).await > before })
        .await
        .expect("the new leader reconciled");

    let standby_log = standby.kill().await;
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
