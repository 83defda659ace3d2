//! What every reconcile of this process shares.

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

use crate::backoff::Backoff;
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
    /// The per-object failure back-off.
    pub backoff: Backoff,
}

impl Context {
    /// The context of one controller process; `instance` names it in the events it records.
    pub fn new(
        client: Client,
        metrics: Metrics,
        scope: Option<String>,
        instance: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: "nova-controller".into(),
            instance,
        };
        Self {
            engine: Engine::new(metrics.clone()),
            recorder: Recorder::new(client.clone(), reporter),
            client,
            scope,
            metrics,
            backoff: Backoff::default(),
        }
    }
}
