//! The review budget: one count of memory bytes shared by every connection and stream, which a
//! review takes before its body is read and gives back when it is answered.
//!
//! Why: the body cap bounds one request, not how many arrive at once. Without a shared bound,
//! 4 HTTP/2 connections of 200 streams each POSTing 3 MiB took the server from 10 MiB to
//! 2.4 GiB, far over the chart's 128 Mi memory limit; the kill that follows fails every Nova
//! and NovaCompute write (failurePolicy Fail). With the budget, the reviews in progress
//! together stay under it, whatever the mix of connections and streams.
//!
//! What a review takes: its body's length times `MEMORY_PER_BODY_BYTE`, not just the body.
//! Decoding a review costs a multiple of its body: a 3 MiB Nova whose managedFields hold
//! 1.5 million zeros (each a 32-byte JSON value, 2 bytes in the body) peaked at 17 times the
//! body, the body included; a Nova of 290,000 tiny annotations at 13 times (the `reviews`
//! example under `/usr/bin/time`, 2026-12-06). Counting only the buffered bodies, the 32 MiB
//! of ten such bodies would have decoded into over half a GiB.
//!
//! Who gets bytes as they come back: the waiters in arrival order, each as soon as its own
//! share fits, not strictly the first (a FIFO semaphore would hold a review of a few KiB behind
//! every 3 MiB body queued before it). So the API server's ordinary reviews fit in what large
//! bodies leave over and keep passing while large ones flood in. A large body can lose to
//! smaller ones for as long as they keep coming; its wait is bounded, and it is then answered
//! 503. Only the waiters granted are woken, not all of them at every release.
//!
//! What it does not cover: a denial's answer. A denial names every violation, so a body of many
//! small violations answers with far more than 20 times itself (the README's "Limits that keep
//! admission up").

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus::IntGauge;
use tokio::sync::oneshot;

/// The budget a review takes per byte of its body: the body itself and what decoding it can
/// cost, 17 times the body at most in the measurements above, with a margin.
pub const MEMORY_PER_BODY_BYTE: usize = 20;

/// The budget a review takes per structural unit of its body ([`json_units`]): what one
/// `{}` or one `0,` can cost decoded. A body of many tiny values costs more than its length
/// times [`MEMORY_PER_BODY_BYTE`] says: 3 MiB of `{}` in one list took 148 MiB decoded into
/// tolerations, 199 MiB into topology spread constraints and 245 MiB into pod affinity terms
/// (about 2 million units: up to 117 bytes each; the `reviews` example under
/// `/usr/bin/time`, 2026-12-07), over the chart's 128 Mi limit from one review. 160 bytes a
/// unit, with a margin.
pub const MEMORY_PER_JSON_UNIT: usize = 160;

/// The structural units of a JSON body: its `{`, `[` and `,` outside strings, which bound the
/// values it holds (every value but the first opens a container or follows a comma). One pass,
/// no allocation; a body that is no JSON is counted all the same and refused by its decoding.
pub fn json_units(body: &[u8]) -> usize {
    let mut units = 0;
    let (mut in_string, mut escaped) = (false, false);
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'{' | b'[' | b',' => units += 1,
                _ => {}
            }
        }
    }
    units
}

/// The body length a review is charged for, before its body is read: its declared length
/// (`Content-Length`, over HTTP/1 and HTTP/2 alike), or the whole cap when it declares none (a
/// chunked or unsized body may be anything up to the cap). The body is read into a buffer of
/// exactly this capacity. `None` for a declared length over the cap, which no wait can make
/// fit.
pub fn body_charge(declared: Option<u64>, max_body_bytes: usize) -> Option<usize> {
    match declared {
        None => Some(max_body_bytes),
        Some(n) => usize::try_from(n).ok().filter(|&n| n <= max_body_bytes),
    }
}

/// The shared budget.
pub struct ReviewBudget {
    state: Mutex<State>,
    total: usize,
    /// `nova_webhook_review_budget_used_bytes`: the bytes taken now.
    taken: IntGauge,
}

struct State {
    /// Bytes not taken now.
    free: usize,
    next_id: u64,
    /// The requests waiting, in arrival order.
    waiters: VecDeque<Waiter>,
}

struct Waiter {
    id: u64,
    bytes: usize,
    granted: oneshot::Sender<()>,
}

impl State {
    /// Hands what is free to the waiters, in arrival order, each whose share fits.
    fn grant(&mut self) {
        let mut i = 0;
        while i < self.waiters.len() && self.free > 0 {
            if self.waiters[i].bytes > self.free {
                i += 1;
                continue;
            }
            if let Some(waiter) = self.waiters.remove(i) {
                // The receiver lives as long as its waiter is queued (`Waiting` owns it and
                // leaves the queue under this lock before it goes), so the send arrives.
                let _ = waiter.granted.send(());
                self.free -= waiter.bytes;
            }
        }
    }
}

/// A share of the budget, given back when dropped.
pub struct Share {
    budget: Arc<ReviewBudget>,
    bytes: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// A request waiting for its share. Going away (its wait over, or its request dropped) it
/// leaves the queue, or, granted meanwhile, gives back the share it will not use.
struct Waiting<'a> {
    budget: &'a Arc<ReviewBudget>,
    id: u64,
    bytes: usize,
    granted: oneshot::Receiver<()>,
    used: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.used {
            return;
        }
        let mut state = self.budget.lock();
        match state.waiters.iter().position(|w| w.id == self.id) {
            Some(at) => {
                state.waiters.remove(at);
            }
            // Not queued any more, so granted.
            None => {
                state.free += self.bytes;
                state.grant();
                self.budget.show(&state);
            }
        }
    }
}

impl ReviewBudget {
    /// A budget of `total` bytes, its use shown on `taken`.
    pub fn new(total: usize, taken: IntGauge) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                free: total,
                next_id: 0,
                waiters: VecDeque::new(),
            }),
            total,
            taken,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change to the state is made whole under the lock, so it stays consistent
        // under a panic elsewhere.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn show(&self, state: &State) {
        self.taken
            .set(i64::try_from(self.total - state.free).unwrap_or(i64::MAX));
    }

    fn give_back(&self, bytes: usize) {
        let mut state = self.lock();
        state.free += bytes;
        state.grant();
        self.show(&state);
    }

    /// Takes `bytes`, waiting at most `wait` for them to come free; `None` when they do not,
    /// and at once when `bytes` is over the whole budget.
    pub async fn take(self: &Arc<Self>, bytes: usize, wait: Duration) -> Option<Share> {
        if bytes > self.total {
            return None;
        }
        let mut waiting = {
            let mut state = self.lock();
            if state.free >= bytes {
                state.free -= bytes;
                self.show(&state);
                return Some(self.share(bytes));
            }
            let (tx, rx) = oneshot::channel();
            let id = state.next_id;
            state.next_id += 1;
            state.waiters.push_back(Waiter {
                id,
                bytes,
                granted: tx,
            });
            Waiting {
                budget: self,
                id,
                bytes,
                granted: rx,
                used: false,
            }
        };
        match tokio::time::timeout(wait, &mut waiting.granted).await {
            Ok(Ok(())) => {
                waiting.used = true;
                Some(self.share(bytes))
            }
            _ => None,
        }
    }

    fn share(self: &Arc<Self>, bytes: usize) -> Share {
        Share {
            budget: self.clone(),
            bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: usize) -> Arc<ReviewBudget> {
        ReviewBudget::new(total, IntGauge::new("taken", "taken").unwrap())
    }

    #[test]
    fn the_units_are_containers_and_separators_outside_strings() {
        assert_eq!(json_units(b""), 0);
        assert_eq!(json_units(b"0"), 0);
        assert_eq!(json_units(br#"{"a":[{},{},{}]}"#), 7);
        assert_eq!(json_units(br#"{"a":"{[,]}","b":"\",{"}"#), 2);
        assert_eq!(json_units(br#"["\\",{}]"#), 3);
    }

    #[test]
    fn the_body_charged_is_the_declared_length_or_the_cap() {
        assert_eq!(body_charge(Some(1200), 3000), Some(1200));
        assert_eq!(body_charge(Some(3000), 3000), Some(3000));
        assert_eq!(body_charge(Some(0), 3000), Some(0));
        assert_eq!(body_charge(None, 3000), Some(3000));
        assert_eq!(body_charge(Some(3001), 3000), None);
        assert_eq!(body_charge(Some(u64::MAX), 3000), None);
    }

    /// Takes `bytes` if they are free now.
    async fn now(b: &Arc<ReviewBudget>, bytes: usize) -> Option<Share> {
        b.take(bytes, Duration::ZERO).await
    }

    /// A task waiting up to a minute for `bytes` (true when granted), queued when this
    /// returns; the share goes back when the task ends.
    async fn waiter(b: &Arc<ReviewBudget>, bytes: usize) -> tokio::task::JoinHandle<bool> {
        let b = b.clone();
        let task =
            tokio::spawn(async move { b.take(bytes, Duration::from_secs(60)).await.is_some() });
        tokio::task::yield_now().await;
        task
    }

    /// The bytes taken now, as the gauge shows them.
    fn taken(b: &ReviewBudget) -> i64 {
        b.taken.get()
    }

    #[tokio::test(start_paused = true)]
    async fn shares_are_taken_and_given_back() {
        let b = budget(10);
        let a = now(&b, 6).await.expect("6 of 10");
        assert!(now(&b, 5).await.is_none(), "5 do not fit in the 4 left");
        let c = now(&b, 4).await.expect("the 4 left");
        assert_eq!(taken(&b), 10);
        drop(a);
        assert_eq!(taken(&b), 4);
        drop(c);
        assert_eq!(taken(&b), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_its_deadline_or_when_enough_is_given_back() {
        let b = budget(10);
        let held = now(&b, 8).await.unwrap();
        // Nothing comes back: refused once the wait is over, and no longer queued.
        assert!(b.take(5, Duration::from_secs(1)).await.is_none());
        assert!(b.lock().waiters.is_empty());
        // Over the whole budget: refused without a wait.
        assert!(
            tokio::time::timeout(Duration::ZERO, b.take(11, Duration::from_secs(60)))
                .await
                .expect("no wait")
                .is_none()
        );
        let waiting = waiter(&b, 5).await;
        drop(held);
        assert!(waiting.await.unwrap());
        assert_eq!(taken(&b), 0, "the share went back when the task ended");
    }

    #[tokio::test(start_paused = true)]
    async fn a_small_review_passes_large_ones_waiting() {
        let b = budget(10);
        let large = now(&b, 7).await.unwrap();
        let waiting_large = waiter(&b, 7).await;
        // The large waiter does not hold the 3 left back from a small review, nor what comes
        // back from a small one from the next small waiter.
        let small = now(&b, 2).await.expect("2 of the 3 left");
        let waiting_small = waiter(&b, 3).await;
        drop(small);
        assert!(waiting_small.await.unwrap());
        assert!(!waiting_large.is_finished());
        drop(large);
        assert!(waiting_large.await.unwrap());
        assert_eq!(taken(&b), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_grant_nobody_takes_comes_back() {
        let b = budget(10);
        let held = now(&b, 10).await.unwrap();
        let waiting = waiter(&b, 4).await;
        // Granted on the release, then cancelled before it runs (its request went away).
        drop(held);
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        assert_eq!(taken(&b), 0);
        assert!(b.lock().waiters.is_empty());
    }
}
