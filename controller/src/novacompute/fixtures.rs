//! Inputs shared by the plan tests of the NovaCompute steps.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nova_api::v1alpha1::{LocalSecretRef, NovaCompute, NovaStatus};

/// The example pool (`examples/novacompute.yaml`), as if admitted (uid, generation and
/// creation time set).
pub fn pool() -> NovaCompute {
    let mut pool: NovaCompute =
        serde_saphyr::from_str(include_str!("../../../examples/novacompute.yaml"))
            .unwrap_or_else(|e| panic!("the example parses: {e}"));
    pool.metadata.uid = Some("pool-a-uid".into());
    pool.metadata.generation = Some(1);
    pool.metadata.creation_timestamp = Some(at(100));
    pool
}

/// The Example Nova, having installed 2026.1 and published its contract.
pub fn nova() -> nova_api::v1alpha1::Nova {
    let mut nova = crate::nova::fixtures::example();
    nova.status = Some(NovaStatus {
        installed_release: Some("2026.1".into()),
        compute_config_secret_ref: Some(LocalSecretRef {
            name: "nova-compute-config".into(),
        }),
        ..Default::default()
    });
    nova
}

/// A timestamp `seconds` after the epoch.
pub fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap_or_else(|e| panic!("time: {e}")))
}

/// The management cluster as a Nova's cluster, backed by nothing.
pub fn home() -> crate::novacompute::resolved::NovaCluster {
    crate::novacompute::resolved::NovaCluster {
        name: None,
        handle: crate::clusters::Handle::new(std::sync::Arc::new(
            crate::clusters::MemoryCluster::new(Default::default()),
        )),
    }
}
