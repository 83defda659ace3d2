//! The labels on a Nova's children (`common-types.md` Part 2, "Labels on children"). The
//! webhook measures topology-spread selectors against the same selector the controller puts on
//! each Deployment, so both take them from here.

use std::collections::BTreeMap;

/// `app.kubernetes.io/name`.
pub const NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/instance`.
pub const INSTANCE: &str = "app.kubernetes.io/instance";
/// `app.kubernetes.io/managed-by`.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// `app.kubernetes.io/component`.
pub const COMPONENT: &str = "app.kubernetes.io/component";

/// The prefix of the annotations the operator stamps on a Nova's pod templates (credential
/// digests, the installed release); `spec.podMetadata.annotations` cannot use it.
pub const POD_ANNOTATION_PREFIX: &str = "nova.c5c3.io/";

/// The label keys the operator sets on a Nova's pods and selects them by;
/// `spec.podMetadata.labels` cannot set them.
pub const POD_LABELS: [&str; 4] = [NAME, INSTANCE, MANAGED_BY, COMPONENT];

/// The service app name of every Nova child.
pub const NOVA_APP: &str = "nova";
/// The manager of every Nova child.
pub const NOVA_MANAGER: &str = "nova-operator";

/// The components of the five Deployments, each narrowing its pod selector.
pub mod component {
    /// The API Deployment.
    pub const API: &str = "api";
    /// The metadata Deployment.
    pub const METADATA: &str = "metadata";
    /// The scheduler Deployment.
    pub const SCHEDULER: &str = "scheduler";
    /// The conductor Deployment.
    pub const CONDUCTOR: &str = "conductor";
    /// The console proxy Deployment.
    pub const NOVNCPROXY: &str = "novncproxy";
}

/// The ownership labels a child on a target cluster carries instead of an owner reference
/// (`common-types.md` Part 2, "Ownership labels"): an owner reference does not cross a
/// cluster boundary.
pub mod ownership {
    /// The owner's Kind (`Nova`, `NovaCompute`).
    pub const KIND: &str = "openstack.c5c3.io/owner-kind";
    /// The owner's name.
    pub const NAME: &str = "openstack.c5c3.io/owner-name";
    /// The owner's namespace.
    pub const NAMESPACE: &str = "openstack.c5c3.io/owner-namespace";
}

/// The common labels of every child of the Nova `cr_name`.
pub fn common(cr_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.to_owned(), NOVA_APP.to_owned()),
        (INSTANCE.to_owned(), cr_name.to_owned()),
        (MANAGED_BY.to_owned(), NOVA_MANAGER.to_owned()),
    ])
}

/// The pod selector of one of the five Deployments: `name` + `instance`, narrowed by the
/// component so the five never adopt each other's pods.
pub fn selector(cr_name: &str, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.to_owned(), NOVA_APP.to_owned()),
        (INSTANCE.to_owned(), cr_name.to_owned()),
        (COMPONENT.to_owned(), component.to_owned()),
    ])
}

/// `app.kubernetes.io/name` of every NovaCompute child.
pub const NOVACOMPUTE_APP: &str = "novacompute";
/// `app.kubernetes.io/managed-by` of every NovaCompute child (the shared `<app>-operator` rule).
pub const NOVACOMPUTE_MANAGER: &str = "novacompute-operator";
/// `app.kubernetes.io/component` of the pool DaemonSet and its pods.
pub const NOVA_COMPUTE_COMPONENT: &str = "nova-compute";
/// The label a ControlPlane puts on the contract and auth Secrets it mirrors into a pool's
/// namespace; a pool reaps only Secrets carrying it.
pub const COMPUTE_CONFIG_MIRROR: &str = "nova.openstack.c5c3.io/compute-config-mirror";
/// The Node label whose value is a node's availability zone.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// The annotation that pauses the reconciliation of a Nova or NovaCompute while it is `"true"`
/// (a break-glass edit of its children); removing it resumes. A decision beyond the spec
/// (issue 30), recorded in `controller/README.md`.
pub const PAUSE_ANNOTATION: &str = "nova.openstack.c5c3.io/paused";

/// The Node annotation through which the hypervisor operator takes a node's custom traits.
pub const CUSTOM_TRAITS_ANNOTATION: &str = "nova.openstack.cloud.sap/custom-traits";

/// The common labels of every child of the NovaCompute `cr_name`.
pub fn novacompute_common(cr_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.to_owned(), NOVACOMPUTE_APP.to_owned()),
        (INSTANCE.to_owned(), cr_name.to_owned()),
        (MANAGED_BY.to_owned(), NOVACOMPUTE_MANAGER.to_owned()),
    ])
}

/// The pod selector of the pool DaemonSet: `name`, `instance` and `component`.
pub fn novacompute_selector(cr_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME.to_owned(), NOVACOMPUTE_APP.to_owned()),
        (INSTANCE.to_owned(), cr_name.to_owned()),
        (COMPONENT.to_owned(), NOVA_COMPUTE_COMPONENT.to_owned()),
    ])
}
