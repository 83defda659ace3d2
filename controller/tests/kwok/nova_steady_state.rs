//! A quiet steady state, measured on the real API server with its own request counters
//! (`apiserver_request_total` by verb and resource): passes over a Nova that waits on a
//! missing Secret, then over the same Nova converged, issue no write and no GET or LIST; and
//! while it converged, no status write was refused as stale.
//! (One test on its own control plane, so the counters see no other test's requests.)

use std::time::Duration;

use kube::Client;
use kube::api::{Api, PostParams};
use nova_api::v1alpha1::Nova;
use nova_controller::metrics::Metrics;
use nova_testkit::prelude::*;
use serde_json::json;

/// What the counters say over a window.
#[derive(Debug, PartialEq, Eq)]
struct Requests {
    writes: u64,
    reads: u64,
}

/// Every write a pass could make (the Nova's own metadata is left out: the test touches it),
/// and every GET or LIST of what a pass reads.
async fn requests_now(client: &Client) -> Requests {
    Requests {
        writes: requests(client, &WRITTEN_RESOURCES, &WRITE_VERBS).await
            + writes(client, "novas", "status").await,
        reads: requests(client, &READ_RESOURCES, &READ_VERBS).await,
    }
}

async fn secrets_ready(novas: &Api<Nova>) -> (String, String) {
    let nova = novas.get("nova").await.expect("nova");
    let c = nova
        .status
        .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "SecretsReady"))
        .expect("SecretsReady");
    (c.reason, format!("{:?}", c.last_transition_time))
}

/// Wakes the controller five times without changing anything it reads (an annotation edit
/// passes the CR watch's predicate), waits for the passes, and returns what they cost.
async fn five_passes(
    client: &Client,
    novas: &Api<Nova>,
    metrics: &Metrics,
    label: &str,
) -> Requests {
    quiet_window(Duration::from_secs(3)).await;
    let before = requests_now(client).await;
    let passes_before = passes(metrics);
    touch_five_times(novas, "nova", label, || passes(metrics)).await;
    quiet_window(Duration::from_secs(2)).await;
    let after = requests_now(client).await;
    let cost = Requests {
        writes: after.writes - before.writes,
        reads: after.reads - before.reads,
    };
    println!(
        "{label}: {} passes issued {} writes and {} GET/LIST reads",
        passes(metrics) - passes_before,
        cost.writes,
        cost.reads
    );
    cost
}

#[tokio::test(flavor = "multi_thread")]
async fn waiting_and_converged_passes_issue_no_write_and_no_read() {
    // Its own control plane: the counters it reads are the whole server's.
    let cp = &nova_test_harness::ControlPlane::start()
        .await
        .expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-steady").await.expect("namespace");

    // Every input but the RabbitmqCluster's default-user Secret.
    provide_credentials(&client, &ns).await;
    create_rabbitmq_cluster(&client, &ns).await;
    provide_database(&client, &ns).await;

    let metrics = start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    // Every optional step enabled: the three routes, autoscaling, a VPA on the scheduler and
    // network isolation.
    let mut nova = example(&ns);
    nova.spec.autoscaling = Some(
        serde_json::from_value(json!({"maxReplicas": 5, "targetCPUUtilization": 70}))
            .expect("autoscaling"),
    );
    nova.spec.gateway = Some(
        serde_json::from_value(
            json!({"hostname": "compute.example.com", "parentRef": {"name": "openstack-gw"}}),
        )
        .expect("gateway"),
    );
    nova.spec.metadata.gateway = Some(serde_json::from_value(json!({"hostname": "metadata.example.com", "parentRef": {"name": "openstack-gw", "namespace": "gateways"}})).expect("gateway"));
    nova.spec.scheduler = Some(
        serde_json::from_value(
            json!({"deployment": {"verticalAutoscaling": {"updateMode": "Off"}}}),
        )
        .expect("scheduler"),
    );
    nova.spec.network_policy = Some(
        serde_json::from_value(
            json!({"ingress": [{"namespaceSelector": {"matchLabels": {"team": "edge"}}}]}),
        )
        .expect("networkPolicy"),
    );
    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create Nova");

    // Waiting: the Secrets step passes and the TransportURLSecret step waits, both on
    // SecretsReady; the condition stays False with one transition time and no status write.
    let message = wait_for_reason(&novas, "nova", "WaitingForMessagingCredentials").await;
    assert_eq!(
        message,
        format!("default-user Secret {ns}/openstack-rabbitmq-default-user not found")
    );
    let (_, transition) = secrets_ready(&novas).await;
    let waiting = five_passes(&client, &novas, &metrics, "waiting").await;
    assert_eq!(
        waiting,
        Requests {
            writes: 0,
            reads: 0
        },
        "a waiting Nova is reconciled without writes and without uncached reads"
    );
    assert_eq!(
        secrets_ready(&novas).await,
        ("WaitingForMessagingCredentials".to_owned(), transition),
        "a condition that stays False keeps its transition time"
    );

    // Converged: every child applied once, then nothing.
    put_default_user(&client, &ns).await;
    wait_for_reason(&novas, "nova", "SecretsAvailable").await;
    wait_converged(&novas, "nova", || Ok(())).await;
    assert_eq!(
        writes_answered(&client, "novas", "status", "409").await,
        0,
        "no status write was refused as stale while converging (after the db-sync Job's stamp, \
         the stamped copy is the write's precondition)"
    );
    let converged = five_passes(&client, &novas, &metrics, "converged").await;
    assert_eq!(
        converged,
        Requests {
            writes: 0,
            reads: 0
        },
        "a converged Nova is reconciled without writes and without uncached reads"
    );
}
