//! Fixtures of `novacompute_real` beyond the real Nova of `nova_testkit::real`: the compute API
//! as the cloud's admin calls it (servers, flavors, the onboarding the hypervisor operator would
//! do), the PLAYED nova-compute of every kwok node a pool holds, and the sampler of the
//! invariant that no node with servers ever loses its nova-compute pod.

#![allow(dead_code)] // not every helper is used by every scenario

pub mod compute;
pub mod played;
pub mod sampler;

/// The pod labels of a pool's DaemonSet (its selector), as `key=value,…`.
pub fn pool_pods(pool: &str) -> String {
    format!(
        "app.kubernetes.io/name=novacompute,app.kubernetes.io/instance={pool},app.kubernetes.io/component=nova-compute"
    )
}

/// Whether a pod still runs (or is starting): the Services step counts every pod of the pool
/// not `Succeeded` or `Failed`.
pub fn running(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}
