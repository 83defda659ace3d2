//! The webhook's metrics, under the `nova_webhook_` prefix. Labels carry the webhook path, the
//! operation and the outcome, never an object name.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

/// The registered metrics.
pub struct Metrics {
    registry: Registry,
    /// `nova_webhook_requests_total{webhook, operation, outcome}`.
    pub requests: IntCounterVec,
    /// `nova_webhook_request_duration_seconds{webhook}`.
    pub duration: HistogramVec,
}

impl Metrics {
    /// Registers the metrics in a fresh registry.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "nova_webhook_requests_total",
                "Admission requests by webhook path, operation and outcome",
            ),
            &["webhook", "operation", "outcome"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "nova_webhook_request_duration_seconds",
                "Admission request latency by webhook path",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
            &["webhook"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(Self {
            registry,
            requests,
            duration,
        })
    }

    /// Records one request.
    pub fn observe(&self, webhook: &str, operation: &str, outcome: &str, seconds: f64) {
        let operation = match operation {
            "CREATE" | "UPDATE" | "DELETE" | "CONNECT" => operation,
            _ => "unknown",
        };
        self.requests
            .with_label_values(&[webhook, operation, outcome])
            .inc();
        self.duration.with_label_values(&[webhook]).observe(seconds);
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}
