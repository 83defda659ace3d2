//! The lifecycle of the Nova's `<nova>-discover-hosts` Job (`novacompute.md` §8), which the
//! Services step runs while a registered node's host is not mapped into the cell: created when
//! none exists, left alone while it runs, replaced 30 s after it finished (so a failed or
//! too-early discovery is retried without the Job's own backoff), refused when the Nova does
//! not control a Job of that name. The Job is the Nova's child, shared by all its pools.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::events::EventReason;
use nova_api::names::NovaNames;

use super::resolved::NovaInputs;
use crate::clusters::{ClusterError, ClusterExt};
use crate::pipeline::Reconciled;
use crate::render::discover_hosts::discover_hosts_job;
use crate::render::pod::{Digests, PodInputs};

use crate::nova::job_run::{Terminal, terminal};
use crate::objects::EventNote;
use crate::objects::Owner;
use crate::pipeline::effects::Effect;

/// How long a finished Job stays before it is replaced.
pub const REPLACE_AFTER: SignedDuration = SignedDuration::from_secs(30);

/// When and how a Job finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// Failed rather than Complete.
    pub failed: bool,
    /// The terminal condition's transition time.
    pub at: Timestamp,
    /// The terminal condition's message.
    pub message: String,
}

/// What the cache holds about the Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedJob {
    /// The Nova controls it.
    pub controlled: bool,
    /// How it ended, if it did.
    pub finished: Option<Finished>,
}

impl ObservedJob {
    /// The plain facts of the Job, for the Nova `nova`.
    pub fn of(job: &Job, nova: &Owner) -> Self {
        let finished = terminal(job).map(|t| {
            let wanted = match t {
                Terminal::Failed => "Failed",
                Terminal::Complete => "Complete",
            };
            let condition = job
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .find(|c| c.type_ == wanted && c.status == "True");
            Finished {
                failed: t == Terminal::Failed,
                at: condition
                    .and_then(|c| c.last_transition_time.as_ref())
                    .map(|t| t.0)
                    .unwrap_or_default(),
                message: condition
                    .and_then(|c| c.message.clone())
                    .unwrap_or_default(),
            }
        });
        Self {
            controlled: nova.controls(&job.metadata),
            finished,
        }
    }
}

/// What to do with the Job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Leave it (or there is nothing to run yet).
    Keep,
    /// Create it.
    Create,
    /// Delete it, so the next pass creates a fresh one.
    Delete,
}

/// The decision of one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// The note for the ServicesReady message, or the HostDiscoveryError message.
    pub note: Result<String, String>,
    /// The event to record.
    pub event: Option<EventNote>,
}

/// The pure lifecycle: `job` as cached, whether the Nova API Deployment mounts a config yet
/// (read only while no Job exists), the unmapped `hosts`, and the time now.
pub fn decide(
    namespace: &str,
    nova: &str,
    job_name: &str,
    job: Option<&ObservedJob>,
    api_mounts_config: bool,
    hosts: &[String],
    now: Timestamp,
) -> Decision {
    let qualified = format!("{namespace}/{job_name}");
    let keep = |note: String| Decision {
        action: Action::Keep,
        note: Ok(note),
        event: None,
    };
    let Some(job) = job else {
        if !api_mounts_config {
            return keep(format!(
                "no discovery Job can run: the Nova API Deployment {namespace}/{nova} mounts no config yet"
            ));
        }
        return Decision {
            action: Action::Create,
            note: Ok(format!("started discovery Job {qualified}")),
            event: Some(EventNote {
                reason: EventReason::HostDiscoveryStarted,
                note: format!(
                    "Started Job {qualified} to map {} into the cell",
                    hosts.join(", ")
                ),
            }),
        };
    };
    if !job.controlled {
        return Decision {
            action: Action::Keep,
            note: Err(format!(
                "refusing to adopt pre-existing Job {qualified}: it was not created by Nova {nova}"
            )),
            event: None,
        };
    }
    let Some(finished) = &job.finished else {
        return keep(format!("discovery Job {qualified} is running"));
    };
    let age = now.duration_since(finished.at);
    if age < REPLACE_AFTER {
        let how = if finished.failed {
            "failed"
        } else {
            "finished without mapping them"
        };
        return keep(format!(
            "discovery Job {qualified} {how}; it is replaced after 30s"
        ));
    }
    Decision {
        action: Action::Delete,
        note: Ok(format!("replacing the finished discovery Job {qualified}")),
        event: finished.failed.then(|| EventNote {
            reason: EventReason::HostDiscoveryFailed,
            note: format!("Job {qualified} failed: {}", finished.message),
        }),
    }
}

/// The lifecycle for the Nova of `nova` in one pass: reads the Job (and, while none exists,
/// the API Deployment) and decides; a Job to create or delete is the [`Effect`] the Services
/// step hands the engine, as the Nova's child on the Nova's cluster. A failed read is the
/// HostDiscoveryError note, never the pass's error, so the controller's back-off does not
/// stretch the other nodes' polls.
pub async fn ensure(nova: &NovaInputs, hosts: &[String]) -> (Decision, Option<Effect>) {
    match observe_and_decide(nova, hosts).await {
        Ok(decided) => decided,
        Err(e) => (
            Decision {
                action: Action::Keep,
                note: Err(e.to_string()),
                event: None,
            },
            None,
        ),
    }
}

/// The decision once the step's effects ran: as decided, or the failure of its Job write
/// (which, like a failed read, publishes no event).
pub fn settled(decision: Decision, written: Option<Result<(), String>>) -> Decision {
    match written {
        Some(Err(message)) => Decision {
            action: Action::Keep,
            note: Err(message),
            event: None,
        },
        _ => decision,
    }
}

async fn observe_and_decide(
    nova: &NovaInputs,
    hosts: &[String],
) -> Result<(Decision, Option<Effect>), ClusterError> {
    let cr = &*nova.nova;
    let name = cr.name_any();
    let namespace = cr.namespace().unwrap_or_default();
    let owner = Owner::of(cr, cr.common_labels());
    let job_name = NovaNames::new(&name).discover_hosts();
    // The Job is the Nova's child, on the Nova's cluster.
    let cluster = &nova.cluster.handle;
    let job = cluster
        .get_typed::<Job>(&namespace, &job_name)
        .await?
        .map(|j| ObservedJob::of(&j, &owner));
    let api = match job {
        Some(_) => None,
        None => cluster
            .get_typed::<Deployment>(&namespace, &NovaNames::new(&name).api())
            .await?
            .and_then(|d| running(&d)),
    };
    let decision = decide(
        &namespace,
        &name,
        &job_name,
        job.as_ref(),
        api.is_some(),
        hosts,
        Timestamp::now(),
    );
    let effect = match (decision.action, api) {
        (Action::Create, Some((image, config_map))) => {
            let digests = Digests::default();
            let inputs = PodInputs {
                name: &name,
                spec: &cr.spec,
                config_map: &config_map,
                digests: &digests,
                installed_release: cr
                    .status
                    .as_ref()
                    .and_then(|s| s.installed_release.as_deref()),
                broker_port: None,
            };
            Some(Effect::ApplyFor {
                cluster: cluster.clone(),
                owner: Box::new(owner),
                child: Box::new(discover_hosts_job(&inputs, &image)),
            })
        }
        (Action::Delete, _) => Some(Effect::DeleteFor {
            cluster: cluster.clone(),
            owner: Box::new(owner),
            kind: ApiResource::erase::<Job>(&()),
            name: job_name,
        }),
        _ => None,
    };
    Ok((decision, effect))
}

/// The image and config ConfigMap of the API Deployment as it runs; None while it mounts no
/// config.
fn running(deployment: &Deployment) -> Option<(String, String)> {
    let pod = deployment.spec.as_ref()?.template.spec.as_ref()?;
    let image = pod.containers.first()?.image.clone()?;
    let config_map = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "config")?
        .config_map
        .as_ref()?
        .name
        .clone();
    (!config_map.is_empty()).then_some((image, config_map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    const NOW: i64 = 1_800_000_000;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("time")
    }

    fn decide_at(job: Option<&ObservedJob>, mounted: bool) -> Decision {
        decide(
            "ns",
            "nova",
            "nova-discover-hosts",
            job,
            mounted,
            &["node-a".to_owned(), "node-b".to_owned()],
            at(NOW),
        )
    }

    fn finished(failed: bool, ago: i64) -> ObservedJob {
        ObservedJob {
            controlled: true,
            finished: Some(Finished {
                failed,
                at: at(NOW - ago),
                message: "Job has reached the specified backoff limit".into(),
            }),
        }
    }

    #[test]
    fn an_absent_job_is_created_once_the_api_mounts_a_config() {
        let d = decide_at(None, false);
        assert_eq!(d.action, Action::Keep);
        assert_eq!(
            d.note.as_deref(),
            Ok("no discovery Job can run: the Nova API Deployment ns/nova mounts no config yet")
        );
        let d = decide_at(None, true);
        assert_eq!(d.action, Action::Create);
        assert_eq!(
            d.note.as_deref(),
            Ok("started discovery Job ns/nova-discover-hosts")
        );
        let event = d.event.expect("event");
        assert_eq!(
            (
                event.reason.warning(),
                event.reason.as_str(),
                event.note.as_str()
            ),
            (
                false,
                "HostDiscoveryStarted",
                "Started Job ns/nova-discover-hosts to map node-a, node-b into the cell"
            )
        );
    }

    #[test]
    fn a_running_or_recent_job_is_left_and_an_old_one_replaced() {
        let running = ObservedJob {
            controlled: true,
            finished: None,
        };
        assert_eq!(
            decide_at(Some(&running), true).note.as_deref(),
            Ok("discovery Job ns/nova-discover-hosts is running")
        );
        let d = decide_at(Some(&finished(false, 29)), true);
        assert_eq!(
            (d.action, d.note.as_deref()),
            (
                Action::Keep,
                Ok(
                    "discovery Job ns/nova-discover-hosts finished without mapping them; it is replaced after 30s"
                )
            )
        );
        let d = decide_at(Some(&finished(true, 5)), true);
        assert_eq!(
            d.note.as_deref(),
            Ok("discovery Job ns/nova-discover-hosts failed; it is replaced after 30s")
        );
        let d = decide_at(Some(&finished(false, 30)), true);
        assert_eq!((d.action, d.event), (Action::Delete, None));
        let d = decide_at(Some(&finished(true, 31)), true);
        assert_eq!(d.action, Action::Delete);
        assert_eq!(
            d.note.as_deref(),
            Ok("replacing the finished discovery Job ns/nova-discover-hosts")
        );
        let event = d.event.expect("event");
        assert_eq!(
            (
                event.reason.warning(),
                event.reason.as_str(),
                event.note.as_str()
            ),
            (
                true,
                "HostDiscoveryFailed",
                "Job ns/nova-discover-hosts failed: Job has reached the specified backoff limit"
            )
        );
    }

    #[test]
    fn a_job_the_nova_does_not_control_is_refused() {
        let foreign = ObservedJob {
            controlled: false,
            finished: None,
        };
        let d = decide_at(Some(&foreign), true);
        assert_eq!(d.action, Action::Keep);
        assert_eq!(
            d.note,
            Err("refusing to adopt pre-existing Job ns/nova-discover-hosts: it was not created by Nova nova".into())
        );
    }

    #[test]
    fn the_api_deployment_runs_an_image_with_a_config_or_not_yet() {
        let deployment = |volumes: serde_json::Value| -> Deployment {
            serde_json::from_value(serde_json::json!({
                "spec": { "selector": {}, "template": { "spec": {
                    "containers": [{ "name": "nova-api", "image": "ghcr.io/c5c3/nova:2026.1" }],
                    "volumes": volumes
                } } }
            }))
            .expect("deployment")
        };
        assert_eq!(
            running(&deployment(serde_json::json!([
                { "name": "tmp", "emptyDir": {} },
                { "name": "config", "configMap": { "name": "nova-config-12345678" } }
            ]))),
            Some((
                "ghcr.io/c5c3/nova:2026.1".to_owned(),
                "nova-config-12345678".to_owned()
            ))
        );
        assert_eq!(running(&deployment(serde_json::json!([]))), None);
        assert_eq!(running(&Deployment::default()), None);
    }

    #[test]
    fn the_observed_job_reads_control_and_the_terminal_condition() {
        let owner = Owner {
            kind: "Nova".into(),
            namespace: "ns".into(),
            reference: Some(OwnerReference {
                uid: "nova-uid".into(),
                controller: Some(true),
                ..Default::default()
            }),
            labels: Default::default(),
        };
        let mut job = Job::default();
        job.metadata.owner_references = owner.reference.clone().map(|r| vec![r]);
        job.status = Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: "Failed".into(),
                status: "True".into(),
                message: Some("deadline".into()),
                last_transition_time: Some(Time(at(NOW))),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert_eq!(
            ObservedJob::of(&job, &owner),
            ObservedJob {
                controlled: true,
                finished: Some(Finished {
                    failed: true,
                    at: at(NOW),
                    message: "deadline".into()
                }),
            }
        );
    }
}
