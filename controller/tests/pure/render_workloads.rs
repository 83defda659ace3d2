//! Golden files of the five Deployments (pod templates included), their Services and the API's
//! disruption budget, for the Example and the fully loaded fixture. `UPDATE_GOLDEN=1 cargo test
//! -p nova-controller --test pure render_workloads` rewrites them.

use crate::render_support::{assert_golden, example, full};
use nova_api::defaults::default_nova;
use nova_api::v1alpha1::NovaSpec;
use nova_controller::render::pod::{Digests, PodInputs, Role};
use nova_controller::render::render_config;
use nova_controller::render::workloads::{LiveReplicas, api_pdb, deployment, service};
use serde::Serialize;

fn digests() -> Digests {
    Digests {
        api_db_connection: "api-db-connection-digest".into(),
        db_connection: "db-connection-digest".into(),
        authtoken: "authtoken-digest".into(),
        transport_url: "transport-url-digest".into(),
        metadata_secret: "metadata-secret-digest".into(),
    }
}

fn yaml<T: Serialize>(object: &T) -> String {
    serde_saphyr::to_string(&serde_json::to_value(object).expect("json")).expect("yaml")
}

/// Every workload child of `spec`, as golden text per file name.
fn workloads(name: &str, namespace: &str, spec: &NovaSpec) -> Vec<(String, String)> {
    let config_map = render_config(name, namespace, spec)
        .expect("renders")
        .config_map_name(name);
    let digests = digests();
    let inputs = PodInputs {
        name,
        spec,
        config_map: &config_map,
        digests: &digests,
        installed_release: Some("2026.1"),
        broker_port: Some(5671),
    };
    let proxy = spec
        .console_proxy
        .as_ref()
        .and_then(|c| c.enabled)
        .unwrap_or(true);
    let mut files = Vec::new();
    for role in Role::WORKLOADS {
        if role == Role::NovncProxy && !proxy {
            continue;
        }
        let object = role.deployment_name(name).expect("a workload");
        files.push((
            format!("deployment-{object}.yaml"),
            yaml(&deployment(&inputs, role, LiveReplicas::Absent)),
        ));
        if let Some(svc) = service(name, role) {
            files.push((format!("service-{object}.yaml"), yaml(&svc)));
        }
    }
    files.push((format!("pdb-{name}.yaml"), yaml(&api_pdb(name, spec))));
    files
}

fn assert_fixture(dir: &str, (name, namespace, spec): (String, String, NovaSpec)) {
    let raw = workloads(&name, &namespace, &spec);
    let mut defaulted = spec.clone();
    default_nova(&mut defaulted);
    assert_eq!(
        raw,
        workloads(&name, &namespace, &defaulted),
        "a defaulted spec renders the same workloads as the undefaulted one"
    );
    for (file, text) in raw {
        assert_golden(&format!("{dir}/workloads/{file}"), &text);
    }
}

#[test]
fn example_workloads_are_pinned() {
    assert_fixture("example", example());
}

#[test]
fn full_workloads_are_pinned() {
    assert_fixture("full", full());
}

#[test]
fn loaded_workloads_are_pinned() {
    let text = std::fs::read_to_string(crate::render_support::golden_dir().join("loaded.yaml"))
        .expect("loaded.yaml");
    let nova = crate::render_support::parse(&text);
    assert_fixture(
        "loaded",
        (
            nova.metadata.name.expect("name"),
            nova.metadata.namespace.expect("namespace"),
            nova.spec,
        ),
    );
}
