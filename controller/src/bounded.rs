//! A bound on every Kubernetes request the controller sends (kube's client has none: without a
//! read timeout a request to a stopped or black-holed API server waits forever, and the pass
//! that sent it holds its reconcile slot with it).
//!
//! - A request (its answer and its whole body) must finish within the request timeout.
//! - A watch must answer within the request timeout, and its body may then stay silent for at
//!   most [`WATCH_SILENCE`]: the API server ends every watch after about five minutes (kube's
//!   watcher asks for 290 s), so a longer silence means a connection that died without a word,
//!   and the watcher re-lists instead of serving a cache that no longer moves.
//!
//! An [`Answering`] record, when given, learns of every answer and every timeout: a target
//! cluster that stops answering is marked silent (and stops resolving) until a probe gets an
//! answer again.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

/// The default request timeout (`--request-timeout-seconds`): far above an API server's answer
/// under load, far below a pass deadline.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(200);

/// The longest a watch body may stay silent: above the API server's own watch timeout.
pub const WATCH_SILENCE: Duration = Duration::from_secs(330);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Whether a cluster answers: told of every answer and every timeout of its client.
#[derive(Debug)]
pub struct Answering {
    silent_since: tokio::sync::watch::Sender<Option<std::time::SystemTime>>,
}

impl Default for Answering {
    fn default() -> Self {
        Self {
            silent_since: tokio::sync::watch::Sender::new(None),
        }
    }
}

impl Answering {
    /// A request got an answer (or a watch a frame).
    pub fn answered(&self) {
        self.silent_since
            .send_if_modified(|since| since.take().is_some());
    }

    /// A request got no answer in time.
    pub fn timed_out(&self) {
        self.silent_since.send_if_modified(|since| {
            let first = since.is_none();
            since.get_or_insert_with(std::time::SystemTime::now);
            first
        });
    }

    /// Since when the cluster has not answered, while it does not.
    pub fn silent_since(&self) -> Option<std::time::SystemTime> {
        *self.silent_since.borrow()
    }

    /// Resolves once the cluster is silent.
    pub async fn fell_silent(&self) {
        let mut rx = self.silent_since.subscribe();
        let _ = rx.wait_for(Option::is_some).await;
    }
}

/// The layer: `timeout` per request, reporting to `answering` when given.
#[derive(Clone, Debug)]
pub struct RequestTimeoutLayer {
    timeout: Duration,
    watch_silence: Duration,
    answering: Option<Arc<Answering>>,
}

impl RequestTimeoutLayer {
    /// Every request bounded by `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            watch_silence: WATCH_SILENCE,
            answering: None,
        }
    }

    /// A watch's body may stay silent for `silence` ([`WATCH_SILENCE`] unless set).
    pub fn watch_silence(mut self, silence: Duration) -> Self {
        self.watch_silence = silence;
        self
    }

    /// Also tells `answering` of every answer and timeout.
    pub fn reporting(mut self, answering: Arc<Answering>) -> Self {
        self.answering = Some(answering);
        self
    }
}

impl<S> Layer<S> for RequestTimeoutLayer {
    type Service = RequestTimeout<S>;

    fn layer(&self, inner: S) -> RequestTimeout<S> {
        RequestTimeout {
            inner,
            timeout: self.timeout,
            watch_silence: self.watch_silence,
            answering: self.answering.clone(),
        }
    }
}

/// The service of [`RequestTimeoutLayer`].
#[derive(Clone, Debug)]
pub struct RequestTimeout<S> {
    inner: S,
    timeout: Duration,
    watch_silence: Duration,
    answering: Option<Arc<Answering>>,
}

/// Whether a request is a watch: its body is a stream of events, bounded by silence.
fn is_watch<B>(request: &Request<B>) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

/// The error of a request that got no answer in time.
#[derive(Debug, thiserror::Error)]
#[error("the API server did not answer within {0:?}")]
pub struct NoAnswer(Duration);

impl<S, Req, B> Service<Request<Req>> for RequestTimeout<S>
where
    S: Service<Request<Req>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body,
{
    type Response = Response<Bounded<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Req>) -> Self::Future {
        let timeout = self.timeout;
        let deadline = Instant::now() + timeout;
        let body_bound = if is_watch(&request) {
            Bound::Silence(self.watch_silence)
        } else {
            Bound::Deadline
        };
        let answering = self.answering.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout_at(deadline, answer).await {
                Ok(Ok(response)) => {
                    if let Some(a) = &answering {
                        a.answered();
                    }
                    let limit = match body_bound {
                        Bound::Silence(silence) => Instant::now() + silence,
                        Bound::Deadline => deadline,
                    };
                    Ok(response.map(|body| Bounded {
                        inner: Box::pin(body),
                        sleep: Box::pin(tokio::time::sleep_until(limit)),
                        bound: body_bound,
                        timeout,
                        answering,
                    }))
                }
                Ok(Err(e)) => Err(e.into()),
                Err(_) => {
                    if let Some(a) = &answering {
                        a.timed_out();
                    }
                    Err(NoAnswer(timeout).into())
                }
            }
        })
    }
}

/// How a body is bounded.
#[derive(Clone, Copy, Debug)]
enum Bound {
    /// By the request's deadline.
    Deadline,
    /// By the silence between frames.
    Silence(Duration),
}

/// A response body that ends with an error at its bound.
pub struct Bounded<B> {
    inner: Pin<Box<B>>,
    sleep: Pin<Box<Sleep>>,
    bound: Bound,
    timeout: Duration,
    answering: Option<Arc<Answering>>,
}

impl<B> Body for Bounded<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, BoxError>>> {
        if let Poll::Ready(frame) = self.inner.as_mut().poll_frame(cx) {
            if let (Bound::Silence(silence), Some(Ok(_))) = (self.bound, &frame) {
                self.sleep.as_mut().reset(Instant::now() + silence);
                if let Some(a) = &self.answering {
                    a.answered();
                }
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            if let Some(a) = &self.answering {
                a.timed_out();
            }
            let error: BoxError = match self.bound {
                Bound::Deadline => Box::new(NoAnswer(self.timeout)),
                Bound::Silence(silence) => {
                    format!("the watch was silent for {silence:?}; the connection is presumed dead")
                        .into()
                }
            };
            return Poll::Ready(Some(Err(error)));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use futures::StreamExt;
    use futures::stream::BoxStream;
    use http_body_util::{BodyExt, Full, StreamBody};

    type Stalling = StreamBody<BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

    /// A service answering after `delay` with the body `body` makes.
    #[derive(Clone)]
    struct Slow<B> {
        delay: Duration,
        body: fn() -> B,
    }

    impl<B: Send + 'static> Service<Request<()>> for Slow<B> {
        type Response = Response<B>;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Response<B>, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            let (delay, body) = (self.delay, (self.body)());
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok(Response::new(body))
            })
        }
    }

    fn request(query: &str) -> Request<()> {
        Request::get(format!("https://api.test/api/v1/pods{query}"))
            .body(())
            .expect("request")
    }

    fn small() -> Full<Bytes> {
        Full::new(Bytes::from_static(b"{}"))
    }

    /// A body that sends one frame and then nothing.
    fn stalling() -> Stalling {
        let first = futures::stream::once(async { Ok(Frame::data(Bytes::from_static(b"{"))) });
        StreamBody::new(first.chain(futures::stream::pending()).boxed())
    }

    #[tokio::test]
    async fn an_answer_in_time_passes_and_clears_the_silence() {
        let answering = Arc::new(Answering::default());
        answering.timed_out();
        let layer =
            RequestTimeoutLayer::new(Duration::from_millis(200)).reporting(answering.clone());
        let mut svc = layer.layer(Slow {
            delay: Duration::from_millis(1),
            body: small,
        });
        let response = svc.call(request("")).await.expect("answered in time");
        let body = response.into_body().collect().await.expect("body");
        assert_eq!(body.to_bytes(), Bytes::from_static(b"{}"));
        assert_eq!(answering.silent_since(), None);
    }

    #[tokio::test]
    async fn no_answer_in_time_fails_the_request_and_marks_the_cluster_silent() {
        let answering = Arc::new(Answering::default());
        let layer =
            RequestTimeoutLayer::new(Duration::from_millis(200)).reporting(answering.clone());
        let mut svc = layer.layer(Slow {
            delay: Duration::from_secs(60),
            body: small,
        });
        let error = svc.call(request("")).await.err().expect("timed out");
        assert_eq!(
            error.to_string(),
            "the API server did not answer within 200ms"
        );
        assert!(answering.silent_since().is_some());
    }

    #[tokio::test]
    async fn a_body_that_stalls_fails_at_the_requests_deadline() {
        let mut svc = RequestTimeoutLayer::new(Duration::from_millis(200)).layer(Slow {
            delay: Duration::from_millis(1),
            body: stalling,
        });
        let response = svc.call(request("?limit=500")).await.expect("headers");
        let mut body = response.into_body();
        assert!(body.frame().await.expect("a frame").is_ok());
        let error = body.frame().await.expect("an end").expect_err("stalled");
        assert_eq!(
            error.to_string(),
            "the API server did not answer within 200ms"
        );
    }

    #[tokio::test]
    async fn a_watch_may_stay_silent_until_its_silence_bound() {
        let layer = RequestTimeoutLayer::new(Duration::from_millis(200))
            .watch_silence(Duration::from_millis(300));
        let mut svc = layer.layer(Slow {
            delay: Duration::from_millis(1),
            body: stalling,
        });
        let response = svc
            .call(request("?watch=true&timeoutSeconds=290"))
            .await
            .expect("headers");
        let mut body = response.into_body();
        assert!(body.frame().await.expect("a frame").is_ok());
        let error = body.frame().await.expect("an end").expect_err("silent");
        assert_eq!(
            error.to_string(),
            "the watch was silent for 300ms; the connection is presumed dead"
        );
    }
}
