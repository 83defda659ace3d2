//! What the other operators and the users would have created: the credential Secrets, the
//! SecretStore, the RabbitmqCluster, the MariaDB objects (their operator SIMULATED by a watch
//! that marks them Ready), the Gateway's acceptance of the routes (SIMULATED), kwok nodes, and
//! the published Nova a pool joins.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::{Client, ResourceExt};
use nova_api::labels::COMPUTE_CONFIG_MIRROR;
use nova_api::v1alpha1::Nova;
use nova_controller::objects::kinds as external;
use serde_json::json;

use crate::fixtures::*;

/// A kwok node with the pool label `pool` and a zone.
pub async fn create_zoned_node(nodes: &Api<Node>, name: &str, pool: &str, zone: &str) {
    create_node(nodes, &zoned_node(name, pool, zone)).await;
}

/// A kwok node with the pool label `pool` and a zone, tainted ([`tainted_zoned_node`]): the real
/// tier's, where the real node runs the pods of the tests beside it.
pub async fn create_tainted_zoned_node(nodes: &Api<Node>, name: &str, pool: &str, zone: &str) {
    create_node(nodes, &tainted_zoned_node(name, pool, zone)).await;
}

async fn create_node(nodes: &Api<Node>, node: &Node) {
    nodes
        .create(&PostParams::default(), node)
        .await
        .expect("create node");
}

/// The Nova `nova` pools join, at `keystone` with its service user's `password`, with the
/// status a converged Nova publishes (no Nova controller runs beside the pools), its
/// service-user Secret, its compute contract mirrored (labelled) into the namespace, and an
/// unlabelled hypervisor-operator auth Secret.
pub async fn provide_pool_nova(client: &Client, ns: &str, keystone: &str, password: &str) {
    let mut nova = example(ns);
    nova.spec.keystone_endpoint = keystone.to_owned();
    create_published(client, &nova).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    put_secret(&secrets, "nova-keystone", &[("password", password)]).await;
    put_secret(&secrets, "nova-compute-config", &contract(password)).await;
    put_secret(
        &secrets,
        "nova-hypervisor-operator-auth",
        &[("password", "x")],
    )
    .await;
    mark_mirror(&secrets, "nova-compute-config").await;
}

/// Creates `nova` with the status a converged Nova publishes (its release installed, its
/// contract published), as no Nova controller runs beside the pools.
pub async fn create_published(client: &Client, nova: &Nova) {
    let novas: Api<Nova> = Api::namespaced(client.clone(), &nova.namespace().unwrap_or_default());
    novas
        .create(&PostParams::default(), nova)
        .await
        .expect("create Nova");
    novas
        .patch_status(
            &nova.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "installedRelease": "2026.1",
                "computeConfigSecretRef": {"name": "nova-compute-config"}
            }})),
        )
        .await
        .expect("Nova status");
}

/// Labels a Secret as a ControlPlane's compute-config mirror.
pub async fn mark_mirror(secrets: &Api<Secret>, name: &str) {
    let mirror = json!({"metadata": {"labels": {COMPUTE_CONFIG_MIRROR: "true"}}});
    secrets
        .patch(name, &PatchParams::default(), &Patch::Merge(mirror))
        .await
        .expect("mirror label");
}

pub async fn put_secret(api: &Api<Secret>, name: &str, data: &[(&str, &str)]) {
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
pub async fn create_with_status(
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

/// Creates the Ready SecretStore `vault` the example selects.
pub async fn create_secret_store(client: &Client, ns: &str) {
    let stores =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::secret_store());
    create_with_status(
        &stores,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "vault"},
               "spec": {"provider": {"fake": {"data": []}}}}),
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Valid", "message": "store validated"}]}),
    )
    .await;
}

/// Creates the example's RabbitmqCluster, its status naming the default-user Secret its
/// operator would create.
pub async fn create_rabbitmq_cluster(client: &Client, ns: &str) {
    let rabbits =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::rabbitmq_cluster());
    create_with_status(
        &rabbits,
        json!({"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster", "metadata": {"name": "openstack-rabbitmq"}, "spec": {}}),
        json!({"conditions": [], "defaultUser": {"secretReference": {
            "name": "openstack-rabbitmq-default-user", "namespace": ns,
            "keys": {"username": "username", "password": "password"}}}}),
    )
    .await;
}

/// Creates the RabbitmqCluster's default-user Secret, as its operator would.
pub async fn put_default_user(client: &Client, ns: &str) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
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
}

/// Creates the example's RabbitmqCluster with its default-user Secret, as its operator would.
pub async fn create_rabbitmq(client: &Client, ns: &str) {
    put_default_user(client, ns).await;
    create_rabbitmq_cluster(client, ns).await;
}

/// Creates every input the Secrets step reads: a Ready SecretStore and the four credential
/// Secrets.
pub async fn provide_credentials(client: &Client, ns: &str) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    create_secret_store(client, ns).await;
    put_secret(
        &secrets,
        "nova-api-db",
        &[("username", "u"), ("password", API_DB_PASSWORD)],
    )
    .await;
    put_secret(
        &secrets,
        "nova-db",
        &[("username", "u"), ("password", CELL_DB_PASSWORD)],
    )
    .await;
    put_secret(&secrets, "nova-keystone", &[("password", SERVICE_PASSWORD)]).await;
    put_secret(
        &secrets,
        "nova-metadata-secret",
        &[("shared_secret", SHARED_SECRET)],
    )
    .await;
}

/// Creates every input the pipeline reads: the credentials, a RabbitmqCluster with its
/// default-user Secret, and a Ready MariaDB cluster with the simulated MariaDB operator.
pub async fn provide_inputs(client: &Client, ns: &str) {
    provide_credentials(client, ns).await;
    create_rabbitmq(client, ns).await;
    provide_database(client, ns).await;
}

/// A Ready MariaDB cluster `openstack-mariadb`, and the simulated MariaDB operator: every
/// Database, User and Grant of `ns` is reported Ready, as its operator would once the schema,
/// user or grant exists. It follows the three kinds with watches (never a LIST after the
/// first), so the steady-state counters see nothing of it once everything is Ready.
pub async fn provide_database(client: &Client, ns: &str) {
    let clusters = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::mariadb());
    create_with_status(
        &clusters,
        json!({"apiVersion": "k8s.mariadb.com/v1alpha1", "kind": "MariaDB",
               "metadata": {"name": "openstack-mariadb"}, "spec": {}}),
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Running",
               "message": "simulated mariadb-operator", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    )
    .await;
    for kind in external::mariadb_children() {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kind);
        tokio::spawn(async move {
            let objects = kube::runtime::watcher(api.clone(), Default::default())
                .default_backoff()
                .applied_objects();
            futures::pin_mut!(objects);
            while let Some(object) = objects.next().await {
                let Ok(object) = object else { continue };
                if external::is_ready(&object) {
                    continue;
                }
                let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                    "reason": "Created", "message": "simulated mariadb-operator: created",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
                // Retried as its operator would requeue: the watch does not deliver the object
                // again, so a write lost to an API server or etcd outage would never be redone.
                let deadline = Instant::now() + TIMEOUT;
                while let Err(e) = api
                    .patch_status(
                        &object.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(status.clone()),
                    )
                    .await
                {
                    let gone = matches!(&e, kube::Error::Api(s) if s.code == 404);
                    if gone || Instant::now() >= deadline {
                        break;
                    }
                    // The simulated operator's requeue interval, not a wait for state.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    }
}

/// Plays the Gateway controller (simulated): every HTTPRoute of the Nova `name` without a
/// parent status is marked Accepted by its first parent.
pub async fn accept_routes(client: &Client, ns: &str) {
    let routes = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &external::http_route());
    for route in routes
        .list(&Default::default())
        .await
        .expect("routes")
        .items
    {
        if route.data["status"]["parents"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
        {
            continue;
        }
        let parent = route.data["spec"]["parentRefs"][0].clone();
        let status = json!({"status": {"parents": [{
            "parentRef": parent,
            "controllerName": "example.com/simulated-gateway",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "message": "accepted by the simulated gateway", "lastTransitionTime": "2026-01-01T00:00:00Z",
                            "observedGeneration": route.metadata.generation.unwrap_or(1)}]
        }]}});
        routes
            .patch_status(
                &route.name_any(),
                &PatchParams::default(),
                &Patch::Merge(status),
            )
            .await
            .expect("route status");
    }
}

/// The resourceVersions of some Secrets, to tell which ones a change rewrote.
pub async fn versions(api: &Api<Secret>, names: &[&str]) -> Vec<String> {
    let mut versions = Vec::new();
    for name in names {
        versions.push(
            api.get(name)
                .await
                .expect("get")
                .resource_version()
                .unwrap_or_default(),
        );
    }
    versions
}

/// Holds the MariaDB object `name` of `api` by `finalizer`, as its operator's finalizer would,
/// or lets it go (`None`).
pub async fn hold_by(api: &Api<DynamicObject>, name: &str, finalizer: Option<&str>) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizer.map(|f| [f])}})),
    )
    .await
    .expect("the finalizers written");
}
