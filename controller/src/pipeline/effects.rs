//! The writes a step's plan hands the engine beyond its own children, as data: OpenStack
//! actions, a merge patch of another operator's object, a child of another CR on that CR's
//! cluster. The step's pure `decide` lists them; the engine carries them out in order, stopping
//! at the first that fails (or finds the cloud changed under it), counts and times each, and
//! hands the step's pure `settle` what each did: the rest of its plan.

use std::sync::Arc;

use kube::core::ApiResource;
use serde_json::Value;

use crate::clusters::{ClusterError, Handle};
use crate::objects::{Child, Owner};
use crate::openstack::Client;
use crate::openstack::action::{self, Action, Done};

/// One write a step decided on.
#[derive(Clone)]
pub enum Effect {
    /// An OpenStack call through the batch's client.
    OpenStack(Action),
    /// A JSON merge patch of another operator's object (a Hypervisor's `spec.customTraits`).
    MergePatch {
        /// Its cluster.
        cluster: Handle,
        /// Its kind.
        kind: ApiResource,
        /// Its namespace; None for a cluster-scoped kind.
        namespace: Option<String>,
        /// Its name.
        name: String,
        /// The patch.
        patch: Value,
    },
    /// Apply a child of another CR on that CR's cluster (a pool's Nova's discovery Job).
    ApplyFor {
        /// The other CR's cluster.
        cluster: Handle,
        /// The other CR (boxed, like the child: the effect list stays small).
        owner: Box<Owner>,
        /// The child.
        child: Box<Child>,
    },
    /// Delete a child of another CR on that CR's cluster.
    DeleteFor {
        /// The other CR's cluster.
        cluster: Handle,
        /// The other CR, which must control the child (its namespace is the child's).
        owner: Box<Owner>,
        /// Its kind.
        kind: ApiResource,
        /// Its name.
        name: String,
    },
}

impl std::fmt::Debug for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// What one carried-out effect did.
#[derive(Debug)]
pub enum Outcome {
    /// An OpenStack action: what it did, or the failure message naming it.
    OpenStack(Result<Done, String>),
    /// A Kubernetes write.
    Cluster(Result<(), ClusterError>),
}

impl Outcome {
    /// Whether the batch stops after this outcome.
    fn ends_batch(&self) -> bool {
        match self {
            Outcome::OpenStack(Ok(done)) => done.ends_batch(),
            Outcome::OpenStack(Err(_)) | Outcome::Cluster(Err(_)) => true,
            Outcome::Cluster(Ok(())) => false,
        }
    }

    /// `ok` or `failed`, the metric's result label.
    pub fn result(&self) -> &'static str {
        match self {
            Outcome::OpenStack(Err(_)) | Outcome::Cluster(Err(_)) => "failed",
            _ => "ok",
        }
    }
}

impl Effect {
    /// The metric label of the effect.
    pub fn kind(&self) -> &'static str {
        match self {
            Effect::OpenStack(action) => action.kind(),
            Effect::MergePatch { .. } => "merge_patch",
            Effect::ApplyFor { .. } => "apply",
            Effect::DeleteFor { .. } => "delete",
        }
    }

    /// One line naming the effect, what `render` prints.
    pub fn describe(&self) -> String {
        match self {
            Effect::OpenStack(action) => action.doing(),
            Effect::MergePatch {
                kind, name, patch, ..
            } => format!("patching {} {name}: {patch}", kind.kind),
            Effect::ApplyFor { owner, child, .. } => format!(
                "applying {} {}/{} of {} {}",
                child.kind.kind,
                owner.namespace,
                child.name,
                owner.kind,
                owner.reference.as_ref().map_or("", |r| r.name.as_str())
            ),
            Effect::DeleteFor {
                owner, kind, name, ..
            } => format!("deleting {} {}/{name}", kind.kind, owner.namespace),
        }
    }

    /// Carries the effect out: OpenStack actions through `client`, the rest on the cluster the
    /// effect names.
    async fn carry_out(&self, client: Option<&Client>) -> Outcome {
        match self {
            Effect::OpenStack(a) => Outcome::OpenStack(match client {
                Some(client) => action::execute(client, a).await,
                None => Err(format!("{}: no OpenStack client in this pass", a.doing())),
            }),
            Effect::MergePatch {
                cluster,
                kind,
                namespace,
                name,
                patch,
            } => Outcome::Cluster(
                cluster
                    .writes()
                    .merge_patch(kind, namespace.as_deref(), name, patch)
                    .await,
            ),
            Effect::ApplyFor {
                cluster,
                owner,
                child,
            } => Outcome::Cluster(cluster.writes().apply(owner, child).await.map(drop)),
            Effect::DeleteFor {
                cluster,
                owner,
                kind,
                name,
            } => Outcome::Cluster(cluster.writes().delete(owner, kind, name, None).await),
        }
    }
}

/// What turns the outcomes into the rest of the step's plan.
pub type Settle<P> = Box<dyn FnOnce(Vec<Outcome>) -> P + Send + Sync>;

/// A step's effects and how it settles them.
pub struct Effects<P> {
    /// The client the OpenStack actions call.
    pub client: Option<Arc<Client>>,
    /// The effects, in order.
    pub list: Vec<Effect>,
    /// Builds the rest of the plan from one outcome per effect carried out (a prefix of
    /// `list` when one ended the batch).
    pub settle: Settle<P>,
}

impl<P> std::fmt::Debug for Effects<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.list).finish()
    }
}

/// Carries out `list` in order, stopping after the first outcome that ends the batch; `each`
/// sees every effect with its outcome and how long it took (the engine's instrumentation).
pub async fn carry_out(
    list: &[Effect],
    client: Option<&Client>,
    mut each: impl FnMut(&Effect, &Outcome, std::time::Duration),
) -> Vec<Outcome> {
    let mut outcomes = Vec::with_capacity(list.len());
    for effect in list {
        let started = std::time::Instant::now();
        let outcome = effect.carry_out(client).await;
        each(effect, &outcome, started.elapsed());
        let stop = outcome.ends_batch();
        outcomes.push(outcome);
        if stop {
            break;
        }
    }
    outcomes
}

/// Each action as an effect.
pub fn openstack(actions: Vec<Action>) -> Vec<Effect> {
    actions.into_iter().map(Effect::OpenStack).collect()
}

/// The answers of an OpenStack-only batch: what each action did, or its failure message.
pub fn answers(outcomes: Vec<Outcome>) -> Vec<Result<Done, String>> {
    outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Outcome::OpenStack(answer) => answer,
            Outcome::Cluster(result) => result.map(|()| Done::Ok).map_err(|e| e.to_string()),
        })
        .collect()
}
