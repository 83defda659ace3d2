//! nova-controller: reconciles Nova control planes and NovaCompute node pools.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use clap::{Parser, Subcommand, ValueEnum};
use kube::client::ClientBuilder;
use kube::{Api, Client, Config};
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_controller::clusters::{ABANDON_AFTER, Fleet, KubeCluster, Registry};
use nova_controller::metrics::Metrics;
use nova_controller::pipeline::{Stage, Step};
use nova_controller::ratelimit::RateLimitLayer;
use nova_controller::{leadership, nova, novacompute, offline};
use tokio::sync::watch;

/// Log output format.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Reconciles Nova and NovaCompute resources.
#[derive(Debug, Parser)]
#[command(name = "nova-controller", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    flags: Flags,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prints every child the pipeline would create for a CR, without a cluster: a Nova, or a
    /// NovaCompute with `--nova`.
    Render {
        /// The Nova manifest, or the NovaCompute manifest when `--nova` is given.
        #[arg(short = 'f', long = "filename")]
        file: std::path::PathBuf,
        /// The manifest of the Nova a NovaCompute joins: renders the pool's ConfigMap and
        /// DaemonSet as if the Nova had installed its release and published its contract.
        #[arg(long)]
        nova: Option<std::path::PathBuf>,
        /// A directory of Secret manifests to read credentials from; placeholders otherwise.
        #[arg(long)]
        secrets_dir: Option<std::path::PathBuf>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "yaml")]
        output: Output,
    },
    /// Prints the condition types the Nova pipeline's steps report on, one per line: what
    /// this build implements (the main job's view marks the other Ready inputs as missing).
    Conditions,
}

/// The render command's output format.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    /// A multi-document YAML stream.
    Yaml,
    /// One v1 List.
    Json,
}

/// Flags of the controller itself.
#[derive(Debug, clap::Args)]
struct Flags {
    /// Path to a kubeconfig; in-cluster configuration when unset.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Watch only this namespace; all namespaces when empty.
    #[arg(long, env = "NOVA_CONTROLLER_NAMESPACE", default_value = "")]
    namespace: String,
    /// Where /metrics is served.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_METRICS_BIND_ADDRESS",
        default_value = "0.0.0.0:8080"
    )]
    metrics_bind_address: SocketAddr,
    /// Where /healthz and /readyz are served.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_HEALTH_PROBE_BIND_ADDRESS",
        default_value = "0.0.0.0:8081"
    )]
    health_probe_bind_address: SocketAddr,
    /// Elect one active replica through a Lease; the others wait as warm standbys.
    #[arg(long, env = "NOVA_CONTROLLER_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// The namespace of the leader-election Lease; the pod's own namespace when empty.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_LEADER_ELECTION_NAMESPACE",
        default_value = ""
    )]
    leader_election_namespace: String,
    /// The name of the leader-election Lease.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_LEADER_ELECTION_ID",
        default_value = "nova-operator.nova.openstack.c5c3.io"
    )]
    leader_election_id: String,
    /// Log format.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
    /// The namespace of target-cluster registration Secrets; empty disables target clusters.
    #[arg(
        long,
        env = "NOVA_CONTROLLER_CLUSTERS_NAMESPACE",
        default_value = "c5c3-clusters"
    )]
    clusters_namespace: String,
    /// How many CRs are reconciled at once (never the same CR twice).
    #[arg(
        long,
        env = "NOVA_CONTROLLER_MAX_CONCURRENT_RECONCILES",
        default_value_t = 2
    )]
    max_concurrent_reconciles: u16,
    /// Requests per second the API client may start on average (0 disables the limit). A
    /// converged or waiting CR costs no request at all (reads come from the watch caches);
    /// the limit bounds a runaway loop and the burst of a restart, when every CR is reconciled
    /// once and the content caches are filled (about ten reads per Nova).
    #[arg(long, env = "NOVA_CONTROLLER_CLIENT_QPS", default_value_t = 20.0)]
    client_qps: f64,
    /// Requests the API client may start at once before the QPS limit applies.
    #[arg(long, env = "NOVA_CONTROLLER_CLIENT_BURST", default_value_t = 100)]
    client_burst: u32,
    /// Dial this address for every API health probe instead of resolving the Service's
    /// cluster-local name: for a controller running outside the cluster it manages.
    #[arg(long, env = "NOVA_CONTROLLER_HEALTH_CHECK_ADDRESS")]
    health_check_address: Option<SocketAddr>,
    /// `HOST:PORT=ADDRESS`: dial ADDRESS for the OpenStack calls to the Service HOST:PORT
    /// (repeatable, or comma-separated): for a controller outside the cluster it manages.
    #[arg(long = "service-route", env = "NOVA_CONTROLLER_SERVICE_ROUTES", value_delimiter = ',', value_parser = service_route)]
    service_routes: Vec<(String, SocketAddr)>,
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

/// The lease is renewed well inside this window; a standby takes over once it lapses.
const LEASE_DURATION_SECONDS: u64 = 15;
/// How long before expiry the holder renews.
const LEASE_GRACE_SECONDS: u64 = 5;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Render {
            file,
            nova,
            secrets_dir,
            output,
        }) => return render(&file, nova.as_deref(), secrets_dir.as_deref(), output).await,
        Some(Command::Conditions) => {
            for condition in pipeline_conditions() {
                println!("{condition}");
            }
            return Ok(());
        }
        None => {}
    }
    let flags = cli.flags;
    init_logging(flags.log_format);
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("installing the rustls crypto provider failed"))?;

    let config = config(&flags).await?;
    let client = ClientBuilder::try_from(config.clone())?
        .with_layer(&RateLimitLayer::new(flags.client_qps, flags.client_burst))
        .build();
    // Leader election has a client of its own, outside the rate limit: a renewal queued behind
    // a burst of reconcile requests could miss its deadline and end the lead.
    let lease_client = Client::try_from(config)?;
    let scope = (!flags.namespace.is_empty()).then(|| flags.namespace.clone());
    probe_crds(&client, scope.as_deref()).await?;
    let metrics = Metrics::new().context("registering metrics")?;
    let ready = Arc::new(AtomicBool::new(false));
    tokio::spawn(serve_metrics(flags.metrics_bind_address, metrics.clone()));
    tokio::spawn(serve_health(flags.health_probe_bind_address, ready.clone()));

    // The caches start on every replica, so a standby is warm when it takes over; the
    // replica is ready once every watch cache holds its first complete list.
    let registry = Registry::default()
        .register(nova::controller::kinds())
        .register(novacompute::controller::kinds())
        .probe_services_at(flags.health_check_address)
        .route_services(flags.service_routes.iter().cloned().collect());
    let cluster = KubeCluster::start(client.clone(), scope.clone(), registry.clone()).await;
    {
        let (cluster, ready) = (cluster.clone(), ready.clone());
        tokio::spawn(async move {
            cluster.synced().await;
            tracing::info!("watch caches synced");
            ready.store(true, Ordering::SeqCst);
        });
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutdown requested; finishing in-flight reconciles");
        let _ = stop_tx.send(true);
    });

    // Target clusters cache the same kinds the management cluster does; the fleet runs on
    // every replica, so a standby has them engaged when it takes over.
    let targets = (!flags.clusters_namespace.is_empty()).then(|| {
        tracing::info!(clusters_namespace = %flags.clusters_namespace, "following target-cluster registrations");
        Fleet::start(
            client.clone(),
            &flags.clusters_namespace,
            registry,
            ABANDON_AFTER,
        )
    });
    if targets.is_none() {
        tracing::info!(
            "target clusters are disabled (--clusters-namespace is empty); every targetClusterRef waits"
        );
    }
    let options = nova::controller::Options {
        scope: scope.clone(),
        concurrency: flags.max_concurrent_reconciles,
        instance: Some(hostname()),
        targets: targets.clone(),
    };
    let pool_options = novacompute::controller::Options {
        scope,
        concurrency: flags.max_concurrent_reconciles,
        instance: Some(hostname()),
        targets: targets.clone(),
    };
    let controllers = {
        let (client, metrics, cluster) = (client.clone(), metrics.clone(), cluster.clone());
        let (stop, pool_stop) = (stopped(stop_rx.clone()), stopped(stop_rx.clone()));
        async move {
            cluster.synced().await;
            if let Some(targets) = &targets {
                targets.settled().await;
            }
            // One binary, two controllers on the same caches, instrumenter and metric vectors.
            tokio::join!(
                nova::controller::run(
                    client.clone(),
                    metrics.clone(),
                    cluster.clone(),
                    options,
                    stop
                ),
                novacompute::controller::run(client, metrics, cluster, pool_options, pool_stop),
            );
        }
    };

    if !flags.leader_elect {
        metrics.leader.set(1);
        controllers.await;
        return Ok(());
    }
    // One namespace and identity for the lease manager and the renewal deadline it is held to.
    let (lease_ns, identity) = (lease_namespace(&flags), hostname());
    let manager = kube_lease_manager::LeaseManagerBuilder::new(
        lease_client.clone(),
        &flags.leader_election_id,
    )
    .with_namespace(&lease_ns)
    .with_identity(&identity)
    .with_duration(LEASE_DURATION_SECONDS)
    .with_grace(LEASE_GRACE_SECONDS)
    .build()
    .await
    .context("building the leader-election lease manager")?;
    let (mut leading, lease_task) = manager.watch().await;
    tracing::info!(lease = %flags.leader_election_id, "waiting for leadership");
    let mut stop = stop_rx.clone();
    loop {
        tokio::select! {
            changed = leading.changed() => changed.context("the lease manager stopped")?,
            _ = stop.changed() => return release(leading, lease_task).await,
        }
        if *leading.borrow_and_update() {
            break;
        }
    }
    tracing::info!("acquired leadership; reconciling");
    metrics.leader.set(1);
    let lost = async move {
        while leading.changed().await.is_ok() {
            if !*leading.borrow_and_update() {
                break;
            }
        }
        leading
    };
    // The lease manager keeps reporting the lead while its renewals fail: stop before the
    // lease can lapse instead (see `leadership`).
    let lapsing = leadership::lapsing(
        lease_client,
        &lease_ns,
        &flags.leader_election_id,
        &identity,
        std::time::Duration::from_secs(LEASE_DURATION_SECONDS),
    );
    tokio::select! {
        _ = controllers => {
            tracing::info!("controllers stopped");
            Ok(())
        }
        _ = lost => {
            // Another replica may already reconcile: stop at once rather than race it.
            metrics.leader.set(0);
            anyhow::bail!("lost the leader-election lease; exiting so a standby takes over")
        }
        why = lapsing => {
            metrics.leader.set(0);
            anyhow::bail!(
                "stopped leading before the lease could lapse ({why:?}: it was not renewed in time or another replica holds it); exiting so a standby takes over"
            )
        }
    }
}

/// The `render` subcommand: prints what was rendered, then fails if the pipeline stopped.
async fn render(
    file: &std::path::Path,
    nova: Option<&std::path::Path>,
    secrets_dir: Option<&std::path::Path>,
    output: Output,
) -> anyhow::Result<()> {
    let secrets = match secrets_dir {
        Some(dir) => offline::secrets_from_dir(dir)?,
        None => nova_controller::clusters::SecretSource::default(),
    };
    let rendered = match nova {
        Some(nova) => {
            let pool = offline::read_pool(file)?;
            offline::render_pool(pool, offline::read_nova(nova)?, secrets).await?
        }
        None => offline::render(offline::read_nova(file)?, secrets).await?,
    };
    let text = match output {
        Output::Yaml => offline::to_yaml(&rendered.objects)?,
        Output::Json => offline::to_json(rendered.objects)?,
    };
    print!("{text}");
    match rendered.stopped {
        Some(reason) => anyhow::bail!("{reason}"),
        None => Ok(()),
    }
}

/// The condition types of the Nova pipeline's steps, in pipeline order, each once.
fn pipeline_conditions() -> Vec<&'static str> {
    let mut conditions = Vec::new();
    for stage in &nova::PIPELINE {
        let steps: &[Step<Nova>] = match stage {
            Stage::Sequential(step) => std::slice::from_ref(step),
            Stage::Parallel(members) => members,
        };
        for step in steps {
            let condition = step.condition.as_str();
            if !conditions.contains(&condition) {
                conditions.push(condition);
            }
        }
    }
    conditions
}

/// Resolves once a shutdown was requested.
async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Hands the lease back so a standby takes over without waiting for it to lapse.
async fn release(
    leading: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
) -> anyhow::Result<()> {
    drop(leading);
    if let Ok(Ok(manager)) = task.await {
        manager.release().await.context("releasing the lease")?;
    }
    Ok(())
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    // Colour only on a terminal: a log collector must never see escape codes.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn config(flags: &Flags) -> anyhow::Result<Config> {
    Ok(match &flags.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => Config::infer()
            .await
            .context("inferring the Kubernetes client configuration")?,
    })
}

/// Fails with an actionable message instead of crash-looping on watch errors; under
/// `--namespace` it lists only that namespace, which a namespaced Role allows.
async fn probe_crds(client: &Client, scope: Option<&str>) -> anyhow::Result<()> {
    probe_crd::<Nova>(client, scope).await?;
    probe_crd::<NovaCompute>(client, scope).await
}

async fn probe_crd<K>(client: &Client, scope: Option<&str>) -> anyhow::Result<()>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = match scope {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    api.list_metadata(&kube::api::ListParams::default().limit(1))
        .await
        .with_context(|| {
            format!(
                "the {}.{} CRD is not served: install crds/ (kubectl apply --server-side -f crds/)",
                K::plural(&()),
                K::group(&())
            )
        })?;
    Ok(())
}

fn lease_namespace(flags: &Flags) -> String {
    if !flags.leader_election_namespace.is_empty() {
        return flags.leader_election_namespace.clone();
    }
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|ns| ns.trim().to_owned())
        .unwrap_or_else(|_| "default".to_owned())
}

fn hostname() -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("nova-controller-{}", std::process::id()))
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the controller");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

async fn serve_metrics(addr: SocketAddr, metrics: Metrics) {
    let app = Router::new().route("/metrics", get(move || async move { metrics.render() }));
    serve(addr, app, "metrics").await;
}

async fn serve_health(addr: SocketAddr, ready: Arc<AtomicBool>) {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move {
                if ready.load(Ordering::SeqCst) {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "starting")
                }
            }),
        );
    serve(addr, app, "health").await;
}

async fn serve(addr: SocketAddr, app: Router, what: &str) {
    match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, server = what, "admin server stopped");
            }
        }
        Err(e) => tracing::error!(error = %e, %addr, server = what, "cannot bind the admin server"),
    }
}
