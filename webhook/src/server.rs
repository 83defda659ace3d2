//! The HTTPS admission server and the plain-HTTP health and metrics server.
//!
//! Limits: the body is capped (the API server's own 3 MiB object limit), the request head and
//! the body each have a read deadline, a TLS handshake has a deadline, and a plain-HTTP client
//! on the TLS port gets a 400 instead of a silent close. On shutdown the listener closes first
//! and in-flight reviews finish (bounded by a drain deadline).
//!
//! What keeps the server inside its memory limit (the chart's 128 Mi) under any mix of
//! connections, streams and bodies: a cap on open connections (one over it is reset on accept),
//! a cap on each HTTP/2 connection's concurrent streams and small flow-control windows (what a
//! connection may have sent that nobody reads yet), a cap on the request head, an idle timeout,
//! and one budget of memory shared by all reviews in progress, their bodies and what decoding
//! them costs (`budget`). The defaults and the memory they add up to are in `limits` and the
//! README.

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
use futures::StreamExt as _;
use hyper::service::Service as _;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::budget::{self, ReviewBudget};
use crate::limits::Limits;
use crate::metrics::{Metrics, Rejected};
use crate::review::{self, Resolver, Webhook};
use crate::slots::{Slot, Slots};
use crate::tls::CertStore;

/// The HTTP/2 frame size the server accepts: the protocol's minimum (and default); larger
/// frames would only let one frame hold more of a connection's buffer.
const HTTP2_MAX_FRAME_BYTES: u32 = 16 * 1024;

/// The smallest HTTP/1 read buffer hyper takes.
const HTTP1_MIN_READ_BUFFER_BYTES: usize = 8 * 1024;

/// What the admission handlers share.
pub struct AppState<R> {
    /// The lookups through the API server.
    pub resolver: R,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The limits.
    pub limits: Limits,
    /// The review budget, `limits.review_budget_bytes` of it.
    pub budget: Arc<ReviewBudget>,
}

impl<R> AppState<R> {
    /// The state of a server with these limits, its budget shown on `metrics`.
    pub fn new(resolver: R, metrics: Arc<Metrics>, limits: Limits) -> Self {
        let budget = ReviewBudget::new(
            limits.review_budget_bytes,
            metrics.review_budget_used.clone(),
        );
        Self {
            resolver,
            metrics,
            limits,
            budget,
        }
    }
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

/// Reads `body` into a buffer of `capacity` bytes, the length it was charged for; `None` for a
/// body longer than that or one that could not be read.
async fn read_body(body: Body, capacity: usize) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(capacity);
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.ok()?;
        if chunk.len() > capacity - buf.len() {
            return None;
        }
        buf.extend_from_slice(&chunk);
    }
    Some(buf)
}

async fn admit<R: Resolver + Send + Sync + 'static>(
    webhook: Webhook,
    state: Arc<AppState<R>>,
    req: Request<Body>,
) -> Response {
    let started = Instant::now();
    let path = webhook.path;
    let limits = state.limits;
    let refuse = |outcome: &str, status: StatusCode, message: String| {
        state
            .metrics
            .observe(path, "unknown", outcome, started.elapsed().as_secs_f64());
        plain(status, message)
    };
    let too_large = || {
        refuse(
            "bad_request",
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body exceeds {} bytes or could not be read",
                limits.max_body_bytes
            ),
        )
    };
    let declared = axum::body::HttpBody::size_hint(req.body()).upper();
    let Some(bytes) = budget::body_charge(declared, limits.max_body_bytes) else {
        return too_large();
    };
    let busy = || {
        state.metrics.rejected(Rejected::ReviewBudget);
        let mut refused = refuse(
            "unavailable",
            StatusCode::SERVICE_UNAVAILABLE,
            "the webhook is reviewing as many request bodies as its memory allows; retry".into(),
        );
        refused
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        refused
    };
    // Held until the answer is built: the body and its decoded review live as long.
    let memory = bytes.saturating_mul(budget::MEMORY_PER_BODY_BYTE);
    let Some(_share) = state.budget.take(memory, limits.review_budget_wait).await else {
        return busy();
    };
    let body =
        match tokio::time::timeout(limits.body_read_timeout, read_body(req.into_body(), bytes))
            .await
        {
            Err(_) => {
                return refuse(
                    "bad_request",
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time".into(),
                );
            }
            Ok(None) => return too_large(),
            Ok(Some(b)) => b,
        };
    // A body of many tiny values costs more to decode than its length says: the share is
    // topped up to what its structure can cost, before anything is decoded.
    let units = budget::json_units(&body);
    let structure = units.saturating_mul(budget::MEMORY_PER_JSON_UNIT);
    let _more = if structure > memory {
        if structure > limits.review_budget_bytes {
            return refuse(
                "bad_request",
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body holds {} JSON values, more than the webhook decodes at once ({})",
                    units,
                    limits.review_budget_bytes / budget::MEMORY_PER_JSON_UNIT
                ),
            );
        }
        match state
            .budget
            .take(structure - memory, limits.review_budget_wait)
            .await
        {
            Some(more) => Some(more),
            None => return busy(),
        }
    } else {
        None
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
/// is loaded and, in self-signed mode, its CA injected into the webhook configurations).
pub fn admin_router(metrics: Arc<Metrics>, store: Arc<CertStore>) -> Router {
    let metrics_store = store.clone();
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                let served = metrics_store.served();
                async move {
                    metrics.show_served(served.as_ref());
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
                    match store.not_ready() {
                        None => (StatusCode::OK, "ok"),
                        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
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
    let (draining, _) = watch::channel(());
    let slots = Slots::new(limits.max_connections);
    metrics.show_limits(&limits);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(HTTP1_MIN_READ_BUFFER_BYTES.max(limits.max_header_bytes as usize))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .max_concurrent_streams(limits.max_concurrent_streams)
        .initial_stream_window_size(limits.stream_window_bytes)
        .initial_connection_window_size(limits.connection_window_bytes())
        .max_frame_size(HTTP2_MAX_FRAME_BYTES)
        .max_header_list_size(limits.max_header_bytes);
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
        let Some(granted) = slots.admit(peer.ip()) else {
            // A reset rather than a close: the client sees the refusal at once, and no
            // TIME_WAIT socket is left here for each one refused.
            let _ = stream.set_zero_linger();
            metrics.rejected(Rejected::Connection);
            tracing::debug!(%peer, "connection cap reached, every connection busy; connection reset");
            continue;
        };
        if granted.evicted {
            metrics.evicted.inc();
            tracing::debug!(%peer, "connection cap reached; a quiet connection gave its slot");
        }
        let connection = Connection {
            acceptor: acceptor.clone(),
            router: router.clone(),
            builder: builder.clone(),
            draining: draining.subscribe(),
            limits,
            metrics: metrics.clone(),
        };
        tokio::spawn(connection.serve(stream, peer, granted.slot));
    }
    drop(listener);
    tracing::info!(
        in_flight = draining.receiver_count(),
        "admission listener closed; draining in-flight requests"
    );
    let _ = draining.send(());
    tokio::select! {
        () = draining.closed() => tracing::info!("all admission connections drained"),
        () = tokio::time::sleep(limits.drain_timeout) => tracing::warn!("drain deadline passed; closing the remaining connections"),
    }
}

/// What serving one accepted connection needs.
struct Connection {
    acceptor: TlsAcceptor,
    router: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    /// Changes when the server shuts down; held until the connection ends, which is what the
    /// drain waits for.
    draining: watch::Receiver<()>,
    limits: Limits,
    metrics: Arc<Metrics>,
}

impl Connection {
    /// Serves the connection in `slot` until it ends, is evicted or the server drains.
    async fn serve(mut self, stream: tokio::net::TcpStream, peer: SocketAddr, mut slot: Slot) {
        let limits = self.limits;
        // Evicted before a request was ever served: nothing to finish.
        let tls = tokio::select! {
            tls = self.handshake(stream, peer) => match tls {
                Some(tls) => tls,
                None => return,
            },
            _ = &mut slot.evicted => {
                tracing::debug!(%peer, "evicted during its handshake");
                return;
            }
        };
        let _open = self
            .metrics
            .connection_opened(tls.get_ref().1.alpn_protocol());
        let activity = slot.activity.clone();
        let service = {
            let activity = activity.clone();
            let router = TowerToHyperService::new(self.router);
            hyper::service::service_fn(move |req| {
                let in_flight = activity.begin();
                let answer = router.call(req);
                async move {
                    let answer = answer.await;
                    drop(in_flight);
                    answer
                }
            })
        };
        let conn = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(tls), service);
        tokio::pin!(conn);
        let idle = activity.idle_for(limits.idle_timeout);
        tokio::select! {
            ended = conn.as_mut() => return log_end(peer, ended),
            // Also when the sender is gone: the drain deadline passed.
            _ = self.draining.changed() => {}
            () = idle => {
                self.metrics.idle_closed.inc();
                tracing::debug!(%peer, "idle connection closed");
            }
            _ = &mut slot.evicted => {
                // Chosen while quiet: with still nothing in flight, it goes at once (a
                // graceful HTTP/2 close would wait up to the drain deadline for a ping a
                // flooding client need not answer).
                if activity.quiet_since().is_some() {
                    tracing::debug!(%peer, "quiet connection evicted");
                    return;
                }
            }
        }
        // In-flight requests finish; HTTP/2 tells the client with a GOAWAY. Bounded: HTTP/2's
        // graceful close waits for the client to acknowledge a ping, which a client may never do.
        conn.as_mut().graceful_shutdown();
        match tokio::time::timeout(limits.drain_timeout, conn).await {
            Ok(ended) => log_end(peer, ended),
            Err(_) => tracing::debug!(%peer, "connection dropped at the drain deadline"),
        }
    }

    /// The TLS session of an accepted connection; `None` (logged) for a plain HTTP request on
    /// the TLS port, a failed handshake, or one that did not end within the handshake timeout.
    async fn handshake(
        &self,
        mut stream: tokio::net::TcpStream,
        peer: SocketAddr,
    ) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
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
                return None;
            }
            Ok(Ok(_)) => {}
            _ => return None,
        }
        match tokio::time::timeout(limits.handshake_timeout, self.acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Some(tls),
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                None
            }
        }
    }
}

fn log_end<E: std::fmt::Display>(peer: SocketAddr, ended: Result<(), E>) {
    if let Err(e) = ended {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_is_read_into_its_share_and_no_further() {
        let body = || Body::from(vec![b'x'; 1000]);
        let read = read_body(body(), 1000).await.expect("fits exactly");
        assert_eq!((read.len(), read.capacity()), (1000, 1000));
        assert_eq!(read_body(body(), 999).await, None);
        assert_eq!(read_body(Body::empty(), 0).await, Some(Vec::new()));
    }
}
