//! The proofs of issue 10, on the real node against the real OpenStack: a Job in the nova image
//! runs the real `nova-manage` database sequence and reports through `/dev/termination-log`; a
//! nova-api pod started from a hand-written template (the operator's layout: config directory,
//! environment overrides, uWSGI) answers `GET /` through its ClusterIP Service; and a nova-compute
//! pod with the fake driver registers as a service the compute API lists with a Keystone token.
//! All three run in one namespace, in order, because each builds on the one before.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use nova_test_harness::images::{TOOLS_IMAGE, nova_compute_image, nova_image};
use nova_test_harness::openstack::{self, OpenStack, write_secret};
use nova_test_harness::{http, pods, shared_real_node};
use serde_json::{Value, json};

const RELEASE: &str = "2026.1";
const TIMEOUT: Duration = Duration::from_secs(180);

/// nova.conf as the operator renders it for these tests: credentials arrive as environment
/// overrides, the database URLs are placeholders until they do.
fn nova_conf(ns: &str) -> String {
    let ks = format!("http://keystone.{ns}.svc:5000/v3");
    format!(
        "[DEFAULT]\nuse_stderr = true\nstate_path = /var/lib/nova\nreport_interval = 2\nservice_down_time = 10\n\
         rpc_response_timeout = 10\ngraceful_shutdown_timeout = 5\nheal_instance_info_cache_interval = -1\n\n\
         [api_database]\nconnection = mysql+pymysql://placeholder\n\n[database]\nconnection = mysql+pymysql://placeholder\n\n\
         [api]\nauth_strategy = keystone\n\n\
         [keystone_authtoken]\nwww_authenticate_uri = {ks}\nauth_url = {ks}\nauth_type = password\n\
         project_domain_name = Default\nuser_domain_name = Default\nproject_name = service\nusername = nova\n\n\
         [placement]\nauth_url = {ks}\nauth_type = password\nproject_domain_name = Default\nuser_domain_name = Default\n\
         project_name = service\nusername = nova\nregion_name = RegionOne\n\n\
         [scheduler]\ndiscover_hosts_in_cells_interval = -1\n\n[oslo_concurrency]\nlock_path = /var/lib/nova/tmp\n\n\
         [vnc]\nenabled = false\n"
    )
}

/// The credential environment every role carries (names from the operator's contract).
fn credential_env() -> Value {
    let from = |var: &str, secret: &str, key: &str| json!({ "name": var, "valueFrom": { "secretKeyRef": { "name": secret, "key": key } } });
    json!([
        from(
            "OS_DEFAULT__TRANSPORT_URL",
            "proof-transport-url",
            "transport_url"
        ),
        from(
            "OS_DATABASE__CONNECTION",
            "proof-db-connection",
            "connection"
        ),
        from(
            "OS_API_DATABASE__CONNECTION",
            "proof-api-db-connection",
            "connection"
        ),
        from(
            "OS_KEYSTONE_AUTHTOKEN__PASSWORD",
            "proof-service-user",
            "password"
        ),
        from("OS_PLACEMENT__PASSWORD", "proof-service-user", "password")
    ])
}

/// A pod spec of the nova image as user nova with the config directory mounted read-only.
fn nova_pod(
    image: &str,
    name: &str,
    command: Value,
    extra_env: Value,
    extra_mounts: Value,
    extra_volumes: Value,
) -> Value {
    let mut env = credential_env();
    if let (Some(env), Some(extra)) = (env.as_array_mut(), extra_env.as_array()) {
        env.extend(extra.iter().cloned());
    }
    let mut mounts = vec![
        json!({ "name": "config", "mountPath": "/etc/nova/nova.conf.d", "readOnly": true }),
        json!({ "name": "state", "mountPath": "/var/lib/nova" }),
        json!({ "name": "tmp", "mountPath": "/tmp" }),
    ];
    mounts.extend(extra_mounts.as_array().cloned().unwrap_or_default());
    let mut volumes = vec![
        json!({ "name": "config", "configMap": { "name": "proof-config", "items": [{ "key": "nova.conf", "path": "nova.conf" }] } }),
        json!({ "name": "state", "emptyDir": {} }),
        json!({ "name": "tmp", "emptyDir": {} }),
    ];
    volumes.extend(extra_volumes.as_array().cloned().unwrap_or_default());
    json!({
        "terminationGracePeriodSeconds": 5,
        "securityContext": { "runAsUser": 42424, "runAsGroup": 42424, "fsGroup": 42424 },
        "containers": [{
            "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "command": command, "env": env, "volumeMounts": mounts
        }],
        "volumes": volumes
    })
}

fn deployment(ns: &str, name: &str, pod: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "namespace": ns },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": { "metadata": { "labels": { "app": name } }, "spec": pod }
        }
    })
}

/// The cell-mapping sequence of the operator's db-sync Job, ending with the `<name>=<uuid>`
/// report on the termination log.
const DB_SYNC: &str = "set -e
nova-manage api_db sync
nova-manage cell_v2 map_cell0 --database_connection '{scheme}://{username}:{password}@{hostname}:{port}/nova_cell0?{query}'
cells=$(nova-manage cell_v2 list_cells)
if ! printf '%s\\n' \"$cells\" | awk -F'|' '{gsub(/ /,\"\",$2)} $2==\"cell1\" {found=1} END {exit !found}'; then
  nova-manage cell_v2 create_cell --name cell1 \\
    --transport-url '{scheme}://{username}:{password}@{hostname}:{port}/{path}?{query}' \\
    --database_connection '{scheme}://{username}:{password}@{hostname}:{port}/nova_cell1?{query}'
fi
nova-manage db sync
cells=$(nova-manage cell_v2 list_cells)
printf '%s\\n' \"$cells\" | awk -F'|' 'NF > 3 {gsub(/ /,\"\",$2); gsub(/ /,\"\",$3); if ($2 != \"\" && $2 != \"Name\") print $2 \"=\" $3}' > /dev/termination-log
";

/// Server-side applies each object through the harness (Secret, ConfigMap, Service,
/// Deployment, Job).
async fn apply_all(client: &kube::Client, objects: &[Value]) -> Result<()> {
    for o in objects {
        openstack::apply(client, o).await?;
    }
    Ok(())
}

async fn pod_of(client: &kube::Client, ns: &str, app: &str) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await?
        .items
        .into_iter()
        .next()
        .with_context(|| format!("no pod of {app}"))
}

async fn setup(os: &OpenStack, client: &kube::Client, ns: &str) -> Result<()> {
    os.expose_in(client, ns).await?;
    let db_password = openstack::random_password()?;
    os.create_databases(
        &format!("proof-{ns}"),
        &["nova_api", "nova_cell0", "nova_cell1"],
        "nova",
        &db_password,
    )
    .await?;
    let dsn = |db: &str| {
        format!(
            "mysql+pymysql://nova:{db_password}@openstack-mariadb.{ns}.svc:3306/{db}?charset=utf8"
        )
    };
    write_secret(
        client,
        ns,
        "proof-api-db-connection",
        &[("connection", &dsn("nova_api"))],
    )
    .await?;
    write_secret(
        client,
        ns,
        "proof-db-connection",
        &[("connection", &dsn("nova_cell1"))],
    )
    .await?;
    write_secret(
        client,
        ns,
        "proof-transport-url",
        &[("transport_url", &os.transport_url(ns))],
    )
    .await?;
    os.write_service_user_secret(client, ns, "proof-service-user")
        .await?;
    let compute_conf = "[DEFAULT]\nhost = proof-compute-0\ncompute_driver = fake.FakeDriverWithoutFakeNodes\n\
                        manager_shutdown_timeout = 1\n";
    apply_all(
        client,
        &[json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "proof-config", "namespace": ns },
            "data": { "nova.conf": nova_conf(ns), "compute.conf": compute_conf }
        })],
    )
    .await
}

#[tokio::test]
async fn nova_runs_for_real_from_hand_written_templates() -> Result<()> {
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
    let mut sync_pod = nova_pod(
        &nova_image(RELEASE),
        "db-sync",
        json!(["sh", "-c", DB_SYNC]),
        json!([]),
        json!([]),
        json!([]),
    );
    sync_pod["restartPolicy"] = json!("Never");
    apply_all(
        &client,
        &[json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": "proof-db-sync", "namespace": ns },
            "spec": { "backoffLimit": 0, "template": { "spec": sync_pod } }
        })],
    )
    .await?;
    let sync =
        pods::wait_for_job_termination(&client, &ns, "proof-db-sync", "db-sync", TIMEOUT).await?;
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
    let api_env = json!([
        { "name": "OS_NOVA_CONFIG_DIR", "value": "/etc/nova/nova.conf.d" },
        { "name": "OS_NOVA_CONFIG_FILES", "value": "/var/lib/openstack/etc/nova/api-paste.ini;nova.conf" }
    ]);
    let mut api_pod = nova_pod(
        &nova_image(RELEASE),
        "nova-api",
        json!([
            "uwsgi",
            "--http-socket",
            "0.0.0.0:8774",
            "--module",
            "nova.wsgi.osapi_compute:application",
            "--master",
            "--processes",
            "2",
            "--threads",
            "1",
            "--need-app",
            "--die-on-term"
        ]),
        api_env,
        json!([]),
        json!([]),
    );
    api_pod["containers"][0]["readinessProbe"] =
        json!({ "httpGet": { "path": "/", "port": 8774 }, "periodSeconds": 1 });
    apply_all(
        &client,
        &[
            deployment(&ns, "nova-api", api_pod),
            json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "nova-api", "namespace": ns },
                    "spec": { "selector": { "app": "nova-api" }, "ports": [{ "port": 8774, "targetPort": 8774 }] } }),
        ],
    )
    .await?;
    openstack::wait_available(&client, &ns, "nova-api", TIMEOUT).await?;
    apply_all(
        &client,
        &[json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": "proof-get-root", "namespace": ns },
            "spec": { "backoffLimit": 0, "template": { "spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [{ "name": "curl", "image": TOOLS_IMAGE, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", format!(
                        "curl -sf --max-time 10 http://nova-api.{ns}.svc:8774/ | head -c 2000 > /dev/termination-log")] }]
            }}}
        })],
    )
    .await?;
    let root =
        pods::wait_for_job_termination(&client, &ns, "proof-get-root", "curl", TIMEOUT).await?;
    ensure!(root.exit_code == 0, "GET / failed: {root:?}");
    let versions: Value = serde_json::from_str(&root.message).context("GET / is not JSON")?;
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
    let conductor = nova_pod(
        &nova_image(RELEASE),
        "nova-conductor",
        json!(["nova-conductor", "--config-dir", "/etc/nova/nova.conf.d"]),
        json!([]),
        json!([]),
        json!([]),
    );
    let compute = nova_pod(
        &nova_compute_image(RELEASE),
        "nova-compute",
        json!([
            "nova-compute",
            "--config-dir",
            "/etc/nova/nova.conf.d",
            "--config-dir",
            "/etc/nova/compute.conf.d"
        ]),
        json!([]),
        json!([{ "name": "compute-config", "mountPath": "/etc/nova/compute.conf.d", "readOnly": true }]),
        json!([{ "name": "compute-config", "configMap": { "name": "proof-config", "items": [{ "key": "compute.conf", "path": "compute.conf" }] } }]),
    );
    apply_all(
        &client,
        &[
            deployment(&ns, "nova-conductor", conductor),
            deployment(&ns, "nova-compute", compute),
        ],
    )
    .await?;
    let api = pod_of(&client, &ns, "nova-api").await?;
    let api_ip = api
        .status
        .and_then(|s| s.pod_ip)
        .context("nova-api has no IP")?;
    let api_addr = format!("{api_ip}:8774").parse()?;
    let token = os.admin_token().await?;
    let deadline = Instant::now() + TIMEOUT;
    let compute_service = loop {
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
        if let Some(s) = body["services"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["host"] == "proof-compute-0" && s["state"] == "up")
        {
            break s.clone();
        }
        ensure!(
            Instant::now() < deadline,
            "nova-compute never registered: {body}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "proof 3: nova-compute registered ({compute_service}) after {:.1}s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The simulated infrastructure operators have real effects: a Database/User/Grant triple makes
/// a schema the user can really write to, a RabbitmqCluster gets its default-user Secret for the
/// real broker, and a SecretStore is reported Ready.
#[tokio::test]
async fn the_simulated_operators_have_real_effects() -> Result<()> {
    let cp = shared_real_node().await?;
    let os = openstack::shared(cp, RELEASE).await?;
    let _operators = nova_test_harness::simulated::start(os)?;
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
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let o = api.get(name).await?;
            let conditions = o.data["status"]["conditions"].clone();
            if conditions
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
            {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "{kind} {name} never became Ready: {conditions}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    // The user really owns the schema.
    apply_all(
        &client,
        &[json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": "sim-check", "namespace": ns },
            "spec": { "backoffLimit": 0, "template": { "spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [{ "name": "sql", "image": nova_test_harness::images::MARIADB_IMAGE, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", format!("mariadb -h {}.{ns}.svc -u simuser -D simdb -e 'CREATE TABLE t (i INT); SELECT COUNT(*) FROM t'", openstack::MARIADB)],
                    "env": [{ "name": "MYSQL_PWD", "valueFrom": { "secretKeyRef": { "name": "sim-db-password", "key": "password" } } }] }]
            }}}
        })],
    )
    .await?;
    let check = pods::wait_for_job_termination(&client, &ns, "sim-check", "sql", TIMEOUT).await?;
    ensure!(
        check.exit_code == 0,
        "the simulated user cannot use its schema: {check:?}"
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    let default_user = secrets
        .get(&format!("{}-default-user", openstack::RABBITMQ))
        .await?;
    let data = default_user.data.unwrap_or_default();
    let host = data
        .get("host")
        .map(|b| String::from_utf8_lossy(&b.0).into_owned());
    ensure!(
        host.as_deref() == Some(&format!("{}.{ns}.svc", openstack::RABBITMQ)),
        "{host:?}"
    );
    Ok(())
}
