//! Time to Ready on the real node, broken down (issue 29, part 3): the sample Nova of the real
//! tier (`nova_testkit::real::real_nova`, the 2026.1 image) created against the real OpenStack
//! with the in-process controller, as the real tier runs it, once the namespace's broker is up,
//! and every step of its way to `Ready=True` timed from the create: when each MariaDB object,
//! Job, Deployment and pod appeared, when each MariaDB object turned Ready, when each pod's
//! containers ran and when it turned Ready (or a Job's pod succeeded), and when each condition
//! of the Nova first turned True. Then the operator's own time: its passes and what
//! they took, against the wall time.
//!
//! `cargo bench -p nova-controller --bench time_to_ready` with the real tier's prerequisites
//! (`scripts/test.sh real` builds them: `NOVA_TESTBIN`, the node, its images). Prints numbers;
//! asserts nothing about them. The node and the OpenStack are torn down when it exits.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_controller::objects::kinds;
use nova_test_harness::images::{nova_image, pinned};
use nova_testkit::prelude::{Wait, holds};
use nova_testkit::real::{REAL_TIMEOUT, RELEASE, real_nova, start, wait_nova};

/// When each milestone was first seen, in seconds after the create.
#[derive(Clone)]
struct Timeline {
    start: Instant,
    seen: Arc<Mutex<BTreeMap<String, f64>>>,
}

impl Timeline {
    fn starting_now() -> Self {
        Self {
            start: Instant::now(),
            seen: Arc::default(),
        }
    }

    /// Records `milestone` the first time it is seen.
    fn saw(&self, milestone: String) {
        let at = self.start.elapsed().as_secs_f64();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.entry(milestone).or_insert(at);
    }

    fn sorted(&self) -> Vec<(f64, String)> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut sorted: Vec<_> = seen.iter().map(|(m, at)| (*at, m.clone())).collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        sorted
    }
}

/// Feeds `timeline` with the milestones `of` reads from each object `api` lists.
fn follow<K, F>(api: Api<K>, timeline: &Timeline, of: F) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    F: Fn(&K) -> Vec<String> + Send + 'static,
{
    let timeline = timeline.clone();
    tokio::spawn(async move {
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            if let Ok(Event::Apply(object) | Event::InitApply(object)) = event {
                for milestone in of(&object) {
                    timeline.saw(milestone);
                }
            }
        }
    })
}

/// A MariaDB object the Database step waits for: created, and Ready once the (SIMULATED)
/// MariaDB operator has made its schema, user or grant for real.
fn mariadb_milestones(object: &DynamicObject) -> Vec<String> {
    let kind = object.types.as_ref().map_or("", |t| t.kind.as_str());
    let name = format!("{kind} {}", object.name_any());
    let mut milestones = vec![format!("{name}: created")];
    if kinds::is_ready(object) {
        milestones.push(format!("{name}: Ready"));
    }
    milestones
}

/// The Nova's conditions that are True.
fn nova_milestones(nova: &Nova) -> Vec<String> {
    let conditions = nova.status.as_ref().map(|s| s.conditions.clone());
    conditions
        .unwrap_or_default()
        .iter()
        .filter(|c| c.status == "True")
        .map(|c| format!("Nova {} True", c.type_))
        .collect()
}

/// A pod's group (its Job or its component) and the stages it has reached.
fn pod_milestones(pod: &Pod) -> Vec<String> {
    let labels = pod.labels();
    let group = labels
        .get("job-name")
        .map(|job| format!("Job {job}"))
        .or_else(|| labels.get("app.kubernetes.io/component").cloned())
        .unwrap_or_else(|| pod.name_any());
    let mut milestones = vec![format!("pod {group}: created")];
    let status = pod.status.clone().unwrap_or_default();
    let holds = |kind: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == kind && c.status == "True")
    };
    if holds("PodScheduled") {
        milestones.push(format!("pod {group}: scheduled"));
    }
    if holds("Initialized") {
        milestones.push(format!("pod {group}: initialized"));
    }
    let running = status
        .container_statuses
        .iter()
        .flatten()
        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
    if running {
        milestones.push(format!("pod {group}: a container running"));
    }
    if holds("Ready") {
        milestones.push(format!("pod {group}: Ready"));
    }
    if status.phase.as_deref() == Some("Succeeded") {
        milestones.push(format!("pod {group}: succeeded"));
    }
    milestones
}

fn created<K: Resource<DynamicType = ()>>(object: &K) -> Vec<String> {
    vec![format!("{} {}: created", K::kind(&()), object.name_any())]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let _timed = nova_testkit::stack::timed().await;
    let prepared = Instant::now();
    let setup = start("ttr").await;
    let (client, ns) = (setup.client.clone(), setup.ns.clone());
    eprintln!(
        "the node, the OpenStack and the inputs of {ns} ready after {:.0} s",
        prepared.elapsed().as_secs_f64()
    );
    let image = pinned(&nova_image(RELEASE)).expect("the nova image's digest");

    // The namespace's broker (the SIMULATED RabbitMQ operator runs one per namespace) is up
    // before the create, as a cloud's is: the clock measures the Nova's own way.
    let brokers: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &kinds::rabbitmq_cluster());
    Wait::new("the namespace's broker Ready", REAL_TIMEOUT)
        .until(|| async {
            let listed = brokers.list(&Default::default()).await.ok()?;
            listed.items.iter().any(kinds::is_ready).then_some(())
        })
        .await
        .expect("the broker");

    let timeline = Timeline::starting_now();
    let namespaced = |resource: &ApiResource| {
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, resource)
    };
    let mut watches = vec![
        follow(
            Api::<Nova>::namespaced(client.clone(), &ns),
            &timeline,
            nova_milestones,
        ),
        follow(
            Api::<Pod>::namespaced(client.clone(), &ns),
            &timeline,
            pod_milestones,
        ),
        follow(
            Api::<Deployment>::namespaced(client.clone(), &ns),
            &timeline,
            created,
        ),
        follow(
            Api::<Job>::namespaced(client.clone(), &ns),
            &timeline,
            created,
        ),
    ];
    for resource in kinds::mariadb_children() {
        watches.push(follow(namespaced(&resource), &timeline, mariadb_milestones));
    }
    Api::<Nova>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &real_nova(&ns, &image))
        .await
        .expect("create the Nova");
    timeline.saw("Nova created".into());
    wait_nova(&client, &ns, "Ready=True", |n| holds(n, "Ready", "True")).await;
    timeline.saw("Nova Ready (the wait returned)".into());
    for watch in watches {
        watch.abort();
    }

    println!("time to Ready of the sample Nova ({RELEASE}), seconds after the create:");
    for (at, milestone) in timeline.sorted() {
        println!("{at:>8.1}  {milestone}");
    }
    println!("the operator's own time in each step (its runs, seconds in all):");
    let families = setup.metrics.registry.gather();
    let steps = families
        .iter()
        .find(|f| f.name() == "nova_operator_reconcile_duration_seconds")
        .map(|f| f.get_metric().to_vec())
        .unwrap_or_default();
    let mut total = 0.0;
    for step in steps {
        let name = step
            .get_label()
            .iter()
            .find(|l| l.name() == "sub_reconciler")
            .map(|l| l.value().to_owned())
            .unwrap_or_default();
        let histogram = step.get_histogram();
        total += histogram.get_sample_sum();
        println!(
            "{:>6} runs {:>8.2} s  {name}",
            histogram.get_sample_count(),
            histogram.get_sample_sum()
        );
    }
    println!("{total:>20.2} s  in all");
}
