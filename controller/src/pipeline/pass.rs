//! The kind a pipeline reconciles ([`Reconciled`]), the rows of its tables ([`Stage`], [`Step`]),
//! and the state one pass threads through its steps ([`Pass`]): the CR as read, the handle its
//! children live on, what earlier steps resolved, and the plans' deltas the status write ends
//! with. One file, because the kind names its tables and a row's function takes the pass.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StepError;
use super::plan::{JobRecord, Plan, Verdict};
use super::uses::Uses;
use crate::clusters::{Cluster, Clusters, Handle};
use crate::objects::EventNote;
use crate::objects::Owner;

/// A condition type enum of one kind.
pub trait ConditionType: Copy + Debug + Eq + Send + Sync + 'static {
    /// The exact spelling written into the status.
    fn as_str(self) -> &'static str;
}

impl ConditionType for nova_api::conditions::NovaConditionType {
    fn as_str(self) -> &'static str {
        nova_api::conditions::NovaConditionType::as_str(self)
    }
}

impl ConditionType for nova_api::conditions::NovaComputeConditionType {
    fn as_str(self) -> &'static str {
        nova_api::conditions::NovaComputeConditionType::as_str(self)
    }
}

/// What later steps may use, merged from each plan: a later plan's value replaces an earlier
/// one only where it sets one.
pub trait Merge {
    /// Merges `later` on top of `self`.
    fn merge(&mut self, later: Self);
}

/// A kind the shared skeleton reconciles (Nova, NovaCompute): its status shape, what its steps
/// resolve for each other, what its controller shares with every pass, its finalizer and its
/// pipeline tables.
pub trait Reconciled:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The status subresource.
    type Status: Clone + Default + PartialEq + Serialize + Debug + Send + Sync;
    /// What steps resolve for later steps.
    type Resolved: Merge + Clone + Default + Debug + Send + Sync;
    /// One status field a step sets.
    type StatusUpdate: Clone + Debug + PartialEq + Send + Sync;
    /// The condition types.
    type Condition: ConditionType;
    /// What the kind's controller shares with every pass (an index over its CRs, say); the
    /// default value stands in where no controller runs (`render`, unit tests).
    type Shared: Default + Send + Sync + 'static;

    /// The service finalizer.
    const FINALIZER: &'static str;
    /// The condition an unresolvable target cluster is reported on (the first gate).
    const TARGET_GATE: Self::Condition;
    /// The condition a paused CR carries (`nova_api::labels::PAUSE_ANNOTATION`).
    const PAUSED: Self::Condition;

    /// The sub-conditions whose conjunction is Ready.
    fn aggregated() -> &'static [Self::Condition];
    /// The pipeline of a live CR.
    fn pipeline() -> &'static [Stage<Self>];
    /// The steps a deleting CR runs before its finalizer is released, chosen from the CR as
    /// the pass read it. The finalizer is released once they all go on.
    fn cleanup(&self) -> &'static [Stage<Self>];
    /// The stored status.
    fn status(&self) -> Option<&Self::Status>;
    /// The conditions of a status.
    fn conditions(status: &mut Self::Status) -> &mut Vec<Condition>;
    /// Stamps `status.observedGeneration`.
    fn set_observed_generation(status: &mut Self::Status, generation: Option<i64>);
    /// Applies one status update.
    fn update(status: &mut Self::Status, update: Self::StatusUpdate);
    /// The common labels of every child.
    fn common_labels(&self) -> BTreeMap<String, String>;
    /// The target cluster the CR names, if any.
    fn target_cluster(&self) -> Option<&str>;
    /// Every kind the CR writes onto a target cluster: what the remote sweep lists there.
    fn remote_kinds() -> Vec<kube::core::ApiResource>;
    /// The reason `condition` reports when carrying out a step's plan failed (an apply, delete
    /// or prune the API server refused); None leaves the condition as the pass found it.
    fn carry_out_failure(_condition: Self::Condition) -> Option<nova_api::conditions::Reason> {
        None
    }
    /// Drops the per-CR metric series of a deleted CR (none unless the kind exports any).
    fn forget_metrics(_metrics: &crate::metrics::Metrics, _namespace: &str, _name: &str) {}
    /// Exports what the kind's gauges read from the status a pass computed (the aggregate
    /// Ready, a pool's ledger).
    fn report_status(
        metrics: &crate::metrics::Metrics,
        namespace: &str,
        name: &str,
        status: &Self::Status,
    );
}

/// A plan of kind `K`.
pub type PlanOf<K> = Plan<
    <K as Reconciled>::Condition,
    <K as Reconciled>::StatusUpdate,
    <K as Reconciled>::Resolved,
>;

/// One reconcile pass of one CR.
pub struct Pass<K: Reconciled> {
    /// The CR as this pass read it.
    pub cr: Arc<K>,
    /// The handle the CR's children live on (steps read through it; the engine writes).
    pub cluster: Handle,
    /// Resolves other clusters: the management cluster (where every CR lives) and the cluster
    /// another CR is placed on (a pool's Nova).
    pub clusters: Arc<Clusters>,
    /// Who the children belong to (stamped on every apply).
    pub owner: Owner,
    /// What the kind's controller shares with every pass.
    pub shared: Arc<K::Shared>,
    /// What the steps resolved so far.
    pub resolved: K::Resolved,
    /// The last verdict per condition type (the status write turns them into conditions).
    pub(crate) verdicts: Vec<Verdict<K::Condition>>,
    /// The status updates, in order.
    pub(crate) updates: Vec<K::StatusUpdate>,
    /// The events to publish.
    pub(crate) events: Vec<EventNote>,
    /// The terminal Jobs to count.
    pub(crate) records: Vec<JobRecord>,
}

impl<K: Reconciled> Pass<K> {
    /// A pass over `cr` whose children live on `cluster`, with nothing shared.
    pub fn new(cr: Arc<K>, cluster: Arc<dyn Cluster>) -> Self {
        Self::with_shared(cr, Handle::new(cluster), Arc::default())
    }

    /// A pass over `cr` whose children live on `cluster`, with what its controller shares.
    pub fn with_shared(cr: Arc<K>, cluster: Handle, shared: Arc<K::Shared>) -> Self {
        let owner = Owner::of(&*cr, cr.common_labels());
        Self {
            cr,
            clusters: Arc::new(Clusters::new(cluster.whole(), None)),
            cluster,
            owner,
            shared,
            resolved: K::Resolved::default(),
            verdicts: Vec::new(),
            updates: Vec::new(),
            events: Vec::new(),
            records: Vec::new(),
        }
    }

    /// The pass resolves other clusters through `clusters` (by default only its own handle,
    /// as the management cluster, resolves).
    pub fn resolving(mut self, clusters: Arc<Clusters>) -> Self {
        self.clusters = clusters;
        self
    }

    /// Merges a plan's delta (verdicts, status updates, resolved values, events).
    pub(crate) fn merge(&mut self, plan: PlanOf<K>) {
        for verdict in plan.verdicts {
            self.record(verdict);
        }
        self.updates.extend(plan.status);
        self.resolved.merge(plan.resolved);
        self.events.extend(plan.events);
        self.records.extend(plan.records);
    }

    /// Records a verdict, replacing an earlier one of the same type from this pass.
    pub fn record(&mut self, verdict: Verdict<K::Condition>) {
        self.verdicts.retain(|v| v.condition != verdict.condition);
        self.verdicts.push(verdict);
    }

    /// The verdicts of this pass, last per type.
    pub fn verdicts(&self) -> &[Verdict<K::Condition>] {
        &self.verdicts
    }

    /// The events this pass publishes.
    pub fn events(&self) -> &[EventNote] {
        &self.events
    }

    /// Whether the pass reported anything for the status (a verdict or a status field).
    pub fn reported(&self) -> bool {
        !self.verdicts.is_empty() || !self.updates.is_empty()
    }
}

/// The future a step's function returns: observe (through the handle), then plan.
pub type StepFuture<'a, K> =
    Pin<Box<dyn Future<Output = Result<PlanOf<K>, StepError>> + Send + 'a>>;

/// One row of a pipeline table.
pub struct Step<K: Reconciled> {
    /// The `sub_reconciler` metric label.
    pub name: &'static str,
    /// The condition type the step reports on (the `condition_type` error label).
    pub condition: K::Condition,
    /// Observes and plans.
    pub run: for<'a> fn(&'a Pass<K>) -> StepFuture<'a, K>,
    /// The kinds it reads or applies ([`super::kinds`]): what the tables register and watch.
    pub kinds: &'static [Uses],
}

impl<K: Reconciled> Clone for Step<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Reconciled> Copy for Step<K> {}

/// A pipeline stage: one sequential step, or a group whose members all run.
pub enum Stage<K: Reconciled> {
    /// Ends the pass at its first requeue or error.
    Sequential(Step<K>),
    /// Runs every member concurrently; cancels the others at the first error.
    Parallel(&'static [Step<K>]),
}

impl<K: Reconciled> Stage<K> {
    /// A sequential row that reads or applies `kinds` (a group's members declare their own).
    pub const fn using(self, kinds: &'static [Uses]) -> Self {
        match self {
            Stage::Sequential(step) => Stage::Sequential(step.using(kinds)),
            parallel => parallel,
        }
    }
}

impl<K: Reconciled> Step<K> {
    /// The step, reading or applying `kinds`.
    pub const fn using(self, kinds: &'static [Uses]) -> Self {
        Step { kinds, ..self }
    }
}

/// A sequential row: `seq("Secrets", C::SecretsReady, secrets::run)`.
pub const fn seq<K: Reconciled>(
    name: &'static str,
    condition: K::Condition,
    run: for<'a> fn(&'a Pass<K>) -> StepFuture<'a, K>,
) -> Stage<K> {
    Stage::Sequential(member(name, condition, run))
}

/// A member of a parallel group.
pub const fn member<K: Reconciled>(
    name: &'static str,
    condition: K::Condition,
    run: for<'a> fn(&'a Pass<K>) -> StepFuture<'a, K>,
) -> Step<K> {
    Step {
        name,
        condition,
        run,
        kinds: &[],
    }
}

/// A parallel group row.
pub const fn parallel<K: Reconciled>(members: &'static [Step<K>]) -> Stage<K> {
    Stage::Parallel(members)
}

/// A step's run from its two halves: `observe` (async, thin, every read through the handle)
/// and the pure `plan`.
pub fn observe_then_plan<'a, K, O, F>(
    pass: &'a Pass<K>,
    observe: impl FnOnce(&'a Pass<K>) -> F + Send + 'a,
    plan: fn(&K, &O, &K::Resolved) -> PlanOf<K>,
) -> StepFuture<'a, K>
where
    K: Reconciled,
    O: Send + 'a,
    F: Future<Output = Result<O, StepError>> + Send + 'a,
{
    Box::pin(async move {
        let observed = observe(pass).await?;
        Ok(plan(&pass.cr, &observed, &pass.resolved))
    })
}
