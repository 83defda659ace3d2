//! Whether each registered target cluster answers, read from the [`Fleet`] at every scrape:
//! a silent target holds no reconcile slot (its CRs report `TargetClusterUnavailable`), so
//! without these series the stall would show only on those CRs' conditions.
//!
//! - `nova_operator_target_cluster_answering{cluster}`: 1 while the cluster is engaged and its
//!   requests are answered, 0 while it is silent or has not engaged;
//! - `nova_operator_target_cluster_silent_seconds{cluster}`: how long it has been so (0 while it
//!   answers).

use std::sync::{Arc, Weak};
use std::time::SystemTime;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntGaugeVec, Opts};

use super::Fleet;

/// The collector of the two series; it holds the fleet weakly, so it never keeps a stopped
/// fleet alive, and reports nothing once the fleet is gone.
pub struct TargetClusterAvailability {
    fleet: Weak<Fleet>,
    /// The series' descriptions (each scrape fills vectors of its own, so two concurrent
    /// scrapes never see each other's half-filled state).
    descs: Series,
}

/// The two vectors.
struct Series {
    answering: IntGaugeVec,
    silent: GaugeVec,
}

impl Series {
    fn new() -> Result<Self, prometheus::Error> {
        Ok(Self {
            answering: IntGaugeVec::new(
                Opts::new(
                    "nova_operator_target_cluster_answering",
                    "1 while the registered target cluster is engaged and answers, 0 while it is silent or not engaged.",
                ),
                &["cluster"],
            )?,
            silent: GaugeVec::new(
                Opts::new(
                    "nova_operator_target_cluster_silent_seconds",
                    "How long the registered target cluster has not answered (or not engaged); 0 while it answers.",
                ),
                &["cluster"],
            )?,
        })
    }
}

impl TargetClusterAvailability {
    /// The collector of `fleet`'s clusters.
    pub fn new(fleet: Weak<Fleet>) -> Result<Self, prometheus::Error> {
        Ok(Self {
            fleet,
            descs: Series::new()?,
        })
    }
}

impl Collector for TargetClusterAvailability {
    fn desc(&self) -> Vec<&Desc> {
        let mut descs = self.descs.answering.desc();
        descs.extend(self.descs.silent.desc());
        descs
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let (Some(fleet), Ok(series)) = (self.fleet.upgrade(), Series::new()) else {
            return Vec::new();
        };
        let now = SystemTime::now();
        for (cluster, since) in fleet.silences() {
            let silent_for =
                since.map(|since| now.duration_since(since).unwrap_or_default().as_secs_f64());
            series
                .answering
                .with_label_values(&[&cluster])
                .set(i64::from(silent_for.is_none()));
            series
                .silent
                .with_label_values(&[&cluster])
                .set(silent_for.unwrap_or_default());
        }
        let mut families = series.answering.collect();
        families.extend(series.silent.collect());
        families
    }
}

/// Adds the two series of `fleet`'s clusters to `registry`.
pub fn register(
    registry: &prometheus::Registry,
    fleet: &Arc<Fleet>,
) -> Result<(), prometheus::Error> {
    registry.register(Box::new(TargetClusterAvailability::new(Arc::downgrade(
        fleet,
    ))?))
}
