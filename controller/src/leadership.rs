//! The leader's own renewal deadline: it stops leading before its Lease can lapse.
//!
//! kube-lease-manager retries a failed renewal with a back-off of up to 30 s and keeps
//! reporting the lead meanwhile, so a leader cut off from the API server for longer than the
//! lease went on reconciling after a standby had taken the Lease over (the fault drill
//! `a_leader_cut_off_from_the_api_server_stops_leading_before_its_lease_lapses` saw two
//! replicas lead at once). [`lapsing`] follows the Lease with a watch (no polling read) and
//! resolves once the last renewal it saw is older than the lease duration less a margin, or
//! once the Lease names another holder; the binary then stops leading, as client-go's renew
//! deadline does.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

/// How long before its lease would lapse a leader that could not renew stops leading: covers
/// a standby's clock running ahead and the leader's last in-flight reconcile step. The holder
/// renews 5 s before the lapse (the binary's grace), so a renewal has 3 s to land.
pub const MARGIN: Duration = Duration::from_secs(2);

/// Why a leader stops leading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepDown {
    /// Its renewal is overdue: the lease may lapse before it can renew again.
    Overdue,
    /// The Lease names another holder (or none).
    Lost,
}

/// Until when `identity` may lead on `lease`: its last renewal (or acquisition) plus the lease
/// duration less `margin`; `None` when the Lease names another holder or none.
pub fn deadline(lease: &Lease, identity: &str, margin: Duration) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0;
    let duration = Duration::from_secs(spec.lease_duration_seconds?.unsigned_abs().into());
    Some(add(renewed, duration.saturating_sub(margin)))
}

fn add(at: Timestamp, duration: Duration) -> Timestamp {
    at.checked_add(duration).unwrap_or(Timestamp::MAX)
}

/// Resolves when the replica `identity`, which holds the Lease `namespace/name` of `duration`
/// from now on, must stop leading.
pub async fn lapsing(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    duration: Duration,
) -> StepDown {
    let leases: Api<Lease> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let updates = watcher(leases, config).default_backoff().applied_objects();
    futures::pin_mut!(updates);
    // Until the watch shows the Lease: it was acquired just now.
    let mut until = add(Timestamp::now(), duration.saturating_sub(MARGIN));
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            Some(update) = updates.next() => {
                let Ok(lease) = update else { continue };
                match deadline(&lease, identity, MARGIN) {
                    Some(deadline) => until = deadline,
                    None => return StepDown::Lost,
                }
            }
            _ = tick.tick() => {
                if Timestamp::now() > until {
                    return StepDown::Overdue;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: i64) -> Lease {
        let at = |s| Some(MicroTime(Timestamp::from_second(s).expect("time")));
        Lease {
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                acquire_time: at(renewed - 30),
                renew_time: at(renewed),
                lease_duration_seconds: Some(15),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_holder_may_lead_until_its_last_renewal_plus_the_duration_less_the_margin() {
        let at = |s| Timestamp::from_second(s).expect("time");
        assert_eq!(
            deadline(&lease(Some("a"), 1000), "a", MARGIN),
            Some(at(1013))
        );
        assert_eq!(deadline(&lease(Some("b"), 1000), "a", MARGIN), None);
        assert_eq!(deadline(&lease(None, 1000), "a", MARGIN), None);
        let mut acquired = lease(Some("a"), 1000);
        acquired.spec.as_mut().expect("spec").renew_time = None;
        assert_eq!(
            deadline(&acquired, "a", MARGIN),
            Some(at(983)),
            "not renewed yet: from the acquisition"
        );
    }
}
