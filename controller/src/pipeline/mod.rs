//! The table-driven pipeline (`DESIGN.md` principle 2, `common-types.md` §3.1–3.5).
//!
//! A pipeline is an ordered table of short rows (`seq("Secrets", C::SecretsReady,
//! secrets::run)`). A step observes what it needs through the cluster handle and returns a
//! pure [`Plan`]; the [`Engine`] applies the plan's children, merges its delta (conditions,
//! status fields, resolved values, events) into the [`Pass`], and times and counts every step.
//! A sequential step ends the pass at its first requeue or error; a parallel group runs its
//! members concurrently and merges each member's whole delta. The one [`skeleton`] around the
//! engine (deletion, target gate, finalizer, status write, back-off) is generic over the kind.
//! Steps never write status and never build an `Api`.

pub mod backoff;
pub mod capability;
pub mod conditions;
pub mod deadline;
pub mod effects;
pub mod engine;
pub mod events;
pub mod index;
pub mod kinds;
pub mod pass;
pub mod plan;
pub mod runner;
pub mod skeleton;
pub mod status;
pub mod superseded;
pub mod uses;

use std::time::Duration;

pub use engine::{Engine, PipelineError, RecordedEffect};
pub use pass::{
    ConditionType, Merge, Pass, PlanOf, Reconciled, Stage, Step, StepFuture, member,
    observe_then_plan, parallel, seq,
};
pub use plan::{Gate, JobRecord, Plan, Prune, Removal, Verdict, Waiting};

use crate::clusters::ClusterError;

/// After a finalizer add and after an upgrade phase transition.
pub const REQUEUE_NEXT_PASS: Duration = Duration::from_secs(1);
/// How soon a pass woken on a copy its own status write replaced looks again: the write's
/// watch event normally reaches the cache within milliseconds, and status-only updates wake
/// no pass by themselves.
pub const REQUEUE_SUPERSEDED: Duration = Duration::from_millis(200);
/// Deployment readiness and HTTPRoute acceptance polling.
pub const REQUEUE_DEPLOYMENT_POLLING: Duration = Duration::from_secs(10);
/// Store gate, credential gates, derived Secrets, an unresolvable target cluster.
pub const REQUEUE_SECRET_POLLING: Duration = Duration::from_secs(15);
/// MariaDB gates, db-sync wait, config wait, finalizer cleanup wait.
pub const REQUEUE_DATABASE_WAIT: Duration = Duration::from_secs(30);
/// The expand, migrate and contract phase Jobs.
pub const REQUEUE_UPGRADE_WAIT: Duration = Duration::from_secs(30);

/// What a step tells the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on with the next step.
    Continue,
    /// End the pass and come back after this long.
    RequeueAfter(Duration),
}

impl Flow {
    /// The shorter of two requeues; Continue when neither asks for one.
    pub fn min(self, other: Flow) -> Flow {
        match (self, other) {
            (Flow::RequeueAfter(a), Flow::RequeueAfter(b)) => Flow::RequeueAfter(a.min(b)),
            (Flow::RequeueAfter(a), Flow::Continue) | (Flow::Continue, Flow::RequeueAfter(a)) => {
                Flow::RequeueAfter(a)
            }
            (Flow::Continue, Flow::Continue) => Flow::Continue,
        }
    }
}

/// A step's failure. Its text reaches a log line and possibly a condition, so it must never
/// carry a secret value: name the object, the field or the scheme instead.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// A read or write through the cluster handle failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The step refuses to go on, for the stated reason.
    #[error("{0}")]
    Refused(String),
}
