//! The HealthCheck step (parallel group, `common-types.md` §3.20): an HTTP GET of the API's
//! cluster-local root document, `/`, the version document nova answers without a token (the
//! compute API ships no /healthcheck route). A passing probe is reused for 30 seconds through
//! a per-process cache, so a steady Nova is probed at most twice a minute; a failed one is
//! evicted and retried after 10 seconds. The endpoint gate reads the `status.endpoint` the
//! Deployment step sets in this pass, or the stored one.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::Nova;

use crate::clusters::probe::Probe;
use crate::nova::resolved::Resolved;
use crate::nova::{NovaPass, NovaPlan};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};
use crate::render::workloads::api_service_url;

const CONDITION: NovaConditionType = NovaConditionType::NovaAPIReady;
/// How long a passing probe is reused.
pub const PROBE_TTL: Duration = Duration::from_secs(30);
/// The retry of a failed probe.
pub const PROBE_RETRY: Duration = Duration::from_secs(10);

/// A passing probe, per CR.
#[derive(Clone, Debug)]
struct Passed {
    uid: String,
    url: String,
    at: Instant,
}

static CACHE: LazyLock<Mutex<HashMap<(String, String), Passed>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn cache() -> std::sync::MutexGuard<'static, HashMap<(String, String), Passed>> {
    CACHE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Drops the cache entry of a CR (on its deletion).
pub fn forget(namespace: &str, name: &str) {
    cache().remove(&(namespace.to_owned(), name.to_owned()));
}

/// What the step observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// status.endpoint is not set yet.
    NoEndpoint,
    /// A passing probe within the TTL: the condition is re-reported as it is.
    Cached(String),
    /// The probe of `url`.
    Probed {
        /// The probed URL.
        url: String,
        /// How it ended.
        probe: Probe,
    },
}

/// The HealthCheck step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let nova = &pass.cr;
    let status = nova.status.as_ref();
    let endpoint = pass
        .resolved
        .endpoint
        .as_deref()
        .or(status.and_then(|s| s.endpoint.as_deref()));
    if endpoint.is_none_or(str::is_empty) {
        return Ok(Observed::NoEndpoint);
    }
    let (name, ns) = (nova.name_any(), pass.owner.namespace.clone());
    let url = format!("{}/", api_service_url(&name, &ns));
    let uid = nova.uid().unwrap_or_default();
    let healthy = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION.as_str()))
        .filter(|c| c.status == "True");
    let key = (ns, name);
    if let Some(condition) = healthy
        && cache()
            .get(&key)
            .is_some_and(|p| p.uid == uid && p.url == url && p.at.elapsed() < PROBE_TTL)
    {
        return Ok(Observed::Cached(condition.message.clone()));
    }
    let probe = pass.cluster.probe(&url).await;
    if matches!(probe, Probe::Answered(code, _) if (200..300).contains(&code)) {
        cache().insert(
            key,
            Passed {
                uid,
                url: url.clone(),
                at: Instant::now(),
            },
        );
    } else {
        cache().remove(&key);
    }
    Ok(Observed::Probed { url, probe })
}

/// The first 256 bytes of a body, newlines collapsed.
fn excerpt(body: &str) -> String {
    let mut end = body.len().min(256);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end]
        .split(['\r', '\n'])
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The HealthCheck step's plan.
pub fn plan(_: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    let failed = |reason: Reason, message: String| {
        Plan::proceed()
            .report(CONDITION, false, reason, message)
            .requeue(PROBE_RETRY)
    };
    match observed {
        Observed::NoEndpoint => failed(
            Reason::EndpointNotReady,
            "endpoint not yet configured".into(),
        ),
        Observed::Cached(message) => {
            Plan::proceed().ready(CONDITION, Reason::APIHealthy, message.clone())
        }
        Observed::Probed { url, probe } => match probe {
            Probe::Answered(code, _) if (200..300).contains(code) => Plan::proceed().ready(
                CONDITION,
                Reason::APIHealthy,
                format!("Nova API is responding at {url}"),
            ),
            Probe::Answered(code, body) => {
                let body = excerpt(body);
                let message = if body.is_empty() {
                    format!("Nova API returned HTTP {code}")
                } else {
                    format!("Nova API returned HTTP {code}: {body}")
                };
                failed(Reason::APIUnhealthy, message)
            }
            Probe::Unresolvable => {
                failed(Reason::EndpointNotReady, "endpoint not resolvable".into())
            }
            Probe::Refused(e) => {
                failed(Reason::ConnectionFailed, format!("connection failed: {e}"))
            }
            Probe::TimedOut => failed(Reason::HealthCheckTimeout, "health check timed out".into()),
            Probe::Failed(e) => failed(
                Reason::HealthCheckFailed,
                format!("health check failed: {e}"),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::pipeline::Flow;

    fn verdict(observed: Observed) -> (bool, Reason, String, Flow) {
        let plan = plan(&example(), &observed, &Resolved::default());
        let v = plan.verdict(CONDITION).expect("verdict").clone();
        (v.ok, v.reason, v.message, plan.flow)
    }

    fn probed(probe: Probe) -> Observed {
        Observed::Probed {
            url: "http://nova.openstack.svc.cluster.local:8774/".into(),
            probe,
        }
    }

    #[test]
    fn a_deleted_nova_leaves_the_cache() {
        let key = ("ns-forget".to_owned(), "nova".to_owned());
        cache().insert(
            key.clone(),
            Passed {
                uid: "u".into(),
                url: "http://nova.ns-forget.svc.cluster.local:8774/".into(),
                at: Instant::now(),
            },
        );
        forget("ns-forget", "nova");
        assert!(!cache().contains_key(&key));
    }

    #[test]
    fn every_outcome_has_its_reason() {
        let retry = Flow::RequeueAfter(PROBE_RETRY);
        let cases = [
            (
                Observed::NoEndpoint,
                (
                    false,
                    Reason::EndpointNotReady,
                    "endpoint not yet configured",
                    retry,
                ),
            ),
            (
                probed(Probe::Answered(200, "{}".into())),
                (
                    true,
                    Reason::APIHealthy,
                    "Nova API is responding at http://nova.openstack.svc.cluster.local:8774/",
                    Flow::Continue,
                ),
            ),
            (
                Observed::Cached("kept".into()),
                (true, Reason::APIHealthy, "kept", Flow::Continue),
            ),
            (
                probed(Probe::Answered(503, "busy\nnow\r\n".into())),
                (
                    false,
                    Reason::APIUnhealthy,
                    "Nova API returned HTTP 503: busy now",
                    retry,
                ),
            ),
            (
                probed(Probe::Answered(500, String::new())),
                (
                    false,
                    Reason::APIUnhealthy,
                    "Nova API returned HTTP 500",
                    retry,
                ),
            ),
            (
                probed(Probe::Unresolvable),
                (
                    false,
                    Reason::EndpointNotReady,
                    "endpoint not resolvable",
                    retry,
                ),
            ),
            (
                probed(Probe::Refused("Connection refused (os error 111)".into())),
                (
                    false,
                    Reason::ConnectionFailed,
                    "connection failed: Connection refused (os error 111)",
                    retry,
                ),
            ),
            (
                probed(Probe::TimedOut),
                (
                    false,
                    Reason::HealthCheckTimeout,
                    "health check timed out",
                    retry,
                ),
            ),
            (
                probed(Probe::Failed("reset".into())),
                (
                    false,
                    Reason::HealthCheckFailed,
                    "health check failed: reset",
                    retry,
                ),
            ),
        ];
        for (observed, (ok, reason, message, flow)) in cases {
            assert_eq!(
                verdict(observed.clone()),
                (ok, reason, message.to_owned(), flow),
                "{observed:?}"
            );
        }
    }
}
