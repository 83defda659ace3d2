//! No data lost by accident (issue 33 part 4), against a real API server: the MariaDB objects
//! of a Nova under the default `deletionPolicy` carry `cleanupPolicy: Skip` when its deletion
//! (plain or `--cascade=orphan`) reaches them, so the MariaDB operator drops no schema; a
//! same-named MariaDB object another owner controls survives a Nova's deletion, which still
//! completes; and of two Novas on one schema that got past admission (this tier runs no
//! webhook) the younger provisions nothing. The MariaDB operator is simulated, statuses only
//! (`nova_testkit::inputs::provide_database`); its finalizer is played by the test's own.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_controller::objects::kinds;
use nova_testkit::prelude::*;
use serde_json::json;

/// The finalizer the test holds the MariaDB objects by, as their operator would.
const HOLD: &str = "test.nova.c5c3.io/mariadb-operator";

/// Every MariaDB object the Example provisions in Static mode, as (kind index, name).
const PROVISIONED: [(usize, &str); 8] = [
    (0, "nova-api"),
    (0, "nova"),
    (0, "nova-nova-cell0"),
    (1, "nova-api"),
    (1, "nova"),
    (2, "nova-api"),
    (2, "nova"),
    (2, "nova-nova-cell0"),
];

fn mariadb_api(client: &Client, ns: &str, kind: usize) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &kinds::mariadb_children()[kind])
}

/// Waits until every MariaDB object of the Example exists, then holds each by [`HOLD`] and
/// strips its `cleanupPolicy`, as an object applied before the field existed carries none.
async fn provisioned_and_held(client: &Client, ns: &str) {
    for (kind, name) in PROVISIONED {
        let api = mariadb_api(client, ns, kind);
        Wait::new(format!("MariaDB object {kind}/{name} provisioned"), TIMEOUT)
            .for_object(&api, name, |_| true)
            .await
            .expect("provisioned");
        hold_by(&api, name, Some(HOLD)).await;
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cleanupPolicy": null}})),
        )
        .await
        .expect("cleanupPolicy stripped");
    }
}

/// Waits until the controller's next pass has written `cleanupPolicy: Skip` back onto every
/// MariaDB object (the one write per object after an operator upgrade).
async fn policy_written_back(client: &Client, ns: &str) {
    for (kind, name) in PROVISIONED {
        Wait::new(format!("cleanupPolicy back on {kind}/{name}"), TIMEOUT)
            .for_object(&mariadb_api(client, ns, kind), name, |o| {
                o.data["spec"]["cleanupPolicy"] == "Skip"
            })
            .await
            .expect("the controller wrote the policy back");
    }
}

/// Asserts every held MariaDB object is still there with `cleanupPolicy: Skip`, then lets it go.
async fn all_skip_then_release(client: &Client, ns: &str) {
    for (kind, name) in PROVISIONED {
        let api = mariadb_api(client, ns, kind);
        let object = api.get(name).await.expect("held, so still there");
        assert_eq!(
            object.data["spec"]["cleanupPolicy"], "Skip",
            "{kind}/{name}: {:?}",
            object.data["spec"]
        );
        hold_by(&api, name, None).await;
    }
}

/// Injects: the Example Nova (default deletionPolicy) provisioned, its eight MariaDB objects
/// held by a finalizer and stripped of their `cleanupPolicy` (as before the field existed),
/// then a plain delete at once in one namespace, and in another, once the controller's next
/// pass has written the policy back (as after an operator upgrade), a delete with
/// `propagationPolicy: Orphan`: the garbage collector orphans the objects before a finalizing
/// pass could write them, so their policy must be there before the delete. Asserts: both Novas
/// are finalized, and each MariaDB object the deletion reached (deleted by the finalizer,
/// which first re-applies the policy, or orphaned) carries `cleanupPolicy: Skip`; after the
/// plain delete each of them is being deleted.
#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_novas_mariadb_objects_keep_their_schemas_by_default() {
    for (prefix, propagation) in [
        ("nova-retain", None),
        ("nova-retain-orphan", Some(PropagationPolicy::Orphan)),
    ] {
        let (client, ns, novas) = started_namespace(prefix).await;
        novas
            .create(&PostParams::default(), &example(&ns))
            .await
            .expect("create Nova");
        provisioned_and_held(&client, &ns).await;
        if propagation.is_some() {
            policy_written_back(&client, &ns).await;
        }
        let params = DeleteParams {
            propagation_policy: propagation.clone(),
            ..DeleteParams::default()
        };
        novas.delete("nova", &params).await.expect("delete");
        about_nova(&novas, "nova", "the finalizer released the Nova", TIMEOUT)
            .for_deletion(&novas, "nova")
            .await
            .expect("the Nova is gone");
        if propagation.is_none() {
            for (kind, name) in PROVISIONED {
                let object = mariadb_api(&client, &ns, kind)
                    .get(name)
                    .await
                    .expect("held");
                assert!(
                    object.metadata.deletion_timestamp.is_some(),
                    "{kind}/{name}: the finalizer deletes the MariaDB objects as the spec says"
                );
            }
        }
        all_skip_then_release(&client, &ns).await;
    }
}

/// Injects: a MariaDB `Database` named as the Example's nova_api Database but controlled by
/// another owner (a ConfigMap), created before the Nova, so the Nova can never claim it; then
/// the Nova's deletion. Asserts: the Nova is finalized anyway, the foreign Database is not
/// deleted, and the `DatabaseFinalized` event names it as left alone.
#[tokio::test(flavor = "multi_thread")]
async fn a_same_named_database_another_owner_controls_survives_a_novas_deletion() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-foreign-db").await.expect("namespace");
    provide_inputs(&client, &ns).await;
    let owners: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let mut owner = ConfigMap::default();
    owner.metadata.name = Some("someone-else".into());
    let owner = owners
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    let databases = mariadb_api(&client, &ns, 0);
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "k8s.mariadb.com/v1alpha1", "kind": "Database",
        "metadata": {"name": "nova-api", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "someone-else",
            "uid": owner.uid().expect("uid"), "controller": true}]},
        "spec": {"mariaDbRef": {"name": "openstack-mariadb"}, "name": "their_schema"}
    }))
    .expect("object");
    databases
        .create(&PostParams::default(), &foreign)
        .await
        .expect("the foreign Database");
    start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    Wait::new("the Nova's finalizer", TIMEOUT)
        .for_object(&novas, "nova", |n: &Nova| !n.finalizers().is_empty())
        .await
        .expect("the finalizer is on");

    delete_until_gone(&novas).await;
    let left = databases.get("nova-api").await.expect("still there");
    assert!(
        left.metadata.deletion_timestamp.is_none(),
        "another owner's Database was deleted"
    );
    assert_eq!(left.data["spec"]["name"], "their_schema");
    let finalized = events_on(&client, &ns, "nova")
        .await
        .expect("events")
        .into_iter()
        .find(|(reason, _, _)| reason == "DatabaseFinalized")
        .map(|(_, note, _)| note)
        .expect("a DatabaseFinalized event");
    assert!(
        finalized.contains("left alone, as this Nova does not control them: Database/nova-api"),
        "{finalized}"
    );
}

/// Injects: two Novas on the Example's schemas and MariaDB in one namespace, created past
/// admission (this tier runs no webhook), the second after the first. Asserts: the younger
/// waits at `DatabaseReady=False/SchemaInUse` naming the older, and no MariaDB object carries
/// its name; the older provisions as usual.
#[tokio::test(flavor = "multi_thread")]
async fn the_younger_of_two_novas_on_one_schema_provisions_nothing() {
    let (client, ns, novas) = started_namespace("nova-claim").await;
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("the older Nova");
    let mut younger = example(&ns);
    younger.metadata.name = Some("nova-b".into());
    // The same second as the older one would fall back to the names, which still make
    // "nova" the older; nothing here depends on the clock.
    novas
        .create(&PostParams::default(), &younger)
        .await
        .expect("the younger Nova, past no webhook");
    let message = wait_nova_until(
        &novas,
        "nova-b",
        "DatabaseReady=SchemaInUse",
        TIMEOUT,
        |n: &Nova| n.reason(Nova::type_named("DatabaseReady")) == Some("SchemaInUse"),
    )
    .await
    .expect("the younger Nova held")
    .condition(Nova::type_named("DatabaseReady"))
    .map(|c| c.message.clone())
    .unwrap_or_default();
    assert_eq!(
        message,
        format!(
            "spec.apiDatabase.database: schema nova_api on MariaDB {ns}/openstack-mariadb is already used by Nova {ns}/nova (spec.apiDatabase.database): two Novas on one schema would migrate and delete each other's data"
        )
    );
    Wait::new("the older Nova's nova_api Database", TIMEOUT)
        .for_object(&mariadb_api(&client, &ns, 0), "nova-api", |_| true)
        .await
        .expect("the older Nova provisions");
    for kind in 0..3 {
        let names: Vec<String> = mariadb_api(&client, &ns, kind)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .iter()
            .map(|o| o.name_any())
            .collect();
        assert!(
            !names.iter().any(|n| n.starts_with("nova-b")),
            "the younger Nova provisioned {names:?}"
        );
    }
}
