//! The NovaCompute kind: nova-compute on one node pool (`novacompute.md`).

use super::upstream::Upstream;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ImageSpec, TargetClusterRefSpec, VerticalAutoscalingSpec};
use super::nova::ExtraConfig;

/// The desired state of one nova-compute node pool.
// kube's printcolumn(...) entries repeat `type_ = ...`, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "nova.openstack.c5c3.io",
    version = "v1alpha1",
    kind = "NovaCompute",
    plural = "novacomputes",
    namespaced,
    status = "NovaComputeStatus",
    derive = "PartialEq",
    doc = "A nova-compute node pool: a DaemonSet on the nodes its selector matches, joined to a Nova through its compute contract.",
    shortname = "nvc",
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
        name = "Desired",
        type_ = "integer",
        json_path = ".status.desiredNumberScheduled"
    ),
    printcolumn(
        name = "Ready pods",
        type_ = "integer",
        json_path = ".status.numberReady"
    ),
    printcolumn(name = "Active", type_ = "integer", json_path = ".status.activeNodes"),
    printcolumn(
        name = "Draining",
        type_ = "integer",
        json_path = ".status.drainingNodes"
    ),
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
#[x_kube(validation = ("self.novaRef.name == oldSelf.novaRef.name", "novaRef is immutable"))]
pub struct NovaComputeSpec {
    /// The Nova in this namespace the pool joins; immutable.
    pub nova_ref: NovaRef,
    /// Selects the pool's nodes by exact label match; a node that stops matching is drained.
    #[schemars(extend("minProperties" = 1))]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations copied verbatim onto the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<Vec<Toleration>>>")]
    pub tolerations: Option<Vec<Toleration>>,
    /// The nova-compute image; ghcr.io/c5c3/nova-compute at the Nova's installed release when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSpec>,
    /// Secrets in the pool's namespace (on its target cluster, when it has one) holding the
    /// registry credentials to pull the image; set on the DaemonSet's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    #[schemars(with = "Upstream<Option<Vec<LocalObjectReference>>>")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// The [libvirt] tuning the pool renders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub libvirt: Option<NovaComputeLibvirtSpec>,
    /// Paces the DaemonSet rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub update_strategy: Option<NovaComputeUpdateStrategy>,
    /// Requests and limits of nova-compute and its init containers; resolved per resource when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Upstream<Option<ResourceRequirements>>")]
    pub resources: Option<ResourceRequirements>,
    /// Opts the DaemonSet into a VerticalPodAutoscaler (requests only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vertical_autoscaling: Option<VerticalAutoscalingSpec>,
    /// INI sections merged over compute-pool.conf (user wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_config: Option<ExtraConfig>,
    /// The registered cluster the DaemonSet is created on; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster_ref: Option<TargetClusterRefSpec>,
    /// Custom Placement traits every managed node of the pool carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 128),
        inner(length(max = 255), pattern(r"^CUSTOM_[A-Z0-9_]+$"))
    )]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub traits: Option<Vec<String>>,
    /// Per-node additions to traits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["node".into()]))]
    pub host_traits: Option<Vec<NovaComputeHostTraits>>,
}

/// The Nova a pool joins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaRef {
    /// The Nova's name, in the pool's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The libvirt virtualization type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VirtType {
    /// Hardware virtualization.
    #[default]
    Kvm,
    /// Emulation, for nodes without KVM.
    Qemu,
}

/// The guest CPU model policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CpuMode {
    /// The host CPU model libvirt reports.
    HostModel,
    /// The host CPU exactly.
    HostPassthrough,
    /// The models in cpuModels.
    Custom,
    /// No CPU model.
    None,
}

/// The instance disk image format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImagesType {
    /// Nova's default.
    Default,
    /// qcow2 files.
    Qcow2,
    /// Raw files.
    Raw,
    /// Flat files.
    Flat,
}

/// The [libvirt] tuning of a pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ("(has(self.cpuMode) && self.cpuMode == 'custom') == (has(self.cpuModels) && size(self.cpuModels) > 0)", "cpuModels is required when cpuMode is custom and must be empty otherwise"))]
pub struct NovaComputeLibvirtSpec {
    /// [libvirt] virt_type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "kvm"))]
    pub virt_type: Option<VirtType>,
    /// [libvirt] cpu_mode; Nova's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mode: Option<CpuMode>,
    /// [libvirt] cpu_models, only with cpuMode custom.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 64),
        inner(length(max = 128), pattern(r"^[A-Za-z0-9_.-]+$"))
    )]
    pub cpu_models: Option<Vec<String>>,
    /// [libvirt] images_type; Nova's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_type: Option<ImagesType>,
}

/// The DaemonSet update strategy type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpdateStrategyType {
    /// Roll nodes at the maxUnavailable pace.
    #[default]
    RollingUpdate,
    /// Replace a pod only when someone deletes it.
    OnDelete,
}

/// A narrowed DaemonSet strategy: no maxSurge, since two nova-compute processes would share one libvirt.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaComputeUpdateStrategy {
    /// RollingUpdate or OnDelete.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "RollingUpdate"))]
    pub type_: Option<UpdateStrategyType>,
    /// Nodes that may restart nova-compute at once; 1 when unset; RollingUpdate only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// Traits one node carries in addition to spec.traits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaComputeHostTraits {
    /// The node (compute host) name.
    #[schemars(
        length(min = 1, max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub node: String,
    /// The node's additional custom traits.
    #[schemars(
        length(min = 1, max = 128),
        inner(length(max = 255), pattern(r"^CUSTOM_[A-Z0-9_]+$"))
    )]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub traits: Vec<String>,
}

/// The observed state of a NovaCompute.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaComputeStatus {
    /// Conditions keyed by type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    #[schemars(with = "Upstream<Vec<Condition>>")]
    pub conditions: Vec<Condition>,
    /// The metadata.generation of the last pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The image reference every selected node runs a ready pod of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_image: Option<String>,
    /// Mirrored from the DaemonSet status.
    #[serde(default)]
    pub desired_number_scheduled: i32,
    /// Mirrored from the DaemonSet status.
    #[serde(default)]
    pub number_ready: i32,
    /// The per-node ledger, sorted by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub nodes: Vec<NovaComputeNodeStatus>,
    /// How many nodes of the ledger are Active (a printer column).
    #[serde(default)]
    pub active_nodes: i32,
    /// How many nodes of the ledger are Draining (a printer column).
    #[serde(default)]
    pub draining_nodes: i32,
    /// Custom traits this pool created in Placement, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub created_traits: Vec<String>,
}

/// A node's place in the pool's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NodePhase {
    /// Selected; waiting for its compute service.
    Pending,
    /// Serving.
    Active,
    /// Deselected; its instances are being moved off.
    Draining,
    /// Empty; its compute service is being removed.
    Releasing,
    /// Held by another pool of the same Nova.
    Conflict,
}

impl NodePhase {
    /// Every phase, in lifecycle order.
    pub const ALL: [NodePhase; 5] = [
        NodePhase::Pending,
        NodePhase::Active,
        NodePhase::Draining,
        NodePhase::Releasing,
        NodePhase::Conflict,
    ];

    /// The spelling the status carries.
    pub const fn as_str(self) -> &'static str {
        match self {
            NodePhase::Pending => "Pending",
            NodePhase::Active => "Active",
            NodePhase::Draining => "Draining",
            NodePhase::Releasing => "Releasing",
            NodePhase::Conflict => "Conflict",
        }
    }
}

/// One node of the ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NovaComputeNodeStatus {
    /// The node name, also the compute service's host.
    pub name: String,
    /// The node's phase.
    pub phase: NodePhase,
    /// The node's topology.kubernetes.io/zone label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The UUID of the nova-compute service registered under the node name.
    #[serde(default, rename = "serviceID", skip_serializing_if = "Option::is_none")]
    pub service_id: Option<String>,
    /// enabled or disabled, as Nova reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_status: Option<String>,
    /// up or down, as Nova reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_state: Option<String>,
    /// The reason Nova records on a disabled service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Servers Nova counts on a Draining node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<i32>,
    /// The NovaCompute holding a node in Conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts_with: Option<String>,
    /// The node's custom trait record, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traits: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::NodePhase;

    #[test]
    fn every_phase_is_spelled_as_the_status_carries_it() {
        for phase in NodePhase::ALL {
            assert_eq!(
                serde_json::to_value(phase).expect("serializes"),
                phase.as_str()
            );
        }
    }
}
