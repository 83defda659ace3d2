//! What every kind's controller shares around the skeleton: its context, the watch of its CRs
//! (status-only updates filtered, the kind's own indexes following every event), and the
//! kube-runtime controller that runs the skeleton on that watch and the kind's triggers.

use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource};

use super::Engine;
use super::backoff::Backoff;
use super::pass::Reconciled;
use super::skeleton::{Context, error_policy, reconcile};
use crate::clusters::{Clusters, LocalCluster};
use crate::metrics::Metrics;

/// How a controller runs.
pub struct Options {
    /// The one namespace a namespace-scoped operator watches; None watches all.
    pub scope: Option<String>,
    /// How many CRs are reconciled at once (never the same one twice).
    pub concurrency: u16,
    /// The instance name events are reported under.
    pub instance: Option<String>,
}

/// The context of one kind's reconciles, its events reported as `controller`.
pub fn context<K: Reconciled>(
    client: &Client,
    cluster: Arc<LocalCluster>,
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
        recorder: Recorder::new(client.clone(), reporter),
        clusters: Clusters::new(cluster),
        engine: Engine::new(metrics),
        backoff: Backoff::default(),
        shared,
        client: client.clone(),
    })
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
            event
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
        .with_config(controller::Config::default().concurrency(options.concurrency))
        .reconcile_on(triggers)
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<K>, error_policy::<K>, ctx)
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
