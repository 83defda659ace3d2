//! The credential steps against a real API server: the wait reasons in order as the inputs
//! appear, the derived Secrets, rotation, recreation, a quiet steady state, no secret value in
//! any condition or event, and the finalizer.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use nova_api::v1alpha1::Nova;
use nova_controller::nova;
use nova_testkit::prelude::*;

#[tokio::test(flavor = "multi_thread")]
async fn credential_steps_wait_in_order_then_derive_quietly() {
    // Its own control plane: the write counters it reads are the whole server's.
    let cp = &nova_test_harness::ControlPlane::start()
        .await
        .expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-credentials").await.expect("namespace");
    let metrics = start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    let created = novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    let message = wait_for_reason(&novas, "nova", "SecretStoreNotReady").await;
    assert_eq!(
        message,
        "SecretStore \"vault\" is not ready; upstream secret backend unreachable"
    );

    create_secret_store(&client, &ns).await;
    let message = wait_for_reason(&novas, "nova", "WaitingForDBCredentials").await;
    assert_eq!(
        message,
        format!("Database credentials ExternalSecret {ns}/nova-api-db not found yet")
    );

    put_secret(
        &secrets,
        "nova-api-db",
        &[
            ("username", "ignored-in-managed-mode"),
            ("password", API_DB_PASSWORD),
        ],
    )
    .await;
    put_secret(
        &secrets,
        "nova-db",
        &[("username", "ignored"), ("password", CELL_DB_PASSWORD)],
    )
    .await;
    wait_for_reason(&novas, "nova", "WaitingForServiceUserCredentials").await;
    put_secret(&secrets, "nova-keystone", &[("password", SERVICE_PASSWORD)]).await;
    wait_for_reason(&novas, "nova", "WaitingForMetadataSharedSecret").await;
    put_secret(&secrets, "nova-metadata-secret", &[("shared_secret", "")]).await;
    let message = wait_for_reason(&novas, "nova", "MetadataSharedSecretEmpty").await;
    assert!(message.starts_with(&format!(
        "Metadata shared secret Secret {ns}/nova-metadata-secret key \"shared_secret\" is empty"
    )));
    put_secret(
        &secrets,
        "nova-metadata-secret",
        &[("shared_secret", SHARED_SECRET)],
    )
    .await;
    let message = wait_for_reason(&novas, "nova", "WaitingForMessagingCredentials").await;
    assert_eq!(
        message,
        format!("RabbitmqCluster {ns}/openstack-rabbitmq not found")
    );

    create_rabbitmq(&client, &ns).await;
    provide_database(&client, &ns).await;
    wait_for_reason(&novas, "nova", "SecretsAvailable").await;

    // The derived Secrets: exact names, one key each, controlled by the Nova.
    let api_dsn = wait_for_data(&secrets, "nova-api-db-connection", |_| true).await;
    assert_eq!(
        api_dsn,
        format!(
            "mysql+pymysql://nova-api:api-db-Pa55%3Aword%2F1@openstack-mariadb.{ns}.svc:3306/nova_api?charset=utf8"
        )
    );
    let cell_dsn = wait_for_data(&secrets, "nova-db-connection", |_| true).await;
    assert_eq!(
        cell_dsn,
        format!(
            "mysql+pymysql://nova:cell-db-Pa55%40word@openstack-mariadb.{ns}.svc:3306/nova?charset=utf8"
        )
    );
    let url = wait_for_data(&secrets, "nova-transport-url", |_| true).await;
    assert_eq!(
        url,
        "rabbit://default_user:rabbit-Pa55@openstack-rabbitmq.svc:5672/"
    );
    for (name, key) in [
        ("nova-api-db-connection", "connection"),
        ("nova-db-connection", "connection"),
        ("nova-transport-url", "transport_url"),
    ] {
        let secret = secrets.get(name).await.expect("derived secret");
        assert_eq!(
            data_of(&secrets, name).await.map(|(k, _)| k).as_deref(),
            Some(key)
        );
        let owner = secret
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .expect("controller ref");
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Nova", created.uid().unwrap_or_default().as_str())
        );
    }
    let nova_now = novas.get("nova").await.expect("nova");
    assert!(nova_now.finalizers().iter().any(|f| f == nova::FINALIZER));

    // Rotating the cell password changes only the cell DSN.
    let untouched = ["nova-api-db-connection", "nova-transport-url"];
    let before = versions(&secrets, &untouched).await;
    put_secret(
        &secrets,
        "nova-db",
        &[("username", "ignored"), ("password", "rotated")],
    )
    .await;
    wait_for_data(&secrets, "nova-db-connection", |v| v.contains(":rotated@")).await;
    let after = versions(&secrets, &untouched).await;
    assert_eq!(
        before, after,
        "only the rotated credential's Secret changes"
    );

    // A deleted derived Secret comes back.
    secrets
        .delete("nova-transport-url", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for_data(&secrets, "nova-transport-url", |v| {
        v.starts_with("rabbit://")
    })
    .await;

    // Quiet steady state, once the workloads are available: wake the controller without
    // changing anything it reads.
    wait_converged(&novas, "nova", || Ok(())).await;
    quiet_window(Duration::from_secs(2)).await;
    let (secret_writes, status_writes, passes_before) = (
        writes(&client, "secrets", "").await,
        writes(&client, "novas", "status").await,
        passes(&metrics),
    );
    touch_five_times(&novas, "nova", "quiet", || passes(&metrics)).await;
    quiet_window(Duration::from_secs(2)).await;
    let reconciles = passes(&metrics) - passes_before;
    let secret_delta = writes(&client, "secrets", "").await - secret_writes;
    let status_delta = writes(&client, "novas", "status").await - status_writes;
    println!(
        "steady state: {reconciles} reconciles issued {secret_delta} Secret writes and {status_delta} status writes"
    );
    assert!(
        reconciles >= 5,
        "the touches woke the controller ({reconciles} passes)"
    );
    assert_eq!(
        (secret_delta, status_delta),
        (0, 0),
        "a converged Nova is reconciled without writes"
    );

    // No secret value in a condition message or an event.
    let planted = PLANTED.iter().copied().chain(["rotated"]);
    let status =
        serde_json::to_string(&novas.get("nova").await.expect("nova").status).expect("status");
    let events = serde_json::to_string(
        &Api::<Event>::namespaced(client.clone(), &ns)
            .list(&Default::default())
            .await
            .expect("events")
            .items,
    )
    .expect("events");
    for value in planted {
        assert!(!status.contains(value), "the status leaks a planted secret");
        assert!(!events.contains(value), "an event leaks a planted secret");
    }

    // Deleting releases the finalizer once no MariaDB object of either schema is left.
    delete_until_gone(&novas).await;
}
