//! The controller's own flags (the default command): kept apart from the subcommands so the
//! long list of settings and their environment variables reads in one place.

use std::net::SocketAddr;

use clap::ValueEnum;
use nova_api::logging::Filtered;
use tracing_subscriber::Layer;

/// Log output format.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// The controller's log lines on standard output, coloured only on a terminal (a log
    /// collector must never see escape codes).
    pub fn output(self) -> Box<dyn Layer<Filtered> + Send + Sync> {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
        let output = tracing_subscriber::fmt::layer().with_ansi(ansi);
        match self {
            LogFormat::Text => output.boxed(),
            LogFormat::Json => output.json().boxed(),
        }
    }
}

/// Flags of the controller itself.
#[derive(Debug, clap::Args)]
pub struct Flags {
    /// Path to a kubeconfig; in-cluster configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Watch only this namespace; all namespaces when empty.
    #[arg(long, env = "NOVA_CONTROLLER_NAMESPACE", default_value = "")]
    pub namespace: String,
    /// Where /metrics is served.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_METRICS_BIND_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_bind_address: SocketAddr,
    /// Where /healthz and /readyz are served.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_HEALTH_PROBE_BIND_ADDRESS",
        default_value = "0.0.0.0:8081"
    )]
    pub health_probe_bind_address: SocketAddr,
    /// Elect one active replica through a Lease; the others wait as warm standbys.
    #[arg(long, env = "NOVA_CONTROLLER_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// The namespace of the leader-election Lease; the pod's own namespace when empty.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_LEADER_ELECTION_NAMESPACE",
        default_value = ""
    )]
    pub leader_election_namespace: String,
    /// The name of the leader-election Lease.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_LEADER_ELECTION_ID",
        default_value = "nova-operator.nova.openstack.c5c3.io"
    )]
    pub leader_election_id: String,
    /// Log format.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// A file holding the log filter (`EnvFilter` syntax, as RUST_LOG), read at start and every
    /// 5 s after: a changed content becomes the filter without a restart (the chart mounts its
    /// logging ConfigMap here). Over RUST_LOG while it is readable and valid.
    #[arg(long, env = "NOVA_CONTROLLER_LOG_FILTER_FILE")]
    pub log_filter_file: Option<std::path::PathBuf>,
    /// The namespace of target-cluster registration Secrets; empty disables target clusters.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_CLUSTERS_NAMESPACE",
        default_value = "c5c3-clusters"
    )]
    pub clusters_namespace: String,
    /// How many CRs are reconciled at once (never the same CR twice).
    #[arg(
        long,
        env = "NOVA_CONTROLLER_MAX_CONCURRENT_RECONCILES",
        default_value_t = 2
    )]
    pub max_concurrent_reconciles: u16,
    /// How long one request to an API server may take, its whole answer included (a watch:
    /// until it answers); a target cluster whose requests time out stops resolving until it
    /// answers again.
    #[arg(long, env = "NOVA_CONTROLLER_REQUEST_TIMEOUT_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_seconds: u64,
    /// How long one reconcile pass may run before it is stopped and retried with back-off,
    /// freeing its slot.
    #[arg(long, env = "NOVA_CONTROLLER_PASS_DEADLINE_SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub pass_deadline_seconds: u64,
    /// /healthz fails once a pass has been in flight this long (it should have been stopped at
    /// its deadline: the loop is stuck, and the kubelet restarts the container).
    #[arg(long, env = "NOVA_CONTROLLER_STALL_AFTER_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub stall_after_seconds: u64,
    /// Requests per second the API client may start on average; 0 (the default) sets no
    /// client-side limit. The API server's Priority and Fairness (on by default since
    /// Kubernetes 1.20, GA in 1.29) already queues and sheds this client's requests by its
    /// flow schema, so a client-side limit only slows the controller down: at 20 QPS a fleet
    /// of 100 new Novas converged in 24x the API server's raw time for the same objects. What
    /// bounds the load is `--max-concurrent-reconciles` (each pass sends its requests one after
    /// the other, its parallel group a few at once), and a converged or waiting CR costs no
    /// request at all (reads come from the watch caches). Set a limit when the API server has
    /// Priority and Fairness disabled or this client's priority level is shared with clients
    /// that must not wait (the controller-runtime default was 20 QPS and burst 30).
    #[arg(long, env = "NOVA_CONTROLLER_CLIENT_QPS", default_value_t = 0.0)]
    pub client_qps: f64,
    /// Requests the API client may start at once before the QPS limit applies (only with a
    /// `--client-qps` above 0).
    #[arg(long, env = "NOVA_CONTROLLER_CLIENT_BURST", default_value_t = 100)]
    pub client_burst: u32,
    /// Dial this address for every API health probe instead of resolving the Service's
    /// cluster-local name: for a controller running outside the cluster it manages.
    #[arg(long, env = "NOVA_CONTROLLER_HEALTH_CHECK_ADDRESS")]
    pub health_check_address: Option<SocketAddr>,
    /// `HOST:PORT=ADDRESS`: dial ADDRESS for the OpenStack calls to the Service HOST:PORT
    /// (repeatable, or comma-separated): for a controller outside the cluster it manages.
    #[arg(long = "service-route", env = "NOVA_CONTROLLER_SERVICE_ROUTES", value_delimiter = ',', value_parser = service_route)]
    pub service_routes: Vec<(String, SocketAddr)>,
    /// A PEM file of CA certificates trusted for https Keystone, compute and Placement
    /// endpoints besides the system's roots (the chart mounts `controller.trust` here); a
    /// Nova's spec.tls bundle adds to both for the calls on its cloud. Read at start: an
    /// unreadable file or one without a certificate stops the controller.
    #[arg(long, env = "NOVA_CONTROLLER_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
}

/// Parses one `HOST:PORT=ADDRESS` of `--service-route`.
fn service_route(text: &str) -> Result<(String, SocketAddr), String> {
    let (service, address) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not HOST:PORT=ADDRESS"))?;
    let address = address
        .parse()
        .map_err(|e| format!("{address:?} is not an address: {e}"))?;
    Ok((service.to_owned(), address))
}
