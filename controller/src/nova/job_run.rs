//! The run semantics of a migration or phase Job (`common-types.md` §3.10, `RunJob`): created
//! when absent, re-run when its pod template changed, done once it completed with the current
//! template, a permanent failure once it failed with it. The completed Job is the state
//! record, which is why it has no TTL.

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;

use crate::metrics::JobFamily;
use crate::pipeline::JobRecord;
use crate::render::db_jobs::POD_SPEC_HASH;

/// How a Job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminal {
    /// `Complete=True` (and not `Failed=True`).
    Complete,
    /// `Failed=True`, which wins over `Complete=True`.
    Failed,
}

/// What the cache holds about one Job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedJob {
    /// Its UID.
    pub uid: String,
    /// Its re-run key.
    pub key: Option<String>,
    /// How it ended, if it did.
    pub terminal: Option<Terminal>,
    /// Once it ended: its terminal condition's transition time minus its creation time, in
    /// seconds, at least 0 (the duration its metrics record).
    pub seconds: i64,
}

impl ObservedJob {
    /// The plain facts of a cached Job.
    pub fn of(job: &Job) -> Self {
        let terminal = terminal(job);
        Self {
            uid: job.uid().unwrap_or_default(),
            key: job.annotations().get(POD_SPEC_HASH).cloned(),
            seconds: terminal.map_or(0, |t| duration(job, t)),
            terminal,
        }
    }

    /// The record that counts this Job in `family` under `suffix`, once it ended.
    pub fn record(&self, family: JobFamily, suffix: &'static str) -> Option<JobRecord> {
        let terminal = self.terminal?;
        Some(JobRecord {
            family,
            suffix,
            uid: self.uid.clone(),
            succeeded: terminal == Terminal::Complete,
            seconds: self.seconds as f64,
        })
    }
}

/// The seconds from a Job's creation to the transition of its terminal condition, at least 0.
fn duration(job: &Job, terminal: Terminal) -> i64 {
    let type_ = match terminal {
        Terminal::Complete => "Complete",
        Terminal::Failed => "Failed",
    };
    let ended = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == type_ && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref());
    match (ended, job.metadata.creation_timestamp.as_ref()) {
        (Some(ended), Some(created)) => (ended.0.as_second() - created.0.as_second()).max(0),
        _ => 0,
    }
}

/// The terminal state of a Job: `Failed=True` wins over `Complete=True`; `Suspended`,
/// `FailureTarget` and `SuccessCriteriaMet` are not terminal.
pub fn terminal(job: &Job) -> Option<Terminal> {
    let conditions = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let holds = |type_: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    if holds("Failed") {
        Some(Terminal::Failed)
    } else if holds("Complete") {
        Some(Terminal::Complete)
    } else {
        None
    }
}

/// What to do with a Job this pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Run {
    /// Absent: create it; not done.
    Create,
    /// Ended under another pod template: delete it, so the next pass creates it anew.
    Recreate,
    /// Still running: not done.
    Running,
    /// Completed with the current pod template.
    Done,
    /// Failed with the current pod template: a permanent error.
    Failed(String),
}

/// Decides the run of the Job `namespace/name` whose current re-run key is `key`.
pub fn decide(observed: Option<&ObservedJob>, key: &str, namespace: &str, name: &str) -> Run {
    let Some(job) = observed else {
        return Run::Create;
    };
    let same = job.key.as_deref() == Some(key);
    match (job.terminal, same) {
        (Some(Terminal::Failed), true) => {
            Run::Failed(format!("job has permanently failed: {namespace}/{name}"))
        }
        (Some(_), false) => Run::Recreate,
        (Some(Terminal::Complete), true) => Run::Done,
        (None, _) => Run::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

    fn job(conditions: &[(&str, &str)]) -> Job {
        Job {
            status: Some(JobStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| JobCondition {
                            type_: (*t).into(),
                            status: (*s).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn failed_wins_and_the_non_terminal_conditions_are_not_terminal() {
        assert_eq!(
            terminal(&job(&[("Complete", "True"), ("Failed", "True")])),
            Some(Terminal::Failed)
        );
        assert_eq!(
            terminal(&job(&[("Complete", "True")])),
            Some(Terminal::Complete)
        );
        for c in ["Suspended", "FailureTarget", "SuccessCriteriaMet"] {
            assert_eq!(terminal(&job(&[(c, "True")])), None, "{c}");
        }
        assert_eq!(terminal(&job(&[("Complete", "False")])), None);
    }

    #[test]
    fn a_terminal_job_is_recorded_with_its_duration_clamped_at_zero() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use k8s_openapi::jiff::Timestamp;
        let at = |s| Some(Time(Timestamp::from_second(s).expect("time")));
        let mut ended = job(&[("Failed", "True")]);
        ended.metadata.uid = Some("uid-1".into());
        ended.metadata.creation_timestamp = at(1_700_000_000);
        if let Some(c) = ended.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            c[0].last_transition_time = at(1_700_000_042);
        }
        let observed = ObservedJob::of(&ended);
        assert_eq!(
            observed.record(JobFamily::DbSync, "db-sync"),
            Some(JobRecord {
                family: JobFamily::DbSync,
                suffix: "db-sync",
                uid: "uid-1".into(),
                succeeded: false,
                seconds: 42.0,
            })
        );
        ended.metadata.creation_timestamp = at(1_700_000_100);
        assert_eq!(ObservedJob::of(&ended).seconds, 0, "clock skew is clamped");
        assert_eq!(
            ObservedJob::of(&job(&[])).record(JobFamily::DbSync, "db-sync"),
            None
        );
    }

    #[test]
    fn the_run_follows_the_re_run_key() {
        let observed = |key: &str, terminal| ObservedJob {
            uid: "u".into(),
            key: Some(key.into()),
            terminal,
            seconds: 0,
        };
        let decide = |o: Option<&ObservedJob>| decide(o, "k1", "ns", "nova-db-sync");
        assert_eq!(decide(None), Run::Create);
        assert_eq!(decide(Some(&observed("k1", None))), Run::Running);
        assert_eq!(decide(Some(&observed("k0", None))), Run::Running);
        assert_eq!(
            decide(Some(&observed("k1", Some(Terminal::Complete)))),
            Run::Done
        );
        assert_eq!(
            decide(Some(&observed("k1", Some(Terminal::Failed)))),
            Run::Failed("job has permanently failed: ns/nova-db-sync".into())
        );
        for t in [Terminal::Complete, Terminal::Failed] {
            assert_eq!(decide(Some(&observed("k0", Some(t)))), Run::Recreate);
        }
    }
}
