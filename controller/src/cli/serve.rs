//! The controller run (the default command): the API clients, the watch caches, the target
//! clusters, both controllers and the admin servers, under leader election unless disabled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use kube::client::ClientBuilder;
use kube::{Api, Client, Config};
use nova_api::logging;
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_controller::bounded::RequestTimeoutLayer;
use nova_controller::clusters::{ABANDON_AFTER, Fleet, KubeCluster, Registry, availability};
use nova_controller::crd_currency::{self, Notice};
use nova_controller::leadership::{self, Fence, FenceLayer};
use nova_controller::metrics::Metrics;
use nova_controller::openstack::trust::{self, CaBundle, Trust};
use nova_controller::ratelimit::RateLimitLayer;
use nova_controller::{nova, novacompute};
use tokio::sync::watch;

use super::admin;
use super::flags::Flags;

/// The log filter when neither --log-filter-file nor RUST_LOG gives one.
const LOG_FILTER: &str = "info,kube=warn";

/// How long a shutdown waits for in-flight reconciles before the lease is handed back (inside
/// the pod's default 30 s grace period).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs both controllers until a shutdown is requested or the lead is lost.
pub async fn run(flags: Flags) -> anyhow::Result<()> {
    logging::install(
        flags.log_format.output(),
        flags.log_filter_file.clone(),
        LOG_FILTER,
    );
    rustls::crypto::ring::default_provider()
        .install_default()
        .map_err(|_| anyhow::anyhow!("installing the rustls crypto provider failed"))?;

    let extra_ca = (flags.ca_file.as_deref())
        .map(CaBundle::from_file)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--ca-file: {e}"))?;
    tracing::info!(
        system_roots = trust::system_root_count(),
        ca_file_certificates = extra_ca.as_ref().map_or(0, CaBundle::len),
        "https OpenStack endpoints are verified against the system roots and --ca-file"
    );
    let request_timeout = Duration::from_secs(flags.request_timeout_seconds);
    let mut config = config(&flags).await?;
    // The API server's audit log tells which replica sent a request.
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&user_agent())?,
    ));
    // Under leader election every write passes the fence, open only while this replica leads.
    let fence = Fence::default();
    // kube's own retries of 429, 503 and 504 run beneath every layer added here, so a retry
    // would go out unfenced, after the lead ended (the frozen-leader drill caught one). Off:
    // a failed pass is retried under the back-off, through the fence.
    let mut reconcile_config = config.clone();
    reconcile_config.default_retry = !flags.leader_elect;
    let client = ClientBuilder::try_from(reconcile_config)?
        .with_layer(&RequestTimeoutLayer::new(request_timeout))
        .with_layer(&RateLimitLayer::new(flags.client_qps, flags.client_burst))
        .with_layer(&FenceLayer(flags.leader_elect.then(|| fence.clone())))
        .build();
    // Leader election has a client of its own, outside the rate limit: a renewal queued behind
    // a burst of reconcile requests could miss its deadline and end the lead. The lease loop
    // bounds each of its requests itself (`leadership`, 5 s and what is left of the deadline).
    let lease_client = Client::try_from(config)?;
    let scope = (!flags.namespace.is_empty()).then(|| flags.namespace.clone());
    probe_crds(&client, scope.as_deref()).await?;
    let metrics = Metrics::new().context("registering metrics")?;
    let crds = crd_currency::check(&client).await;
    crd_currency::report(&metrics, &crds);
    let ready = Arc::new(AtomicBool::new(false));
    tokio::spawn(admin::serve_metrics(
        flags.metrics_bind_address,
        metrics.clone(),
    ));
    tokio::spawn(admin::serve_health(
        flags.health_probe_bind_address,
        ready.clone(),
        metrics.progress.clone(),
        Duration::from_secs(flags.stall_after_seconds),
    ));

    // The caches start on every replica, so a standby is warm when it takes over; the
    // replica is ready once every watch cache holds its first complete list.
    let registry = Registry::default()
        .register(nova::controller::kinds())
        .register(novacompute::controller::kinds())
        .probe_services_at(flags.health_check_address)
        .route_services(flags.service_routes.iter().cloned().collect())
        .trust(Trust::system_and(extra_ca));
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
            request_timeout,
        )
    });
    if let Some(targets) = &targets {
        availability::register(&metrics.registry, targets)
            .context("registering the target clusters' metrics")?;
    } else {
        tracing::info!(
            "target clusters are disabled (--clusters-namespace is empty); every targetClusterRef waits"
        );
    }
    let options = nova::controller::Options {
        scope: scope.clone(),
        concurrency: flags.max_concurrent_reconciles,
        instance: Some(hostname()),
        targets: targets.clone(),
        pass_deadline: Duration::from_secs(flags.pass_deadline_seconds),
        crd: Arc::new(Notice::of::<Nova>(&crds)),
    };
    let pool_options = novacompute::controller::Options {
        scope,
        concurrency: flags.max_concurrent_reconciles,
        instance: Some(hostname()),
        targets: targets.clone(),
        pass_deadline: Duration::from_secs(flags.pass_deadline_seconds),
        crd: Arc::new(Notice::of::<NovaCompute>(&crds)),
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
    lead(&flags, lease_client, fence, &metrics, controllers, stop_rx).await
}

/// Runs `controllers` once this replica holds the lease; ends when they stop after a shutdown
/// (handing the lease back) or when the lead ends (the fence already closed).
async fn lead(
    flags: &Flags,
    lease_client: Client,
    fence: Fence,
    metrics: &Metrics,
    controllers: impl Future<Output = ()>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let settings = leadership::Settings {
        namespace: lease_namespace(flags),
        name: flags.leader_election_id.clone(),
        identity: hostname(),
    };
    let mut elector = leadership::Elector::new(lease_client, settings, fence);
    tracing::info!(lease = %flags.leader_election_id, "waiting for leadership");
    tokio::select! {
        () = elector.acquire() => {}
        () = stopped(stop.clone()) => {
            // An acquisition cut short may have landed: hand back what this replica holds.
            elector.release().await;
            return Ok(());
        }
    }
    tracing::info!("acquired leadership; reconciling");
    metrics.leader.set(1);
    tokio::select! {
        () = drained(controllers, stop) => {
            tracing::info!("controllers stopped");
            elector.release().await;
            metrics.leader.set(0);
            Ok(())
        }
        why = elector.hold() => {
            // Another replica may take the lease from now on: stop at once rather than race it.
            metrics.leader.set(0);
            anyhow::bail!(
                "stopped leading ({why:?}: the lease was not renewed within its deadline, or another replica holds it); exiting so a standby takes over"
            )
        }
    }
}

/// Resolves once `controllers` stopped: on their own, or after a shutdown request, within
/// [`DRAIN_TIMEOUT`] (the fence keeps back any write of a reconcile still running then).
async fn drained(controllers: impl Future<Output = ()>, stop: watch::Receiver<bool>) {
    let mut controllers = std::pin::pin!(controllers);
    tokio::select! {
        () = &mut controllers => return,
        () = stopped(stop) => {}
    }
    if tokio::time::timeout(DRAIN_TIMEOUT, controllers)
        .await
        .is_err()
    {
        tracing::warn!(
            "reconciles still ran {DRAIN_TIMEOUT:?} after the shutdown request; handing the lease back without waiting for them"
        );
    }
}

/// Resolves once a shutdown was requested.
async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
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

/// `nova-controller/<version> (<identity>)`.
fn user_agent() -> String {
    format!(
        "nova-controller/{} ({})",
        env!("CARGO_PKG_VERSION"),
        hostname()
    )
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
