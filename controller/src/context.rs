//! What every reconcile of this process shares.

use kube::Client;
use kube::runtime::events::Recorder;

use crate::metrics::Metrics;
use crate::pipeline::Engine;

/// The controller's shared state.
pub struct Context {
    /// The management-cluster client.
    pub client: Client,
    /// Runs and instruments the pipeline tables.
    pub engine: Engine,
    /// Publishes Kubernetes Events on the CRs.
    pub recorder: Recorder,
    /// The one namespace a namespace-scoped operator watches; None watches all.
    pub scope: Option<String>,
    /// The process's metrics.
    pub metrics: Metrics,
}
