//! No data lost by accident, for real (issue 33 part 4): a Nova deleted under the default
//! `deletionPolicy` (Retain) leaves its schemas and their rows in the harness's real MariaDB (the
//! simulated mariadb-operator honours the `cleanupPolicy: Skip` the operator wrote, and would
//! drop them under `Delete`), and a Nova re-created on them finds the cells it had and reaches
//! Ready; then `deletionPolicy: Delete` drops them with the Nova.

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use nova_api::v1alpha1::Nova;
use nova_controller::objects::kinds;
use nova_test_harness::images::{nova_image, pinned};
use nova_testkit::prelude::{Wait, delete_until_gone_within, holds};
use nova_testkit::real::*;
use nova_testkit::stack::RELEASE;
use serde_json::json;

/// Injects: the operator's Nova synced for real (DatabaseReady=True), a row written as root into
/// a table of its nova_api schema, then a plain delete of the Nova (default policy) and, once it
/// is gone, the same Nova created again. Asserts: the re-created Nova reaches Ready=True with the
/// same cell UUIDs as before (its db-sync found the mappings in the surviving schema), and the
/// row is still there. Then both blocks get `deletionPolicy: Delete` and the Nova is deleted
/// again: its Databases carried `cleanupPolicy: Delete` and its three schemas are dropped.
#[tokio::test(flavor = "multi_thread")]
async fn a_default_policy_delete_keeps_the_rows_and_a_recreated_nova_becomes_ready() {
    let _timed = nova_testkit::stack::timed().await;
    let setup = start("nova-retain").await;
    let (client, ns) = (setup.client.clone(), setup.ns.clone());
    let image = pinned(&nova_image(RELEASE)).expect("the nova image's digest");
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let nova = real_nova(&ns, &image);
    let api_schema = nova.spec.api_database.database.clone();
    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create Nova");
    let synced = wait_nova(&client, &ns, "DatabaseReady=True", |n| {
        holds(n, "DatabaseReady", "True")
    })
    .await;
    let before = cells(&synced);
    assert_eq!(before.len(), 2, "{before:?}");
    query(
        &client,
        &ns,
        "write-row",
        &format!(
            "CREATE TABLE {api_schema}.retention_probe (v INT); INSERT INTO {api_schema}.retention_probe VALUES (42)"
        ),
    )
    .await;

    delete_until_gone_within(&novas, REAL_TIMEOUT).await;

    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create the Nova again");
    let ready = wait_nova(&client, &ns, "Ready=True", |n| holds(n, "Ready", "True")).await;
    assert_eq!(
        cells(&ready),
        before,
        "the cells it had, from the kept schema"
    );
    let row = query(
        &client,
        &ns,
        "read-row",
        &format!("SELECT v FROM {api_schema}.retention_probe"),
    )
    .await;
    assert_eq!(row.trim(), "42", "the row written before the delete");

    // Dropping the data on purpose: `deletionPolicy: Delete` on both blocks, written onto the
    // MariaDB objects by the next pass, then the Nova deleted: its schemas are gone.
    let policy = json!({"spec": {
        "apiDatabase": {"deletionPolicy": "Delete"},
        "database": {"deletionPolicy": "Delete"},
    }});
    novas
        .patch(
            &nova.name_any(),
            &PatchParams::default(),
            &Patch::Merge(policy),
        )
        .await
        .expect("deletionPolicy: Delete");
    let databases: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &kinds::mariadb_children()[0]);
    // Reconciled by the simulated operator at that generation (its Ready condition's
    // observedGeneration), so the policy it honours at the delete is the new one.
    Wait::new(
        "every Database with cleanupPolicy: Delete, reconciled",
        REAL_TIMEOUT,
    )
    .until(|| async {
        let listed = databases.list(&ListParams::default()).await.ok()?.items;
        // nova_api, the cell and cell0.
        (listed.len() == 3
            && listed.iter().all(|d| {
                d.data["spec"]["cleanupPolicy"] == "Delete"
                    && d.data["status"]["conditions"][0]["observedGeneration"]
                        == json!(d.metadata.generation)
            }))
        .then_some(())
    })
    .await
    .expect("the policy reached the MariaDB objects");
    delete_until_gone_within(&novas, REAL_TIMEOUT).await;
    let cell = nova.spec.database.database.clone();
    let cell0 = nova_api::names::NovaNames::cell0_schema(&cell);
    // The simulated operator drops a schema once it sees its Database gone (its next poll),
    // so the count is read until it is zero, by a Job of its own each time.
    let attempt = std::sync::atomic::AtomicUsize::new(0);
    let left = Wait::new("the schemas dropped", REAL_TIMEOUT)
        .until(|| async {
            let n = attempt.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let left = query(
                &client,
                &ns,
                &format!("count-schemas-{n}"),
                &format!(
                    "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name IN ('{api_schema}', '{cell}', '{cell0}')"
                ),
            )
            .await;
            (left.trim() == "0").then_some(left)
        })
        .await
        .expect("the Delete policy dropped the schemas");
    assert_eq!(left.trim(), "0");
    finish(&client, &ns).await;
}
