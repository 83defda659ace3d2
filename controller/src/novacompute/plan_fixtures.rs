//! Inputs shared by the plan tests of the Aggregates, Services and Traits steps.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nova_api::v1alpha1::{
    NodePhase, NovaCompute, NovaComputeNodeStatus, NovaComputeSpec, NovaComputeStatus, NovaRef,
};

use super::compute_api::PoolView;

/// A ledger entry in `phase`, in `zone`.
pub fn entry(name: &str, phase: NodePhase, zone: Option<&str>) -> NovaComputeNodeStatus {
    NovaComputeNodeStatus {
        name: name.into(),
        phase,
        zone: zone.map(str::to_owned),
        service_id: None,
        service_status: None,
        service_state: None,
        disabled_reason: None,
        instances: None,
        conflicts_with: None,
        traits: Vec::new(),
    }
}

/// A NovaCompute `name` of Nova `nova` in namespace `ns`, deleting or not, holding `nodes`.
pub fn pool_cr(name: &str, deleting: bool, nodes: Vec<NovaComputeNodeStatus>) -> NovaCompute {
    let mut pool = NovaCompute::new(
        name,
        NovaComputeSpec {
            nova_ref: NovaRef {
                name: "nova".into(),
            },
            node_selector: BTreeMap::from([("pool".to_owned(), name.to_owned())]),
            tolerations: None,
            image: None,
            image_pull_secrets: None,
            libvirt: None,
            update_strategy: None,
            resources: None,
            vertical_autoscaling: None,
            extra_config: None,
            target_cluster_ref: None,
            traits: None,
            host_traits: None,
        },
    );
    pool.metadata.namespace = Some("ns".into());
    if deleting {
        pool.metadata.deletion_timestamp = Some(Time(Default::default()));
    }
    pool.status = Some(NovaComputeStatus {
        nodes,
        ..Default::default()
    });
    pool
}

/// The view of `cr` among `siblings`, its ledger the one `cr` holds.
pub fn view(cr: NovaCompute, siblings: &[Arc<NovaCompute>]) -> PoolView {
    PoolView {
        nodes: cr
            .status
            .as_ref()
            .map(|s| s.nodes.clone())
            .unwrap_or_default(),
        cr: Arc::new(cr),
        siblings: siblings.to_vec(),
    }
}
