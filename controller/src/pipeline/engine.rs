//! The engine: runs a pipeline table, carries out each step's plan through the pass's cluster
//! handle, merges its delta, and instruments every step (`common-types.md` §3.2, §3.4).

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::pass::{ConditionType, Pass, PlanOf, Reconciled};
use super::{Flow, StepError};
use crate::metrics::Metrics;

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
}

/// A pipeline stage: one sequential step, or a group whose members all run.
pub enum Stage<K: Reconciled> {
    /// Ends the pass at its first requeue or error.
    Sequential(Step<K>),
    /// Runs every member concurrently; cancels the others at the first error.
    Parallel(&'static [Step<K>]),
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

/// A failed step, named: the one error a pass reports and the error policy logs.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct PipelineError {
    /// The step's `sub_reconciler` name.
    pub step: &'static str,
    /// What went wrong.
    #[source]
    pub source: StepError,
}

/// Runs pipeline tables and instruments every step.
#[derive(Clone)]
pub struct Engine {
    metrics: Metrics,
}

impl Engine {
    /// An engine recording into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        Self { metrics }
    }

    /// Runs `table` on `pass`: the first requeue or error of a sequential step ends the pass.
    pub async fn run<K: Reconciled>(
        &self,
        table: &'static [Stage<K>],
        pass: &mut Pass<K>,
    ) -> Result<Flow, PipelineError> {
        for stage in table {
            let flow = match stage {
                Stage::Sequential(step) => {
                    let mut plan = self.execute(step, pass).await?;
                    let error = plan.error.take();
                    let flow = plan.flow;
                    pass.merge(plan);
                    if let Some(source) = error {
                        return Err(PipelineError {
                            step: step.name,
                            source,
                        });
                    }
                    flow
                }
                Stage::Parallel(members) => self.parallel(members, pass).await?,
            };
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    }

    /// Observes, plans and carries out one step, timed and counted.
    async fn execute<K: Reconciled>(
        &self,
        step: &Step<K>,
        pass: &Pass<K>,
    ) -> Result<PlanOf<K>, PipelineError> {
        let started = Instant::now();
        let result = async {
            let plan = (step.run)(pass).await?;
            carry_out(pass, &plan).await?;
            Ok::<_, StepError>(plan)
        }
        .await;
        self.metrics
            .reconcile_duration
            .with_label_values(&[step.name])
            .observe(started.elapsed().as_secs_f64());
        let failed = match &result {
            Ok(plan) => plan.error.is_some(),
            Err(_) => true,
        };
        if failed {
            self.metrics
                .reconcile_errors
                .with_label_values(&[step.name, step.condition.as_str()])
                .inc();
        }
        result.map_err(|source| PipelineError {
            step: step.name,
            source,
        })
    }

    /// Runs every member against the same pass (plans read, never write it, so each member
    /// sees the state before the group); at the first error the peers still running are
    /// cancelled. Then merges the whole delta of every member that finished, in table order,
    /// and returns the first error or the shortest requeue.
    async fn parallel<K: Reconciled>(
        &self,
        members: &'static [Step<K>],
        pass: &mut Pass<K>,
    ) -> Result<Flow, PipelineError> {
        let mut plans: Vec<Option<PlanOf<K>>> = members.iter().map(|_| None).collect();
        let mut first_error = None;
        {
            let shared: &Pass<K> = pass;
            let mut running: FuturesUnordered<_> = members
                .iter()
                .enumerate()
                .map(|(i, step)| async move { (i, self.execute(step, shared).await) })
                .collect();
            while let Some((i, result)) = running.next().await {
                match result {
                    Ok(mut plan) => {
                        if let Some(source) = plan.error.take() {
                            first_error = Some(PipelineError {
                                step: members[i].name,
                                source,
                            });
                        }
                        plans[i] = Some(plan);
                    }
                    Err(e) => first_error = Some(e),
                }
                if first_error.is_some() {
                    break; // dropping `running` cancels the peers
                }
            }
        }
        let mut flow = Flow::Continue;
        for plan in plans.into_iter().flatten() {
            flow = flow.min(plan.flow);
            pass.merge(plan);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(flow),
        }
    }
}

/// Applies the plan's children, then its removals and prunes, through the pass's handle.
async fn carry_out<K: Reconciled>(pass: &Pass<K>, plan: &PlanOf<K>) -> Result<(), StepError> {
    let cluster = &pass.cluster;
    for child in &plan.children {
        cluster.apply(&pass.owner, child).await?;
    }
    for removal in &plan.removals {
        cluster
            .delete(&removal.kind, &pass.owner.namespace, &removal.name)
            .await?;
    }
    for prune in &plan.prunes {
        cluster
            .prune(&pass.owner, &prune.kind, &prune.selector, &prune.keep)
            .await?;
    }
    Ok(())
}
