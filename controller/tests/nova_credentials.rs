//! The credential steps against a real API server: the wait reasons in order as the inputs
//! appear, the derived Secrets, rotation, recreation, a quiet steady state, no secret value in
//! any condition or event, and the finalizer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::events::{Recorder, Reporter};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_controller::context::Context;
use nova_controller::external;
use nova_controller::metrics::Metrics;
use nova_controller::nova;
use nova_controller::pipeline::Engine;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);
const API_DB_PASSWORD: &str = "api-db-Pa55:word/1";
const CELL_DB_PASSWORD: &str = "cell-db-Pa55@word";
const SERVICE_PASSWORD: &str = "service-user-Pa55";
const SHARED_SECRET: &str = "metadata-shared-s3cret";
const RABBIT_PASSWORD: &str = "rabbit-Pa55";

fn example(ns: &str) -> Nova {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/nova.yaml");
    let mut nova: Nova =
        serde_saphyr::from_str(&std::fs::read_to_string(path).expect("sample")).expect("parses");
    nova.metadata.namespace = Some(ns.to_owned());
    nova.spec.secret_store_ref = Some(nova_api::v1alpha1::SecretStoreRefSpec {
        kind: Some(nova_api::v1alpha1::SecretStoreKind::SecretStore),
        name: "vault".into(),
    });
    nova
}

/// Starts the Nova controller in-process, scoped to one namespace.
fn start_controller(client: Client, ns: &str) -> Metrics {
    let metrics = Metrics::new().expect("metrics");
    let ctx = Arc::new(Context {
        client: client.clone(),
        engine: Engine::new(metrics.clone()),
        recorder: Recorder::new(
            client,
            Reporter {
                controller: "nova-controller".into(),
                instance: None,
            },
        ),
        scope: Some(ns.to_owned()),
        metrics: metrics.clone(),
    });
    tokio::spawn(nova::controller::run(ctx, futures::future::pending()));
    metrics
}

fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "stringData": data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }))
    .expect("secret")
}

async fn put_secret(api: &Api<Secret>, name: &str, data: &[(&str, &str)]) {
    let body = secret(name, data);
    match api.get_opt(name).await.expect("get") {
        Some(mut existing) => {
            existing.data = None;
            existing.string_data = body.string_data;
            api.replace(name, &PostParams::default(), &existing)
                .await
                .expect("replace");
        }
        None => {
            api.create(&PostParams::default(), &body)
                .await
                .expect("create");
        }
    }
}

/// Creates an object of another operator's kind and sets its status.
async fn create_with_status(
    api: &Api<DynamicObject>,
    object: serde_json::Value,
    status: serde_json::Value,
) {
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    let name = object.name_any();
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("status");
}

/// Waits until the Nova's SecretsReady condition carries `reason`; returns its message.
async fn wait_for_reason(novas: &Api<Nova>, name: &str, reason: &str) -> String {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let nova = novas.get(name).await.expect("nova");
        let condition = nova.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "SecretsReady")
                .cloned()
        });
        if let Some(c) = &condition
            && c.reason == reason
        {
            return c.message.clone();
        }
        assert!(
            Instant::now() < deadline,
            "SecretsReady never became {reason}; last: {condition:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn data_of(api: &Api<Secret>, name: &str) -> Option<(String, String)> {
    let secret = api.get_opt(name).await.expect("get")?;
    let (key, value) = secret.data?.into_iter().next()?;
    Some((key, String::from_utf8(value.0).expect("utf8")))
}

async fn wait_for_data(api: &Api<Secret>, name: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some((_, value)) = data_of(api, name).await
            && check(&value)
        {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "Secret {name} never reached the expected data"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The API server's count of write requests (`apiserver_request_total`) for one resource.
async fn writes(client: &Client, resource: &str, subresource: &str) -> u64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = client
        .request_text(request)
        .await
        .expect("apiserver metrics");
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains(&format!("resource=\"{resource}\"")))
        .filter(|l| l.contains(&format!("subresource=\"{subresource}\"")))
        .filter(|l| {
            ["POST", "PUT", "PATCH", "APPLY", "DELETE"]
                .iter()
                .any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn passes(metrics: &Metrics) -> u64 {
    metrics
        .reconcile_duration
        .with_label_values(&["Secrets"])
        .get_sample_count()
}

#[tokio::test(flavor = "multi_thread")]
async fn credential_steps_wait_in_order_then_derive_quietly() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-credentials").await.expect("namespace");
    let metrics = start_controller(client.clone(), &ns);
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

    let stores =
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &external::secret_store());
    create_with_status(
        &stores,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "vault"},
               "spec": {"provider": {"fake": {"data": []}}}}),
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Valid", "message": "store validated"}]}),
    )
    .await;
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

    put_secret(
        &secrets,
        "openstack-rabbitmq-default-user",
        &[
            ("username", "default_user"),
            ("password", RABBIT_PASSWORD),
            ("host", "openstack-rabbitmq.svc"),
            ("port", "5672"),
        ],
    )
    .await;
    let rabbits =
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &external::rabbitmq_cluster());
    create_with_status(
        &rabbits,
        json!({"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster", "metadata": {"name": "openstack-rabbitmq"}, "spec": {}}),
        json!({"conditions": [], "defaultUser": {"secretReference": {
            "name": "openstack-rabbitmq-default-user", "namespace": ns,
            "keys": {"username": "username", "password": "password"}}}}),
    )
    .await;
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
    let before: Vec<String> = futures::future::join_all(
        ["nova-api-db-connection", "nova-transport-url"].map(|n| async {
            secrets
                .get(n)
                .await
                .expect("get")
                .resource_version()
                .unwrap_or_default()
        }),
    )
    .await;
    put_secret(
        &secrets,
        "nova-db",
        &[("username", "ignored"), ("password", "rotated")],
    )
    .await;
    wait_for_data(&secrets, "nova-db-connection", |v| v.contains(":rotated@")).await;
    let after: Vec<String> = futures::future::join_all(
        ["nova-api-db-connection", "nova-transport-url"].map(|n| async {
            secrets
                .get(n)
                .await
                .expect("get")
                .resource_version()
                .unwrap_or_default()
        }),
    )
    .await;
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

    // Quiet steady state: wake the controller without changing anything it reads.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (secret_writes, status_writes, passes_before) = (
        writes(&client, "secrets", "").await,
        writes(&client, "novas", "status").await,
        passes(&metrics),
    );
    for i in 0..5 {
        let touch = json!({"metadata": {"annotations": {"test.nova/touch": i.to_string()}}});
        novas
            .patch("nova", &PatchParams::default(), &Patch::Merge(touch))
            .await
            .expect("touch");
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
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
    let planted = [
        API_DB_PASSWORD,
        CELL_DB_PASSWORD,
        SERVICE_PASSWORD,
        SHARED_SECRET,
        RABBIT_PASSWORD,
        "rotated",
    ];
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
    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete");
    let deadline = Instant::now() + TIMEOUT;
    while novas.get_opt("nova").await.expect("get").is_some() {
        assert!(
            Instant::now() < deadline,
            "the finalizer was never released"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
