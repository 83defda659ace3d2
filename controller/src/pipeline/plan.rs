//! What a step's pure `plan` returns, and the one "ready, or wait" vocabulary every step uses.

use std::sync::Arc;

use kube::core::ApiResource;
use nova_api::conditions::Reason;

use super::effects::{Effect, Effects, Outcome};
use super::{Flow, StepError};
use crate::metrics::JobFamily;
use crate::objects::{Child, EventNote, Labels};
use crate::openstack::Client;
use nova_api::events::EventReason;

/// A gate: the value a step needs, or why it waits for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate<T> {
    /// The input is there.
    Ready(T),
    /// The step waits: its condition goes False with this reason and message.
    Wait {
        /// The condition reason.
        reason: Reason,
        /// The condition message (never a secret value).
        message: String,
    },
}

impl<T> Gate<T> {
    /// A wait with `reason` and `message`.
    pub fn wait(reason: Reason, message: impl Into<String>) -> Self {
        Gate::Wait {
            reason,
            message: message.into(),
        }
    }

    /// The ready value, or the wait as an error, so plans chain gates with `?`.
    pub fn ready(self) -> Result<T, Waiting> {
        match self {
            Gate::Ready(value) => Ok(value),
            Gate::Wait { reason, message } => Err(Waiting { reason, message }),
        }
    }

    /// Transforms the ready value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Gate<U> {
        match self {
            Gate::Ready(value) => Gate::Ready(f(value)),
            Gate::Wait { reason, message } => Gate::Wait { reason, message },
        }
    }
}

/// A gate that did not pass, carried by `?` out of a plan's gate chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// The condition reason.
    pub reason: Reason,
    /// The condition message.
    pub message: String,
}

/// One condition a plan reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict<C> {
    /// The condition type.
    pub condition: C,
    /// True or False.
    pub ok: bool,
    /// The reason.
    pub reason: Reason,
    /// The message.
    pub message: String,
}

/// Objects of one kind a plan prunes: those matching `selector` that the CR controls, except
/// the ones it keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct Prune {
    /// The kind.
    pub kind: ApiResource,
    /// The label selector.
    pub selector: Labels,
    /// The names to keep.
    pub keep: Vec<String>,
}

/// An object a plan deletes by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Removal {
    /// The kind.
    pub kind: ApiResource,
    /// The name, in the CR's namespace.
    pub name: String,
    /// The UID of the object the step observed and vouches for, which need not be the CR's
    /// (a mirror another writer created); None deletes it only when the CR controls it.
    pub uid: Option<String>,
}

/// A Job that reached a terminal condition, to be counted once per Job UID
/// (`common-types.md` §3.4): the skeleton stamps its UID on the CR's annotation
/// `cobaltcore.c5c3.io/last-<suffix>-job-uid` first and records the metrics only when that
/// write succeeded, so neither a second pass nor a restarted controller counts it again.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// The collector pair it is counted in.
    pub family: JobFamily,
    /// The Job's suffix (`db-sync`, `db-expand`, `db-archive`, ...), which names the annotation.
    pub suffix: &'static str,
    /// The Job's UID.
    pub uid: String,
    /// Whether it succeeded.
    pub succeeded: bool,
    /// Its terminal condition's transition time minus its creation time, at least 0.
    pub seconds: f64,
}

impl JobRecord {
    /// The CR annotation holding the UID of the last Job of this suffix that was counted.
    pub fn annotation(&self) -> String {
        format!("cobaltcore.c5c3.io/last-{}-job-uid", self.suffix)
    }
}

/// A step's decision, computed without I/O from the spec, what the step observed and what the
/// steps before it resolved; the engine carries it out. `S` is the kind's status update and
/// `R` what it resolves for later steps (see `pipeline::Reconciled`).
#[derive(Debug)]
pub struct Plan<C, S, R> {
    /// The conditions this step reports.
    pub verdicts: Vec<Verdict<C>>,
    /// Children to apply, in order.
    pub children: Vec<Child>,
    /// Objects to delete.
    pub removals: Vec<Removal>,
    /// Label-selected leftovers to prune.
    pub prunes: Vec<Prune>,
    /// Status fields this step sets.
    pub status: Vec<S>,
    /// What later steps may use.
    pub resolved: R,
    /// Events to publish.
    pub events: Vec<EventNote>,
    /// Terminal Jobs to count.
    pub records: Vec<JobRecord>,
    /// Go on, or end the pass and come back.
    pub flow: Flow,
    /// The step failed: the engine applies the rest of the plan, then ends the pass on this.
    pub error: Option<StepError>,
    /// Writes beyond the step's children, carried out after them; their settle is the rest
    /// of the plan.
    pub effects: Option<Effects<Plan<C, S, R>>>,
}

impl<C, S, R: Default> Default for Plan<C, S, R> {
    fn default() -> Self {
        Self {
            verdicts: Vec::new(),
            children: Vec::new(),
            removals: Vec::new(),
            prunes: Vec::new(),
            status: Vec::new(),
            resolved: R::default(),
            events: Vec::new(),
            records: Vec::new(),
            flow: Flow::Continue,
            error: None,
            effects: None,
        }
    }
}

impl<C, S, R: Default> Plan<C, S, R> {
    /// A plan that goes on and does nothing yet.
    pub fn proceed() -> Self {
        Self::default()
    }

    /// A plan that sets `condition` False from a wait and ends the pass for `after`.
    pub fn wait(condition: C, waiting: Waiting, after: std::time::Duration) -> Self {
        Self::proceed()
            .report(condition, false, waiting.reason, waiting.message)
            .requeue(after)
    }

    /// A plan that hands the engine `list` (its OpenStack actions called through `client`) and
    /// settles their outcomes into the rest of the step's plan.
    pub fn effects(
        client: Option<Arc<Client>>,
        list: Vec<Effect>,
        settle: impl FnOnce(Vec<Outcome>) -> Self + Send + Sync + 'static,
    ) -> Self {
        Self {
            effects: Some(Effects {
                client,
                list,
                settle: Box::new(settle),
            }),
            ..Self::default()
        }
    }

    /// A plan that fails the step with `error` (no condition).
    pub fn fail(error: StepError) -> Self {
        Self {
            error: Some(error),
            ..Self::default()
        }
    }

    /// Adds a verdict.
    pub fn report(
        mut self,
        condition: C,
        ok: bool,
        reason: Reason,
        message: impl Into<String>,
    ) -> Self {
        self.verdicts.push(Verdict {
            condition,
            ok,
            reason,
            message: message.into(),
        });
        self
    }

    /// Sets `condition` True.
    pub fn ready(self, condition: C, reason: Reason, message: impl Into<String>) -> Self {
        self.report(condition, true, reason, message)
    }

    /// Sets `condition` False from a wait without ending the pass.
    pub fn waiting(self, condition: C, waiting: Waiting) -> Self {
        self.report(condition, false, waiting.reason, waiting.message)
    }

    /// Adds a child to apply.
    pub fn apply(mut self, child: Child) -> Self {
        self.children.push(child);
        self
    }

    /// Adds an object to delete, if the CR controls it.
    pub fn remove(mut self, kind: ApiResource, name: impl Into<String>) -> Self {
        self.removals.push(Removal {
            kind,
            name: name.into(),
            uid: None,
        });
        self
    }

    /// Adds the object the step observed with `uid` to delete, whoever controls it.
    pub fn remove_seen(mut self, kind: ApiResource, name: impl Into<String>, uid: String) -> Self {
        self.removals.push(Removal {
            kind,
            name: name.into(),
            uid: Some(uid),
        });
        self
    }

    /// Adds a prune.
    pub fn prune(mut self, prune: Prune) -> Self {
        self.prunes.push(prune);
        self
    }

    /// Adds a status update.
    pub fn set(mut self, update: S) -> Self {
        self.status.push(update);
        self
    }

    /// Records what later steps may use.
    pub fn resolve(mut self, resolved: R) -> Self {
        self.resolved = resolved;
        self
    }

    /// Adds an event.
    pub fn event(mut self, reason: EventReason, note: impl Into<String>) -> Self {
        self.events.push(EventNote {
            reason,
            note: note.into(),
        });
        self
    }

    /// Counts a terminal Job (once per UID).
    pub fn count(mut self, record: JobRecord) -> Self {
        self.records.push(record);
        self
    }

    /// Ends the pass and comes back after `after`.
    pub fn requeue(mut self, after: std::time::Duration) -> Self {
        self.flow = Flow::RequeueAfter(after);
        self
    }

    /// Fails the step after applying the rest of the plan.
    pub fn failing(mut self, error: StepError) -> Self {
        self.error = Some(error);
        self
    }

    /// The verdict this plan reports for `condition`, if any (for tests).
    pub fn verdict(&self, condition: C) -> Option<&Verdict<C>>
    where
        C: PartialEq,
    {
        self.verdicts
            .iter()
            .rev()
            .find(|v| v.condition == condition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_chain_with_question_mark() {
        fn chain(first: Gate<u8>, second: Gate<u8>) -> Result<u8, Waiting> {
            Ok(first.ready()? + second.ready()?)
        }
        assert_eq!(chain(Gate::Ready(1), Gate::Ready(2)), Ok(3));
        let waiting = chain(
            Gate::wait(Reason::WaitingForDBCredentials, "first"),
            Gate::wait(Reason::SecretStoreNotReady, "second"),
        )
        .expect_err("waits");
        assert_eq!(waiting.reason, Reason::WaitingForDBCredentials);
        assert_eq!(Gate::Ready(2).map(|v| v * 2), Gate::Ready(4));
    }
}
