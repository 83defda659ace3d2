//! Release tracking (`common-types.md` §3.11, §3.12): the release string, the image/release
//! mismatch gate, and the shared expand-migrate-contract phase machine, as pure functions of
//! the spec, the status and how the current phase Job ran. The Database step carries the
//! decisions out.

use std::fmt;

use nova_api::conditions::Reason;
use nova_api::events::EventReason;
use nova_api::v1alpha1::{ImageSpec, UpgradePhase};

use super::job_run::Run;

/// A parsed release: `YYYY.N`, the patch suffix dropped (it is ignored everywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    /// The year, 2010 or later.
    pub year: u32,
    /// The half, 1 or 2.
    pub half: u8,
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.year, self.half)
    }
}

/// Parses `YYYY.N` with an optional `-<patch>` suffix; the error says what is wrong.
pub fn parse(release: &str) -> Result<Release, String> {
    let base = match release.split_once('-') {
        Some((base, patch)) if !patch.is_empty() => base,
        Some(_) => return Err("empty patch suffix after \"-\"".to_owned()),
        None => release,
    };
    let shape = || "expected YYYY.N with an optional -<patch> suffix".to_owned();
    let (year, half) = base.split_once('.').ok_or_else(shape)?;
    if year.len() != 4 || !year.bytes().all(|b| b.is_ascii_digit()) || half.len() != 1 {
        return Err(shape());
    }
    let year: u32 = year.parse().map_err(|_| shape())?;
    if year < 2010 {
        return Err(format!("year {year} is before 2010"));
    }
    let half = match half {
        "1" => 1,
        "2" => 2,
        other => return Err(format!("release number {other:?} is neither 1 nor 2")),
    };
    Ok(Release { year, half })
}

/// Whether `to` is the release right after `from`: same year 1 to 2, or .2 to next year's .1.
fn sequential(from: Release, to: Release) -> bool {
    (from.year == to.year && from.half == 1 && to.half == 2)
        || (to.year == from.year + 1 && from.half == 2 && to.half == 1)
}

/// The mismatch gate: an image whose tag names another release than `spec.openStackRelease`.
/// A digest-pinned image and an unparseable tag or release carry nothing to compare.
pub fn image_mismatch(image: &ImageSpec, release: &str) -> Option<String> {
    if image.digest.is_some() {
        return None;
    }
    let tag = image.tag.as_deref()?;
    let (named, declared) = (parse(tag).ok()?, parse(release).ok()?);
    (named != declared).then(|| {
        format!(
            "spec.image.tag {tag:?} names OpenStack release {named} but spec.openStackRelease is {release:?}; bump spec.image in lockstep with spec.openStackRelease"
        )
    })
}

/// Whether the spec asks for an upgrade from `installed` (no phase active): both set,
/// different, and not a patch-only bump. A release that does not parse counts as an upgrade,
/// so the initiation reports it.
pub fn upgrade_requested(installed: &str, spec: &str) -> bool {
    if installed.is_empty() || spec.is_empty() || installed == spec {
        return false;
    }
    match (parse(installed), parse(spec)) {
        (Ok(a), Ok(b)) => a != b,
        _ => true,
    }
}

/// A decision that rejects the requested release: the reason, and the message that is also
/// the Warning event's note and the step's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The condition reason.
    pub reason: Reason,
    /// The Warning event's reason, spelled as the condition's.
    pub event: EventReason,
    /// The message.
    pub message: String,
}

fn reject(reason: Reason, event: EventReason, message: String) -> Rejection {
    Rejection {
        reason,
        event,
        message,
    }
}

/// Validates the path of a requested upgrade.
pub fn initiate(installed: &str, target: &str) -> Result<(), Rejection> {
    let from = parse(installed).map_err(|e| {
        reject(
            Reason::VersionParseError,
            EventReason::VersionParseError,
            format!("failed to parse installed release {installed:?}: {e}"),
        )
    })?;
    let to = parse(target).map_err(|e| {
        reject(
            Reason::VersionParseError,
            EventReason::VersionParseError,
            format!("failed to parse target release {target:?}: {e}"),
        )
    })?;
    if to < from {
        return Err(reject(
            Reason::DowngradeNotSupported,
            EventReason::DowngradeNotSupported,
            format!("downgrade from {installed} to {target} is not supported"),
        ));
    }
    if !sequential(from, to) {
        return Err(reject(
            Reason::UpgradePathInvalid,
            EventReason::UpgradePathInvalid,
            format!(
                "upgrade from {installed} to {target} is not sequential; only sequential upgrades are supported"
            ),
        ));
    }
    Ok(())
}

/// What an active upgrade does this pass, before its phase is dispatched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Active {
    /// The spec release was reverted to the installed one: delete the phase Jobs, clear the
    /// phase and the target.
    Abort,
    /// The spec names a third release.
    TargetChanged(Rejection),
    /// Go on with the phase.
    Continue,
}

/// The abort and target-changed checks of an active upgrade `installed` → `target`.
pub fn active(installed: &str, target: &str, spec: &str) -> Active {
    if spec == installed {
        Active::Abort
    } else if spec != target {
        Active::TargetChanged(reject(
            Reason::UpgradeTargetChanged,
            EventReason::UpgradeTargetChanged,
            format!(
                "Spec release changed to {spec} during active upgrade {installed} → {target}; complete or roll back the current upgrade first"
            ),
        ))
    } else {
        Active::Continue
    }
}

/// One phase's verdict: the condition, what the status becomes, an event, and how to go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// DatabaseReady is True (only once the contract phase completed).
    pub ok: bool,
    /// The condition reason.
    pub reason: Reason,
    /// The condition message.
    pub message: String,
    /// The phase the status moves to; `Some(None)` clears it (and the target).
    pub next_phase: Option<Option<UpgradePhase>>,
    /// The event (warning, reason) this step publishes on a transition.
    pub event: Option<EventReason>,
    /// How the pass goes on.
    pub flow: PhaseFlow,
}

/// How a phase lets the pass go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseFlow {
    /// Go on with the workload steps.
    Continue,
    /// Come back right away (a phase moved).
    NextPass,
    /// Come back after the upgrade wait (a phase Job runs).
    Wait,
    /// Fail the step with the message.
    Fail,
}

/// The verbs of a phase Job: (`ExpandInProgress`, `ExpandFailed`, "Expand", "expand").
fn vocabulary(phase: UpgradePhase) -> Option<(Reason, Reason, &'static str, EventReason)> {
    match phase {
        UpgradePhase::Expanding => Some((
            Reason::ExpandInProgress,
            Reason::ExpandFailed,
            "Expand",
            EventReason::ExpandFailed,
        )),
        UpgradePhase::Migrating => Some((
            Reason::MigrateInProgress,
            Reason::MigrateFailed,
            "Migrate",
            EventReason::MigrateFailed,
        )),
        UpgradePhase::Contracting => Some((
            Reason::ContractInProgress,
            Reason::ContractFailed,
            "Contract",
            EventReason::ContractFailed,
        )),
        UpgradePhase::RollingUpdate => None,
    }
}

/// Dispatches an active phase on how its Job ran (`run` is ignored in RollingUpdate, which
/// runs no Job); `job` is the phase Job's name.
pub fn phase(phase: UpgradePhase, run: &Run, job: &str, from: &str, to: &str) -> Step {
    let step = |ok, reason, message: String, next_phase, event, flow| Step {
        ok,
        reason,
        message,
        next_phase,
        event,
        flow,
    };
    let Some((running, failed, verb, failed_event)) = vocabulary(phase) else {
        return step(
            false,
            Reason::UpgradeRollingUpdate,
            format!("Waiting for Deployment rollout: {from} → {to}"),
            None,
            None,
            PhaseFlow::Continue,
        );
    };
    match run {
        Run::Failed(error) => step(
            false,
            failed,
            format!("{verb} job {job} failed: {error}"),
            None,
            Some(failed_event),
            PhaseFlow::Fail,
        ),
        Run::Done => match phase {
            UpgradePhase::Expanding => step(
                false,
                Reason::MigrateInProgress,
                format!("Expand complete, starting migrate: {from} → {to}"),
                Some(Some(UpgradePhase::Migrating)),
                Some(EventReason::ExpandComplete),
                PhaseFlow::NextPass,
            ),
            UpgradePhase::Migrating => step(
                false,
                Reason::UpgradeRollingUpdate,
                format!("Migrate complete, waiting for Deployment rollout: {from} → {to}"),
                Some(Some(UpgradePhase::RollingUpdate)),
                Some(EventReason::MigrateComplete),
                PhaseFlow::NextPass,
            ),
            _ => step(
                true,
                Reason::DatabaseSynced,
                format!("Database schema is up to date (upgraded {from} → {to})"),
                Some(None),
                Some(EventReason::UpgradeComplete),
                PhaseFlow::Continue,
            ),
        },
        Run::Create | Run::Recreate | Run::Running => step(
            false,
            running,
            format!("{verb} phase running: {from} → {to}"),
            None,
            None,
            PhaseFlow::Wait,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_strings_parse_as_specified() {
        let ok = |s: &str, year, half| assert_eq!(parse(s), Ok(Release { year, half }), "{s}");
        ok("2026.1", 2026, 1);
        ok("2026.2-p1", 2026, 2);
        ok("2010.1", 2010, 1);
        for bad in [
            "latest", "2025", "2025.2.3", "2025.3", "2009.1", "26.1", "2026.1-", "", "2026.10",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse("2025.3"),
            Err("release number \"3\" is neither 1 nor 2".into())
        );
    }

    #[test]
    fn the_mismatch_gate_compares_only_comparable_tags() {
        let image = |tag: Option<&str>, digest: Option<&str>| ImageSpec {
            repository: "ghcr.io/c5c3/nova".into(),
            tag: tag.map(Into::into),
            digest: digest.map(Into::into),
        };
        assert_eq!(
            image_mismatch(&image(Some("2025.2"), None), "2026.1").as_deref(),
            Some(
                "spec.image.tag \"2025.2\" names OpenStack release 2025.2 but spec.openStackRelease is \"2026.1\"; bump spec.image in lockstep with spec.openStackRelease"
            )
        );
        for (what, img) in [
            ("same release", image(Some("2026.1"), None)),
            ("patch suffix", image(Some("2026.1-p1"), None)),
            ("digest", image(None, Some("sha256:abc"))),
            ("unparseable", image(Some("latest"), None)),
        ] {
            assert_eq!(image_mismatch(&img, "2026.1"), None, "{what}");
        }
    }

    #[test]
    fn upgrade_detection_skips_fresh_installs_and_patch_bumps() {
        for (installed, spec, upgrade) in [
            ("", "2026.1", false),
            ("2026.1", "2026.1", false),
            ("2026.1", "2026.1-p2", false),
            ("2026.1", "2026.2", true),
            ("2026.1", "2025.2", true),
            ("garbage", "2026.1", true),
        ] {
            assert_eq!(
                upgrade_requested(installed, spec),
                upgrade,
                "{installed} → {spec}"
            );
        }
    }

    #[test]
    fn initiation_rejects_every_invalid_path_with_its_reason() {
        assert_eq!(initiate("2026.1", "2026.2"), Ok(()));
        assert_eq!(initiate("2025.2", "2026.1"), Ok(()));
        for (from, to, reason, message) in [
            (
                "x",
                "2026.2",
                Reason::VersionParseError,
                "failed to parse installed release \"x\": expected YYYY.N with an optional -<patch> suffix",
            ),
            (
                "2026.1",
                "2026.5",
                Reason::VersionParseError,
                "failed to parse target release \"2026.5\": release number \"5\" is neither 1 nor 2",
            ),
            (
                "2026.2",
                "2026.1",
                Reason::DowngradeNotSupported,
                "downgrade from 2026.2 to 2026.1 is not supported",
            ),
            (
                "2026.1",
                "2027.1",
                Reason::UpgradePathInvalid,
                "upgrade from 2026.1 to 2027.1 is not sequential; only sequential upgrades are supported",
            ),
        ] {
            let rejected = initiate(from, to).expect_err("rejected");
            assert_eq!(
                (rejected.reason, rejected.message.as_str()),
                (reason, message),
                "{from} → {to}"
            );
            assert_eq!(
                rejected.event.as_str(),
                reason.as_str(),
                "the Warning is spelled as the condition's reason"
            );
        }
    }

    #[test]
    fn an_active_upgrade_aborts_on_revert_and_refuses_a_third_release() {
        assert_eq!(active("2026.1", "2026.2", "2026.1"), Active::Abort);
        assert_eq!(active("2026.1", "2026.2", "2026.2"), Active::Continue);
        assert_eq!(
            active("2026.1", "2026.2", "2027.1"),
            Active::TargetChanged(Rejection {
                reason: Reason::UpgradeTargetChanged,
                event: EventReason::UpgradeTargetChanged,
                message: "Spec release changed to 2027.1 during active upgrade 2026.1 → 2026.2; complete or roll back the current upgrade first".into(),
            })
        );
    }

    #[test]
    fn every_phase_reports_its_reasons() {
        use UpgradePhase::*;
        let failed = Run::Failed("job has permanently failed: openstack/nova-db-expand".into());
        let step = |ok, reason, message: &str, next_phase, event, flow| Step {
            ok,
            reason,
            message: message.into(),
            next_phase,
            event,
            flow,
        };
        let cases = [
            (
                Expanding,
                &Run::Running,
                step(
                    false,
                    Reason::ExpandInProgress,
                    "Expand phase running: 2026.1 → 2026.2",
                    None,
                    None,
                    PhaseFlow::Wait,
                ),
            ),
            (
                Expanding,
                &Run::Create,
                step(
                    false,
                    Reason::ExpandInProgress,
                    "Expand phase running: 2026.1 → 2026.2",
                    None,
                    None,
                    PhaseFlow::Wait,
                ),
            ),
            (
                Expanding,
                &failed,
                step(
                    false,
                    Reason::ExpandFailed,
                    "Expand job j failed: job has permanently failed: openstack/nova-db-expand",
                    None,
                    Some(EventReason::ExpandFailed),
                    PhaseFlow::Fail,
                ),
            ),
            (
                Expanding,
                &Run::Done,
                step(
                    false,
                    Reason::MigrateInProgress,
                    "Expand complete, starting migrate: 2026.1 → 2026.2",
                    Some(Some(Migrating)),
                    Some(EventReason::ExpandComplete),
                    PhaseFlow::NextPass,
                ),
            ),
            (
                Migrating,
                &Run::Running,
                step(
                    false,
                    Reason::MigrateInProgress,
                    "Migrate phase running: 2026.1 → 2026.2",
                    None,
                    None,
                    PhaseFlow::Wait,
                ),
            ),
            (
                Migrating,
                &failed,
                step(
                    false,
                    Reason::MigrateFailed,
                    "Migrate job j failed: job has permanently failed: openstack/nova-db-expand",
                    None,
                    Some(EventReason::MigrateFailed),
                    PhaseFlow::Fail,
                ),
            ),
            (
                Migrating,
                &Run::Done,
                step(
                    false,
                    Reason::UpgradeRollingUpdate,
                    "Migrate complete, waiting for Deployment rollout: 2026.1 → 2026.2",
                    Some(Some(RollingUpdate)),
                    Some(EventReason::MigrateComplete),
                    PhaseFlow::NextPass,
                ),
            ),
            (
                RollingUpdate,
                &Run::Done,
                step(
                    false,
                    Reason::UpgradeRollingUpdate,
                    "Waiting for Deployment rollout: 2026.1 → 2026.2",
                    None,
                    None,
                    PhaseFlow::Continue,
                ),
            ),
            (
                Contracting,
                &Run::Recreate,
                step(
                    false,
                    Reason::ContractInProgress,
                    "Contract phase running: 2026.1 → 2026.2",
                    None,
                    None,
                    PhaseFlow::Wait,
                ),
            ),
            (
                Contracting,
                &failed,
                step(
                    false,
                    Reason::ContractFailed,
                    "Contract job j failed: job has permanently failed: openstack/nova-db-expand",
                    None,
                    Some(EventReason::ContractFailed),
                    PhaseFlow::Fail,
                ),
            ),
            (
                Contracting,
                &Run::Done,
                step(
                    true,
                    Reason::DatabaseSynced,
                    "Database schema is up to date (upgraded 2026.1 → 2026.2)",
                    Some(None),
                    Some(EventReason::UpgradeComplete),
                    PhaseFlow::Continue,
                ),
            ),
        ];
        for (p, run, expected) in cases {
            assert_eq!(
                phase(p, run, "j", "2026.1", "2026.2"),
                expected,
                "{p:?} {run:?}"
            );
        }
    }
}
