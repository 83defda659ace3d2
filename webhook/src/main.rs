//! `nova-webhook`: serves the defaulting and validating webhooks of Nova and NovaCompute.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use nova_api::logging::{self, Filtered};
use nova_webhook::limits::Limits;
use nova_webhook::lookups::KubeResolver;
use nova_webhook::metrics::Metrics;
use nova_webhook::selfsigned;
use nova_webhook::server::{self, AppState};
use nova_webhook::tls::{self, CertStore};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing_subscriber::Layer;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// The webhook's log lines on standard error, a JSON line's fields at its top level,
    /// coloured only on a terminal (a log collector must never see escape codes).
    fn output(self) -> Box<dyn Layer<Filtered> + Send + Sync> {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let output = tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(std::io::stderr);
        match self {
            LogFormat::Text => output.boxed(),
            LogFormat::Json => output.json().flatten_event(true).boxed(),
        }
    }
}

/// The log filter when neither --log-filter-file nor RUST_LOG gives one.
const LOG_FILTER: &str = "info";

/// The admission webhook of the Nova operator.
///
/// A flag given twice takes its last value, so the chart's `extraArgs` (appended after the
/// flags the chart renders) can override one of them.
#[derive(Debug, Parser)]
#[command(name = "nova-webhook", version, about, args_override_self = true)]
struct Args {
    /// Address the HTTPS admission server listens on.
    #[arg(
        long,
        env = "NOVA_WEBHOOK_BIND_ADDRESS",
        default_value = "0.0.0.0:9443"
    )]
    bind_address: SocketAddr,
    /// PEM file of the serving certificate (chain), reloaded when it changes (file mode).
    #[arg(
        long,
        env = "NOVA_WEBHOOK_TLS_CERT_FILE",
        required_unless_present = "self_signed_secret",
        conflicts_with = "self_signed_secret"
    )]
    tls_cert_file: Option<PathBuf>,
    /// PEM file of the serving certificate's private key, reloaded when it changes (file mode).
    #[arg(
        long,
        env = "NOVA_WEBHOOK_TLS_PRIVATE_KEY_FILE",
        required_unless_present = "self_signed_secret",
        conflicts_with = "self_signed_secret"
    )]
    tls_private_key_file: Option<PathBuf>,
    #[command(flatten)]
    self_signed: SelfSignedArgs,
    /// Seconds between checks of the certificate files for a rotation.
    #[arg(long, env = "NOVA_WEBHOOK_CERT_POLL_SECONDS", default_value_t = 5)]
    cert_poll_seconds: u64,
    /// Address of the plain-HTTP server of /metrics, /healthz and /readyz.
    #[arg(
        long,
        env = "NOVA_WEBHOOK_METRICS_BIND_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    metrics_bind_address: SocketAddr,
    /// Kubeconfig for the PriorityClass and Nova lookups; the in-cluster configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Log output format.
    #[arg(
        long,
        env = "NOVA_WEBHOOK_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
    /// A file holding the log filter (`EnvFilter` syntax, as RUST_LOG), read at start and every
    /// 5 s after: a changed content becomes the filter without a restart (the chart mounts its
    /// logging ConfigMap here). Over RUST_LOG while it is readable and valid.
    #[arg(long, env = "NOVA_WEBHOOK_LOG_FILTER_FILE")]
    log_filter_file: Option<PathBuf>,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The self-signed mode: the webhook keeps its CA and serving certificate in a Secret of its
/// own, renews them and injects the CA into its webhook configurations (`selfsigned`).
#[derive(Debug, clap::Args)]
struct SelfSignedArgs {
    /// Keep the CA and serving certificate in this Secret (self-signed mode), instead of
    /// reading --tls-cert-file and --tls-private-key-file.
    #[arg(
        long,
        env = "NOVA_WEBHOOK_SELF_SIGNED_SECRET",
        requires_all = ["webhook_configuration", "namespace", "certificate_names"]
    )]
    self_signed_secret: Option<String>,
    /// Name of the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration whose
    /// webhooks' caBundle the webhook keeps current (self-signed mode).
    #[arg(long, env = "NOVA_WEBHOOK_CONFIGURATION")]
    webhook_configuration: Option<String>,
    /// Namespace of the Secret (the chart passes the pod's own, from the downward API).
    #[arg(long, env = "NOVA_WEBHOOK_NAMESPACE")]
    namespace: Option<String>,
    /// DNS names and IP addresses of the serving certificate, comma-separated (the Service's
    /// names in a cluster).
    #[arg(long, env = "NOVA_WEBHOOK_CERTIFICATE_NAMES", value_delimiter = ',')]
    certificate_names: Vec<String>,
    /// Life of the self-signed CA, in seconds (a year); rolled at two-thirds of it, and at
    /// least three serving lives.
    #[arg(long, env = "NOVA_WEBHOOK_CA_VALIDITY_SECONDS", default_value_t = 365 * 86_400)]
    ca_validity_seconds: u64,
    /// Life of the serving certificate, in seconds (90 days); renewed at two-thirds of it.
    #[arg(long, env = "NOVA_WEBHOOK_CERTIFICATE_VALIDITY_SECONDS", default_value_t = 90 * 86_400)]
    certificate_validity_seconds: u64,
    /// Seconds between reads of the Secret and the configurations.
    #[arg(
        long,
        env = "NOVA_WEBHOOK_CERTIFICATE_SYNC_SECONDS",
        default_value_t = 15
    )]
    certificate_sync_seconds: u64,
    /// Seconds a new CA must have been injected before a serving certificate it signed
    /// replaces the one served (the API server reads its webhook configurations through an
    /// informer).
    #[arg(
        long,
        env = "NOVA_WEBHOOK_CA_PROPAGATION_SECONDS",
        default_value_t = 10
    )]
    ca_propagation_seconds: u64,
    /// Seconds each request to the API server may take.
    #[arg(long, env = "NOVA_WEBHOOK_API_TIMEOUT_SECONDS", default_value_t = 10)]
    api_timeout_seconds: u64,
}

impl SelfSignedArgs {
    /// The settings when self-signed mode is on; refused when the flags do not work together.
    fn settings(&self) -> anyhow::Result<Option<selfsigned::Settings>> {
        let Some(secret) = self.self_signed_secret.clone() else {
            return Ok(None);
        };
        let lifetimes = selfsigned::Lifetimes {
            ca: Duration::from_secs(self.ca_validity_seconds),
            serving: Duration::from_secs(self.certificate_validity_seconds),
            names: self.certificate_names.clone(),
        };
        lifetimes.check().map_err(anyhow::Error::msg)?;
        Ok(Some(selfsigned::Settings {
            namespace: self.namespace.clone().unwrap_or_default(),
            secret,
            configuration: self.webhook_configuration.clone().unwrap_or_default(),
            lifetimes,
            interval: Duration::from_secs(self.certificate_sync_seconds.max(1)),
            request_timeout: Duration::from_secs(self.api_timeout_seconds.max(1)),
            propagation: Duration::from_secs(self.ca_propagation_seconds),
        }))
    }
}

/// The admission server's limits (`limits::Limits`; defaults sized for the chart's 128 Mi
/// memory limit, see the README).
#[derive(Debug, clap::Args)]
struct LimitArgs {
    /// Admission connections open at once; one over it is reset on accept.
    #[arg(long, env = "NOVA_WEBHOOK_MAX_CONNECTIONS", default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Seconds a connection may stay open with no request in flight.
    #[arg(long, env = "NOVA_WEBHOOK_IDLE_TIMEOUT_SECONDS", default_value_t = Limits::default().idle_timeout.as_secs())]
    idle_timeout_seconds: u64,
    /// HTTP/2 streams one connection may have open at once.
    #[arg(long, env = "NOVA_WEBHOOK_MAX_CONCURRENT_STREAMS", default_value_t = Limits::default().max_concurrent_streams)]
    max_concurrent_streams: u32,
    /// HTTP/2 receive window of one stream, in bytes; a connection's is this times the stream cap.
    #[arg(long, env = "NOVA_WEBHOOK_HTTP2_STREAM_WINDOW_BYTES", default_value_t = Limits::default().stream_window_bytes)]
    http2_stream_window_bytes: u32,
    /// Largest request head (HTTP/1 head, HTTP/2 header list), in bytes.
    #[arg(long, env = "NOVA_WEBHOOK_MAX_HEADER_BYTES", default_value_t = Limits::default().max_header_bytes)]
    max_header_bytes: u32,
    /// Memory the reviews in progress may use together, in bytes; each takes 20 times its
    /// body's length, so at least 20 times the 3 MiB body cap.
    #[arg(long, env = "NOVA_WEBHOOK_REVIEW_BUDGET_BYTES", default_value_t = Limits::default().review_budget_bytes)]
    review_budget_bytes: usize,
    /// Milliseconds a review waits for its share of the review budget before a 503.
    #[arg(long, env = "NOVA_WEBHOOK_REVIEW_BUDGET_WAIT_MILLIS", default_value_t = duration_millis(Limits::default().review_budget_wait))]
    review_budget_wait_millis: u64,
}

fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl LimitArgs {
    /// The limits, the flags over the defaults; refused when they do not work together.
    fn limits(&self) -> anyhow::Result<Limits> {
        let limits = Limits {
            max_connections: self.max_connections,
            idle_timeout: Duration::from_secs(self.idle_timeout_seconds),
            max_concurrent_streams: self.max_concurrent_streams,
            stream_window_bytes: self.http2_stream_window_bytes,
            max_header_bytes: self.max_header_bytes,
            review_budget_bytes: self.review_budget_bytes,
            review_budget_wait: Duration::from_millis(self.review_budget_wait_millis),
            ..Limits::default()
        };
        limits.check().map_err(anyhow::Error::msg)?;
        Ok(limits)
    }
}

async fn kube_client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("loading {}: {e}", path.display()))?
        }
        None => kube::Config::infer().await.map_err(|e| e.to_string())?,
    };
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Resolves on the first SIGTERM or SIGINT; a second one exits at once.
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            std::future::pending::<()>().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutdown requested; finishing in-flight reviews (a second signal aborts)");
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::warn!("second signal; aborting");
        std::process::exit(130);
    });
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    logging::install(
        args.log_format.output(),
        args.log_filter_file.clone(),
        LOG_FILTER,
    );
    let limits = args.limits.limits().context("the limit flags")?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    nova_webhook::catalog::init().context("embedded option catalogs")?;

    let self_signed = args
        .self_signed
        .settings()
        .context("the self-signed flags")?;

    let client = kube_client(args.kubeconfig.as_ref()).await;
    let resolver = match &client {
        Ok(c) => KubeResolver::new(Some(c.clone()), ""),
        Err(e) => {
            tracing::warn!(error = %e, "no Kubernetes client; PriorityClass and Nova lookups fail closed");
            KubeResolver::new(None, format!("no Kubernetes API client is configured: {e}"))
        }
    };
    let metrics = Arc::new(Metrics::new().context("registering metrics")?);
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let (store, watcher) = match (
        &self_signed,
        &args.tls_cert_file,
        &args.tls_private_key_file,
    ) {
        (Some(settings), _, _) => {
            let client = client
                .as_ref()
                .map_err(|e| anyhow::anyhow!("self-signed mode needs the API: {e}"))?
                .clone();
            let label = format!("Secret {}/{}", settings.namespace, settings.secret);
            let store = CertStore::new(format!("{label} tls.crt"), format!("{label} tls.key"));
            tracing::info!(secret = %label, configuration = %settings.configuration, "self-signed mode: the webhook keeps its own certificate");
            let manager =
                selfsigned::Manager::new(client, settings.clone(), store.clone(), metrics.clone());
            (store, tokio::spawn(manager.run(stopped(stop_rx.clone()))))
        }
        (None, Some(cert), Some(key)) => {
            let store = CertStore::new(cert, key);
            match store.reload() {
                Ok(_) => tracing::info!(cert = %cert.display(), "serving certificate loaded"),
                Err(e) => {
                    tracing::warn!(error = %e, "no usable serving certificate yet; not ready until one appears")
                }
            }
            let watcher = tokio::spawn(store.clone().watch(
                Duration::from_secs(args.cert_poll_seconds.max(1)),
                stopped(stop_rx.clone()),
            ));
            (store, watcher)
        }
        _ => anyhow::bail!(
            "either --self-signed-secret or both --tls-cert-file and --tls-private-key-file"
        ),
    };

    let admin_listener = TcpListener::bind(args.metrics_bind_address)
        .await
        .with_context(|| format!("binding {}", args.metrics_bind_address))?;
    let admin = tokio::spawn(server::serve_plain(
        admin_listener,
        server::admin_router(metrics.clone(), store.clone()),
        stopped(stop_rx.clone()),
    ));

    let state = Arc::new(AppState::new(resolver, metrics.clone(), limits));
    let tls_config = tls::server_config(store.clone()).context("TLS configuration")?;
    let listener = TcpListener::bind(args.bind_address)
        .await
        .with_context(|| format!("binding {}", args.bind_address))?;
    tracing::info!(admission = %args.bind_address, metrics = %args.metrics_bind_address, ?limits, "nova-webhook serving");
    server::serve_tls(
        listener,
        tls_config,
        server::admission_router(state),
        limits,
        metrics,
        shutdown_signal(),
    )
    .await;

    let _ = stop_tx.send(true);
    let _ = watcher.await;
    if let Ok(Err(e)) = admin.await {
        tracing::warn!(error = %e, "metrics server ended with an error");
    }
    tracing::info!("nova-webhook stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_flag_takes_its_last_value() {
        let args = Args::try_parse_from([
            "nova-webhook",
            "--self-signed-secret=tls",
            "--webhook-configuration=nova-operator",
            "--namespace=ops",
            "--certificate-validity-seconds=7776000",
            "--certificate-names=a,b",
            "--certificate-validity-seconds=90",
            "--certificate-names=c",
        ])
        .expect("a repeated flag is accepted");
        assert_eq!(args.self_signed.certificate_validity_seconds, 90);
        assert_eq!(args.self_signed.certificate_names, ["a", "b", "c"]);
    }
}
