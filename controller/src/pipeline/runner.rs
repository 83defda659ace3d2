//! What every kind's controller shares around the skeleton: its context, the watch of its CRs
//! (status-only updates filtered, the kind's own indexes following every event), and the
//! kube-runtime controller that runs the skeleton on that watch and the kind's triggers.

use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use nova_api::labels::ownership;

use super::Engine;
use super::backoff::Backoff;
use super::deadline::reconcile_within;
use super::events::Publisher;
use super::pass::Reconciled;
use super::skeleton::{Context, error_policy};
use super::superseded::Superseded;
use crate::clusters::{Clusters, Fleet, KubeCluster, Meta};
use crate::crd_currency::Notice;
use crate::metrics::Metrics;

/// How long a CR's wake-ups must stay quiet before its pass runs (kube-runtime's trailing-edge
/// debounce): a converging CR's children change in bursts (its Database, User and Grant objects
/// turning Ready one after the other, five Deployments becoming available within a second), and
/// each wake-up used to run a pass whose status differed from the last one's by a message, so
/// a new Nova took about eleven status writes. One second lets a burst settle into one pass; a
/// requeue is one second later too.
pub const DEBOUNCE: std::time::Duration = std::time::Duration::from_secs(1);

/// How a controller runs.
pub struct Options {
    /// The one namespace a namespace-scoped operator watches; None watches all.
    pub scope: Option<String>,
    /// How many CRs are reconciled at once (never the same one twice).
    pub concurrency: u16,
    /// The instance name events are reported under.
    pub instance: Option<String>,
    /// The registered target clusters; None when target clusters are disabled.
    pub targets: Option<Arc<Fleet>>,
    /// How long one pass may run ([`super::deadline::PASS_DEADLINE`] by default).
    pub pass_deadline: std::time::Duration,
    /// What the kind's served CRD says against this release (`crate::crd_currency`).
    pub crd: Arc<Notice>,
}

/// The context of one kind's reconciles, its events reported as `controller`.
pub fn context<K: Reconciled>(
    client: &Client,
    cluster: Arc<KubeCluster>,
    metrics: Metrics,
    controller: &str,
    options: &Options,
    shared: Arc<K::Shared>,
) -> Arc<Context<K>> {
    let reporter = Reporter {
        controller: controller.into(),
        instance: options.instance.clone(),
    };
    Arc::new(Context {
        events: Publisher::new(client.clone(), reporter),
        clusters: Arc::new(Clusters::new(cluster, options.targets.clone())),
        engine: Engine::new(metrics),
        backoff: Backoff::default(),
        superseded: Superseded::default(),
        shared,
        client: client.clone(),
        pass_deadline: options.pass_deadline,
        crd: options.crd.clone(),
    })
}

/// The CRs of kind `K` an event on the target cluster `cluster` concerns: the owner its
/// ownership labels name (within the object's namespace) and the `referencing` CRs, each only
/// if the CR, as the management cache holds it, places its children on that cluster
/// (`common-types.md` §3.17 "Watches across clusters").
pub fn placed_on<K: Reconciled>(
    store: &Store<K>,
    cluster: &str,
    meta: &Meta,
    referencing: Vec<ObjectRef<K>>,
) -> Vec<ObjectRef<K>> {
    let ns = meta.namespace().unwrap_or_default();
    let labels = meta.labels();
    let owner = labels
        .get(ownership::NAME)
        .filter(|_| labels.get(ownership::KIND).map(String::as_str) == Some(&*K::kind(&())))
        .filter(|_| labels.get(ownership::NAMESPACE) == Some(&ns))
        .map(|name| ObjectRef::new(name).within(&ns));
    owner
        .into_iter()
        .chain(referencing)
        .filter(|r| {
            store
                .get(r)
                .is_some_and(|cr| cr.target_cluster() == Some(cluster))
        })
        .collect()
}

/// A predicate that changes once, when the CR starts terminating.
fn deletion_started<K: Resource>(cr: &K) -> Option<u64> {
    Some(u64::from(cr.meta().deletion_timestamp.is_some()))
}

/// Runs the skeleton over the CRs of kind `K` until `shutdown` resolves: the CR watch feeds
/// `store` (through `writer`) after `follow` saw each event, and wakes a CR on a change of its
/// generation, labels, annotations or the start of its deletion (status-only updates do not
/// wake it; finalizer edits are our own); `triggers` wake the CRs the kind's other watches map
/// to.
pub async fn run<K: Reconciled>(
    ctx: Arc<Context<K>>,
    options: &Options,
    (store, writer): (Store<K>, Writer<K>),
    follow: impl Fn(&watcher::Event<K>) + Send + Sync + 'static,
    triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<K> = match &options.scope {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let followed = {
        let ctx = ctx.clone();
        move |event: watcher::Event<K>| {
            follow(&event);
            if let watcher::Event::Delete(cr) = &event {
                ctx.backoff.forget(&ObjectRef::from_obj(cr));
            }
            // No pass reads a CR's managedFields; the store would hold them for every CR.
            event.modify(|cr| cr.meta_mut().managed_fields = None)
        }
    };
    let main = watcher(api, watcher::Config::default())
        .default_backoff()
        .map_ok(followed)
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::labels)
                .combine(predicates::annotations)
                .combine(deletion_started::<K>),
            Default::default(),
        );
    let kind = K::kind(&()).into_owned();
    Controller::for_stream(main, store)
        .with_config(
            controller::Config::default()
                .concurrency(options.concurrency)
                .debounce(DEBOUNCE),
        )
        .reconcile_on(triggers)
        .graceful_shutdown_on(shutdown)
        .run(reconcile_within::<K>, error_policy::<K>, ctx)
        .for_each(|result| {
            let kind = kind.clone();
            async move {
                match result {
                    // Already logged once, by the error policy.
                    Err(controller::Error::ReconcilerFailed(..)) | Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, %kind, "the controller could not schedule a reconcile")
                    }
                }
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use kube::api::{DynamicObject, PartialObjectMeta};
    use nova_api::v1alpha1::{Nova, TargetClusterRefSpec};

    fn meta(labels: &[(&str, &str)]) -> Meta {
        let mut m = PartialObjectMeta::<DynamicObject> {
            types: None,
            metadata: Default::default(),
            _phantom: Default::default(),
        };
        m.metadata.namespace = Some("openstack".into());
        m.metadata.name = Some("child".into());
        m.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        Arc::new(m)
    }

    #[test]
    fn a_remote_event_wakes_only_novas_placed_on_that_cluster() {
        let (store, mut writer) = kube::runtime::reflector::store::<Nova>();
        let mut placed = example();
        placed.metadata.name = Some("placed".into());
        placed.spec.target_cluster_ref = Some(TargetClusterRefSpec {
            name: "target".into(),
        });
        let mut home = example();
        home.metadata.name = Some("home".into());
        for nova in [&placed, &home] {
            writer.apply_watcher_event(&watcher::Event::Apply(nova.clone()));
        }
        let owned = |name: &str, ns: &str| {
            meta(&[
                (ownership::KIND, "Nova"),
                (ownership::NAME, name),
                (ownership::NAMESPACE, ns),
            ])
        };
        let placed_ref = ObjectRef::from_obj(&placed);
        let home_ref = ObjectRef::from_obj(&home);
        assert_eq!(
            placed_on(&store, "target", &owned("placed", "openstack"), vec![]),
            std::slice::from_ref(&placed_ref)
        );
        assert!(
            placed_on(&store, "other", &owned("placed", "openstack"), vec![]).is_empty(),
            "an event from another cluster"
        );
        assert!(
            placed_on(&store, "target", &owned("home", "openstack"), vec![]).is_empty(),
            "a Nova whose children live at home"
        );
        assert!(
            placed_on(&store, "target", &owned("placed", "elsewhere"), vec![]).is_empty(),
            "only within the owner's namespace"
        );
        assert_eq!(
            placed_on(
                &store,
                "target",
                &meta(&[]),
                vec![placed_ref.clone(), home_ref]
            ),
            [placed_ref],
            "an input's referencing Novas, those placed there"
        );
    }
}
