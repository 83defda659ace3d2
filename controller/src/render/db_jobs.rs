//! The migration Jobs and the archive CronJob (`common-types.md` §3.10, §3.12, §3.22;
//! `nova-reconciler.txt`, "The cells sequence", "Release upgrade", "DBArchive"): one nova-image
//! container running its script under `/bin/sh -eu -c`, built from the shared pod blocks of
//! [`super::pod`] for [`Role::Job`], sized and placed from spec.jobs.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nova_api::effective::EffectiveDBArchive;
use nova_api::labels::{self, COMPONENT};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::MIGRATION_DEADLINE_SECONDS;
use sha2::{Digest, Sha256};

use super::db_scripts::{self, SHELL};
use super::pod::{self, PodInputs, Role};
use crate::objects::Child;

/// The annotation carrying the re-run key: the digest of the Job's pod template.
pub const POD_SPEC_HASH: &str = "cobaltcore.c5c3.io/pod-spec-hash";

/// Retries of a migration or phase Job before it is Failed.
pub const BACKOFF_LIMIT: i32 = 4;
/// The deadline of one archive run: a wedged run fails within the hour.
pub const ARCHIVE_ACTIVE_DEADLINE_SECONDS: i64 = 3600;

/// The four Jobs the Database step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbJob {
    /// `{name}-db-sync`: both migrations and the cell mapping.
    Sync,
    /// `{name}-db-expand`: the upgrade check and the additive migrations.
    Expand,
    /// `{name}-db-migrate`: the read proving the new code addresses the schema.
    Migrate,
    /// `{name}-db-contract`: the online data migrations, cell then cell0.
    Contract,
}

impl DbJob {
    /// The suffix: the Job's name after `{name}-`, its container and its component.
    pub fn suffix(self) -> &'static str {
        match self {
            DbJob::Sync => "db-sync",
            DbJob::Expand => "db-expand",
            DbJob::Migrate => "db-migrate",
            DbJob::Contract => "db-contract",
        }
    }

    /// The Job's name for the Nova `name`.
    pub fn name(self, name: &str) -> String {
        let names = NovaNames::new(name);
        match self {
            DbJob::Sync => names.db_sync(),
            DbJob::Expand => names.db_expand(),
            DbJob::Migrate => names.db_migrate(),
            DbJob::Contract => names.db_contract(),
        }
    }

    fn script(self, cell_schema: &str) -> String {
        match self {
            DbJob::Sync => db_scripts::db_sync(cell_schema),
            DbJob::Expand => db_scripts::db_expand(),
            DbJob::Migrate => db_scripts::db_migrate(),
            DbJob::Contract => db_scripts::db_contract(cell_schema),
        }
    }
}

/// The suffix of the archive CronJob's component.
pub const ARCHIVE_COMPONENT: &str = "db-archive";

/// The labels of a Job's pods: the common labels with a maintenance component, so they are
/// no Service's endpoints but the NetworkPolicy still covers them.
pub fn maintenance_labels(name: &str, component: &str) -> BTreeMap<String, String> {
    let mut labels = labels::common(name);
    labels.insert(COMPONENT.to_owned(), component.to_owned());
    labels
}

/// A script run under `/bin/sh -eu -c`.
fn shell(script: String) -> Vec<String> {
    SHELL
        .iter()
        .map(|s| (*s).to_owned())
        .chain([script])
        .collect()
}

/// The pod template of a nova-manage Job container called `component` running `command`.
pub fn pod_template(
    inputs: &PodInputs<'_>,
    component: &str,
    command: Vec<String>,
    extra_env: Vec<EnvVar>,
    restart_policy: &str,
) -> PodTemplateSpec {
    let mut container = pod::container(inputs, Role::Job, command, extra_env);
    container.name = component.to_owned();
    container.resources = Some(pod::job_resources(inputs.spec));
    let placement = pod::job_placement(inputs.spec);
    let annotations = pod::annotations(inputs, Role::Job);
    PodTemplateSpec {
        metadata: Some(pod::pod_metadata(
            inputs.spec,
            maintenance_labels(inputs.name, component),
            annotations,
        )),
        spec: Some(PodSpec {
            restart_policy: Some(restart_policy.to_owned()),
            containers: vec![container],
            image_pull_secrets: pod::image_pull_secrets(inputs.spec.image_pull_secrets.as_deref()),
            volumes: Some(pod::volumes(inputs, Role::Job)),
            security_context: Some(pod::pod_security_context()),
            node_selector: placement.node_selector,
            tolerations: placement.tolerations,
            affinity: placement.affinity,
            priority_class_name: placement.priority_class_name,
            ..Default::default()
        }),
    }
}

/// The re-run key of a pod template: SHA-256 over its JSON, so an image, config or digest
/// change re-runs the Job.
pub fn template_key(template: &PodTemplateSpec) -> String {
    let bytes = serde_json::to_vec(template).unwrap_or_default();
    hex::encode(Sha256::digest(bytes))
}

/// A migration or phase Job, and its re-run key. No TTL: the completed Job is the state
/// record, and a TTL would re-create it in a loop.
pub fn job(inputs: &PodInputs<'_>, which: DbJob) -> (Child, String) {
    let cell_schema = &inputs.spec.database.database;
    let template = pod_template(
        inputs,
        which.suffix(),
        shell(which.script(cell_schema)),
        Vec::new(),
        "Never",
    );
    let key = template_key(&template);
    let job = Job {
        metadata: ObjectMeta {
            name: Some(which.name(inputs.name)),
            labels: Some(maintenance_labels(inputs.name, which.suffix())),
            annotations: Some(BTreeMap::from([(POD_SPEC_HASH.to_owned(), key.clone())])),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(BACKOFF_LIMIT),
            active_deadline_seconds: Some(migration_deadline(inputs)),
            template,
            ..Default::default()
        }),
        status: None,
    };
    (Child::new(&job), key)
}

/// The migration Jobs' deadline: spec.jobs.migrationDeadlineSeconds, or the default.
fn migration_deadline(inputs: &PodInputs<'_>) -> i64 {
    let jobs = inputs.spec.jobs.as_ref();
    jobs.and_then(|j| j.migration_deadline_seconds)
        .unwrap_or(MIGRATION_DEADLINE_SECONDS)
}

fn plain(name: &str, value: impl ToString) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_string()),
        ..Default::default()
    }
}

/// The archive CronJob with the effective settings: MAX_ROWS, SLEEP and, while a window is
/// configured, RETENTION_DAYS for the batch loop; Forbid, so a long first run is never
/// overtaken; the hour's deadline on every run.
pub fn archive_cron_job(inputs: &PodInputs<'_>, archive: &EffectiveDBArchive) -> Child {
    let mut env = vec![
        plain("MAX_ROWS", archive.max_rows),
        plain("SLEEP", archive.sleep),
    ];
    if let Some(days) = archive.retention_days {
        env.push(plain("RETENTION_DAYS", days));
    }
    let template = pod_template(
        inputs,
        ARCHIVE_COMPONENT,
        shell(db_scripts::db_archive()),
        env,
        "OnFailure",
    );
    let labels = maintenance_labels(inputs.name, ARCHIVE_COMPONENT);
    Child::new(&CronJob {
        metadata: ObjectMeta {
            name: Some(NovaNames::new(inputs.name).db_archive()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: CronJobSpec {
            schedule: archive.schedule.clone(),
            suspend: Some(archive.suspend),
            concurrency_policy: Some("Forbid".to_owned()),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    active_deadline_seconds: Some(ARCHIVE_ACTIVE_DEADLINE_SECONDS),
                    template,
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    })
}
