//! Leader election over one Lease, with a clock rule that cannot split the lead.
//!
//! - A standby takes the Lease only once its record went unchanged for the lease duration as
//!   the standby itself measured it, monotonically, from when it saw the record change
//!   ([`record`]); never by comparing the holder's timestamps with its own wall clock.
//! - Every write to the Lease carries the resourceVersion it was read at, so two replicas that
//!   both decide to take it cannot both succeed (the API server refuses the second, 409).
//! - The leader stops leading once it could not renew within its renew deadline, measured
//!   monotonically from when it sent its last successful renewal; the deadline is shorter than
//!   the lease duration, and the renewal reached the API server after it was sent, so the
//!   leader stops before any standby can see the lease lapse. The [`fence`] keeps every write
//!   of the API client back from that instant on, whatever task issues it.
//! - On shutdown the leader, its reconcilers stopped and its fence closed, hands the Lease back
//!   (no holder, one-second duration): a standby, which looks every retry period, takes it at
//!   its next look instead of waiting the duration out.

mod fence;
mod record;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

pub use fence::{Fence, FenceLayer, Fenced, NotLeading};
pub use record::{Decision, Observed, decide, holder};

/// How long a Lease stands unrenewed before a standby may take it (as client-go's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long the leader goes on without a successful renewal before it stops leading.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the leader renews while renewals succeed.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How often a standby looks at the Lease, and how soon a leader retries a failed renewal.
pub const RETRY_PERIOD: Duration = Duration::from_secs(1);
/// Upper bound of each request to the API server.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Which Lease, and who this replica is.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
}

/// Why a leader stopped leading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepDown {
    /// No renewal succeeded within the renew deadline.
    Overdue,
    /// The Lease names another holder (or none).
    Lost { holder: Option<String> },
}

/// A request that failed or got no answer in time.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("the API server did not answer within {0:?}")]
    TimedOut(Duration),
}

impl LeaseError {
    fn is_conflict(&self) -> bool {
        matches!(self, Self::Api(kube::Error::Api(status)) if status.code == 409)
    }
}

/// One request, bounded by [`REQUEST_TIMEOUT`].
async fn timed<T>(request: impl Future<Output = Result<T, kube::Error>>) -> Result<T, LeaseError> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(LeaseError::TimedOut(REQUEST_TIMEOUT)),
    }
}

/// This replica's side of the election.
pub struct Elector {
    api: Api<Lease>,
    settings: Settings,
    fence: Fence,
    observed: Option<Observed>,
    /// When the last successful write naming this replica was sent.
    renewed_at: Option<Instant>,
}

impl Elector {
    /// An elector that opens `fence` while it leads.
    pub fn new(client: Client, settings: Settings, fence: Fence) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            fence,
            observed: None,
            renewed_at: None,
        }
    }

    /// Returns once this replica holds the Lease, looking every [`RETRY_PERIOD`].
    pub async fn acquire(&mut self) {
        loop {
            match self.try_acquire().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.settings.name, "could not read or take the lease; trying again")
                }
            }
            tokio::time::sleep(RETRY_PERIOD).await;
        }
    }

    /// One look at the Lease; takes it when it is free or lapsed.
    async fn try_acquire(&mut self) -> Result<bool, LeaseError> {
        let name = &self.settings.name;
        let Some(lease) = timed(self.api.get_opt(name)).await? else {
            let sent = Instant::now();
            let created = timed(self.api.create(&PostParams::default(), &self.taken(None))).await;
            return self.took(created, sent);
        };
        let observed = Observed::read(self.observed.take(), lease, Instant::now());
        let decision = decide(&observed, &self.settings.identity, Instant::now());
        let desired = self.taken(Some(&observed.lease));
        self.observed = Some(observed);
        match decision {
            Decision::Wait { .. } => Ok(false),
            // Named already (a restart under the same identity) or free: a write at the
            // version read wins only if nobody wrote since.
            Decision::Renew | Decision::Acquire => {
                let sent = Instant::now();
                let replaced =
                    timed(self.api.replace(name, &PostParams::default(), &desired)).await;
                self.took(replaced, sent)
            }
        }
    }

    /// The Lease naming this replica, from `current` (at its resourceVersion) or new.
    fn taken(&self, current: Option<&Lease>) -> Lease {
        let now = Some(MicroTime(Timestamp::now()));
        let mut lease = current.cloned().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.settings.name.clone()),
                namespace: Some(self.settings.namespace.clone()),
                ..Default::default()
            },
            spec: None,
        });
        let previous = current.and_then(holder);
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if previous.as_deref() != Some(self.settings.identity.as_str()) {
            spec.acquire_time = now.clone();
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.settings.identity.clone());
        spec.lease_duration_seconds = Some(seconds(LEASE_DURATION));
        spec.renew_time = now;
        lease
    }

    /// Records the outcome of a write naming this replica, sent at `sent`: a conflict means
    /// another replica wrote first.
    fn took(
        &mut self,
        written: Result<Lease, LeaseError>,
        sent: Instant,
    ) -> Result<bool, LeaseError> {
        match written {
            Ok(lease) => {
                self.renewed(lease, sent);
                Ok(true)
            }
            // 409: another replica wrote first, or created the Lease first (AlreadyExists).
            Err(e) if e.is_conflict() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A write naming this replica succeeded: it may lead until `sent` plus the deadline.
    fn renewed(&mut self, lease: Lease, sent: Instant) {
        self.observed = Some(Observed::read(None, lease, sent));
        self.renewed_at = Some(sent);
        self.fence.open_until(sent + RENEW_DEADLINE);
    }

    /// Renews the Lease every [`RENEW_EVERY`] (every [`RETRY_PERIOD`] after a failure) and
    /// returns, the fence closed, once the lead ends.
    pub async fn hold(&mut self) -> StepDown {
        let why = self.renew_until_lost().await;
        self.fence.close();
        why
    }

    async fn renew_until_lost(&mut self) -> StepDown {
        let Some(mut renewed_at) = self.renewed_at else {
            return StepDown::Overdue;
        };
        let mut next = renewed_at + RENEW_EVERY;
        loop {
            let deadline = renewed_at + RENEW_DEADLINE;
            tokio::time::sleep_until(next.min(deadline).into()).await;
            let sent = Instant::now();
            if sent >= deadline {
                return StepDown::Overdue;
            }
            match tokio::time::timeout(deadline - sent, self.renew()).await {
                Ok(Ok(lease)) => {
                    self.renewed(lease, sent);
                    renewed_at = sent;
                    next = sent + RENEW_EVERY;
                }
                Ok(Err(Renewal::Lost(holder))) => return StepDown::Lost { holder },
                Ok(Err(Renewal::Failed(e))) => {
                    tracing::warn!(error = %e, "could not renew the lease; trying again");
                    next = Instant::now() + RETRY_PERIOD;
                }
                // The deadline passed during the attempt: the next turn returns.
                Err(_) => next = Instant::now(),
            }
        }
    }

    /// One renewal at the version last seen; after a conflict, the Lease read again (a
    /// renewal that landed unanswered leaves it ours at a newer version).
    async fn renew(&mut self) -> Result<Lease, Renewal> {
        let current = self.observed.as_ref().map(|o| o.lease.clone());
        let desired = self.taken(current.as_ref());
        let name = &self.settings.name;
        match timed(self.api.replace(name, &PostParams::default(), &desired)).await {
            Ok(lease) => Ok(lease),
            Err(e) if e.is_conflict() => {
                let lease = timed(self.api.get_opt(name))
                    .await
                    .map_err(Renewal::Failed)?;
                match lease {
                    Some(lease)
                        if holder(&lease).as_deref() == Some(self.settings.identity.as_str()) =>
                    {
                        self.observed = Some(Observed::read(None, lease, Instant::now()));
                        Err(Renewal::Failed(e))
                    }
                    other => Err(Renewal::Lost(other.as_ref().and_then(holder))),
                }
            }
            Err(e) => Err(Renewal::Failed(e)),
        }
    }

    /// Hands the Lease back if it names this replica: no holder, a one-second duration. The
    /// fence closes first, so no write of this replica can follow the hand-back.
    pub async fn release(&mut self) {
        self.fence.close();
        let name = &self.settings.name;
        let lease = match timed(self.api.get_opt(name)).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the lease to hand it back; a standby takes it once it lapses");
                return;
            }
        };
        if holder(&lease).as_deref() != Some(self.settings.identity.as_str()) {
            return;
        }
        let mut released = lease;
        let now = Some(MicroTime(Timestamp::now()));
        let spec = released.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = now.clone();
        spec.renew_time = now;
        match timed(self.api.replace(name, &PostParams::default(), &released)).await {
            Ok(_) => tracing::info!(lease = %name, "handed the lease back"),
            Err(e) => {
                tracing::warn!(error = %e, "could not hand the lease back; a standby takes it once it lapses")
            }
        }
    }
}

/// A renewal that did not land.
enum Renewal {
    /// Another replica holds the Lease (or none does).
    Lost(Option<String>),
    /// It may land next time.
    Failed(LeaseError),
}

fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}
