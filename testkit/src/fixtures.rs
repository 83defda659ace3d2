//! The project's fixtures, loaded one way: the spec's Example Nova and the sample pool from
//! `examples/`, the test credentials, and builders for the common variations (a pool, a zoned
//! kwok node, a Secret).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret, Taint};
use nova_api::conditions::NovaConditionType;
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_test_harness::kwok::FAKE_NODE_TAINT;
use serde_json::json;

/// The spec's Example Nova, as written in `examples/nova.yaml`.
pub const EXAMPLE_NOVA_YAML: &str = include_str!("../../examples/nova.yaml");
/// The sample pool, as written in `examples/novacompute.yaml`.
pub const EXAMPLE_POOL_YAML: &str = include_str!("../../examples/novacompute.yaml");

/// The Example Nova as JSON, untouched.
pub fn example_nova_json() -> serde_json::Value {
    serde_saphyr::from_str(EXAMPLE_NOVA_YAML).expect("examples/nova.yaml parses")
}

/// The sample pool as JSON, untouched.
pub fn example_pool_json() -> serde_json::Value {
    serde_saphyr::from_str(EXAMPLE_POOL_YAML).expect("examples/novacompute.yaml parses")
}

/// The bound of a kwok-tier wait: everything there is the API server, kwok and an in-process
/// controller on loopback.
pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const API_DB_PASSWORD: &str = "api-db-Pa55:word/1";
pub const CELL_DB_PASSWORD: &str = "cell-db-Pa55@word";
pub const SERVICE_PASSWORD: &str = "service-user-Pa55";
pub const SHARED_SECRET: &str = "metadata-shared-s3cret";
pub const RABBIT_PASSWORD: &str = "rabbit-Pa55";

/// The Example Nova in `ns`, selecting the SecretStore `vault` the kwok tier provides.
pub fn example(ns: &str) -> Nova {
    let mut nova: Nova =
        serde_saphyr::from_str(EXAMPLE_NOVA_YAML).expect("examples/nova.yaml parses");
    nova.metadata.namespace = Some(ns.to_owned());
    nova.spec.secret_store_ref = Some(nova_api::v1alpha1::SecretStoreRefSpec {
        kind: Some(nova_api::v1alpha1::SecretStoreKind::SecretStore),
        name: "vault".into(),
    });
    nova
}

/// Gives `nova` schemas of its own, derived from its name (`<name>_api`, `<name>_cell`, `-` as
/// `_`), so several Novas of one namespace and MariaDB pass the schema claim check.
pub fn own_schemas(mut nova: Nova) -> Nova {
    let (api, cell) = schemas_of(nova.metadata.name.as_deref().unwrap_or_default());
    nova.spec.api_database.database = api;
    nova.spec.database.database = cell;
    nova
}

/// The nova_api and cell schemas of the Nova `name` under [`own_schemas`].
pub fn schemas_of(name: &str) -> (String, String) {
    let base = name.replace('-', "_");
    (format!("{base}_api"), format!("{base}_cell"))
}

/// The label the pools of these suites select their kwok nodes by.
pub const POOL_LABEL: &str = "test.nova.c5c3.io/pool";

/// The kwok node [`create_zoned_node`] creates.
pub fn zoned_node(name: &str, pool: &str, zone: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", POOL_LABEL: pool,
                       "topology.kubernetes.io/zone": zone}
        },
        "status": {
            "allocatable": {"cpu": "1k", "memory": "4Ti", "pods": "1000"},
            "capacity": {"cpu": "1k", "memory": "4Ti", "pods": "1000"}
        }
    }))
    .expect("node")
}

/// [`zoned_node`], tainted like kwok's own node of the harness: on the real tier's cluster, where
/// the real node runs the pods, every other pod would otherwise be placed on it too, and only
/// played there. A pool placed on it tolerates the taint ([`fake_node_tolerations`]).
pub fn tainted_zoned_node(name: &str, pool: &str, zone: &str) -> Node {
    let mut node = zoned_node(name, pool, zone);
    node.spec.get_or_insert_default().taints = Some(vec![Taint {
        key: FAKE_NODE_TAINT.into(),
        value: Some("fake".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    }]);
    node
}

/// The tolerations of a pool placed on a [`tainted_zoned_node`], as its spec's JSON.
pub fn fake_node_tolerations() -> serde_json::Value {
    json!([{"key": FAKE_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}])
}

/// The sample pool (`examples/novacompute.yaml`: its resources and the fake driver through
/// extraConfig) in `ns`, selecting the nodes labelled [`POOL_LABEL`]`=selector`; without the
/// sample's traits (no hypervisor operator runs here).
pub fn sample_pool(ns: &str, selector: &str) -> serde_json::Value {
    let mut pool = example_pool_json();
    pool["metadata"]["namespace"] = json!(ns);
    pool["spec"]["nodeSelector"] = json!({POOL_LABEL: selector});
    let spec = pool["spec"].as_object_mut().expect("spec");
    spec.remove("traits");
    spec.remove("hostTraits");
    pool
}

/// The keys of a compute contract whose service user has `password`.
pub fn contract(password: &str) -> [(&str, &str); 3] {
    [
        ("nova-compute.conf", "[DEFAULT]\n"),
        ("transport_url", "rabbit://u:p@rabbit:5672/"),
        ("password", password),
    ]
}

/// A pool of the Nova `nova` selecting `selector`, running the fake driver.
pub fn pool(ns: &str, name: &str, nova: &str, selector: serde_json::Value) -> NovaCompute {
    serde_json::from_value(json!({
        "apiVersion": "nova.openstack.c5c3.io/v1alpha1",
        "kind": "NovaCompute",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "novaRef": {"name": nova},
            "nodeSelector": selector,
            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "768Mi"}},
            "extraConfig": {"DEFAULT": {"compute_driver": "fake.FakeDriverWithoutFakeNodes"}}
        }
    }))
    .expect("pool")
}

/// A loopback port nothing listens on: a connection to it is refused at once, without traffic
/// leaving the machine. The returned socket holds the port bound (never listening, never
/// accepting, without `SO_REUSEADDR`, so nothing else can bind it) for as long as the caller
/// keeps it.
pub fn unreachable_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let port = socket.local_addr().expect("address").port();
    (socket, port)
}

/// A Keystone URL on an [`unreachable_port`]: no OpenStack runs in these suites, so every
/// Aggregates pass fails its login at once (connection refused).
pub fn unreachable_keystone() -> (tokio::net::TcpSocket, String) {
    let (socket, port) = unreachable_port();
    (socket, format!("http://127.0.0.1:{port}/v3"))
}

pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "stringData": data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
    }))
    .expect("secret")
}

/// The conditions of the pipeline so far, all True once a Nova converged.
pub const CONVERGED: [NovaConditionType; 16] = {
    use NovaConditionType::*;
    [
        SecretsReady,
        ComputeConfigReady,
        DatabaseReady,
        ConductorReady,
        SchedulerReady,
        MetadataReady,
        ConsoleProxyReady,
        DeploymentReady,
        DBArchiveReady,
        HTTPRouteReady,
        MetadataHTTPRouteReady,
        ConsoleHTTPRouteReady,
        NovaAPIReady,
        HPAReady,
        VPAReady,
        NetworkPolicyReady,
    ]
};

/// Every planted credential value; none may ever appear in a log, event or condition.
pub const PLANTED: [&str; 5] = [
    API_DB_PASSWORD,
    CELL_DB_PASSWORD,
    SERVICE_PASSWORD,
    SHARED_SECRET,
    RABBIT_PASSWORD,
];
