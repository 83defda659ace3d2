//! The webhook's metrics, under the `nova_webhook_` prefix. Labels carry the webhook path, the
//! operation and the outcome, never an object name.

use std::time::SystemTime;

use prometheus::process_collector::ProcessCollector;
use prometheus::{
    Encoder, Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use crate::limits::Limits;

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
    /// `nova_webhook_rejected_total{limit}`: what a limit turned away: `connections` (a
    /// connection reset on accept, the connection slots all taken by busy or fresh
    /// connections) and `review_budget` (a
    /// review answered 503, its share of the budget not free within its wait). HTTP/2 streams
    /// over the
    /// stream cap are refused inside the HTTP/2 layer and not counted here.
    pub rejected: IntCounterVec,
    /// `nova_webhook_review_budget_used_bytes`: the review budget taken now (the reviews in
    /// progress, each its body's length times `budget::MEMORY_PER_BODY_BYTE`).
    pub review_budget_used: IntGauge,
    /// `nova_webhook_idle_closed_total`: connections closed for having no request in flight
    /// for the idle timeout.
    pub idle_closed: IntCounter,
    /// `nova_webhook_connections_evicted_total`: quiet connections closed to give their slot
    /// to a newcomer over the cap (`slots`); climbing, a client floods the port with idle
    /// connections.
    pub evicted: IntCounter,
    /// `nova_webhook_limit{limit}`: the limits in force (`connections`, `concurrent_streams`,
    /// `review_budget_bytes`, `max_body_bytes`), to read the gauges above against.
    pub limits: IntGaugeVec,
    /// `nova_webhook_certificate_expiry_seconds`: seconds until the served certificate
    /// expires (negative once it has; absent before one is served).
    pub certificate_expiry: Gauge,
    /// `nova_webhook_certificate_lifetime_seconds`: the served certificate's whole life, to read
    /// the expiry against (renewal is due at two-thirds of it).
    pub certificate_lifetime: Gauge,
    /// `nova_webhook_certificate_renewals_total{what}`: Secret writes of the self-signed mode,
    /// by what was made: `serving` (a serving certificate), `ca` (a CA roll), `regenerated`
    /// (a missing or broken Secret, both made anew).
    pub certificate_renewals: IntCounterVec,
    /// `nova_webhook_certificate_sync_failures_total`: self-signed syncs that failed (the
    /// Secret or a configuration could not be read or written); the served certificate stays.
    pub certificate_sync_failures: IntCounter,
}

/// A limit that turned something away, the `limit` label of `nova_webhook_rejected_total`.
#[derive(Clone, Copy, Debug)]
pub enum Rejected {
    /// A connection over the connection cap.
    Connection,
    /// A review that could not get its share of the review budget.
    ReviewBudget,
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
        // process_* (CPU, resident memory, open files, start time) and the build's version.
        registry.register(Box::new(ProcessCollector::for_self()))?;
        let build_info = IntGauge::with_opts(
            Opts::new(
                "nova_webhook_build_info",
                "1, labelled with the build's version.",
            )
            .const_label("version", env!("CARGO_PKG_VERSION")),
        )?;
        build_info.set(1);
        registry.register(Box::new(build_info))?;
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
        let rejected = IntCounterVec::new(
            Opts::new(
                "nova_webhook_rejected_total",
                "Connections and reviews turned away by a limit, by limit",
            ),
            &["limit"],
        )?;
        let review_budget_used = IntGauge::new(
            "nova_webhook_review_budget_used_bytes",
            "Review budget taken now by the reviews in progress",
        )?;
        let evicted = IntCounter::new(
            "nova_webhook_connections_evicted_total",
            "Quiet admission connections closed to give their slot to a newcomer over the connection cap",
        )?;
        let idle_closed = IntCounter::new(
            "nova_webhook_idle_closed_total",
            "Admission connections closed for having no request in flight for the idle timeout",
        )?;
        let limits = IntGaugeVec::new(
            Opts::new(
                "nova_webhook_limit",
                "The admission server's limits in force",
            ),
            &["limit"],
        )?;
        let certificate_expiry = Gauge::new(
            "nova_webhook_certificate_expiry_seconds",
            "Seconds until the served serving certificate expires",
        )?;
        let certificate_lifetime = Gauge::new(
            "nova_webhook_certificate_lifetime_seconds",
            "The served serving certificate's whole validity, in seconds",
        )?;
        let certificate_renewals = IntCounterVec::new(
            Opts::new(
                "nova_webhook_certificate_renewals_total",
                "Certificate Secret writes of the self-signed mode, by what was made",
            ),
            &["what"],
        )?;
        let certificate_sync_failures = IntCounter::new(
            "nova_webhook_certificate_sync_failures_total",
            "Self-signed certificate syncs (renewal, CA injection) that failed",
        )?;
        registry.register(Box::new(certificate_expiry.clone()))?;
        registry.register(Box::new(certificate_lifetime.clone()))?;
        registry.register(Box::new(certificate_renewals.clone()))?;
        registry.register(Box::new(certificate_sync_failures.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(connections.clone()))?;
        registry.register(Box::new(open_connections.clone()))?;
        registry.register(Box::new(rejected.clone()))?;
        registry.register(Box::new(review_budget_used.clone()))?;
        registry.register(Box::new(idle_closed.clone()))?;
        registry.register(Box::new(evicted.clone()))?;
        registry.register(Box::new(limits.clone()))?;
        Ok(Self {
            registry,
            requests,
            duration,
            connections,
            open_connections,
            rejected,
            review_budget_used,
            idle_closed,
            evicted,
            limits,
            certificate_expiry,
            certificate_lifetime,
            certificate_renewals,
            certificate_sync_failures,
        })
    }

    /// Shows the served certificate's expiry and life.
    pub fn show_served(&self, served: Option<&nova_certs::PemCert>) {
        let Some(cert) = served else { return };
        let now = SystemTime::now();
        let expiry = match cert.validity.not_after.duration_since(now) {
            Ok(left) => left.as_secs_f64(),
            Err(past) => -past.duration().as_secs_f64(),
        };
        self.certificate_expiry.set(expiry);
        self.certificate_lifetime
            .set(cert.validity.life().as_secs_f64());
    }

    /// Counts one Secret write of the self-signed mode.
    pub fn certificate_renewed(&self, what: &str) {
        self.certificate_renewals.with_label_values(&[what]).inc();
    }

    /// Counts one failed self-signed sync.
    pub fn certificate_sync_failed(&self) {
        self.certificate_sync_failures.inc();
    }

    /// Shows the limits in force on `nova_webhook_limit`.
    pub fn show_limits(&self, limits: &Limits) {
        let gauge = |what: &str, value: usize| {
            self.limits
                .with_label_values(&[what])
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        };
        gauge("connections", limits.max_connections);
        gauge("concurrent_streams", limits.max_concurrent_streams as usize);
        gauge("review_budget_bytes", limits.review_budget_bytes);
        gauge("max_body_bytes", limits.max_body_bytes);
    }

    /// Counts one thing a limit turned away.
    pub fn rejected(&self, by: Rejected) {
        let limit = match by {
            Rejected::Connection => "connections",
            Rejected::ReviewBudget => "review_budget",
        };
        self.rejected.with_label_values(&[limit]).inc();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_and_the_build_are_exported() {
        let rendered = Metrics::new().expect("registers once").render();
        let version = format!(
            r#"nova_webhook_build_info{{version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        );
        assert!(rendered.lines().any(|l| l == version), "{rendered}");
        for family in ["process_resident_memory_bytes", "process_cpu_seconds_total"] {
            assert!(
                rendered.lines().any(|l| l.starts_with(family)),
                "{family}: {rendered}"
            );
        }
    }
}
