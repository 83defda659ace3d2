//! What the clients of every pass share: the Keystone token of each cloud and service user,
//! reused until shortly before it expires instead of requested again on every pass and retry,
//! and the count and duration of requests by service, method and status
//! (`nova_operator_openstack_requests_total`, `_request_duration_seconds`).
//!
//! A token is kept by the monotonic clock from when it arrived, for its lifetime as Keystone
//! stated it (`expires_at` less `issued_at`, both Keystone's clock), so a skewed clock here
//! neither keeps an expired token nor drops a fresh one. A token Keystone's services refuse
//! (401) is forgotten at once (`Sessions::forget`). No key or log line carries the password or
//! the token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{Credentials, Endpoints, Session};
use crate::metrics::OpenStackRequests;
use crate::sensitive::Sensitive;

/// How long before its stated expiry a token is replaced: long enough for the slowest pass to
/// finish its calls with it.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// Who a token was issued to, and through which cluster its Keystone is reached.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct TokenKey {
    /// The cluster the calls go through: a target cluster's name, empty for the management
    /// cluster (the same Service URL on two clusters is two clouds).
    cloud: String,
    keystone: String,
    region: Option<String>,
    username: String,
    user_domain_name: String,
    project_name: String,
    project_domain_name: String,
}

impl TokenKey {
    /// The key of `credentials` at `endpoints`, reached through `cloud`.
    pub fn new(cloud: &str, endpoints: &Endpoints, credentials: &Credentials) -> Self {
        Self {
            cloud: cloud.to_owned(),
            keystone: endpoints.keystone.trim_end_matches('/').to_owned(),
            region: endpoints.region.clone(),
            username: credentials.username.clone(),
            user_domain_name: credentials.user_domain_name.clone(),
            project_name: credentials.project_name.clone(),
            project_domain_name: credentials.project_domain_name.clone(),
        }
    }
}

/// A kept token: what it was issued for, and until when it is used.
struct Kept {
    session: Arc<Session>,
    /// The password it was issued for: a changed password is a miss.
    password: Sensitive,
    until: Instant,
}

/// The tokens and the request metrics every pass's client shares.
#[derive(Default)]
pub struct Sessions {
    tokens: Mutex<HashMap<TokenKey, Kept>>,
    requests: Option<OpenStackRequests>,
}

impl Sessions {
    /// Sessions that count and time every request in `requests`.
    pub fn counted(requests: OpenStackRequests) -> Self {
        Self {
            requests: Some(requests),
            ..Self::default()
        }
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, HashMap<TokenKey, Kept>> {
        self.tokens.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The kept session of `key`, while it is fresh and was issued for `password`.
    pub(super) fn reuse(&self, key: &TokenKey, password: &Sensitive) -> Option<Arc<Session>> {
        let mut tokens = self.tokens();
        match tokens.get(key) {
            Some(kept) if kept.password == *password && Instant::now() < kept.until => {
                Some(kept.session.clone())
            }
            Some(_) => {
                tokens.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps a session that arrived at `received` and lives `lifetime` (None: Keystone did not
    /// say, so it serves only the pass that asked for it).
    pub(super) fn keep(
        &self,
        key: &TokenKey,
        password: &Sensitive,
        session: Arc<Session>,
        received: Instant,
        lifetime: Option<Duration>,
    ) {
        let Some(lifetime) = lifetime else {
            return;
        };
        let kept = Kept {
            session,
            password: password.clone(),
            until: received + usable(lifetime),
        };
        self.tokens().insert(key.clone(), kept);
    }

    /// Forgets `key`'s session when it still holds `token` (a service refused it).
    pub(super) fn forget(&self, key: &TokenKey, token: &Sensitive) {
        let mut tokens = self.tokens();
        if tokens.get(key).is_some_and(|k| k.session.token == *token) {
            tokens.remove(key);
        }
    }

    /// Records one request to `service` with `method`, sent at `sent`, that ended with
    /// `status` (None: no answer).
    pub(super) fn count(
        &self,
        service: &str,
        method: &http::Method,
        status: Option<u16>,
        sent: Instant,
    ) {
        if let Some(requests) = &self.requests {
            let seconds = sent.elapsed().as_secs_f64();
            requests.observe(service, method.as_str(), status, seconds);
        }
    }
}

/// How much of a token's lifetime is used: all but [`REFRESH_BEFORE`], or half of a token that
/// lives no longer than that.
fn usable(lifetime: Duration) -> Duration {
    match lifetime.checked_sub(REFRESH_BEFORE) {
        Some(rest) if !rest.is_zero() => rest,
        _ => lifetime / 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_used_for_its_lifetime_less_the_refresh_margin() {
        let s = Duration::from_secs;
        assert_eq!(usable(s(3600)), s(3300));
        assert_eq!(usable(s(600)), s(300));
        assert_eq!(usable(s(300)), s(150));
        assert_eq!(usable(s(60)), s(30));
        assert_eq!(usable(Duration::ZERO), Duration::ZERO);
    }
}
