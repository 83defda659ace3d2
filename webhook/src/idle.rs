//! The requests in flight on one connection, and whether it has had none for a while.
//!
//! Why: an open connection costs memory (its TLS state, its HTTP/2 windows) and holds one of
//! the server's connection slots. HTTP/1 already closes a connection that sends no request
//! head within the head deadline, but HTTP/2 has no idle timeout of its own (its pings only
//! find a dead peer), and a connection that sends nothing after the TLS handshake waits
//! forever for the protocol preface. The server closes a connection idle this long
//! gracefully (HTTP/2: GOAWAY), so an API server that comes back just opens a new one.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// The requests in flight on one connection.
pub struct Activity(watch::Sender<usize>);

/// One request in flight, counted until dropped.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.0.send_modify(|n| *n -= 1);
    }
}

impl Activity {
    /// A connection with nothing in flight yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self(watch::Sender::new(0)))
    }

    /// Counts a request in flight until the returned guard drops.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.0.send_modify(|n| *n += 1);
        InFlight(self.clone())
    }

    /// Resolves once no request has been in flight for `timeout`: the clock starts when the
    /// last request in flight ends (or now, with none), and a request starting stops it.
    pub async fn idle_for(&self, timeout: Duration) {
        let mut in_flight = self.0.subscribe();
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
