//! The pause annotation (issue 30, beyond the spec): `nova.openstack.c5c3.io/paused: "true"`
//! stops the reconciliation of a Nova (a deleted child stays deleted, a Paused condition and a
//! `ReconciliationPaused` event say so) and removing it resumes (the condition goes, the child
//! comes back).

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nova_api::events::EventReason;
use nova_api::labels::PAUSE_ANNOTATION;
use nova_api::v1alpha1::Nova;
use nova_testkit::prelude::*;
use serde_json::json;

/// How long a deleted child must stay deleted while paused: a running reconcile recreates it
/// within a second of the deletion's watch event.
const PAUSED_WINDOW: Duration = Duration::from_secs(5);

async fn annotate(novas: &Api<Nova>, value: Option<&str>) {
    novas
        .patch(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {PAUSE_ANNOTATION: value}}})),
        )
        .await
        .expect("annotate the Nova");
}

fn paused(nova: &Nova) -> Option<&str> {
    nova.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Paused")
        .map(|c| c.reason.as_str())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_nova_is_left_alone_until_the_annotation_goes() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-pause").await.expect("namespace");
    provide_inputs(&client, &ns).await;
    start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    wait_for_data(&secrets, "nova-transport-url", |_| true).await;

    annotate(&novas, Some("true")).await;
    wait_nova_until(&novas, "nova", "Paused", TIMEOUT, |n| {
        paused(n) == Some("ReconciliationPaused")
    })
    .await
    .expect("the Paused condition");
    wait_for_event(
        &client,
        &ns,
        EventReason::ReconciliationPaused.as_str(),
        TIMEOUT,
    )
    .await;
    secrets
        .delete("nova-transport-url", &DeleteParams::default())
        .await
        .expect("delete a child");
    // A negative over time: a reconcile would recreate the child within a second.
    tokio::time::sleep(PAUSED_WINDOW).await;
    assert!(
        secrets
            .get_opt("nova-transport-url")
            .await
            .expect("read")
            .is_none(),
        "a paused Nova's deleted child stays deleted"
    );

    annotate(&novas, None).await;
    wait_for_data(&secrets, "nova-transport-url", |_| true).await;
    wait_nova_until(&novas, "nova", "no Paused condition", TIMEOUT, |n| {
        paused(n).is_none()
    })
    .await
    .expect("the Paused condition removed");
}
