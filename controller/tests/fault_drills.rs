//! Kubernetes-side fault drills: the API server killed and restarted mid-convergence, etcd
//! frozen mid-convergence, the leader killed repeatedly, a conflicting writer on operator-owned
//! and unrelated fields, and a burst of spec edits. Each drill owns a control plane (a killed
//! API server must disturb no other suite) and they run one at a time; kwok plays the pods and
//! the tests play the MariaDB, RabbitMQ and External Secrets operators and the Gateway
//! (SIMULATED, see `nova_support`). What each drill measured is printed, never asserted as a
//! time.

mod nova_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_controller::clusters::kinds as external;
use nova_support::*;
use nova_test_harness::ControlPlane;

/// One drill at a time: each owns a control plane, and two at once would share 2 cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Novas converging at once in the drills that take the control plane or the leader away.
const NOVAS: usize = 3;
/// Upper bound of each wait for the API server to be ready again.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Every kind a Nova owns children of.
fn child_kinds() -> Vec<ApiResource> {
    let mut kinds = vec![
        ApiResource::erase::<Secret>(&()),
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<Deployment>(&()),
        ApiResource::erase::<Job>(&()),
        ApiResource::erase::<CronJob>(&()),
        ApiResource::erase::<PodDisruptionBudget>(&()),
        ApiResource::erase::<HorizontalPodAutoscaler>(&()),
        ApiResource::erase::<NetworkPolicy>(&()),
        external::http_route(),
    ];
    kinds.extend(external::mariadb_children());
    kinds
}

/// (kind, namespace, name) of a child.
type Key = (String, String, String);

/// Whether a Nova controls the object.
fn nova_owned(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Nova" && o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// Every uid each Nova-owned (kind, namespace, name) had while the drill ran, and every
/// deletion the watches saw, recorded by one metadata watch per kind from before the Novas
/// exist: a child deleted and created again shows as a second uid under its name.
#[derive(Default)]
struct Ledger {
    uids: BTreeMap<Key, BTreeSet<String>>,
    deleted: BTreeSet<Key>,
}

impl Ledger {
    /// Starts the watches and waits until each listed what exists.
    async fn follow(client: &Client) -> Arc<Mutex<Ledger>> {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        for kind in child_kinds() {
            let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(client.clone(), &kind);
            let (ledger, name) = (ledger.clone(), kind.kind.clone());
            let (listed_tx, listed) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let mut listed_tx = Some(listed_tx);
                let events = watch(api, watcher::Config::default()).default_backoff();
                futures::pin_mut!(events);
                while let Some(event) = events.next().await {
                    let (object, deleted) = match event {
                        Ok(Event::Apply(o) | Event::InitApply(o)) => (o, false),
                        Ok(Event::Delete(o)) => (o, true),
                        Ok(Event::InitDone) => {
                            if let Some(tx) = listed_tx.take() {
                                let _ = tx.send(());
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    if nova_owned(&object.metadata).is_none() {
                        continue;
                    }
                    let key = (
                        name.clone(),
                        object.namespace().unwrap_or_default(),
                        object.name_any(),
                    );
                    let mut ledger = ledger.lock().expect("ledger");
                    if deleted {
                        ledger.deleted.insert(key);
                    } else {
                        let uid = object.uid().unwrap_or_default();
                        ledger.uids.entry(key).or_default().insert(uid);
                    }
                }
            });
            listed.await.expect("the child watch listed");
        }
        ledger
    }

    /// How many children each of `namespaces` has so far.
    fn children_in(&self, ns: &str) -> usize {
        self.uids.keys().filter(|(_, n, _)| n == ns).count()
    }
}

/// The Nova-owned children of `ns` now, by (kind, name), with their uid and owner uid.
async fn children_now(client: &Client, ns: &str) -> BTreeMap<(String, String), (String, String)> {
    let mut now = BTreeMap::new();
    for kind in child_kinds() {
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kind);
        for object in api
            .list_metadata(&ListParams::default())
            .await
            .expect("list")
            .items
        {
            if let Some(owner) = nova_owned(&object.metadata) {
                now.insert(
                    (kind.kind.clone(), object.name_any()),
                    (object.uid().unwrap_or_default(), owner),
                );
            }
        }
    }
    now
}

/// Nothing lost: every child each watch saw is still there under the one uid it was created
/// with (none deleted, none created twice), no child is orphaned (each names its namespace's
/// live Nova), and the Novas, all of the same spec, have the same children; returns their
/// count per Nova.
async fn assert_nothing_lost(
    client: &Client,
    ledger: &Mutex<Ledger>,
    namespaces: &[String],
) -> usize {
    let mut shapes = BTreeSet::new();
    let mut count = 0;
    for ns in namespaces {
        let nova = Api::<Nova>::namespaced(client.clone(), ns)
            .get("nova")
            .await
            .expect("nova");
        let now = children_now(client, ns).await;
        let ledger = ledger.lock().expect("ledger");
        for ((kind, namespace, name), uids) in ledger.uids.iter().filter(|(k, _)| &k.1 == ns) {
            assert_eq!(
                uids.len(),
                1,
                "{kind} {namespace}/{name} was created more than once"
            );
            let current = now.get(&(kind.clone(), name.clone()));
            assert_eq!(
                current.map(|(uid, _)| uid),
                uids.first(),
                "{kind} {namespace}/{name} was deleted (deletion seen: {})",
                ledger
                    .deleted
                    .contains(&(kind.clone(), namespace.clone(), name.clone()))
            );
        }
        for ((kind, name), (_, owner)) in &now {
            assert_eq!(
                Some(owner),
                nova.metadata.uid.as_ref(),
                "{kind} {ns}/{name} is orphaned"
            );
        }
        count = now.len();
        shapes.insert(now.into_keys().collect::<Vec<_>>());
    }
    assert_eq!(
        shapes.len(),
        1,
        "Novas of one spec differ in children: {shapes:#?}"
    );
    count
}

/// A control plane of this drill's own, with `n` namespaces holding every input of a Nova.
async fn stage(prefix: &str, n: usize) -> (ControlPlane, Client, Vec<String>) {
    let cp = ControlPlane::start().await.expect("control plane");
    let client = cp.client().expect("client");
    let mut namespaces = Vec::new();
    for i in 0..n {
        let ns = cp
            .namespace(&format!("{prefix}-{i}"))
            .await
            .expect("namespace");
        provide_inputs(&client, &ns).await;
        namespaces.push(ns);
    }
    (cp, client, namespaces)
}

async fn create_novas(client: &Client, namespaces: &[String]) {
    for ns in namespaces {
        Api::<Nova>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &example(ns))
            .await
            .expect("create Nova");
    }
}

async fn wait_all_converged(client: &Client, namespaces: &[String]) {
    for ns in namespaces {
        wait_converged(&Api::namespaced(client.clone(), ns), "nova", || Ok(())).await;
    }
}

/// Waits until every namespace holds at least `children` Nova-owned children: the Novas are
/// converging.
async fn wait_mid_convergence(ledger: &Mutex<Ledger>, namespaces: &[String], children: usize) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let counts: Vec<usize> = {
            let ledger = ledger.lock().expect("ledger");
            namespaces.iter().map(|ns| ledger.children_in(ns)).collect()
        };
        if counts.iter().all(|c| *c >= children) {
            println!("children per Nova when the fault struck: {counts:?}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the Novas never started converging: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The fault `inflict` strikes while several Novas converge under the in-process controller:
/// the controller rides it out without a restart, every Nova converges, and nothing is lost.
async fn drill_mid_convergence<F, Fut>(prefix: &str, inflict: F)
where
    F: FnOnce(ControlPlane) -> Fut,
    Fut: std::future::Future<Output = ControlPlane>,
{
    let _one = ONE_AT_A_TIME.lock().await;
    let began = Instant::now();
    let (cp, client, namespaces) = stage(prefix, NOVAS).await;
    let ledger = Ledger::follow(&client).await;
    let metrics = start_controller_everywhere(client.clone(), simulated_nova_api().await).await;
    create_novas(&client, &namespaces).await;
    wait_mid_convergence(&ledger, &namespaces, 3).await;

    let cp = inflict(cp).await;
    let back = Instant::now();
    let passes_back = passes(&metrics);
    wait_all_converged(&client, &namespaces).await;
    println!(
        "{prefix}: every Nova converged {:.1}s after the control plane was back",
        back.elapsed().as_secs_f64()
    );
    assert!(
        passes(&metrics) > passes_back,
        "the controller reconciled after the fault without a restart"
    );
    let children = assert_nothing_lost(&client, &ledger, &namespaces).await;
    println!(
        "{prefix}: {} Novas with {children} children each, none lost or created twice; drill took {:.1}s",
        namespaces.len(),
        began.elapsed().as_secs_f64()
    );
    cp.check_alive().expect("every component runs");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_server_killed_and_restarted_mid_convergence_loses_nothing() {
    drill_mid_convergence("drill-apiserver", |cp| async move {
        let killed = Instant::now();
        let ready = cp
            .restart_apiserver(Duration::from_secs(3), READY_TIMEOUT)
            .await
            .expect("restart the API server");
        println!(
            "kube-apiserver SIGKILLed, down 3s, ready {:.1}s after its start ({:.1}s after the kill)",
            ready.as_secs_f64(),
            killed.elapsed().as_secs_f64()
        );
        cp
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_frozen_mid_convergence_loses_nothing() {
    drill_mid_convergence("drill-etcd", |cp| async move {
        cp.pause_etcd().expect("SIGSTOP etcd");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let ready = cp.resume_etcd(READY_TIMEOUT).await.expect("SIGCONT etcd");
        println!(
            "etcd SIGSTOPped 5s; the API server ready {:.1}s after SIGCONT",
            ready.as_secs_f64()
        );
        cp
    })
    .await;
}
