//! Outage drills on the real node against the real OpenStack (about 6 minutes, 314-370 s measured
//! with the set-up and the first Ready). With the operator's Nova Ready, each of
//! MariaDB, RabbitMQ and the Nova API goes away while a spec change is being reconciled, then
//! comes back; the in-process controller keeps running throughout. Each drill checks that a
//! condition went False under the spec's reason for that outage (every False condition seen
//! is printed), that no child the spec change did not replace was deleted (uids compared),
//! and that the Nova returns to Ready by itself.
//!
//! How each outage is made, and why:
//! - MariaDB: the Service the Nova reaches it by loses its endpoints, as in a failover that left
//!   no primary. That Service is the namespace's own (selector-less, its EndpointSlice naming
//!   the shared MariaDB's pod), so the outage is this test's alone and the tests beside it keep
//!   their database. Scaling the Deployment to 0 would wipe the schemas (the harness's MariaDB
//!   keeps them in an emptyDir), which no real database outage does. The spec change is a
//!   config change (`logging.debug`), so the real db-sync Job re-runs into the outage.
//! - RabbitMQ: the Deployment of the namespace's broker (the simulated operator's, for the
//!   Nova's RabbitmqCluster) scaled to 0 and back to 1: a real broker stop (its user and vhost
//!   come from its config file; nova's queues are transient). The spec change moves the
//!   archive schedule.
//! - Nova API: its Deployment scaled to 0 by someone else (the operator owns the replica count
//!   and must restore it: a removed API is an outage only an operator that restores it ends).
//!   The spec change moves the archive schedule again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_test_harness::images::{nova_image, pinned};
use nova_test_harness::openstack::{MARIADB, OpenStack, Ports, RABBITMQ};
use nova_test_harness::pods;
use nova_testkit::inputs::accept_routes;
use nova_testkit::prelude::{about_nova, holds, reason};
use nova_testkit::real::*;
use serde_json::{Value, json};

/// The kinds of child the operator creates for a Nova, by (api version, kind, plural).
const CHILD_KINDS: [(&str, &str, &str); 10] = [
    ("apps/v1", "Deployment", "deployments"),
    ("v1", "Service", "services"),
    ("v1", "Secret", "secrets"),
    ("v1", "ConfigMap", "configmaps"),
    ("v1", "ServiceAccount", "serviceaccounts"),
    ("batch/v1", "Job", "jobs"),
    ("batch/v1", "CronJob", "cronjobs"),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes"),
];

/// Every object in `ns` the Nova owns, `Kind/name` to uid.
pub(super) async fn children(client: &Client, ns: &str, owner: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for (api_version, kind, plural) in CHILD_KINDS {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let resource = kube::api::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
        for object in api.list(&ListParams::default()).await.expect(kind).items {
            if object.owner_references().iter().any(|o| o.uid == owner) {
                found.insert(
                    format!("{kind}/{}", object.name_any()),
                    object.uid().unwrap_or_default(),
                );
            }
        }
    }
    found
}

/// The children of `before` that are gone or were replaced (another uid) in `after`, except
/// those of the kinds in `replaceable` (what the drill's spec change legitimately rolls).
pub(super) fn lost(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
    replaceable: &[&str],
) -> Vec<String> {
    before
        .iter()
        .filter(|(key, _)| {
            !replaceable
                .iter()
                .any(|k| key.starts_with(&format!("{k}/")))
        })
        .filter(|(key, uid)| after.get(*key) != Some(uid))
        .map(|(key, _)| key.clone())
        .collect()
}

/// Waits (playing the Gateway) until `done` holds on the Nova, collecting every
/// `Type=False/Reason` seen; dumps the namespace and fails after `timeout`.
pub(super) async fn watch_until(
    client: &Client,
    ns: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&Nova) -> bool,
) -> BTreeSet<String> {
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let seen = std::sync::Mutex::new(BTreeSet::new());
    let waited = about_nova(&novas, "nova", what, timeout)
        .until(|| async {
            accept_routes(client, ns).await;
            let nova = novas.get("nova").await?;
            let mut seen = seen.lock().expect("seen");
            for c in nova.status.iter().flat_map(|s| s.conditions.iter()) {
                if c.status == "False" && c.type_ != "Ready" {
                    seen.insert(format!("{}=False/{}", c.type_, c.reason));
                }
            }
            Ok(done(&nova).then_some(()))
        })
        .await;
    let seen = seen.into_inner().expect("seen");
    if let Err(timeout) = waited {
        dump(client, ns).await;
        panic!("{timeout}\nFalse conditions seen: {seen:?}");
    }
    eprintln!(
        "drill: {what} after {:.0}s; False conditions seen: {seen:?}",
        started.elapsed().as_secs_f64()
    );
    seen
}

/// Sets the replica count of a Deployment through its scale subresource, as `kubectl scale`.
async fn scale(client: &Client, ns: &str, name: &str, replicas: i32) {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch_scale(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scale");
}

/// The EndpointSlice of the namespace's own MariaDB Service.
const MARIADB_SLICE: &str = "openstack-mariadb-drill";

/// Replaces the namespace's ExternalName Service for MariaDB with one of its own, selector-less,
/// whose EndpointSlice names the shared MariaDB's pod: what the MariaDB drill takes away.
pub(super) async fn own_mariadb_service(client: &Client, os: &OpenStack, ns: &str) {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    services
        .delete(MARIADB, &DeleteParams::default())
        .await
        .expect("the ExternalName Service");
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": MARIADB},
        "spec": {"ports": [{"name": "main", "port": Ports::MARIADB, "targetPort": Ports::MARIADB}]}});
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(service).expect("a Service"),
        )
        .await
        .expect("the namespace's MariaDB Service");
    let pod = os
        .endpoint(MARIADB, Ports::MARIADB)
        .await
        .expect("the MariaDB pod");
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": MARIADB_SLICE, "labels": {
            "kubernetes.io/service-name": MARIADB,
            "endpointslice.kubernetes.io/managed-by": "nova-operator-outage-drill"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [pod.ip().to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "main", "port": Ports::MARIADB, "protocol": "TCP"}]});
    Api::<EndpointSlice>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(slice).expect("an EndpointSlice"),
        )
        .await
        .expect("the namespace's MariaDB EndpointSlice");
}

/// Sets the endpoints of the namespace's MariaDB Service: the shared pod's, or none.
async fn mariadb_endpoints(client: &Client, ns: &str, endpoints: Value) {
    Api::<EndpointSlice>::namespaced(client.clone(), ns)
        .patch(
            MARIADB_SLICE,
            &PatchParams::default(),
            &Patch::Merge(json!({ "endpoints": endpoints })),
        )
        .await
        .expect("the MariaDB endpoints");
}

/// Fails unless the re-run db-sync Job is still unfinished (it met the outage), printing how
/// many lines of its pod's log name a failed connection.
async fn db_sync_waits_on_the_database(client: &Client, ns: &str) {
    let job = Api::<Job>::namespaced(client.clone(), ns)
        .get("nova-db-sync")
        .await
        .expect("db-sync Job");
    let status = job.status.clone().unwrap_or_default();
    assert_eq!(
        status.succeeded.unwrap_or(0),
        0,
        "the db-sync re-run finished during the MariaDB outage: {status:?}"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let listed = ListParams::default().labels(&format!(
        "batch.kubernetes.io/controller-uid={}",
        job.uid().unwrap_or_default()
    ));
    let mut refused = 0;
    for pod in pods.list(&listed).await.expect("pods").items {
        let log = pods::logs(client, ns, &pod.name_any(), "db-sync")
            .await
            .unwrap_or_default();
        refused += log
            .lines()
            .filter(|l| l.contains("Can't connect") || l.contains("refused"))
            .count();
    }
    eprintln!(
        "drill: db-sync at the MariaDB restart: {} failed pod(s), {} active, {refused} log line(s) of refused connections",
        status.failed.unwrap_or(0),
        status.active.unwrap_or(0)
    );
}

pub(super) async fn change_spec(client: &Client, ns: &str, spec: Value) {
    Api::<Nova>::namespaced(client.clone(), ns)
        .patch(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .expect("spec change");
}

/// The Nova the drills run on.
struct Subject {
    client: Client,
    ns: String,
    /// The Nova's uid, which its children's owner references carry.
    owner: String,
}

/// One outage: what it is called, the spec change in flight, the condition that must go
/// False (type, reason), how long to hold it once it shows so the in-flight work really meets
/// it, and the kinds of child the spec change itself replaces.
struct Outage {
    name: &'static str,
    spec: Value,
    down: (&'static str, &'static str),
    hold: Duration,
    replaceable: &'static [&'static str],
}

/// Runs `outage`: the spec change, `stop`, the wait for its condition, the hold, `restart`,
/// the way back to Ready; returns the children lost outside the replaceable kinds.
async fn drill(
    subject: &Subject,
    outage: Outage,
    stop: impl std::future::Future<Output = ()>,
    restart: impl std::future::Future<Output = ()>,
) -> Vec<String> {
    let Subject { client, ns, owner } = subject;
    let Outage {
        name,
        spec,
        down: (type_, want),
        hold,
        replaceable,
    } = outage;
    let down = |n: &Nova| holds(n, type_, "False") && reason(n, type_) == Some(want);
    let before = children(client, ns, owner).await;
    let started = Instant::now();
    change_spec(client, ns, spec).await;
    stop.await;
    eprintln!("drill: {name} stopped");
    watch_until(
        client,
        ns,
        &format!("{name}: the outage shows"),
        REAL_TIMEOUT,
        down,
    )
    .await;
    // The outage lasts `hold` on purpose: the reconcile must meet it, not a blip.
    tokio::time::sleep(hold).await;
    restart.await;
    eprintln!("drill: {name} restarted");
    let restarted = Instant::now();
    watch_until(
        client,
        ns,
        &format!("{name}: Ready again"),
        REAL_TIMEOUT,
        |n| holds(n, "Ready", "True"),
    )
    .await;
    eprintln!(
        "drill: {name} recovered {:.0}s after its restart ({:.0}s in all)",
        restarted.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    lost(&before, &children(client, ns, owner).await, replaceable)
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_rabbitmq_and_nova_api_outages_mid_reconcile_recover_without_loss() {
    let _timed = nova_testkit::stack::timed().await;
    let setup = start("outages").await;
    let (client, ns) = (setup.client.clone(), setup.ns.clone());
    own_mariadb_service(&client, setup.os, &ns).await;
    let endpoints = Api::<EndpointSlice>::namespaced(client.clone(), &ns)
        .get(MARIADB_SLICE)
        .await
        .expect("the MariaDB endpoints")
        .endpoints;
    let endpoints = serde_json::to_value(endpoints).expect("endpoints");
    let image = pinned(&nova_image(RELEASE)).expect("the nova image's digest");
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let t = Instant::now();
    let nova = novas
        .create(&PostParams::default(), &real_nova(&ns, &image))
        .await
        .expect("create Nova");
    let owner = nova.uid().expect("uid");
    watch_until(&client, &ns, "Ready=True", REAL_TIMEOUT, |n| {
        holds(n, "Ready", "True")
    })
    .await;
    eprintln!("drill: Nova Ready after {:.0}s", t.elapsed().as_secs_f64());
    let mut losses = BTreeMap::new();

    let subject = Subject {
        client: client.clone(),
        ns: ns.clone(),
        owner,
    };
    let mariadb = Outage {
        name: "MariaDB",
        spec: json!({"logging": {"debug": true}}),
        down: ("DatabaseReady", "DBSyncInProgress"),
        hold: Duration::from_secs(45),
        replaceable: &["Job", "ConfigMap"],
    };
    let stop = mariadb_endpoints(&client, &ns, json!([]));
    let restart = async {
        db_sync_waits_on_the_database(&client, &ns).await;
        mariadb_endpoints(&client, &ns, endpoints).await;
    };
    losses.insert("MariaDB", drill(&subject, mariadb, stop, restart).await);

    let rabbitmq = Outage {
        name: "RabbitMQ",
        spec: json!({"dbArchive": {"schedule": "17 3 * * *"}}),
        down: ("ConductorReady", "WaitingForConductor"),
        hold: Duration::from_secs(10),
        replaceable: &[],
    };
    // The Nova's own broker, the simulated rabbitmq-cluster-operator's in its namespace.
    let stop = scale(&client, &ns, RABBITMQ, 0);
    let restart = scale(&client, &ns, RABBITMQ, 1);
    losses.insert("RabbitMQ", drill(&subject, rabbitmq, stop, restart).await);

    // Nothing restarts the API but the operator restoring its replica count.
    let api = Outage {
        name: "Nova API",
        spec: json!({"dbArchive": {"schedule": "29 4 * * *"}}),
        down: ("DeploymentReady", "WaitingForDeployment"),
        hold: Duration::ZERO,
        replaceable: &[],
    };
    let stop = scale(&client, &ns, "nova", 0);
    losses.insert("Nova API", drill(&subject, api, stop, async {}).await);

    assert!(
        losses.values().all(Vec::is_empty),
        "children deleted or replaced: {losses:?}"
    );
    // Every spec change of the drills was reconciled.
    let nova = novas.get("nova").await.expect("nova");
    assert_eq!(
        nova.status.as_ref().and_then(|s| s.observed_generation),
        nova.metadata.generation
    );
    let cron = Api::<CronJob>::namespaced(client.clone(), &ns)
        .get("nova-db-archive")
        .await
        .expect("archive CronJob");
    assert_eq!(cron.spec.schedule, "29 4 * * *");
    finish(&client, &ns).await;
}
