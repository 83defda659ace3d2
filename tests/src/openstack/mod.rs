//! A real OpenStack in the real-node cluster: MariaDB, RabbitMQ, memcached, Keystone and
//! Placement as ordinary Deployments and Services in namespace [`NAMESPACE`], deployed once per
//! control plane and shared by the tests of a binary.
//!
//! ```no_run
//! # async fn t() -> Result<(), nova_test_harness::Error> {
//! let cp = nova_test_harness::shared_real_node().await?;
//! let os = nova_test_harness::openstack::shared(cp, "2026.1").await?;
//! let ns = cp.namespace("my-test").await?;
//! os.expose_in(&cp.client()?, &ns).await?;      // openstack-mariadb.<ns>.svc etc. resolve
//! let token = os.admin_token().await?;          // a Keystone token, for the compute API
//! # Ok(()) }
//! ```

mod manifests;
pub mod nova;
mod stub;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

pub use manifests::{
    KEYSTONE, MARIADB, MEMCACHED, NAMESPACE, PLACEMENT, RABBITMQ, keystone_tls_url, keystone_url,
    placement_tls_url, service_url,
};
pub use stub::{GLANCE_PORT, NEUTRON_PORT, STUB};

use crate::control_plane::{ControlPlane, invalid};
use crate::{Error, Result, http, io_err, kube_err};

/// The field manager of everything the harness applies.
pub(crate) const MANAGER: &str = "nova-test-harness";
/// The broker's user (vhost `/`).
pub const RABBITMQ_USER: &str = "openstack";

/// The service ports.
pub struct Ports;
impl Ports {
    pub const MARIADB: u16 = 3306;
    pub const RABBITMQ: u16 = 5672;
    pub const MEMCACHED: u16 = 11211;
    pub const KEYSTONE: u16 = 5000;
    pub const PLACEMENT: u16 = 8778;
    /// Keystone's https listener.
    pub const KEYSTONE_TLS: u16 = 5443;
    /// Placement's https listener.
    pub const PLACEMENT_TLS: u16 = 8443;
}

/// The deployment's generated passwords. Never printed: `Debug` shows no value.
#[derive(Clone)]
pub(crate) struct Passwords {
    pub mariadb_root: String,
    pub rabbitmq: String,
    pub admin: String,
    pub keystone_db: String,
    pub placement_db: String,
    pub placement_user: String,
    pub nova_user: String,
}

impl std::fmt::Debug for Passwords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passwords(..)")
    }
}

impl Passwords {
    fn generate() -> Result<Self> {
        Ok(Self {
            mariadb_root: random_password()?,
            rabbitmq: random_password()?,
            admin: random_password()?,
            keystone_db: random_password()?,
            placement_db: random_password()?,
            placement_user: random_password()?,
            nova_user: random_password()?,
        })
    }

    #[cfg(test)]
    pub(crate) fn planted(value: &str) -> Self {
        let v = || value.to_owned();
        Self {
            mariadb_root: v(),
            rabbitmq: v(),
            admin: v(),
            keystone_db: v(),
            placement_db: v(),
            placement_user: v(),
            nova_user: v(),
        }
    }
}

/// 24 random hex characters from the kernel's generator.
pub fn random_password() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 12];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_err("reading /dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A deployed OpenStack.
#[derive(Clone, Debug)]
pub struct OpenStack {
    release: String,
    passwords: Passwords,
    tls: manifests::Tls,
    config: kube::Config,
    /// How long the deployment took until Keystone and Placement answered.
    pub deployed_in: Duration,
}

/// The OpenStack of this control plane, deployed on first use at `release` and shared by
/// every test of the binary (a later call with another release fails).
pub async fn shared(cp: &ControlPlane, release: &str) -> Result<&'static OpenStack> {
    static SHARED: OnceCell<std::result::Result<OpenStack, String>> = OnceCell::const_new();
    let os = SHARED
        .get_or_init(|| async {
            OpenStack::deploy(cp, release)
                .await
                .map_err(|e| e.to_string())
        })
        .await
        .as_ref()
        .map_err(|e| Error::SharedStartFailed(e.clone()))?;
    if os.release != release {
        return Err(invalid(
            "sharing the OpenStack deployment",
            format!("it runs {}, not {release}", os.release),
        ));
    }
    Ok(os)
}

impl OpenStack {
    /// Deploys MariaDB, RabbitMQ, memcached, Keystone (bootstrapped: admin, the `service`
    /// project, the `nova` and `placement` service users, the identity and placement catalog
    /// entries) and Placement, and waits until Keystone issues tokens and Placement answers.
    pub async fn deploy(cp: &ControlPlane, release: &str) -> Result<Self> {
        if !cp.has_real_node() {
            return Err(invalid(
                "deploying OpenStack",
                "the control plane has no real node",
            ));
        }
        let started = Instant::now();
        let client = cp.client()?;
        let passwords = Passwords::generate()?;
        let tls = manifests::Tls::generate()?;
        ensure_namespace(&client, NAMESPACE).await?;
        for object in manifests::all(release, &passwords, &tls) {
            apply(&client, &object).await?;
        }
        let config = cp
            .kube_config()
            .cloned()
            .ok_or_else(|| invalid("deploying OpenStack", "no client configuration"))?;
        let os = Self {
            release: release.to_owned(),
            passwords,
            tls,
            config,
            deployed_in: Duration::ZERO,
        };
        let timeout = Duration::from_secs(300);
        for app in [MARIADB, RABBITMQ, MEMCACHED, KEYSTONE] {
            wait_available(&client, NAMESPACE, app, timeout).await?;
        }
        os.register_keystone_basics().await?;
        wait_available(&client, NAMESPACE, PLACEMENT, timeout).await?;
        let placement = os.endpoint(PLACEMENT, Ports::PLACEMENT).await?;
        let root = http::request(placement, "GET", "/", &[], None).await?;
        if root.status != 200 {
            return Err(invalid(
                "checking Placement",
                format!("GET / answered {}", root.status),
            ));
        }
        Ok(Self {
            deployed_in: started.elapsed(),
            ..os
        })
    }

    /// The OpenStack release the services run.
    pub fn release(&self) -> &str {
        &self.release
    }

    /// The PEM CA that issued the https listeners' certificate.
    pub fn tls_ca_pem(&self) -> &str {
        &self.tls.ca_pem
    }

    pub(crate) fn client(&self) -> Result<kube::Client> {
        kube::Client::try_from(self.config.clone()).map_err(kube_err("creating a kube client"))
    }

    /// The address of a ready pod behind a Service of the deployment, reachable from the test
    /// process over the pod bridge.
    pub async fn endpoint(&self, service: &str, port: u16) -> Result<SocketAddr> {
        service_endpoint(&self.client()?, NAMESPACE, service, port).await
    }

    /// A project-scoped token for user `user` in project `project` (domain Default).
    pub async fn token(&self, user: &str, password: &str, project: &str) -> Result<String> {
        let keystone = self.endpoint(KEYSTONE, Ports::KEYSTONE).await?;
        let body = json!({ "auth": {
            "identity": { "methods": ["password"], "password": { "user": {
                "name": user, "domain": { "id": "default" }, "password": password } } },
            "scope": { "project": { "name": project, "domain": { "id": "default" } } }
        }});
        let r = http::request(keystone, "POST", "/v3/auth/tokens", &[], Some(&body)).await?;
        match (r.status, r.header("x-subject-token")) {
            (201, Some(token)) => Ok(token.to_owned()),
            (status, _) => Err(invalid(
                "getting a Keystone token",
                format!("POST /v3/auth/tokens for {user} answered {status}"),
            )),
        }
    }

    /// A token of the bootstrap admin (project `admin`).
    pub async fn admin_token(&self) -> Result<String> {
        self.token("admin", &self.passwords.admin, "admin").await
    }

    /// The admin credentials: user `admin`, its password, project `admin`, domain Default.
    pub fn admin_credentials(&self) -> (&str, &str) {
        ("admin", &self.passwords.admin)
    }

    /// The password of Keystone user `nova` (project `service`, roles admin and service).
    pub fn nova_password(&self) -> &str {
        &self.passwords.nova_user
    }

    /// The MariaDB root credentials (user `root`, any host).
    pub fn mariadb_root_password(&self) -> &str {
        &self.passwords.mariadb_root
    }

    /// The transport URL of the broker named [`RABBITMQ`] in `namespace` as its pods reach it:
    /// the simulated operator's for a `RabbitmqCluster` of that name, or the proof Nova's.
    pub fn transport_url(&self, namespace: &str) -> String {
        format!(
            "rabbit://{RABBITMQ_USER}:{}@{RABBITMQ}.{namespace}.svc:{}/",
            self.passwords.rabbitmq,
            Ports::RABBITMQ
        )
    }

    /// Applies a broker of its own named `name` in `namespace` (Deployment, Service and config
    /// Secret, the shared broker's user and password), without waiting for it.
    pub async fn apply_broker_in(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<()> {
        for object in manifests::broker(namespace, name, &self.passwords.rabbitmq) {
            apply(client, &object).await?;
        }
        Ok(())
    }

    /// The broker user's password.
    pub fn rabbitmq_password(&self) -> &str {
        &self.passwords.rabbitmq
    }

    /// Makes the shared services reachable from `namespace` under the names a Nova CR there
    /// resolves (`openstack-mariadb.<ns>.svc:3306`, `openstack-memcached`, `keystone`,
    /// `placement`): ExternalName Services pointing at the deployment's Services. Not the
    /// broker: a namespace's `RabbitmqCluster` gets its own (`crate::simulated`).
    pub async fn expose_in(&self, client: &kube::Client, namespace: &str) -> Result<()> {
        expose(
            client,
            namespace,
            &[
                (MARIADB, Ports::MARIADB),
                (MEMCACHED, Ports::MEMCACHED),
                (KEYSTONE, Ports::KEYSTONE),
                (PLACEMENT, Ports::PLACEMENT),
            ],
        )
        .await
    }

    /// Writes the Secret holding the `nova` service user's password (key `password`), the one
    /// a Nova's `spec.serviceUser.secretRef` names.
    pub async fn write_service_user_secret(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<()> {
        write_secret(
            client,
            namespace,
            name,
            &[
                ("username", "nova"),
                ("password", &self.passwords.nova_user),
            ],
        )
        .await
    }

    /// Runs SQL statements as MariaDB's root user in a Job (the statements travel in a Secret,
    /// never in the pod spec) and waits for it to succeed.
    pub async fn run_sql(&self, name: &str, statements: &str) -> Result<()> {
        let client = self.client()?;
        let job = format!("sql-{name}");
        write_secret(&client, NAMESPACE, &job, &[("statements.sql", statements)]).await?;
        let host = format!("{MARIADB}.{NAMESPACE}.svc.cluster.local");
        apply(
            &client,
            &json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": { "name": job, "namespace": NAMESPACE },
                "spec": { "backoffLimit": 0, "ttlSecondsAfterFinished": 60, "template": { "spec": {
                    "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "sql", "image": crate::images::MARIADB_IMAGE, "imagePullPolicy": "Never",
                        "command": ["sh", "-c", format!("mariadb -h {host} -P {} -u root < /sql/statements.sql", Ports::MARIADB)],
                        "env": [{ "name": "MYSQL_PWD", "valueFrom": { "secretKeyRef": {
                            "name": "openstack-mariadb-root", "key": "password" } } }],
                        "volumeMounts": [{ "name": "sql", "mountPath": "/sql", "readOnly": true }]
                    }],
                    "volumes": [{ "name": "sql", "secret": { "secretName": job } }]
                }}}
            }),
        )
        .await?;
        let t = crate::pods::wait_for_job_termination(
            &client,
            NAMESPACE,
            &job,
            "sql",
            Duration::from_secs(120),
        )
        .await?;
        let jobs: Api<k8s_openapi::api::batch::v1::Job> =
            Api::namespaced(client.clone(), NAMESPACE);
        let _ = jobs
            .delete(&job, &kube::api::DeleteParams::background())
            .await;
        let secrets: Api<Secret> = Api::namespaced(client, NAMESPACE);
        let _ = secrets.delete(&job, &Default::default()).await;
        if t.exit_code == 0 {
            Ok(())
        } else {
            Err(invalid(
                "running SQL",
                format!("Job {job} exited {} ({})", t.exit_code, t.reason),
            ))
        }
    }

    /// Creates `databases` and a user `user` (any host) with all privileges on them.
    pub async fn create_databases(
        &self,
        name: &str,
        databases: &[&str],
        user: &str,
        password: &str,
    ) -> Result<()> {
        // ALTER as well: the OpenStack is shared by every test of a run, and a user an earlier
        // test created keeps its old password under CREATE ... IF NOT EXISTS alone.
        let mut sql = format!(
            "CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}';\n\
             ALTER USER '{user}'@'%' IDENTIFIED BY '{password}';\n"
        );
        for db in databases {
            sql.push_str(&format!(
                "CREATE DATABASE IF NOT EXISTS `{db}`;\nGRANT ALL PRIVILEGES ON `{db}`.* TO '{user}'@'%';\n"
            ));
        }
        self.run_sql(name, &sql).await
    }

    /// The `service` project, the `service` role, users `nova` and `placement` with roles admin
    /// and service there, and the placement catalog entry, over Keystone's REST API.
    async fn register_keystone_basics(&self) -> Result<()> {
        let keystone = self.endpoint(KEYSTONE, Ports::KEYSTONE).await?;
        let token = retry_until(Duration::from_secs(60), || self.admin_token()).await?;
        let auth = [("X-Auth-Token", token.as_str())];
        let call = |method: &'static str, path: String, body: Value| async move {
            let r = http::request(keystone, method, &path, &auth, Some(&body)).await?;
            if r.status == 409 || (200..300).contains(&r.status) {
                Ok(r)
            } else {
                Err(invalid(
                    "setting up Keystone",
                    format!("{method} {path} answered {}", r.status),
                ))
            }
        };
        let find = |path: String, key: &'static str| async move {
            let r = http::request(keystone, "GET", &path, &auth, None).await?;
            r.json()?[key][0]["id"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| invalid("setting up Keystone", format!("GET {path} found nothing")))
        };
        call(
            "POST",
            "/v3/projects".into(),
            json!({ "project": { "name": "service", "domain_id": "default" } }),
        )
        .await?;
        call(
            "POST",
            "/v3/roles".into(),
            json!({ "role": { "name": "service" } }),
        )
        .await?;
        let project = find("/v3/projects?name=service".into(), "projects").await?;
        let roles = [
            find("/v3/roles?name=admin".into(), "roles").await?,
            find("/v3/roles?name=service".into(), "roles").await?,
        ];
        for (user, password) in [
            ("nova", &self.passwords.nova_user),
            ("placement", &self.passwords.placement_user),
        ] {
            call(
                "POST",
                "/v3/users".into(),
                json!({ "user": { "name": user, "domain_id": "default", "password": password } }),
            )
            .await?;
            let id = find(format!("/v3/users?name={user}"), "users").await?;
            for role in &roles {
                call(
                    "PUT",
                    format!("/v3/projects/{project}/users/{id}/roles/{role}"),
                    json!({}),
                )
                .await?;
            }
        }
        self.register_endpoint(
            "placement",
            "placement",
            &service_url(PLACEMENT, Ports::PLACEMENT),
        )
        .await
    }

    /// Adds a catalog service of `service_type` with public, internal and admin endpoints at
    /// `url` in RegionOne (e.g. `compute` at a test's nova-api Service URL).
    pub async fn register_endpoint(&self, service_type: &str, name: &str, url: &str) -> Result<()> {
        let keystone = self.endpoint(KEYSTONE, Ports::KEYSTONE).await?;
        let token = self.admin_token().await?;
        let auth = [("X-Auth-Token", token.as_str())];
        let created = http::request(
            keystone,
            "POST",
            "/v3/services",
            &auth,
            Some(&json!({ "service": { "type": service_type, "name": name } })),
        )
        .await?;
        let id = created.json()?["service"]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                invalid(
                    "registering an endpoint",
                    format!("POST /v3/services answered {}", created.status),
                )
            })?;
        for interface in ["public", "internal", "admin"] {
            let r = http::request(
                keystone,
                "POST",
                "/v3/endpoints",
                &auth,
                Some(&json!({ "endpoint": { "service_id": id, "interface": interface, "url": url, "region_id": "RegionOne" } })),
            )
            .await?;
            if r.status != 201 {
                return Err(invalid(
                    "registering an endpoint",
                    format!("POST /v3/endpoints answered {}", r.status),
                ));
            }
        }
        Ok(())
    }
}

/// Retries `f` every 500 ms until it succeeds or `timeout` passes (then its last error).
async fn retry_until<T, F, Fut>(timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<()> {
    apply(
        client,
        &json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }),
    )
    .await
}

/// Writes an Opaque Secret with the given keys (server-side apply).
pub async fn write_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    data: &[(&str, &str)],
) -> Result<()> {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    apply(
        client,
        &json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name, "namespace": namespace },
                 "type": "Opaque", "stringData": data }),
    )
    .await
}

/// Server-side applies one object of a kind the harness uses.
pub async fn apply(client: &kube::Client, object: &Value) -> Result<()> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ns = object["metadata"]["namespace"].as_str();
    let params = PatchParams::apply(MANAGER).force();
    let patch = Patch::Apply(object);
    let context = format!("applying {kind} {}/{name}", ns.unwrap_or(""));
    macro_rules! apply_as {
        ($t:ty) => {{
            let api: Api<$t> = match ns {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            api.patch(&name, &params, &patch)
                .await
                .map(|_| ())
                .map_err(kube_err(context))
        }};
    }
    match kind {
        "Namespace" => {
            let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            api.patch(&name, &params, &patch)
                .await
                .map(|_| ())
                .map_err(kube_err(context))
        }
        "Secret" => apply_as!(Secret),
        "ConfigMap" => apply_as!(ConfigMap),
        "Service" => apply_as!(Service),
        "Deployment" => apply_as!(Deployment),
        "Job" => apply_as!(k8s_openapi::api::batch::v1::Job),
        other => Err(invalid(
            &context,
            format!("kind {other} is not one the harness applies"),
        )),
    }
}

/// Waits until Deployment `name` has an available replica.
pub async fn wait_available(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if available(client, namespace, name).await? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("Deployment {namespace}/{name} to become available"),
                after: timeout,
                detail: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// ExternalName Services in `namespace` for the shared deployment's Services named.
async fn expose(client: &kube::Client, namespace: &str, services: &[(&str, u16)]) -> Result<()> {
    for (name, port) in services {
        apply(
            client,
            &json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": { "name": name, "namespace": namespace,
                              "labels": { "app.kubernetes.io/part-of": "nova-test-openstack" } },
                "spec": {
                    "type": "ExternalName",
                    "externalName": format!("{name}.{NAMESPACE}.svc.cluster.local"),
                    "ports": [{ "name": "main", "port": port }]
                }
            }),
        )
        .await?;
    }
    Ok(())
}

/// Whether Deployment `namespace/name` has an available replica.
pub async fn available(client: &kube::Client, namespace: &str, name: &str) -> Result<bool> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let d = api
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading Deployment {namespace}/{name}")))?;
    Ok(d.and_then(|d| d.status)
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
        > 0)
}

/// The first ready endpoint address of a Service (a pod IP on the bridge) with `port`.
pub async fn service_endpoint(
    client: &kube::Client,
    namespace: &str,
    service: &str,
    port: u16,
) -> Result<SocketAddr> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let slices = api
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .map_err(kube_err(format!(
            "listing the endpoints of {namespace}/{service}"
        )))?;
    slices
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false))
        .flat_map(|e| e.addresses.iter())
        .find_map(|a| a.parse().ok())
        .map(|ip| SocketAddr::new(ip, port))
        .ok_or_else(|| {
            invalid(
                "finding a ready endpoint",
                format!("Service {namespace}/{service} has none"),
            )
        })
}
