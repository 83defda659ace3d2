//! The engine: runs a pipeline table, carries out each step's plan through the pass's cluster
//! handle, merges its delta, and instruments every step (`common-types.md` §3.2, §3.4).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::effects::{self, Effect, Effects, Outcome};
use super::pass::{ConditionType, Merge, Pass, PlanOf, Reconciled, Stage, Step};
use super::plan::Plan;
use super::{Flow, StepError};
use crate::metrics::Metrics;
use crate::openstack::Client;

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
    /// `render`'s engine: effects are recorded here, never carried out, and not settled.
    recorded: Option<Arc<Mutex<Vec<RecordedEffect>>>>,
}

/// An effect `render`'s engine recorded instead of carrying it out.
#[derive(Clone, Debug)]
pub struct RecordedEffect {
    /// The step that decided it.
    pub step: &'static str,
    /// What it would do.
    pub effect: String,
}

impl Engine {
    /// An engine recording into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        Self {
            metrics,
            recorded: None,
        }
    }

    /// An engine that records every effect a plan hands it instead of carrying it out, and
    /// goes on without settling it: what `render` shows of the OpenStack steps.
    pub fn recording(metrics: Metrics) -> Self {
        Self {
            metrics,
            recorded: Some(Arc::default()),
        }
    }

    /// The effects a recording engine was handed, in order.
    pub fn recorded(&self) -> Vec<RecordedEffect> {
        self.recorded.as_ref().map_or_else(Vec::new, |r| {
            r.lock().unwrap_or_else(PoisonError::into_inner).clone()
        })
    }

    /// The metrics it records into.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
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
            let mut plan = (step.run)(pass).await?;
            let effects = plan.effects.take();
            plan = self.carry_out_plan(step, pass, plan).await?;
            if let Some(effects) = effects.filter(|e| !self.record(step, e)) {
                let Effects {
                    client,
                    list,
                    settle,
                } = effects;
                let outcomes = self.carry_out_effects(step, &list, client.as_deref()).await;
                let settled = self.carry_out_plan(step, pass, settle(outcomes)).await?;
                plan = followed_by::<K>(plan, settled);
            }
            Ok(plan)
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

    /// Carries out a plan's children, removals and prunes. When the engine cannot, the plan's
    /// verdict no longer holds: a kind that names a reason for the step's condition reports the
    /// failure there, else the step fails.
    async fn carry_out_plan<K: Reconciled>(
        &self,
        step: &Step<K>,
        pass: &Pass<K>,
        plan: PlanOf<K>,
    ) -> Result<PlanOf<K>, StepError> {
        match (
            carry_out(pass, &plan).await,
            K::carry_out_failure(step.condition),
        ) {
            (Ok(()), _) => Ok(plan),
            (Err(error), Some(reason)) => {
                let message = error.to_string();
                Ok(Plan::fail(error).report(step.condition, false, reason, message))
            }
            (Err(error), None) => Err(error),
        }
    }

    /// Records a plan's effects on a recording engine; false on any other.
    fn record<K: Reconciled>(&self, step: &Step<K>, effects: &Effects<PlanOf<K>>) -> bool {
        let Some(recorded) = &self.recorded else {
            return false;
        };
        recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(effects.list.iter().map(|e| RecordedEffect {
                step: step.name,
                effect: e.describe(),
            }));
        true
    }

    /// Carries out a plan's effects in order, each counted by kind and result and timed
    /// (`nova_operator_effects_total`, `nova_operator_effect_duration_seconds`).
    async fn carry_out_effects<K: Reconciled>(
        &self,
        step: &Step<K>,
        list: &[Effect],
        client: Option<&Client>,
    ) -> Vec<Outcome> {
        let metrics = &self.metrics;
        effects::carry_out(list, client, |effect, outcome, took| {
            metrics
                .effects
                .with_label_values(&[step.name, effect.kind(), outcome.result()])
                .inc();
            metrics
                .effect_duration
                .with_label_values(&[effect.kind()])
                .observe(took.as_secs_f64());
        })
        .await
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

/// A plan followed by the plan its effects settled into: the lists in order, the later
/// resolved values on top, the shorter requeue, the first error.
fn followed_by<K: Reconciled>(mut first: PlanOf<K>, later: PlanOf<K>) -> PlanOf<K> {
    first.verdicts.extend(later.verdicts);
    first.children.extend(later.children);
    first.removals.extend(later.removals);
    first.prunes.extend(later.prunes);
    first.status.extend(later.status);
    first.resolved.merge(later.resolved);
    first.events.extend(later.events);
    first.records.extend(later.records);
    first.flow = first.flow.min(later.flow);
    first.error = first.error.or(later.error);
    first
}

/// Applies the plan's children, then its removals and prunes, through the pass's handle.
async fn carry_out<K: Reconciled>(pass: &Pass<K>, plan: &PlanOf<K>) -> Result<(), StepError> {
    let cluster = pass.cluster.writes();
    for child in &plan.children {
        cluster.apply(&pass.owner, child).await?;
    }
    for removal in &plan.removals {
        cluster
            .delete(
                &pass.owner,
                &removal.kind,
                &removal.name,
                removal.uid.as_deref(),
            )
            .await?;
    }
    for prune in &plan.prunes {
        cluster
            .prune(&pass.owner, &prune.kind, &prune.selector, &prune.keep)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use nova_api::conditions::{NovaConditionType as C, Reason};
    use nova_api::v1alpha1::{LocalSecretRef, Nova};

    use super::*;
    use crate::clusters::{MemoryCluster, SecretSource};
    use crate::nova::fixtures::example;
    use crate::nova::resolved::{Resolved, StatusUpdate};
    use crate::objects::Child;
    use crate::pipeline::pass::{StepFuture, member, parallel, seq};
    use crate::pipeline::{Plan, REQUEUE_DEPLOYMENT_POLLING, REQUEUE_SECRET_POLLING};

    fn marker(name: &str) -> Child {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        Child::new(&cm)
    }

    fn ready(pass: &Pass<Nova>) -> StepFuture<'_, Nova> {
        let _ = pass;
        Box::pin(async {
            Ok(Plan::proceed()
                .ready(C::SecretsReady, Reason::SecretsAvailable, "a")
                .apply(marker("ready")))
        })
    }
    fn waits(_: &Pass<Nova>) -> StepFuture<'_, Nova> {
        Box::pin(async {
            Ok(Plan::proceed()
                .report(C::SecretsReady, false, Reason::WaitingForDBCredentials, "b")
                .apply(marker("waits"))
                .requeue(REQUEUE_SECRET_POLLING))
        })
    }
    fn fails(_: &Pass<Nova>) -> StepFuture<'_, Nova> {
        Box::pin(async {
            Ok(Plan::proceed()
                .report(
                    C::ComputeConfigReady,
                    false,
                    Reason::ComputeConfigError,
                    "c",
                )
                .apply(marker("fails"))
                .failing(StepError::Refused("broken".into())))
        })
    }
    fn resolves(_: &Pass<Nova>) -> StepFuture<'_, Nova> {
        Box::pin(async {
            Ok(Plan::proceed()
                .ready(C::HPAReady, Reason::HPANotRequired, "d")
                .set(StatusUpdate::ComputeConfigSecretRef(Some(LocalSecretRef {
                    name: "x".into(),
                })))
                .resolve(Resolved {
                    broker_port: Some(5671),
                    ..Default::default()
                })
                .requeue(REQUEUE_DEPLOYMENT_POLLING))
        })
    }
    fn never(_: &Pass<Nova>) -> StepFuture<'_, Nova> {
        Box::pin(async {
            futures::future::pending::<()>().await;
            Ok(Plan::proceed().apply(marker("never")))
        })
    }

    static LANE: [Stage<Nova>; 3] = [
        seq("Ready", C::SecretsReady, ready),
        seq("Waits", C::SecretsReady, waits),
        seq("Fails", C::ComputeConfigReady, fails),
    ];
    static FAILING_LANE: [Stage<Nova>; 2] = [
        seq("Fails", C::ComputeConfigReady, fails),
        seq("Ready", C::SecretsReady, ready),
    ];
    static GROUP: [Step<Nova>; 3] = [
        member("Ready", C::SecretsReady, ready),
        member("Resolves", C::HPAReady, resolves),
        member("Waits", C::SecretsReady, waits),
    ];
    static PARALLEL: [Stage<Nova>; 1] = [parallel(&GROUP)];
    static GROUP_WITH_ERROR: [Step<Nova>; 3] = [
        member("Never", C::VPAReady, never),
        member("Fails", C::ComputeConfigReady, fails),
        member("Ready", C::SecretsReady, ready),
    ];
    static PARALLEL_WITH_ERROR: [Stage<Nova>; 1] = [parallel(&GROUP_WITH_ERROR)];

    /// Two merge patches on the pass's own cluster around an OpenStack action that fails (the
    /// plan names no client): the failure ends the batch; the settle reports the outcomes.
    fn patches(pass: &Pass<Nova>) -> StepFuture<'_, Nova> {
        let patch = |name: &str| Effect::MergePatch {
            cluster: pass.cluster.clone(),
            kind: crate::objects::kinds::hypervisor(),
            namespace: None,
            name: name.into(),
            patch: serde_json::json!({"spec": {"customTraits": ["CUSTOM_A"]}}),
        };
        let refused = Effect::OpenStack(crate::openstack::action::Action::DeleteTrait {
            name: "CUSTOM_A".into(),
        });
        let list = vec![patch("node-1"), refused, patch("node-2")];
        Box::pin(async move {
            Ok(Plan::effects(None, list, |outcomes| {
                let message = outcomes
                    .iter()
                    .map(Outcome::result)
                    .collect::<Vec<_>>()
                    .join(",");
                Plan::proceed().ready(C::SecretsReady, Reason::SecretsAvailable, message)
            }))
        })
    }
    static EFFECTS: [Stage<Nova>; 1] = [seq("Patches", C::SecretsReady, patches)];

    fn pass() -> (Pass<Nova>, Arc<MemoryCluster>) {
        let cluster = Arc::new(MemoryCluster::new(SecretSource::default()));
        (Pass::new(Arc::new(example()), cluster.clone()), cluster)
    }

    fn applied(cluster: &MemoryCluster) -> Vec<String> {
        cluster.applied().into_iter().map(|c| c.name).collect()
    }

    fn engine() -> (Engine, Metrics) {
        let metrics = Metrics::new().expect("metrics");
        (Engine::new(metrics.clone()), metrics)
    }

    #[tokio::test]
    async fn effects_are_carried_out_in_order_counted_and_settled_into_the_plan() {
        let (engine, metrics) = engine();
        let (mut pass, cluster) = pass();
        engine.run(&EFFECTS, &mut pass).await.expect("no error");
        let patched: Vec<String> = cluster.patched().into_iter().map(|(n, _)| n).collect();
        assert_eq!(patched, ["node-1"], "the batch stops at the failed action");
        assert_eq!(pass.verdicts()[0].message, "ok,failed");
        let counted = |effect: &str, result: &str| {
            metrics
                .effects
                .with_label_values(&["Patches", effect, result])
                .get()
        };
        assert_eq!(
            (
                counted("merge_patch", "ok"),
                counted("delete_trait", "failed")
            ),
            (1, 1)
        );
        assert_eq!(counted("merge_patch", "failed"), 0, "node-2 was never sent");
    }

    #[tokio::test]
    async fn a_recording_engine_records_effects_and_carries_none_out() {
        let engine = Engine::recording(Metrics::new().expect("metrics"));
        let (mut pass, cluster) = pass();
        engine.run(&EFFECTS, &mut pass).await.expect("no error");
        assert!(cluster.patched().is_empty());
        assert!(pass.verdicts().is_empty(), "nothing is settled");
        let recorded: Vec<String> = engine.recorded().into_iter().map(|r| r.effect).collect();
        assert_eq!(recorded.len(), 3);
        assert!(
            recorded[0].starts_with("patching Hypervisor node-1"),
            "{recorded:?}"
        );
    }

    #[tokio::test]
    async fn a_requeue_ends_the_lane_and_the_last_verdict_of_a_type_wins() {
        let (engine, metrics) = engine();
        let (mut pass, cluster) = pass();
        let flow = engine.run(&LANE, &mut pass).await.expect("no error");
        assert_eq!(flow, Flow::RequeueAfter(REQUEUE_SECRET_POLLING));
        assert_eq!(applied(&cluster), ["ready", "waits"]);
        assert_eq!(pass.verdicts().len(), 1, "one verdict per condition type");
        assert_eq!(pass.verdicts()[0].reason, Reason::WaitingForDBCredentials);
        let runs = |step: &str| {
            metrics
                .reconcile_duration
                .with_label_values(&[step])
                .get_sample_count()
        };
        assert_eq!((runs("Ready"), runs("Waits"), runs("Fails")), (1, 1, 0));
    }

    #[tokio::test]
    async fn a_failing_plan_is_carried_out_then_ends_the_lane_counted_by_condition() {
        let (engine, metrics) = engine();
        let (mut pass, cluster) = pass();
        let err = engine
            .run(&FAILING_LANE, &mut pass)
            .await
            .expect_err("fails");
        assert_eq!(err.to_string(), "Fails: broken");
        assert_eq!(applied(&cluster), ["fails"]);
        assert_eq!(pass.verdicts()[0].reason, Reason::ComputeConfigError);
        assert_eq!(
            metrics
                .reconcile_errors
                .with_label_values(&["Fails", "ComputeConfigReady"])
                .get(),
            1
        );
    }

    #[tokio::test]
    async fn the_parallel_group_merges_every_members_whole_delta() {
        let (engine, _) = engine();
        let (mut pass, _) = pass();
        let flow = engine.run(&PARALLEL, &mut pass).await.expect("no error");
        assert_eq!(
            flow,
            Flow::RequeueAfter(REQUEUE_DEPLOYMENT_POLLING),
            "the shortest requeue"
        );
        assert_eq!(
            pass.resolved.broker_port,
            Some(5671),
            "a member's resolved value"
        );
        assert_eq!(pass.updates.len(), 1, "a member's status field");
        let reasons: Vec<Reason> = pass.verdicts().iter().map(|v| v.reason).collect();
        assert!(reasons.contains(&Reason::HPANotRequired));
        assert!(
            reasons.contains(&Reason::WaitingForDBCredentials),
            "members merge in table order: the later SecretsReady verdict wins"
        );
    }

    #[tokio::test]
    async fn the_first_error_cancels_the_peers_and_keeps_the_finished_deltas() {
        let (engine, _) = engine();
        let (mut pass, cluster) = pass();
        let outcome = tokio::time::timeout(
            Duration::from_secs(5),
            engine.run(&PARALLEL_WITH_ERROR, &mut pass),
        )
        .await
        .expect("a pending peer is cancelled, not awaited");
        assert_eq!(outcome.expect_err("fails").to_string(), "Fails: broken");
        assert!(!applied(&cluster).contains(&"never".to_owned()));
        assert!(
            pass.verdicts()
                .iter()
                .any(|v| v.reason == Reason::ComputeConfigError),
            "the failing member's condition is merged"
        );
    }
}
