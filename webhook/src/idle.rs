//! The requests in flight on one connection, and whether it has had none for a while.
//!
//! Why: an open connection costs memory (its TLS state, its HTTP/2 windows) and holds one of
//! the server's connection slots. HTTP/1 already closes a connection that sends no request
//! head within the head deadline, but HTTP/2 has no idle timeout of its own (its pings only
//! find a dead peer), and a connection that sends nothing after the TLS handshake waits
//! forever for the protocol preface. The server closes a connection idle this long
//! gracefully (HTTP/2: GOAWAY), so an API server that comes back just opens a new one.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// The requests in flight on one connection, and since when it has had none.
pub struct Activity {
    in_flight: watch::Sender<usize>,
    /// When the last request in flight ended (or the connection was accepted); `None` while a
    /// request is in flight. What the connection slots evict by (`slots`).
    quiet_since: Mutex<Option<Instant>>,
}

/// One request in flight, counted until dropped.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        let mut quiet_since = activity.quiet();
        activity.in_flight.send_modify(|n| {
            *n -= 1;
            if *n == 0 {
                *quiet_since = Some(Instant::now());
            }
        });
    }
}

impl Activity {
    /// A connection accepted now, with nothing in flight yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            in_flight: watch::Sender::new(0),
            quiet_since: Mutex::new(Some(Instant::now())),
        })
    }

    fn quiet(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.quiet_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a request in flight until the returned guard drops.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        let mut quiet_since = self.quiet();
        self.in_flight.send_modify(|n| *n += 1);
        *quiet_since = None;
        InFlight(self.clone())
    }

    /// Since when nothing has been in flight; `None` while a request is.
    pub fn quiet_since(&self) -> Option<Instant> {
        *self.quiet()
    }

    /// Resolves once no request has been in flight for `timeout`: the clock starts when the
    /// last request in flight ends (or now, with none), and a request starting stops it.
    pub async fn idle_for(&self, timeout: Duration) {
        let mut in_flight = self.in_flight.subscribe();
        loop {
            if *in_flight.borrow_and_update() > 0 {
                // Cannot fail: `self` holds the sender.
                let _ = in_flight.changed().await;
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(timeout) => return,
                _ = in_flight.changed() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn idle_after_the_timeout_with_nothing_in_flight() {
        let activity = Activity::new();
        let started = tokio::time::Instant::now();
        activity.idle_for(IDLE).await;
        assert_eq!(started.elapsed(), IDLE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_it_open_and_the_clock_restarts_when_it_ends() {
        let activity = Activity::new();
        let request = activity.begin();
        let started = tokio::time::Instant::now();
        let idle = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(IDLE).await }
        });
        // Ten timeouts with the request in flight: not idle.
        tokio::time::sleep(IDLE * 10).await;
        assert!(!idle.is_finished());
        drop(request);
        idle.await.unwrap();
        assert_eq!(started.elapsed(), IDLE * 11);
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_since_the_accept_or_the_last_request_and_not_while_one_is_in_flight() {
        let accepted = Instant::now();
        let activity = Activity::new();
        assert_eq!(activity.quiet_since(), Some(accepted));
        tokio::time::sleep(IDLE).await;
        let first = activity.begin();
        let second = activity.begin();
        assert_eq!(activity.quiet_since(), None);
        drop(first);
        assert_eq!(activity.quiet_since(), None, "one still in flight");
        tokio::time::sleep(IDLE).await;
        drop(second);
        assert_eq!(activity.quiet_since(), Some(accepted + IDLE * 2));
    }

    #[tokio::test(start_paused = true)]
    async fn each_request_restarts_the_clock() {
        let activity = Activity::new();
        let started = tokio::time::Instant::now();
        let idle = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(IDLE).await }
        });
        for _ in 0..3 {
            tokio::time::sleep(IDLE / 2).await;
            drop(activity.begin());
        }
        idle.await.unwrap();
        assert_eq!(started.elapsed(), IDLE / 2 * 3 + IDLE);
    }
}
