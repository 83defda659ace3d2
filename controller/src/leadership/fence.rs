//! The write fence: the API client refuses every write unless this replica leads, judged at
//! the moment the request leaves, by the monotonic clock.
//!
//! A leader frozen (SIGSTOP, a paused VM) past its renew deadline resumes with reconciles in
//! the middle of a pass; the lease loop notices the deadline only when it is scheduled again,
//! and a reconcile task may be scheduled first. The fence does not wait for that: each write
//! compares `Instant::now()` with the deadline the last successful renewal set, so a write
//! issued after the deadline fails without reaching the API server. Reads (GET, including
//! watches) always pass: a standby keeps its caches warm.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::{Either, Ready, ready};
use tower_layer::Layer;
use tower_service::Service;

/// Until when this replica may write; shared by the lease loop and the client's layer.
#[derive(Clone, Debug, Default)]
pub struct Fence(Arc<Mutex<Option<Instant>>>);

impl Fence {
    /// Writes may leave until `deadline` (a renewal moved it on).
    pub fn open_until(&self, deadline: Instant) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(deadline);
    }

    /// No write leaves any more: the lead ended or is being handed back.
    pub fn close(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether a write may leave now.
    pub fn is_open(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|deadline| Instant::now() < deadline)
    }
}

/// The error of a write the fence kept back.
#[derive(Debug, thiserror::Error)]
#[error(
    "not leading (the leader-election lease was not renewed in time): {method} {path} was not sent"
)]
pub struct NotLeading {
    method: http::Method,
    path: String,
}

/// The layer over the API client's stack; without a fence (no leader election) every request
/// passes.
#[derive(Clone, Debug)]
pub struct FenceLayer(pub Option<Fence>);

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced {
            inner,
            fence: self.0.clone(),
        }
    }
}

/// The service: a write passes only through an open fence.
#[derive(Clone, Debug)]
pub struct Fenced<S> {
    inner: S,
    fence: Option<Fence>,
}

/// Whether a request only reads.
fn reads_only(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

impl<S, B> Service<http::Request<B>> for Fenced<S>
where
    S: Service<http::Request<B>>,
    S::Error: From<NotLeading>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<Ready<Result<S::Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if reads_only(request.method()) || self.fence.as_ref().is_none_or(Fence::is_open) {
            return Either::Right(self.inner.call(request));
        }
        let refused = NotLeading {
            method: request.method().clone(),
            path: request.uri().path().to_owned(),
        };
        tracing::warn!(error = %refused, "a write was kept back");
        Either::Left(ready(Err(refused.into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_fence_opens_until_its_deadline_and_closes_for_good() {
        let fence = Fence::default();
        assert!(!fence.is_open(), "a standby writes nothing");
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(fence.is_open());
        fence.open_until(Instant::now() - Duration::from_millis(1));
        assert!(!fence.is_open(), "past the renew deadline");
        fence.open_until(Instant::now() + Duration::from_secs(60));
        fence.close();
        assert!(!fence.is_open());
    }

    #[test]
    fn only_reads_pass_a_closed_fence() {
        assert!(reads_only(&http::Method::GET));
        for write in [
            http::Method::POST,
            http::Method::PUT,
            http::Method::PATCH,
            http::Method::DELETE,
        ] {
            assert!(!reads_only(&write), "{write}");
        }
    }
}
