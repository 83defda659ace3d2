//! What a replica saw of the Lease and what it may do about it: pure, so the clock rule is
//! tested without a cluster or a wait.
//!
//! A replica never compares the holder's timestamps with its own wall clock (the clocks of two
//! machines disagree, and a standby whose clock runs ahead would take a lease its holder still
//! renews). It remembers the record it last saw and the local monotonic [`Instant`] at which
//! it saw that record change; the lease has lapsed only once it went unchanged for its
//! duration as this replica measured it.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The fields whose change shows that the holder is alive (a renewal, a hand-over, any write).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    resource_version: Option<String>,
}

impl Fingerprint {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            holder: holder(lease),
            renew_time: spec.and_then(|s| s.renew_time.clone()),
            resource_version: lease.metadata.resource_version.clone(),
        }
    }
}

/// The holder the Lease names; a released Lease (empty identity) names none.
pub fn holder(lease: &Lease) -> Option<String> {
    let holder = lease.spec.as_ref()?.holder_identity.as_deref()?;
    (!holder.is_empty()).then(|| holder.to_owned())
}

/// The Lease as last read, and when this replica saw its record change.
#[derive(Clone, Debug)]
pub struct Observed {
    pub lease: Lease,
    fingerprint: Fingerprint,
    changed_at: Instant,
}

impl Observed {
    /// The Lease read at `now`: it changed then unless it carries the record last seen.
    pub fn read(previous: Option<Self>, lease: Lease, now: Instant) -> Self {
        let fingerprint = Fingerprint::of(&lease);
        let changed_at = match previous {
            Some(previous) if previous.fingerprint == fingerprint => previous.changed_at,
            _ => now,
        };
        Self {
            lease,
            fingerprint,
            changed_at,
        }
    }

    /// The lease duration its holder declared.
    fn duration(&self) -> Duration {
        let seconds = self
            .lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .unwrap_or(0);
        Duration::from_secs(seconds.max(0).unsigned_abs().into())
    }

    /// When the lease lapses unless its record changes again, by this replica's clock.
    pub fn lapses_at(&self) -> Instant {
        self.changed_at + self.duration()
    }
}

/// What a replica may do with the Lease it observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It holds the Lease: renew it.
    Renew,
    /// Nobody holds it, or its holder let it lapse: take it.
    Acquire,
    /// Another replica holds it: look again later.
    Wait { holder: String },
}

/// What `identity` may do at `now` with the Lease it observed.
pub fn decide(observed: &Observed, identity: &str, now: Instant) -> Decision {
    match holder(&observed.lease) {
        Some(holder) if holder == identity => Decision::Renew,
        Some(holder) if now <= observed.lapses_at() => Decision::Wait { holder },
        _ => Decision::Acquire,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::jiff::Timestamp;
    use kube::api::ObjectMeta;

    fn lease(holder: &str, renewed: i64, version: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(version.to_owned()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_owned()),
                renew_time: Some(MicroTime(Timestamp::from_second(renewed).expect("time"))),
                lease_duration_seconds: Some(15),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_standby_takes_over_only_after_the_record_stood_still_for_the_duration() {
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        let seen = Observed::read(None, lease("a", 1000, "1"), at(0));
        assert_eq!(
            decide(&seen, "b", at(15)),
            Decision::Wait { holder: "a".into() }
        );
        // Read again unchanged: the clock keeps running from the first sight.
        let seen = Observed::read(Some(seen), lease("a", 1000, "1"), at(10));
        assert_eq!(decide(&seen, "b", at(16)), Decision::Acquire);
        // A renewal restarts it, whatever its timestamp says.
        let renewed = Observed::read(Some(seen), lease("a", 1005, "2"), at(12));
        assert_eq!(
            decide(&renewed, "b", at(26)),
            Decision::Wait { holder: "a".into() }
        );
        assert_eq!(decide(&renewed, "b", at(28)), Decision::Acquire);
    }

    #[test]
    fn the_holders_timestamps_never_decide_a_takeover() {
        let start = Instant::now();
        // A renewTime an hour old (or an hour ahead), first seen now: the holder gets its
        // full duration from now either way.
        for renewed in [1000 - 3600, 1000 + 3600] {
            let seen = Observed::read(None, lease("a", renewed, "7"), start);
            assert_eq!(
                decide(&seen, "b", start + Duration::from_secs(14)),
                Decision::Wait { holder: "a".into() }
            );
        }
    }

    #[test]
    fn the_holder_renews_and_a_released_lease_is_free_at_once() {
        let now = Instant::now();
        let seen = Observed::read(None, lease("a", 1000, "1"), now);
        assert_eq!(decide(&seen, "a", now), Decision::Renew);
        let mut released = lease("", 1000, "2");
        released.spec.as_mut().expect("spec").lease_duration_seconds = Some(1);
        let seen = Observed::read(Some(seen), released, now);
        assert_eq!(decide(&seen, "b", now), Decision::Acquire);
    }
}
