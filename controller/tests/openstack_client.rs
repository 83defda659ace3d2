//! The NovaCompute steps' OpenStack client against the real services on the real node: a real
//! Keystone issues the token (once per client) and the catalog Placement is found in, a real
//! nova-api (hand-written templates, `nova_test_harness::openstack::nova`) answers the service,
//! hypervisor, server and aggregate calls while a fake-driver nova-compute registers, and a real
//! Placement creates, refuses (409 while a resource provider carries it) and deletes a trait.
//! The client dials the cluster-local Service names through routes to the pods' addresses, the
//! way a controller outside the cluster reaches them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nova_controller::openstack::nova::ServiceDeletion;
use nova_controller::openstack::placement::{TraitDeletion, TraitEnsured};
use nova_controller::openstack::{Client, Credentials, Direct, Endpoints, OpenStackError};
use nova_controller::sensitive::Sensitive;
use nova_test_harness::images::nova_image;
use nova_test_harness::openstack::nova::{
    TIMEOUT, api_address, apply_all, db_sync, nova_pod, setup, start_api,
    start_conductor_and_compute,
};
use nova_test_harness::openstack::{self, KEYSTONE, OpenStack, PLACEMENT, Ports, keystone_url};
use nova_test_harness::{ControlPlane, http, pods, shared_real_node};
use serde_json::json;

const RELEASE: &str = "2026.1";
const HOST: &str = "proof-compute-0";

/// The client of one pass as the NovaCompute steps build it: user `nova` of project `service`,
/// Placement from the catalog.
async fn pass_client(
    cp: &ControlPlane,
    os: &OpenStack,
    ns: &str,
    password: &str,
) -> Result<Client> {
    let kube = cp.client()?;
    let nova_url = format!("http://nova-api.{ns}.svc.cluster.local:8774");
    let routes = BTreeMap::from([
        (
            format!(
                "{KEYSTONE}.{}.svc.cluster.local:{}",
                openstack::NAMESPACE,
                Ports::KEYSTONE
            ),
            os.endpoint(KEYSTONE, Ports::KEYSTONE).await?,
        ),
        (
            format!(
                "{PLACEMENT}.{}.svc.cluster.local:{}",
                openstack::NAMESPACE,
                Ports::PLACEMENT
            ),
            os.endpoint(PLACEMENT, Ports::PLACEMENT).await?,
        ),
        (
            format!("nova-api.{ns}.svc.cluster.local:8774"),
            api_address(&kube, ns).await?,
        ),
    ]);
    Ok(Client::new(
        Arc::new(Direct::routed(routes)),
        Endpoints {
            keystone: keystone_url(),
            nova: nova_url,
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
    ))
}

/// Runs `nova-manage cell_v2 discover_hosts` once, as the `<nova>-discover-hosts` Job does.
async fn discover_hosts(kube: &kube::Client, ns: &str) -> Result<()> {
    let mut pod = nova_pod(
        &nova_image(RELEASE),
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
        kube,
        &[json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": "proof-discover-hosts", "namespace": ns },
            "spec": { "backoffLimit": 0, "template": { "spec": pod } }
        })],
    )
    .await?;
    let t =
        pods::wait_for_job_termination(kube, ns, "proof-discover-hosts", "discover-hosts", TIMEOUT)
            .await?;
    ensure!(t.exit_code == 0, "discover_hosts failed: {t:?}");
    Ok(())
}

async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(value) = probe().await? {
            return Ok(value);
        }
        ensure!(Instant::now() < deadline, "{what} did not happen");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn the_client_drives_the_real_keystone_nova_and_placement() -> Result<()> {
    let cp = shared_real_node().await?;
    let os = openstack::shared(cp, RELEASE).await?;
    let kube = cp.client()?;
    let ns = cp.namespace("osclient").await?;
    setup(os, &kube, &ns).await?;
    let sync = db_sync(&kube, &ns, RELEASE).await?;
    ensure!(sync.exit_code == 0, "db-sync failed: {sync:?}");
    start_api(&kube, &ns, RELEASE).await?;

    // A wrong password: Keystone's 401, naming neither the password nor a token.
    let refused = pass_client(cp, os, &ns, "not-the-password-4711").await?;
    let err = refused.aggregates().await.expect_err("refused");
    let text = err.to_string();
    ensure!(
        text.starts_with("POST /v3/auth/tokens: HTTP 401: "),
        "{text}"
    );
    ensure!(!text.contains("not-the-password-4711"), "{text}");
    ensure!(
        refused.compute_services().await.expect_err("kept") == err,
        "the failed login is kept for the pass"
    );

    let t = Instant::now();
    let client = pass_client(cp, os, &ns, os.nova_password()).await?;

    // Aggregates: create (zoned and not), 409 on a second create, mark, list, delete.
    let zone = format!("zone-{ns}");
    let zoned = client
        .create_aggregate(&zone, Some(&zone))
        .await?
        .context("a new name is created")?;
    ensure!(zoned.availability_zone == zone, "{zoned:?}");
    ensure!(
        client.create_aggregate(&zone, Some(&zone)).await?.is_none(),
        "a second create of the name answers 409"
    );
    let plain = client
        .create_aggregate("tenant_filter_tests", None)
        .await?
        .context("created")?;
    ensure!(plain.availability_zone.is_empty(), "{plain:?}");
    client
        .set_aggregate_metadata(zoned.id, "c5c3.io:nova", &format!("{ns}/nova"))
        .await?;
    let listed = client.aggregates().await?;
    let marked = listed.iter().find(|a| a.id == zoned.id).context("listed")?;
    ensure!(
        marked.metadata.get("c5c3.io:nova") == Some(&format!("{ns}/nova"))
            && marked.metadata.get("availability_zone") == Some(&zone),
        "{marked:?}"
    );
    client.delete_aggregate(zoned.id).await?;
    client.delete_aggregate(zoned.id).await?; // 404 counts as deleted
    client.delete_aggregate(plain.id).await?;
    ensure!(
        client.aggregates().await?.is_empty(),
        "both aggregates are gone"
    );
    let unknown = client
        .set_aggregate_metadata(zoned.id, "k", "v")
        .await
        .expect_err("no such aggregate")
        .to_string();
    ensure!(
        unknown.starts_with(&format!(
            "POST /v2.1/os-aggregates/{}/action: HTTP 404: ",
            zoned.id
        )),
        "{unknown}"
    );
    ensure!(!unknown.contains("gAAAA"), "a Fernet token in {unknown}");

    // Traits: create, exist, 409 while a resource provider carries it, delete, gone.
    let name = format!(
        "CUSTOM_OSCLIENT_{}",
        ns.rsplit('-').next().unwrap_or("X").to_uppercase()
    );
    ensure!(client.ensure_trait(&name).await? == TraitEnsured::Created);
    ensure!(client.ensure_trait(&name).await? == TraitEnsured::Existed);
    let placement = os.endpoint(PLACEMENT, Ports::PLACEMENT).await?;
    let admin = os.admin_token().await?;
    let headers = [
        ("X-Auth-Token", admin.as_str()),
        ("OpenStack-API-Version", "placement 1.20"),
    ];
    let rp = http::request(
        placement,
        "POST",
        "/resource_providers",
        &headers,
        Some(&json!({ "name": format!("rp-{ns}") })),
    )
    .await?;
    ensure!(
        rp.status == 200,
        "creating a resource provider: {}",
        rp.status
    );
    let rp = rp.json()?;
    let uuid = rp["uuid"].as_str().context("uuid")?.to_owned();
    let associated = http::request(
        placement,
        "PUT",
        &format!("/resource_providers/{uuid}/traits"),
        &headers,
        Some(&json!({ "resource_provider_generation": rp["generation"], "traits": [name] })),
    )
    .await?;
    ensure!(
        associated.status == 200,
        "associating: {}",
        associated.status
    );
    ensure!(client.delete_trait(&name).await? == TraitDeletion::InUse);
    let removed = http::request(
        placement,
        "DELETE",
        &format!("/resource_providers/{uuid}"),
        &headers,
        None,
    )
    .await?;
    ensure!(
        removed.status == 204,
        "deleting the provider: {}",
        removed.status
    );
    ensure!(client.delete_trait(&name).await? == TraitDeletion::Deleted);
    ensure!(
        client.delete_trait(&name).await? == TraitDeletion::Deleted,
        "404 counts as deleted"
    );
    ensure!(
        matches!(
            client.ensure_trait("HW_CPU_X86_AVX").await,
            Err(OpenStackError::Status { status: 400, .. })
        ),
        "a standard trait is not a custom one"
    );
    eprintln!(
        "aggregates and traits against the real Nova and Placement in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    // Services: a fake-driver compute registers, is unmapped until discovery, then disabled,
    // counted and deleted once its pod is gone.
    let t = Instant::now();
    start_conductor_and_compute(&kube, &ns, RELEASE).await?;
    let service = eventually("the compute service registering", || async {
        let client = pass_client(cp, os, &ns, os.nova_password()).await?;
        Ok(client
            .compute_services()
            .await?
            .into_iter()
            .find(|s| s.host == HOST && s.state == "up"))
    })
    .await?;
    ensure!(
        service.status == "enabled" && service.id.len() == 36,
        "{service:?}"
    );
    ensure!(
        !client.mapped_hosts().await?.contains(HOST),
        "an undiscovered host is not listed"
    );
    discover_hosts(&kube, &ns).await?;
    ensure!(client.mapped_hosts().await?.contains(HOST), "discovered");
    ensure!(client.count_servers(HOST).await? == 0);
    let reason = format!("c5c3.io: leaving NovaCompute {ns}/pool");
    client.disable_service(&service.id, &reason).await?;
    let disabled = client
        .compute_services()
        .await?
        .into_iter()
        .find(|s| s.host == HOST)
        .context("still listed")?;
    ensure!(
        disabled.status == "disabled" && disabled.disabled_reason == reason,
        "{disabled:?}"
    );
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(kube.clone(), &ns);
    deployments
        .delete("nova-compute", &kube::api::DeleteParams::foreground())
        .await?;
    ensure!(client.delete_service(&service.id).await? == ServiceDeletion::Deleted);
    ensure!(
        client.delete_service(&service.id).await? == ServiceDeletion::Deleted,
        "404 counts as deleted"
    );
    ensure!(
        !client
            .compute_services()
            .await?
            .iter()
            .any(|s| s.host == HOST),
        "the service is gone"
    );
    ensure!(
        !client.mapped_hosts().await?.contains(HOST),
        "its host mapping went with it"
    );
    eprintln!(
        "the compute service registered, mapped, disabled and deleted in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}
