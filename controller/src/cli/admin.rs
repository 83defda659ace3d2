//! The admin HTTP servers beside the controllers: /metrics for Prometheus, /healthz and
//! /readyz for the kubelet's probes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use nova_controller::metrics::Metrics;
use nova_controller::progress::Progress;

/// Serves /metrics at `addr`.
pub async fn serve_metrics(addr: SocketAddr, metrics: Metrics) {
    let app = Router::new().route("/metrics", get(move || async move { metrics.render() }));
    serve(addr, app, "metrics").await;
}

/// Serves /healthz and /readyz at `addr`: live unless a pass has been in flight for
/// `stall_after`; ready once `ready` is set.
pub async fn serve_health(
    addr: SocketAddr,
    ready: Arc<AtomicBool>,
    progress: Progress,
    stall_after: Duration,
) {
    let app = Router::new()
        .route(
            "/healthz",
            get(move || async move {
                match progress.stalled(stall_after) {
                    None => (StatusCode::OK, "ok".to_owned()),
                    Some(why) => {
                        tracing::error!(%why, "liveness fails");
                        (StatusCode::SERVICE_UNAVAILABLE, why)
                    }
                }
            }),
        )
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
