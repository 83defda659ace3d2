//! The harness's hand-written Nova (`nova_test_harness::openstack::nova`, its `proof-*` roles) as
//! the suites that drive the NovaCompute controller against it reach it from outside the cluster
//! (`openstack_client`, `novacompute_openstack`): the Service routes, a client as the pools'
//! service user, the host discovery a test runs itself, nova-api stopped and started again, and
//! the waits on the pools.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use nova_controller::objects::kinds;
use nova_controller::openstack::{self as os_client, Credentials, Endpoints, Transport};
use nova_controller::sensitive::Sensitive;
use nova_test_harness::images::nova_image;
use nova_test_harness::openstack::nova::{
    NOVA_API_PORT, TIMEOUT, apply_all, db_sync, nova_pod, setup, start_api,
};
use nova_test_harness::openstack::{self, OpenStack, keystone_url, wait_available};
use nova_test_harness::{ControlPlane, pods, shared_real_node};
use serde_json::json;

use crate::real::openstack_routes;
use crate::wait::Wait;

/// The real node with its OpenStack of `release`, and a fresh namespace `<prefix>-…` (the
/// client's) in which the proof Nova's schemas are synced and its nova-api serves.
pub async fn start(
    prefix: &str,
    release: &str,
) -> Result<(&'static ControlPlane, &'static OpenStack, Client, String)> {
    let cp = shared_real_node().await?;
    let os = openstack::shared(cp, release).await?;
    let client = cp.client()?;
    let ns = cp.namespace(prefix).await?;
    setup(os, &client, &ns).await?;
    let sync = db_sync(&client, &ns, release).await?;
    ensure!(sync.exit_code == 0, "db-sync failed: {sync:?}");
    start_api(&client, &ns, release).await?;
    Ok((cp, os, client, ns))
}

/// The cluster-local addresses of Keystone, Placement and the proof nova-api (under its own
/// Service name and under `nova`, the API Service name of the Nova `nova` the pools join),
/// routed for a process outside the cluster: nova-api through its Service's ClusterIP (the
/// node's kube-proxy), so the route survives a replaced pod and refuses while none runs.
pub async fn routes(client: &Client, os: &OpenStack, ns: &str) -> BTreeMap<String, SocketAddr> {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let ip = services
        .get("nova-api")
        .await
        .expect("the nova-api Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    let api = SocketAddr::new(ip.parse().expect("an IP"), NOVA_API_PORT);
    let mut routes = openstack_routes(os).await;
    for name in ["nova-api", "nova"] {
        routes.insert(
            format!("{name}.{ns}.svc.cluster.local:{NOVA_API_PORT}"),
            api,
        );
    }
    routes
}

/// A client of the proof nova-api (Service `nova-api`) as the pools' service user (`nova` of
/// project `service`), Placement from the catalog, over `transport`.
pub fn service_user(transport: Arc<dyn Transport>, ns: &str, password: &str) -> os_client::Client {
    os_client::Client::new(
        transport,
        Endpoints {
            keystone: keystone_url(),
            nova: format!("http://nova-api.{ns}.svc.cluster.local:{NOVA_API_PORT}"),
            placement: None,
            region: Some("RegionOne".into()),
        },
        Credentials {
            username: "nova".into(),
            password: Sensitive::new(password),
            project_name: "service".into(),
            user_domain_name: "Default".into(),
            project_domain_name: "Default".into(),
        },
    )
}

/// Creates the `kvm.cloud.sap/v1` Hypervisor of `node` with an empty spec, as the hypervisor
/// operator (not running here) would; its Hypervisors.
pub async fn create_hypervisor(client: &Client, node: &str) -> Result<Api<DynamicObject>> {
    let hypervisors: Api<DynamicObject> = Api::all_with(client.clone(), &kinds::hypervisor());
    hypervisors
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "kvm.cloud.sap/v1", "kind": "Hypervisor",
                "metadata": { "name": node }, "spec": {}
            }))?,
        )
        .await?;
    Ok(hypervisors)
}

/// Runs `nova-manage cell_v2 discover_hosts` once in Job `job` of the `release` image, as the
/// `<nova>-discover-hosts` Job does.
pub async fn discover_hosts(client: &Client, ns: &str, release: &str, job: &str) -> Result<()> {
    let mut pod = nova_pod(
        &nova_image(release),
        "discover-hosts",
        json!([
            "nova-manage",
            "--config-dir",
            "/etc/nova/nova.conf.d",
            "cell_v2",
            "discover_hosts",
            "--verbose"
        ]),
        json!([]),
        json!([]),
        json!([]),
    );
    pod["restartPolicy"] = json!("Never");
    apply_all(
        client,
        &[json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": job, "namespace": ns },
            "spec": { "backoffLimit": 0, "template": { "spec": pod } }
        })],
    )
    .await?;
    let t = pods::wait_for_job_termination(client, ns, job, "discover-hosts", TIMEOUT).await?;
    ensure!(t.exit_code == 0, "discover_hosts failed: {t:?}");
    Ok(())
}

/// Scales the proof nova-api to `replicas`: 0 returns once no pod of it is left (its Service
/// then refuses), 1 once it serves again.
pub async fn scale_api(client: &Client, ns: &str, replicas: i32) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deployments
        .patch(
            "nova-api",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": replicas } })),
        )
        .await?;
    if replicas > 0 {
        wait_available(client, ns, "nova-api", TIMEOUT).await?;
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    Wait::new("no nova-api pod is left", TIMEOUT)
        .until(|| async {
            let left = pods
                .list(&ListParams::default().labels("app=nova-api"))
                .await?;
            Ok(left.items.is_empty().then_some(()))
        })
        .await?;
    Ok(())
}
