//! Condition upsert and the aggregate Ready (`common-types.md` §3.3).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use nova_api::conditions::{ALL_READY_MESSAGE, NOT_ALL_READY_MESSAGE, Reason};

/// The status of a condition, as written.
pub fn status_str(ok: bool) -> &'static str {
    if ok { "True" } else { "False" }
}

/// Upserts one condition. lastTransitionTime moves only when the status flips, so a pass that
/// rewrites the same verdict with a new message does not look like a transition. A pass
/// upserts each type once, from its last verdict, onto the stored status: two steps that
/// report the same type in one pass (True, then False) never look like two transitions.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    ok: bool,
    reason: Reason,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let status = status_str(ok);
    let message = message.into();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = Time(Timestamp::now());
                existing.status = status.to_owned();
            }
            existing.reason = reason.as_str().to_owned();
            existing.message = message;
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.as_str().to_owned(),
            message,
            last_transition_time: Time(Timestamp::now()),
            observed_generation: generation,
        }),
    }
}

/// Whether a verdict differs from the condition of `type_` the CR carries (or there is none),
/// so a step publishes its event on a transition only and a steady pass publishes none.
pub fn is_new(
    conditions: &[Condition],
    type_: &str,
    ok: bool,
    reason: Reason,
    message: &str,
) -> bool {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .is_none_or(|c| {
            c.status != status_str(ok) || c.reason != reason.as_str() || c.message != message
        })
}

/// Whether the condition of `type_` exists and is True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Recomputes Ready: True with AllReady exactly when every aggregated type exists and is True.
pub fn aggregate_ready(
    conditions: &mut Vec<Condition>,
    aggregated: &[&str],
    generation: Option<i64>,
) {
    let all = aggregated.iter().all(|t| is_true(conditions, t));
    let (reason, message) = if all {
        (Reason::AllReady, ALL_READY_MESSAGE)
    } else {
        (Reason::NotAllReady, NOT_ALL_READY_MESSAGE)
    };
    set(conditions, "Ready", all, reason, message, generation);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_on_a_flip() {
        let mut conds = Vec::new();
        set(
            &mut conds,
            "SecretsReady",
            false,
            Reason::SecretStoreNotReady,
            "a",
            Some(1),
        );
        let first = conds[0].last_transition_time.clone();
        std::thread::sleep(std::time::Duration::from_millis(5));
        set(
            &mut conds,
            "SecretsReady",
            false,
            Reason::WaitingForDBCredentials,
            "b",
            Some(2),
        );
        assert_eq!(conds[0].last_transition_time, first);
        assert_eq!(conds[0].reason, "WaitingForDBCredentials");
        assert_eq!(conds[0].observed_generation, Some(2));
        set(
            &mut conds,
            "SecretsReady",
            true,
            Reason::SecretsAvailable,
            "c",
            Some(2),
        );
        assert_ne!(conds[0].last_transition_time, first);
        assert_eq!(conds.len(), 1);
    }

    #[test]
    fn ready_needs_every_aggregated_condition_true() {
        let mut conds = Vec::new();
        set(&mut conds, "A", true, Reason::SecretsAvailable, "", None);
        aggregate_ready(&mut conds, &["A", "B"], Some(3));
        let ready = conds.iter().find(|c| c.type_ == "Ready").expect("Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "NotAllReady")
        );
        assert_eq!(ready.message, NOT_ALL_READY_MESSAGE);
        set(&mut conds, "B", true, Reason::SecretsAvailable, "", None);
        set(
            &mut conds,
            "Info",
            false,
            Reason::OwnedKeysOverridden,
            "",
            None,
        );
        aggregate_ready(&mut conds, &["A", "B"], Some(3));
        let ready = conds.iter().find(|c| c.type_ == "Ready").expect("Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "AllReady")
        );
        assert_eq!(ready.observed_generation, Some(3));
    }
}
