//! Golden files: the full nova.conf of two fixtures at both releases, logging.ini, the compute
//! fragment and the remote fragment, and the example pool's compute-pool.conf and DaemonSet
//! as `render -f pool.yaml --nova nova.yaml` prints them. `UPDATE_GOLDEN=1 cargo test -p nova-controller --test pure
//! render_golden` rewrites them.

use crate::render_support::{RELEASES, assert_golden, at_release, example, full};
use nova_api::v1alpha1::NovaSpec;
use nova_controller::render::{
    ContractVariant, RenderError, RenderedConfig, paths, render_compute_fragment, render_config,
};

/// Renders the config at every supported release and asserts the renders are identical.
fn at_both_releases(name: &str, namespace: &str, spec: &NovaSpec) -> Vec<RenderedConfig> {
    let renders: Vec<_> = RELEASES
        .iter()
        .map(|r| render_config(name, namespace, &at_release(spec, r)).expect("renders"))
        .collect();
    assert_eq!(renders[0].nova_conf(), renders[1].nova_conf());
    assert_eq!(renders[0], renders[1], "every document and the hash");
    renders
}

#[test]
fn example_nova_conf_is_pinned_and_identical_at_both_releases() {
    let (name, namespace, spec) = example();
    let renders = at_both_releases(&name, &namespace, &spec);
    assert_golden("example/nova.conf", renders[0].nova_conf());
    assert!(!renders[0].documents.contains_key(paths::LOGGING_INI));
    assert!(renders[0].overridden_owned_keys.is_empty());
}

#[test]
fn full_nova_conf_is_pinned_and_identical_at_both_releases() {
    let (name, namespace, spec) = full();
    let renders = at_both_releases(&name, &namespace, &spec);
    assert_golden("full/nova.conf", renders[0].nova_conf());
    assert_golden(
        "full/logging.ini",
        &renders[0].documents[paths::LOGGING_INI],
    );
}

#[test]
fn example_compute_fragment_is_pinned() {
    let (name, namespace, spec) = example();
    let fragment = render_compute_fragment(&name, &namespace, &spec, ContractVariant::InCluster)
        .expect("renders");
    assert_golden("example/nova-compute.conf", &fragment);
    assert_eq!(
        render_compute_fragment(&name, &namespace, &spec, ContractVariant::Remote),
        Err(RenderError::RemoteComputeUnset)
    );
}

#[test]
fn full_compute_fragments_are_pinned_and_release_independent() {
    let (name, namespace, spec) = full();
    for (variant, golden) in [
        (ContractVariant::InCluster, "full/nova-compute.conf"),
        (ContractVariant::Remote, "full/remote-nova-compute.conf"),
    ] {
        let renders: Vec<_> = RELEASES
            .iter()
            .map(|r| {
                render_compute_fragment(&name, &namespace, &at_release(&spec, r), variant)
                    .expect("renders")
            })
            .collect();
        assert_eq!(renders[0], renders[1]);
        assert_golden(golden, &renders[0]);
    }
}

#[test]
fn the_example_config_map_has_the_five_documents_and_a_stable_name() {
    let (name, namespace, spec) = example();
    let rendered = render_config(&name, &namespace, &spec).expect("renders");
    let keys: Vec<_> = rendered.documents.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "conductor.conf",
            "metadata.conf",
            "nova.conf",
            "novncproxy.conf",
            "scheduler.conf"
        ]
    );
    assert_golden(
        "example/config-map-name",
        &format!("{}\n", rendered.config_map_name(&name)),
    );
}

/// The four overlays, byte for byte as nova-crd.txt prints them, on every render whatever
/// the switches (the console proxy's included while the proxy is disabled).
#[test]
fn the_four_overlays_are_the_spec_text_byte_for_byte() {
    const METADATA: &str = "[neutron]\nservice_metadata_proxy = true\n";
    const SCHEDULER: &str = "[scheduler]\nworkers = 2\n";
    const CONDUCTOR: &str = "[conductor]\nworkers = 2\n";
    const NOVNCPROXY: &str = "[DEFAULT]\nweb = /usr/share/novnc\n\n[api_database]\nconnection =\n\n[vnc]\nnovncproxy_host = 0.0.0.0\nnovncproxy_port = 6080\n";

    let (name, namespace, spec) = example();
    let docs = render_config(&name, &namespace, &spec)
        .expect("renders")
        .documents;
    assert_eq!(docs[paths::METADATA_CONF], METADATA);
    assert_eq!(docs[paths::SCHEDULER_CONF], SCHEDULER);
    assert_eq!(docs[paths::CONDUCTOR_CONF], CONDUCTOR);
    assert_eq!(docs[paths::NOVNCPROXY_CONF], NOVNCPROXY);
    for (file, text) in [
        ("overlays/metadata.conf", METADATA),
        ("overlays/scheduler.conf", SCHEDULER),
        ("overlays/conductor.conf", CONDUCTOR),
        ("overlays/novncproxy.conf", NOVNCPROXY),
    ] {
        assert_golden(file, text);
    }

    // The worker counts follow their fields; the other overlays are fixed text, present while
    // the console proxy is disabled too.
    let (name, namespace, spec) = full();
    let docs = render_config(&name, &namespace, &spec)
        .expect("renders")
        .documents;
    assert_eq!(docs[paths::SCHEDULER_CONF], "[scheduler]\nworkers = 3\n");
    assert_eq!(docs[paths::CONDUCTOR_CONF], "[conductor]\nworkers = 4\n");
    assert_eq!(docs[paths::METADATA_CONF], METADATA);
    assert_eq!(docs[paths::NOVNCPROXY_CONF], NOVNCPROXY);
}

/// The overlays are never merged with extraConfig: an override of an overlay key lands in
/// nova.conf.
#[test]
fn extra_config_never_reaches_an_overlay() {
    let (name, namespace, mut spec) = example();
    spec.extra_config = Some(
        [
            (
                "scheduler".to_owned(),
                [("workers".to_owned(), "9".to_owned())].into(),
            ),
            (
                "vnc".to_owned(),
                [("novncproxy_port".to_owned(), "1".to_owned())].into(),
            ),
        ]
        .into(),
    );
    let rendered = render_config(&name, &namespace, &spec).expect("renders");
    assert_eq!(
        rendered.documents[paths::SCHEDULER_CONF],
        "[scheduler]\nworkers = 2\n"
    );
    assert!(rendered.documents[paths::NOVNCPROXY_CONF].contains("novncproxy_port = 6080\n"));
    assert!(
        rendered
            .nova_conf()
            .contains("\n[scheduler]\ndiscover_hosts_in_cells_interval = 300\nworkers = 9\n")
    );
}

/// The five database scripts, for the example's cell schema.
#[test]
fn the_database_scripts_are_pinned() {
    use nova_controller::render::db_scripts;
    let (_, _, spec) = example();
    let schema = &spec.database.database;
    for (file, script) in [
        ("scripts/db-sync.sh", db_scripts::db_sync(schema)),
        ("scripts/db-expand.sh", db_scripts::db_expand()),
        ("scripts/db-migrate.sh", db_scripts::db_migrate()),
        ("scripts/db-contract.sh", db_scripts::db_contract(schema)),
        ("scripts/db-archive.sh", db_scripts::db_archive()),
    ] {
        assert_golden(file, &script);
    }
}

/// The four migration Jobs and the archive CronJob of the example, pod templates included.
#[test]
fn the_database_jobs_are_pinned() {
    use nova_controller::objects::Owner;
    use nova_controller::render::db_jobs::{self, DbJob};
    use nova_controller::render::pod::{Digests, PodInputs};
    let (name, namespace, spec) = example();
    let digests = Digests {
        api_db_connection: "api-digest".into(),
        db_connection: "cell-digest".into(),
        authtoken: "authtoken-digest".into(),
        transport_url: "transport-digest".into(),
        metadata_secret: "metadata-digest".into(),
    };
    let inputs = PodInputs {
        name: &name,
        spec: &spec,
        config_map: "nova-config-0123abcd",
        digests: &digests,
        installed_release: Some("2026.1"),
        broker_port: Some(5672),
    };
    let owner = Owner {
        kind: "Nova".into(),
        namespace,
        reference: None,
        labels: nova_api::labels::common(&name),
    };
    let yaml = |child: &nova_controller::objects::Child| {
        serde_saphyr::to_string(&child.stamped(&owner).expect("stamps")).expect("yaml")
    };
    for which in [DbJob::Sync, DbJob::Expand, DbJob::Migrate, DbJob::Contract] {
        let (job, key) = db_jobs::job(&inputs, which);
        assert_eq!(key.len(), 64);
        assert_golden(&format!("jobs/{}.yaml", which.suffix()), &yaml(&job));
    }
    let archive = nova_api::effective::db_archive(Some(&nova_api::v1alpha1::DBArchiveSpec {
        retention_days: Some(90),
        ..Default::default()
    }));
    assert_golden(
        "jobs/db-archive.yaml",
        &yaml(&db_jobs::archive_cron_job(&inputs, &archive)),
    );
}

/// The example pool joined to the example Nova, rendered.
async fn rendered_example_pool() -> nova_controller::offline::Rendered {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let pool = nova_controller::offline::read_pool(&dir.join("novacompute.yaml")).expect("pool");
    let nova = nova_controller::offline::read_nova(&dir.join("nova.yaml")).expect("nova");
    nova_controller::offline::render_pool(pool, nova, Default::default())
        .await
        .expect("renders")
}

#[tokio::test]
async fn the_example_pool_renders_its_config_map_and_daemonset() {
    let rendered = rendered_example_pool().await;
    assert_eq!(rendered.stopped, None, "the pipeline runs to its end");
    let kinds: Vec<&str> = rendered
        .objects
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["ConfigMap", "DaemonSet"]);
    let conf = rendered.objects[0]["data"]["compute-pool.conf"]
        .as_str()
        .expect("compute-pool.conf");
    assert_golden("novacompute/compute-pool.conf", conf);
    let daemonset = nova_controller::offline::to_yaml(&rendered.objects[1..]).expect("yaml");
    assert_golden("novacompute/daemonset.yaml", &daemonset);
}

#[tokio::test]
async fn the_example_pool_renders_the_openstack_actions_an_empty_cloud_needs() {
    let rendered = rendered_example_pool().await;
    assert_eq!(
        rendered.effects,
        ["Aggregates: creating aggregate tenant_filter_tests"],
        "a pool selecting no node yet needs only the tenant filter tests' aggregate"
    );
}
