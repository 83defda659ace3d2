//! The Nova lifecycle against a real API server: the target-cluster gate that creates nothing
//! and acquires no finalizer, the finalizer that holds a deleted Nova one more pass while a
//! MariaDB object of its schemas is live, and the brownfield Nova whose deletion leaves alone
//! the MariaDB objects of the same names, which are the user's. (Kept apart from the credential
//! suite, whose steady-state write count must see no other test's writes.)

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use nova_api::v1alpha1::Nova;
use nova_testkit::prelude::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn an_unresolvable_target_cluster_waits_without_a_finalizer() {
    let (client, ns, novas) = started_namespace("nova-target").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut nova = example(&ns);
    nova.spec.target_cluster_ref = Some(nova_api::v1alpha1::TargetClusterRefSpec {
        name: "edge-1".into(),
    });
    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create Nova");
    assert_eq!(
        wait_for_reason(&novas, "nova", "TargetClusterUnavailable").await,
        "cluster not found"
    );
    absence_window(Duration::from_secs(2)).await;
    let nova = novas.get("nova").await.expect("nova");
    assert!(
        nova.finalizers().is_empty(),
        "no finalizer before the target resolves"
    );
    for derived in [
        "nova-api-db-connection",
        "nova-db-connection",
        "nova-transport-url",
        "nova-compute-config",
    ] {
        assert!(
            secrets.get_opt(derived).await.expect("get").is_none(),
            "{derived} was created"
        );
    }
    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete");
}

#[tokio::test(flavor = "multi_thread")]
async fn deletion_holds_the_finalizer_while_a_database_object_is_live() {
    let (client, ns, novas) = started_namespace("nova-finalize").await;
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    wait_for_reason(&novas, "nova", "SecretsAvailable").await;

    // The cell0 Database the step provisioned, held by a finalizer of its own operator.
    let databases = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        &ns,
        &nova_controller::objects::kinds::mariadb_children()[0],
    );
    Wait::new("the cell0 Database provisioned", TIMEOUT)
        .for_object(&databases, "nova-nova-cell0", |_| true)
        .await
        .expect("the cell0 Database");
    hold_by(&databases, "nova-nova-cell0", Some("test.nova/held")).await;

    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for_event(&client, &ns, "FinalizingDatabase", TIMEOUT).await;
    let held = databases.get("nova-nova-cell0").await.expect("database");
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "the operator asked for the Database's deletion"
    );
    // The pass after the one that found it live releases the Nova: the flow never waits for
    // the MariaDB operator to finish dropping (its pods would keep connections until the
    // owner's cascade deletes them), so the held Database is still terminating.
    about_nova(
        &novas,
        "nova",
        "the finalizer released",
        Duration::from_secs(90),
    )
    .for_deletion(&novas, "nova")
    .await
    .expect("the Nova is gone");
    assert!(
        databases
            .get_opt("nova-nova-cell0")
            .await
            .expect("get")
            .is_some(),
        "released while the Database still terminates"
    );
    hold_by(&databases, "nova-nova-cell0", None).await;
}

/// A Nova whose schemas are brownfield (`host`) provisioned no MariaDB object, so its deletion
/// deletes none: the Database, User and Grant objects that carry the names a managed Nova would
/// have provisioned belong to the user and survive, and the finalizer goes at once.
#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_brownfield_nova_leaves_the_users_mariadb_objects() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp
        .namespace("nova-brownfield-delete")
        .await
        .expect("namespace");
    provide_inputs(&client, &ns).await;
    let kinds = nova_controller::objects::kinds::mariadb_children();
    let owned_by_user = ["nova-api", "nova", "nova-nova-cell0"];
    for kind in &kinds {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, kind);
        for name in owned_by_user {
            let mut spec = json!({"mariaDbRef": {"name": "openstack-mariadb"}});
            if kind.kind == "Grant" {
                spec["privileges"] = json!(["ALL PRIVILEGES"]);
                spec["username"] = json!(name);
            }
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "k8s.mariadb.com/v1alpha1", "kind": kind.kind,
                "metadata": {"name": name}, "spec": spec
            }))
            .expect("object");
            api.create(&PostParams::default(), &object)
                .await
                .expect("the user's MariaDB object");
        }
    }
    start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let mut nova = example(&ns);
    for block in [&mut nova.spec.api_database, &mut nova.spec.database] {
        block.cluster_ref = None;
        block.host = Some("db.example.com".into());
    }
    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create Nova");
    wait_for_reason(&novas, "nova", "SecretsAvailable").await;
    assert!(
        !novas
            .get("nova")
            .await
            .expect("nova")
            .finalizers()
            .is_empty(),
        "the finalizer is on"
    );

    delete_until_gone(&novas).await;
    let reasons = event_reasons(&client, &ns).await;
    assert!(
        reasons.iter().any(|r| r == "DatabaseFinalized")
            && !reasons.iter().any(|r| r == "FinalizingDatabase"),
        "{reasons:?}"
    );
    for kind in &kinds {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), &ns, kind);
        for name in owned_by_user {
            let object = api
                .get(name)
                .await
                .expect("the user's object is still there");
            assert!(
                object.metadata.deletion_timestamp.is_none(),
                "{} {name} is being deleted",
                kind.kind
            );
        }
    }
}
