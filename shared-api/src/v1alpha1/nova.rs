//! The Nova kind: one compute control plane (`nova-crd.txt`).

use super::upstream::Upstream;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LocalObjectReference, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    AutoscalingSpec, CacheSpec, DatabaseSpec, DeploymentSpec, GatewaySpec, ImageSpec, JobSpec,
    LoggingSpec, MessagingSpec, NetworkPolicySpec, SecretRefSpec, SecretStoreRefSpec,
    TargetClusterRefSpec, UWSGISpec, UpgradePhase,
};

/// Free-form INI overrides: section name to option name to value.
pub type ExtraConfig = BTreeMap<String, BTreeMap<String, String>>;

/// The desired state of one Nova compute control plane.
// kube's printcolumn(...) entries repeat `type_ = ...`, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "nova.openstack.c5c3.io",
    version = "v1alpha1",
    kind = "Nova",
    plural = "novas",
    namespaced,
    status = "NovaStatus",
    derive = "PartialEq",
    doc = "A Nova compute control plane: its release, image, databases, cache, message bus, Keystone integration and five Deployments.",
    shortname = "nv",
    category = "openstack",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type=='Ready')].reason"
    ),
    printcolumn(
        name = "Release",
        type_ = "string",
        json_path = ".status.installedRelease"
    ),
    printcolumn(name = "Upgrade", type_ = "string", json_path = ".status.upgradePhase"),
    printcolumn(
        name = "Target",
        type_ = "string",
        priority = 1,
        json_path = ".status.targetRelease"
    ),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".status.endpoint"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type=='Ready')].message"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("has(self.targetClusterRef) == has(oldSelf.targetClusterRef)", "targetClusterRef is immutable"))]
#[x_kube(validation = ("!has(self.targetClusterRef) || !has(oldSelf.targetClusterRef) || self.targetClusterRef.name == oldSelf.targetClusterRef.name", "targetClusterRef is immutable"))]
#[x_kube(validation = ("self.apiDatabase.database != self.database.database", "apiDatabase and database must name different schemas"))]
#[x_kube(validation = ("self.apiDatabase.database != self.database.database + '_cell0'", "apiDatabase must not name the cell0 schema derived from database"))]
#[x_kube(validation = ("(has(self.apiDatabase.credentialsMode) ? self.apiDatabase.credentialsMode : 'Static') == (has(self.database.credentialsMode) ? self.database.credentialsMode : 'Static')", "apiDatabase and database must use the same credentialsMode"))]
#[x_kube(validation = ("!has(self.consoleProxy) || !has(self.consoleProxy.enabled) || self.consoleProxy.enabled || !has(self.consoleProxy.deployment)", "consoleProxy.deployment must not be set when consoleProxy.enabled is false"))]
#[x_kube(validation = ("!has(self.remoteCompute) || has(self.messaging.tls)", "remoteCompute requires messaging.tls: a compute on another cluster verifies the broker against the messaging CA bundle"))]
#[x_kube(validation = ("!has(self.autoscaling) || !has(self.api) || !has(self.api.deployment) || !has(self.api.deployment.verticalAutoscaling)", "spec.api.deployment.verticalAutoscaling cannot be set while spec.autoscaling scales the same Deployment"))]
pub struct NovaSpec {
    /// The OpenStack release deployed and tracked (YYYY.N, N in 1 or 2); 2026.1 or later.
    #[schemars(pattern(r"^\d{4}\.[12]$"))]
    pub open_stack_release: String,
    /// The image every process runs: the Deployments, the migration Jobs and the archive CronJob.
    pub image: ImageSpec,
    /// Secrets in the Nova's namespace (on its target cluster, when it has one) holding the
    /// registry credentials to pull the image; set on every pod the Nova runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    #[schemars(with = "Upstream<Option<Vec<LocalObjectReference>>>")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// Extra labels and annotations on every pod the Nova runs (a service mesh's, a secrets
    /// agent's); the operator's own keys cannot be set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_metadata: Option<PodMetadataSpec>,
    /// Extra volumes on every pod the Nova runs (a CA bundle, a policy file), for
    /// extraVolumeMounts; not the names of the operator's own volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(with = "Upstream<Option<Vec<Volume>>>")]
    pub extra_volumes: Option<Vec<Volume>>,
    /// Mounts of extraVolumes into the nova container of every pod the Nova runs; not at or
    /// under a directory the operator mounts or runs from (/etc/nova, /var/lib/nova, /tmp, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[schemars(with = "Upstream<Option<Vec<VolumeMount>>>")]
    pub extra_volume_mounts: Option<Vec<VolumeMount>>,
    /// The nova_api schema connection; the schema name and the mode are immutable.
    #[x_kube(validation = ("self.database == oldSelf.database", "apiDatabase.database is immutable: the schema holds the cell map and every instance mapping"))]
    #[x_kube(validation = ("has(self.clusterRef) == has(oldSelf.clusterRef)", "apiDatabase mode (managed clusterRef vs brownfield host) is immutable"))]
    pub api_database: DatabaseSpec,
    /// The cell schema connection; cell0 is provisioned beside it as <database>_cell0.
    #[x_kube(validation = ("self.database == oldSelf.database", "database.database is immutable: the cell mappings store the schema name"))]
    #[x_kube(validation = ("has(self.clusterRef) == has(oldSelf.clusterRef)", "database mode (managed clusterRef vs brownfield host) is immutable"))]
    #[x_kube(validation = ("size(self.database) <= 58", "database.database must be at most 58 characters: cell0 is provisioned as <database>_cell0 under the 64-character schema limit"))]
    pub database: DatabaseSpec,
    /// Memcached, for the token middleware and the [cache] block.
    pub cache: CacheSpec,
    /// The RabbitMQ connection; a brownfield URL names an explicit port and no IPv6 literal host.
    pub messaging: MessagingSpec,
    /// The API Deployment and its uWSGI parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<NovaAPISpec>,
    /// The metadata Deployment, its uWSGI parameters, shared secret and gateway.
    pub metadata: NovaMetadataSpec,
    /// The scheduler Deployment and its worker count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<NovaSchedulerSpec>,
    /// The conductor Deployment and its worker count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conductor: Option<NovaConductorSpec>,
    /// Sizing, priority and placement of the Job and CronJob pods; unset fields follow spec.api.deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<JobSpec>,
    /// The console proxy switch, Deployment and gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_proxy: Option<NovaConsoleProxySpec>,
    /// The in-cluster Keystone auth URL.
    #[schemars(length(min = 1, max = 2048), pattern(r"^https?://"))]
    pub keystone_endpoint: String,
    /// Beyond the spec (issue 30): the CA bundle trusted for Keystone and the service endpoints
    /// (Placement, Neutron, Glance, Cinder, Barbican), by the pods and the operator alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<NovaTLSSpec>,
    /// The browser-facing Keystone URL (www_authenticate_uri); keystoneEndpoint when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub keystone_public_endpoint: Option<String>,
    /// Publishes a second compute contract for a nova-compute on another cluster; requires messaging.tls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_compute: Option<NovaRemoteComputeSpec>,
    /// The Keystone service account and its password Secret.
    pub service_user: ServiceUserSpec,
    /// The Keystone region; the catalog's default region when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub region: Option<String>,
    /// Pins the services Nova calls as a client and switches Cinder and Barbican on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<NovaEndpointsSpec>,
    /// The recurring archive of soft-deleted rows; resolved at reconcile time, never written back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_archive: Option<DBArchiveSpec>,
    /// Exposes the API through a Gateway API HTTPRoute on port 8774.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewaySpec>,
    /// Restricts ingress to TCP 8774, 8775 and 6080 from the listed sources; egress is derived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,
    /// Horizontal autoscaling of the API Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,
    /// oslo.log format, level, debug and per-logger levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<LoggingSpec>,
    /// Free-form INI sections merged over nova.conf (user wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_config: Option<ExtraConfig>,
    /// The External Secrets store SecretsReady checks; ClusterSecretStore openbao-cluster-store when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_store_ref: Option<SecretStoreRefSpec>,
    /// The registered target cluster receiving the children; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster_ref: Option<TargetClusterRefSpec>,
}

/// Trust for the HTTPS endpoints Nova and the operator call (beyond the spec, issue 30).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaTLSSpec {
    /// The PEM CA bundle (key ca.crt by default), trusted besides the system roots.
    pub ca_bundle_secret_ref: SecretRefSpec,
}

/// The API Deployment, the only one that scales horizontally.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaAPISpec {
    /// Pod-level knobs; 3 replicas by default; the fallback of spec.jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSpec>,
    /// uWSGI parameters, materialized by the defaulting webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uwsgi: Option<UWSGISpec>,
}

/// The metadata API behind the Neutron metadata agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaMetadataSpec {
    /// Pod-level knobs; 1 replica when the block is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSpec>,
    /// uWSGI parameters, materialized by the defaulting webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uwsgi: Option<UWSGISpec>,
    /// The Secret the Neutron metadata agent's shared secret is read from (key shared_secret).
    pub shared_secret_ref: SecretRefSpec,
    /// Exposes the metadata API on a hostname of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewaySpec>,
}

/// The scheduler Deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaSchedulerSpec {
    /// Pod-level knobs; 1 replica and a 200-second grace period by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSpec>,
    /// nova-scheduler worker processes per pod; 2 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub workers: Option<i32>,
}

/// The conductor Deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaConductorSpec {
    /// Pod-level knobs; 1 replica and a 200-second grace period by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSpec>,
    /// nova-conductor worker processes per pod; 2 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub workers: Option<i32>,
}

/// The noVNC console proxy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaConsoleProxySpec {
    /// Projects the proxy; true when unset. false deletes it and renders [vnc] enabled = false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Pod-level knobs; 1 replica while enabled; must be absent while disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSpec>,
    /// Exposes the console on a hostname of its own; path must be empty or /.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewaySpec>,
}

/// The Keystone service account Nova validates tokens with and calls other services as.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceUserSpec {
    /// Keystone username; nova by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub username: Option<String>,
    /// The project the user scopes to; service by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub project_name: Option<String>,
    /// The user's domain; Default by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub user_domain_name: Option<String>,
    /// The project's domain; Default by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub project_domain_name: Option<String>,
    /// The Secret holding the password (key password); injected as environment, never rendered.
    pub secret_ref: SecretRefSpec,
}

/// The services Nova calls as a client.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaEndpointsSpec {
    /// Placement ([placement] endpoint_override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<EndpointOverrideSpec>,
    /// Neutron ([neutron] endpoint_override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neutron: Option<EndpointOverrideSpec>,
    /// Glance ([glance] endpoint_override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glance: Option<EndpointOverrideSpec>,
    /// Cinder: renders [cinder] while enabled; override becomes endpoint_template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cinder: Option<OptionalEndpointSpec>,
    /// Barbican: renders [key_manager] and [barbican] while enabled; override becomes barbican_endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barbican: Option<OptionalEndpointSpec>,
}

/// A mandatory service's address; the Keystone catalog (internal interface) when unset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOverrideSpec {
    /// The URL Nova dials instead of the catalog's.
    #[serde(default, rename = "override", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), pattern(r"^https?://"))]
    pub override_url: Option<String>,
}

/// An optional service: a switch and its address.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OptionalEndpointSpec {
    /// Renders the service's sections at all; false when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The URL Nova dials instead of the catalog's; read only while enabled.
    #[serde(default, rename = "override", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), pattern(r"^https?://"))]
    pub override_url: Option<String>,
}

/// The two addresses the remote compute contract cannot derive.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaRemoteComputeSpec {
    /// The Keystone v3 URL a compute on another cluster authenticates against; https only.
    #[schemars(length(min = 1, max = 2048), pattern(r"^https://"))]
    pub keystone_endpoint: String,
    /// The Secret holding the broker's external rabbit:// URL (key transport_url).
    #[serde(rename = "transportURLSecretRef")]
    pub transport_url_secret_ref: SecretRefSpec,
}

/// The recurring archive of soft-deleted rows into the shadow tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DBArchiveSpec {
    /// The cron expression or descriptor; @daily when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub schedule: Option<String>,
    /// Rows one batch moves per table (--max_rows); 1000 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_rows: Option<i32>,
    /// Seconds between batches; 1 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub sleep: Option<i32>,
    /// Keeps rows soft-deleted within this many days (--before, --task-log); no window when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub retention_days: Option<i32>,
    /// Pauses the CronJob without deleting it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// The observed state of a Nova.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaStatus {
    /// Conditions keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    #[schemars(with = "Upstream<Vec<Condition>>")]
    pub conditions: Vec<Condition>,
    /// The metadata.generation last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The Nova API URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The release whose schema is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_release: Option<String>,
    /// The release being upgraded to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_release: Option<String>,
    /// The current phase of an active release upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_phase: Option<UpgradePhase>,
    /// The mapped cells, cell0 first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<CellStatus>,
    /// The compute-contract Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_config_secret_ref: Option<LocalSecretRef>,
    /// The remote compute-contract Secret, while spec.remoteCompute is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_compute_config_secret_ref: Option<LocalSecretRef>,
}

/// Extra metadata on every pod of a Nova.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodMetadataSpec {
    /// Labels added to every pod; not the app.kubernetes.io keys the operator selects by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 64))]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations added to every pod; not the operator's nova.c5c3.io digests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 64))]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// One mapped cell.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CellStatus {
    /// The cell's name (cell0, cell1).
    pub name: String,
    /// The UUID nova generated when it mapped the cell.
    pub uuid: String,
}

/// Names a Secret in the CR's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretRef {
    /// The Secret's name.
    pub name: String,
}
