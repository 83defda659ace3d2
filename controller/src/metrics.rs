//! The controller's Prometheus metrics, names and labels exactly as the spec gives them
//! (`common-types.md` §3.4). Labels never carry object names of unbounded cardinality.

use prometheus::process_collector::ProcessCollector;
use prometheus::{
    Gauge, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use nova_api::events::EventReason;
use nova_api::v1alpha1::novacompute::{NodePhase, NovaComputeNodeStatus};

use crate::progress::Progress;

/// Which per-CR collector pair a terminal Job is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobFamily {
    /// The db-sync Job and the expand, migrate and contract Jobs.
    DbSync,
    /// The archive CronJob's Jobs.
    DbArchive,
}

impl JobFamily {
    /// The Warning event's reason when a terminal Job's count is deferred.
    pub fn deferred_reason(self) -> EventReason {
        match self {
            JobFamily::DbSync => EventReason::DBSyncMetricEmissionDeferred,
            JobFamily::DbArchive => EventReason::DBArchiveMetricEmissionDeferred,
        }
    }
}

/// Every metric the controller exports, registered once at startup.
#[derive(Clone)]
pub struct Metrics {
    /// The registry `/metrics` serves.
    pub registry: Registry,
    /// `nova_operator_reconcile_duration_seconds{sub_reconciler}`.
    pub reconcile_duration: HistogramVec,
    /// `nova_operator_reconcile_errors_total{sub_reconciler,condition_type}`.
    pub reconcile_errors: IntCounterVec,
    /// `nova_operator_effects_total{sub_reconciler,effect,result}`: the writes a step's plan
    /// handed the engine beyond its children (OpenStack actions, patches of other operators'
    /// objects), by kind and result.
    pub effects: IntCounterVec,
    /// `nova_operator_effect_duration_seconds{effect}`.
    pub effect_duration: HistogramVec,
    /// `nova_operator_openstack_requests_total{service,method,code}` and
    /// `nova_operator_openstack_request_duration_seconds{service,method,code}`.
    pub openstack_requests: OpenStackRequests,
    /// `nova_operator_leader`: 1 while this replica holds the lease.
    pub leader: IntGauge,
    /// `nova_operator_db_sync_total` / `_duration_seconds`: the schema migrations and the
    /// three upgrade phases.
    pub db_sync: JobMetrics,
    /// `nova_operator_db_archive_total` / `_duration_seconds`: the recurring archive.
    pub db_archive: JobMetrics,
    /// `nova_operator_nova_ready{nova,namespace}`: 1 while the Nova's Ready condition is True,
    /// as its last pass computed it (what "a Nova not Ready for 15 minutes" alerts on).
    pub nova_ready: IntGaugeVec,
    /// `nova_operator_pool_nodes{namespace,novacompute,phase}`: the nodes of a pool's ledger in
    /// each phase, as its last pass computed it; every phase is exported (0 when none is in
    /// it) so a sum over phases is the ledger's size.
    pub pool_nodes: IntGaugeVec,
    /// `nova_operator_crd_schema_current{crd}`: 1 when the served CRD carries this release's
    /// schema digest, 0 when it lags behind (`crd_currency`); unset when it cannot be read.
    pub crd_schema_current: IntGaugeVec,
    /// The passes in flight, read at every scrape into the three gauges below.
    pub progress: Progress,
    /// `nova_operator_passes_in_flight`.
    passes_in_flight: IntGauge,
    /// `nova_operator_oldest_pass_in_flight_seconds`: 0 when none is in flight.
    oldest_pass: Gauge,
    /// `nova_operator_last_pass_finished_timestamp_seconds`: 0 before the first.
    last_pass_finished: Gauge,
    /// `nova_operator_pass_deadline_exceeded_total{kind}`: passes cut at their deadline.
    pub pass_deadline_exceeded: IntCounterVec,
}

/// The per-CR collector pair of one kind of Job: a counter of terminal results and a histogram
/// of run durations, labelled by the owning Nova and its namespace.
#[derive(Clone)]
pub struct JobMetrics {
    /// `<prefix>_total{nova,namespace,result}`, result `succeeded` or `failed`.
    pub total: IntCounterVec,
    /// `<prefix>_duration_seconds{nova,namespace}`.
    pub duration: HistogramVec,
}

/// Every Keystone, compute and Placement request a pool's client sent, by service, HTTP method
/// and the status it got (`none`: no answer): the count's rate at steady state is the load the
/// pools put on the cloud, the durations say which service slows a pass down.
#[derive(Clone)]
pub struct OpenStackRequests {
    /// `nova_operator_openstack_requests_total{service,method,code}`.
    pub total: IntCounterVec,
    /// `nova_operator_openstack_request_duration_seconds{service,method,code}`.
    pub duration: HistogramVec,
}

/// The labels of an OpenStack request's series.
const REQUEST_LABELS: [&str; 3] = ["service", "method", "code"];

/// From a fast cached answer (5 ms) to the transport's 10 s timeout, which a request without
/// an answer is observed at.
const REQUEST_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

impl OpenStackRequests {
    fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let total = IntCounterVec::new(
            Opts::new(
                "nova_operator_openstack_requests_total",
                "Requests the compute pools sent to Keystone, the compute API and Placement, by service, method and HTTP status (none: no answer).",
            ),
            &REQUEST_LABELS,
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "nova_operator_openstack_request_duration_seconds",
                "Duration of one request the compute pools sent to Keystone, the compute API or Placement, by service, method and HTTP status (none: no answer).",
            )
            .buckets(REQUEST_BUCKETS.to_vec()),
            &REQUEST_LABELS,
        )?;
        registry.register(Box::new(total.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(Self { total, duration })
    }

    /// Records one request to `service` with `method` that ended with `status` (None: no
    /// answer) after `seconds`.
    pub fn observe(&self, service: &str, method: &str, status: Option<u16>, seconds: f64) {
        let code = status.map_or_else(|| "none".to_owned(), |s| s.to_string());
        let labels = [service, method, code.as_str()];
        self.total.with_label_values(&labels).inc();
        self.duration.with_label_values(&labels).observe(seconds);
    }
}

/// The terminal results a Job counter carries.
const RESULTS: [&str; 2] = ["succeeded", "failed"];

impl JobMetrics {
    fn new(registry: &Registry, prefix: &str, what: &str) -> Result<Self, prometheus::Error> {
        let total = IntCounterVec::new(
            Opts::new(
                format!("{prefix}_total"),
                format!("Terminal {what} Jobs of a Nova, by result."),
            ),
            &["nova", "namespace", "result"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                format!("{prefix}_duration_seconds"),
                format!(
                    "Duration of a terminal {what} Job of a Nova (its terminal condition's transition time minus its creation time)."
                ),
            )
            .buckets(vec![1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0]),
            &["nova", "namespace"],
        )?;
        registry.register(Box::new(total.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(Self { total, duration })
    }

    /// Records one terminal Job of the Nova `namespace/nova`.
    pub fn record(&self, namespace: &str, nova: &str, succeeded: bool, seconds: f64) {
        let result = RESULTS[usize::from(!succeeded)];
        self.total
            .with_label_values(&[nova, namespace, result])
            .inc();
        self.duration
            .with_label_values(&[nova, namespace])
            .observe(seconds.max(0.0));
    }

    /// Drops every series of the Nova `namespace/nova` (it was deleted).
    pub fn forget(&self, namespace: &str, nova: &str) {
        for result in RESULTS {
            let _ = self.total.remove_label_values(&[nova, namespace, result]);
        }
        let _ = self.duration.remove_label_values(&[nova, namespace]);
    }
}

impl Metrics {
    /// Creates and registers the metrics; a duplicate registration is a startup failure.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        // process_* (CPU, resident memory, open files, start time) and the build's version.
        registry.register(Box::new(ProcessCollector::for_self()))?;
        let build_info = IntGauge::with_opts(
            Opts::new(
                "nova_operator_build_info",
                "1, labelled with the build's version.",
            )
            .const_label("version", env!("CARGO_PKG_VERSION")),
        )?;
        build_info.set(1);
        registry.register(Box::new(build_info))?;
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
        let effects = IntCounterVec::new(
            Opts::new(
                "nova_operator_effects_total",
                "Effects a sub-reconciler's plan handed the engine (OpenStack actions, patches of other operators' objects, children of another CR), by kind and result.",
            ),
            &["sub_reconciler", "effect", "result"],
        )?;
        let effect_duration = HistogramVec::new(
            HistogramOpts::new(
                "nova_operator_effect_duration_seconds",
                "Duration of one effect a sub-reconciler's plan handed the engine.",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            &["effect"],
        )?;
        let leader = IntGauge::new(
            "nova_operator_leader",
            "1 while this replica holds the leader-election lease and reconciles, 0 otherwise.",
        )?;
        registry.register(Box::new(reconcile_duration.clone()))?;
        registry.register(Box::new(reconcile_errors.clone()))?;
        registry.register(Box::new(effects.clone()))?;
        registry.register(Box::new(effect_duration.clone()))?;
        let openstack_requests = OpenStackRequests::new(&registry)?;
        registry.register(Box::new(leader.clone()))?;
        let db_sync = JobMetrics::new(
            &registry,
            "nova_operator_db_sync",
            "db-sync or upgrade-phase",
        )?;
        let db_archive = JobMetrics::new(&registry, "nova_operator_db_archive", "db-archive")?;
        let nova_ready = IntGaugeVec::new(
            Opts::new(
                "nova_operator_nova_ready",
                "1 while the Nova's Ready condition is True, 0 otherwise, as its last reconcile computed it.",
            ),
            &["nova", "namespace"],
        )?;
        registry.register(Box::new(nova_ready.clone()))?;
        let pool_nodes = IntGaugeVec::new(
            Opts::new(
                "nova_operator_pool_nodes",
                "Nodes of a NovaCompute's ledger in each phase, as its last reconcile computed it.",
            ),
            &["namespace", "novacompute", "phase"],
        )?;
        registry.register(Box::new(pool_nodes.clone()))?;
        let crd_schema_current = IntGaugeVec::new(
            Opts::new(
                "nova_operator_crd_schema_current",
                "1 when the served CRD carries the schema digest of this controller's release, 0 when it lags behind (fields this release added are dropped).",
            ),
            &["crd"],
        )?;
        registry.register(Box::new(crd_schema_current.clone()))?;
        let passes_in_flight = IntGauge::new(
            "nova_operator_passes_in_flight",
            "Reconcile passes running now, of both kinds.",
        )?;
        let oldest_pass = Gauge::new(
            "nova_operator_oldest_pass_in_flight_seconds",
            "How long the oldest reconcile pass in flight has run (0 when none is): a pass older than its deadline means a stalled loop.",
        )?;
        let last_pass_finished = Gauge::new(
            "nova_operator_last_pass_finished_timestamp_seconds",
            "When the last reconcile pass finished, in Unix seconds (0 before the first).",
        )?;
        let pass_deadline_exceeded = IntCounterVec::new(
            Opts::new(
                "nova_operator_pass_deadline_exceeded_total",
                "Reconcile passes stopped at their deadline, by kind.",
            ),
            &["kind"],
        )?;
        registry.register(Box::new(passes_in_flight.clone()))?;
        registry.register(Box::new(oldest_pass.clone()))?;
        registry.register(Box::new(last_pass_finished.clone()))?;
        registry.register(Box::new(pass_deadline_exceeded.clone()))?;
        Ok(Self {
            registry,
            reconcile_duration,
            reconcile_errors,
            effects,
            effect_duration,
            openstack_requests,
            leader,
            db_sync,
            db_archive,
            nova_ready,
            pool_nodes,
            crd_schema_current,
            progress: Progress::default(),
            passes_in_flight,
            oldest_pass,
            last_pass_finished,
            pass_deadline_exceeded,
        })
    }

    /// The collector pair of a Job family.
    pub fn jobs(&self, family: JobFamily) -> &JobMetrics {
        match family {
            JobFamily::DbSync => &self.db_sync,
            JobFamily::DbArchive => &self.db_archive,
        }
    }

    /// Drops every per-CR series of a deleted Nova.
    pub fn forget_nova(&self, namespace: &str, nova: &str) {
        self.db_sync.forget(namespace, nova);
        self.db_archive.forget(namespace, nova);
        let _ = self.nova_ready.remove_label_values(&[nova, namespace]);
    }

    /// Exports how many of the NovaCompute `namespace/name`'s `nodes` are in each phase.
    pub fn report_pool(&self, namespace: &str, name: &str, nodes: &[NovaComputeNodeStatus]) {
        for phase in NodePhase::ALL {
            let count = nodes.iter().filter(|n| n.phase == phase).count();
            self.pool_nodes
                .with_label_values(&[namespace, name, phase.as_str()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }

    /// Drops every per-CR series of a deleted NovaCompute.
    pub fn forget_pool(&self, namespace: &str, name: &str) {
        for phase in NodePhase::ALL {
            let _ = self
                .pool_nodes
                .remove_label_values(&[namespace, name, phase.as_str()]);
        }
    }

    /// The text exposition of every registered metric.
    pub fn render(&self) -> String {
        let in_flight = i64::try_from(self.progress.in_flight()).unwrap_or(i64::MAX);
        self.passes_in_flight.set(in_flight);
        let oldest = self.progress.oldest().unwrap_or_default();
        self.oldest_pass.set(oldest.as_secs_f64());
        let finished = self
            .progress
            .last_finished()
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok());
        self.last_pass_finished
            .set(finished.unwrap_or_default().as_secs_f64());
        let families = self.registry.gather();
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|e| format!("# encoding metrics failed: {e}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(metrics: &Metrics, name: &str) -> Vec<String> {
        metrics
            .render()
            .lines()
            .filter(|l| l.starts_with(name))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_process_and_the_build_are_exported() {
        let metrics = Metrics::new().expect("registers once");
        let version = format!(
            r#"nova_operator_build_info{{version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(series(&metrics, "nova_operator_build_info"), [version]);
        assert_eq!(series(&metrics, "process_resident_memory_bytes").len(), 1);
        assert_eq!(series(&metrics, "process_cpu_seconds_total").len(), 1);
    }

    #[test]
    fn a_terminal_job_counts_its_result_and_duration_until_its_nova_is_forgotten() {
        let metrics = Metrics::new().expect("registers once");
        metrics.db_sync.record("openstack", "nova", true, 42.0);
        metrics.db_sync.record("openstack", "nova", false, -3.0);
        metrics.db_archive.record("openstack", "nova", true, 7.0);
        metrics.db_sync.record("other", "nova", true, 1.0);
        metrics
            .nova_ready
            .with_label_values(&["nova", "openstack"])
            .set(1);
        let total = series(&metrics, "nova_operator_db_sync_total");
        assert!(total.contains(&r#"nova_operator_db_sync_total{namespace="openstack",nova="nova",result="succeeded"} 1"#.to_owned()), "{total:?}");
        assert!(total.contains(&r#"nova_operator_db_sync_total{namespace="openstack",nova="nova",result="failed"} 1"#.to_owned()), "{total:?}");
        let sum = series(&metrics, "nova_operator_db_sync_duration_seconds_sum");
        assert!(sum.contains(&r#"nova_operator_db_sync_duration_seconds_sum{namespace="openstack",nova="nova"} 42"#.to_owned()), "a negative duration is clamped at 0: {sum:?}");
        assert!(metrics.render().contains(r#"nova_operator_db_archive_duration_seconds_bucket{namespace="openstack",nova="nova",le="10"} 1"#));

        assert!(
            metrics
                .render()
                .contains(r#"nova_operator_nova_ready{namespace="openstack",nova="nova"} 1"#)
        );
        metrics.forget_nova("openstack", "nova");
        let left = metrics.render();
        assert!(!left.contains(r#"namespace="openstack""#), "{left}");
        assert!(
            left.contains(
                r#"nova_operator_db_sync_total{namespace="other",nova="nova",result="succeeded"} 1"#
            ),
            "another namespace's Nova keeps its series"
        );
    }

    #[test]
    fn a_pools_ledger_is_exported_by_phase_until_the_pool_is_forgotten() {
        let metrics = Metrics::new().expect("registers once");
        let node = |name: &str, phase: NodePhase| -> NovaComputeNodeStatus {
            serde_json::from_value(serde_json::json!({"name": name, "phase": phase.as_str()}))
                .expect("a node entry")
        };
        let ledger = [
            node("a", NodePhase::Active),
            node("b", NodePhase::Active),
            node("c", NodePhase::Draining),
        ];
        metrics.report_pool("openstack", "pool", &ledger);
        metrics.report_pool("other", "pool", &ledger[..1]);
        let gauge = |ns: &str, phase: &str| {
            metrics
                .pool_nodes
                .with_label_values(&[ns, "pool", phase])
                .get()
        };
        let counts: Vec<i64> = NodePhase::ALL
            .iter()
            .map(|p| gauge("openstack", p.as_str()))
            .collect();
        assert_eq!(counts, [0, 2, 1, 0, 0], "every phase, absent ones at 0");
        metrics.report_pool("openstack", "pool", &ledger[2..]);
        assert_eq!(
            gauge("openstack", "Active"),
            0,
            "a node that left its phase"
        );
        metrics.forget_pool("openstack", "pool");
        let left = series(&metrics, "nova_operator_pool_nodes");
        assert_eq!(left.len(), NodePhase::ALL.len(), "{left:?}");
        assert!(
            left.iter().all(|l| l.contains(r#"namespace="other""#)),
            "{left:?}"
        );
    }
}
