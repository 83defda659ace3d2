//! The deadline of a pass (`pipeline::deadline`): a pass that cannot finish in time is stopped,
//! its slot freed, and retried under the back-off, with a Warning event on its CR.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use nova_api::events::EventReason;
use nova_api::v1alpha1::Nova;
use nova_controller::clusters::{KubeCluster, Registry};
use nova_controller::metrics::Metrics;
use nova_controller::nova;
use nova_controller::pipeline::runner::Options;
use nova_testkit::prelude::*;

/// Injects: a pass deadline of one millisecond, which no pass that sends a request meets.
/// Asserts: the Nova's passes are stopped at the deadline and retried (the counter grows past
/// one), a `ReconcileDeadlineExceeded` Warning names the deadline on the Nova, and no pass is
/// left in flight between retries (the loop is not stalled, so liveness holds).
#[tokio::test(flavor = "multi_thread")]
async fn a_pass_past_its_deadline_is_stopped_retried_and_reported() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("deadline").await.expect("namespace");
    let metrics = Metrics::new().expect("metrics");
    let cluster = KubeCluster::start(
        client.clone(),
        Some(ns.clone()),
        Registry::default().register(nova::controller::kinds()),
    )
    .await;
    cluster.synced().await;
    let options = Options {
        scope: Some(ns.clone()),
        concurrency: 2,
        instance: None,
        targets: None,
        pass_deadline: Duration::from_millis(1),
        crd: Default::default(),
    };
    tokio::spawn(nova::controller::run(
        client.clone(),
        metrics.clone(),
        cluster,
        options,
        futures::future::pending(),
    ));
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create");

    let exceeded = || {
        metrics
            .pass_deadline_exceeded
            .with_label_values(&["Nova"])
            .get()
    };
    Wait::new("passes stopped at their deadline", Duration::from_secs(60))
        .until(|| async { exceeded() > 1 })
        .await
        .expect("retried past the deadline");
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let warned = Wait::new("the deadline Warning", Duration::from_secs(30))
        .until(|| async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some(EventReason::ReconcileDeadlineExceeded.as_str())
            })
        })
        .await
        .expect("a ReconcileDeadlineExceeded event");
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    assert_eq!(
        warned.note.as_deref(),
        Some(
            "the reconcile pass did not finish within 1ms; it was stopped and is retried with back-off"
        )
    );
    assert!(
        metrics.progress.stalled(Duration::from_secs(1)).is_none(),
        "a stopped pass leaves nothing in flight"
    );
}
