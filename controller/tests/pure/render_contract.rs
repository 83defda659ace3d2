//! The compute contract: what the fragment carries and leaves out, and the four documented
//! differences between the in-cluster and the remote contract.

use crate::render_support::{example, full, keys, sections, value};
use nova_api::v1alpha1::{NovaConsoleProxySpec, NovaSpec};
use nova_controller::render::{
    ContractVariant, contract_keys, contract_static_keys, render_compute_fragment, render_config,
    secret_contract_keys,
};

fn fragment(name: &str, namespace: &str, spec: &NovaSpec, variant: ContractVariant) -> String {
    render_compute_fragment(name, namespace, spec, variant).expect("renders")
}

const LEFT_OUT_SECTIONS: [&str; 8] = [
    "database",
    "api_database",
    "api",
    "cache",
    "scheduler",
    "conductor",
    "oslo_concurrency",
    "filter_scheduler",
];

const LEFT_OUT_KEYS: [(&str, &str); 8] = [
    ("keystone_authtoken", "memcached_servers"),
    ("neutron", "service_metadata_proxy"),
    ("neutron", "metadata_proxy_shared_secret"),
    ("DEFAULT", "state_path"),
    ("DEFAULT", "log_config_append"),
    ("DEFAULT", "default_log_levels"),
    ("placement", "timeout"),
    ("DEFAULT", "host"),
];

#[test]
fn both_fragments_carry_exactly_the_documented_sections() {
    let (name, namespace, spec) = full();
    for variant in [ContractVariant::InCluster, ContractVariant::Remote] {
        let text = fragment(&name, &namespace, &spec, variant);
        assert_eq!(
            sections(&text),
            [
                "DEFAULT",
                "barbican",
                "cinder",
                "glance",
                "key_manager",
                "keystone_authtoken",
                "neutron",
                "oslo_messaging_notifications",
                "oslo_messaging_rabbit",
                "placement",
                "service_user",
                "upgrade_levels",
                "vnc"
            ],
            "{variant:?}"
        );
        let default_keys: Vec<_> = keys(&text)
            .into_iter()
            .filter(|(s, _)| s == "DEFAULT")
            .map(|(_, k)| k)
            .collect();
        assert_eq!(default_keys, ["debug", "use_stderr"]);
    }
    let (name, namespace, spec) = example();
    assert_eq!(
        sections(&fragment(
            &name,
            &namespace,
            &spec,
            ContractVariant::InCluster
        )),
        [
            "DEFAULT",
            "glance",
            "keystone_authtoken",
            "neutron",
            "oslo_messaging_notifications",
            "oslo_messaging_rabbit",
            "placement",
            "service_user",
            "upgrade_levels",
            "vnc"
        ]
    );
}

#[test]
fn the_fragments_leave_out_what_a_compute_must_not_read() {
    let (name, namespace, spec) = full();
    for variant in [ContractVariant::InCluster, ContractVariant::Remote] {
        let text = fragment(&name, &namespace, &spec, variant);
        for section in LEFT_OUT_SECTIONS {
            assert!(
                !sections(&text).iter().any(|s| s == section),
                "[{section}] in {variant:?}"
            );
        }
        for (section, key) in LEFT_OUT_KEYS {
            assert_eq!(
                value(&text, section, key),
                None,
                "[{section}] {key} in {variant:?}"
            );
        }
        // No extraConfig in either fragment.
        assert!(!text.contains("cpu_allocation_ratio"), "{variant:?}");
        assert!(!text.contains("1000000.0"), "{variant:?}");
        // www_authenticate_uri stays.
        assert_eq!(
            value(&text, "keystone_authtoken", "www_authenticate_uri").as_deref(),
            Some("https://keystone.example.com/v3")
        );
        assert_eq!(
            value(&text, "oslo_messaging_rabbit", "ssl_ca_file").as_deref(),
            Some("/etc/nova/compute-config/ca.crt")
        );
        let owned = endpoint_ca_keys();
        assert_eq!(owned.len(), 7, "{owned:?}");
        for (section, key) in owned {
            assert_eq!(
                value(&text, section, key).as_deref(),
                Some("/etc/nova/compute-config/endpoint-ca.crt"),
                "[{section}] {key} in {variant:?}"
            );
        }
    }
}

/// Where spec.tls's bundle is named (keystoneauth's cafile, castellan's verify_ssl_path): the
/// keys the owned-key registry gives to spec.tls, so the renderer sets exactly what admission
/// guards.
fn endpoint_ca_keys() -> Vec<(&'static str, &'static str)> {
    nova_api::owned_keys::nova()
        .filter(|o| o.owned_by == "spec.tls.caBundleSecretRef")
        .map(|o| (o.section, o.key))
        .collect()
}
#[test]
fn every_fragment_section_is_the_one_nova_conf_carries_minus_the_left_out_keys() {
    // Same helpers, same bytes: each in-cluster fragment section equals nova.conf's section
    // once the control-plane-only keys and extraConfig are taken out.
    let (name, namespace, mut spec) = full();
    spec.extra_config = None;
    let conf = render_config(&name, &namespace, &spec).expect("renders");
    let conf = conf.nova_conf();
    let text = fragment(&name, &namespace, &spec, ContractVariant::InCluster);
    for (section, key) in keys(&text) {
        let ours = value(&text, &section, &key);
        let theirs = value(conf, &section, &key);
        if (section.as_str(), key.as_str()) == ("oslo_messaging_rabbit", "ssl_ca_file") {
            assert_eq!(theirs.as_deref(), Some("/etc/rabbitmq-ca/ca.crt"));
        } else if endpoint_ca_keys().contains(&(section.as_str(), key.as_str())) {
            assert_eq!(theirs.as_deref(), Some("/etc/openstack-ca/ca.crt"));
        } else {
            assert_eq!(ours, theirs, "[{section}] {key}");
        }
    }
    for (section, key) in keys(conf) {
        let in_fragment = value(&text, &section, &key).is_some();
        let left_out = LEFT_OUT_SECTIONS.contains(&section.as_str())
            || LEFT_OUT_KEYS.contains(&(section.as_str(), key.as_str()));
        assert_eq!(in_fragment, !left_out, "[{section}] {key}");
    }
}

#[test]
fn the_remote_fragment_differs_in_exactly_the_documented_places() {
    let (name, namespace, spec) = full();
    let local = fragment(&name, &namespace, &spec, ContractVariant::InCluster);
    let remote = fragment(&name, &namespace, &spec, ContractVariant::Remote);
    let local_ks = "http://keystone.cloud.svc.cluster.local:5000/v3";
    let remote_ks = "https://keystone.example.com/v3";

    // 1. Every auth_url and [barbican] auth_endpoint.
    for section in [
        "keystone_authtoken",
        "service_user",
        "placement",
        "neutron",
        "cinder",
    ] {
        assert_eq!(
            value(&local, section, "auth_url").as_deref(),
            Some(local_ks)
        );
        assert_eq!(
            value(&remote, section, "auth_url").as_deref(),
            Some(remote_ks)
        );
    }
    assert_eq!(
        value(&local, "barbican", "auth_endpoint").as_deref(),
        Some(local_ks)
    );
    assert_eq!(
        value(&remote, "barbican", "auth_endpoint").as_deref(),
        Some(remote_ks)
    );

    // 2. The catalog rows: internal -> public.
    for section in ["placement", "neutron", "glance"] {
        assert_eq!(
            value(&local, section, "valid_interfaces").as_deref(),
            Some("internal")
        );
        assert_eq!(
            value(&remote, section, "valid_interfaces").as_deref(),
            Some("public")
        );
    }
    assert_eq!(
        value(&local, "cinder", "catalog_info").as_deref(),
        Some("block-storage:cinder:internalURL")
    );
    assert_eq!(
        value(&remote, "cinder", "catalog_info").as_deref(),
        Some("block-storage:cinder:publicURL")
    );
    assert_eq!(
        value(&local, "barbican", "barbican_endpoint_type").as_deref(),
        Some("internal")
    );
    assert_eq!(
        value(&remote, "barbican", "barbican_endpoint_type").as_deref(),
        Some("public")
    );

    // 3. The override keys: present in-cluster, absent remotely.
    let overrides = [
        ("placement", "endpoint_override"),
        ("neutron", "endpoint_override"),
        ("glance", "endpoint_override"),
        ("cinder", "endpoint_template"),
        ("barbican", "barbican_endpoint"),
    ];
    for (section, key) in overrides {
        assert!(value(&local, section, key).is_some(), "[{section}] {key}");
        assert_eq!(value(&remote, section, key), None, "[{section}] {key}");
    }

    // Nothing else differs: the same keys with the same values once the three are set aside.
    let differs = |section: &str, key: &str| {
        key == "auth_url"
            || (section, key) == ("barbican", "auth_endpoint")
            || key == "valid_interfaces"
            || (section, key) == ("cinder", "catalog_info")
            || (section, key) == ("barbican", "barbican_endpoint_type")
            || overrides.contains(&(section, key))
    };
    let local_rest: Vec<_> = keys(&local)
        .into_iter()
        .filter(|(s, k)| !differs(s, k))
        .map(|(s, k)| (value(&local, &s, &k), s, k))
        .collect();
    let remote_rest: Vec<_> = keys(&remote)
        .into_iter()
        .filter(|(s, k)| !differs(s, k))
        .map(|(s, k)| (value(&remote, &s, &k), s, k))
        .collect();
    assert_eq!(local_rest, remote_rest);
    // 4. transport_url is a Secret value the ComputeConfig step adds: the same key set.
    assert_eq!(
        secret_contract_keys(&spec),
        [
            "transport_url",
            "password",
            "metadata_proxy_shared_secret",
            "ca.crt",
            "endpoint-ca.crt"
        ]
    );
}

#[test]
fn a_disabled_console_proxy_renders_vnc_enabled_false_in_both_documents() {
    let (name, namespace, mut spec) = example();
    spec.console_proxy = Some(NovaConsoleProxySpec {
        enabled: Some(false),
        ..Default::default()
    });
    let conf = render_config(&name, &namespace, &spec).expect("renders");
    let text = fragment(&name, &namespace, &spec, ContractVariant::InCluster);
    for doc in [conf.nova_conf(), text.as_str()] {
        assert!(doc.ends_with("\n[vnc]\nenabled = false\n"), "{doc}");
    }
}

#[test]
fn the_console_base_url_is_the_gateway_or_the_cluster_local_service() {
    let (name, namespace, mut spec) = example();
    let text = fragment(&name, &namespace, &spec, ContractVariant::InCluster);
    assert_eq!(
        value(&text, "vnc", "novncproxy_base_url").as_deref(),
        Some("https://console.example.com/vnc_lite.html")
    );
    spec.console_proxy = None;
    let text = fragment(&name, &namespace, &spec, ContractVariant::InCluster);
    assert_eq!(
        value(&text, "vnc", "enabled").as_deref(),
        Some("true"),
        "enabled when unset"
    );
    assert_eq!(
        value(&text, "vnc", "novncproxy_base_url").as_deref(),
        Some("http://nova-novncproxy.openstack.svc.cluster.local:6080/vnc_lite.html")
    );
}

#[test]
fn the_contract_static_keys_are_the_fragment_and_cell1() {
    let (name, namespace, spec) = example();
    let data = contract_static_keys(&name, &namespace, &spec, ContractVariant::InCluster)
        .expect("renders");
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        [contract_keys::CELL_NAME, contract_keys::NOVA_COMPUTE_CONF]
    );
    assert_eq!(data[contract_keys::CELL_NAME], "cell1");
    assert_eq!(
        data[contract_keys::NOVA_COMPUTE_CONF],
        fragment(&name, &namespace, &spec, ContractVariant::InCluster)
    );
    assert_eq!(
        secret_contract_keys(&spec),
        ["transport_url", "password", "metadata_proxy_shared_secret"],
        "no ca.crt without messaging.tls"
    );
}
