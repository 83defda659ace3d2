//! The connection slots: at most `max_connections` connections open, and who gets a slot when
//! they are all taken.
//!
//! Why not just refuse the newcomer: a client that opens connections and sends nothing (or
//! never finishes its TLS handshake) would then hold every slot, and the API server, whose
//! HTTP/2 connection the idle timeout closes between bursts of writes, could not connect
//! again: every Nova and NovaCompute write would fail (failurePolicy Fail). So a newcomer over
//! the cap takes the slot of a connection with nothing in flight (its handshake counts as
//! nothing in flight):
//! - of a peer address crowding the server, holding at least two connections more than the
//!   newcomer's address, however briefly quiet: a flood from one address makes room for
//!   everyone else, the API server included, however fast it opens connections;
//! - else of a peer address holding more connections than the newcomer's, quiet for at least
//!   [`MIN_QUIET_TO_EVICT`] (the API server's connection between two reviews of one burst
//!   stays, and no address is left with fewer than the newcomer's);
//!
//! the most crowded address first, then the longest quiet. Only when no connection qualifies
//! is the newcomer reset. A connection with a request in flight is never evicted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::idle::Activity;

/// The least a connection has had nothing in flight before a newcomer may take its slot: the
/// API server's connection between two reviews of one burst is not evicted.
pub const MIN_QUIET_TO_EVICT: Duration = Duration::from_secs(1);

/// The open connections.
pub struct Slots {
    max: usize,
    state: Mutex<State>,
}

struct State {
    next_id: u64,
    open: HashMap<u64, Open>,
}

/// One open connection: its peer, its activity, and the sender that tells it to go.
struct Open {
    peer: IpAddr,
    activity: Arc<Activity>,
    evict: oneshot::Sender<()>,
}

/// A connection's slot, given back when dropped.
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
    /// The connection's requests in flight.
    pub activity: Arc<Activity>,
    /// Resolves when a newcomer took the slot: the connection closes.
    pub evicted: oneshot::Receiver<()>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().open.remove(&self.id);
    }
}

/// A slot granted: whether another connection was evicted for it.
pub struct Granted {
    /// The newcomer's slot.
    pub slot: Slot,
    /// Whether a quiet connection was told to go.
    pub evicted: bool,
}

impl Slots {
    /// `max` slots, all free.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            state: Mutex::new(State {
                next_id: 0,
                open: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change is made whole under the lock.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a connection from `peer` accepted now: a free one, or one taken from a
    /// quiet connection (the rules above); `None` when none qualifies.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Granted> {
        let mut state = self.lock();
        let mut evicted = false;
        if state.open.len() >= self.max {
            let victim = victim(&state.open, peer, Instant::now())?;
            if let Some(open) = state.open.remove(&victim) {
                // The receiver may be gone already (the connection ending): nothing to tell.
                let _ = open.evict.send(());
                evicted = true;
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        let activity = Activity::new();
        let (evict, evicted_rx) = oneshot::channel();
        state.open.insert(
            id,
            Open {
                peer,
                activity: activity.clone(),
                evict,
            },
        );
        Some(Granted {
            slot: Slot {
                slots: self.clone(),
                id,
                activity,
                evicted: evicted_rx,
            },
            evicted,
        })
    }
}

/// The connection to evict at `now` for a newcomer from `newcomer` (the rules above).
fn victim(open: &HashMap<u64, Open>, newcomer: IpAddr, now: Instant) -> Option<u64> {
    let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
    for o in open.values() {
        *per_peer.entry(o.peer).or_default() += 1;
    }
    let mine = per_peer.get(&newcomer).copied().unwrap_or(0);
    open.iter()
        .filter_map(|(id, o)| {
            let quiet = now.saturating_duration_since(o.activity.quiet_since()?);
            let count = per_peer[&o.peer];
            let crowding = count > mine + 1;
            let eligible = crowding || (count > mine && quiet >= MIN_QUIET_TO_EVICT);
            eligible.then_some((crowding, count, quiet, *id))
        })
        .max()
        .map(|(.., id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[tokio::test(start_paused = true)]
    async fn a_free_slot_is_granted_without_evicting() {
        let slots = Slots::new(2);
        let first = slots.admit(ip(1)).expect("free");
        let second = slots.admit(ip(1)).expect("free");
        assert!(!first.evicted && !second.evicted);
        drop(first);
        assert!(!slots.admit(ip(2)).expect("given back").evicted);
    }

    #[tokio::test(start_paused = true)]
    async fn among_equals_a_fresh_or_busy_connection_keeps_its_slot() {
        let slots = Slots::new(2);
        let _fresh = slots.admit(ip(1)).expect("free");
        let busy = slots.admit(ip(2)).expect("free");
        let _request = busy.slot.activity.begin();
        tokio::time::sleep(MIN_QUIET_TO_EVICT / 2).await;
        assert!(slots.admit(ip(3)).is_none(), "nothing quiet long enough");
        tokio::time::sleep(MIN_QUIET_TO_EVICT * 10).await;
        let granted = slots.admit(ip(3)).expect("the quiet one goes");
        assert!(granted.evicted);
        assert!(
            slots.admit(ip(4)).is_none(),
            "the busy one and the newcomer stay"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_crowding_peer_loses_its_quiet_connections_at_once_and_never_a_busy_one() {
        let slots = Slots::new(4);
        let mut apiserver = slots.admit(ip(1)).expect("free");
        tokio::time::sleep(MIN_QUIET_TO_EVICT * 5).await;
        let mut flood: Vec<Granted> = (0..3).map(|_| slots.admit(ip(9)).expect("free")).collect();
        let _busy = flood[0].slot.activity.begin();
        // The flood's connections are fresh and the API server's the longest quiet, but the
        // flood's address holds three.
        let newcomer = slots.admit(ip(1)).expect("a flood connection goes");
        assert!(newcomer.evicted);
        assert!(apiserver.slot.evicted.try_recv().is_err(), "not evicted");
        assert!(
            flood[0].slot.evicted.try_recv().is_err(),
            "busy: not evicted"
        );
        let told = flood
            .iter_mut()
            .map(|g| g.slot.evicted.try_recv())
            .filter(Result::is_ok)
            .count();
        assert_eq!(told, 1, "one quiet flood connection told to go");
        // Two each now: the flood's newcomer takes nothing from an address holding no more
        // than its own, however long the API server's connection has been quiet.
        assert!(slots.admit(ip(9)).is_none());
    }
}
