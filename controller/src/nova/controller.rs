//! The Nova controller's watches, the reconcile entry skeleton (`common-types.md` §3.1) and the
//! status write that ends every pass.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::runtime::{Predicate, WatchStreamExt, predicates};
use kube::{Resource, ResourceExt};
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective;
use nova_api::v1alpha1::{Nova, SecretStoreKind};
use serde::de::DeserializeOwned;

use super::pass::NovaPass;
use super::{FINALIZER, PIPELINE, finalize};
use crate::context::Context;
use crate::external;
use crate::pipeline::{
    self, Flow, REQUEUE_NEXT_PASS, REQUEUE_SECRET_POLLING, StepError, conditions,
};

/// How often a converged Nova is looked at again without any event.
const RESYNC: Duration = Duration::from_secs(600);

/// A failed pass; both halves are reported when the status write failed too.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A step or the entry skeleton failed.
    #[error(transparent)]
    Step(#[from] StepError),
    /// Writing the status failed.
    #[error("writing status: {0}")]
    Status(kube::Error),
    /// Both failed.
    #[error("{step}; writing status: {status}")]
    Both {
        /// The step's failure.
        step: StepError,
        /// The status write's failure.
        status: kube::Error,
    },
}

/// Every Secret name a Nova reads (`nova-reconciler.txt`, "Watches and indexes"): both database
/// credentials, the service-user password, the metadata shared secret, the CA bundle and client
/// certificate of each enabled database TLS block, the brownfield messaging Secret, the broker CA
/// bundle, and the remote transport URL while that block is set.
pub fn referenced_secrets(nova: &Nova) -> BTreeSet<String> {
    let spec = &nova.spec;
    let mut names = BTreeSet::new();
    for block in [&spec.api_database, &spec.database] {
        names.insert(block.secret_ref.name.clone());
        if super::dsn::tls_enabled(block).is_some()
            && let Some(tls) = &block.tls
        {
            names.insert(tls.ca_bundle_secret_ref.name.clone());
            names.insert(tls.client_cert_secret_ref.name.clone());
        }
    }
    names.insert(spec.service_user.secret_ref.name.clone());
    names.insert(spec.metadata.shared_secret_ref.name.clone());
    if let Some(secret) = &spec.messaging.secret_ref {
        names.insert(secret.name.clone());
    }
    if let Some(tls) = &spec.messaging.tls {
        names.insert(tls.ca_bundle_secret_ref.name.clone());
    }
    if let Some(remote) = &spec.remote_compute {
        names.insert(remote.transport_url_secret_ref.name.clone());
    }
    names
}

/// The Novas a Secret event concerns: those that read it by name, or own it.
fn novas_for_secret(
    store: &Store<Nova>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<Nova>> {
    let ns = secret.namespace();
    let name = secret.name_any();
    let owners: BTreeSet<&str> = secret
        .owner_references()
        .iter()
        .filter(|o| o.kind == "Nova")
        .map(|o| o.uid.as_str())
        .collect();
    store
        .state()
        .into_iter()
        .filter(|nova| nova.namespace() == ns)
        .filter(|nova| {
            nova.uid().is_some_and(|uid| owners.contains(uid.as_str()))
                || referenced_secrets(nova).contains(&name)
        })
        .map(|nova| ObjectRef::from_obj(&*nova))
        .collect()
}

/// The Novas whose effective store is the one an event came from.
fn novas_for_store(
    store: &Store<Nova>,
    kind: SecretStoreKind,
    object: &DynamicObject,
) -> Vec<ObjectRef<Nova>> {
    let name = object.name_any();
    store
        .state()
        .into_iter()
        .filter(|nova| {
            kind == SecretStoreKind::ClusterSecretStore || nova.namespace() == object.namespace()
        })
        .filter(|nova| effective::secret_store(&nova.spec) == (kind, name.clone()))
        .map(|nova| ObjectRef::from_obj(&*nova))
        .collect()
}

/// An API scoped to the operator's namespace, or to all namespaces.
fn scoped<K>(ctx: &Context) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    match &ctx.scope {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

/// A metadata-only watch of an owned kind: wakes the owner without caching object bodies.
fn owned_metadata<K>(
    ctx: &Context,
) -> impl Stream<Item = Result<PartialObjectMeta<K>, watcher::Error>> + Send + 'static
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    kube::runtime::watcher(
        scoped::<PartialObjectMeta<K>>(ctx),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects()
}

/// Whether the cluster serves a kind, so a missing optional CRD never crash-loops a watch.
async fn serves(ctx: &Context, resource: &kube::core::ApiResource) -> bool {
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), resource);
    api.list_metadata(&kube::api::ListParams::default().limit(1))
        .await
        .is_ok()
}

/// Builds the Nova controller with all its watches; runs it until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let novas = scoped::<Nova>(&ctx);
    // Status-only updates do not wake the controller: generation, labels, annotations and the
    // deletion timestamp (a generation bump) do; finalizer edits are our own.
    let (reader, writer) = kube::runtime::reflector::store();
    let main = kube::runtime::watcher(novas, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::labels)
                .combine(predicates::annotations)
                .combine(deletion_started),
            Default::default(),
        );
    let mut controller = Controller::for_stream(main, reader.clone())
        .owns_stream(owned_metadata::<Deployment>(&ctx))
        .owns_stream(owned_metadata::<Service>(&ctx))
        .owns_stream(owned_metadata::<ConfigMap>(&ctx))
        .owns_stream(owned_metadata::<PodDisruptionBudget>(&ctx))
        .owns_stream(owned_metadata::<HorizontalPodAutoscaler>(&ctx))
        .owns_stream(owned_metadata::<NetworkPolicy>(&ctx))
        .owns_stream(owned_metadata::<Job>(&ctx))
        .owns_stream(owned_metadata::<CronJob>(&ctx));
    let store = reader.clone();
    controller = controller.watches_stream(owned_metadata::<Secret>(&ctx), move |s| {
        novas_for_secret(&store, &s)
    });

    let store = reader.clone();
    let namespaced_store = external::secret_store();
    if serves(&ctx, &namespaced_store).await {
        let api: Api<DynamicObject> = match &ctx.scope {
            Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &namespaced_store),
            None => Api::all_with(ctx.client.clone(), &namespaced_store),
        };
        controller = controller.watches_with(
            api,
            namespaced_store,
            watcher::Config::default(),
            move |o| novas_for_store(&store, SecretStoreKind::SecretStore, &o),
        );
    }
    let cluster_store = external::cluster_secret_store();
    if ctx.scope.is_none() && serves(&ctx, &cluster_store).await {
        let store = reader.clone();
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &cluster_store);
        controller =
            controller.watches_with(api, cluster_store, watcher::Config::default(), move |o| {
                novas_for_store(&store, SecretStoreKind::ClusterSecretStore, &o)
            });
    }

    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile did not complete");
            }
        })
        .await;
}

/// A predicate that changes once, when the CR starts terminating.
fn deletion_started(nova: &Nova) -> Option<u64> {
    Some(u64::from(nova.meta().deletion_timestamp.is_some()))
}

fn error_policy(nova: Arc<Nova>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let retry = ctx.backoff.failed(&object_key(&nova));
    tracing::warn!(error = %error, retry_in = ?retry, "reconcile failed");
    Action::requeue(retry)
}

/// The back-off key of one Nova.
fn object_key(nova: &Nova) -> String {
    format!(
        "{}/{}",
        nova.namespace().unwrap_or_default(),
        nova.name_any()
    )
}

/// One pass over one Nova.
#[tracing::instrument(skip_all, fields(kind = "Nova", namespace = %nova.namespace().unwrap_or_default(), name = %nova.name_any()))]
pub async fn reconcile(nova: Arc<Nova>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let mut pass = NovaPass::new(ctx.clone(), nova.clone());
    if nova.meta().deletion_timestamp.is_some() {
        if !nova.finalizers().iter().any(|f| f == FINALIZER) {
            return Ok(Action::await_change());
        }
        return Ok(to_action(finalize::run(&pass).await?));
    }
    let outcome = if let Some(target) = &nova.spec.target_cluster_ref {
        // No target cluster is registered in this operator build, so none resolves: wait,
        // acquire no finalizer and create nothing anywhere.
        tracing::info!(target = %target.name, "target cluster does not resolve");
        pass.set_condition(
            NovaConditionType::SecretsReady,
            false,
            Reason::TargetClusterUnavailable,
            "cluster not found",
        );
        Ok(Flow::RequeueAfter(REQUEUE_SECRET_POLLING))
    } else if !nova.finalizers().iter().any(|f| f == FINALIZER) {
        add_finalizer(&ctx, &nova).await?;
        return Ok(Action::requeue(REQUEUE_NEXT_PASS));
    } else {
        ctx.engine.run(&PIPELINE, &mut pass).await
    };
    let written = persist_status(&ctx, &nova, &mut pass).await;
    match (outcome, written) {
        (Ok(flow), Ok(())) => {
            ctx.backoff.succeeded(&object_key(&nova));
            Ok(to_action(flow))
        }
        (Err(step), Ok(())) => Err(ReconcileError::Step(step)),
        (Ok(_), Err(status)) => Err(ReconcileError::Status(status)),
        (Err(step), Err(status)) => Err(ReconcileError::Both { step, status }),
    }
}

fn to_action(flow: Flow) -> Action {
    match flow {
        Flow::Continue => Action::requeue(RESYNC),
        Flow::RequeueAfter(after) => Action::requeue(after),
    }
}

/// Aggregates Ready, stamps observedGeneration and writes the status if it changed.
async fn persist_status(
    ctx: &Context,
    nova: &Nova,
    pass: &mut NovaPass,
) -> Result<(), kube::Error> {
    let generation = nova.meta().generation;
    let aggregated = NovaConditionType::AGGREGATED.map(NovaConditionType::as_str);
    conditions::aggregate_ready(&mut pass.status.conditions, &aggregated, generation);
    pass.status.observed_generation = generation;
    let before = nova.status.clone().unwrap_or_default();
    let api: Api<Nova> = Api::namespaced(ctx.client.clone(), &nova.namespace().unwrap_or_default());
    if pipeline::status::persist(&api, &nova.name_any(), &before, &pass.status).await? {
        tracing::debug!("status written");
    }
    Ok(())
}

/// Adds the finalizer with an optimistic-lock patch, before anything is created.
async fn add_finalizer(ctx: &Context, nova: &Nova) -> Result<(), StepError> {
    let api: Api<Nova> = Api::namespaced(ctx.client.clone(), &nova.namespace().unwrap_or_default());
    let mut finalizers = nova.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    let patch = serde_json::json!({
        "metadata": { "finalizers": finalizers, "resourceVersion": nova.resource_version() }
    });
    api.patch(
        &nova.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
    .map_err(|e| StepError::kube("adding the finalizer", e))?;
    Ok(())
}
