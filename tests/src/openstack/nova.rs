//! A Nova control plane from hand-written templates in the operator's layout (config directory,
//! environment overrides, uWSGI), for suites that need the real compute API without the
//! operator: the db-sync Job, nova-api behind a Service, and the pod specs to run more roles.
//!
//! Its objects have fixed `proof-*` names, so one namespace holds one; what it has outside the
//! namespace is named after it (its schemas, database user and compute host, see [`names`]) and
//! its broker runs in it, so proofs in several namespaces run side by side on the shared MariaDB
//! and Placement.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::{OpenStack, RABBITMQ, apply, random_password, wait_available, write_secret};
use crate::control_plane::invalid;
use crate::images::{nova_compute_image, nova_image};
use crate::pods::{self, Termination};
use crate::{Result, kube_err};

/// How long each role may take to start.
pub const TIMEOUT: Duration = Duration::from_secs(180);
/// How long the db-sync Job may take: 60-130 s alone on the 2-core machine, over 180 s with the
/// real tier's other tests running their own beside it (the operator's phases have the same
/// bound, `nova_testkit::real::REAL_TIMEOUT`).
pub const DB_SYNC_TIMEOUT: Duration = Duration::from_secs(420);
/// The compute API port.
pub const NOVA_API_PORT: u16 = 8774;

/// nova.conf as the operator renders it for these tests: credentials arrive as environment
/// overrides, the database URLs are placeholders until they do. The broker options are the
/// operator's too (quorum queues): the real tier's broker is shared by the run, and an exchange
/// the operator's Novas declared durable refuses a non-durable declaration (406).
pub fn nova_conf(ns: &str) -> String {
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
         [vnc]\nenabled = false\n\n\
         [oslo_messaging_rabbit]\nrabbit_quorum_queue = true\nrabbit_transient_quorum_queue = true\n\
         use_queue_manager = true\n"
    )
}

/// The credential environment every role carries (names from the operator's contract).
pub fn credential_env() -> Value {
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
pub fn nova_pod(
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

/// A one-replica Deployment of `pod`.
pub fn deployment(ns: &str, name: &str, pod: Value) -> Value {
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
/// report on the termination log, for the proof Nova's schemas in `ns`.
fn db_sync_script(ns: &str) -> String {
    let names = names(ns);
    DB_SYNC
        .replace("/nova_cell0?", &format!("/{}?", names.cell0))
        .replace("/nova_cell1?", &format!("/{}?", names.cell1))
}

/// [`db_sync_script`] for schemas `nova_cell0` and `nova_cell1`.
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

/// Server-side applies each object through the harness.
pub async fn apply_all(client: &kube::Client, objects: &[Value]) -> Result<()> {
    for o in objects {
        apply(client, o).await?;
    }
    Ok(())
}

/// The first pod labelled `app=<app>`.
pub async fn pod_of(client: &kube::Client, ns: &str, app: &str) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map_err(kube_err(format!("listing the pods of {ns}/{app}")))?
        .items
        .into_iter()
        .next()
        .ok_or_else(|| invalid("finding a pod", format!("no pod of {ns}/{app}")))
}

/// What the proof Nova of a namespace has outside it, named after the namespace.
pub struct ProofNames {
    /// The nova_api schema.
    pub api: String,
    /// The cell0 schema.
    pub cell0: String,
    /// The cell1 schema.
    pub cell1: String,
    /// The database user of all three.
    pub user: String,
    /// The fake-driver compute host (its resource provider in Placement, its service in Nova).
    pub host: String,
}

/// The proof Nova's names in `ns`.
pub fn names(ns: &str) -> ProofNames {
    let id = ns.replace('-', "_");
    ProofNames {
        api: format!("proof_{id}_api"),
        cell0: format!("proof_{id}_cell0"),
        cell1: format!("proof_{id}_cell1"),
        user: format!("proof_{id}"),
        host: format!("proof-{ns}"),
    }
}

/// The schemas, the credential Secrets, the broker (Deployment and Service
/// `openstack-rabbitmq`) and the `proof-config` ConfigMap (nova.conf, plus `compute.conf` for
/// the fake-driver compute host) in `ns`.
pub async fn setup(os: &OpenStack, client: &kube::Client, ns: &str) -> Result<()> {
    let names = names(ns);
    os.expose_in(client, ns).await?;
    os.apply_broker_in(client, ns, RABBITMQ).await?;
    let db_password = random_password()?;
    os.create_databases(
        &format!("proof-{ns}"),
        &[&names.api, &names.cell0, &names.cell1],
        &names.user,
        &db_password,
    )
    .await?;
    let dsn = |db: &str| {
        format!(
            "mysql+pymysql://{}:{db_password}@openstack-mariadb.{ns}.svc:3306/{db}?charset=utf8",
            names.user
        )
    };
    write_secret(
        client,
        ns,
        "proof-api-db-connection",
        &[("connection", &dsn(&names.api))],
    )
    .await?;
    write_secret(
        client,
        ns,
        "proof-db-connection",
        &[("connection", &dsn(&names.cell1))],
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
    let compute_conf = format!(
        "[DEFAULT]\nhost = {}\ncompute_driver = fake.FakeDriverWithoutFakeNodes\nmanager_shutdown_timeout = 1\n",
        names.host
    );
    apply_all(
        client,
        &[json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": "proof-config", "namespace": ns },
            "data": { "nova.conf": nova_conf(ns), "compute.conf": compute_conf }
        })],
    )
    .await?;
    wait_available(client, ns, RABBITMQ, TIMEOUT).await
}

/// Runs the db-sync Job `proof-db-sync` and returns how it ended.
pub async fn db_sync(client: &kube::Client, ns: &str, release: &str) -> Result<Termination> {
    let mut sync_pod = nova_pod(
        &nova_image(release),
        "db-sync",
        json!(["sh", "-c", db_sync_script(ns)]),
        json!([]),
        json!([]),
        json!([]),
    );
    sync_pod["restartPolicy"] = json!("Never");
    apply_all(
        client,
        &[json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": "proof-db-sync", "namespace": ns },
            "spec": { "backoffLimit": 0, "template": { "spec": sync_pod } }
        })],
    )
    .await?;
    pods::wait_for_job_termination(client, ns, "proof-db-sync", "db-sync", DB_SYNC_TIMEOUT).await
}

/// Starts nova-api under uWSGI (Deployment and Service `nova-api`, port 8774) and waits until
/// it is available.
pub async fn start_api(client: &kube::Client, ns: &str, release: &str) -> Result<()> {
    let api_env = json!([
        { "name": "OS_NOVA_CONFIG_DIR", "value": "/etc/nova/nova.conf.d" },
        { "name": "OS_NOVA_CONFIG_FILES", "value": "/var/lib/openstack/etc/nova/api-paste.ini;nova.conf" }
    ]);
    let mut api_pod = nova_pod(
        &nova_image(release),
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
        json!({ "httpGet": { "path": "/", "port": NOVA_API_PORT }, "periodSeconds": 1 });
    apply_all(
        client,
        &[
            deployment(ns, "nova-api", api_pod),
            json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "nova-api", "namespace": ns },
                    "spec": { "selector": { "app": "nova-api" }, "ports": [{ "port": NOVA_API_PORT, "targetPort": NOVA_API_PORT }] } }),
        ],
    )
    .await?;
    wait_available(client, ns, "nova-api", TIMEOUT).await
}

/// Starts nova-conductor and a nova-compute with the fake driver registering as the host of
/// [`names`] (Deployments `nova-conductor`, `nova-compute`), without waiting.
pub async fn start_conductor_and_compute(
    client: &kube::Client,
    ns: &str,
    release: &str,
) -> Result<()> {
    let conductor = nova_pod(
        &nova_image(release),
        "nova-conductor",
        json!(["nova-conductor", "--config-dir", "/etc/nova/nova.conf.d"]),
        json!([]),
        json!([]),
        json!([]),
    );
    let compute = nova_pod(
        &nova_compute_image(release),
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
        client,
        &[
            deployment(ns, "nova-conductor", conductor),
            deployment(ns, "nova-compute", compute),
        ],
    )
    .await
}

/// The address of the nova-api pod, reachable from the test process over the bridge.
pub async fn api_address(client: &kube::Client, ns: &str) -> Result<SocketAddr> {
    let api = pod_of(client, ns, "nova-api").await?;
    let ip = api
        .status
        .and_then(|s| s.pod_ip)
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| invalid("finding nova-api", format!("{ns}/nova-api has no pod IP")))?;
    Ok(SocketAddr::new(ip, NOVA_API_PORT))
}
