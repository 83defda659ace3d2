//! No data lost by accident, for real (issue 33 part 4): a Nova deleted under the default
//! `deletionPolicy` (Retain) leaves its schemas and their rows in the harness's real MariaDB (the
//! simulated mariadb-operator honours the `cleanupPolicy: Skip` the operator wrote, and would
//! drop them under `Delete`), and a Nova re-created on them finds the cells it had and reaches
//! Ready.

use kube::api::{Api, PostParams};
use nova_api::v1alpha1::Nova;
use nova_test_harness::images::{nova_image, pinned};
use nova_testkit::prelude::{delete_until_gone_within, holds};
use nova_testkit::real::*;
use nova_testkit::stack::RELEASE;

/// Injects: the operator's Nova synced for real (DatabaseReady=True), a row written as root into
/// a table of its nova_api schema, then a plain delete of the Nova (default policy) and, once it
/// is gone, the same Nova created again. Asserts: the re-created Nova reaches Ready=True with the
/// same cell UUIDs as before (its db-sync found the mappings in the surviving schema), and the
/// row is still there.
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
    finish(&client, &ns).await;
}
