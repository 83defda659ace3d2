//! Kubernetes-side fault drills: the API server killed and restarted mid-convergence, etcd
//! frozen mid-convergence, the leader killed repeatedly, a conflicting writer on operator-owned
//! and unrelated fields, and a burst of spec edits. Each drill owns a control plane (a killed
//! API server must disturb no other suite) and they run one at a time; kwok plays the pods and
//! the tests play the MariaDB, RabbitMQ and External Secrets operators and the Gateway
//! (SIMULATED, see `nova_testkit::inputs`). What each drill measured is printed, never asserted as a
//! time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::replica::Replica;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_controller::nova::rollout::ROLLOUT_CAUSE;
use nova_controller::objects::kinds as external;
use nova_test_harness::ControlPlane;
use nova_testkit::prelude::*;
use serde_json::json;

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

    /// How many children the Nova of `ns` has so far.
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

/// How many children each Nova of `namespaces` has so far.
fn children_per_nova(ledger: &Mutex<Ledger>, namespaces: &[String]) -> Vec<usize> {
    let ledger = ledger.lock().expect("ledger");
    namespaces.iter().map(|ns| ledger.children_in(ns)).collect()
}

/// Waits until every namespace holds at least `children` Nova-owned children: the Novas are
/// converging.
async fn wait_mid_convergence(ledger: &Mutex<Ledger>, namespaces: &[String], children: usize) {
    let counts = Wait::new("the Novas to start converging", TIMEOUT)
        .every(Duration::from_millis(50))
        .until(|| async {
            let counts = children_per_nova(ledger, namespaces);
            if counts.iter().all(|c| *c >= children) {
                Seen::Done(counts)
            } else {
                Seen::Saw(format!("children per Nova {counts:?}"))
            }
        })
        .await
        .expect("the Novas converging");
    println!("children per Nova when the fault struck: {counts:?}");
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
        // The fault lasts five seconds on purpose.
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

/// Server-side applies of Deployments: only the controller applies them here (the intruder
/// patches, the controller-manager updates), so the count is the controller's writes.
async fn deployment_applies(client: &Client) -> u64 {
    requests(client, &["deployments"], &["APPLY"]).await
}

/// Waits until the Deployment `name` satisfies `check`; returns how long that took.
async fn until_deployment(
    deployments: &Api<Deployment>,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool,
) -> Duration {
    let started = Instant::now();
    Wait::new(what, TIMEOUT)
        .every(Duration::from_millis(100))
        .for_object(deployments, name, check)
        .await
        .expect(what);
    started.elapsed()
}

fn image(deployment: &Deployment) -> String {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

fn replicas(deployment: &Deployment) -> Option<i32> {
    deployment.spec.as_ref().and_then(|s| s.replicas)
}

const INTRUDER: &str = "drill-intruder";

#[tokio::test(flavor = "multi_thread")]
async fn etcd_killed_and_restarted_on_its_data_mid_convergence_loses_nothing() {
    drill_mid_convergence("drill-etcd-restart", |cp| async move {
        let ready = cp
            .restart_etcd(Duration::from_secs(3), READY_TIMEOUT)
            .await
            .expect("restart etcd");
        println!(
            "etcd SIGKILLed, down 3s, started on the same data directory; the API server ready {:.1}s after",
            ready.as_secs_f64()
        );
        cp
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conflicting_writer_is_undone_without_fighting_an_unrelated_field() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_cp, client, namespaces) = stage("drill-conflict", 1).await;
    let ns = &namespaces[0];
    let metrics = start_controller_everywhere(client.clone(), simulated_nova_api().await).await;
    create_novas(&client, &namespaces).await;
    wait_all_converged(&client, &namespaces).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let conductor = deployments.get("nova-conductor").await.expect("conductor");
    let scheduler = deployments.get("nova-scheduler").await.expect("scheduler");
    let (ours_image, ours_replicas) = (image(&conductor), replicas(&scheduler));
    let intruder = PatchParams {
        field_manager: Some(INTRUDER.into()),
        ..PatchParams::default()
    };

    // Operator-owned fields, taken over by another manager: the image of a container and
    // the replicas of a workload without an autoscaler.
    let container = conductor
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod")
        .containers[0]
        .name
        .clone();
    let applies = deployment_applies(&client).await;
    deployments
        .patch(
            "nova-conductor",
            &intruder,
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": container, "image": "registry.example/intruder:1"}]}}}})),
        )
        .await
        .expect("the intruder's image");
    deployments
        .patch(
            "nova-scheduler",
            &intruder,
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("the intruder's replicas");
    let image_back = until_deployment(
        &deployments,
        "nova-conductor",
        "the image was never restored",
        |d| image(d) == ours_image,
    )
    .await;
    let replicas_back = until_deployment(
        &deployments,
        "nova-scheduler",
        "the replicas were never restored",
        |d| replicas(d) == ours_replicas,
    )
    .await;
    println!(
        "operator-owned fields restored: the image after {:.2}s, the replicas after {:.2}s, with {} applies",
        image_back.as_secs_f64(),
        replicas_back.as_secs_f64(),
        deployment_applies(&client).await - applies
    );

    // Fields the operator does not set, owned by another manager: an annotation and
    // minReadySeconds. The controller leaves them, and stops writing.
    deployments
        .patch(
            "nova-conductor",
            &intruder,
            &Patch::Merge(
                json!({"metadata": {"annotations": {"drill.nova/owner": INTRUDER}},
                                 "spec": {"minReadySeconds": 5}}),
            ),
        )
        .await
        .expect("the intruder's unrelated fields");
    wait_converged(&novas, "nova", || Ok(())).await;
    // Restoring the image rolled the conductor out again; the pass that sees that rollout
    // complete drops its cause annotation (one write, by design). The intruder's
    // minReadySeconds can hold that completion past convergence, so the window waits for it.
    until_deployment(
        &deployments,
        "nova-conductor",
        "the restore's rollout never completed",
        |d| !d.annotations().contains_key(ROLLOUT_CAUSE),
    )
    .await;
    quiet_window(Duration::from_secs(3)).await;
    let applies = deployment_applies(&client).await;
    touch_five_times(&novas, "nova", "after-conflict", || passes(&metrics)).await;
    quiet_window(Duration::from_secs(2)).await;
    let settled = deployment_applies(&client).await - applies;
    let conductor = deployments.get("nova-conductor").await.expect("conductor");
    println!("after the unrelated edit: {settled} Deployment applies over five passes");
    assert_eq!(settled, 0, "the controller fights another manager's field");
    assert_eq!(image(&conductor), ours_image);
    assert_eq!(
        conductor
            .annotations()
            .get("drill.nova/owner")
            .map(String::as_str),
        Some(INTRUDER),
        "the unrelated annotation stays"
    );
    assert_eq!(
        conductor.spec.as_ref().and_then(|s| s.min_ready_seconds),
        Some(5),
        "the unrelated field stays"
    );
    let children = assert_nothing_lost(&client, &Ledger::default().into(), &namespaces).await;
    println!("drill-conflict: {children} children, none orphaned");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_spec_edits_is_coalesced_into_few_passes() {
    const EDITS: u64 = 20;
    let _one = ONE_AT_A_TIME.lock().await;
    let (_cp, client, namespaces) = stage("drill-burst", 1).await;
    let metrics = start_controller_everywhere(client.clone(), simulated_nova_api().await).await;
    create_novas(&client, &namespaces).await;
    wait_all_converged(&client, &namespaces).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &namespaces[0]);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespaces[0]);
    quiet_window(Duration::from_secs(2)).await;

    let before = passes(&metrics);
    let started = Instant::now();
    let mut last = 0;
    for i in 0..EDITS {
        last = 1 + (i % 3) as i32;
        novas
            .patch(
                "nova",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"conductor": {"deployment": {"replicas": last}}}})),
            )
            .await
            .expect("edit");
    }
    let sent = started.elapsed();
    until_deployment(
        &deployments,
        "nova-conductor",
        "the last edit never reached the Deployment",
        |d| replicas(d) == Some(last),
    )
    .await;
    wait_nova_until(
        &novas,
        "nova",
        "the last generation observed",
        TIMEOUT,
        |nova| nova.status.as_ref().and_then(|s| s.observed_generation) == nova.metadata.generation,
    )
    .await
    .expect("the last generation observed");
    wait_converged(&novas, "nova", || Ok(())).await;
    quiet_window(Duration::from_secs(2)).await;
    let passes = passes(&metrics) - before;
    println!(
        "{EDITS} spec edits in {:.2}s were reconciled in {passes} passes",
        sent.as_secs_f64()
    );
    assert!(passes >= 1, "the burst was reconciled");
    assert!(
        passes < EDITS,
        "{passes} passes for {EDITS} edits: the burst was not coalesced"
    );
}

/// The Lease the replicas of the leader drill compete for.
const LEASE: &str = "nova-operator-drill";
/// How often the leader drill kills the leader.
const KILLS: usize = 3;

/// What the sampler saw of leadership: the most replicas reporting themselves leader in one
/// sample, each holder the Lease named, in order, and every replica that still reported
/// itself leader after its lease, as last read, had lapsed (a standby may take it then).
#[derive(Default)]
struct Leadership {
    live: Vec<(String, u16)>,
    samples: usize,
    most_leaders: usize,
    holders: Vec<String>,
    /// The holder the Lease last named and when its lease lapses unless renewed.
    lapses: Option<(String, Timestamp)>,
    overstayed: BTreeSet<String>,
}

impl Leadership {
    /// Records one sample: the replicas reporting the lead, and the Lease if it could be read
    /// (the API server may be down: the last one read stands).
    fn record(&mut self, leaders: &[String], lease: Option<LeaseSpec>, now: Timestamp) {
        self.samples += 1;
        self.most_leaders = self.most_leaders.max(leaders.len());
        if let Some(spec) = lease
            && let (Some(holder), Some(renewed), Some(duration)) = (
                spec.holder_identity,
                spec.renew_time,
                spec.lease_duration_seconds,
            )
        {
            if self.holders.last() != Some(&holder) {
                self.holders.push(holder.clone());
            }
            let lapses = renewed.0 + Duration::from_secs(duration.unsigned_abs().into());
            self.lapses = Some((holder, lapses));
        }
        if let Some((holder, lapses)) = &self.lapses
            && now > *lapses
            && leaders.contains(holder)
        {
            self.overstayed.insert(holder.clone());
        }
    }
}

/// Samples every live replica's `nova_operator_leader` and the Lease every 100 ms while a
/// leadership drill runs.
struct Sampler {
    seen: Arc<Mutex<Leadership>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(client: &Client, replicas: &[Replica]) -> Self {
        let seen = Arc::new(Mutex::new(Leadership::default()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
        let task = {
            let (seen, stop) = (seen.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let live = seen.lock().expect("leadership").live.clone();
                    let mut leaders = Vec::new();
                    for (identity, port) in live {
                        if crate::replica::metric(port, "nova_operator_leader").await == 1.0 {
                            leaders.push(identity);
                        }
                    }
                    let now = Timestamp::now();
                    let lease = leases
                        .get_opt(LEASE)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|l| l.spec);
                    seen.lock()
                        .expect("leadership")
                        .record(&leaders, lease, now);
                    // The sampler's tick (it samples until stopped), not a wait for state.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let sampler = Self { seen, stop, task };
        for replica in replicas {
            sampler.follow(replica);
        }
        sampler
    }

    fn follow(&self, replica: &Replica) {
        self.seen
            .lock()
            .expect("leadership")
            .live
            .push((replica.identity.clone(), replica.metrics));
    }

    /// Stops sampling `replica` (before it is killed: a dead replica reports nothing).
    fn forget(&self, replica: &Replica) {
        self.seen
            .lock()
            .expect("leadership")
            .live
            .retain(|(id, _)| id != &replica.identity);
    }

    /// Stops sampling and asserts one leader at any instant, and none leading past its lease;
    /// returns what it saw.
    async fn finish(self) -> Leadership {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.task.await.expect("sampler");
        let seen = std::mem::take(&mut *self.seen.lock().expect("leadership"));
        println!(
            "{} samples: at most {} replica(s) reported leading at once; Lease holders {:?}",
            seen.samples, seen.most_leaders, seen.holders
        );
        assert_eq!(seen.most_leaders, 1, "two replicas led at once");
        assert!(
            seen.overstayed.is_empty(),
            "led past the lease: {:?}",
            seen.overstayed
        );
        seen
    }
}

/// Starts the replica `replica-<i>` of the leadership drills, logging into `dir`.
fn replica(cp: &ControlPlane, i: usize, dir: &std::path::Path, extra: &[String]) -> Replica {
    Replica::start(
        &format!("replica-{i}"),
        cp.kubeconfig_path(),
        "",
        ("default", LEASE),
        dir,
        extra,
    )
}

/// Kills the replicas and checks their logs: each acquired the lead at most once, and none
/// logged a planted secret value.
async fn stop_replicas(replicas: Vec<Replica>, mut logged: Vec<String>) {
    for replica in replicas {
        logged.push(replica.kill().await);
    }
    for log in &logged {
        assert!(
            log.matches("acquired leadership").count() <= 1,
            "a replica acquired the lead twice"
        );
        for value in PLANTED {
            assert!(
                !log.contains(value),
                "a replica logged a planted secret value"
            );
        }
    }
}

/// The index of the replica reporting itself leader, once one does.
async fn leader_of(replicas: &[Replica]) -> usize {
    Wait::new("a replica to take the lead", Duration::from_secs(60))
        .every(Duration::from_millis(100))
        .until(|| async {
            for (i, replica) in replicas.iter().enumerate() {
                if replica.metric("nova_operator_leader").await == 1.0 {
                    return Some(i);
                }
            }
            None
        })
        .await
        .expect("a leader")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leader_killed_repeatedly_leaves_one_leader_and_each_job_created_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    let began = Instant::now();
    let (cp, client, namespaces) = stage("drill-leader", NOVAS).await;
    let ledger = Ledger::follow(&client).await;
    let logs = tempfile::tempdir().expect("log dir");
    let extra = [
        format!("--health-check-address={}", simulated_nova_api().await),
        "--clusters-namespace=".to_owned(),
    ];
    let mut replicas: Vec<Replica> = (0..3)
        .map(|i| replica(&cp, i, logs.path(), &extra))
        .collect();
    let sampler = Sampler::start(&client, &replicas);
    create_novas(&client, &namespaces).await;

    let mut killed = Vec::new();
    let mut logged = Vec::new();
    let mut struck = Instant::now();
    for k in 0..KILLS {
        let lead = leader_of(&replicas).await;
        if k > 0 {
            println!(
                "{} took the lead {:.1}s after the kill",
                replicas[lead].identity,
                struck.elapsed().as_secs_f64()
            );
        }
        // Kill it mid-convergence: once it created a child (or 10 s passed).
        let before: usize = children_per_nova(&ledger, &namespaces).iter().sum();
        let _ = Wait::new("a new child before the kill", Duration::from_secs(10))
            .every(Duration::from_millis(50))
            .until(|| async {
                children_per_nova(&ledger, &namespaces)
                    .iter()
                    .sum::<usize>()
                    > before
            })
            .await;
        // Half a second into the leader's work on the new child, so the kill lands mid-pass.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let leader = replicas.remove(lead);
        sampler.forget(&leader);
        killed.push(leader.identity.clone());
        println!(
            "killing {} with {:?} children per Nova",
            leader.identity,
            children_per_nova(&ledger, &namespaces)
        );
        struck = Instant::now();
        logged.push(leader.kill().await);
        let standby = replica(&cp, 3 + k, logs.path(), &extra);
        sampler.follow(&standby);
        replicas.push(standby);
    }
    let last = leader_of(&replicas).await;
    println!(
        "{} took the lead {:.1}s after the last kill",
        replicas[last].identity,
        struck.elapsed().as_secs_f64()
    );
    wait_all_converged(&client, &namespaces).await;
    println!(
        "every Nova converged {:.1}s after the last kill",
        struck.elapsed().as_secs_f64()
    );
    let seen = sampler.finish().await;
    killed.push(replicas[last].identity.clone());
    assert_eq!(
        seen.holders, killed,
        "the Lease changed hands only at each kill"
    );
    let jobs: Vec<Key> = ledger
        .lock()
        .expect("ledger")
        .uids
        .keys()
        .filter(|(kind, _, _)| kind == "Job")
        .cloned()
        .collect();
    assert_eq!(
        jobs.len(),
        namespaces.len(),
        "one db-sync Job per Nova: {jobs:?}"
    );
    let children = assert_nothing_lost(&client, &ledger, &namespaces).await;
    stop_replicas(replicas, logged).await;
    println!(
        "drill-leader: {KILLS} leaders killed, {} Novas with {children} children each and one Job each, none created twice; drill took {:.1}s",
        namespaces.len(),
        began.elapsed().as_secs_f64()
    );
    cp.check_alive().expect("every component runs");
}

/// The API server down longer than the lease: the leader cannot renew, so it must stop
/// leading before its lease lapses (when a standby may take it), not once it can reach the
/// API server again; one leader at any instant throughout.
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_cut_off_from_the_api_server_stops_leading_before_its_lease_lapses() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (cp, client, _) = stage("drill-lease", 0).await;
    let logs = tempfile::tempdir().expect("log dir");
    let extra = ["--clusters-namespace=".to_owned()];
    let replicas: Vec<Replica> = (0..2)
        .map(|i| replica(&cp, i, logs.path(), &extra))
        .collect();
    let sampler = Sampler::start(&client, &replicas);
    let first = leader_of(&replicas).await;
    // The leader holds its lease a while before the outage, as a settled leader would.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let outage = Duration::from_secs(20);
    cp.restart_apiserver(outage, READY_TIMEOUT)
        .await
        .expect("restart the API server");
    let back = Instant::now();
    let next = leader_of(&replicas).await;
    println!(
        "API server down {}s; {} leads {:.1}s after it was back ({} led before)",
        outage.as_secs(),
        replicas[next].identity,
        back.elapsed().as_secs_f64(),
        replicas[first].identity
    );
    sampler.finish().await;
    stop_replicas(replicas, Vec::new()).await;
    cp.check_alive().expect("every component runs");
}
