//! The cluster handle against a real API server: apply skips what the cache shows unchanged,
//! repairs drift, refuses another owner's object with the spec's message, adopts one nobody
//! controls, tolerates an object that already exists before its watch event (the config
//! ConfigMap create race); prune and delete; and a namespace-scoped install whose only rights
//! are a namespaced Role.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_controller::clusters::{
    Applied, ClusterError, ClusterReads, ClusterWrites, KubeCluster, Registry,
};
use nova_controller::nova;
use nova_controller::objects::{Child, Owner, kinds};
use nova_testkit::prelude::*;
use serde_json::json;

/// A real object to own the children (the garbage collector deletes a child whose owner
/// does not exist).
async fn owner(client: &Client, ns: &str) -> Owner {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("owner".into());
    let cm = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("owner");
    Owner {
        kind: "ConfigMap".into(),
        namespace: ns.to_owned(),
        reference: Some(OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: cm.uid().expect("uid"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }),
        labels: BTreeMap::from([("app.kubernetes.io/instance".to_owned(), "owner".to_owned())]),
    }
}

fn config_map(name: &str, data: &str) -> Child {
    Child::new(&ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([("role".to_owned(), "child".to_owned())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_owned(), data.to_owned())])),
        ..Default::default()
    })
}

async fn handle(client: &Client, ns: &str) -> std::sync::Arc<KubeCluster> {
    let registry = Registry::default().register(nova::controller::kinds());
    let cluster = KubeCluster::start(client.clone(), Some(ns.to_owned()), registry).await;
    cluster.synced().await;
    cluster
}

/// Waits until the handle's cache shows `check` true for the ConfigMap `name`.
async fn cached(
    cluster: &KubeCluster,
    ns: &str,
    name: &str,
    check: impl Fn(Option<&ObjectMeta>) -> bool,
) {
    let kind = ApiResource::erase::<ConfigMap>(&());
    Wait::new(format!("the cache to show {name} as expected"), TIMEOUT)
        .until(|| async {
            let meta = cluster.metadata(&kind, ns, name).expect("registered");
            check(meta.as_ref().map(|m| &m.metadata))
        })
        .await
        .expect("the cached metadata");
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_skips_repairs_refuses_adopts_prunes_and_deletes() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("cluster-handle").await.expect("namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let owner = owner(&client, &ns).await;
    let cluster = handle(&client, &ns).await;

    // Created, then unchanged: the second apply sends nothing.
    let child = config_map("a", "1");
    assert_eq!(
        cluster.apply(&owner, &child).await.expect("apply"),
        Applied::Written
    );
    let created = cms.get("a").await.expect("created");
    assert_eq!(created.labels()["app.kubernetes.io/instance"], "owner");
    assert!(owner.controls(&created.metadata));
    assert_eq!(
        cluster.apply(&owner, &child).await.expect("apply"),
        Applied::Unchanged
    );

    // Label drift on the live object is repaired.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"role": "edited"}}})),
    )
    .await
    .expect("drift");
    cached(&cluster, &ns, "a", |m| {
        m.and_then(|m| m.labels.as_ref())
            .is_some_and(|l| l["role"] == "edited")
    })
    .await;
    assert_eq!(
        cluster.apply(&owner, &child).await.expect("apply"),
        Applied::Written
    );
    assert_eq!(cms.get("a").await.expect("a").labels()["role"], "child");

    // A dropped data key is released by the next apply.
    let mut two_keys = ConfigMap::default();
    two_keys.metadata.name = Some("b".into());
    two_keys.data = Some(BTreeMap::from([
        ("k".to_owned(), "1".to_owned()),
        ("old".to_owned(), "x".to_owned()),
    ]));
    cluster
        .apply(&owner, &Child::new(&two_keys))
        .await
        .expect("apply");
    let mut one_key = two_keys.clone();
    one_key.data = Some(BTreeMap::from([("k".to_owned(), "1".to_owned())]));
    assert_eq!(
        cluster
            .apply(&owner, &Child::new(&one_key))
            .await
            .expect("apply"),
        Applied::Written
    );
    assert!(
        !cms.get("b")
            .await
            .expect("b")
            .data
            .unwrap_or_default()
            .contains_key("old")
    );

    // Another controller's object is refused with the spec's message; nobody's is adopted.
    // Its owner exists: the garbage collector deletes a child of a missing owner, and a
    // foreign ConfigMap gone before the apply would simply be created.
    let mut someone_else = ConfigMap::default();
    someone_else.metadata.name = Some("someone-else".into());
    let someone_else = cms
        .create(&PostParams::default(), &someone_else)
        .await
        .expect("someone-else");
    let mut foreign = ConfigMap::default();
    foreign.metadata.name = Some("foreign".into());
    foreign.metadata.owner_references = Some(vec![OwnerReference {
        controller: Some(true),
        ..owner
            .reference
            .clone()
            .map(|mut r| {
                r.name = "someone-else".into();
                r.uid = someone_else.uid().expect("uid");
                r
            })
            .expect("reference")
    }]);
    cms.create(&PostParams::default(), &foreign)
        .await
        .expect("foreign");
    let mut orphan = ConfigMap::default();
    orphan.metadata.name = Some("orphan".into());
    cms.create(&PostParams::default(), &orphan)
        .await
        .expect("orphan");
    cached(&cluster, &ns, "foreign", |m| m.is_some()).await;
    cached(&cluster, &ns, "orphan", |m| m.is_some()).await;
    let refused = cluster
        .apply(&owner, &config_map("foreign", "1"))
        .await
        .expect_err("refused");
    assert!(matches!(refused, ClusterError::ForeignOwner { .. }));
    assert_eq!(
        refused.to_string(),
        format!(
            "refusing to adopt pre-existing ConfigMap {ns}/foreign: it was not created by this ConfigMap, so adopting it would overwrite its spec and delete it at teardown"
        )
    );
    assert_eq!(
        cluster
            .apply(&owner, &config_map("orphan", "1"))
            .await
            .expect("adopts"),
        Applied::Written
    );
    assert!(owner.controls(&cms.get("orphan").await.expect("orphan").metadata));

    // The create race: an object of ours that the cache has not seen yet is applied, not
    // refused with AlreadyExists (an immutable config ConfigMap with the same content).
    let mut immutable = ConfigMap::default();
    immutable.metadata.name = Some("nova-config-race".into());
    immutable.metadata.owner_references = owner.reference.clone().map(|r| vec![r]);
    immutable.data = Some(BTreeMap::from([("k".to_owned(), "1".to_owned())]));
    immutable.immutable = Some(true);
    cms.create(&PostParams::default(), &immutable)
        .await
        .expect("created first");
    let mut desired = immutable.clone();
    desired.metadata.owner_references = None;
    cluster
        .apply(&owner, &Child::new(&desired))
        .await
        .expect("an existing object of ours is fine");

    // Prune keeps what it is told to and never touches what the owner does not control.
    let selector = BTreeMap::from([("role".to_owned(), "child".to_owned())]);
    let kind = ApiResource::erase::<ConfigMap>(&());
    cached(&cluster, &ns, "orphan", |m| {
        m.is_some_and(|m| owner.controls(m))
    })
    .await;
    let pruned = cluster
        .prune(&owner, &kind, &selector, &["a".to_owned()])
        .await
        .expect("prune");
    assert_eq!(pruned, 1, "orphan, now ours and labelled, goes; a stays");
    assert!(cms.get_opt("orphan").await.expect("get").is_none());
    assert!(cms.get_opt("a").await.expect("get").is_some());
    assert!(cms.get_opt("foreign").await.expect("get").is_some());

    // Deleting something already gone is not an error; a delete by name never touches an
    // object of that name another controller controls, and one on a UID only that object.
    cluster
        .delete(&owner, &kind, "never-existed", None)
        .await
        .expect("absent");
    cms.delete("b", &DeleteParams::default())
        .await
        .expect("delete b");
    cluster
        .delete(&owner, &kind, "b", None)
        .await
        .expect("gone meanwhile");
    cluster
        .delete(&owner, &kind, "foreign", None)
        .await
        .expect("left alone, not an error");
    // A delete of an object the caller saw under another UID (it was replaced since) is
    // refused by the API server's precondition, and not retried by name.
    cluster
        .delete(
            &owner,
            &kind,
            "foreign",
            Some("00000000-0000-0000-0000-000000000000"),
        )
        .await
        .expect("a precondition conflict is not an error");
    assert!(
        cms.get_opt("foreign")
            .await
            .expect("get")
            .is_some_and(|cm| cm.metadata.deletion_timestamp.is_none()),
        "another controller's object of that name is not deleted"
    );
}

/// The chart's namespace-scoped controller Role (`charts/nova-operator/files/controller-rbac.yaml`,
/// the list the chart renders): a Nova must converge under exactly these rules.
fn role(ns: &str) -> Role {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/nova-operator/files/controller-rbac.yaml"
    );
    let rules: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).expect("rules")).expect("YAML");
    serde_json::from_value(json!({
        "metadata": {"name": "nova-operator", "namespace": ns},
        "rules": rules["namespaced"],
    }))
    .expect("role")
}

/// A kubeconfig for a ServiceAccount bound to `role` in `ns` only, with a fresh token.
async fn service_account_kubeconfig(
    cp: &nova_test_harness::ControlPlane,
    client: &Client,
    ns: &str,
) -> std::path::PathBuf {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some("nova-operator".into());
    sas.create(&PostParams::default(), &sa)
        .await
        .expect("service account");
    Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role(ns))
        .await
        .expect("role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "nova-operator", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "nova-operator"},
        "subjects": [{"kind": "ServiceAccount", "name": "nova-operator", "namespace": ns}]
    }))
    .expect("binding");
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    let request =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .expect("request");
    let token = sas
        .create_token_request("nova-operator", &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .expect("status")
        .token
        .expect("a token");
    let dir = cp.dir().join(format!("sa-{ns}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, cp.ca_pem()).expect("ca");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: cp, cluster: {{server: \"{}\", certificate-authority: \"{}\"}}}}]\nusers: [{{name: sa, user: {{token: \"{token}\"}}}}]\ncontexts: [{{name: sa, context: {{cluster: cp, user: sa, namespace: {ns}}}}}]\ncurrent-context: sa\n",
            cp.server_url(),
            ca.display()
        ),
    )
    .expect("kubeconfig");
    kubeconfig
}

#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_scoped_install_converges_with_only_a_namespaced_role() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let admin = cp.client().expect("client");
    let ns = cp.namespace("nova-scoped").await.expect("namespace");
    let kubeconfig = service_account_kubeconfig(cp, &admin, &ns).await;
    let scoped = {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig"),
            &Default::default(),
        )
        .await
        .expect("config");
        Client::try_from(config).expect("client")
    };
    assert!(
        Api::<Secret>::all(scoped.clone())
            .list(&Default::default())
            .await
            .is_err(),
        "the ServiceAccount has no cluster-wide rights"
    );

    // The handle under --namespace: the SecretStore leg is registered, the ClusterSecretStore
    // one is not, and every cache syncs with namespaced rights alone.
    let handle = handle(&scoped, &ns).await;
    assert!(handle.serves(&kinds::secret_store()));
    assert!(!handle.serves(&kinds::cluster_secret_store()));

    // The binary itself: start-up probe, caches, and a Nova that converges.
    provide_inputs(&admin, &ns).await;
    let log = cp.dir().join(format!("nova-controller-{ns}.log"));
    let file = std::fs::File::create(&log).expect("log");
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port()
    };
    let mut controller = tokio::process::Command::new(env!("CARGO_BIN_EXE_nova-controller"))
        .args([
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--namespace",
            &ns,
        ])
        .args(["--leader-elect", "false"])
        .args([
            "--health-check-address",
            &simulated_nova_api().await.to_string(),
        ])
        .env(
            "RUST_LOG",
            "debug,hyper=info,hyper_util=info,h2=info,rustls=info,tower=info",
        )
        .args([
            "--metrics-bind-address",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .args([
            "--health-probe-bind-address",
            &format!("127.0.0.1:{}", free_port()),
        ])
        .stdout(std::process::Stdio::from(file.try_clone().expect("log")))
        .stderr(std::process::Stdio::from(file))
        .kill_on_drop(true)
        .spawn()
        .expect("start nova-controller");
    let novas: Api<Nova> = Api::namespaced(admin.clone(), &ns);
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    wait_converged(&novas, "nova", || match controller.try_wait() {
        Ok(Some(status)) => Err(format!(
            "nova-controller exited ({status}): {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )),
        _ => Ok(()),
    })
    .await;
    controller.kill().await.expect("stop");
}

/// The status write ends a pass with the whole status computed from the pass's copy of the
/// CR; a copy older than the stored object (a cache not yet showing the previous pass's
/// write) is refused as stale instead of putting that write's fields back.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_computed_from_a_stale_copy_is_refused() {
    use nova_controller::pipeline::status::{is_stale, persist};
    let cp = nova_test_harness::shared().await.expect("control plane");
    let ns = cp.namespace("stale-status").await.expect("namespace");
    let client = cp.client().expect("client");
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let stale = novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");
    let version = stale.resource_version();
    let empty = nova_api::v1alpha1::NovaStatus::default();
    let mut first = empty.clone();
    first.installed_release = Some("2026.1".into());
    assert!(
        persist(&novas, "nova", version.as_deref(), &empty, &first, "test")
            .await
            .expect("a write from the current copy")
            .is_some()
    );
    // A second pass still on the creation's copy computes a status without that write.
    let mut second = empty.clone();
    second.observed_generation = Some(1);
    let refused = persist(&novas, "nova", version.as_deref(), &empty, &second, "test")
        .await
        .expect_err("a write from a stale copy");
    assert!(is_stale(&refused), "{refused}");
    let stored = novas.get_status("nova").await.expect("Nova").status;
    assert_eq!(
        stored.and_then(|s| s.installed_release).as_deref(),
        Some("2026.1"),
        "the first write's field stays"
    );
}
