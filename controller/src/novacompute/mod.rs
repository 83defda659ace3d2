//! The NovaCompute controller (`novacompute.md`, `nova-reconciler.txt` "NovaCompute"): its
//! pipeline tables, its steps (one file each: observe through the cluster handle, then a pure
//! plan), its teardown, its watches and the pool index they share.

pub mod compute_api;
pub mod controller;
pub mod discover_hosts;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod hypervisors;
#[cfg(test)]
mod plan_fixtures;
pub mod pools;
pub mod resolved;
pub mod steps;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use nova_api::conditions::{NovaComputeConditionType as C, Reason};
use nova_api::v1alpha1::{NodePhase, NovaCompute, NovaComputeNodeStatus, NovaComputeStatus};

use crate::pipeline::kinds;
use crate::pipeline::uses::Role;
use crate::pipeline::{Pass, PlanOf, Reconciled, Stage, StepFuture, seq};
use steps::{
    aggregates, compute_vpa, daemonset, nodes, nova_ref, pool_config, services, teardown, traits,
};

/// One pass over one NovaCompute.
pub type NovaComputePass = Pass<NovaCompute>;
/// A NovaCompute step's plan.
pub type NovaComputePlan = PlanOf<NovaCompute>;

/// The finalizer that holds a pool until its nodes are drained and released.
pub const FINALIZER: &str = "nova.openstack.c5c3.io/compute-drain";

/// A `Releasing` node, and a node dropped in this pass.
pub const REQUEUE_COMPUTE_RELEASE_POLLING: Duration = Duration::from_secs(10);
/// A registered node whose host is not mapped yet.
pub const REQUEUE_HOST_DISCOVERY_POLLING: Duration = Duration::from_secs(10);
/// A `Draining` or `Pending` node; the retry after a failed Keystone, Nova or Placement call;
/// the Traits polls; an unfinished teardown pass.
pub const REQUEUE_COMPUTE_DRAIN_POLLING: Duration = Duration::from_secs(30);
/// A pool whose nodes are all settled.
pub const REQUEUE_COMPUTE_SERVICE_POLLING: Duration = Duration::from_secs(60);

const NOVA_REF: Stage<NovaCompute> =
    seq("NovaRef", C::NovaReady, nova_ref::run).using(nova_ref::KINDS);
const NODES: Stage<NovaCompute> = seq("Nodes", C::NodesReady, nodes::run).using(nodes::KINDS);
const POOL_CONFIG: Stage<NovaCompute> =
    seq("PoolConfig", C::ConfigReady, pool_config::run).using(pool_config::KINDS);
const DAEMON_SET: Stage<NovaCompute> =
    seq("DaemonSet", C::DaemonSetReady, daemonset::run).using(daemonset::KINDS);
const COMPUTE_VPA: Stage<NovaCompute> =
    seq("ComputeVPA", C::VPAReady, compute_vpa::run).using(compute_vpa::KINDS);
const AGGREGATES: Stage<NovaCompute> = seq("Aggregates", C::AggregatesReady, aggregates::run);
const SERVICES: Stage<NovaCompute> =
    seq("Services", C::ServicesReady, services::run).using(services::KINDS);
const TRAITS: Stage<NovaCompute> = seq("Traits", C::TraitsReady, traits::run);
const TEARDOWN: Stage<NovaCompute> = seq("Teardown", C::NovaReady, teardown::run);

/// The rows of a live pool, in call order, then `$tail`. Each row names a file in `steps/`. The
/// OpenStack rows run through `nova_side`; Services hands its poll to Traits.
macro_rules! live_rows {
    ($($tail:expr),*) => {
        [
            NOVA_REF,
            NODES,
            POOL_CONFIG,
            DAEMON_SET,
            COMPUTE_VPA,
            AGGREGATES,
            SERVICES,
            TRAITS,
            $($tail),*
        ]
    };
}

/// The pipeline of a live pool.
pub static PIPELINE: &[Stage<NovaCompute>] = &live_rows!();

/// A deleting pool that still holds a node: the whole pipeline with every held node leaving
/// (the Draining pods stay through their held terms), then the teardown, which keeps the
/// finalizers on such a pass.
pub static DRAIN: &[Stage<NovaCompute>] = &live_rows!(TEARDOWN);

/// A deleting pool whose ledger is empty: only the Nova side that cleans up behind the last
/// node, so a pass from a stale copy cannot recreate swept children. The teardown releases the
/// finalizers only when every step before it went on: a failed call requeues and so holds
/// them, and Traits ends the pass while a created trait is left.
pub static REAP: &[Stage<NovaCompute>] = &[NOVA_REF, AGGREGATES, TRAITS, TEARDOWN];

/// Every table: what the rows' declared kinds are gathered from (`pipeline::kinds`).
pub static TABLES: &[&[Stage<NovaCompute>]] = &[PIPELINE, DRAIN, REAP];

/// Whether a ledger entry is held: every phase but `Conflict`.
pub fn held(entry: &NovaComputeNodeStatus) -> bool {
    entry.phase != NodePhase::Conflict
}

/// The ledger a pass began with.
pub fn ledger(pool: &NovaCompute) -> &[NovaComputeNodeStatus] {
    pool.status.as_ref().map_or(&[], |s| s.nodes.as_slice())
}

/// A step of the Nova side: on a deleting pool whose Nova is gone it goes on and reports
/// nothing, so the teardown skips to the mirror reap and the release.
pub fn nova_side<'a>(
    pass: &'a NovaComputePass,
    run: fn(&'a NovaComputePass, &'a resolved::NovaInputs) -> StepFuture<'a, NovaCompute>,
) -> StepFuture<'a, NovaCompute> {
    match &pass.resolved.nova {
        Some(nova) => run(pass, nova),
        None => Box::pin(async { Ok(NovaComputePlan::proceed()) }),
    }
}

impl Reconciled for NovaCompute {
    type Status = NovaComputeStatus;
    type Resolved = resolved::Resolved;
    type StatusUpdate = resolved::StatusUpdate;
    type Condition = C;
    type Shared = pools::Pools;

    const FINALIZER: &'static str = FINALIZER;
    const TARGET_GATE: C = C::NovaReady;
    const PAUSED: C = C::Paused;

    fn aggregated() -> &'static [C] {
        &C::AGGREGATED
    }

    fn pipeline() -> &'static [Stage<Self>] {
        PIPELINE
    }

    fn cleanup(&self) -> &'static [Stage<Self>] {
        if ledger(self).is_empty() { REAP } else { DRAIN }
    }

    fn status(&self) -> Option<&NovaComputeStatus> {
        self.status.as_ref()
    }

    fn conditions(status: &mut NovaComputeStatus) -> &mut Vec<Condition> {
        &mut status.conditions
    }

    fn set_observed_generation(status: &mut NovaComputeStatus, generation: Option<i64>) {
        status.observed_generation = generation;
    }

    fn update(status: &mut NovaComputeStatus, update: resolved::StatusUpdate) {
        update.apply(status);
    }

    fn common_labels(&self) -> BTreeMap<String, String> {
        nova_api::labels::novacompute_common(&self.name_any())
    }

    /// A refused apply or prune fails its step with the step's error reason (`novacompute.md`
    /// §5.4, §5.9).
    fn carry_out_failure(condition: C) -> Option<Reason> {
        match condition {
            C::ConfigReady => Some(Reason::ConfigError),
            C::DaemonSetReady => Some(Reason::DaemonSetError),
            C::VPAReady => Some(Reason::VPAError),
            _ => None,
        }
    }

    fn target_cluster(&self) -> Option<&str> {
        self.spec
            .target_cluster_ref
            .as_ref()
            .map(|t| t.name.as_str())
    }

    /// The kinds the rows own: the ConfigMaps, the DaemonSet and the VPA (`novacompute.md`
    /// §4.6).
    fn remote_kinds() -> Vec<kube::core::ApiResource> {
        kinds::in_role(TABLES, Role::Owns)
    }

    fn forget_metrics(metrics: &crate::metrics::Metrics, namespace: &str, name: &str) {
        metrics.forget_pool(namespace, name);
    }

    fn report_status(
        metrics: &crate::metrics::Metrics,
        namespace: &str,
        name: &str,
        status: &NovaComputeStatus,
    ) {
        metrics.report_pool(namespace, name, &status.nodes);
    }
}
