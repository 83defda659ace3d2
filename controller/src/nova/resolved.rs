//! What the Nova steps resolve for the steps after them, and the status fields they set.

use nova_api::v1alpha1::{CellStatus, LocalSecretRef, NovaStatus, UpgradePhase};

pub use crate::render::pod::Digests;

use crate::pipeline::Merge;
use crate::sensitive::Sensitive;

/// Values a step resolved for the steps after it. A plan sets only what it resolved; digests
/// stay empty on every wait path, so the pod annotation they feed is left alone instead of
/// being cleared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The service-user password.
    pub service_password: Option<Sensitive>,
    /// The metadata shared secret.
    pub metadata_shared_secret: Option<Sensitive>,
    /// The broker CA bundle, on a TLS bus.
    pub messaging_ca: Option<Sensitive>,
    /// spec.tls's CA bundle, while it is set.
    pub endpoint_ca: Option<Sensitive>,
    /// The transport URL the control-plane pods use.
    pub transport_url: Option<Sensitive>,
    /// The broker port the NetworkPolicy opens and the bus workloads probe.
    pub broker_port: Option<u16>,
    /// The pod-template digests, by annotation.
    pub digests: Digests,
    /// The config ConfigMap the workloads mount.
    pub config_map: Option<String>,
    /// The release whose schema is installed, as of this pass (the Database step promotes it
    /// before the workloads stamp it), so a promotion rolls the pods in the same pass.
    pub installed_release: Option<String>,
    /// The `status.endpoint` this pass sets, so the health check probes without waiting for
    /// the status write.
    pub endpoint: Option<String>,
}

fn later<T>(into: &mut Option<T>, value: Option<T>) {
    if value.is_some() {
        *into = value;
    }
}

fn later_digest(into: &mut String, value: String) {
    if !value.is_empty() {
        *into = value;
    }
}

impl Merge for Resolved {
    fn merge(&mut self, later_plan: Resolved) {
        later(&mut self.service_password, later_plan.service_password);
        later(
            &mut self.metadata_shared_secret,
            later_plan.metadata_shared_secret,
        );
        later(&mut self.messaging_ca, later_plan.messaging_ca);
        later(&mut self.endpoint_ca, later_plan.endpoint_ca);
        later(&mut self.transport_url, later_plan.transport_url);
        later(&mut self.broker_port, later_plan.broker_port);
        later(&mut self.config_map, later_plan.config_map);
        later(&mut self.installed_release, later_plan.installed_release);
        later(&mut self.endpoint, later_plan.endpoint);
        let (d, l) = (&mut self.digests, later_plan.digests);
        later_digest(&mut d.api_db_connection, l.api_db_connection);
        later_digest(&mut d.db_connection, l.db_connection);
        later_digest(&mut d.authtoken, l.authtoken);
        later_digest(&mut d.transport_url, l.transport_url);
        later_digest(&mut d.metadata_secret, l.metadata_secret);
    }
}

/// One status field a Nova step sets.
#[derive(Clone, Debug, PartialEq)]
pub enum StatusUpdate {
    /// `status.computeConfigSecretRef`.
    ComputeConfigSecretRef(Option<LocalSecretRef>),
    /// `status.remoteComputeConfigSecretRef`.
    RemoteComputeConfigSecretRef(Option<LocalSecretRef>),
    /// `status.installedRelease`.
    InstalledRelease(String),
    /// `status.targetRelease`.
    TargetRelease(Option<String>),
    /// `status.upgradePhase`.
    UpgradePhase(Option<UpgradePhase>),
    /// `status.cells`, cell0 first.
    Cells(Vec<CellStatus>),
    /// `status.endpoint`.
    Endpoint(Option<String>),
}

impl StatusUpdate {
    /// Writes the field into `status`.
    pub fn apply(self, status: &mut NovaStatus) {
        match self {
            StatusUpdate::ComputeConfigSecretRef(r) => status.compute_config_secret_ref = r,
            StatusUpdate::RemoteComputeConfigSecretRef(r) => {
                status.remote_compute_config_secret_ref = r
            }
            StatusUpdate::InstalledRelease(r) => status.installed_release = Some(r),
            StatusUpdate::TargetRelease(r) => status.target_release = r,
            StatusUpdate::UpgradePhase(p) => status.upgrade_phase = p,
            StatusUpdate::Cells(c) => status.cells = c,
            StatusUpdate::Endpoint(e) => status.endpoint = e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_plan_replaces_only_what_it_resolved() {
        let mut resolved = Resolved {
            broker_port: Some(5672),
            digests: Digests {
                authtoken: "a".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        resolved.merge(Resolved {
            config_map: Some("nova-config-1".into()),
            digests: Digests {
                db_connection: "d".into(),
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(resolved.broker_port, Some(5672));
        assert_eq!(resolved.config_map.as_deref(), Some("nova-config-1"));
        assert_eq!(
            (
                resolved.digests.authtoken.as_str(),
                resolved.digests.db_connection.as_str()
            ),
            ("a", "d")
        );
    }
}
