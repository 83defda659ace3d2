//! What the NovaCompute steps resolve for the steps after them, and the status fields they set.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use nova_api::v1alpha1::{
    ImageSpec, NodePhase, Nova, NovaCompute, NovaComputeNodeStatus, NovaComputeStatus,
};

use crate::clusters::Handle;
use crate::openstack::Client;
use crate::openstack::trust::CaBundle;
use crate::pipeline::Merge;
use crate::sensitive::Sensitive;

/// The Keystone service user the pool calls Keystone, Nova and Placement as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceCredentials {
    /// `spec.serviceUser.username` of the Nova (default `nova`).
    pub username: String,
    /// The project the token is scoped to (default `service`).
    pub project_name: String,
    /// The user's domain (default `Default`).
    pub user_domain_name: String,
    /// The project's domain (default `Default`).
    pub project_domain_name: String,
    /// The password, read on the Nova's cluster.
    pub password: Sensitive,
}

/// The cluster a pool's Nova is placed on: the one its service-user Secret and host discovery
/// Job live on and its Services are called through (the management cluster for a Nova without
/// `targetClusterRef`).
#[derive(Clone)]
pub struct NovaCluster {
    /// The target cluster's name; None for the management cluster.
    pub name: Option<String>,
    /// Its handle.
    pub handle: Handle,
}

impl std::fmt::Debug for NovaCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(f, "target cluster {name}"),
            None => f.write_str("the management cluster"),
        }
    }
}

/// The Nova a pool joins, as the NovaRef step resolved it.
#[derive(Clone, Debug)]
pub struct NovaInputs {
    /// The Nova as read (its spec carries the region and the endpoint overrides).
    pub nova: Arc<Nova>,
    /// The nova-compute image: the pool's own, or the default at the installed release.
    pub image: ImageSpec,
    /// The compute contract Secret the pods mount (`status.computeConfigSecretRef`).
    pub contract_secret: String,
    /// The Keystone endpoint (`spec.keystoneEndpoint`).
    pub keystone_url: String,
    /// The cluster-local compute API URL.
    pub compute_url: String,
    /// The service user.
    pub credentials: ServiceCredentials,
    /// The Nova's spec.tls CA bundle, while it sets one.
    pub endpoint_ca: Option<CaBundle>,
    /// The cluster the Nova is placed on.
    pub cluster: NovaCluster,
}

/// The node sets the Nodes step hands on.
#[derive(Clone, Debug, Default)]
pub struct NodeSets {
    /// The ledger as this pass left it, sorted by name.
    pub ledger: Vec<NovaComputeNodeStatus>,
    /// Selected nodes another pool holds (`Conflict`): excluded from the pool's affinity term.
    pub excluded: BTreeSet<String>,
    /// Held nodes that keep their pod (`Pending`, `Active`, `Draining`), each through a term of
    /// its own, so a pod stays whatever its node's labels say until a pass releases the node.
    pub kept: BTreeSet<String>,
    /// Leaving nodes another pool takes over: released without disabling or deleting the
    /// service.
    pub handover: BTreeSet<String>,
    /// Selected or held nodes whose Node carries the custom-traits annotation.
    pub annotated: BTreeSet<String>,
    /// The other NovaComputes of the same Nova in the namespace, on any cluster.
    pub siblings: Vec<Arc<NovaCompute>>,
}

/// What the pool's config resolved for the DaemonSet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// The `{name}-config-<hash>` ConfigMap the pods mount.
    pub config_map: String,
    /// The digest of the contract Secret's data, the pod-template annotation.
    pub contract_hash: String,
}

/// Values a step resolved for the steps after it; a later plan replaces only what it sets.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// The Nova, once the NovaRef step resolved it. None on a deleting pool whose Nova is
    /// gone: the Nova side of the teardown is skipped.
    pub nova: Option<NovaInputs>,
    /// The node ledger and sets of this pass.
    pub nodes: Option<NodeSets>,
    /// The rendered pool config.
    pub config: Option<PoolConfig>,
    /// Whether the DaemonSet step applied the DaemonSet in this pass (the VPA targets only an
    /// applied one).
    pub daemonset_applied: bool,
    /// The OpenStack client of this pass, built by the first step that calls OpenStack and
    /// shared by the others (its token kept across passes: `openstack::Sessions`).
    pub openstack: Option<Arc<Client>>,
    /// The Services step's poll of Nova, which the Traits step returns (the shorter of it and
    /// its own) instead of the Services step ending the pipeline with it.
    pub services_poll: Option<Duration>,
}

fn later<T>(into: &mut Option<T>, value: Option<T>) {
    if value.is_some() {
        *into = value;
    }
}

impl Merge for Resolved {
    fn merge(&mut self, later_plan: Resolved) {
        later(&mut self.nova, later_plan.nova);
        later(&mut self.nodes, later_plan.nodes);
        later(&mut self.config, later_plan.config);
        self.daemonset_applied |= later_plan.daemonset_applied;
        later(&mut self.openstack, later_plan.openstack);
        later(&mut self.services_poll, later_plan.services_poll);
    }
}

/// One status field a NovaCompute step sets.
#[derive(Clone, Debug, PartialEq)]
pub enum StatusUpdate {
    /// `status.nodes`, sorted by name, with the counts of its Active and Draining nodes.
    Nodes(Vec<NovaComputeNodeStatus>),
    /// `status.desiredNumberScheduled` and `status.numberReady`, mirrored from the DaemonSet.
    Counters {
        /// Nodes that should run a pod.
        desired: i32,
        /// Nodes that run a ready pod.
        ready: i32,
    },
    /// `status.installedImage`.
    InstalledImage(String),
    /// `status.createdTraits`, sorted.
    CreatedTraits(Vec<String>),
}

impl StatusUpdate {
    /// Writes the field into `status`.
    pub fn apply(self, status: &mut NovaComputeStatus) {
        match self {
            StatusUpdate::Nodes(nodes) => {
                let count = |phase| {
                    let n = nodes.iter().filter(|n| n.phase == phase).count();
                    i32::try_from(n).unwrap_or(i32::MAX)
                };
                status.active_nodes = count(NodePhase::Active);
                status.draining_nodes = count(NodePhase::Draining);
                status.nodes = nodes;
            }
            StatusUpdate::Counters { desired, ready } => {
                status.desired_number_scheduled = desired;
                status.number_ready = ready;
            }
            StatusUpdate::InstalledImage(image) => status.installed_image = Some(image),
            StatusUpdate::CreatedTraits(traits) => status.created_traits = traits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::plan_fixtures::entry;

    #[test]
    fn the_ledger_counts_its_active_and_draining_nodes() {
        let mut status = NovaComputeStatus::default();
        StatusUpdate::Nodes(vec![
            entry("a", NodePhase::Active, None),
            entry("b", NodePhase::Active, None),
            entry("c", NodePhase::Draining, None),
            entry("d", NodePhase::Releasing, None),
            entry("e", NodePhase::Pending, None),
        ])
        .apply(&mut status);
        assert_eq!((status.active_nodes, status.draining_nodes), (2, 1));
        assert_eq!(status.nodes.len(), 5);
        StatusUpdate::Nodes(Vec::new()).apply(&mut status);
        assert_eq!((status.active_nodes, status.draining_nodes), (0, 0));
    }
}
