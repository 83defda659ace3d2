//! The `kvm.cloud.sap/v1` Hypervisors the Traits step reads and patches
//! (openstack-hypervisor-operator's objects, one per node): read live through the cluster
//! handle ([`Hypervisors`]), written as [`Effect::MergePatch`]es the engine carries out.

use futures::future::BoxFuture;

use crate::clusters::{ClusterError, ClusterReads, Handle};
use crate::objects::kinds;
use crate::pipeline::effects::Effect;

/// What a node's Hypervisor shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hypervisor {
    /// `spec.customTraits`.
    pub custom_traits: Vec<String>,
    /// `status.traits`: what the hypervisor operator applied to the resource provider.
    pub status_traits: Vec<String>,
}

impl Hypervisor {
    /// The two lists of an unstructured Hypervisor object.
    pub fn from_object(object: &serde_json::Value) -> Self {
        let list = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        };
        Self {
            custom_traits: list(&object["spec"]["customTraits"]),
            status_traits: list(&object["status"]["traits"]),
        }
    }
}

/// A failed Hypervisor read or patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HypervisorFailure {
    /// The kind is not served on the pool's cluster.
    NotServed,
    /// 403.
    Forbidden(String),
    /// Anything else.
    Failed(String),
}

/// The Hypervisors of the pool's cluster, read uncached (implemented over the cluster handle;
/// the step's patches are [`Effect::MergePatch`]es the engine carries out).
pub trait Hypervisors: Send + Sync {
    /// The Hypervisor named like `node`; None when it does not exist.
    fn get<'a>(
        &'a self,
        node: &'a str,
    ) -> BoxFuture<'a, Result<Option<Hypervisor>, HypervisorFailure>>;
}

/// The Hypervisors of a cluster handle, read live: nothing watches them.
pub struct ClusterHypervisors<'a>(pub &'a dyn ClusterReads);

/// The patch of a node's Hypervisor to the desired list, on the pool's cluster.
pub fn patch(cluster: &Handle, node: &str, traits: &[String]) -> Effect {
    Effect::MergePatch {
        cluster: cluster.clone(),
        kind: kinds::hypervisor(),
        namespace: None,
        name: node.to_owned(),
        patch: serde_json::json!({ "spec": { "customTraits": traits } }),
    }
}

pub fn failure(e: ClusterError) -> HypervisorFailure {
    match e {
        ClusterError::NotServed { .. } => HypervisorFailure::NotServed,
        e if e.is_forbidden() => HypervisorFailure::Forbidden(e.to_string()),
        e => HypervisorFailure::Failed(e.to_string()),
    }
}

impl Hypervisors for ClusterHypervisors<'_> {
    fn get<'a>(
        &'a self,
        node: &'a str,
    ) -> BoxFuture<'a, Result<Option<Hypervisor>, HypervisorFailure>> {
        Box::pin(async move {
            let object = self
                .0
                .get_live(&kinds::hypervisor(), None, node)
                .await
                .map_err(failure)?;
            Ok(object.map(|o| Hypervisor::from_object(&o.data)))
        })
    }
}
