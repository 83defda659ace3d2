//! The other operators' kinds the pipelines read or delete, as dynamic resources, so a missing
//! CRD is an answer (not served, read as absent) rather than a compile-time dependency.

use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// `external-secrets.io/v1` ClusterSecretStore (cluster-scoped).
pub fn cluster_secret_store() -> ApiResource {
    resource(
        "external-secrets.io",
        "v1",
        "ClusterSecretStore",
        "clustersecretstores",
    )
}

/// `external-secrets.io/v1` SecretStore.
pub fn secret_store() -> ApiResource {
    resource("external-secrets.io", "v1", "SecretStore", "secretstores")
}

/// `external-secrets.io/v1` ExternalSecret, read only to explain a missing Secret.
pub fn external_secret() -> ApiResource {
    resource(
        "external-secrets.io",
        "v1",
        "ExternalSecret",
        "externalsecrets",
    )
}

/// `rabbitmq.com/v1beta1` RabbitmqCluster.
pub fn rabbitmq_cluster() -> ApiResource {
    resource(
        "rabbitmq.com",
        "v1beta1",
        "RabbitmqCluster",
        "rabbitmqclusters",
    )
}

/// `k8s.mariadb.com/v1alpha1` MariaDB, the cluster a managed schema lives on.
pub fn mariadb() -> ApiResource {
    resource("k8s.mariadb.com", "v1alpha1", "MariaDB", "mariadbs")
}

/// The three `k8s.mariadb.com/v1alpha1` kinds provisioned per schema.
pub fn mariadb_children() -> [ApiResource; 3] {
    [
        resource("k8s.mariadb.com", "v1alpha1", "Database", "databases"),
        resource("k8s.mariadb.com", "v1alpha1", "User", "users"),
        resource("k8s.mariadb.com", "v1alpha1", "Grant", "grants"),
    ]
}

/// `gateway.networking.k8s.io/v1` HTTPRoute, the external exposure of the three front ends.
pub fn http_route() -> ApiResource {
    resource("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes")
}

/// `autoscaling.k8s.io/v1` VerticalPodAutoscaler, opted into per workload.
pub fn vertical_pod_autoscaler() -> ApiResource {
    resource(
        "autoscaling.k8s.io",
        "v1",
        "VerticalPodAutoscaler",
        "verticalpodautoscalers",
    )
}

/// `kvm.cloud.sap/v1` Hypervisor (cluster-scoped, named after its Node), where a pool writes
/// a node's custom traits for openstack-hypervisor-operator to apply.
pub fn hypervisor() -> ApiResource {
    resource("kvm.cloud.sap", "v1", "Hypervisor", "hypervisors")
}

/// Whether the object reports a `Ready` condition with status `True`.
pub fn is_ready(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}
