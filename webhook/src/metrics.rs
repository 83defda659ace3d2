//! The webhook's metrics, under the `nova_webhook_` prefix. Labels carry the webhook path, the
//! operation and the outcome, never an object name.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// The registered metrics.
pub struct Metrics {
    registry: Registry,
    /// `nova_webhook_requests_total{webhook, operation, outcome}`.
    pub requests: IntCounterVec,
    /// `nova_webhook_request_duration_seconds{webhook}`.
    pub duration: HistogramVec,
    /// `nova_webhook_connections_total{alpn}`: admission connections whose TLS handshake
    /// completed, by the negotiated ALPN protocol (`h2`, `http/1.1`, `none`). An API server
    /// speaking HTTP/2 keeps one connection and multiplexes; a count that climbs with the
    /// request count means every review pays a handshake.
    pub connections: IntCounterVec,
    /// `nova_webhook_open_connections`: admission connections open now.
    pub open_connections: IntGauge,
}

/// One open admission connection, counted until dropped.
pub struct OpenConnection(IntGauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
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
        let connections = IntCounterVec::new(
            Opts::new(
                "nova_webhook_connections_total",
                "Admission connections past the TLS handshake, by negotiated ALPN protocol",
            ),
            &["alpn"],
        )?;
        let open_connections = IntGauge::new(
            "nova_webhook_open_connections",
            "Admission connections open now",
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(connections.clone()))?;
        registry.register(Box::new(open_connections.clone()))?;
        Ok(Self {
            registry,
            requests,
            duration,
            connections,
            open_connections,
        })
    }

    /// Counts a connection whose handshake negotiated `alpn`; it stays open until the guard drops.
    pub fn connection_opened(&self, alpn: Option<&[u8]>) -> OpenConnection {
        let alpn = match alpn {
            Some(b"h2") => "h2",
            Some(b"http/1.1") => "http/1.1",
            Some(_) => "other",
            None => "none",
        };
        self.connections.with_label_values(&[alpn]).inc();
        self.open_connections.inc();
        OpenConnection(self.open_connections.clone())
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
