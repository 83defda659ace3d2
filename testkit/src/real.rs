//! Fixtures of the suites that run the operator's Nova on the real node against the harness's
//! real OpenStack (`nova_real`, `nova_db_guards`): the Nova pinned to a node image, its real
//! inputs, the in-process controller probing the API Service, the waits that dump the namespace
//! when they give up, SQL run as MariaDB's root, and the routes to the shared Keystone and
//! Placement for a controller outside the cluster (`novacompute_real` too).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use nova_api::v1alpha1::{ImageSpec, Nova};
use nova_controller::objects::kinds;
use nova_test_harness::images::{MARIADB_IMAGE, nova_image, pinned};
use nova_test_harness::openstack::{self, KEYSTONE, OpenStack, PLACEMENT, Ports};
use nova_test_harness::pods;
use serde_json::{Value, json};

pub use crate::diagnose::dump;

use crate::controllers::start_controller_probing;
use crate::fixtures::{API_DB_PASSWORD, CELL_DB_PASSWORD, SHARED_SECRET, example};
use crate::inputs::{create_secret_store, create_with_status, put_secret};

/// The bound of each real phase (a db-sync Job took 60-130 s on the 2-core machine).
pub const REAL_TIMEOUT: Duration = Duration::from_secs(420);
/// The nil UUID nova gives cell0.
pub const CELL0: &str = "00000000-0000-0000-0000-000000000000";

/// The sample Nova in `ns`, its image pinned by the digest of the node's nova image of a
/// release, one API replica (the 2-core node runs every role at once), its schemas named after
/// the namespace: the tier's MariaDB is shared by the tests of a run, and a Nova on another
/// test's synced schemas would find that test's cells, hosts and services.
pub fn real_nova(ns: &str, image: &str) -> Nova {
    let mut nova = example(ns);
    nova.spec.api_database.database = format!("nova_api_{}", ns.replace('-', "_"));
    nova.spec.database.database = cell_schema(ns);
    nova.spec.open_stack_release = release_of(image).to_owned();
    let (repository, digest) = image.split_once('@').expect("a digest reference");
    nova.spec.image = ImageSpec {
        repository: repository.to_owned(),
        tag: None,
        digest: Some(digest.to_owned()),
    };
    let mut spec = serde_json::to_value(&nova.spec).expect("spec");
    spec["api"] = json!({"deployment": {"replicas": 1}});
    nova.spec = serde_json::from_value(spec).expect("spec");
    nova
}

/// The cell schema of the [`real_nova`] in `ns`.
pub fn cell_schema(ns: &str) -> String {
    format!("nova_{}", ns.replace('-', "_"))
}

/// Every input of the sample Nova, for real where the OpenStack runs: the credential Secrets
/// (the service user's password is Keystone's), the Ready SecretStore, the RabbitmqCluster and
/// the Database/User/Grant objects for the simulated operators, a MariaDB cluster reported
/// Ready (simulated), and the shared services exposed under the sample's names.
pub async fn provide_real_inputs(os: &OpenStack, client: &Client, ns: &str) {
    os.expose_in(client, ns).await.expect("expose");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    put_secret(
        &secrets,
        "nova-api-db",
        &[("username", "nova-api"), ("password", API_DB_PASSWORD)],
    )
    .await;
    put_secret(
        &secrets,
        "nova-db",
        &[("username", "nova"), ("password", CELL_DB_PASSWORD)],
    )
    .await;
    os.write_service_user_secret(client, ns, "nova-keystone")
        .await
        .expect("service user");
    put_secret(
        &secrets,
        "nova-metadata-secret",
        &[("shared_secret", SHARED_SECRET)],
    )
    .await;
    create_secret_store(client, ns).await;
    let rabbits =
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kinds::rabbitmq_cluster());
    rabbits
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster",
                "metadata": {"name": openstack::RABBITMQ}, "spec": {}}),
            )
            .expect("cluster"),
        )
        .await
        .expect("RabbitmqCluster");
    let clusters = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &kinds::mariadb());
    create_with_status(
        &clusters,
        json!({"apiVersion": "k8s.mariadb.com/v1alpha1", "kind": "MariaDB",
               "metadata": {"name": openstack::MARIADB}, "spec": {}}),
        json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Running",
               "message": "simulated mariadb-operator: the harness's MariaDB runs in namespace openstack",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    )
    .await;
}

/// Waits until `check` passes on the Nova, playing the Gateway meanwhile; dumps the namespace
/// and fails after [`REAL_TIMEOUT`].
pub async fn wait_nova(
    client: &Client,
    ns: &str,
    what: &str,
    check: impl Fn(&Nova) -> bool,
) -> Nova {
    crate::novas::wait_nova_for(client, ns, what, REAL_TIMEOUT, check).await
}

pub fn cells(nova: &Nova) -> Vec<(String, String)> {
    nova.status
        .iter()
        .flat_map(|s| s.cells.iter())
        .map(|c| (c.name.clone(), c.uuid.clone()))
        .collect()
}

/// Runs a Job of the tools or MariaDB image whose script writes its answer to the termination
/// log, and returns the answer (failing when the script fails).
pub async fn probe_job(
    client: &Client,
    ns: &str,
    name: &str,
    image: &str,
    script: &str,
    env: Value,
) -> String {
    openstack::apply(
        client,
        &json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": { "name": name, "namespace": ns },
            "spec": { "backoffLimit": 0, "template": { "spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [{ "name": "probe", "image": image, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script], "env": env }]
            }}}
        }),
    )
    .await
    .expect("probe Job");
    let t = pods::wait_for_job_termination(client, ns, name, "probe", REAL_TIMEOUT)
        .await
        .expect("probe Job ends");
    assert_eq!(t.exit_code, 0, "{name}: {t:?}");
    t.message
}

/// Runs SQL as MariaDB's root in a pod; what it prints is the answer.
pub async fn query(client: &Client, ns: &str, job: &str, sql: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let os_secrets: Api<Secret> = Api::namespaced(client.clone(), openstack::NAMESPACE);
    let root = os_secrets
        .get("openstack-mariadb-root")
        .await
        .expect("root Secret");
    let password = root
        .data
        .and_then(|d| {
            d.get("password")
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        })
        .expect("root password");
    put_secret(&secrets, "test-mariadb-root", &[("password", &password)]).await;
    probe_job(
        client,
        ns,
        job,
        MARIADB_IMAGE,
        &format!("mariadb -N -B -h {}.{ns}.svc -u root -e \"{sql}\" > /dev/termination-log", openstack::MARIADB),
        json!([{ "name": "MYSQL_PWD", "valueFrom": { "secretKeyRef": { "name": "test-mariadb-root", "key": "password" } } }]),
    )
    .await
}

/// The number of tables in the schemas of the [`real_nova`] in `ns` and of its cell mappings,
/// as `t,c`, read by the Job `job` as MariaDB's root.
pub async fn schemas(client: &Client, ns: &str, job: &str) -> String {
    let api = format!("nova_api_{}", ns.replace('-', "_"));
    let cell = cell_schema(ns);
    let cell0 = nova_api::names::NovaNames::cell0_schema(&cell);
    let sql = format!(
        "SELECT CONCAT((SELECT COUNT(*) FROM information_schema.tables WHERE table_schema \
         IN ('{api}', '{cell}', '{cell0}')), ',', (SELECT COUNT(*) FROM {api}.cell_mappings))"
    );
    query(client, ns, job, &sql).await.trim().to_owned()
}

/// The release of a pinned nova image reference.
pub fn release_of(image: &str) -> &'static str {
    nova_test_harness::images::RELEASES
        .into_iter()
        .find(|r| pinned(&nova_image(r)).is_ok_and(|p| p == image))
        .expect("a built release")
}

/// Deletes the namespace of a finished test, so its nova pods stop taking the node's CPU.
pub async fn finish(client: &Client, ns: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(ns, &DeleteParams::background()).await;
}

pub use crate::stack::RELEASE;

/// A loopback port that forwards every connection to the ClusterIP of Service `service` in
/// `ns` (looked up per connection: the Service does not exist before the operator creates it),
/// so the in-process controller's HealthCheck probes the real nova-api through its Service.
pub async fn forward_to_service(
    client: Client,
    ns: String,
    service: String,
    port: u16,
) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let services: Api<Service> = Api::namespaced(client.clone(), &ns);
            let service = service.clone();
            tokio::spawn(async move {
                let Some(ip) = services
                    .get_opt(&service)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|s| s.spec?.cluster_ip)
                else {
                    return;
                };
                let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
                    return;
                };
                if let Ok(mut outbound) = tokio::net::TcpStream::connect((ip, port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    address
}

/// A namespace with every input and a controller whose HealthCheck probes the API Service, on
/// the tier's stack (its simulated operators included).
pub struct Setup {
    pub os: &'static OpenStack,
    pub client: Client,
    pub ns: String,
    pub metrics: nova_controller::metrics::Metrics,
}

pub async fn start(prefix: &str) -> Setup {
    let Prepared {
        os,
        client,
        ns,
        probe,
    } = prepare(prefix).await;
    let metrics = start_controller_probing(client.clone(), &ns, probe).await;
    Setup {
        os,
        client,
        ns,
        metrics,
    }
}

/// A namespace with every input, before any controller runs, and the loopback address that
/// forwards to its API Service (what a controller outside the cluster probes).
pub struct Prepared {
    pub os: &'static OpenStack,
    pub client: Client,
    pub ns: String,
    pub probe: SocketAddr,
}

/// A namespace named after `prefix` with every input on the tier's stack, for a test that runs
/// its controller itself (the binary, `controller_oom`).
pub async fn prepare(prefix: &str) -> Prepared {
    let (cp, os) = crate::stack::openstack().await;
    let client = cp.client().expect("client");
    let ns = cp.namespace(prefix).await.expect("namespace");
    provide_real_inputs(os, &client, &ns).await;
    let probe = forward_to_service(client.clone(), ns.clone(), "nova".into(), 8774).await;
    Prepared {
        os,
        client,
        ns,
        probe,
    }
}

/// The cluster-local addresses of the shared Keystone and Placement (as the Nova and the catalog
/// name them, over http and https), routed to their pods: how a controller outside the cluster
/// reaches them.
pub async fn openstack_routes(os: &OpenStack) -> BTreeMap<String, SocketAddr> {
    let mut routes = BTreeMap::new();
    for (service, port) in [
        (KEYSTONE, Ports::KEYSTONE),
        (PLACEMENT, Ports::PLACEMENT),
        (KEYSTONE, Ports::KEYSTONE_TLS),
        (PLACEMENT, Ports::PLACEMENT_TLS),
    ] {
        routes.insert(
            format!(
                "{service}.{}.svc.cluster.local:{port}",
                openstack::NAMESPACE
            ),
            os.endpoint(service, port)
                .await
                .expect("a service endpoint"),
        );
    }
    routes
}
