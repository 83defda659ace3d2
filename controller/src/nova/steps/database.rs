//! The Database step (`nova-reconciler.txt`, "Database", "The cells sequence", "Release
//! upgrade"; `common-types.md` §3.9–3.12): both schemas and cell0 provisioned through the
//! MariaDB operator, the config wait and the image/release gate, then either the steady-state
//! `{name}-db-sync` Job (which promotes `installedRelease` and publishes `status.cells`) or
//! the expand-migrate-contract phases of a release upgrade.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use nova_api::claims::Conflict;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::events::EventReason;
use nova_api::v1alpha1::{CellStatus, Nova, UpgradePhase};

use crate::clusters::{Caching, KindSpec};
use crate::clusters::{ClusterExt, JobReport};
use crate::metrics::JobFamily;
use crate::nova::db_provision::{self, BlockObserved, Outcome};
use crate::nova::job_run::{self, ObservedJob, Run, Terminal};
use crate::nova::release::{self, Active, PhaseFlow, Rejection};
use crate::nova::resolved::{Resolved, StatusUpdate};
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::kinds;
use crate::pipeline::conditions::is_new;
use crate::pipeline::uses::{Uses, names, owns};
use crate::pipeline::{
    Plan, REQUEUE_DATABASE_WAIT, REQUEUE_NEXT_PASS, REQUEUE_UPGRADE_WAIT, StepError, StepFuture,
    Waiting, observe_then_plan,
};
use crate::render::db_jobs::{self, DbJob};
use crate::render::db_scripts::parse_cells;
use crate::render::pod::PodInputs;

const CONDITION: NovaConditionType = NovaConditionType::DatabaseReady;

/// The Jobs the step runs, in the order it may run them.
const JOBS: [DbJob; 4] = [DbJob::Sync, DbJob::Expand, DbJob::Migrate, DbJob::Contract];

/// What the Database step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Per block (nova_api, then cell): the MariaDB cluster's readiness and which of the
    /// block's objects report Ready.
    pub blocks: [BlockObserved; 2],
    /// The cached Jobs of this Nova, by suffix.
    pub jobs: BTreeMap<&'static str, ObservedJob>,
    /// The db-sync Job's termination report, read once it completed.
    pub report: Option<JobReport>,
    /// A schema of this Nova an older Nova already claims on the same server.
    pub claimed: Option<Conflict>,
}

/// The MariaDB clusters, by name, the three kinds provisioned per schema and the db Jobs.
pub const KINDS: &[Uses] = &[
    names(|| KindSpec::external(kinds::mariadb(), Caching::Full)),
    owns(mariadb_child::<0>),
    owns(mariadb_child::<1>),
    owns(mariadb_child::<2>),
    owns(|| KindSpec::of::<Job>(Caching::OnDemand)),
];

/// The `I`th of the kinds provisioned per schema (`kinds::mariadb_children`).
pub fn mariadb_child<const I: usize>() -> KindSpec {
    let [database, user, grant] = kinds::mariadb_children();
    KindSpec::external([database, user, grant][I].clone(), Caching::Full)
}

/// The Database step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let name = pass.cr.name_any();
    let mut observed = Observed {
        claimed: pass.shared.held_by_older(&pass.cr),
        ..Observed::default()
    };
    for (block, seen) in db_provision::blocks(&pass.cr)
        .iter()
        .zip(observed.blocks.iter_mut())
    {
        let Some(cluster) = block.cluster() else {
            continue;
        };
        seen.cluster_ready = pass
            .cluster
            .get(&kinds::mariadb(), Some(ns), cluster)
            .await?
            .is_some_and(|c| kinds::is_ready(&c));
        for (kind, name) in block.objects() {
            let object = pass.cluster.get(&kind.resource(), Some(ns), &name).await?;
            if object.is_some_and(|o| kinds::is_ready(&o)) {
                seen.ready.insert((kind, name));
            }
        }
    }
    for which in JOBS {
        if let Some(job) = pass
            .cluster
            .get_typed::<Job>(ns, &which.name(&name))
            .await?
        {
            observed.jobs.insert(which.suffix(), ObservedJob::of(&job));
        }
    }
    if let Some(sync) = observed.jobs.get(DbJob::Sync.suffix())
        && sync.terminal == Some(Terminal::Complete)
    {
        observed.report = Some(pass.cluster.job_report(ns, &sync.uid).await?);
    }
    Ok(observed)
}

/// The Database step's plan.
pub fn plan(nova: &Nova, observed: &Observed, resolved: &Resolved) -> NovaPlan {
    let mut plan = Plan::proceed();
    // The younger of two Novas on one schema provisions and migrates nothing.
    if let Some(conflict) = &observed.claimed {
        return wait(
            plan,
            Waiting {
                reason: Reason::SchemaInUse,
                message: format!("{}: {}", conflict.claim.field, conflict.message()),
            },
        );
    }
    for (block, seen) in db_provision::blocks(nova).iter().zip(&observed.blocks) {
        let (children, outcome) = db_provision::provision(block, seen);
        plan = children.into_iter().fold(plan, Plan::apply);
        match outcome {
            Outcome::Ready => {}
            Outcome::Wait(waiting) => return wait(plan, waiting),
            Outcome::Refused(message) => return plan.failing(StepError::Refused(message)),
        }
    }
    let name = nova.name_any();
    let Some(config_map) = resolved.config_map.as_deref() else {
        return wait(
            plan,
            Waiting {
                reason: Reason::WaitingForConfig,
                message: format!(
                    "Waiting for the rendered config ConfigMap of {name} before the migration Jobs can mount it"
                ),
            },
        );
    };
    let status = nova.status.clone().unwrap_or_default();
    let inputs = PodInputs {
        name: &name,
        spec: &nova.spec,
        config_map,
        digests: &resolved.digests,
        installed_release: status.installed_release.as_deref(),
        broker_port: resolved.broker_port,
    };
    let tracking = Tracking {
        nova,
        observed,
        inputs,
        namespace: nova.namespace().unwrap_or_default(),
    };
    let installed = status.installed_release.clone().unwrap_or_default();
    let wanted = &nova.spec.open_stack_release;
    if let (Some(phase), Some(target)) = (status.upgrade_phase, status.target_release.clone()) {
        return match release::active(&installed, &target, wanted) {
            Active::Abort => tracking.abort(plan, &installed, &target),
            Active::TargetChanged(rejection) => tracking.reject(plan, rejection),
            Active::Continue => match tracking.mismatch() {
                Some(waiting) => wait(plan, waiting),
                None => tracking.phase(plan, phase, &installed, &target),
            },
        };
    }
    if let Some(waiting) = tracking.mismatch() {
        return wait(plan, waiting);
    }
    if !release::upgrade_requested(&installed, wanted) {
        return tracking.sync(plan);
    }
    match release::initiate(&installed, wanted) {
        Err(rejection) => tracking.reject(plan, rejection),
        Ok(()) => {
            let message = format!("Upgrade detected: {installed} → {wanted} (phase: Expanding)");
            plan.set(StatusUpdate::TargetRelease(Some(wanted.clone())))
                .set(StatusUpdate::UpgradePhase(Some(UpgradePhase::Expanding)))
                .report(CONDITION, false, Reason::ExpandInProgress, message)
                .event(
                    EventReason::UpgradeInitiated,
                    format!("Upgrade initiated: {installed} → {wanted}"),
                )
                .requeue(REQUEUE_NEXT_PASS)
        }
    }
}

fn wait(plan: NovaPlan, waiting: Waiting) -> NovaPlan {
    plan.waiting(CONDITION, waiting)
        .requeue(REQUEUE_DATABASE_WAIT)
}

/// The conditions the CR carries.
pub fn conditions_of(nova: &Nova) -> &[Condition] {
    nova.status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default()
}

/// Reports DatabaseReady, with the event only on a transition.
fn verdict(
    nova: &Nova,
    plan: NovaPlan,
    ok: bool,
    reason: Reason,
    message: String,
    event: Option<EventReason>,
) -> NovaPlan {
    let plan = match event {
        Some(event)
            if is_new(
                conditions_of(nova),
                CONDITION.as_str(),
                ok,
                reason,
                &message,
            ) =>
        {
            plan.event(event, message.clone())
        }
        _ => plan,
    };
    plan.report(CONDITION, ok, reason, message)
}

/// Release tracking once provisioning and the config wait passed.
struct Tracking<'a> {
    nova: &'a Nova,
    observed: &'a Observed,
    inputs: PodInputs<'a>,
    namespace: String,
}

impl Tracking<'_> {
    /// The image/release gate.
    fn mismatch(&self) -> Option<Waiting> {
        let spec = &self.nova.spec;
        release::image_mismatch(&spec.image, &spec.open_stack_release).map(|message| Waiting {
            reason: Reason::ImageReleaseMismatch,
            message,
        })
    }

    /// A rejected release: the condition, a Warning event of the same reason, and an error.
    fn reject(&self, plan: NovaPlan, rejection: Rejection) -> NovaPlan {
        let Rejection {
            reason,
            event,
            message,
        } = rejection;
        verdict(self.nova, plan, false, reason, message.clone(), Some(event))
            .failing(StepError::Refused(message))
    }

    /// Runs (or waits on) one Job: creates it when absent, deletes it when it ended under
    /// another pod template.
    fn run_job(&self, plan: NovaPlan, which: DbJob) -> (NovaPlan, Run) {
        let (child, key) = db_jobs::job(&self.inputs, which);
        let name = which.name(self.inputs.name);
        let run = job_run::decide(
            self.observed.jobs.get(which.suffix()),
            &key,
            &self.namespace,
            &name,
        );
        let observed = self.observed.jobs.get(which.suffix());
        let plan = match observed.and_then(|job| job.record(JobFamily::DbSync, which.suffix())) {
            Some(record) => plan.count(record),
            None => plan,
        };
        let plan = match run {
            Run::Create => plan.apply(child),
            Run::Recreate => plan.remove(child.kind.clone(), name),
            _ => plan,
        };
        (plan, run)
    }

    /// The steady state: the db-sync Job.
    fn sync(&self, plan: NovaPlan) -> NovaPlan {
        let (plan, run) = self.run_job(plan, DbJob::Sync);
        match run {
            Run::Failed(error) => {
                let message = format!("db_sync job failed: {error}");
                verdict(
                    self.nova,
                    plan,
                    false,
                    Reason::DBSyncFailed,
                    message,
                    Some(EventReason::DBSyncFailed),
                )
                .failing(StepError::Refused(error))
            }
            Run::Done => {
                let plan = promote(self.cells(plan), &self.nova.spec.open_stack_release);
                verdict(
                    self.nova,
                    plan,
                    true,
                    Reason::DatabaseSynced,
                    "Database schema is up to date (revision verified)".to_owned(),
                    None,
                )
            }
            Run::Create | Run::Recreate | Run::Running => plan
                .report(
                    CONDITION,
                    false,
                    Reason::DBSyncInProgress,
                    "db_sync job is running",
                )
                .requeue(REQUEUE_DATABASE_WAIT),
        }
    }

    /// `status.cells` from the db-sync report; an unreadable report leaves the published
    /// cells as they are and says so once, when it was read.
    fn cells(&self, plan: NovaPlan) -> NovaPlan {
        let Some(report) = &self.observed.report else {
            return plan;
        };
        match report.message.as_deref().and_then(parse_cells) {
            Some(cells) => plan.set(StatusUpdate::Cells(
                cells
                    .into_iter()
                    .map(|(name, uuid)| CellStatus { name, uuid })
                    .collect(),
            )),
            None if report.fresh => plan.event(EventReason::CellsReportUnavailable,
                format!(
                    "The termination report of Job {} names no cell; status.cells is left as it was",
                    DbJob::Sync.name(self.inputs.name)
                ),
            ),
            None => plan,
        }
    }

    /// The spec release was reverted to the installed one: the phase Jobs go, and with them
    /// the phase and the target.
    fn abort(&self, plan: NovaPlan, installed: &str, target: &str) -> NovaPlan {
        let plan = [DbJob::Expand, DbJob::Migrate, DbJob::Contract]
            .into_iter()
            .filter(|which| self.observed.jobs.contains_key(which.suffix()))
            .fold(plan, |plan, which| {
                plan.remove(kinds_job(), which.name(self.inputs.name))
            });
        plan.set(StatusUpdate::UpgradePhase(None))
            .set(StatusUpdate::TargetRelease(None))
            .event(EventReason::UpgradeAborted,
                format!(
                    "Upgrade {installed} → {target} aborted: spec release reverted to installed release {installed}"
                ),
            )
            .requeue(REQUEUE_NEXT_PASS)
    }

    /// One pass of an active upgrade phase.
    fn phase(&self, plan: NovaPlan, phase: UpgradePhase, from: &str, to: &str) -> NovaPlan {
        let which = match phase {
            UpgradePhase::Expanding => Some(DbJob::Expand),
            UpgradePhase::Migrating => Some(DbJob::Migrate),
            UpgradePhase::Contracting => Some(DbJob::Contract),
            UpgradePhase::RollingUpdate => None,
        };
        let (plan, run, job) = match which {
            Some(which) => {
                let (plan, run) = self.run_job(plan, which);
                (plan, run, which.name(self.inputs.name))
            }
            None => (plan, Run::Done, String::new()),
        };
        let step = release::phase(phase, &run, &job, from, to);
        let plan = match step.next_phase {
            Some(Some(next)) => plan.set(StatusUpdate::UpgradePhase(Some(next))),
            Some(None) => promote(plan, to)
                .set(StatusUpdate::TargetRelease(None))
                .set(StatusUpdate::UpgradePhase(None)),
            None => plan,
        };
        let message = step.message.clone();
        let plan = verdict(self.nova, plan, step.ok, step.reason, message, step.event);
        match step.flow {
            PhaseFlow::Continue => plan,
            PhaseFlow::NextPass => plan.requeue(REQUEUE_NEXT_PASS),
            PhaseFlow::Wait => plan.requeue(REQUEUE_UPGRADE_WAIT),
            PhaseFlow::Fail => plan.failing(StepError::Refused(step.message)),
        }
    }
}

/// Promotes `release` to `status.installedRelease`, and resolves it for the workload steps of
/// this pass, which stamp it on their pods: read from the stored status instead, a fresh
/// install would roll the four non-API roles once more on the next pass.
fn promote(plan: NovaPlan, release: &str) -> NovaPlan {
    plan.set(StatusUpdate::InstalledRelease(release.to_owned()))
        .resolve(Resolved {
            installed_release: Some(release.to_owned()),
            ..Default::default()
        })
}

fn kinds_job() -> kube::core::ApiResource {
    kube::core::ApiResource::erase::<Job>(&())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::pipeline::Flow;
    use nova_api::v1alpha1::NovaStatus;

    fn provisioned(nova: &Nova) -> Observed {
        let mut observed = Observed::default();
        for (block, seen) in db_provision::blocks(nova)
            .iter()
            .zip(observed.blocks.iter_mut())
        {
            seen.cluster_ready = true;
            seen.ready = block.objects().into_iter().collect();
        }
        observed
    }

    fn configured() -> Resolved {
        Resolved {
            config_map: Some("nova-config-0123abcd".into()),
            ..Default::default()
        }
    }

    fn reason(plan: &NovaPlan) -> Option<(Reason, &str)> {
        plan.verdict(CONDITION)
            .map(|v| (v.reason, v.message.as_str()))
    }

    fn events(plan: &NovaPlan) -> Vec<&str> {
        plan.events.iter().map(|e| e.reason.as_str()).collect()
    }

    /// `nova` with installed release, and optionally an active phase toward `target`.
    fn at(installed: &str, spec: &str, phase: Option<(UpgradePhase, &str)>) -> Nova {
        let mut nova = example();
        nova.spec.open_stack_release = spec.into();
        nova.spec.image.tag = Some(spec.into());
        nova.status = Some(NovaStatus {
            installed_release: (!installed.is_empty()).then(|| installed.into()),
            upgrade_phase: phase.map(|p| p.0),
            target_release: phase.map(|p| p.1.into()),
            ..Default::default()
        });
        nova
    }

    /// The observation with `which` present under its current key, ended as `terminal`.
    fn with_job(nova: &Nova, which: DbJob, terminal: Option<Terminal>, same_key: bool) -> Observed {
        let mut observed = provisioned(nova);
        let resolved = configured();
        let name = nova.name_any();
        let status = nova.status.clone().unwrap_or_default();
        let inputs = PodInputs {
            name: &name,
            spec: &nova.spec,
            config_map: resolved.config_map.as_deref().unwrap_or_default(),
            digests: &resolved.digests,
            installed_release: status.installed_release.as_deref(),
            broker_port: None,
        };
        let (_, key) = db_jobs::job(&inputs, which);
        observed.jobs.insert(
            which.suffix(),
            ObservedJob {
                uid: format!("{}-uid", which.suffix()),
                key: Some(if same_key { key } else { "old".into() }),
                terminal,
                seconds: 30,
            },
        );
        observed
    }

    fn jobs(plan: &NovaPlan) -> Vec<&str> {
        plan.children
            .iter()
            .filter(|c| c.kind.kind == "Job")
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn the_api_block_gates_before_the_cell_block_is_touched() {
        let nova = example();
        let mut observed = provisioned(&nova);
        observed.blocks[0].cluster_ready = false;
        let plan = plan(&nova, &observed, &configured());
        assert!(plan.children.is_empty());
        assert_eq!(
            reason(&plan),
            Some((
                Reason::ClusterNotReady,
                "MariaDB cluster \"openstack-mariadb\" is not ready"
            ))
        );
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }

    #[test]
    fn both_blocks_provision_then_the_config_wait_comes() {
        let nova = example();
        let plan = plan(&nova, &provisioned(&nova), &Resolved::default());
        let names: Vec<String> = plan
            .children
            .iter()
            .map(|c| format!("{}/{}", c.kind.kind, c.name))
            .collect();
        assert_eq!(
            names,
            [
                "Database/nova-api",
                "User/nova-api",
                "Grant/nova-api",
                "Database/nova",
                "Database/nova-nova-cell0",
                "User/nova",
                "Grant/nova",
                "Grant/nova-nova-cell0"
            ]
        );
        assert_eq!(reason(&plan).map(|r| r.0), Some(Reason::WaitingForConfig));
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }

    #[test]
    fn a_schema_an_older_nova_claims_holds_this_one_before_anything_is_applied() {
        let nova = example();
        let mut older = example();
        older.metadata.name = Some("older".into());
        let observed = Observed {
            claimed: nova_api::claims::conflicts(&nova, [&older])
                .into_iter()
                .next(),
            ..provisioned(&nova)
        };
        let plan = plan(&nova, &observed, &configured());
        assert!(plan.children.is_empty(), "no MariaDB object, no Job");
        assert_eq!(
            reason(&plan),
            Some((
                Reason::SchemaInUse,
                "spec.apiDatabase.database: schema nova_api on MariaDB openstack/openstack-mariadb is already used by Nova openstack/older (spec.apiDatabase.database): two Novas on one schema would migrate and delete each other's data"
            ))
        );
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }

    #[test]
    fn a_refused_schema_fails_the_step_without_applying() {
        let mut nova = example();
        nova.spec.api_database.database = "nova-api".into();
        let plan = plan(&nova, &provisioned(&nova), &configured());
        assert!(plan.children.is_empty());
        assert!(matches!(plan.error, Some(StepError::Refused(_))));
    }

    #[test]
    fn an_image_naming_another_release_waits() {
        let mut nova = example();
        nova.spec.image.tag = Some("2025.2".into());
        let plan = plan(&nova, &provisioned(&nova), &configured());
        assert_eq!(
            reason(&plan).map(|r| r.0),
            Some(Reason::ImageReleaseMismatch)
        );
        assert!(jobs(&plan).is_empty());
        assert_eq!(plan.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));
    }

    #[test]
    fn a_fresh_install_runs_db_sync_then_promotes_and_publishes_the_cells() {
        let nova = at("", "2026.1", None);
        let created = plan(&nova, &provisioned(&nova), &configured());
        assert_eq!(jobs(&created), ["nova-db-sync"]);
        assert_eq!(
            reason(&created),
            Some((Reason::DBSyncInProgress, "db_sync job is running"))
        );
        assert_eq!(created.flow, Flow::RequeueAfter(REQUEUE_DATABASE_WAIT));

        let running = plan(
            &nova,
            &with_job(&nova, DbJob::Sync, None, true),
            &configured(),
        );
        assert!(jobs(&running).is_empty());
        assert_eq!(
            running.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::DBSyncInProgress)
        );

        let mut done = with_job(&nova, DbJob::Sync, Some(Terminal::Complete), true);
        done.report = Some(JobReport {
            message: Some("cell1=2f1e6f3c-7a0b-4d4c-9a51-0c3a1d5f0e11\ncell0=00000000-0000-0000-0000-000000000000\n".into()),
            fresh: true,
        });
        let synced = plan(&nova, &done, &configured());
        assert_eq!(
            reason(&synced),
            Some((
                Reason::DatabaseSynced,
                "Database schema is up to date (revision verified)"
            ))
        );
        assert!(
            events(&synced).is_empty(),
            "DatabaseReady turning True is the record: no event repeats it"
        );
        assert_eq!(synced.flow, Flow::Continue);
        assert_eq!(
            synced.resolved.installed_release.as_deref(),
            Some("2026.1"),
            "the workloads of this pass stamp the promoted release"
        );
        assert_eq!(
            synced.records,
            [crate::pipeline::JobRecord {
                family: JobFamily::DbSync,
                suffix: "db-sync",
                uid: "db-sync-uid".into(),
                succeeded: true,
                seconds: 30.0,
            }]
        );
        assert!(running.records.is_empty(), "a running Job is not counted");
        assert_eq!(
            synced.status,
            [
                StatusUpdate::Cells(vec![
                    CellStatus {
                        name: "cell0".into(),
                        uuid: "00000000-0000-0000-0000-000000000000".into()
                    },
                    CellStatus {
                        name: "cell1".into(),
                        uuid: "2f1e6f3c-7a0b-4d4c-9a51-0c3a1d5f0e11".into()
                    },
                ]),
                StatusUpdate::InstalledRelease("2026.1".into()),
            ]
        );
    }

    #[test]
    fn a_converged_pass_publishes_no_event_and_an_unreadable_report_keeps_the_cells() {
        let mut nova = at("2026.1", "2026.1", None);
        let mut observed = with_job(&nova, DbJob::Sync, Some(Terminal::Complete), true);
        observed.report = Some(JobReport {
            message: Some("no cells here".into()),
            fresh: true,
        });
        let first = plan(&nova, &observed, &configured());
        assert_eq!(events(&first), ["CellsReportUnavailable"]);
        assert!(
            !first
                .status
                .iter()
                .any(|u| matches!(u, StatusUpdate::Cells(_)))
        );
        crate::pipeline::conditions::set(
            &mut nova.status.get_or_insert_with(Default::default).conditions,
            CONDITION.as_str(),
            true,
            Reason::DatabaseSynced,
            "Database schema is up to date (revision verified)",
            Some(1),
        );
        observed.report = Some(JobReport {
            message: Some("no cells here".into()),
            fresh: false,
        });
        let steady = plan(&nova, &observed, &configured());
        assert!(steady.events.is_empty(), "{:?}", steady.events);
        assert!(steady.children.iter().all(|c| c.kind.kind != "Job"));
    }

    #[test]
    fn a_failed_db_sync_fails_the_step_and_a_changed_template_re_runs() {
        let nova = at("2026.1", "2026.1", None);
        let failed = plan(
            &nova,
            &with_job(&nova, DbJob::Sync, Some(Terminal::Failed), true),
            &configured(),
        );
        assert_eq!(
            reason(&failed),
            Some((
                Reason::DBSyncFailed,
                "db_sync job failed: job has permanently failed: openstack/nova-db-sync"
            ))
        );
        assert_eq!(events(&failed), ["DBSyncFailed"]);
        assert!(failed.events[0].reason.warning());
        assert_eq!(
            failed
                .records
                .iter()
                .map(|r| (r.suffix, r.succeeded))
                .collect::<Vec<_>>(),
            [("db-sync", false)]
        );
        assert!(failed.error.is_some());
        for terminal in [Terminal::Failed, Terminal::Complete] {
            let stale = plan(
                &nova,
                &with_job(&nova, DbJob::Sync, Some(terminal), false),
                &configured(),
            );
            assert_eq!(
                stale
                    .removals
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>(),
                ["nova-db-sync"]
            );
            assert!(jobs(&stale).is_empty());
            assert_eq!(
                stale.verdict(CONDITION).map(|v| v.reason),
                Some(Reason::DBSyncInProgress)
            );
        }
    }

    #[test]
    fn a_release_bump_initiates_the_upgrade_and_bad_paths_are_rejected() {
        let nova = at("2026.1", "2026.2", None);
        let started = plan(&nova, &provisioned(&nova), &configured());
        assert_eq!(
            reason(&started),
            Some((
                Reason::ExpandInProgress,
                "Upgrade detected: 2026.1 → 2026.2 (phase: Expanding)"
            ))
        );
        assert_eq!(
            started.status,
            [
                StatusUpdate::TargetRelease(Some("2026.2".into())),
                StatusUpdate::UpgradePhase(Some(UpgradePhase::Expanding))
            ]
        );
        assert_eq!(events(&started), ["UpgradeInitiated"]);
        assert_eq!(started.flow, Flow::RequeueAfter(REQUEUE_NEXT_PASS));
        assert!(jobs(&started).is_empty());
        for (installed, wanted, rejected) in [
            ("2026.2", "2026.1", Reason::DowngradeNotSupported),
            ("2026.1", "2027.1", Reason::UpgradePathInvalid),
        ] {
            let nova = at(installed, wanted, None);
            let plan = plan(&nova, &provisioned(&nova), &configured());
            assert_eq!(plan.verdict(CONDITION).map(|v| v.reason), Some(rejected));
            assert_eq!(events(&plan), [rejected.as_str()]);
            assert!(plan.events[0].reason.warning() && plan.error.is_some());
            assert!(plan.status.is_empty() && jobs(&plan).is_empty());
        }
    }

    #[test]
    fn the_phases_run_their_jobs_and_the_contract_promotes_the_target() {
        let expanding = at(
            "2026.1",
            "2026.2",
            Some((UpgradePhase::Expanding, "2026.2")),
        );
        let plan1 = plan(&expanding, &provisioned(&expanding), &configured());
        assert_eq!(jobs(&plan1), ["nova-db-expand"]);
        assert_eq!(plan1.flow, Flow::RequeueAfter(REQUEUE_UPGRADE_WAIT));
        let expanded = plan(
            &expanding,
            &with_job(&expanding, DbJob::Expand, Some(Terminal::Complete), true),
            &configured(),
        );
        assert_eq!(
            expanded.status,
            [StatusUpdate::UpgradePhase(Some(UpgradePhase::Migrating))]
        );
        assert_eq!(events(&expanded), ["ExpandComplete"]);

        let rolling = at(
            "2026.1",
            "2026.2",
            Some((UpgradePhase::RollingUpdate, "2026.2")),
        );
        let waiting = plan(&rolling, &provisioned(&rolling), &configured());
        assert_eq!(
            waiting.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::UpgradeRollingUpdate)
        );
        assert_eq!(waiting.flow, Flow::Continue, "the workload steps roll");
        assert!(jobs(&waiting).is_empty());

        let contracting = at(
            "2026.1",
            "2026.2",
            Some((UpgradePhase::Contracting, "2026.2")),
        );
        let done = plan(
            &contracting,
            &with_job(
                &contracting,
                DbJob::Contract,
                Some(Terminal::Complete),
                true,
            ),
            &configured(),
        );
        assert_eq!(
            reason(&done),
            Some((
                Reason::DatabaseSynced,
                "Database schema is up to date (upgraded 2026.1 → 2026.2)"
            ))
        );
        assert_eq!(
            done.status,
            [
                StatusUpdate::InstalledRelease("2026.2".into()),
                StatusUpdate::TargetRelease(None),
                StatusUpdate::UpgradePhase(None)
            ]
        );
        assert_eq!(done.resolved.installed_release.as_deref(), Some("2026.2"));
        assert_eq!(events(&done), ["UpgradeComplete"]);
    }

    #[test]
    fn a_reverted_release_aborts_and_a_third_one_is_refused() {
        let mut reverted = at(
            "2026.1",
            "2026.1",
            Some((UpgradePhase::Migrating, "2026.2")),
        );
        reverted.spec.image.tag = Some("2026.2".into());
        let observed = with_job(&reverted, DbJob::Expand, Some(Terminal::Complete), true);
        let aborted = plan(&reverted, &observed, &configured());
        assert_eq!(
            aborted
                .removals
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>(),
            ["nova-db-expand"]
        );
        assert_eq!(
            aborted.status,
            [
                StatusUpdate::UpgradePhase(None),
                StatusUpdate::TargetRelease(None)
            ]
        );
        assert_eq!(events(&aborted), ["UpgradeAborted"]);
        assert_eq!(aborted.flow, Flow::RequeueAfter(REQUEUE_NEXT_PASS));
        let third = at(
            "2026.1",
            "2027.1",
            Some((UpgradePhase::Migrating, "2026.2")),
        );
        let refused = plan(&third, &provisioned(&third), &configured());
        assert_eq!(
            refused.verdict(CONDITION).map(|v| v.reason),
            Some(Reason::UpgradeTargetChanged)
        );
        assert!(refused.error.is_some() && refused.status.is_empty());
    }
}
