//! The proofs of issue 10, on the real node against the real OpenStack: a Job in the nova image
//! runs the real `nova-manage` database sequence and reports through `/dev/termination-log`; a
//! nova-api pod started from a hand-written template (the operator's layout: config directory,
//! environment overrides, uWSGI) answers `GET /` through its ClusterIP Service; and a nova-compute
//! pod with the fake driver registers as a service the compute API lists with a Keystone token.
//! All three run in one namespace, in order, because each builds on the one before.

use std::time::Instant;

use anyhow::{Context, Result, ensure};
use kube::api::Api;
use nova_test_harness::images::{TOOLS_IMAGE, nova_image};
use nova_test_harness::openstack::nova::{
    TIMEOUT, api_address, db_sync, names, setup, start_api, start_conductor_and_compute,
};
use nova_test_harness::openstack::{self, write_secret};
use nova_test_harness::{http, shared_real_node};
use nova_testkit::real::probe_job;
use nova_testkit::wait::Wait;
use serde_json::{Value, json};

const RELEASE: &str = "2026.1";

#[tokio::test]
async fn nova_runs_for_real_from_hand_written_templates() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let cp = shared_real_node().await?;
    let t0 = Instant::now();
    let os = openstack::shared(cp, RELEASE).await?;
    eprintln!(
        "OpenStack {RELEASE} deployed in {:.1}s (ready {:.1}s after this test asked)",
        os.deployed_in.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    let client = cp.client()?;
    let ns = cp.namespace("proof").await?;
    setup(os, &client, &ns).await?;

    // Proof 1: the real nova-manage sequence in a Job, reported through the termination log.
    let t = Instant::now();
    let sync = db_sync(&client, &ns, RELEASE).await?;
    ensure!(sync.exit_code == 0, "db-sync failed: {sync:?}");
    let cells: Vec<&str> = sync.message.lines().collect();
    ensure!(
        cells.first() == Some(&"cell0=00000000-0000-0000-0000-000000000000"),
        "{cells:?}"
    );
    ensure!(
        cells
            .iter()
            .any(|c| c.starts_with("cell1=") && c.len() == "cell1=".len() + 36),
        "{cells:?}"
    );
    eprintln!(
        "proof 1: db-sync Job reported {cells:?} after {:.1}s",
        t.elapsed().as_secs_f64()
    );

    // Proof 2: nova-api under uWSGI, as the operator launches it, answers GET / via its Service.
    let t = Instant::now();
    start_api(&client, &ns, RELEASE).await?;
    let root = probe_job(
        &client,
        &ns,
        "proof-get-root",
        TOOLS_IMAGE,
        &format!(
            "curl -sf --max-time 10 http://nova-api.{ns}.svc:8774/ | head -c 2000 > /dev/termination-log"
        ),
        json!([]),
    )
    .await;
    let versions: Value = serde_json::from_str(&root).context("GET / is not JSON")?;
    let ids: Vec<&str> = versions["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["id"].as_str())
        .collect();
    ensure!(ids.contains(&"v2.1"), "{versions}");
    eprintln!(
        "proof 2: nova-api answered GET / through its Service ({ids:?}) after {:.1}s",
        t.elapsed().as_secs_f64()
    );

    // Proof 3: a nova-compute with the fake driver registers; the compute API lists it.
    let t = Instant::now();
    start_conductor_and_compute(&client, &ns, RELEASE).await?;
    let api_addr = api_address(&client, &ns).await?;
    let token = os.admin_token().await?;
    let host = names(&ns).host;
    let compute_service = Wait::new("nova-compute to register", TIMEOUT)
        .until(|| async {
            let r = http::request(
                api_addr,
                "GET",
                "/v2.1/os-services?binary=nova-compute",
                &[
                    ("X-Auth-Token", &token),
                    ("OpenStack-API-Version", "compute 2.69"),
                ],
                None,
            )
            .await?;
            ensure!(
                r.status == 200,
                "GET /os-services answered {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            );
            let body = r.json()?;
            Ok(body["services"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["host"] == host.as_str() && s["state"] == "up")
                .cloned())
        })
        .await?;
    eprintln!(
        "proof 3: nova-compute registered ({compute_service}) after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The simulated infrastructure operators have real effects: a Database/User/Grant triple makes
/// a schema the user can really write to, a RabbitmqCluster gets a real broker of its own in its
/// namespace, which its default-user Secret logs in to, and a SecretStore is reported Ready.
#[tokio::test]
async fn the_simulated_operators_have_real_effects() -> Result<()> {
    let _timed = nova_testkit::stack::timed().await;
    let (cp, os) = nova_testkit::stack::openstack().await;
    let client = cp.client()?;
    let ns = cp.namespace("simulated").await?;
    os.expose_in(&client, &ns).await?;
    let password = openstack::random_password()?;
    write_secret(&client, &ns, "sim-db-password", &[("password", &password)]).await?;
    let mariadb_ref = json!({ "name": openstack::MARIADB });
    let objects = [
        (
            "k8s.mariadb.com/v1alpha1",
            "Database",
            "databases",
            "sim-db",
            json!({ "mariaDbRef": mariadb_ref, "name": "simdb" }),
        ),
        (
            "k8s.mariadb.com/v1alpha1",
            "User",
            "users",
            "sim-user",
            json!({ "mariaDbRef": mariadb_ref, "name": "simuser", "host": "%",
            "passwordSecretKeyRef": { "name": "sim-db-password", "key": "password" } }),
        ),
        (
            "k8s.mariadb.com/v1alpha1",
            "Grant",
            "grants",
            "sim-grant",
            json!({ "mariaDbRef": mariadb_ref, "privileges": ["ALL PRIVILEGES"],
            "database": "simdb", "table": "*", "username": "simuser", "host": "%" }),
        ),
        (
            "rabbitmq.com/v1beta1",
            "RabbitmqCluster",
            "rabbitmqclusters",
            openstack::RABBITMQ,
            json!({}),
        ),
        (
            "external-secrets.io/v1",
            "SecretStore",
            "secretstores",
            "sim-store",
            json!({ "provider": { "fake": { "data": [] } } }),
        ),
    ];
    for (api_version, kind, plural, name, spec) in &objects {
        let (group, version) = api_version.split_once('/').context("group/version")?;
        let ar = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(group, version, kind),
            plural,
        );
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let object: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind, "metadata": { "name": name }, "spec": spec
        }))?;
        api.create(&kube::api::PostParams::default(), &object)
            .await?;
    }
    for (api_version, kind, plural, name, _) in &objects {
        let (group, version) = api_version.split_once('/').context("group/version")?;
        let ar = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(group, version, kind),
            plural,
        );
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        Wait::new(format!("{kind} {name} to become Ready"), TIMEOUT)
            .until(|| async {
                let o = api.get(name).await?;
                Ok(o.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    .then_some(()))
            })
            .await?;
    }
    // The user really owns the schema.
    probe_job(
        &client,
        &ns,
        "sim-check",
        nova_test_harness::images::MARIADB_IMAGE,
        &format!(
            "mariadb -h {}.{ns}.svc -u simuser -D simdb -e 'CREATE TABLE t (i INT); SELECT COUNT(*) FROM t'",
            openstack::MARIADB
        ),
        json!([{ "name": "MYSQL_PWD", "valueFrom": { "secretKeyRef": { "name": "sim-db-password", "key": "password" } } }]),
    )
    .await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let default_user = format!("{}-default-user", openstack::RABBITMQ);
    let data = secrets.get(&default_user).await?.data.unwrap_or_default();
    let host = data
        .get("host")
        .map(|b| String::from_utf8_lossy(&b.0).into_owned());
    ensure!(
        host.as_deref() == Some(&format!("{}.{ns}.svc", openstack::RABBITMQ)),
        "{host:?}"
    );
    // The broker is the namespace's own, and the default user logs in to it (kombu, as nova).
    let broker: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), &ns);
    ensure!(
        broker.get_opt(openstack::RABBITMQ).await?.is_some(),
        "no broker Deployment in {ns}"
    );
    let from = |var: &str, key: &str| json!({ "name": var, "valueFrom": { "secretKeyRef": { "name": default_user, "key": key } } });
    probe_job(
        &client,
        &ns,
        "sim-broker-check",
        &nova_image(RELEASE),
        "python3 -c \"import os, kombu; e = os.environ; \
         c = kombu.Connection(hostname=e['H'], port=int(e['P']), userid=e['U'], password=e['W'], virtual_host='/'); \
         c.connect(); c.release()\"",
        json!([from("H", "host"), from("P", "port"), from("U", "username"), from("W", "password")]),
    )
    .await;
    Ok(())
}
