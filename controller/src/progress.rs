//! Whether the reconcile loop makes progress: the passes in flight (when each started) and when
//! the last one finished. Liveness fails on a pass in flight for longer than the stall limit
//! (every pass has a deadline well below it, so only a loop that no longer runs its deadlines,
//! a blocked executor or a deadlock, gets there), and the metrics make a stall visible before
//! the kubelet acts on it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// The default stall limit (`--stall-after-seconds`): above the default pass deadline with room
/// for the error path of a pass that hit it.
pub const STALL_AFTER: Duration = Duration::from_secs(300);

#[derive(Debug, Default)]
struct State {
    next: u64,
    in_flight: BTreeMap<u64, Instant>,
    last_finished: Option<SystemTime>,
}

/// The passes of both controllers, shared by the reconciles, /healthz and /metrics.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    state: Arc<Mutex<State>>,
}

/// A pass in flight; it counts as finished when dropped (a pass cut at its deadline too).
#[derive(Debug)]
pub struct InFlight {
    id: u64,
    state: Arc<Mutex<State>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.in_flight.remove(&self.id);
        state.last_finished = Some(SystemTime::now());
    }
}

impl Progress {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A pass starts; it is in flight until the guard is dropped.
    pub fn started(&self) -> InFlight {
        let mut state = self.state();
        let id = state.next;
        state.next += 1;
        state.in_flight.insert(id, Instant::now());
        InFlight {
            id,
            state: self.state.clone(),
        }
    }

    /// How many passes are in flight.
    pub fn in_flight(&self) -> usize {
        self.state().in_flight.len()
    }

    /// How long the oldest pass in flight has run; None when none is.
    pub fn oldest(&self) -> Option<Duration> {
        self.state().in_flight.values().map(Instant::elapsed).max()
    }

    /// When the last pass finished, if one has.
    pub fn last_finished(&self) -> Option<SystemTime> {
        self.state().last_finished
    }

    /// Why the loop counts as stalled under the limit `after`: a pass in flight for as long.
    pub fn stalled(&self, after: Duration) -> Option<String> {
        let oldest = self.oldest().filter(|oldest| *oldest >= after)?;
        Some(format!(
            "a reconcile pass has been in flight for {}s (the limit is {}s); the reconcile loop makes no progress",
            oldest.as_secs(),
            after.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_is_in_flight_until_its_guard_goes_and_then_counts_as_finished() {
        let progress = Progress::default();
        assert_eq!((progress.in_flight(), progress.oldest()), (0, None));
        assert_eq!(progress.stalled(Duration::ZERO), None, "nothing in flight");
        assert_eq!(progress.last_finished(), None);
        let first = progress.started();
        let second = progress.started();
        assert_eq!(progress.in_flight(), 2);
        drop(first);
        assert_eq!(progress.in_flight(), 1);
        assert!(progress.last_finished().is_some());
        drop(second);
        assert_eq!(progress.in_flight(), 0);
    }

    #[test]
    fn only_a_pass_older_than_the_limit_is_a_stall() {
        let progress = Progress::default();
        let _pass = progress.started();
        assert_eq!(progress.stalled(Duration::from_secs(300)), None);
        let stalled = progress.stalled(Duration::ZERO).expect("as old as zero");
        assert!(stalled.contains("the limit is 0s"), "{stalled}");
    }
}
