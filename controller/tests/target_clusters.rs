//! Target clusters (`common-types.md` §3.17) with two real control planes: the shared one is
//! the management cluster (the Novas, their status, finalizers and events, the registration
//! Secrets), a second one of its own (its own etcd and API server, kwok playing pods) is the
//! target the Novas' children are placed on. The MariaDB operator is simulated on the target.

mod nova_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use nova_api::labels::ownership;
use nova_api::v1alpha1::{Nova, TargetClusterRefSpec};
use nova_controller::clusters::registration::{KUBECONFIG_KEY, LABEL, NAMESPACES_KEY};
use nova_controller::clusters::{Fleet, Registry, kinds as external};
use nova_controller::nova;
use nova_support::*;
use nova_test_harness::ControlPlane;
use serde_json::json;

/// The abandon window of this suite (five minutes outside tests).
const WINDOW: Duration = Duration::from_secs(10);
const REMOTE_CHILDREN: &str = "openstack.c5c3.io/remote-children";

fn placed(ns: &str, cluster: &str) -> Nova {
    let mut nova = example(ns);
    nova.spec.target_cluster_ref = Some(TargetClusterRefSpec {
        name: cluster.to_owned(),
    });
    nova
}

async fn register(client: &Client, clusters_ns: &str, name: &str, kubeconfig: &str, ns: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "stringData": {KUBECONFIG_KEY: kubeconfig, NAMESPACES_KEY: ns},
    }))
    .expect("registration");
    Api::<Secret>::namespaced(client.clone(), clusters_ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create registration");
}

/// The objects of `kind` in `ns` labelled as owned by the Nova `name`.
async fn owned_by(
    client: &Client,
    ns: &str,
    kind: &kube::core::ApiResource,
    name: &str,
) -> Vec<DynamicObject> {
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, kind);
    api.list(&ListParams::default().labels(&format!("{}={name}", ownership::NAME)))
        .await
        .expect("list")
        .items
}

/// Waits until `check` holds, failing with `what` at the deadline.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(150);
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What the API server counted so far, per resource: the writes of every child kind and of
/// the Novas' status, and the GETs and LISTs of what a pass reads.
async fn requests_now(client: &Client) -> BTreeMap<String, (u64, u64)> {
    let mut counted = BTreeMap::new();
    // The Jobs too: the waiting Novas' db-sync Jobs are theirs.
    let jobs = ["jobs"];
    for resource in WRITTEN_RESOURCES
        .iter()
        .chain(&jobs)
        .chain(READ_RESOURCES.iter())
    {
        let counts = (
            requests(client, &[resource], &WRITE_VERBS).await,
            requests(client, &[resource], &READ_VERBS).await,
        );
        counted.insert((*resource).to_owned(), counts);
    }
    counted.insert(
        "novas/status".to_owned(),
        (writes(client, "novas", "status").await, 0),
    );
    counted
}

/// What was counted between two readings, the resources that saw any request.
fn cost(
    before: &BTreeMap<String, (u64, u64)>,
    after: &BTreeMap<String, (u64, u64)>,
) -> BTreeMap<String, (u64, u64)> {
    after
        .iter()
        .map(|(r, (w, g))| {
            let (w0, g0) = before.get(r).copied().unwrap_or_default();
            (r.clone(), (w - w0, g - g0))
        })
        .filter(|(_, c)| *c != (0, 0))
        .collect()
}

/// The reason of the DatabaseReady condition of the Nova `name`.
async fn database_reason(novas: &Api<Nova>, name: &str) -> Option<String> {
    let nova = novas.get(name).await.expect("nova");
    let condition = nova
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "DatabaseReady")?;
    Some(condition.reason)
}

async fn finalizers(novas: &Api<Nova>, name: &str) -> Vec<String> {
    novas.get(name).await.expect("nova").finalizers().to_vec()
}

#[tokio::test(flavor = "multi_thread")]
async fn novas_placed_on_a_registered_target_cluster() {
    let home = nova_test_harness::shared()
        .await
        .expect("management control plane");
    let target = ControlPlane::start().await.expect("target control plane");
    let home_client = home.client().expect("client");
    let target_client = target.client().expect("target client");
    let ns = home.namespace("placed").await.expect("namespace");
    let clusters_ns = home
        .namespace("clusters")
        .await
        .expect("clusters namespace");
    let on_target: Namespace =
        serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
    Api::<Namespace>::all(target_client.clone())
        .create(&PostParams::default(), &on_target)
        .await
        .expect("the namespace on the target");
    provide_inputs(&target_client, &ns).await;

    let registry = Registry::default().register(nova::controller::kinds());
    let fleet = Fleet::start(home_client.clone(), &clusters_ns, registry, WINDOW);
    let mut remote_secrets = fleet.subscribe(&kube::core::ApiResource::erase::<Secret>(&()));
    let metrics = start_controller_placing(
        home_client.clone(),
        &ns,
        simulated_nova_api().await,
        Some(fleet.clone()),
    )
    .await;
    let novas: Api<Nova> = Api::namespaced(home_client.clone(), &ns);

    // Refused and unregistered clusters: the gate says so, no finalizer, nothing created.
    let exec = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: \"{}\"}}\nusers:\n- name: plugin\n  user:\n    exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/true}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: plugin}}\ncurrent-context: t\n",
        target.server_url()
    );
    register(&home_client, &clusters_ns, "exec-cluster", &exec, &ns).await;
    for (name, cluster) in [("nova-exec", "exec-cluster"), ("nova-nowhere", "nowhere")] {
        let mut nova = placed(&ns, cluster);
        nova.metadata.name = Some(name.to_owned());
        novas
            .create(&PostParams::default(), &nova)
            .await
            .expect("create");
        let message = wait_for_reason(&novas, name, "TargetClusterUnavailable").await;
        assert_eq!(message, "cluster not found", "{name}");
        assert!(finalizers(&novas, name).await.is_empty(), "{name}");
    }

    // A registered target: every child there, with the ownership labels, none at home.
    let kubeconfig = std::fs::read_to_string(target.kubeconfig_path()).expect("kubeconfig");
    register(&home_client, &clusters_ns, "target", &kubeconfig, &ns).await;
    for name in ["nova", "nova-b"] {
        let mut nova = placed(&ns, "target");
        nova.metadata.name = Some(name.to_owned());
        novas
            .create(&PostParams::default(), &nova)
            .await
            .expect("create");
    }
    let secret = kube::core::ApiResource::erase::<Secret>(&());
    let config_map = kube::core::ApiResource::erase::<ConfigMap>(&());
    let [database, ..] = external::mariadb_children();
    let (there, namespace, novas_ref) = (&target_client, ns.as_str(), &novas);
    for kind in [&secret, &config_map, &database] {
        eventually(
            &format!("{} of the Nova on the target", kind.kind),
            || async move { !owned_by(there, namespace, kind, "nova").await.is_empty() },
        )
        .await;
        for child in owned_by(&target_client, &ns, kind, "nova").await {
            let labels = child.labels();
            assert_eq!(labels[ownership::KIND], "Nova", "{}", child.name_any());
            assert_eq!(labels[ownership::NAMESPACE], ns, "{}", child.name_any());
            assert!(
                child.meta().owner_references.is_none(),
                "{} {}: an owner reference does not cross clusters",
                kind.kind,
                child.name_any()
            );
        }
    }
    let home_children = Api::<Secret>::namespaced(home_client.clone(), &ns)
        .list(&ListParams::default().labels("app.kubernetes.io/instance=nova"))
        .await
        .expect("list");
    assert!(home_children.items.is_empty(), "no child at home");
    for name in ["nova-exec", "nova-nowhere"] {
        for kind in [&secret, &config_map, &database] {
            assert!(owned_by(&target_client, &ns, kind, name).await.is_empty());
        }
    }
    assert_eq!(
        finalizers(&novas, "nova").await,
        [nova::FINALIZER, REMOTE_CHILDREN],
        "both finalizers, each in its own pass"
    );

    // The children's events come back from the target, named after it.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let next = tokio::time::timeout_at(deadline.into(), remote_secrets.next()).await;
        let (cluster, meta) = next.expect("a Secret event from the target").expect("open");
        if meta.labels().get(ownership::NAME).map(String::as_str) == Some("nova") {
            assert_eq!(cluster, "target");
            break;
        }
    }

    // Steady state of a placed Nova: both wait on their db-sync Job (kwok holds its pod), and
    // passes over them cost neither API server a write or a GET/LIST.
    for name in ["nova", "nova-b"] {
        eventually(&format!("{name} waits on its db-sync Job"), || async move {
            database_reason(novas_ref, name).await.as_deref() == Some("DBSyncInProgress")
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (home_before, target_before) = (
        requests_now(&home_client).await,
        requests_now(&target_client).await,
    );
    touch_five_times(&novas, "nova", "placed", || passes(&metrics)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (home_after, target_after) = (
        requests_now(&home_client).await,
        requests_now(&target_client).await,
    );
    let (home_cost, target_cost) = (
        cost(&home_before, &home_after),
        cost(&target_before, &target_after),
    );
    println!("placed steady state: management {home_cost:?}, target {target_cost:?}");
    assert!(home_cost.is_empty(), "management cluster: {home_cost:?}");
    assert!(target_cost.is_empty(), "target cluster: {target_cost:?}");

    // Deleting the Nova sweeps the target clean.
    novas
        .delete("nova", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("the Nova is gone", || async move {
        novas_ref.get_opt("nova").await.expect("get").is_none()
    })
    .await;
    for kind in [&secret, &config_map, &database] {
        eventually(
            &format!("no {} of the Nova left", kind.kind),
            || async move {
                owned_by(there, namespace, kind, "nova")
                    .await
                    .iter()
                    .all(|o| o.meta().deletion_timestamp.is_some())
            },
        )
        .await;
    }
    assert!(
        !owned_by(&target_client, &ns, &secret, "nova-b")
            .await
            .is_empty(),
        "the sweep takes only what the deleted Nova owns"
    );

    // The target's API server stops during the deletion of the second Nova: it waits, then
    // abandons the children after the window and leaves.
    drop(target);
    novas
        .delete("nova-b", &DeleteParams::default())
        .await
        .expect("delete");
    let message = wait_for_reason(&novas, "nova-b", "TargetClusterUnavailable").await;
    assert!(message.contains("does not answer"), "{message}");
    eventually("the Nova leaves after the window", || async move {
        novas_ref.get_opt("nova-b").await.expect("get").is_none()
    })
    .await;
    let events = Api::<Event>::namespaced(home_client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("events");
    let abandoned = events
        .items
        .iter()
        .find(|e| {
            e.reason.as_deref() == Some("RemoteChildrenAbandoned")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nova-b")
        })
        .expect("a RemoteChildrenAbandoned event");
    assert_eq!(abandoned.type_.as_deref(), Some("Warning"));
    assert!(
        abandoned
            .note
            .as_deref()
            .is_some_and(|n| n.contains("stay behind")),
        "{abandoned:?}"
    );
}
