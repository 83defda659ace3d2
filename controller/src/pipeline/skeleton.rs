//! The one reconcile skeleton every kind shares (`common-types.md` §3.1): deletion (with the
//! remote sweep and the abandon window), the target-cluster gate, the finalizers, the engine,
//! the status write with Ready and observedGeneration on every exit path, and the per-object
//! back-off.
//!
//! The finalizer is handled here rather than through kube-runtime's `finalizer()` helper,
//! which cannot express the spec's flow: the target gate must run (and write status) before
//! the finalizer is added, a fresh finalizer ends the pass with a 1 s requeue (the CR watch
//! filters finalizer-only updates, so the helper's "await change" would never come back), and
//! a cleanup that must wait keeps the finalizer without reporting an error (the helper removes
//! it on every successful cleanup, and only an error keeps it).
//!
//! Longer than 500 lines on purpose: every exit path of a pass writes status the same way, which
//! is only checkable with the whole flow in one place.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use nova_api::conditions::Reason;
use nova_api::events::EventReason;

use super::backoff::Backoff;
use super::conditions;
use super::engine::{Engine, PipelineError};
use super::events::Publisher;
use super::pass::{ConditionType, Pass, Reconciled};
use super::plan::{JobRecord, Verdict};
use super::superseded::Superseded;
use super::{Flow, REQUEUE_NEXT_PASS, REQUEUE_SECRET_POLLING, REQUEUE_SUPERSEDED};
use crate::clusters::{ClusterError, Clusters, FIELD_MANAGER, Teardown};
use crate::crd_currency::Notice;
use crate::objects::EventNote;

/// The finalizer of a CR whose children live on a target cluster, shared across operators:
/// held until the remote sweep ran (or the target was abandoned).
pub const REMOTE_CHILDREN: &str = "openstack.c5c3.io/remote-children";

/// How often a converged CR is looked at again without any event.
pub const RESYNC: std::time::Duration = std::time::Duration::from_secs(600);

/// What the reconciles of one kind share.
pub struct Context<K: Reconciled> {
    /// The management-cluster client: the CR, its status, its finalizers.
    pub client: Client,
    /// Resolves the cluster a CR's children live on.
    pub clusters: Arc<Clusters>,
    /// Runs and instruments the pipeline tables.
    pub engine: Engine,
    /// Publishes Kubernetes Events on the CRs.
    pub events: Publisher,
    /// The per-object failure back-off.
    pub backoff: Backoff<K>,
    /// The cached copies this process's status writes replaced.
    pub superseded: Superseded<K>,
    /// What the kind's controller shares with every pass.
    pub shared: Arc<K::Shared>,
    /// How long a pass may run before it is stopped and retried.
    pub pass_deadline: std::time::Duration,
    /// Whether the kind's served CRD lags behind this release: each CR is warned once.
    pub crd: Arc<Notice>,
}

/// A failed pass. Its text names the step, so one log line says where it failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A step failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// Adding or removing the finalizer failed.
    #[error("{action}: {source}")]
    Finalizer {
        /// Adding or removing.
        action: &'static str,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// Writing the status failed.
    #[error("writing status: {0}")]
    Status(#[source] kube::Error),
    /// The remote sweep failed (the remote-children finalizer is kept).
    #[error("sweeping the remote children: {0}")]
    Sweep(#[source] ClusterError),
    /// The pass did not finish within its deadline.
    #[error("the pass did not finish within its deadline of {0:?}")]
    Deadline(std::time::Duration),
    /// Both failed.
    #[error("{pipeline}; writing status: {status}")]
    Both {
        /// The step's failure.
        pipeline: PipelineError,
        /// The status write's failure.
        status: kube::Error,
    },
}

/// One pass over one CR, in a span naming it.
#[tracing::instrument(skip_all, fields(kind = %K::kind(&()), namespace = %cr.namespace().unwrap_or_default(), name = %cr.name_any()))]
pub async fn reconcile<K: Reconciled>(
    cr: Arc<K>,
    ctx: Arc<Context<K>>,
) -> Result<Action, ReconcileError> {
    let object = ObjectRef::from_obj(&*cr);
    if ctx
        .superseded
        .is_superseded(&object, cr.resource_version().as_deref())
    {
        tracing::debug!("the cached copy predates this process's status write; waiting for it");
        return Ok(Action::requeue(REQUEUE_SUPERSEDED));
    }
    let namespace = cr.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    let has_finalizer = carries(&*cr, K::FINALIZER);
    if let Some(deleted) = &cr.meta().deletion_timestamp {
        if !has_finalizer && !carries(&*cr, REMOTE_CHILDREN) {
            ctx.backoff.forget(&object);
            ctx.superseded.forget(&object);
            return Ok(Action::await_change());
        }
        return tear_down(&ctx, &api, &cr, deleted).await;
    }
    if paused(&*cr) {
        return hold(&ctx, &api, &cr).await;
    }
    let cluster = match ctx.clusters.resolve(cr.target_cluster(), &namespace) {
        Ok(cluster) => cluster,
        Err(message) => {
            // Nothing is created on any cluster and no finalizer is acquired: wait, flat.
            tracing::info!(
                target = cr.target_cluster().unwrap_or_default(),
                "target cluster does not resolve"
            );
            return target_unavailable(&ctx, &api, &cr, message).await;
        }
    };
    if !has_finalizer {
        add_finalizer(&api, &*cr, K::FINALIZER).await?;
        return Ok(Action::requeue(REQUEUE_NEXT_PASS));
    }
    if cr.target_cluster().is_some() && !carries(&*cr, REMOTE_CHILDREN) {
        add_finalizer(&api, &*cr, REMOTE_CHILDREN).await?;
        return Ok(Action::requeue(REQUEUE_NEXT_PASS));
    }
    let mut pass =
        Pass::with_shared(cr.clone(), cluster, ctx.shared.clone()).resolving(ctx.clusters.clone());
    let outcome = ctx.engine.run(K::pipeline(), &mut pass).await;
    publish(&ctx, &cr, pass.events()).await;
    if let Some(outdated) = ctx.crd.once(cr.uid().as_deref()) {
        publish(&ctx, &cr, &[outdated]).await;
    }
    let stamped = count_jobs(&ctx, &api, &*cr, &pass.records).await;
    let status = next_status(&*cr, pass.verdicts(), &pass.updates);
    finish(&ctx, &api, &cr, outcome, &status, stamped).await
}

/// Whether the CR carries the pause annotation with the value `"true"`.
fn paused<K: Reconciled>(cr: &K) -> bool {
    cr.annotations()
        .get(nova_api::labels::PAUSE_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// A paused CR: nothing is read or applied, only its Paused condition is written (with a
/// Normal event when the pause takes hold), and it waits for a change of the CR (removing the
/// annotation wakes it). Its other conditions and observedGeneration stay as the last
/// reconcile left them. A deletion is not paused: the finalizers still run.
async fn hold<K: Reconciled>(
    ctx: &Context<K>,
    api: &Api<K>,
    cr: &Arc<K>,
) -> Result<Action, ReconcileError> {
    let mut status = cr.status().cloned().unwrap_or_default();
    let conditions = K::conditions(&mut status);
    let newly = !conditions
        .iter()
        .any(|c| c.type_ == K::PAUSED.as_str() && c.status == "True");
    conditions::set(
        conditions,
        K::PAUSED.as_str(),
        true,
        Reason::ReconciliationPaused,
        format!(
            "reconciliation is paused by the annotation {}=true; remove it to resume",
            nova_api::labels::PAUSE_ANNOTATION
        ),
        cr.meta().generation,
    );
    if newly {
        tracing::info!("reconciliation paused by annotation");
        let note = EventNote {
            reason: EventReason::ReconciliationPaused,
            note: format!(
                "Reconciliation paused by {}; nothing is applied until it is removed",
                nova_api::labels::PAUSE_ANNOTATION
            ),
        };
        publish(ctx, cr, &[note]).await;
    }
    settle(ctx, api, cr, Ok(Flow::Continue), Some(&status), None).await?;
    Ok(Action::await_change())
}

/// The first gate False with `TargetClusterUnavailable`, written, and a flat 15 s requeue.
async fn target_unavailable<K: Reconciled>(
    ctx: &Context<K>,
    api: &Api<K>,
    cr: &Arc<K>,
    message: String,
) -> Result<Action, ReconcileError> {
    let verdict = Verdict {
        condition: K::TARGET_GATE,
        ok: false,
        reason: Reason::TargetClusterUnavailable,
        message,
    };
    let status = next_status(&**cr, &[verdict], &[]);
    finish(
        ctx,
        api,
        cr,
        Ok(Flow::RequeueAfter(REQUEUE_SECRET_POLLING)),
        &status,
        None,
    )
    .await
}

/// The deletion path (`common-types.md` §3.1 step 2): resolve with the deletion variant, run
/// the kind's cleanup while the service finalizer is held, then sweep the remote children
/// while the remote-children finalizer is held, then release both. A target abandoned after
/// the window releases them at once, with a Warning naming what stays.
async fn tear_down<K: Reconciled>(
    ctx: &Context<K>,
    api: &Api<K>,
    cr: &Arc<K>,
    deleted: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Result<Action, ReconcileError> {
    let since = std::time::Duration::try_from(Timestamp::now().duration_since(deleted.0))
        .unwrap_or_default();
    let namespace = cr.namespace().unwrap_or_default();
    let cluster = match ctx
        .clusters
        .resolve_for_deletion(cr.target_cluster(), &namespace, since)
        .await
    {
        Teardown::Through(cluster) => cluster,
        Teardown::Wait(message) => return target_unavailable(ctx, api, cr, message).await,
        Teardown::Abandon(note) => {
            tracing::warn!(
                target = cr.target_cluster().unwrap_or_default(),
                "target cluster abandoned; releasing the finalizers"
            );
            let abandoned = EventNote {
                reason: EventReason::RemoteChildrenAbandoned,
                note,
            };
            publish(ctx, cr, &[abandoned]).await;
            return release(ctx, api, cr).await;
        }
    };
    let mut pass = Pass::with_shared(cr.clone(), cluster.clone(), ctx.shared.clone())
        .resolving(ctx.clusters.clone());
    if carries(&**cr, K::FINALIZER) {
        let outcome = ctx.engine.run(cr.cleanup(), &mut pass).await;
        publish(ctx, cr, pass.events()).await;
        // A cleanup that reports (a drain moving its node ledger) writes its status before the
        // finalizer goes; one that reports nothing writes none.
        let status = pass
            .reported()
            .then(|| next_status(&**cr, pass.verdicts(), &pass.updates));
        if let Flow::RequeueAfter(after) =
            settle(ctx, api, cr, outcome, status.as_ref(), None).await?
        {
            return Ok(Action::requeue(after));
        }
    }
    if carries(&**cr, REMOTE_CHILDREN) {
        for kind in K::remote_kinds() {
            let swept = cluster
                .writes()
                .sweep(&pass.owner, &kind)
                .await
                .map_err(ReconcileError::Sweep)?;
            if swept > 0 {
                tracing::info!(kind = %kind.kind, deleted = swept, "swept remote children");
            }
        }
    }
    release(ctx, api, cr).await
}

/// Removes both finalizers and forgets the CR's metrics and back-off.
async fn release<K: Reconciled>(
    ctx: &Context<K>,
    api: &Api<K>,
    cr: &Arc<K>,
) -> Result<Action, ReconcileError> {
    remove_finalizers(api, &**cr).await?;
    K::forget_metrics(
        ctx.engine.metrics(),
        &cr.namespace().unwrap_or_default(),
        &cr.name_any(),
    );
    let object = ObjectRef::from_obj(&**cr);
    ctx.backoff.forget(&object);
    ctx.superseded.forget(&object);
    Ok(Action::await_change())
}

/// Whether the CR carries `finalizer`.
fn carries<K: Reconciled>(cr: &K, finalizer: &str) -> bool {
    cr.finalizers().iter().any(|f| f == finalizer)
}

/// Writes the status if it changed and turns the outcome into the controller's action;
/// both halves are reported when both failed. `stamped` is the resourceVersion the pass's
/// Job stamp left the CR at, if it stamped.
async fn finish<K: Reconciled>(
    ctx: &Context<K>,
    api: &Api<K>,
    cr: &Arc<K>,
    outcome: Result<Flow, PipelineError>,
    status: &K::Status,
    stamped: Option<String>,
) -> Result<Action, ReconcileError> {
    K::report_status(
        ctx.engine.metrics(),
        &cr.namespace().unwrap_or_default(),
        &cr.name_any(),
        status,
    );
    let flow = settle(ctx, api, cr, outcome, Some(status), stamped).await?;
    ctx.backoff.forget(&ObjectRef::from_obj(&**cr));
    Ok(match flow {
        Flow::Continue => Action::requeue(RESYNC),
        Flow::RequeueAfter(after) => Action::requeue(after),
    })
}

/// Writes `status` when there is one and it differs from the stored one, then settles the
/// pass: its flow, or its failure (the pipeline's, the status write's, or both). The write's
/// precondition is the copy the pass read or, when the pass stamped its counted Jobs on the CR
/// (`stamped`, which changed only annotations), the stamped one: the stamp would otherwise
/// make every such write stale, and the next pass announce its transitions again.
async fn settle<K: Reconciled>(
    ctx: &Context<K>,
    api: &Api<K>,
    cr: &Arc<K>,
    outcome: Result<Flow, PipelineError>,
    status: Option<&K::Status>,
    stamped: Option<String>,
) -> Result<Flow, ReconcileError> {
    let written = match status {
        Some(status) => {
            let before = cr.status().cloned().unwrap_or_default();
            let read = cr.resource_version();
            let replaced: Vec<&str> = read
                .as_deref()
                .into_iter()
                .chain(stamped.as_deref())
                .collect();
            super::status::persist(
                api,
                &cr.name_any(),
                replaced.last().copied(),
                &before,
                status,
                FIELD_MANAGER,
            )
            .await
            .map(|written| {
                if let Some(written) = written {
                    ctx.superseded
                        .wrote(&ObjectRef::from_obj(&**cr), &replaced, &written);
                }
            })
        }
        None => Ok(()),
    };
    let stale = written.as_ref().is_err_and(super::status::is_stale);
    if stale {
        tracing::debug!(
            name = %cr.name_any(),
            "status not written: the pass ran on a stale copy; the next pass recomputes it"
        );
    }
    match (outcome, written) {
        (Ok(_), Err(_)) if stale => Ok(Flow::RequeueAfter(REQUEUE_NEXT_PASS)),
        (Err(pipeline), Err(_)) if stale => Err(ReconcileError::Pipeline(pipeline)),
        (Ok(flow), Ok(())) => Ok(flow),
        (Err(pipeline), Ok(())) => Err(ReconcileError::Pipeline(pipeline)),
        (Ok(_), Err(status)) => Err(ReconcileError::Status(status)),
        (Err(pipeline), Err(status)) => Err(ReconcileError::Both { pipeline, status }),
    }
}

/// The status a pass ends with: the stored status, the pass's status updates, one condition
/// per verdict (the last of each type; an unchanged status keeps its transition time), the
/// aggregate Ready and observedGeneration.
pub fn next_status<K: Reconciled>(
    cr: &K,
    verdicts: &[Verdict<K::Condition>],
    updates: &[K::StatusUpdate],
) -> K::Status {
    let mut status = cr.status().cloned().unwrap_or_default();
    for update in updates {
        K::update(&mut status, update.clone());
    }
    let generation = cr.meta().generation;
    let conditions: &mut Vec<Condition> = K::conditions(&mut status);
    for v in verdicts {
        conditions::set(
            conditions,
            v.condition.as_str(),
            v.ok,
            v.reason,
            v.message.clone(),
            generation,
        );
    }
    // A pass that runs is not paused (`hold` handles a paused CR).
    conditions.retain(|c| c.type_ != K::PAUSED.as_str());
    let aggregated: Vec<&str> = K::aggregated().iter().map(|c| c.as_str()).collect();
    conditions::aggregate_ready(conditions, &aggregated, generation);
    K::set_observed_generation(&mut status, generation);
    status
}

/// The controller's retry after a failed pass: the per-object back-off. This is the one place
/// a failure is logged.
pub fn error_policy<K: Reconciled>(
    cr: Arc<K>,
    error: &ReconcileError,
    ctx: Arc<Context<K>>,
) -> Action {
    let retry = ctx.backoff.failed(&ObjectRef::from_obj(&*cr));
    tracing::warn!(
        kind = %K::kind(&()),
        namespace = %cr.namespace().unwrap_or_default(),
        name = %cr.name_any(),
        error = %error,
        retry_in = ?retry,
        "reconcile failed"
    );
    Action::requeue(retry)
}

/// Publishes the pass's events on the CR; a failed publish is logged, never fatal.
async fn publish<K: Reconciled>(ctx: &Context<K>, cr: &K, events: &[EventNote]) {
    for note in events {
        if let Err(e) = ctx.events.publish(note, &cr.object_ref(&())).await {
            tracing::warn!(error = %e, reason = %note.reason, "publishing an event failed");
        }
    }
}

/// The terminal Jobs of a pass not counted yet: those whose UID the CR's annotation does not
/// hold already, the last record of each annotation.
pub fn uncounted<'a>(
    annotations: &BTreeMap<String, String>,
    records: &'a [JobRecord],
) -> Vec<&'a JobRecord> {
    let mut pending: Vec<&JobRecord> = Vec::new();
    for record in records {
        if annotations.get(&record.annotation()) == Some(&record.uid) {
            continue;
        }
        pending.retain(|r| r.suffix != record.suffix);
        pending.push(record);
    }
    pending
}

/// Counts the pass's terminal Jobs exactly once per Job UID (`common-types.md` §3.4): one
/// merge patch stamps every uncounted UID on the CR's annotations, guarded by the
/// resourceVersion this pass read; only when it succeeded are the metrics recorded, and the
/// stamped resourceVersion returned. A failed stamp records nothing this pass (the next one
/// tries again) and says so.
async fn count_jobs<K: Reconciled>(
    ctx: &Context<K>,
    api: &Api<K>,
    cr: &K,
    records: &[JobRecord],
) -> Option<String> {
    let pending = uncounted(cr.annotations(), records);
    if pending.is_empty() {
        return None;
    }
    let annotations: serde_json::Map<String, serde_json::Value> = pending
        .iter()
        .map(|r| (r.annotation(), serde_json::Value::from(r.uid.clone())))
        .collect();
    let patch = serde_json::json!({
        "metadata": { "annotations": annotations, "resourceVersion": cr.resource_version() }
    });
    let stamped = api
        .patch(
            &cr.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await;
    let namespace = cr.namespace().unwrap_or_default();
    match stamped {
        Ok(stamped) => {
            for r in pending {
                ctx.engine.metrics().jobs(r.family).record(
                    &namespace,
                    &cr.name_any(),
                    r.succeeded,
                    r.seconds,
                );
            }
            stamped.resource_version()
        }
        Err(e) => {
            tracing::warn!(error = %e, "stamping the counted Job UIDs failed; the Jobs are counted on a later pass");
            let mut deferred: Vec<EventNote> = Vec::new();
            for r in pending {
                let reason = r.family.deferred_reason();
                if deferred.iter().all(|n| n.reason != reason) {
                    deferred.push(EventNote {
                        reason,
                        note: format!(
                            "The metrics of Job {} (suffix {}) are deferred: stamping its UID on the {} failed",
                            r.uid,
                            r.suffix,
                            K::kind(&())
                        ),
                    });
                }
            }
            publish(ctx, cr, &deferred).await;
            None
        }
    }
}

/// Replaces the finalizer list, guarded by the resourceVersion this pass read, so a
/// concurrent change of the list fails (and retries) instead of being overwritten.
async fn patch_finalizers<K: Reconciled>(
    api: &Api<K>,
    cr: &K,
    finalizers: Vec<String>,
    action: &'static str,
) -> Result<(), ReconcileError> {
    let patch = serde_json::json!({
        "metadata": { "finalizers": finalizers, "resourceVersion": cr.resource_version() }
    });
    api.patch(
        &cr.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
    .map_err(|source| ReconcileError::Finalizer { action, source })?;
    Ok(())
}

async fn add_finalizer<K: Reconciled>(
    api: &Api<K>,
    cr: &K,
    finalizer: &str,
) -> Result<(), ReconcileError> {
    let mut finalizers = cr.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    patch_finalizers(api, cr, finalizers, "adding the finalizer").await
}

/// Removes the service and the remote-children finalizer, keeping any other.
async fn remove_finalizers<K: Reconciled>(api: &Api<K>, cr: &K) -> Result<(), ReconcileError> {
    let finalizers = cr
        .finalizers()
        .iter()
        .filter(|f| *f != K::FINALIZER && *f != REMOTE_CHILDREN)
        .cloned()
        .collect();
    patch_finalizers(api, cr, finalizers, "removing the finalizers").await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use k8s_openapi::jiff::Timestamp;
    use nova_api::conditions::NovaConditionType as C;
    use nova_api::v1alpha1::{Nova, NovaStatus};

    fn verdict(ok: bool, reason: Reason) -> Verdict<C> {
        Verdict {
            condition: C::SecretsReady,
            ok,
            reason,
            message: "m".into(),
        }
    }

    /// A Nova whose stored SecretsReady is False since a fixed time, as a pass left it.
    fn waiting() -> Nova {
        let mut nova = example();
        let once = next_status(
            &nova,
            &[verdict(false, Reason::WaitingForMessagingCredentials)],
            &[],
        );
        let mut stored: NovaStatus = once;
        for c in &mut stored.conditions {
            c.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(1_700_000_000).expect("time"),
            );
        }
        nova.status = Some(stored);
        nova
    }

    #[test]
    fn a_condition_that_stays_false_keeps_its_time_and_the_status_is_unchanged() {
        let nova = waiting();
        // One step says True, a later one False: the pass records the last verdict only.
        let cluster = std::sync::Arc::new(crate::clusters::MemoryCluster::new(Default::default()));
        let mut pass = Pass::new(std::sync::Arc::new(nova.clone()), cluster);
        pass.record(verdict(true, Reason::SecretsAvailable));
        pass.record(verdict(false, Reason::WaitingForMessagingCredentials));
        let after = next_status(&nova, pass.verdicts(), &[]);
        assert_eq!(Some(&after), nova.status.as_ref(), "no status write");
    }

    #[test]
    fn a_job_is_counted_unless_the_annotation_holds_its_uid_and_once_per_suffix() {
        use crate::metrics::JobFamily;
        let record = |suffix, uid: &str| JobRecord {
            family: JobFamily::DbSync,
            suffix,
            uid: uid.into(),
            succeeded: true,
            seconds: 1.0,
        };
        let records = [
            record("db-sync", "a"),
            record("db-archive", "b"),
            record("db-expand", "c"),
            record("db-expand", "d"),
        ];
        assert_eq!(
            records[0].annotation(),
            "cobaltcore.c5c3.io/last-db-sync-job-uid"
        );
        let annotations = BTreeMap::from([
            (
                "cobaltcore.c5c3.io/last-db-sync-job-uid".to_owned(),
                "a".to_owned(),
            ),
            (
                "cobaltcore.c5c3.io/last-db-archive-job-uid".to_owned(),
                "old".to_owned(),
            ),
        ]);
        let pending: Vec<(&str, &str)> = uncounted(&annotations, &records)
            .into_iter()
            .map(|r| (r.suffix, r.uid.as_str()))
            .collect();
        assert_eq!(pending, [("db-archive", "b"), ("db-expand", "d")]);
    }

    #[test]
    fn ready_and_observed_generation_are_stamped() {
        let mut nova = example();
        nova.metadata.generation = Some(7);
        let status = next_status(&nova, &[verdict(true, Reason::SecretsAvailable)], &[]);
        assert_eq!(status.observed_generation, Some(7));
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .expect("Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "NotAllReady")
        );
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.observed_generation == Some(7))
        );
    }
}
