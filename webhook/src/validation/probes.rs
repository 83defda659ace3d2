//! `probes` of a deployment block (issue 30, beyond the spec): timing overrides of the probes
//! the operator renders. Every value within the bounds the schema states, successThreshold 1
//! on a liveness and a startup probe as the API server requires of a container, and only the
//! probes the block's pods run (`nova_api::defaults::READINESS_ONLY`), so an override is never
//! silently dropped.

use nova_api::defaults::READINESS_ONLY;
use nova_api::v1alpha1::{ProbeTimingSpec, ProbesSpec};

use super::common::floor;
use crate::field::{FieldError, Path, Violations};

/// The three overrides of the block whose pods carry `component`.
pub fn rules(path: &Path, probes: &ProbesSpec, component: &str, errors: &mut Violations) {
    for (name, timing, single_success) in [
        ("liveness", probes.liveness.as_ref(), true),
        ("readiness", probes.readiness.as_ref(), false),
        ("startup", probes.startup.as_ref(), true),
    ] {
        let Some(timing) = timing else { continue };
        let at = path.child(name);
        if name != "readiness" && READINESS_ONLY.contains(&component) {
            errors.push(FieldError::forbidden(
                at,
                format!(
                    "the {component} runs no {name} probe: a broker outage must not restart it"
                ),
            ));
            continue;
        }
        bounds(&at, timing, errors);
        if single_success
            && let Some(n) = timing.success_threshold
            && n > 1
        {
            errors.push(FieldError::invalid(
                at.child("successThreshold"),
                n,
                "must be 1",
            ));
        }
    }
}

fn bounds(path: &Path, t: &ProbeTimingSpec, errors: &mut Violations) {
    for (field, value, min) in [
        ("initialDelaySeconds", t.initial_delay_seconds, 0),
        ("periodSeconds", t.period_seconds, 1),
        ("timeoutSeconds", t.timeout_seconds, 1),
        ("failureThreshold", t.failure_threshold, 1),
        ("successThreshold", t.success_threshold, 1),
    ] {
        let detail = format!("must be greater than or equal to {min}");
        floor(path, field, value, min, &detail, errors);
    }
}
