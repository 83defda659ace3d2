//! The deadline of a pass: a pass that has not finished by then is stopped where it waits
//! (every step is observe, plan, apply, and the next pass observes what this one left), its
//! reconcile slot is freed, and it is retried under the per-object back-off, with a Warning
//! event saying so. A pass is also counted in flight from start to end, which is what
//! liveness and the stall metrics read.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;

use super::pass::Reconciled;
use super::skeleton::{Context, ReconcileError, reconcile};
use crate::objects::EventNote;
use nova_api::events::EventReason;

/// The default pass deadline (`--pass-deadline-seconds`): a pass sends a few dozen requests,
/// each bounded (30 s to the API server, 10 s to OpenStack), and waits for nothing else.
pub const PASS_DEADLINE: Duration = Duration::from_secs(120);

/// [`reconcile`], within the context's pass deadline.
pub async fn reconcile_within<K: Reconciled>(
    cr: Arc<K>,
    ctx: Arc<Context<K>>,
) -> Result<Action, ReconcileError> {
    let metrics = ctx.engine.metrics();
    let _in_flight = metrics.progress.started();
    let deadline = ctx.pass_deadline;
    match tokio::time::timeout(deadline, reconcile(cr.clone(), ctx.clone())).await {
        Ok(outcome) => outcome,
        Err(_) => {
            metrics
                .pass_deadline_exceeded
                .with_label_values(&[&K::kind(&())])
                .inc();
            let note = EventNote {
                reason: EventReason::ReconcileDeadlineExceeded,
                note: format!(
                    "the reconcile pass did not finish within {deadline:?}; it was stopped and is retried with back-off"
                ),
            };
            // Published beside the retry, so the slot is free at once.
            let (events, reference) = (ctx.events.clone(), cr.object_ref(&()));
            tokio::spawn(async move {
                if let Err(e) = events.publish(&note, &reference).await {
                    tracing::warn!(error = %e, reason = %note.reason, "publishing an event failed");
                }
            });
            Err(ReconcileError::Deadline(deadline))
        }
    }
}
