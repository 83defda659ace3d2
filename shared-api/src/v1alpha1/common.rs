//! The shared blocks (`common-types.md`, Part 1) both kinds embed.
//!
//! Optional fields stay `Option<T>` wherever "unset" must remain distinguishable from the
//! zero value: several defaults are resolved at render time precisely so an unset field keeps
//! following the operator default across upgrades. Schema defaults are written into the
//! schema only (`extend("default" = ..)`), never by serde, so a round trip through these types
//! neither loses nor invents a field.

use super::upstream::Upstream;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::api::core::v1::{
    Affinity, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::api::networking::v1::NetworkPolicyEgressRule;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// DNS-1123 subdomain, the grammar of every object name a reference carries.
pub const DNS1123_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// The container image every process of the CR runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("has(self.tag) != has(self.digest)", "exactly one of image.tag or image.digest must be set"))]
pub struct ImageSpec {
    /// The lower-case OCI repository, registry host and port allowed.
    #[schemars(length(min = 1, max = 255), pattern(r"^[a-z0-9]+([._:/-][a-z0-9]+)*$"))]
    pub repository: String,
    /// The image tag; exactly one of tag or digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$"))]
    pub tag: Option<String>,
    /// The image digest (sha256:<64 hex>); exactly one of tag or digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^sha256:[a-f0-9]{64}$"))]
    pub digest: Option<String>,
}

/// A reference to a Secret in the CR's namespace and one key of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRefSpec {
    /// The Secret's name.
    #[schemars(
        length(min = 1, max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
    /// The key inside the Secret; each use site defines its own default key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub key: Option<String>,
}

/// Names an object of another operator in the CR's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    /// The object's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// How the database credentials are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CredentialsMode {
    /// A static password from the credentials Secret.
    Static,
    /// Credentials issued by an external engine (OpenBao database engine); requires clusterRef.
    Dynamic,
}

/// One MariaDB schema connection: managed (clusterRef) or brownfield (host).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("has(self.clusterRef) != has(self.host)", "exactly one of clusterRef or host must be set"))]
#[x_kube(validation = ("!has(self.credentialsMode) || self.credentialsMode != 'Dynamic' || has(self.clusterRef)", "credentialsMode Dynamic requires clusterRef (managed mode)"))]
pub struct DatabaseSpec {
    /// Managed mode: a k8s.mariadb.com MariaDB in the CR's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ref: Option<ClusterRef>,
    /// Brownfield mode: the server's DNS name, IPv4 or IPv6 literal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(r"^[a-zA-Z0-9._:-]+$"))]
    pub host: Option<String>,
    /// The server port; 3306 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    /// The SQL schema name.
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z0-9_]+$"))]
    pub database: String,
    /// Static (the default) or Dynamic (requires clusterRef).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_mode: Option<CredentialsMode>,
    /// The upstream credentials Secret (keys username and password).
    pub secret_ref: SecretRefSpec,
    /// Opt-in TLS or mTLS to the server; plaintext when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<DatabaseTLSSpec>,
    /// Cluster size for a ControlPlane fresh-create projection; ignored by this operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 3))]
    pub replicas: Option<i32>,
    /// Storage size for a ControlPlane fresh-create projection; ignored by this operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[0-9]+(Mi|Gi|Ti)$"), extend("default" = "100Gi"))]
    pub storage_size: Option<String>,
    /// What deleting the CR does to the SQL schemas and user (see the type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Retain"))]
    pub deletion_policy: Option<DatabaseDeletionPolicy>,
}

/// What becomes of the block's SQL schemas and user when the CR is deleted (managed mode).
/// Retain (the default) keeps them with their rows: the MariaDB Database, User and Grant
/// objects are still deleted, but carry cleanupPolicy Skip, so the MariaDB operator drops
/// nothing. Delete lets it drop the schemas and the user (cleanupPolicy Delete): switch to it
/// before a deliberate teardown. Mutable; ignored in brownfield mode (host).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DatabaseDeletionPolicy {
    /// Keep the schemas, their rows and the users (MariaDB cleanupPolicy Skip).
    #[default]
    Retain,
    /// Drop the schemas and the users with the MariaDB objects (cleanupPolicy Delete).
    Delete,
}

impl DatabaseDeletionPolicy {
    /// The MariaDB operator's `spec.cleanupPolicy` value this policy maps to.
    pub fn cleanup_policy(self) -> &'static str {
        match self {
            DatabaseDeletionPolicy::Retain => "Skip",
            DatabaseDeletionPolicy::Delete => "Delete",
        }
    }
}

impl DatabaseSpec {
    /// The block's deletion policy, Retain when unset.
    pub fn deletion_policy(&self) -> DatabaseDeletionPolicy {
        self.deletion_policy.unwrap_or_default()
    }
}

/// The TLS mode of a database connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DatabaseTLSMode {
    /// TLS off; the references are kept.
    Disabled,
    /// Encrypt when the server offers TLS.
    Prefer,
    /// Encrypt, without verifying the server.
    Require,
    /// Encrypt and verify the server certificate against the CA bundle.
    VerifyCa,
    /// Encrypt, verify the certificate and the server's identity.
    VerifyFull,
}

/// TLS settings of a database connection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseTLSSpec {
    /// The TLS mode; the defaulting webhook fills an empty mode with require.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DatabaseTLSMode>,
    /// The CA bundle the client trusts.
    pub ca_bundle_secret_ref: SecretRefSpec,
    /// The client keypair for mTLS (ca.crt, tls.crt, tls.key).
    pub client_cert_secret_ref: SecretRefSpec,
}

/// The oslo.cache backend the defaulting webhook fills in.
pub const DEFAULT_CACHE_BACKEND: &str = "dogpile.cache.pymemcache";

/// Memcached: managed (clusterRef) or brownfield (servers).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("has(self.clusterRef) != (has(self.servers) && size(self.servers) > 0)", "exactly one of clusterRef or servers must be set"))]
#[x_kube(validation = (r"!has(self.clusterRef) || !self.clusterRef.name.matches('[\\n\\r]')", "clusterRef.name must not contain a newline or carriage return"))]
pub struct CacheSpec {
    /// Managed mode: a memcached.c5c3.io Memcached in the CR's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ref: Option<ClusterRef>,
    /// Brownfield mode: host:port entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 512), pattern(r"^[^\n\r]*$")))]
    pub servers: Option<Vec<String>>,
    /// The oslo.cache backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(required, length(min = 1, max = 253), extend("default" = "dogpile.cache.pymemcache"))]
    pub backend: Option<String>,
    /// Managed-mode size, informational for this operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 3))]
    pub replicas: Option<i32>,
}

/// The RabbitMQ connection: managed (clusterRef) or brownfield (secretRef).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("has(self.clusterRef) != has(self.secretRef)", "exactly one of clusterRef or secretRef must be set"))]
pub struct MessagingSpec {
    /// Managed mode: a rabbitmq.com RabbitmqCluster in the CR's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ref: Option<ClusterRef>,
    /// Brownfield mode: a Secret holding a complete rabbit:// URL (key transport_url by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRefSpec>,
    /// Client TLS to the broker; its presence alone turns TLS on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<MessagingTLSSpec>,
}

/// Client TLS to the broker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessagingTLSSpec {
    /// The broker's CA bundle (key ca.crt by default).
    pub ca_bundle_secret_ref: SecretRefSpec,
}

/// The kind of External Secrets store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SecretStoreKind {
    /// The cluster-scoped store.
    #[default]
    ClusterSecretStore,
    /// A store in the CR's own namespace.
    SecretStore,
}

/// Selects the External Secrets store the secret gate checks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreRefSpec {
    /// ClusterSecretStore (default) or SecretStore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "ClusterSecretStore"))]
    pub kind: Option<SecretStoreKind>,
    /// The store's name.
    #[schemars(
        length(min = 1, max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
}

/// Names the registered target cluster that receives the CR's children.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetClusterRefSpec {
    /// The name of the target cluster's registration Secret.
    #[schemars(
        length(min = 1, max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
}

/// External exposure through a Gateway API HTTPRoute.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    /// The pre-provisioned Gateway the route attaches to.
    pub parent_ref: GatewayParentRefSpec,
    /// The hostname the route serves.
    #[schemars(length(min = 1, max = 253))]
    pub hostname: String,
    /// The path prefix; / when unset, and a missing leading / is prepended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub path: Option<String>,
    /// Annotations copied verbatim onto the HTTPRoute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The Gateway an HTTPRoute attaches to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayParentRefSpec {
    /// The Gateway's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The Gateway's namespace; the CR's namespace when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
    /// One listener of the Gateway; every compatible listener when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub section_name: Option<String>,
}

/// Restricts ingress to the listed sources and derives egress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("size(self.ingress) > 0", "at least one ingress source must be specified"))]
pub struct NetworkPolicySpec {
    /// Allowed sources of the API ports, one peer each (OR across peers).
    pub ingress: Vec<NetworkPolicyIngressSource>,
    /// Egress rules appended verbatim after the auto-derived ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<Vec<NetworkPolicyEgressRule>>>")]
    pub additional_egress: Option<Vec<NetworkPolicyEgressRule>>,
}

/// One allowed ingress source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicyIngressSource {
    /// The source namespaces.
    #[schemars(with = "Upstream<LabelSelector>")]
    pub namespace_selector: LabelSelector,
    /// The source pods, ANDed with the namespace selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<LabelSelector>>")]
    pub pod_selector: Option<LabelSelector>,
}

/// Node placement of a workload's pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacementSpec {
    /// Node labels the pods must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Taints the pods tolerate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<Vec<Toleration>>>")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Node and pod (anti-)affinity of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<Affinity>>")]
    pub affinity: Option<Affinity>,
}

/// Pod-level knobs of one Deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(crate::defaults::pre_stop_within_grace_rule()).message("preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds"))]
pub struct DeploymentSpec {
    /// Pod count; 3 when the block exists without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 3))]
    pub replicas: Option<i32>,
    /// Container requests and limits, resolved per resource at render time when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<ResourceRequirements>>")]
    pub resources: Option<ResourceRequirements>,
    /// Pod termination grace period; 30 at render time when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10))]
    pub termination_grace_period_seconds: Option<i64>,
    /// Seconds the preStop hook sleeps before shutdown; 5 when unset, 0 disables it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pre_stop_sleep_seconds: Option<i64>,
    /// Rollout strategy; RollingUpdate with maxUnavailable 0 and maxSurge 1 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<DeploymentStrategy>>")]
    pub strategy: Option<DeploymentStrategy>,
    /// Spread constraints used verbatim when set (even empty); zone and hostname spread when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<Vec<TopologySpreadConstraint>>>")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// An existing PriorityClass for the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub priority_class_name: Option<String>,
    /// Node placement of the pods.
    #[serde(flatten)]
    pub placement: NodePlacementSpec,
    /// Opts the Deployment into a VerticalPodAutoscaler controlling its requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vertical_autoscaling: Option<VerticalAutoscalingSpec>,
    /// Timing overrides of the probes the operator renders; their handlers stay the operator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbesSpec>,
}

/// Timing overrides of a Deployment's probes, each merged over the rendered probe. The
/// scheduler and conductor run a readiness probe only (a broker outage must not restart them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbesSpec {
    /// The liveness probe's timing; Kubernetes requires its successThreshold to be 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = ("!has(self.successThreshold) || self.successThreshold == 1", "liveness.successThreshold must be 1"))]
    pub liveness: Option<ProbeTimingSpec>,
    /// The readiness probe's timing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ProbeTimingSpec>,
    /// The startup probe's timing; Kubernetes requires its successThreshold to be 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = ("!has(self.successThreshold) || self.successThreshold == 1", "startup.successThreshold must be 1"))]
    pub startup: Option<ProbeTimingSpec>,
}

/// When and how often one probe runs and how many results flip it; unset fields keep the
/// operator's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeTimingSpec {
    /// Seconds after the container starts before the first probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub initial_delay_seconds: Option<i32>,
    /// Seconds between probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_seconds: Option<i32>,
    /// Seconds one probe may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
    /// Consecutive failures that fail the probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
    /// Consecutive successes that pass a failed probe again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_threshold: Option<i32>,
}

/// The VerticalPodAutoscaler update mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VPAUpdateMode {
    /// Recommend only.
    Off,
    /// Apply at pod creation only.
    Initial,
    /// Evict pods to apply.
    Recreate,
    /// Resize pods in place, evicting only when that fails (VPA 1.4+, Kubernetes in-place pod
    /// resize).
    InPlaceOrRecreate,
    /// Apply by the VPA's preferred mechanism.
    Auto,
}

/// Opt-in vertical autoscaling of one workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("!has(self.minAllowed) || self.minAllowed.all(k, k in ['cpu','memory'])", "minAllowed may only name cpu and memory"))]
#[x_kube(validation = ("!has(self.maxAllowed) || self.maxAllowed.all(k, k in ['cpu','memory'])", "maxAllowed may only name cpu and memory"))]
pub struct VerticalAutoscalingSpec {
    /// Copied to the VPA updatePolicy.updateMode.
    pub update_mode: VPAUpdateMode,
    /// Lower bounds of the recommendation (cpu, memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 2))]
    pub min_allowed: Option<BTreeMap<String, Quantity>>,
    /// Upper bounds of the recommendation (cpu, memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 2))]
    pub max_allowed: Option<BTreeMap<String, Quantity>>,
    /// Copied to the VPA updatePolicy.minReplicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,
}

/// Horizontal autoscaling of the API Deployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("has(self.targetCPUUtilization) || has(self.targetMemoryUtilization)", "at least one of targetCPUUtilization or targetMemoryUtilization must be set"))]
#[x_kube(validation = ("!has(self.minReplicas) || self.minReplicas <= self.maxReplicas", "minReplicas must not exceed maxReplicas"))]
pub struct AutoscalingSpec {
    /// Lower bound; the effective API replicas when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,
    /// Upper bound.
    #[schemars(range(min = 1))]
    pub max_replicas: i32,
    /// Target average CPU utilization in percent of the requests.
    #[serde(
        default,
        rename = "targetCPUUtilization",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 100))]
    pub target_cpu_utilization: Option<i32>,
    /// Target average memory utilization in percent of the requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub target_memory_utilization: Option<i32>,
    /// Passed verbatim to the HorizontalPodAutoscaler spec.behavior.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<HorizontalPodAutoscalerBehavior>>")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

/// Sizing, priority and placement of the CR's Job and CronJob pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// Requests and limits; 70m CPU request and 368Mi memory when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<ResourceRequirements>>")]
    pub resources: Option<ResourceRequirements>,
    /// Unset follows spec.api.deployment; empty opts out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub priority_class_name: Option<String>,
    /// Unset copies the API Deployment's placement (node affinity only); empty opts out.
    #[serde(flatten)]
    pub placement: NodePlacementSpec,
    /// How long a migration Job (db-sync, and an upgrade's expand, migrate and contract) may
    /// run before Kubernetes fails it (activeDeadlineSeconds), so a migration wedged on a lock
    /// or an unreachable database ends instead of holding the Nova forever; 43200 (12 hours)
    /// when unset, enough for a large database's online migrations. It applies to Jobs
    /// created after the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60))]
    pub migration_deadline_seconds: Option<i64>,
}

/// The deadline of a migration Job when spec.jobs.migrationDeadlineSeconds is unset.
pub const MIGRATION_DEADLINE_SECONDS: i64 = 43_200;

/// The oslo.log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Plain text lines.
    #[default]
    Text,
    /// One JSON document per line, through logging.ini.
    Json,
}

/// An oslo.log level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum LogLevel {
    /// Everything.
    Debug,
    /// The default.
    #[default]
    Info,
    /// Warnings and worse.
    Warning,
    /// Errors and worse.
    Error,
    /// Critical only.
    Critical,
}

/// The levels a per-logger override may name.
pub const LOG_LEVELS: [&str; 5] = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];

/// oslo.log settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoggingSpec {
    /// text or json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "text"))]
    pub format: Option<LogFormat>,
    /// The root log level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "INFO"))]
    pub level: Option<LogLevel>,
    /// [DEFAULT] debug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<bool>,
    /// Per-logger levels rendered as [DEFAULT] default_log_levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 128), inner(length(max = 16)))]
    #[x_kube(validation = ("self.all(k, k != '')", "logger name must not be empty"))]
    #[x_kube(validation = ("self.all(k, self[k] in ['DEBUG','INFO','WARNING','ERROR','CRITICAL'])", "per-logger level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"))]
    pub per_logger_levels: Option<BTreeMap<String, String>>,
}

/// uWSGI parameters of an HTTP front end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("!has(self.httpKeepAliveTimeout) || !has(self.httpKeepAlive) || self.httpKeepAlive", "httpKeepAliveTimeout may only be set when httpKeepAlive is true"))]
pub struct UWSGISpec {
    /// Worker processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 2))]
    pub processes: Option<i32>,
    /// Threads per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 1))]
    pub threads: Option<i32>,
    /// HTTP keep-alive; materialized to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_keep_alive: Option<bool>,
    /// Seconds after which a stuck request's worker is recycled; no flag when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub harakiri: Option<i32>,
    /// Keep-alive timeout in seconds; only with httpKeepAlive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub http_keep_alive_timeout: Option<i32>,
}

/// A release upgrade phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpgradePhase {
    /// The additive migrations run.
    Expanding,
    /// The new code proves it can address the migrated schema.
    Migrating,
    /// The workloads roll onto the new image.
    RollingUpdate,
    /// The online data migrations run.
    Contracting,
}
