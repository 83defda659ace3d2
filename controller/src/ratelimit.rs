//! A client-side token bucket for the API client (`--client-qps`, `--client-burst`): a
//! request may start when a token is free; tokens refill at `qps` per second up to `burst`.
//! Off by default (`--client-qps 0`: the API server's Priority and Fairness queues the client
//! instead); when set, it bounds what a runaway loop, or a restart warming every cache at
//! once, can send. (tower's own `RateLimit` is a fixed window with no burst, hence this small
//! layer.)

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

/// The bucket's arithmetic, kept apart from time so it is tested without waiting.
#[derive(Clone, Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(qps: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token, or says how long until one is free.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The layer; `qps` of zero (or less) disables limiting.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    qps: f64,
    burst: u32,
}

impl RateLimitLayer {
    /// At most `qps` requests per second on average, `burst` at once.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self { qps, burst }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: (self.qps > 0.0).then(|| Bucket::new(self.qps, self.burst, Instant::now())),
            sleep: None,
            granted: false,
        }
    }
}

/// The service: waits in `poll_ready` until a token is free.
pub struct RateLimit<S> {
    inner: S,
    bucket: Option<Bucket>,
    sleep: Option<Pin<Box<Sleep>>>,
    granted: bool,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(bucket) = &mut self.bucket {
            while !self.granted {
                if let Some(sleep) = &mut self.sleep {
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    self.sleep = None;
                }
                match bucket.take(Instant::now()) {
                    Ok(()) => self.granted = true,
                    Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.granted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_steady_rate() {
        let start = Instant::now();
        let mut bucket = Bucket::new(10.0, 3, start);
        for _ in 0..3 {
            assert_eq!(bucket.take(start), Ok(()));
        }
        let wait = bucket.take(start).expect_err("the burst is spent");
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(bucket.take(start + Duration::from_millis(100)), Ok(()));
        assert!(bucket.take(start + Duration::from_millis(100)).is_err());
        assert_eq!(
            bucket.take(start + Duration::from_secs(60)),
            Ok(()),
            "refills up to the burst"
        );
        assert_eq!(bucket.take(start + Duration::from_secs(60)), Ok(()));
        assert_eq!(bucket.take(start + Duration::from_secs(60)), Ok(()));
        assert!(bucket.take(start + Duration::from_secs(60)).is_err());
    }
}
