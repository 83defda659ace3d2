//! A workload's rollout: the few fields of a live Deployment the verdicts read ([`Rollout`]),
//! and its events (`RolloutStarted`, `RolloutComplete`), decided purely from the observed
//! Deployment and the desired one.
//!
//! A rollout starts when the desired pod template is not what the live Deployment holds. Its
//! cause is read from which input of the template moved, first match wins: `release` while the
//! Nova upgrades or when the installed-release stamp changes, `credential` when a credential
//! digest changes, `operator upgrade` when the Deployment was last applied by another operator
//! version, else `spec`. The cause is kept on the Deployment (an annotation of its metadata,
//! not of its pod template, so it rolls nothing) until the Deployment has rolled out, when
//! `RolloutComplete` is noted and the annotation dropped: both are one write each, and a
//! converged Deployment carries neither, so steady state notes nothing and writes nothing. The
//! operator version is stamped the same way, outside the pod template, so upgrading the
//! operator alone restarts no pod.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use nova_api::events::EventReason;
use nova_api::v1alpha1::Nova;

use crate::clusters::FIELD_MANAGER;
use crate::clusters::carries::holds_values;
use crate::objects::EventNote;
use crate::render::pod::annotations;
use crate::render::workloads::LiveReplicas;

/// The rollout state of a live Deployment, the few fields the verdicts read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// metadata.generation.
    pub generation: i64,
    /// status.observedGeneration.
    pub observed_generation: i64,
    /// spec.replicas.
    pub desired: i32,
    /// This operator's apply owns spec.replicas (an HPA's scale takes the field over).
    pub replicas_owned: bool,
    /// status.replicas.
    pub replicas: i32,
    /// status.readyReplicas.
    pub ready: i32,
    /// status.updatedReplicas.
    pub updated: i32,
    /// The Available condition is True.
    pub available: bool,
    /// The image of each container of the pod template.
    pub images: Vec<String>,
    /// The pod template, as served.
    pub template: serde_json::Value,
    /// The pod template's annotations.
    pub template_annotations: BTreeMap<String, String>,
    /// The Deployment's own annotations.
    pub annotations: BTreeMap<String, String>,
}

impl Rollout {
    /// The rollout state of `deployment`.
    pub fn of(deployment: &Deployment) -> Self {
        let status = deployment.status.clone().unwrap_or_default();
        let spec = deployment.spec.as_ref();
        Self {
            generation: deployment.metadata.generation.unwrap_or_default(),
            observed_generation: status.observed_generation.unwrap_or_default(),
            desired: spec.and_then(|s| s.replicas).unwrap_or(1),
            replicas_owned: owns_replicas(deployment),
            replicas: status.replicas.unwrap_or_default(),
            ready: status.ready_replicas.unwrap_or_default(),
            updated: status.updated_replicas.unwrap_or_default(),
            available: status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True"),
            images: spec
                .and_then(|s| s.template.spec.as_ref())
                .map(|p| {
                    p.containers
                        .iter()
                        .filter_map(|c| c.image.clone())
                        .collect()
                })
                .unwrap_or_default(),
            template: spec
                .and_then(|s| serde_json::to_value(&s.template).ok())
                .unwrap_or_default(),
            template_annotations: spec
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.clone())
                .unwrap_or_default(),
            annotations: deployment.annotations().clone(),
        }
    }

    /// How an autoscaled apply treats the live count.
    pub(crate) fn live_replicas(&self) -> LiveReplicas {
        if self.replicas_owned {
            LiveReplicas::Owned(self.desired)
        } else {
            LiveReplicas::Released
        }
    }

    /// Ready, surge-tolerant: the controller saw the current generation, at least the desired
    /// count is ready, and the Deployment is Available.
    pub fn ready(&self) -> bool {
        self.observed_generation >= self.generation && self.ready >= self.desired && self.available
    }

    /// Rolled out: the controller saw the current generation, and every pod runs the current
    /// template and is ready, with no old-template or surge pod left.
    pub fn rolled_out(&self) -> bool {
        self.observed_generation >= self.generation
            && self.updated == self.desired
            && self.ready == self.desired
            && self.replicas == self.desired
    }

    /// Converged, strictly: rolled out, and the pod template runs `image`.
    pub fn converged(&self, image: &str) -> bool {
        self.rolled_out() && !self.images.is_empty() && self.images.iter().all(|i| i == image)
    }
}

/// Whether this operator's `Apply` entry in `deployment`'s managedFields lists spec.replicas.
fn owns_replicas(deployment: &Deployment) -> bool {
    deployment
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry.manager.as_deref() == Some(FIELD_MANAGER)
                && entry.operation.as_deref() == Some("Apply")
                && entry.subresource.as_deref().unwrap_or_default().is_empty()
        })
        .filter_map(|entry| entry.fields_v1.as_ref())
        .any(|fields| !fields.0["f:spec"]["f:replicas"].is_null())
}

/// The Deployment annotation naming the cause of the rollout in flight.
pub const ROLLOUT_CAUSE: &str = "nova.c5c3.io/rollout-cause";
/// The Deployment annotation naming the operator version that last applied it.
pub const OPERATOR_VERSION: &str = "nova.c5c3.io/operator-version";

/// This operator's version.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The pod-template digests of the credentials.
const CREDENTIALS: [&str; 5] = [
    annotations::API_DB_CONNECTION,
    annotations::DB_CONNECTION,
    annotations::AUTHTOKEN,
    annotations::TRANSPORT_URL,
    annotations::METADATA_SECRET,
];

/// Why a workload's pod template changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The Nova's spec.
    Spec,
    /// A referenced Secret's content.
    Credential,
    /// The operator's version.
    OperatorUpgrade,
    /// The OpenStack release.
    Release,
}

impl Cause {
    /// The spelling of the annotation and the notes.
    pub const fn as_str(self) -> &'static str {
        match self {
            Cause::Spec => "spec",
            Cause::Credential => "credential",
            Cause::OperatorUpgrade => "operator upgrade",
            Cause::Release => "release",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Cause::Spec,
            Cause::Credential,
            Cause::OperatorUpgrade,
            Cause::Release,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// Whether the Nova is moving to another release.
fn upgrading(nova: &Nova) -> bool {
    let status = nova.status.as_ref();
    status.and_then(|s| s.upgrade_phase).is_some()
        || status
            .and_then(|s| s.installed_release.as_deref())
            .is_some_and(|installed| installed != nova.spec.open_stack_release)
}

/// Whether some of `keys`, stamped on the desired template, differ from the live template.
fn moved(
    live: &BTreeMap<String, String>,
    desired: &BTreeMap<String, String>,
    keys: &[&str],
) -> bool {
    keys.iter()
        .any(|k| desired.get(*k).is_some_and(|v| live.get(*k) != Some(v)))
}

/// The cause of changing `live`'s pod template to `desired`'s.
fn cause(nova: &Nova, live: &Rollout, desired: &BTreeMap<String, String>) -> Cause {
    let before = &live.template_annotations;
    if upgrading(nova) || moved(before, desired, &[annotations::INSTALLED_RELEASE]) {
        Cause::Release
    } else if moved(before, desired, &CREDENTIALS) {
        Cause::Credential
    } else if live.annotations.get(OPERATOR_VERSION).map(String::as_str) != Some(VERSION) {
        Cause::OperatorUpgrade
    } else {
        Cause::Spec
    }
}

/// Stamps `desired` with this operator's version and the cause of the rollout in flight, and
/// returns the event this pass notes, if any; `live` is the Deployment as observed.
pub fn track(nova: &Nova, live: Option<&Rollout>, desired: &mut Deployment) -> Option<EventNote> {
    let name = desired.metadata.name.clone().unwrap_or_default();
    let template = desired.spec.as_ref().map(|s| &s.template);
    let wanted = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    let wanted_template = serde_json::to_value(template).unwrap_or_default();
    let stamps = desired
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    stamps.insert(OPERATOR_VERSION.to_owned(), VERSION.to_owned());
    let live = live?;
    let (kept, note) = if !holds_values(&live.template, &wanted_template) {
        let cause = cause(nova, live, &wanted);
        let note = format!(
            "Deployment {name} rolls out a new pod template (cause: {})",
            cause.as_str()
        );
        (Some(cause), Some((EventReason::RolloutStarted, note)))
    } else {
        match live
            .annotations
            .get(ROLLOUT_CAUSE)
            .and_then(|c| Cause::parse(c))
        {
            Some(cause) if live.rolled_out() => {
                let note = format!(
                    "Deployment {name} rolled out its new pod template on all {} replicas (cause: {})",
                    live.desired,
                    cause.as_str()
                );
                (None, Some((EventReason::RolloutComplete, note)))
            }
            in_flight => (in_flight, None),
        }
    };
    if let Some(cause) = kept {
        stamps.insert(ROLLOUT_CAUSE.to_owned(), cause.as_str().to_owned());
    }
    note.map(|(reason, note)| EventNote { reason, note })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use crate::nova::resolved::Resolved;
    use crate::nova::workload::pod_inputs;
    use crate::nova::workload::tests::{converged, resolved};
    use crate::render::pod::Role;
    use crate::render::workloads::{self, LiveReplicas};

    /// The conductor Deployment a pass of `nova` with `resolved` applies, after [`track`] saw
    /// `live`: its event and its rollout-cause annotation.
    fn tracked(
        nova: &Nova,
        resolved: &Resolved,
        live: &Rollout,
    ) -> (Option<(EventReason, String)>, Option<String>) {
        let name = "nova".to_owned();
        let inputs = pod_inputs(nova, &name, resolved).expect("inputs");
        let mut desired = workloads::deployment(&inputs, Role::Conductor, LiveReplicas::Absent);
        let event = track(nova, Some(live), &mut desired).map(|e| (e.reason, e.note));
        let stamps = desired.metadata.annotations.unwrap_or_default();
        assert_eq!(
            stamps.get(OPERATOR_VERSION).map(String::as_str),
            Some(VERSION)
        );
        (event, stamps.get(ROLLOUT_CAUSE).cloned())
    }

    fn started(cause: &str) -> (Option<(EventReason, String)>, Option<String>) {
        let note =
            format!("Deployment nova-conductor rolls out a new pod template (cause: {cause})");
        (
            Some((EventReason::RolloutStarted, note)),
            Some(cause.to_owned()),
        )
    }

    #[test]
    fn a_changed_template_starts_a_rollout_named_by_the_input_that_moved() {
        let nova = example();
        let live = converged(&nova, Role::Conductor);
        assert_eq!(
            tracked(&nova, &resolved(), &live),
            (None, None),
            "steady state: nothing"
        );

        let rotated = Resolved {
            digests: crate::render::pod::Digests {
                authtoken: "rotated".into(),
                ..resolved().digests
            },
            ..resolved()
        };
        assert_eq!(tracked(&nova, &rotated, &live), started("credential"));

        let mut edited = example();
        edited.spec.pod_metadata = Some(
            serde_json::from_value(serde_json::json!({"labels": {"team": "a"}}))
                .expect("pod metadata"),
        );
        assert_eq!(tracked(&edited, &resolved(), &live), started("spec"));

        let mut older = live.clone();
        older
            .annotations
            .insert(OPERATOR_VERSION.to_owned(), "0.0.1".to_owned());
        assert_eq!(
            tracked(&edited, &resolved(), &older),
            started("operator upgrade")
        );
        assert_eq!(
            tracked(&nova, &resolved(), &older),
            (None, None),
            "a new operator version alone rolls nothing"
        );

        let mut upgrading = edited.clone();
        upgrading.status = Some(nova_api::v1alpha1::NovaStatus {
            upgrade_phase: Some(nova_api::v1alpha1::UpgradePhase::RollingUpdate),
            ..Default::default()
        });
        assert_eq!(tracked(&upgrading, &rotated, &live), started("release"));
    }

    #[test]
    fn the_cause_is_kept_while_rolling_and_completes_once_rolled_out() {
        let nova = example();
        let mut rolling = converged(&nova, Role::Conductor);
        rolling
            .annotations
            .insert(ROLLOUT_CAUSE.to_owned(), "credential".to_owned());
        rolling.updated = 0;
        assert_eq!(
            tracked(&nova, &resolved(), &rolling),
            (None, Some("credential".to_owned())),
            "in flight: the cause stays, no event"
        );
        rolling.updated = rolling.desired;
        rolling.observed_generation = rolling.generation - 1;
        assert_eq!(
            tracked(&nova, &resolved(), &rolling).1.as_deref(),
            Some("credential"),
            "a generation the controller has not seen is not rolled out"
        );
        rolling.observed_generation = rolling.generation;
        let note = format!(
            "Deployment nova-conductor rolled out its new pod template on all {} replicas (cause: credential)",
            rolling.desired
        );
        assert_eq!(
            tracked(&nova, &resolved(), &rolling),
            (Some((EventReason::RolloutComplete, note)), None),
            "complete: the event, and the annotation is dropped"
        );
    }
}
