//! The HTTPS admission server and the plain-HTTP health and metrics server.
//!
//! Limits: the body is capped (the API server's own 3 MiB object limit), the request head and
//! the body each have a read deadline, a TLS handshake has a deadline, and a plain-HTTP client
//! on the TLS port gets a 400 instead of a silent close. On shutdown the listener closes first
//! and in-flight reviews finish (bounded by a drain deadline).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::metrics::Metrics;
use crate::review::{self, Resolver, Webhook};
use crate::tls::CertStore;

/// The largest admission body read (the API server's own object limit).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Deadlines and bounds of the admission server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The longest a client may take to send the request head.
    pub header_read_timeout: Duration,
    /// The longest a client may take to send the body.
    pub body_read_timeout: Duration,
    /// The longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// The longest in-flight requests may run after shutdown starts.
    pub drain_timeout: Duration,
    /// The body cap.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(25),
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

/// What the admission handlers share.
pub struct AppState<R> {
    /// The lookups through the API server.
    pub resolver: R,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The limits.
    pub limits: Limits,
}

/// The admission router: the four webhook paths.
pub fn admission_router<R: Resolver + Send + Sync + 'static>(state: Arc<AppState<R>>) -> Router {
    let mut router = Router::new();
    for webhook in Webhook::ALL {
        router = router.route(
            webhook.path,
            post(
                move |State(state): State<Arc<AppState<R>>>, req: Request<Body>| async move {
                    admit(webhook, state, req).await
                },
            ),
        );
    }
    router.with_state(state)
}

fn plain(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        message.into(),
    )
        .into_response()
}

async fn admit<R: Resolver + Send + Sync + 'static>(
    webhook: Webhook,
    state: Arc<AppState<R>>,
    req: Request<Body>,
) -> Response {
    let started = Instant::now();
    let path = webhook.path;
    let limits = state.limits;
    let body = match tokio::time::timeout(
        limits.body_read_timeout,
        axum::body::to_bytes(req.into_body(), limits.max_body_bytes),
    )
    .await
    {
        Err(_) => {
            state.metrics.observe(
                path,
                "unknown",
                "bad_request",
                started.elapsed().as_secs_f64(),
            );
            return plain(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            );
        }
        Ok(Err(_)) => {
            state.metrics.observe(
                path,
                "unknown",
                "bad_request",
                started.elapsed().as_secs_f64(),
            );
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body exceeds {} bytes or could not be read",
                    limits.max_body_bytes
                ),
            );
        }
        Ok(Ok(b)) => b,
    };
    let handled = review::handle(webhook, &body, &state.resolver).await;
    let outcome = handled
        .response
        .as_ref()
        .map_or("bad_request", review::Response::outcome);
    state.metrics.observe(
        path,
        &handled.operation,
        outcome,
        started.elapsed().as_secs_f64(),
    );
    let status = StatusCode::from_u16(handled.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status == StatusCode::OK {
        (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            handled.body,
        )
            .into_response()
    } else {
        plain(status, String::from_utf8_lossy(&handled.body).into_owned())
    }
}

/// The health and metrics router: `/metrics`, `/healthz`, `/readyz` (ready once a certificate
/// is loaded).
pub fn admin_router(metrics: Arc<Metrics>, store: Arc<CertStore>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            HeaderValue::from_static("text/plain; version=0.0.4"),
                        )],
                        metrics.render(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let store = store.clone();
                async move {
                    if store.is_loaded() {
                        (StatusCode::OK, "ok")
                    } else {
                        (
                            StatusCode::SERVICE_UNAVAILABLE,
                            "no serving certificate loaded",
                        )
                    }
                }
            }),
        )
}

/// Serves `router` over plain HTTP until `shutdown` resolves.
pub async fn serve_plain(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

/// The answer Go's net/http gives a plain-HTTP request on a TLS port.
const PLAIN_HTTP_ON_TLS: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// Serves `router` over TLS until `shutdown` resolves, then drains in-flight connections;
/// counts the connections in `metrics`.
pub async fn serve_tls(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    router: Router,
    limits: Limits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)));
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let connection = Connection {
            acceptor: acceptor.clone(),
            router: router.clone(),
            builder: builder.clone(),
            watcher: graceful.watcher(),
            limits,
            metrics: metrics.clone(),
        };
        tokio::spawn(connection.serve(stream, peer));
    }
    drop(listener);
    tracing::info!(
        in_flight = graceful.count(),
        "admission listener closed; draining in-flight requests"
    );
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all admission connections drained"),
        _ = tokio::time::sleep(limits.drain_timeout) => tracing::warn!("drain deadline passed; closing the remaining connections"),
    }
}

/// What serving one accepted connection needs.
struct Connection {
    acceptor: TlsAcceptor,
    router: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    watcher: hyper_util::server::graceful::Watcher,
    limits: Limits,
    metrics: Arc<Metrics>,
}

impl Connection {
    async fn serve(self, mut stream: tokio::net::TcpStream, peer: SocketAddr) {
        let limits = self.limits;
        let _ = stream.set_nodelay(true);
        // A TLS handshake opens with a handshake record (0x16); an ASCII letter is a plain HTTP
        // request on the TLS port.
        let mut first = [0u8; 1];
        match tokio::time::timeout(limits.handshake_timeout, stream.peek(&mut first)).await {
            Ok(Ok(1)) if first[0].is_ascii_uppercase() => {
                let _ = stream.write_all(PLAIN_HTTP_ON_TLS).await;
                let _ = stream.shutdown().await;
                tracing::debug!(%peer, "plain HTTP on the TLS port");
                return;
            }
            Ok(Ok(_)) => {}
            _ => return,
        }
        let tls = match tokio::time::timeout(limits.handshake_timeout, self.acceptor.accept(stream))
            .await
        {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        };
        let _open = self
            .metrics
            .connection_opened(tls.get_ref().1.alpn_protocol());
        let service = TowerToHyperService::new(self.router);
        let conn = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(tls), service)
            .into_owned();
        if let Err(e) = self.watcher.watch(conn).await {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        }
    }
}
