//! The controller's Prometheus metrics, names and labels exactly as the spec gives them
//! (`common-types.md` §3.4). Labels never carry object names of unbounded cardinality.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

/// Every metric the controller exports, registered once at startup.
#[derive(Clone)]
pub struct Metrics {
    /// The registry `/metrics` serves.
    pub registry: Registry,
    /// `nova_operator_reconcile_duration_seconds{sub_reconciler}`.
    pub reconcile_duration: HistogramVec,
    /// `nova_operator_reconcile_errors_total{sub_reconciler,condition_type}`.
    pub reconcile_errors: IntCounterVec,
    /// `nova_operator_leader`: 1 while this replica holds the lease.
    pub leader: IntGauge,
}

impl Metrics {
    /// Creates and registers the metrics; a duplicate registration is a startup failure.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new(
                "nova_operator_reconcile_duration_seconds",
                "Duration of one sub-reconciler of a pipeline pass.",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            &["sub_reconciler"],
        )?;
        let reconcile_errors = IntCounterVec::new(
            Opts::new(
                "nova_operator_reconcile_errors_total",
                "Errors returned by a sub-reconciler, by the condition it owns.",
            ),
            &["sub_reconciler", "condition_type"],
        )?;
        let leader = IntGauge::new(
            "nova_operator_leader",
            "1 while this replica holds the leader-election lease and reconciles, 0 otherwise.",
        )?;
        registry.register(Box::new(reconcile_duration.clone()))?;
        registry.register(Box::new(reconcile_errors.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        Ok(Self {
            registry,
            reconcile_duration,
            reconcile_errors,
            leader,
        })
    }

    /// The text exposition of every registered metric.
    pub fn render(&self) -> String {
        let families = self.registry.gather();
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|e| format!("# encoding metrics failed: {e}\n"))
    }
}
