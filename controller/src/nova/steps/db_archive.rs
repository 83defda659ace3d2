//! The DBArchive step (`nova-reconciler.txt`, "DBArchive"; `common-types.md` §3.22): the
//! `{name}-db-archive` CronJob projected on every pass with the effective settings (never
//! written back), and DBArchiveReady read off the newest terminal run the CronJob spawned,
//! not off the CronJob object.

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective;
use nova_api::events::EventReason;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use super::database::conditions_of;
use crate::clusters::ClusterExt;
use crate::clusters::{Caching, KindSpec};
use crate::metrics::JobFamily;
use crate::nova::job_run::{ObservedJob, Terminal};
use crate::nova::resolved::Resolved;
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::controller_of;
use crate::pipeline::conditions::is_new;
use crate::pipeline::uses::{Uses, owns, reads};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};
use crate::render::db_jobs::{ARCHIVE_COMPONENT, archive_cron_job, maintenance_labels};
use crate::render::pod::PodInputs;

const CONDITION: NovaConditionType = NovaConditionType::DBArchiveReady;

/// One archive run that reached a terminal state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveRun {
    /// The Job's name.
    pub name: String,
    /// When it was created.
    pub created: Option<Time>,
    /// Its facts (uid, how it ended, how long it ran).
    pub job: ObservedJob,
}

/// The suffix the archive runs are counted under (`cobaltcore.c5c3.io/last-db-archive-job-uid`).
const ARCHIVE_SUFFIX: &str = "db-archive";

/// The terminal runs of the archive CronJob (only the Jobs it controls).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Each terminal run.
    pub runs: Vec<ArchiveRun>,
}

/// The archive CronJob and the Jobs it ran.
pub const KINDS: &[Uses] = &[
    owns(|| KindSpec::of::<CronJob>(Caching::OnDemand)),
    reads(|| KindSpec::of::<Job>(Caching::OnDemand)),
];

/// The DBArchive step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let name = pass.cr.name_any();
    let cron_job: Option<CronJob> = pass
        .cluster
        .get_typed(ns, &NovaNames::new(&name).db_archive())
        .await?;
    let Some(cron_uid) = cron_job.and_then(|c| c.uid()) else {
        return Ok(Observed::default());
    };
    let selector = maintenance_labels(&name, ARCHIVE_COMPONENT);
    let jobs = pass
        .cluster
        .list_metadata(&ApiResource::erase::<Job>(&()), ns, &selector)?;
    let mut runs = Vec::new();
    for meta in jobs {
        if controller_of(&meta.metadata).is_none_or(|c| c.uid != cron_uid) {
            continue;
        }
        let job_name = meta.name_any();
        let Some(job) = pass.cluster.get_typed::<Job>(ns, &job_name).await? else {
            continue;
        };
        let facts = ObservedJob::of(&job);
        if facts.terminal.is_some() {
            runs.push(ArchiveRun {
                name: job_name,
                created: job.metadata.creation_timestamp.clone(),
                job: facts,
            });
        }
    }
    Ok(Observed { runs })
}

/// The DBArchive plan: the CronJob, then the suspended arm, which outranks the failed arm (a
/// suspended CronJob spawns no successor, so a failed run would pin the condition False for
/// good), then the newest terminal run.
pub fn plan(nova: &Nova, observed: &Observed, resolved: &Resolved) -> NovaPlan {
    let Some(config_map) = resolved.config_map.as_deref() else {
        return Plan::proceed();
    };
    let name = nova.name_any();
    let archive = effective::db_archive(nova.spec.db_archive.as_ref());
    let inputs = PodInputs {
        name: &name,
        spec: &nova.spec,
        config_map,
        digests: &resolved.digests,
        installed_release: nova
            .status
            .as_ref()
            .and_then(|s| s.installed_release.as_deref()),
        broker_port: resolved.broker_port,
    };
    let cron_job = NovaNames::new(&name).db_archive();
    let mut plan = Plan::proceed().apply(archive_cron_job(&inputs, &archive));
    let newest = observed.runs.iter().max_by_key(|r| r.created.clone());
    if let Some(record) = newest.and_then(|r| r.job.record(JobFamily::DbArchive, ARCHIVE_SUFFIX)) {
        plan = plan.count(record);
    }
    let failed = newest.filter(|r| r.job.terminal == Some(Terminal::Failed));
    if archive.suspend {
        let mut message = format!("DB archive CronJob {cron_job} is suspended");
        if let Some(run) = failed {
            message.push_str(&format!("; its last run, Job {}, failed", run.name));
        }
        return plan.ready(CONDITION, Reason::DBArchiveSuspended, message);
    }
    if let Some(run) = failed {
        let message = format!("DB archive Job {} failed", run.name);
        let transition = is_new(
            conditions_of(nova),
            CONDITION.as_str(),
            false,
            Reason::DBArchiveJobFailed,
            &message,
        );
        let plan = if transition {
            plan.event(EventReason::DBArchiveJobFailed, message.clone())
        } else {
            plan
        };
        return plan.report(CONDITION, false, Reason::DBArchiveJobFailed, message);
    }
    plan.ready(
        CONDITION,
        Reason::DBArchiveScheduled,
        format!(
            "DB archive CronJob {cron_job} runs on schedule {:?}",
            archive.schedule
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::pipeline::Flow;
    use nova_api::v1alpha1::DBArchiveSpec;

    fn resolved() -> Resolved {
        Resolved {
            config_map: Some("nova-config-0123abcd".into()),
            ..Default::default()
        }
    }

    fn run(name: &str, second: u8, terminal: Terminal) -> ArchiveRun {
        let created = format!("2026-01-01T00:00:{second:02}Z");
        ArchiveRun {
            name: name.into(),
            created: Some(Time(created.parse().expect("timestamp"))),
            job: ObservedJob {
                uid: format!("{name}-uid"),
                key: None,
                terminal: Some(terminal),
                seconds: i64::from(second),
            },
        }
    }

    fn verdict(plan: &NovaPlan) -> (bool, Reason, String) {
        let v = plan.verdict(CONDITION).expect("verdict");
        (v.ok, v.reason, v.message.clone())
    }

    #[test]
    fn the_newest_terminal_run_decides_and_suspension_outranks_a_failure() {
        let mut nova = example();
        let failed_last = Observed {
            runs: vec![
                run("nova-db-archive-1", 1, Terminal::Complete),
                run("nova-db-archive-2", 2, Terminal::Failed),
            ],
        };
        let failing = plan(&nova, &failed_last, &resolved());
        assert_eq!(
            verdict(&failing),
            (
                false,
                Reason::DBArchiveJobFailed,
                "DB archive Job nova-db-archive-2 failed".into()
            )
        );
        assert!(failing.events[0].reason.warning());
        assert_eq!(
            failing.records,
            [crate::pipeline::JobRecord {
                family: JobFamily::DbArchive,
                suffix: "db-archive",
                uid: "nova-db-archive-2-uid".into(),
                succeeded: false,
                seconds: 2.0,
            }],
            "only the newest terminal run is counted"
        );
        assert_eq!(failing.events[0].reason, EventReason::DBArchiveJobFailed);
        assert_eq!(failing.flow, Flow::Continue);
        assert_eq!(failing.children[0].name, "nova-db-archive");

        let recovered = Observed {
            runs: vec![
                run("nova-db-archive-2", 2, Terminal::Failed),
                run("nova-db-archive-3", 3, Terminal::Complete),
            ],
        };
        assert_eq!(
            verdict(&plan(&nova, &recovered, &resolved())),
            (
                true,
                Reason::DBArchiveScheduled,
                "DB archive CronJob nova-db-archive runs on schedule \"@daily\"".into()
            )
        );

        nova.spec.db_archive = Some(DBArchiveSpec {
            suspend: Some(true),
            ..Default::default()
        });
        let suspended = plan(&nova, &failed_last, &resolved());
        assert_eq!(
            verdict(&suspended),
            (
                true,
                Reason::DBArchiveSuspended,
                "DB archive CronJob nova-db-archive is suspended; its last run, Job nova-db-archive-2, failed".into()
            )
        );
        assert!(suspended.events.is_empty());
    }

    #[test]
    fn a_failure_already_reported_publishes_no_event_again() {
        let mut nova = example();
        let observed = Observed {
            runs: vec![run("nova-db-archive-2", 2, Terminal::Failed)],
        };
        crate::pipeline::conditions::set(
            &mut nova.status.get_or_insert_with(Default::default).conditions,
            CONDITION.as_str(),
            false,
            Reason::DBArchiveJobFailed,
            "DB archive Job nova-db-archive-2 failed",
            Some(1),
        );
        assert!(plan(&nova, &observed, &resolved()).events.is_empty());
    }
}
