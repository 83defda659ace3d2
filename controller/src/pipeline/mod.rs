//! The table-driven pipeline engine (`DESIGN.md` principle 2, `common-types.md` §3.2–3.5).
//!
//! A pipeline is an ordered table of stages. A sequential step ends the pass at the first
//! requeue or error; a parallel group runs every member on its own copy of the pass and merges
//! back the one condition each member owns. The engine times every step and counts its errors;
//! steps never write status themselves.

pub mod conditions;
pub mod status;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::metrics::Metrics;

/// After a finalizer add and after an upgrade phase transition.
pub const REQUEUE_NEXT_PASS: Duration = Duration::from_secs(1);
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
    fn min(self, other: Flow) -> Flow {
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
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What the step was doing.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The step refuses to go on, for the stated reason.
    #[error("{0}")]
    Refused(String),
}

impl StepError {
    /// Wraps a client error with the action that failed.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        StepError::Kube {
            action: action.into(),
            source,
        }
    }
}

/// Deletes `name` in the background; an object already gone is not an error. `what` names the
/// object in the error (`Secret ns/name`).
pub async fn delete_if_present<K>(
    api: &kube::Api<K>,
    name: &str,
    what: &str,
) -> Result<(), StepError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api
        .delete(name, &kube::api::DeleteParams::background())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(StepError::kube(format!("deleting {what}"), e)),
    }
}

/// What one step returns.
pub type StepResult = Result<Flow, StepError>;
/// The future a step's function returns, borrowing the pass for its duration.
pub type StepFuture<'a> = Pin<Box<dyn Future<Output = StepResult> + Send + 'a>>;

/// The per-pass state a pipeline threads through its steps.
pub trait Pass: Clone + Send + Sync {
    /// The conditions of the working status.
    fn conditions(&self) -> &[Condition];
    /// The conditions of the working status, for merging.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
}

/// One row of a pipeline table.
pub struct Step<P> {
    /// The `sub_reconciler` metric label.
    pub name: &'static str,
    /// The condition type the step owns (the `condition_type` error label).
    pub condition: &'static str,
    /// The step itself.
    pub run: for<'a> fn(&'a mut P) -> StepFuture<'a>,
}

/// A pipeline stage: one sequential step, or a group whose members all run.
pub enum Stage<P: 'static> {
    /// Ends the pass at its first requeue or error.
    Sequential(Step<P>),
    /// Runs every member concurrently, each on its own copy of the pass.
    Parallel(&'static [Step<P>]),
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
    pub async fn run<P: Pass>(&self, table: &'static [Stage<P>], pass: &mut P) -> StepResult {
        for stage in table {
            let flow = match stage {
                Stage::Sequential(step) => self.instrumented(step, pass).await?,
                Stage::Parallel(members) => self.parallel(members, pass).await?,
            };
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    }

    async fn instrumented<P: Pass>(&self, step: &Step<P>, pass: &mut P) -> StepResult {
        let started = Instant::now();
        let result = (step.run)(pass).await;
        self.metrics
            .reconcile_duration
            .with_label_values(&[step.name])
            .observe(started.elapsed().as_secs_f64());
        if let Err(err) = &result {
            self.metrics
                .reconcile_errors
                .with_label_values(&[step.name, step.condition])
                .inc();
            tracing::warn!(sub_reconciler = step.name, error = %err, "step failed");
        }
        result
    }

    /// Runs every member on its own copy; merges each member's condition back even when
    /// another failed, then returns the first error or the shortest requeue.
    async fn parallel<P: Pass>(&self, members: &'static [Step<P>], pass: &mut P) -> StepResult {
        let mut copies: Vec<P> = members.iter().map(|_| pass.clone()).collect();
        let results = futures::future::join_all(
            members
                .iter()
                .zip(copies.iter_mut())
                .map(|(step, copy)| self.instrumented(step, copy)),
        )
        .await;
        for (step, copy) in members.iter().zip(&copies) {
            conditions::merge_one(pass.conditions_mut(), copy.conditions(), step.condition);
        }
        results
            .into_iter()
            .try_fold(Flow::Continue, |acc, r| Ok(acc.min(r?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nova_api::conditions::Reason;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct TestPass {
        conditions: Vec<Condition>,
        ran: Arc<Mutex<Vec<&'static str>>>,
    }

    impl Pass for TestPass {
        fn conditions(&self) -> &[Condition] {
            &self.conditions
        }
        fn conditions_mut(&mut self) -> &mut Vec<Condition> {
            &mut self.conditions
        }
    }

    fn record(pass: &mut TestPass, name: &'static str, ok: bool) {
        pass.ran.lock().expect("lock").push(name);
        conditions::set(
            &mut pass.conditions,
            name,
            ok,
            Reason::SecretsAvailable,
            "",
            Some(1),
        );
    }

    fn ok_a(p: &mut TestPass) -> StepFuture<'_> {
        Box::pin(async move {
            record(p, "A", true);
            Ok(Flow::Continue)
        })
    }
    fn wait_b(p: &mut TestPass) -> StepFuture<'_> {
        Box::pin(async move {
            record(p, "B", false);
            Ok(Flow::RequeueAfter(REQUEUE_SECRET_POLLING))
        })
    }
    fn fail_c(p: &mut TestPass) -> StepFuture<'_> {
        Box::pin(async move {
            record(p, "C", false);
            Err(StepError::Refused("broken".into()))
        })
    }
    fn wait_d(p: &mut TestPass) -> StepFuture<'_> {
        Box::pin(async move {
            record(p, "D", true);
            Ok(Flow::RequeueAfter(REQUEUE_DEPLOYMENT_POLLING))
        })
    }

    const fn step(
        name: &'static str,
        run: for<'a> fn(&'a mut TestPass) -> StepFuture<'a>,
    ) -> Step<TestPass> {
        Step {
            name,
            condition: name,
            run,
        }
    }

    static SHORT_CIRCUIT_ON_REQUEUE: [Stage<TestPass>; 3] = [
        Stage::Sequential(step("A", ok_a)),
        Stage::Sequential(step("B", wait_b)),
        Stage::Sequential(step("C", fail_c)),
    ];
    static SHORT_CIRCUIT_ON_ERROR: [Stage<TestPass>; 2] = [
        Stage::Sequential(step("C", fail_c)),
        Stage::Sequential(step("A", ok_a)),
    ];
    static GROUP: [Step<TestPass>; 3] = [step("A", ok_a), step("B", wait_b), step("D", wait_d)];
    static PARALLEL: [Stage<TestPass>; 1] = [Stage::Parallel(&GROUP)];
    static GROUP_WITH_ERROR: [Step<TestPass>; 2] = [step("C", fail_c), step("A", ok_a)];
    static PARALLEL_WITH_ERROR: [Stage<TestPass>; 1] = [Stage::Parallel(&GROUP_WITH_ERROR)];

    fn engine() -> (Engine, Metrics) {
        let metrics = Metrics::new().expect("metrics");
        (Engine::new(metrics.clone()), metrics)
    }

    #[tokio::test]
    async fn a_requeue_ends_the_lane() {
        let (engine, metrics) = engine();
        let mut pass = TestPass::default();
        let flow = engine
            .run(&SHORT_CIRCUIT_ON_REQUEUE, &mut pass)
            .await
            .expect("no error");
        assert_eq!(flow, Flow::RequeueAfter(REQUEUE_SECRET_POLLING));
        assert_eq!(*pass.ran.lock().expect("lock"), ["A", "B"]);
        let count = metrics
            .reconcile_duration
            .with_label_values(&["B"])
            .get_sample_count();
        assert_eq!(count, 1);
        assert_eq!(
            metrics
                .reconcile_duration
                .with_label_values(&["C"])
                .get_sample_count(),
            0
        );
    }

    #[tokio::test]
    async fn an_error_ends_the_lane_and_is_counted_by_condition() {
        let (engine, metrics) = engine();
        let mut pass = TestPass::default();
        let err = engine
            .run(&SHORT_CIRCUIT_ON_ERROR, &mut pass)
            .await
            .expect_err("error");
        assert_eq!(err.to_string(), "broken");
        assert_eq!(*pass.ran.lock().expect("lock"), ["C"]);
        assert_eq!(
            metrics
                .reconcile_errors
                .with_label_values(&["C", "C"])
                .get(),
            1
        );
    }

    #[tokio::test]
    async fn the_parallel_group_runs_every_member_and_merges_each_condition() {
        let (engine, _) = engine();
        let mut pass = TestPass::default();
        let flow = engine.run(&PARALLEL, &mut pass).await.expect("no error");
        assert_eq!(
            flow,
            Flow::RequeueAfter(REQUEUE_DEPLOYMENT_POLLING),
            "the shortest requeue"
        );
        let mut types: Vec<_> = pass.conditions.iter().map(|c| c.type_.clone()).collect();
        types.sort();
        assert_eq!(types, ["A", "B", "D"]);
    }

    #[tokio::test]
    async fn a_failing_member_still_lets_the_others_report() {
        let (engine, _) = engine();
        let mut pass = TestPass::default();
        let err = engine
            .run(&PARALLEL_WITH_ERROR, &mut pass)
            .await
            .expect_err("error");
        assert_eq!(err.to_string(), "broken");
        assert!(conditions::is_true(&pass.conditions, "A"));
        assert!(
            pass.conditions
                .iter()
                .any(|c| c.type_ == "C" && c.status == "False")
        );
    }
}
