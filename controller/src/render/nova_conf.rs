//! nova.conf (`nova-crd.txt`, "Rendered configuration") and the section helpers the compute
//! fragment reuses, so the two documents name every service the same way and switch the
//! console the same way, or neither does.
//!
//! The release is not an input: nova.conf is byte-identical across the supported releases, so
//! a release bump never rotates the ConfigMap.

use nova_api::v1alpha1::{DEFAULT_CACHE_BACKEND, NovaSpec};

use super::error::RenderError;
use super::ini::{IniDocument, Section};
use super::inputs::{SharedInputs, verbatim};
use super::logging;
use super::paths::{
    COMPUTE_CA_FILE, COMPUTE_ENDPOINT_CA_FILE, ENDPOINT_CA_FILE, LOCK_PATH, LOG_CONFIG_APPEND,
    RABBITMQ_CA_FILE, STATE_PATH,
};

/// `[keystone_authtoken]`, `[service_user]` and the credential-carrying client sections
/// authenticate with the keystoneauth password plugin. The password itself is never
/// rendered: each section's `password` arrives as its own `OS_<SECTION>__PASSWORD` override.
pub const AUTH_TYPE: &str = "password";

/// `[database]` and `[api_database] connection`: the real DSNs arrive as
/// `OS_DATABASE__CONNECTION` and `OS_API_DATABASE__CONNECTION`; the placeholder only lets
/// oslo.config parse the file before they apply.
pub const DATABASE_PLACEHOLDER: &str = "mysql+pymysql://placeholder";

/// `[placement] timeout`, in seconds, of the control plane's Placement clients.
pub const PLACEMENT_TIMEOUT: &str = "60";

/// The port of a managed Memcached's Service.
pub const MEMCACHED_PORT: u16 = 11211;

/// The catalog interface a client section resolves its service on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interface {
    /// The internal catalog rows: Service URLs, for a process inside this cluster.
    Internal,
    /// The public rows, for a compute on another cluster.
    Public,
}

impl Interface {
    fn valid_interfaces(self) -> &'static str {
        match self {
            Self::Internal => "internal",
            Self::Public => "public",
        }
    }

    /// `[cinder] catalog_info`: `<service_type>:<service_name>:<interface>URL`.
    fn cinder_catalog_info(self) -> &'static str {
        match self {
            Self::Internal => "block-storage:cinder:internalURL",
            Self::Public => "block-storage:cinder:publicURL",
        }
    }
}

/// How the client sections of one document reach Keystone and the services: the three
/// documented differences between the in-cluster and the remote addressing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Addressing<'a> {
    /// Every auth_url and `[barbican] auth_endpoint`.
    pub auth_url: &'a str,
    /// valid_interfaces, catalog_info and barbican_endpoint_type.
    pub interface: Interface,
    /// Whether the endpoint_override, endpoint_template and barbican_endpoint pins apply.
    pub overrides: bool,
}

impl<'a> Addressing<'a> {
    /// The addressing of the control plane and of a compute beside it.
    pub(crate) fn in_cluster(inputs: &'a SharedInputs) -> Self {
        Self {
            auth_url: &inputs.keystone_endpoint,
            interface: Interface::Internal,
            overrides: true,
        }
    }
}

fn flag(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

fn set(section: &mut Section, key: &str, value: &str) {
    section.insert(key.to_owned(), value.to_owned());
}

fn set_opt(section: &mut Section, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        set(section, key, value);
    }
}

/// auth_type, auth_url and the four identity fields.
fn credentials(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Section {
    let identity = &inputs.identity;
    let mut section = Section::new();
    set(&mut section, "auth_type", AUTH_TYPE);
    set(&mut section, "auth_url", addressing.auth_url);
    set(&mut section, "username", &identity.username);
    set(&mut section, "project_name", &identity.project_name);
    set(&mut section, "user_domain_name", &identity.user_domain_name);
    set(
        &mut section,
        "project_domain_name",
        &identity.project_domain_name,
    );
    section
}

/// The credentials plus region_name while spec.region is set.
fn identity_section(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Section {
    let mut section = credentials(inputs, addressing);
    set_opt(&mut section, "region_name", inputs.region.as_deref());
    section
}

/// `[keystone_authtoken]` as both documents carry it: without memcached_servers, which only
/// the control plane can resolve.
fn keystone_authtoken(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Section {
    let mut section = identity_section(inputs, addressing);
    set(
        &mut section,
        "www_authenticate_uri",
        &inputs.keystone_public_endpoint,
    );
    section
}

fn service_user(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Section {
    let mut section = identity_section(inputs, addressing);
    set(&mut section, "send_service_user_token", "true");
    section
}

/// A credential-carrying client section addressed by valid_interfaces.
fn client(
    inputs: &SharedInputs,
    addressing: &Addressing<'_>,
    endpoint_override: Option<&str>,
) -> Section {
    let mut section = identity_section(inputs, addressing);
    set(
        &mut section,
        "valid_interfaces",
        addressing.interface.valid_interfaces(),
    );
    if addressing.overrides {
        set_opt(&mut section, "endpoint_override", endpoint_override);
    }
    section
}

/// `[placement]` as both documents carry it: without timeout, a control-plane bound.
fn placement(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Section {
    client(inputs, addressing, inputs.placement_override.as_deref())
}

fn neutron(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Section {
    client(inputs, addressing, inputs.neutron_override.as_deref())
}

/// `[glance]`: no credentials, Nova reads an image with the token of the request it serves.
fn glance(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Section {
    let mut section = Section::new();
    set(
        &mut section,
        "valid_interfaces",
        addressing.interface.valid_interfaces(),
    );
    set_opt(&mut section, "region_name", inputs.region.as_deref());
    if addressing.overrides {
        set_opt(
            &mut section,
            "endpoint_override",
            inputs.glance_override.as_deref(),
        );
    }
    section
}

/// `[cinder]` while Cinder is enabled: addressed by catalog tuple, its region as
/// os_region_name.
fn cinder(inputs: &SharedInputs, addressing: &Addressing<'_>) -> Option<Section> {
    let template = inputs.cinder.as_ref()?;
    let mut section = credentials(inputs, addressing);
    set(
        &mut section,
        "catalog_info",
        addressing.interface.cinder_catalog_info(),
    );
    set_opt(&mut section, "os_region_name", inputs.region.as_deref());
    if addressing.overrides {
        set_opt(&mut section, "endpoint_template", template.as_deref());
    }
    Some(section)
}

/// `[key_manager]` and `[barbican]` while Barbican is enabled.
fn key_manager_and_barbican(
    inputs: &SharedInputs,
    addressing: &Addressing<'_>,
) -> Option<(Section, Section)> {
    let endpoint = inputs.barbican.as_ref()?;
    let mut key_manager = Section::new();
    set(&mut key_manager, "backend", "barbican");
    let mut barbican = Section::new();
    set(&mut barbican, "auth_endpoint", addressing.auth_url);
    set(
        &mut barbican,
        "barbican_endpoint_type",
        addressing.interface.valid_interfaces(),
    );
    set(&mut barbican, "send_service_user_token", "true");
    set_opt(
        &mut barbican,
        "barbican_region_name",
        inputs.region.as_deref(),
    );
    if addressing.overrides {
        set_opt(&mut barbican, "barbican_endpoint", endpoint.as_deref());
    }
    Some((key_manager, barbican))
}

/// `[oslo_messaging_rabbit]`.
///
/// The queue options are the conventional values of a RabbitMQ 3.13+/4.x broker, which has
/// deprecated classic mirrored queues: `rabbit_quorum_queue = true` (replicated RPC queues
/// that survive the loss of a broker node), `rabbit_transient_quorum_queue = true` (the reply
/// and fanout queues replicated the same way) and `use_queue_manager = true` (stable names for
/// those transient queues, so a restarted process reuses its queues instead of leaking them).
/// While spec.messaging.tls is set, `ssl = true` and `ssl_ca_file` at `ca_file`, the mount of
/// the document's reader.
fn oslo_messaging_rabbit(inputs: &SharedInputs, ca_file: &str) -> Section {
    let mut section = Section::new();
    set(&mut section, "rabbit_quorum_queue", "true");
    set(&mut section, "rabbit_transient_quorum_queue", "true");
    set(&mut section, "use_queue_manager", "true");
    if inputs.messaging_tls {
        set(&mut section, "ssl", "true");
        set(&mut section, "ssl_ca_file", ca_file);
    }
    section
}

/// `[vnc]`: enabled from the console switch (rendered as `false` rather than left out, since
/// a compute's default is true) and novncproxy_base_url while the proxy runs.
fn vnc(inputs: &SharedInputs) -> Section {
    let mut section = Section::new();
    set(&mut section, "enabled", flag(inputs.console.enabled));
    set_opt(
        &mut section,
        "novncproxy_base_url",
        inputs.console.base_url.as_deref(),
    );
    section
}

/// Where a document's reader finds the CA bundles: the broker's and spec.tls's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CaFiles {
    /// `[oslo_messaging_rabbit] ssl_ca_file`.
    pub messaging: &'static str,
    /// Every client section's `cafile` and `[barbican] verify_ssl_path`.
    pub endpoints: &'static str,
}

impl CaFiles {
    /// The control plane's mounts.
    pub(crate) const CONTROL_PLANE: Self = Self {
        messaging: RABBITMQ_CA_FILE,
        endpoints: ENDPOINT_CA_FILE,
    };
    /// The compute contract Secret's keys, as a pool mounts it.
    pub(crate) const COMPUTE: Self = Self {
        messaging: COMPUTE_CA_FILE,
        endpoints: COMPUTE_ENDPOINT_CA_FILE,
    };
}

/// The sections that verify Keystone or a service endpoint with keystoneauth's `cafile`.
const CAFILE_SECTIONS: [&str; 6] = [
    "keystone_authtoken",
    "service_user",
    "placement",
    "neutron",
    "glance",
    "cinder",
];

/// While spec.tls is set, every client section that exists verifies its endpoints against
/// the mounted bundle (castellan's `[barbican]` names it verify_ssl_path).
fn endpoint_ca(doc: &mut IniDocument, inputs: &SharedInputs, ca_file: &str) {
    if !inputs.endpoint_tls {
        return;
    }
    for section in CAFILE_SECTIONS {
        if doc.has_section(section) {
            doc.set(section, "cafile", ca_file);
        }
    }
    if doc.has_section("barbican") {
        doc.set("barbican", "verify_ssl_path", ca_file);
    }
}

/// The sections nova.conf and nova-compute.conf both carry, from one set of helpers: `[DEFAULT]`
/// (use_stderr, debug), `[keystone_authtoken]` (without memcached_servers), `[service_user]`,
/// `[placement]` (without timeout), `[neutron]`, `[glance]`, `[oslo_messaging_rabbit]`,
/// `[oslo_messaging_notifications]`, `[upgrade_levels]`, `[vnc]`, and `[cinder]`,
/// `[key_manager]`, `[barbican]` under their switches.
pub(crate) fn shared_document(
    inputs: &SharedInputs,
    addressing: &Addressing<'_>,
    ca_files: CaFiles,
) -> IniDocument {
    let mut doc = IniDocument::new();
    doc.set("DEFAULT", "use_stderr", "true");
    doc.set("DEFAULT", "debug", flag(inputs.debug));
    doc.insert_section("keystone_authtoken", keystone_authtoken(inputs, addressing));
    doc.insert_section("service_user", service_user(inputs, addressing));
    doc.insert_section("placement", placement(inputs, addressing));
    doc.insert_section("neutron", neutron(inputs, addressing));
    doc.insert_section("glance", glance(inputs, addressing));
    if let Some(section) = cinder(inputs, addressing) {
        doc.insert_section("cinder", section);
    }
    if let Some((key_manager, barbican)) = key_manager_and_barbican(inputs, addressing) {
        doc.insert_section("key_manager", key_manager);
        doc.insert_section("barbican", barbican);
    }
    doc.insert_section(
        "oslo_messaging_rabbit",
        oslo_messaging_rabbit(inputs, ca_files.messaging),
    );
    endpoint_ca(&mut doc, inputs, ca_files.endpoints);
    doc.set("oslo_messaging_notifications", "driver", "noop");
    doc.set("upgrade_levels", "compute", "auto");
    doc.insert_section("vnc", vnc(inputs));
    doc
}

/// `[keystone_authtoken] memcached_servers` and `[cache] memcache_servers`: a managed cache's
/// bare Service name at port 11211, or the brownfield servers joined with `,`.
pub(crate) fn memcached_servers(spec: &NovaSpec) -> Result<String, RenderError> {
    let cache = &spec.cache;
    let servers = cache.servers.as_deref().unwrap_or_default();
    match (&cache.cluster_ref, servers.is_empty()) {
        (Some(cluster), true) => Ok(format!(
            "{}:{MEMCACHED_PORT}",
            verbatim("spec.cache.clusterRef.name", &cluster.name)?
        )),
        (None, false) => {
            for (index, server) in servers.iter().enumerate() {
                verbatim(&format!("spec.cache.servers[{index}]"), server)?;
            }
            Ok(servers.join(","))
        }
        _ => Err(RenderError::InvalidField {
            field: "spec.cache",
            reason: "exactly one of clusterRef or servers must be set",
        }),
    }
}

/// nova.conf before the extraConfig merge: the shared sections addressed in-cluster, plus
/// what only the control plane reads.
pub(crate) fn operator_document(
    spec: &NovaSpec,
    inputs: &SharedInputs,
) -> Result<IniDocument, RenderError> {
    let memcached = memcached_servers(spec)?;
    let backend = spec
        .cache
        .backend
        .as_deref()
        .filter(|b| !b.is_empty())
        .unwrap_or(DEFAULT_CACHE_BACKEND);
    let backend = verbatim("spec.cache.backend", backend)?;
    let default_log_levels = logging::default_log_levels(spec)?;

    let mut doc = shared_document(
        inputs,
        &Addressing::in_cluster(inputs),
        CaFiles::CONTROL_PLANE,
    );
    doc.set("DEFAULT", "state_path", STATE_PATH);
    doc.set_opt(
        "DEFAULT",
        "default_log_levels",
        default_log_levels.as_deref(),
    );
    if logging::is_json(spec) {
        doc.set("DEFAULT", "log_config_append", LOG_CONFIG_APPEND);
    }
    doc.set("api", "local_metadata_per_cell", "false");
    doc.set("api_database", "connection", DATABASE_PLACEHOLDER);
    doc.set("database", "connection", DATABASE_PLACEHOLDER);
    doc.set(
        "keystone_authtoken",
        "memcached_servers",
        memcached.as_str(),
    );
    doc.set("placement", "timeout", PLACEMENT_TIMEOUT);
    doc.set("oslo_concurrency", "lock_path", LOCK_PATH);
    doc.set("cache", "enabled", "true");
    doc.set("cache", "backend", backend);
    doc.set("cache", "memcache_servers", memcached);
    doc.set("scheduler", "discover_hosts_in_cells_interval", "300");
    doc.set("filter_scheduler", "build_failure_weight_multiplier", "0");
    doc.set(
        "filter_scheduler",
        "shuffle_best_same_weighed_hosts",
        "true",
    );
    Ok(doc)
}
