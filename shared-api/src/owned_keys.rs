//! The operator-owned INI keys of both kinds (`nova-crd.txt`, "extraConfig";
//! `common-types.md` §3.14; `novacompute.md` §3.4).
//!
//! A *rejected* key is refused at admission, because honouring it does the damage before any
//! condition could report it. A *reported* key is honoured and surfaced through
//! `ExtraConfigHealthy`. Both are exempt from the option-catalog scan.

/// What happens to an owned key set in `extraConfig`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Treatment {
    /// Refused at admission.
    Rejected,
    /// Honoured and reported through ExtraConfigHealthy.
    Reported,
}

/// One operator-owned (section, key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnedKey {
    /// The INI section, as the operator renders it.
    pub section: &'static str,
    /// The option name.
    pub key: &'static str,
    /// What sets the value instead.
    pub owned_by: &'static str,
    /// Why an override does harm, when there is something to say.
    pub impact: Option<&'static str>,
    /// Rejected or reported.
    pub treatment: Treatment,
}

impl OwnedKey {
    /// The admission message of a rejected key:
    /// `<key> is managed via <ownedBy> and must not be set in extraConfig[ (<impact>)]`.
    pub fn rejection_message(&self) -> String {
        let mut message = format!(
            "{} is managed via {} and must not be set in extraConfig",
            self.key, self.owned_by
        );
        if let Some(impact) = self.impact {
            message.push_str(&format!(" ({impact})"));
        }
        message
    }

    /// The `[section] key` entry, plus ` (impact)`, of the OwnedKeysOverridden message.
    pub fn override_entry(&self) -> String {
        match self.impact {
            Some(impact) => format!("[{}] {} ({impact})", self.section, self.key),
            None => format!("[{}] {}", self.section, self.key),
        }
    }
}

/// Whether an extraConfig section names the registry section `owned`: case-insensitive, as
/// oslo.config reads group names, except `DEFAULT`, which only matches itself (`[default]` is a
/// different, ignored group).
pub fn section_matches(owned: &str, section: &str) -> bool {
    if owned == "DEFAULT" || section == "DEFAULT" {
        owned == section
    } else {
        owned.eq_ignore_ascii_case(section)
    }
}

/// The registry entry for (section, key), if the operator owns it.
pub fn lookup<'r>(registry: &'r [OwnedKey], section: &str, key: &str) -> Option<&'r OwnedKey> {
    registry
        .iter()
        .find(|owned| owned.key == key && section_matches(owned.section, section))
}

const fn rejected(
    section: &'static str,
    key: &'static str,
    owned_by: &'static str,
    impact: &'static str,
) -> OwnedKey {
    OwnedKey {
        section,
        key,
        owned_by,
        impact: Some(impact),
        treatment: Treatment::Rejected,
    }
}

const fn reported(section: &'static str, key: &'static str, owned_by: &'static str) -> OwnedKey {
    OwnedKey {
        section,
        key,
        owned_by,
        impact: None,
        treatment: Treatment::Reported,
    }
}

/// The sections whose `password` both kinds inject from the service-user Secret.
pub const PASSWORD_SECTIONS: [&str; 5] = [
    "keystone_authtoken",
    "service_user",
    "placement",
    "neutron",
    "cinder",
];

/// Declares the rejected `password` key of every credential section, each naming its own
/// environment override.
macro_rules! password_keys {
    ($owned_by:expr, $tail:literal) => {
        [
            rejected(
                "keystone_authtoken",
                "password",
                $owned_by,
                concat!(
                    "the password is env-injected via OS_KEYSTONE_AUTHTOKEN__PASSWORD",
                    $tail
                ),
            ),
            rejected(
                "service_user",
                "password",
                $owned_by,
                concat!(
                    "the password is env-injected via OS_SERVICE_USER__PASSWORD",
                    $tail
                ),
            ),
            rejected(
                "placement",
                "password",
                $owned_by,
                concat!(
                    "the password is env-injected via OS_PLACEMENT__PASSWORD",
                    $tail
                ),
            ),
            rejected(
                "neutron",
                "password",
                $owned_by,
                concat!(
                    "the password is env-injected via OS_NEUTRON__PASSWORD",
                    $tail
                ),
            ),
            rejected(
                "cinder",
                "password",
                $owned_by,
                concat!(
                    "the password is env-injected via OS_CINDER__PASSWORD",
                    $tail
                ),
            ),
        ]
    };
}

const NOVA_PASSWORDS: [OwnedKey; 5] = password_keys!(
    "spec.serviceUser.secretRef",
    "; a file value is inert at runtime and only copies the service-user password into the rendered config"
);

const NOVACOMPUTE_PASSWORDS: [OwnedKey; 5] = password_keys!(
    "the compute contract",
    "; a file override is ignored at runtime and copies credential material into the rendered ConfigMap"
);

/// Beyond the spec (issue 30): the CA file of every client section, which points the TLS
/// verification of Keystone and the service endpoints at the bundle the operator mounts.
macro_rules! endpoint_ca_keys {
    ($owned_by:expr) => {{
        const IMPACT: &str = "it points the TLS verification of Keystone and the service endpoints at the CA bundle the operator mounts; another file fails every call to them, or trusts a CA nobody reviewed";
        [
            rejected("keystone_authtoken", "cafile", $owned_by, IMPACT),
            rejected("service_user", "cafile", $owned_by, IMPACT),
            rejected("placement", "cafile", $owned_by, IMPACT),
            rejected("neutron", "cafile", $owned_by, IMPACT),
            rejected("glance", "cafile", $owned_by, IMPACT),
            rejected("cinder", "cafile", $owned_by, IMPACT),
            rejected("barbican", "verify_ssl_path", $owned_by, IMPACT),
        ]
    }};
}

const NOVA_ENDPOINT_CA: [OwnedKey; 7] = endpoint_ca_keys!("spec.tls.caBundleSecretRef");

const NOVACOMPUTE_ENDPOINT_CA: [OwnedKey; 7] = endpoint_ca_keys!("the compute contract");

/// The keys a Nova's extraConfig may not set.
const NOVA_REJECTED: [OwnedKey; 9] = [
    rejected(
        "DEFAULT",
        "transport_url",
        "spec.messaging",
        "env-injected via OS_DEFAULT__TRANSPORT_URL, so a file value is inert at runtime and only copies the broker credentials into the rendered config",
    ),
    rejected(
        "DEFAULT",
        "web",
        "the noVNC client the operator mounts from the image",
        "another path either is empty or is not that client, and the browser gets a blank page with no error from the proxy",
    ),
    rejected(
        "database",
        "connection",
        "spec.database",
        "env-injected via OS_DATABASE__CONNECTION, so a file value is inert at runtime and only copies the database credentials into the rendered config",
    ),
    rejected(
        "api_database",
        "connection",
        "spec.apiDatabase",
        "env-injected via OS_API_DATABASE__CONNECTION, so a file value is inert at runtime and only copies the database credentials into the rendered config",
    ),
    rejected(
        "neutron",
        "metadata_proxy_shared_secret",
        "spec.metadata.sharedSecretRef",
        "env-injected; a file value would copy the value a proxied request's signature is verified with into the ConfigMap every pod mounts",
    ),
    rejected(
        "oslo_messaging_rabbit",
        "ssl",
        "spec.messaging.tls",
        "it selects whether the bus that carries every RPC call is encrypted",
    ),
    rejected(
        "oslo_messaging_rabbit",
        "ssl_ca_file",
        "spec.messaging.tls",
        "it points the broker verification at a file the operator mounts",
    ),
    rejected(
        "vnc",
        "novncproxy_host",
        "the console proxy Service",
        "the Service routes to this address; another one leaves the Service with a port nothing listens on while the pod stays Ready",
    ),
    rejected(
        "vnc",
        "novncproxy_port",
        "the console proxy Service",
        "the Service routes to this port; another one leaves the Service with a port nothing listens on while the pod stays Ready",
    ),
];

/// Every other key the Nova Config step can render into nova.conf or an overlay, whatever
/// the switches of the current spec.
const NOVA_REPORTED: [OwnedKey; 68] = [
    reported("DEFAULT", "use_stderr", "the operator's logging setup"),
    reported("DEFAULT", "debug", "spec.logging.debug"),
    reported("DEFAULT", "state_path", "the /var/lib/nova mount"),
    reported(
        "DEFAULT",
        "default_log_levels",
        "spec.logging.perLoggerLevels",
    ),
    reported("DEFAULT", "log_config_append", "spec.logging.format"),
    reported(
        "api",
        "local_metadata_per_cell",
        "the operator's single metadata front end",
    ),
    reported("keystone_authtoken", "auth_type", "the operator"),
    reported("keystone_authtoken", "auth_url", "spec.keystoneEndpoint"),
    reported(
        "keystone_authtoken",
        "www_authenticate_uri",
        "spec.keystonePublicEndpoint",
    ),
    reported(
        "keystone_authtoken",
        "username",
        "spec.serviceUser.username",
    ),
    reported(
        "keystone_authtoken",
        "project_name",
        "spec.serviceUser.projectName",
    ),
    reported(
        "keystone_authtoken",
        "user_domain_name",
        "spec.serviceUser.userDomainName",
    ),
    reported(
        "keystone_authtoken",
        "project_domain_name",
        "spec.serviceUser.projectDomainName",
    ),
    reported("keystone_authtoken", "memcached_servers", "spec.cache"),
    reported("keystone_authtoken", "region_name", "spec.region"),
    reported("service_user", "auth_type", "the operator"),
    reported("service_user", "auth_url", "spec.keystoneEndpoint"),
    reported("service_user", "username", "spec.serviceUser.username"),
    reported(
        "service_user",
        "project_name",
        "spec.serviceUser.projectName",
    ),
    reported(
        "service_user",
        "user_domain_name",
        "spec.serviceUser.userDomainName",
    ),
    reported(
        "service_user",
        "project_domain_name",
        "spec.serviceUser.projectDomainName",
    ),
    reported("service_user", "region_name", "spec.region"),
    reported("service_user", "send_service_user_token", "the operator"),
    reported("placement", "auth_type", "the operator"),
    reported("placement", "auth_url", "spec.keystoneEndpoint"),
    reported("placement", "username", "spec.serviceUser.username"),
    reported("placement", "project_name", "spec.serviceUser.projectName"),
    reported(
        "placement",
        "user_domain_name",
        "spec.serviceUser.userDomainName",
    ),
    reported(
        "placement",
        "project_domain_name",
        "spec.serviceUser.projectDomainName",
    ),
    reported("placement", "region_name", "spec.region"),
    reported("placement", "valid_interfaces", "the operator"),
    reported(
        "placement",
        "endpoint_override",
        "spec.endpoints.placement.override",
    ),
    reported("placement", "timeout", "the operator"),
    reported("neutron", "auth_type", "the operator"),
    reported("neutron", "auth_url", "spec.keystoneEndpoint"),
    reported("neutron", "username", "spec.serviceUser.username"),
    reported("neutron", "project_name", "spec.serviceUser.projectName"),
    reported(
        "neutron",
        "user_domain_name",
        "spec.serviceUser.userDomainName",
    ),
    reported(
        "neutron",
        "project_domain_name",
        "spec.serviceUser.projectDomainName",
    ),
    reported("neutron", "region_name", "spec.region"),
    reported("neutron", "valid_interfaces", "the operator"),
    reported(
        "neutron",
        "endpoint_override",
        "spec.endpoints.neutron.override",
    ),
    reported(
        "neutron",
        "service_metadata_proxy",
        "the metadata API's overlay",
    ),
    reported("glance", "valid_interfaces", "the operator"),
    reported("glance", "region_name", "spec.region"),
    reported(
        "glance",
        "endpoint_override",
        "spec.endpoints.glance.override",
    ),
    reported("cinder", "auth_type", "the operator"),
    reported("cinder", "auth_url", "spec.keystoneEndpoint"),
    reported("cinder", "username", "spec.serviceUser.username"),
    reported("cinder", "project_name", "spec.serviceUser.projectName"),
    reported(
        "cinder",
        "user_domain_name",
        "spec.serviceUser.userDomainName",
    ),
    reported(
        "cinder",
        "project_domain_name",
        "spec.serviceUser.projectDomainName",
    ),
    reported("cinder", "catalog_info", "the operator"),
    reported("cinder", "os_region_name", "spec.region"),
    reported(
        "cinder",
        "endpoint_template",
        "spec.endpoints.cinder.override",
    ),
    reported("key_manager", "backend", "spec.endpoints.barbican.enabled"),
    reported("barbican", "auth_endpoint", "spec.keystoneEndpoint"),
    reported("barbican", "barbican_endpoint_type", "the operator"),
    reported("barbican", "send_service_user_token", "the operator"),
    reported("barbican", "barbican_region_name", "spec.region"),
    reported(
        "barbican",
        "barbican_endpoint",
        "spec.endpoints.barbican.override",
    ),
    reported(
        "oslo_messaging_rabbit",
        "rabbit_quorum_queue",
        "the operator",
    ),
    reported(
        "oslo_messaging_rabbit",
        "rabbit_transient_quorum_queue",
        "the operator",
    ),
    reported("oslo_messaging_rabbit", "use_queue_manager", "the operator"),
    reported("oslo_messaging_notifications", "driver", "the operator"),
    reported("oslo_concurrency", "lock_path", "the /var/lib/nova mount"),
    reported("upgrade_levels", "compute", "the operator"),
    reported("cache", "enabled", "spec.cache"),
];

/// The Nova keys the operator renders that live in sections the list above does not reach.
const NOVA_REPORTED_MORE: [OwnedKey; 9] = [
    reported("cache", "backend", "spec.cache.backend"),
    reported("cache", "memcache_servers", "spec.cache"),
    reported(
        "scheduler",
        "discover_hosts_in_cells_interval",
        "the operator",
    ),
    reported("scheduler", "workers", "spec.scheduler.workers"),
    reported("conductor", "workers", "spec.conductor.workers"),
    reported(
        "filter_scheduler",
        "build_failure_weight_multiplier",
        "the operator",
    ),
    reported(
        "filter_scheduler",
        "shuffle_best_same_weighed_hosts",
        "the operator",
    ),
    reported("vnc", "enabled", "spec.consoleProxy.enabled"),
    reported("vnc", "novncproxy_base_url", "spec.consoleProxy"),
];

/// The Nova registry: rejected keys first, then the reported ones.
pub fn nova() -> impl Iterator<Item = &'static OwnedKey> {
    NOVA_REJECTED
        .iter()
        .chain(NOVA_PASSWORDS.iter())
        .chain(NOVA_ENDPOINT_CA.iter())
        .chain(NOVA_REPORTED.iter())
        .chain(NOVA_REPORTED_MORE.iter())
}

const LIVE_MIGRATION_TRANSPORT: &str = "every pool migrates over libvirt TLS with QEMU-native TLS; another transport breaks migration between pools or sends guest memory in clear";

/// The keys of `compute-pool.conf` a NovaCompute's extraConfig may not set.
const NOVACOMPUTE_REJECTED: [OwnedKey; 13] = [
    rejected(
        "DEFAULT",
        "host",
        "spec.nodeName (downward API)",
        "the host is the node name, env-injected via OS_DEFAULT__HOST; the aggregates, the drain and openstack-hypervisor-operator all find the service by it",
    ),
    rejected(
        "DEFAULT",
        "my_ip",
        "status.hostIP (downward API)",
        "the address is env-injected via OS_DEFAULT__MY_IP; a file override is ignored at runtime",
    ),
    rejected(
        "DEFAULT",
        "transport_url",
        "the compute contract",
        "the transport URL is env-injected via OS_DEFAULT__TRANSPORT_URL; a file override is ignored at runtime and copies credential material into the rendered ConfigMap",
    ),
    rejected(
        "DEFAULT",
        "state_path",
        "the /var/lib/nova host mount",
        "the instance disks and the node's compute_id live under this path on the host; another path is not mounted and loses both with the pod",
    ),
    rejected(
        "oslo_concurrency",
        "lock_path",
        "the /var/lib/nova host mount",
        "the locks live on the host mount; another path names a directory the container cannot write",
    ),
    rejected(
        "libvirt",
        "connection_uri",
        "the /run/libvirt host mount",
        "the pod reaches the node's libvirtd over the mounted socket; another URI addresses a daemon the pod cannot reach",
    ),
    rejected(
        "libvirt",
        "live_migration_scheme",
        "operator-computed",
        LIVE_MIGRATION_TRANSPORT,
    ),
    rejected(
        "libvirt",
        "live_migration_with_native_tls",
        "operator-computed",
        LIVE_MIGRATION_TRANSPORT,
    ),
    rejected(
        "libvirt",
        "live_migration_uri",
        "operator-computed",
        LIVE_MIGRATION_TRANSPORT,
    ),
    rejected(
        "libvirt",
        "live_migration_tunnelled",
        "operator-computed",
        LIVE_MIGRATION_TRANSPORT,
    ),
    rejected(
        "libvirt",
        "live_migration_inbound_addr",
        "status.hostIP (downward API)",
        "the address is env-injected via OS_LIBVIRT__LIVE_MIGRATION_INBOUND_ADDR; a file override is ignored at runtime",
    ),
    rejected(
        "os_vif_ovs",
        "ovsdb_connection",
        "the /run/openvswitch host mount",
        "os-vif plugs instance ports over the mounted socket of the node's Open vSwitch; another address plugs them into a switch this node does not run",
    ),
    rejected(
        "vnc",
        "server_proxyclient_address",
        "status.hostIP (downward API)",
        "the address is env-injected via OS_VNC__SERVER_PROXYCLIENT_ADDRESS; a file override is ignored at runtime",
    ),
];

/// The `compute-pool.conf` keys typed NovaCompute fields render.
const NOVACOMPUTE_REPORTED: [OwnedKey; 4] = [
    reported("libvirt", "virt_type", "spec.libvirt.virtType"),
    reported("libvirt", "cpu_mode", "spec.libvirt.cpuMode"),
    reported("libvirt", "cpu_models", "spec.libvirt.cpuModels"),
    reported("libvirt", "images_type", "spec.libvirt.imagesType"),
];

/// The NovaCompute registry (`NovaComputeOwnedConfigKeys`).
pub fn novacompute() -> impl Iterator<Item = &'static OwnedKey> {
    NOVACOMPUTE_REJECTED
        .iter()
        .chain(NOVACOMPUTE_PASSWORDS.iter())
        .chain(NOVACOMPUTE_ENDPOINT_CA.iter())
        .chain(NOVACOMPUTE_REPORTED.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(registry: Vec<&'static OwnedKey>, section: &str, key: &str) -> Option<OwnedKey> {
        registry
            .into_iter()
            .find(|o| o.key == key && section_matches(o.section, section))
            .copied()
    }

    #[test]
    fn the_seed_rejected_nova_keys_are_exactly_these() {
        let mut rejected: Vec<(&str, &str)> = nova()
            .filter(|o| o.treatment == Treatment::Rejected)
            .map(|o| (o.section, o.key))
            .collect();
        rejected.sort();
        let mut want = vec![
            ("DEFAULT", "transport_url"),
            ("DEFAULT", "web"),
            ("database", "connection"),
            ("api_database", "connection"),
            ("keystone_authtoken", "password"),
            ("service_user", "password"),
            ("placement", "password"),
            ("neutron", "password"),
            ("cinder", "password"),
            ("neutron", "metadata_proxy_shared_secret"),
            ("oslo_messaging_rabbit", "ssl"),
            ("oslo_messaging_rabbit", "ssl_ca_file"),
            ("keystone_authtoken", "cafile"),
            ("service_user", "cafile"),
            ("placement", "cafile"),
            ("neutron", "cafile"),
            ("glance", "cafile"),
            ("cinder", "cafile"),
            ("barbican", "verify_ssl_path"),
            ("vnc", "novncproxy_host"),
            ("vnc", "novncproxy_port"),
        ];
        want.sort();
        assert_eq!(rejected, want);
    }

    #[test]
    fn the_seed_overrides_are_reported_and_auth_strategy_is_not_owned() {
        let all: Vec<_> = nova().collect();
        for (section, key) in [
            ("filter_scheduler", "build_failure_weight_multiplier"),
            ("filter_scheduler", "shuffle_best_same_weighed_hosts"),
            ("placement", "timeout"),
            ("cinder", "catalog_info"),
            ("DEFAULT", "log_config_append"),
        ] {
            let owned = find(all.clone(), section, key).expect("owned");
            assert_eq!(owned.treatment, Treatment::Reported, "[{section}] {key}");
        }
        assert!(find(all, "api", "auth_strategy").is_none());
    }

    #[test]
    fn no_key_is_listed_twice() {
        for registry in [nova().collect::<Vec<_>>(), novacompute().collect()] {
            for (i, a) in registry.iter().enumerate() {
                for b in &registry[i + 1..] {
                    assert!(
                        !(a.section == b.section && a.key == b.key),
                        "[{}] {} twice",
                        a.section,
                        a.key
                    );
                }
            }
        }
    }

    #[test]
    fn sections_match_case_insensitively_except_default() {
        let all: Vec<_> = nova().collect();
        assert!(
            lookup(
                &all.iter().map(|o| **o).collect::<Vec<_>>(),
                "Placement",
                "password"
            )
            .is_some()
        );
        assert!(find(all.clone(), "OSLO_MESSAGING_RABBIT", "ssl").is_some());
        assert!(find(all.clone(), "default", "transport_url").is_none());
        assert!(
            find(all, "DEFAULT", "TRANSPORT_URL").is_none(),
            "keys compare verbatim"
        );
    }

    #[test]
    fn rejection_messages_follow_the_spec_format() {
        let host = find(novacompute().collect(), "DEFAULT", "host").expect("owned");
        assert_eq!(
            host.rejection_message(),
            "host is managed via spec.nodeName (downward API) and must not be set in extraConfig \
             (the host is the node name, env-injected via OS_DEFAULT__HOST; the aggregates, the \
             drain and openstack-hypervisor-operator all find the service by it)"
        );
        let password = find(novacompute().collect(), "cinder", "password").expect("owned");
        assert!(password.rejection_message().contains("OS_CINDER__PASSWORD"));
        let virt = find(novacompute().collect(), "libvirt", "virt_type").expect("owned");
        assert_eq!(virt.treatment, Treatment::Reported);
        assert_eq!(virt.override_entry(), "[libvirt] virt_type");
    }

    #[test]
    fn novacompute_leaves_compute_driver_and_server_listen_open() {
        assert!(find(novacompute().collect(), "DEFAULT", "compute_driver").is_none());
        assert!(find(novacompute().collect(), "vnc", "server_listen").is_none());
        assert!(
            find(
                novacompute().collect(),
                "libvirt",
                "live_migration_bandwidth"
            )
            .is_none()
        );
    }
}
