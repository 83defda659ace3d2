//! `spec.autoscaling.behavior`: the bounds `autoscaling/v2` itself enforces on a
//! HorizontalPodAutoscaler's behavior (`pkg/apis/autoscaling/validation`), with its field paths
//! and wording. The block is copied verbatim into the HPA the operator applies, so a value the
//! API server would refuse there is refused here, at admission, instead of on every reconcile.

use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscalerBehavior};

use super::quantity;
use crate::field::{FieldError, Path, Violations};

/// `MaxStabilizationWindowSeconds`.
pub const MAX_STABILIZATION_WINDOW: i32 = 3600;
/// `MaxPeriodSeconds`.
pub const MAX_PERIOD: i32 = 1800;
/// The select policies, in the API server's (sorted) order.
pub const SELECT_POLICIES: [&str; 3] = ["Disabled", "Max", "Min"];
/// The policy types, in the API server's (sorted) order.
pub const POLICY_TYPES: [&str; 2] = ["Percent", "Pods"];

/// Both rule sets of a behavior block.
pub fn behavior(path: &Path, behavior: &HorizontalPodAutoscalerBehavior, errors: &mut Violations) {
    for (field, rules) in [
        ("scaleUp", &behavior.scale_up),
        ("scaleDown", &behavior.scale_down),
    ] {
        if let Some(rules) = rules {
            scaling_rules(&path.child(field), rules, errors);
        }
    }
}

/// One direction's rules. An empty policy list is no error: the API server defaults it.
fn scaling_rules(path: &Path, rules: &HPAScalingRules, errors: &mut Violations) {
    if let Some(window) = rules.stabilization_window_seconds {
        let field = path.child("stabilizationWindowSeconds");
        if window < 0 {
            errors.push(FieldError::invalid(
                field,
                window,
                "must be greater than or equal to zero",
            ));
        }
        if window > MAX_STABILIZATION_WINDOW {
            errors.push(FieldError::invalid(
                field,
                window,
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW}"),
            ));
        }
    }
    if let Some(select) = rules.select_policy.as_deref()
        && !SELECT_POLICIES.contains(&select)
    {
        errors.push(FieldError::not_supported(
            path.child("selectPolicy"),
            select,
            &SELECT_POLICIES,
        ));
    }
    let policies = path.child("policies");
    for (i, policy) in rules.policies.iter().flatten().enumerate() {
        let p = policies.index(i);
        if !POLICY_TYPES.contains(&policy.type_.as_str()) {
            errors.push(FieldError::not_supported(
                p.child("type"),
                &policy.type_,
                &POLICY_TYPES,
            ));
        }
        if policy.value <= 0 {
            errors.push(FieldError::invalid(
                p.child("value"),
                policy.value,
                "must be greater than zero",
            ));
        }
        let period = p.child("periodSeconds");
        if policy.period_seconds <= 0 {
            errors.push(FieldError::invalid(
                period,
                policy.period_seconds,
                "must be greater than zero",
            ));
        }
        if policy.period_seconds > MAX_PERIOD {
            errors.push(FieldError::invalid(
                period,
                policy.period_seconds,
                format!("must be less than or equal to {MAX_PERIOD}"),
            ));
        }
    }
    if let Some(tolerance) = &rules.tolerance {
        let field = path.child("tolerance");
        if quantity::checked(&field, &tolerance.0, errors).is_some_and(|v| v < 0.0) {
            errors.push(FieldError::invalid(
                field,
                &tolerance.0,
                "must be greater than or equal to zero",
            ));
        }
    }
}
