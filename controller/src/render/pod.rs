//! The building blocks every pod template of a Nova is made of (`nova-crd.txt`, "Config
//! directories and mounts", "Environment overrides"; `common-types.md` DeploymentSpec, JobSpec
//! and "Resource defaults"): the environment overrides, the config and scratch mounts, the
//! digest annotations, the restricted security context, the resources, the node placement and
//! the default topology spread.
//!
//! One [`Role`] per process kind: the five long-running roles and [`Role::Job`], which the
//! migration Jobs and the archive CronJob share. Every builder is a pure function of the spec
//! and the values earlier steps resolved ([`PodInputs`]), and every list comes out in a fixed
//! order, so a template rebuilt from an unchanged CR is byte-identical to the live one and no
//! workload rolls on a reordered slice.
//!
//! Longer than 500 lines on purpose: the building blocks are one vocabulary every role uses, and
//! split by role they would import each other.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, ExecAction, KeyToPath, Lifecycle, LifecycleHandler, LocalObjectReference,
    PodSecurityContext, ProjectedVolumeSource, ResourceRequirements, SeccompProfile,
    SecretKeySelector, SecretProjection, SecurityContext, Toleration, TopologySpreadConstraint,
    Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use nova_api::defaults::{
    DEFAULT_GRACE_SECONDS, DEFAULT_PRE_STOP_SECONDS, DEFAULT_UWSGI_PROCESSES,
    DEFAULT_UWSGI_THREADS, DEFAULT_WORKERS, RPC_DRAIN_GRACE_SECONDS, SHARED_REPLICAS,
    SINGLE_REPLICA,
};
use nova_api::effective::{secret_key, secret_keys};
use nova_api::labels::component;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{DatabaseSpec, DeploymentSpec, NovaSpec, SecretRefSpec, UWSGISpec};

use super::dsn::tls_enabled;
use super::logging::is_json;
use super::paths::{API_TLS_MOUNT, CELL_TLS_MOUNT, CONNECTION_KEY};
use super::paths::{
    CONDUCTOR_CONF, CONDUCTOR_CONFIG_DIR, CONFIG_DIR, ENDPOINT_CA_DIR, LOGGING_INI, METADATA_CONF,
    NOVA_CONF, NOVNCPROXY_CONF, NOVNCPROXY_CONFIG_DIR, RABBITMQ_CA_DIR, SCHEDULER_CONF,
    SCHEDULER_CONFIG_DIR, STATE_PATH,
};

/// The "openstack" UID and GID every process runs as, and the pod's fsGroup.
pub const OPENSTACK_ID: i64 = 42424;
/// The CPU request of every container whose block names no CPU.
pub const CPU_REQUEST: &str = "70m";
/// The key of the derived transport-URL Secret.
pub const TRANSPORT_URL_KEY: &str = "transport_url";
/// Writable scratch beside the read-only root filesystem.
pub const TMP_DIR: &str = "/tmp";
/// The mode the database TLS files are projected with (0400); fsGroup makes them readable.
pub const DB_TLS_MODE: i32 = 0o400;

/// The pod-template annotations of the credential digests and the installed release.
pub mod annotations {
    /// The nova_api DSN digest.
    pub const API_DB_CONNECTION: &str = "nova.c5c3.io/api-db-connection-hash";
    /// The cell DSN digest.
    pub const DB_CONNECTION: &str = "nova.c5c3.io/db-connection-hash";
    /// The service-user password digest.
    pub const AUTHTOKEN: &str = "nova.c5c3.io/authtoken-hash";
    /// The transport URL digest.
    pub const TRANSPORT_URL: &str = "nova.c5c3.io/transport-url-hash";
    /// The metadata shared secret digest (metadata pods only).
    pub const METADATA_SECRET: &str = "nova.c5c3.io/metadata-secret-hash";
    /// status.installedRelease (every role but the API).
    pub const INSTALLED_RELEASE: &str = "nova.c5c3.io/installed-release";
}

/// A Nova pod's metadata: the operator's labels and annotations, with `spec.podMetadata`'s
/// beside them. The webhook refuses a spec key the operator sets; should one get past it, the
/// operator's value wins, so a selector or a digest is never replaced. Empty maps are left out.
pub fn pod_metadata(
    spec: &NovaSpec,
    mut labels: BTreeMap<String, String>,
    mut annotations: BTreeMap<String, String>,
) -> ObjectMeta {
    let extra = spec.pod_metadata.as_ref();
    for (key, value) in extra.and_then(|m| m.labels.as_ref()).into_iter().flatten() {
        labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    for (key, value) in extra
        .and_then(|m| m.annotations.as_ref())
        .into_iter()
        .flatten()
    {
        annotations
            .entry(key.clone())
            .or_insert_with(|| value.clone());
    }
    ObjectMeta {
        labels: (!labels.is_empty()).then_some(labels),
        annotations: (!annotations.is_empty()).then_some(annotations),
        ..Default::default()
    }
}

/// A CR's `spec.imagePullSecrets`, as a pod spec takes them (left out when none are named).
pub fn image_pull_secrets(
    named: Option<&[LocalObjectReference]>,
) -> Option<Vec<LocalObjectReference>> {
    named.filter(|s| !s.is_empty()).map(<[_]>::to_vec)
}

/// `spec.extraVolumes`, after the operator's volumes in every pod the Nova runs.
fn extra_volumes(spec: &NovaSpec) -> impl Iterator<Item = Volume> + '_ {
    spec.extra_volumes.iter().flatten().cloned()
}

/// `spec.extraVolumeMounts`, after the operator's mounts in every nova container. The webhook
/// keeps them off the operator's volume names and paths.
fn extra_volume_mounts(spec: &NovaSpec) -> impl Iterator<Item = VolumeMount> + '_ {
    spec.extra_volume_mounts.iter().flatten().cloned()
}

/// The credential digests stamped on pod templates; an empty one is not stamped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Digests {
    /// `nova.c5c3.io/api-db-connection-hash`.
    pub api_db_connection: String,
    /// `nova.c5c3.io/db-connection-hash`.
    pub db_connection: String,
    /// `nova.c5c3.io/authtoken-hash`.
    pub authtoken: String,
    /// `nova.c5c3.io/transport-url-hash`.
    pub transport_url: String,
    /// `nova.c5c3.io/metadata-secret-hash`.
    pub metadata_secret: String,
}

/// The process kind a pod template runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// nova-api under uWSGI.
    Api,
    /// The metadata API under uWSGI.
    Metadata,
    /// nova-scheduler.
    Scheduler,
    /// nova-conductor.
    Conductor,
    /// nova-novncproxy.
    NovncProxy,
    /// A migration Job or the archive CronJob (nova-manage).
    Job,
}

impl Role {
    /// The five long-running roles, in the order an upgrade rolls them.
    pub const WORKLOADS: [Role; 5] = [
        Role::Conductor,
        Role::Scheduler,
        Role::Metadata,
        Role::NovncProxy,
        Role::Api,
    ];

    /// The `app.kubernetes.io/component` of the role's pods (None for Jobs, whose builders
    /// name their own maintenance component).
    pub fn component(self) -> Option<&'static str> {
        match self {
            Role::Api => Some(component::API),
            Role::Metadata => Some(component::METADATA),
            Role::Scheduler => Some(component::SCHEDULER),
            Role::Conductor => Some(component::CONDUCTOR),
            Role::NovncProxy => Some(component::NOVNCPROXY),
            Role::Job => None,
        }
    }

    /// The Deployment name of a long-running role of the Nova `name`.
    pub fn deployment_name(self, name: &str) -> Option<String> {
        let names = NovaNames::new(name);
        match self {
            Role::Api => Some(names.api()),
            Role::Metadata => Some(names.metadata()),
            Role::Scheduler => Some(names.scheduler()),
            Role::Conductor => Some(names.conductor()),
            Role::NovncProxy => Some(names.novncproxy()),
            Role::Job => None,
        }
    }

    /// The container name of a long-running role (the process it runs).
    pub fn container_name(self) -> &'static str {
        match self {
            Role::Api => "nova-api",
            Role::Metadata => "nova-metadata",
            Role::Scheduler => "nova-scheduler",
            Role::Conductor => "nova-conductor",
            Role::NovncProxy => "nova-novncproxy",
            Role::Job => "nova-manage",
        }
    }

    /// The role's overlay: its directory and the one ConfigMap key mounted there.
    pub fn overlay(self) -> Option<(&'static str, &'static str)> {
        match self {
            Role::Scheduler => Some((SCHEDULER_CONFIG_DIR, SCHEDULER_CONF)),
            Role::Conductor => Some((CONDUCTOR_CONFIG_DIR, CONDUCTOR_CONF)),
            Role::NovncProxy => Some((NOVNCPROXY_CONFIG_DIR, NOVNCPROXY_CONF)),
            Role::Api | Role::Metadata | Role::Job => None,
        }
    }

    /// Whether the role opens a nova_api connection (every role but the console proxy).
    fn reads_api_database(self) -> bool {
        self != Role::NovncProxy
    }

    /// Whether the role carries `nova.c5c3.io/installed-release` (every long-running role but
    /// the API; a Job would re-run on its own promotion).
    fn carries_release(self) -> bool {
        !matches!(self, Role::Api | Role::Job)
    }

    /// The role's pod-level block, when the CR has one.
    pub fn deployment(self, spec: &NovaSpec) -> Option<&DeploymentSpec> {
        match self {
            Role::Api => spec.api.as_ref().and_then(|a| a.deployment.as_ref()),
            Role::Metadata => spec.metadata.deployment.as_ref(),
            Role::Scheduler => spec.scheduler.as_ref().and_then(|s| s.deployment.as_ref()),
            Role::Conductor => spec.conductor.as_ref().and_then(|c| c.deployment.as_ref()),
            Role::NovncProxy => spec
                .console_proxy
                .as_ref()
                .and_then(|c| c.deployment.as_ref()),
            Role::Job => None,
        }
    }

    /// The role's uWSGI block (the two HTTP front ends).
    pub fn uwsgi(self, spec: &NovaSpec) -> Option<&UWSGISpec> {
        match self {
            Role::Api => spec.api.as_ref().and_then(|a| a.uwsgi.as_ref()),
            Role::Metadata => spec.metadata.uwsgi.as_ref(),
            _ => None,
        }
    }

    /// The replica count of a long-running role: the block's own count, the role's default for
    /// an absent block or a count of zero (1, or 3 for the API), and the shared schema default
    /// 3 for a block without a count, as the API server would have materialized it.
    pub fn replicas(self, spec: &NovaSpec) -> i32 {
        let own = if self == Role::Api {
            SHARED_REPLICAS
        } else {
            SINGLE_REPLICA
        };
        match self.deployment(spec) {
            None => own,
            Some(block) => match block.replicas {
                None => SHARED_REPLICAS,
                Some(n) if n <= 0 => own,
                Some(n) => n,
            },
        }
    }

    /// The pod's grace period: the block's value, else 200 seconds for the two roles that
    /// drain an RPC server and 30 for the rest.
    pub fn grace_seconds(self, spec: &NovaSpec) -> i64 {
        self.deployment(spec)
            .and_then(|d| d.termination_grace_period_seconds)
            .unwrap_or(match self {
                Role::Scheduler | Role::Conductor => RPC_DRAIN_GRACE_SECONDS,
                _ => DEFAULT_GRACE_SECONDS,
            })
    }

    /// The default memory of the role's container, `16Mi + N × 352Mi` with N the uWSGI
    /// processes (each thread beyond the first adding 32Mi per process), the workers, or 1.
    pub fn memory_mebibytes(self, spec: &NovaSpec) -> i64 {
        let (n, threads) = match self {
            Role::Api | Role::Metadata => {
                let uwsgi = self.uwsgi(spec);
                (
                    uwsgi
                        .and_then(|u| u.processes)
                        .unwrap_or(DEFAULT_UWSGI_PROCESSES),
                    uwsgi
                        .and_then(|u| u.threads)
                        .unwrap_or(DEFAULT_UWSGI_THREADS),
                )
            }
            Role::Scheduler => (
                spec.scheduler
                    .as_ref()
                    .and_then(|s| s.workers)
                    .unwrap_or(DEFAULT_WORKERS),
                1,
            ),
            Role::Conductor => (
                spec.conductor
                    .as_ref()
                    .and_then(|c| c.workers)
                    .unwrap_or(DEFAULT_WORKERS),
                1,
            ),
            Role::NovncProxy | Role::Job => (1, 1),
        };
        let (n, threads) = (i64::from(n.max(1)), i64::from(threads.max(1)));
        16 + n * (352 + (threads - 1) * 32)
    }
}

/// What the earlier steps resolved that a pod template carries.
#[derive(Clone, Copy, Debug)]
pub struct PodInputs<'a> {
    /// The Nova's name.
    pub name: &'a str,
    /// The Nova's spec.
    pub spec: &'a NovaSpec,
    /// The config ConfigMap the pods mount.
    pub config_map: &'a str,
    /// The credential digests.
    pub digests: &'a Digests,
    /// status.installedRelease, once a release is installed.
    pub installed_release: Option<&'a str>,
    /// The broker port the bus workloads probe.
    pub broker_port: Option<u16>,
}

/// `var` from key `key` of Secret `secret`.
pub fn from_secret(var: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: var.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn plain(var: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: var.to_owned(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// The environment of `role`, in the fixed order of the spec's table: every credential as an
/// oslo.config override from its Secret, then `NOVA_AMQP_PORT` for the two bus workloads
/// while the broker port is resolved.
pub fn env(inputs: &PodInputs<'_>, role: Role) -> Vec<EnvVar> {
    let names = NovaNames::new(inputs.name);
    let spec = inputs.spec;
    let user = &spec.service_user.secret_ref;
    let user_key = secret_key(user, secret_keys::SERVICE_USER_PASSWORD);
    let mut env = vec![
        from_secret(
            "OS_DEFAULT__TRANSPORT_URL",
            &names.transport_url(),
            TRANSPORT_URL_KEY,
        ),
        from_secret(
            "OS_DATABASE__CONNECTION",
            &names.db_connection(),
            CONNECTION_KEY,
        ),
    ];
    if role.reads_api_database() {
        env.push(from_secret(
            "OS_API_DATABASE__CONNECTION",
            &names.api_db_connection(),
            CONNECTION_KEY,
        ));
    }
    for var in [
        "OS_KEYSTONE_AUTHTOKEN__PASSWORD",
        "OS_SERVICE_USER__PASSWORD",
        "OS_PLACEMENT__PASSWORD",
        "OS_NEUTRON__PASSWORD",
    ] {
        env.push(from_secret(var, &user.name, user_key));
    }
    let cinder = spec
        .endpoints
        .as_ref()
        .and_then(|e| e.cinder.as_ref())
        .and_then(|c| c.enabled)
        .unwrap_or(false);
    if cinder {
        env.push(from_secret("OS_CINDER__PASSWORD", &user.name, user_key));
    }
    if role == Role::Metadata {
        let shared = &spec.metadata.shared_secret_ref;
        env.push(from_secret(
            "OS_NEUTRON__METADATA_PROXY_SHARED_SECRET",
            &shared.name,
            secret_key(shared, secret_keys::METADATA_SHARED_SECRET),
        ));
    }
    if matches!(role, Role::Scheduler | Role::Conductor)
        && let Some(port) = inputs.broker_port
    {
        env.push(plain("NOVA_AMQP_PORT", port.to_string()));
    }
    env
}

/// The pod-template annotations of `role`: the credential digests it consumes and, on every
/// long-running role but the API, the installed release. Each is stamped only while its value
/// is non-empty, so a pass that has not resolved it leaves the live annotation alone.
pub fn annotations(inputs: &PodInputs<'_>, role: Role) -> BTreeMap<String, String> {
    let d = inputs.digests;
    let mut stamped = vec![
        (annotations::API_DB_CONNECTION, d.api_db_connection.as_str()),
        (annotations::DB_CONNECTION, d.db_connection.as_str()),
        (annotations::AUTHTOKEN, d.authtoken.as_str()),
        (annotations::TRANSPORT_URL, d.transport_url.as_str()),
    ];
    if role == Role::Metadata {
        stamped.push((annotations::METADATA_SECRET, d.metadata_secret.as_str()));
    }
    if role.carries_release() {
        stamped.push((
            annotations::INSTALLED_RELEASE,
            inputs.installed_release.unwrap_or_default(),
        ));
    }
    stamped
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A volume and where the container mounts it.
#[derive(Clone, Debug, PartialEq)]
pub struct Mount {
    /// The pod volume.
    pub volume: Volume,
    /// The container's mount of it.
    pub mount: VolumeMount,
}

fn config_items(keys: &[&str]) -> Vec<KeyToPath> {
    keys.iter()
        .map(|k| KeyToPath {
            key: (*k).to_owned(),
            path: (*k).to_owned(),
            ..Default::default()
        })
        .collect()
}

fn config_volume(name: &str, config_map: &str, items: Option<Vec<KeyToPath>>, path: &str) -> Mount {
    Mount {
        volume: Volume {
            name: name.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map.to_owned(),
                items,
                ..Default::default()
            }),
            ..Default::default()
        },
        mount: VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            read_only: Some(true),
            ..Default::default()
        },
    }
}

fn scratch(name: &str, path: &str) -> Mount {
    Mount {
        volume: Volume {
            name: name.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
        mount: VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            ..Default::default()
        },
    }
}

/// The `(key, path)` files of one Secret in a projected volume.
fn secret_files(secret: &SecretRefSpec, paths: &[(&str, &str)]) -> VolumeProjection {
    VolumeProjection {
        secret: Some(SecretProjection {
            name: secret.name.clone(),
            items: Some(
                paths
                    .iter()
                    .map(|(key, path)| KeyToPath {
                        key: (*key).to_owned(),
                        path: (*path).to_owned(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The key of the CA bundle in a database block's CA Secret.
const CA_KEY: &str = "ca.crt";

/// The database TLS files of one block (ca.crt from the CA bundle, tls.crt and tls.key from
/// the client keypair), projected at 0400, while that block's TLS is enabled.
fn db_tls(volume: &str, block: &DatabaseSpec, path: &str) -> Option<Mount> {
    tls_enabled(block)?;
    let tls = block.tls.as_ref()?;
    let ca = secret_key(&tls.ca_bundle_secret_ref, CA_KEY);
    Some(Mount {
        volume: Volume {
            name: volume.to_owned(),
            projected: Some(ProjectedVolumeSource {
                default_mode: Some(DB_TLS_MODE),
                sources: Some(vec![
                    secret_files(&tls.ca_bundle_secret_ref, &[(ca, CA_KEY)]),
                    secret_files(
                        &tls.client_cert_secret_ref,
                        &[("tls.crt", "tls.crt"), ("tls.key", "tls.key")],
                    ),
                ]),
            }),
            ..Default::default()
        },
        mount: VolumeMount {
            name: volume.to_owned(),
            mount_path: path.trim_end_matches('/').to_owned(),
            read_only: Some(true),
            ..Default::default()
        },
    })
}

/// The volumes and mounts of `role`, in a fixed order: the shared config directory (the
/// selected files for a long-running role, the whole ConfigMap for a Job), the role's overlay
/// directory, `/var/lib/nova`, `/tmp`, the database TLS directories of the blocks with TLS on
/// (the nova_api one only for roles that open that connection), the broker CA while the bus is
/// TLS, and spec.tls's CA bundle while it is set.
pub fn mounts(inputs: &PodInputs<'_>, role: Role) -> Vec<Mount> {
    let spec = inputs.spec;
    let shared_items = (role != Role::Job).then(|| {
        let mut keys = vec![NOVA_CONF];
        if is_json(spec) {
            keys.push(LOGGING_INI);
        }
        if role == Role::Metadata {
            keys.push(METADATA_CONF);
        }
        config_items(&keys)
    });
    let mut mounts = vec![config_volume(
        "config",
        inputs.config_map,
        shared_items,
        CONFIG_DIR,
    )];
    if let Some((dir, key)) = role.overlay() {
        mounts.push(config_volume(
            "overlay",
            inputs.config_map,
            Some(config_items(&[key])),
            dir,
        ));
    }
    mounts.push(scratch("state", STATE_PATH));
    mounts.push(scratch("tmp", TMP_DIR));
    if role.reads_api_database() {
        mounts.extend(db_tls("db-tls-api", &spec.api_database, API_TLS_MOUNT));
    }
    mounts.extend(db_tls("db-tls-cell", &spec.database, CELL_TLS_MOUNT));
    if let Some(tls) = &spec.messaging.tls {
        let key = secret_key(&tls.ca_bundle_secret_ref, secret_keys::MESSAGING_CA);
        mounts.push(ca_bundle(
            "rabbitmq-ca",
            &tls.ca_bundle_secret_ref,
            key,
            RABBITMQ_CA_DIR,
        ));
    }
    if let Some(tls) = &spec.tls {
        let key = secret_key(&tls.ca_bundle_secret_ref, secret_keys::ENDPOINT_CA);
        mounts.push(ca_bundle(
            "endpoint-ca",
            &tls.ca_bundle_secret_ref,
            key,
            ENDPOINT_CA_DIR,
        ));
    }
    mounts
}

/// A CA bundle's `key` of `secret`, as `ca.crt` in the directory `path`.
fn ca_bundle(volume: &str, secret: &SecretRefSpec, key: &str, path: &str) -> Mount {
    Mount {
        volume: Volume {
            name: volume.to_owned(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![secret_files(secret, &[(key, CA_KEY)])]),
                ..Default::default()
            }),
            ..Default::default()
        },
        mount: VolumeMount {
            name: volume.to_owned(),
            mount_path: path.to_owned(),
            read_only: Some(true),
            ..Default::default()
        },
    }
}

/// The restricted container security context: non-root as the openstack UID/GID, no
/// privilege escalation, a read-only root filesystem, no capabilities, the runtime's seccomp
/// profile.
pub fn container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Default::default()
        }),
        read_only_root_filesystem: Some(true),
        run_as_group: Some(OPENSTACK_ID),
        run_as_non_root: Some(true),
        run_as_user: Some(OPENSTACK_ID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The pod security context: fsGroup 42424, so projected files at 0400 stay readable.
pub fn pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        fs_group: Some(OPENSTACK_ID),
        ..Default::default()
    }
}

fn names(list: Option<&BTreeMap<String, Quantity>>, resource: &str) -> bool {
    list.is_some_and(|l| l.contains_key(resource))
}

/// The container resources: a copy of what the block names, plus, per resource, a 70m CPU
/// request when it names no CPU at all and `memory_mebibytes` as memory request and limit when
/// it names no memory at all. Anything named (a zero included) is kept as written.
pub fn resources(
    written: Option<&ResourceRequirements>,
    memory_mebibytes: i64,
) -> ResourceRequirements {
    resources_defaulted(written, CPU_REQUEST, memory_mebibytes)
}

/// [`resources`] with `cpu_request` as the CPU default.
pub fn resources_defaulted(
    written: Option<&ResourceRequirements>,
    cpu_request: &str,
    memory_mebibytes: i64,
) -> ResourceRequirements {
    let mut out = written.cloned().unwrap_or_default();
    let named = |res: &str, out: &ResourceRequirements| {
        names(out.requests.as_ref(), res) || names(out.limits.as_ref(), res)
    };
    if !named("cpu", &out) {
        out.requests
            .get_or_insert_with(BTreeMap::new)
            .insert("cpu".to_owned(), Quantity(cpu_request.to_owned()));
    }
    if !named("memory", &out) {
        let memory = Quantity(format!("{memory_mebibytes}Mi"));
        out.requests
            .get_or_insert_with(BTreeMap::new)
            .insert("memory".to_owned(), memory.clone());
        out.limits
            .get_or_insert_with(BTreeMap::new)
            .insert("memory".to_owned(), memory);
    }
    out
}

/// The resources of a long-running role's container.
pub fn role_resources(spec: &NovaSpec, role: Role) -> ResourceRequirements {
    resources(
        role.deployment(spec).and_then(|d| d.resources.as_ref()),
        role.memory_mebibytes(spec),
    )
}

/// The preStop hook sleeping `seconds` (the block's value, 5 when unset); none at 0.
pub fn pre_stop(block: Option<&DeploymentSpec>) -> Option<Lifecycle> {
    let seconds = block
        .and_then(|d| d.pre_stop_sleep_seconds)
        .unwrap_or(DEFAULT_PRE_STOP_SECONDS);
    (seconds > 0).then(|| Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec![
                    "/bin/sh".to_owned(),
                    "-c".to_owned(),
                    format!("sleep {seconds}"),
                ]),
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The topology spread: the block's constraints verbatim when set (an empty list included),
/// else one zone and one hostname constraint over the Deployment's pod selector.
pub fn topology_spread(
    block: Option<&DeploymentSpec>,
    selector: &BTreeMap<String, String>,
) -> Vec<TopologySpreadConstraint> {
    if let Some(written) = block.and_then(|d| d.topology_spread_constraints.as_ref()) {
        return written.clone();
    }
    ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
        .into_iter()
        .map(|key| TopologySpreadConstraint {
            label_selector: Some(LabelSelector {
                match_labels: Some(selector.clone()),
                ..Default::default()
            }),
            max_skew: 1,
            topology_key: key.to_owned(),
            when_unsatisfiable: "ScheduleAnyway".to_owned(),
            ..Default::default()
        })
        .collect()
}

/// Where a pod runs and at what priority.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    /// spec.nodeSelector.
    pub node_selector: Option<BTreeMap<String, String>>,
    /// spec.tolerations.
    pub tolerations: Option<Vec<Toleration>>,
    /// spec.affinity.
    pub affinity: Option<Affinity>,
    /// spec.priorityClassName.
    pub priority_class_name: Option<String>,
}

/// A Deployment block's placement, as written.
pub fn deployment_placement(block: Option<&DeploymentSpec>) -> Placement {
    let Some(block) = block else {
        return Placement::default();
    };
    Placement {
        node_selector: block
            .placement
            .node_selector
            .clone()
            .filter(|m| !m.is_empty()),
        tolerations: block
            .placement
            .tolerations
            .clone()
            .filter(|t| !t.is_empty()),
        affinity: block.placement.affinity.clone(),
        priority_class_name: block.priority_class_name.clone().filter(|p| !p.is_empty()),
    }
}

/// The placement of the Job and CronJob pods: spec.jobs where it says something, the API
/// Deployment's where it is unset (its node affinity only, since its pod (anti-)affinity
/// targets API pods), nothing where spec.jobs opts out with an empty value.
pub fn job_placement(spec: &NovaSpec) -> Placement {
    let api = deployment_placement(Role::Api.deployment(spec));
    let jobs = spec.jobs.as_ref();
    let placement = jobs.map(|j| &j.placement);
    let affinity = match placement.and_then(|p| p.affinity.as_ref()) {
        Some(own) => Some(own.clone()),
        None => api.affinity.and_then(|a| {
            a.node_affinity.map(|node| Affinity {
                node_affinity: Some(node),
                ..Default::default()
            })
        }),
    };
    Placement {
        node_selector: placement
            .and_then(|p| p.node_selector.clone())
            .or(api.node_selector)
            .filter(|m| !m.is_empty()),
        tolerations: placement
            .and_then(|p| p.tolerations.clone())
            .or(api.tolerations)
            .filter(|t| !t.is_empty()),
        affinity: affinity.filter(|a| a != &Affinity::default()),
        priority_class_name: jobs
            .and_then(|j| j.priority_class_name.clone())
            .or(api.priority_class_name)
            .filter(|p| !p.is_empty()),
    }
}

/// The resources of a Job or CronJob container: spec.jobs.resources with the per-resource
/// defaults (70m CPU request, 368Mi memory request and limit).
pub fn job_resources(spec: &NovaSpec) -> ResourceRequirements {
    resources(
        spec.jobs.as_ref().and_then(|j| j.resources.as_ref()),
        Role::Job.memory_mebibytes(spec),
    )
}

/// The nova-image container of `role` running `command`: image and pull policy from
/// spec.image, the role's environment (with `extra_env` after it) and mounts, and the
/// restricted security context. Probes, ports, resources and the preStop hook are the
/// caller's.
pub fn container(
    inputs: &PodInputs<'_>,
    role: Role,
    command: Vec<String>,
    extra_env: Vec<EnvVar>,
) -> Container {
    let mut env = env(inputs, role);
    env.extend(extra_env);
    Container {
        name: role.container_name().to_owned(),
        image: Some(inputs.spec.image.reference()),
        image_pull_policy: Some(inputs.spec.image.pull_policy().to_owned()),
        command: Some(command),
        env: Some(env),
        volume_mounts: Some(
            mounts(inputs, role)
                .into_iter()
                .map(|m| m.mount)
                .chain(extra_volume_mounts(inputs.spec))
                .collect(),
        ),
        security_context: Some(container_security_context()),
        ..Default::default()
    }
}

/// The pod volumes of `role`, in the order [`mounts`] gives them, then `spec.extraVolumes`.
pub fn volumes(inputs: &PodInputs<'_>, role: Role) -> Vec<Volume> {
    mounts(inputs, role)
        .into_iter()
        .map(|m| m.volume)
        .chain(extra_volumes(inputs.spec))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use k8s_openapi::api::core::v1::{NodeAffinity, NodeSelector, PodAffinity};
    use nova_api::v1alpha1::{
        DatabaseTLSMode, DatabaseTLSSpec, JobSpec, LogFormat, LoggingSpec, MessagingTLSSpec,
        NodePlacementSpec, NovaEndpointsSpec, NovaSchedulerSpec, OptionalEndpointSpec,
    };
    use pretty_assertions::assert_eq;

    fn digests() -> Digests {
        Digests {
            api_db_connection: "a".into(),
            db_connection: "c".into(),
            authtoken: "k".into(),
            transport_url: "t".into(),
            metadata_secret: "m".into(),
        }
    }

    fn with<R>(spec: &NovaSpec, digests: &Digests, f: impl FnOnce(&PodInputs<'_>) -> R) -> R {
        f(&PodInputs {
            name: "nova",
            spec,
            config_map: "nova-config-12345678",
            digests,
            installed_release: Some("2026.1"),
            broker_port: Some(5672),
        })
    }

    fn env_names(spec: &NovaSpec, role: Role) -> Vec<String> {
        with(spec, &digests(), |i| env(i, role))
            .into_iter()
            .map(|e| e.name)
            .collect()
    }

    fn mount_paths(spec: &NovaSpec, role: Role) -> Vec<(String, String)> {
        with(spec, &digests(), |i| mounts(i, role))
            .into_iter()
            .map(|m| (m.volume.name, m.mount.mount_path))
            .collect()
    }

    fn config_keys(spec: &NovaSpec, role: Role) -> Option<Vec<String>> {
        with(spec, &digests(), |i| volumes(i, role))[0]
            .config_map
            .as_ref()
            .and_then(|c| c.items.as_ref())
            .map(|items| items.iter().map(|i| i.key.clone()).collect())
    }

    const COMMON: [&str; 2] = ["OS_DEFAULT__TRANSPORT_URL", "OS_DATABASE__CONNECTION"];
    const PASSWORDS: [&str; 4] = [
        "OS_KEYSTONE_AUTHTOKEN__PASSWORD",
        "OS_SERVICE_USER__PASSWORD",
        "OS_PLACEMENT__PASSWORD",
        "OS_NEUTRON__PASSWORD",
    ];

    fn expected(api_db: bool, tail: &[&str]) -> Vec<String> {
        let mut names: Vec<&str> = COMMON.to_vec();
        if api_db {
            names.push("OS_API_DATABASE__CONNECTION");
        }
        names.extend(PASSWORDS);
        names.extend(tail);
        names.into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn every_pod_template_takes_the_pull_secrets_and_the_extra_metadata_beside_the_operators() {
        // A Deployment's and a Job's pod template.
        let templates = |spec: &NovaSpec| {
            with(spec, &digests(), |inputs| {
                (
                    super::super::workloads::pod_template(inputs, Role::Scheduler),
                    super::super::db_jobs::pod_template(
                        inputs,
                        "db-sync",
                        Vec::new(),
                        Vec::new(),
                        "Never",
                    ),
                )
            })
        };
        let mut spec = example().spec;
        let plain = templates(&spec);
        spec.image_pull_secrets = Some(vec![LocalObjectReference {
            name: "registry".into(),
        }]);
        spec.pod_metadata = Some(nova_api::v1alpha1::PodMetadataSpec {
            labels: Some(BTreeMap::from([
                ("sidecar.istio.io/inject".to_owned(), "true".to_owned()),
                (nova_api::labels::INSTANCE.to_owned(), "other".to_owned()),
            ])),
            annotations: Some(BTreeMap::from([(
                "vault.hashicorp.com/agent-inject".to_owned(),
                "true".to_owned(),
            )])),
        });
        let (deployment, job) = templates(&spec);
        for (template, before) in [(&deployment, &plain.0), (&job, &plain.1)] {
            let meta = template.metadata.clone().unwrap_or_default();
            let labels = meta.labels.unwrap_or_default();
            assert_eq!(labels["sidecar.istio.io/inject"], "true");
            assert_eq!(
                labels[nova_api::labels::INSTANCE],
                "nova",
                "the operator's label wins"
            );
            let annotations = meta.annotations.unwrap_or_default();
            assert_eq!(annotations["vault.hashicorp.com/agent-inject"], "true");
            let before_annotations = before.metadata.clone().unwrap_or_default().annotations;
            for (key, value) in before_annotations.unwrap_or_default() {
                assert_eq!(annotations[&key], value, "the operator's {key} stays");
            }
            let secrets = template
                .spec
                .as_ref()
                .and_then(|s| s.image_pull_secrets.clone());
            assert_eq!(secrets.unwrap_or_default()[0].name, "registry");
            assert!(
                before
                    .spec
                    .as_ref()
                    .is_some_and(|s| s.image_pull_secrets.is_none()),
                "none named, none set: an unchanged Nova's templates stay byte-identical"
            );
        }
    }

    #[test]
    fn every_nova_container_mounts_the_extra_volumes_after_the_operators() {
        let mut spec = example().spec;
        spec.extra_volumes = Some(vec![Volume {
            name: "corporate-ca".into(),
            secret: Some(k8s_openapi::api::core::v1::SecretVolumeSource {
                secret_name: Some("corporate-ca".into()),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        spec.extra_volume_mounts = Some(vec![VolumeMount {
            name: "corporate-ca".into(),
            mount_path: "/etc/ssl/corporate-ca".into(),
            read_only: Some(true),
            ..Default::default()
        }]);
        for role in Role::WORKLOADS.into_iter().chain([Role::Job]) {
            let (volumes, container) = with(&spec, &digests(), |i| {
                (volumes(i, role), container(i, role, Vec::new(), Vec::new()))
            });
            let operators = mount_paths(&spec, role).len();
            assert_eq!(volumes.len(), operators + 1, "{role:?}");
            assert_eq!(volumes[operators].name, "corporate-ca", "{role:?}");
            let mounts = container.volume_mounts.unwrap_or_default();
            assert_eq!(
                mounts[operators..],
                *spec.extra_volume_mounts.as_deref().unwrap_or_default(),
                "{role:?}"
            );
        }
    }

    #[test]
    fn the_operators_volumes_and_paths_are_the_ones_the_webhook_reserves() {
        let mut spec = example().spec;
        spec.api_database.tls = tls(DatabaseTLSMode::VerifyFull, "api-ca", "api-cert");
        spec.database.tls = tls(DatabaseTLSMode::Require, "cell-ca", "cell-cert");
        spec.messaging.tls = Some(MessagingTLSSpec {
            ca_bundle_secret_ref: SecretRefSpec {
                name: "bus-ca".into(),
                key: None,
            },
        });
        spec.tls = Some(nova_api::v1alpha1::NovaTLSSpec {
            ca_bundle_secret_ref: SecretRefSpec {
                name: "keystone-ca".into(),
                key: None,
            },
        });
        for role in Role::WORKLOADS.into_iter().chain([Role::Job]) {
            for (name, path) in mount_paths(&spec, role) {
                assert!(
                    nova_api::volumes::OPERATOR_VOLUMES.contains(&name.as_str()),
                    "{role:?}: volume {name} is missing from nova_api::volumes::OPERATOR_VOLUMES"
                );
                assert!(
                    nova_api::volumes::operator_path(&path).is_some(),
                    "{role:?}: {path} is under none of nova_api::volumes::OPERATOR_PATHS"
                );
            }
        }
    }

    #[test]
    fn the_operators_pod_annotations_share_the_prefix_the_webhook_reserves() {
        for key in [
            annotations::API_DB_CONNECTION,
            annotations::DB_CONNECTION,
            annotations::AUTHTOKEN,
            annotations::TRANSPORT_URL,
            annotations::METADATA_SECRET,
            annotations::INSTALLED_RELEASE,
        ] {
            assert!(
                key.starts_with(nova_api::labels::POD_ANNOTATION_PREFIX),
                "{key}"
            );
        }
    }

    #[test]
    fn every_role_gets_its_overrides_in_the_fixed_order() {
        let spec = example().spec;
        let cases: [(Role, Vec<String>); 6] = [
            (Role::Api, expected(true, &[])),
            (
                Role::Metadata,
                expected(true, &["OS_NEUTRON__METADATA_PROXY_SHARED_SECRET"]),
            ),
            (Role::Scheduler, expected(true, &["NOVA_AMQP_PORT"])),
            (Role::Conductor, expected(true, &["NOVA_AMQP_PORT"])),
            (Role::NovncProxy, expected(false, &[])),
            (Role::Job, expected(true, &[])),
        ];
        for (role, names) in cases {
            assert_eq!(env_names(&spec, role), names, "{role:?}");
        }
    }

    #[test]
    fn overrides_name_the_derived_and_referenced_secrets() {
        let spec = example().spec;
        let env = with(&spec, &digests(), |i| env(i, Role::Metadata));
        let source = |var: &str| {
            let e = env.iter().find(|e| e.name == var).expect(var);
            let r = e
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
                .expect("secret ref");
            (r.name.clone(), r.key.clone())
        };
        assert_eq!(
            source("OS_DEFAULT__TRANSPORT_URL"),
            ("nova-transport-url".into(), "transport_url".into())
        );
        assert_eq!(
            source("OS_DATABASE__CONNECTION"),
            ("nova-db-connection".into(), "connection".into())
        );
        assert_eq!(
            source("OS_API_DATABASE__CONNECTION"),
            ("nova-api-db-connection".into(), "connection".into())
        );
        assert_eq!(
            source("OS_NEUTRON__PASSWORD"),
            ("nova-keystone".into(), "password".into())
        );
        assert_eq!(
            source("OS_NEUTRON__METADATA_PROXY_SHARED_SECRET"),
            ("nova-metadata-secret".into(), "shared_secret".into())
        );
    }

    #[test]
    fn cinder_adds_its_password_and_the_amqp_port_waits_for_the_broker() {
        let mut spec = example().spec;
        spec.endpoints = Some(NovaEndpointsSpec {
            cinder: Some(OptionalEndpointSpec {
                enabled: Some(true),
                override_url: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            env_names(&spec, Role::Api),
            expected(true, &["OS_CINDER__PASSWORD"])
        );
        let conductor = with(&spec, &digests(), |i| env(i, Role::Conductor));
        let port = conductor.last().expect("port");
        assert_eq!(
            (port.name.as_str(), port.value.as_deref()),
            ("NOVA_AMQP_PORT", Some("5672"))
        );
        let unresolved = with(&spec, &digests(), |i| {
            env(
                &PodInputs {
                    broker_port: None,
                    ..*i
                },
                Role::Scheduler,
            )
        });
        assert!(unresolved.iter().all(|e| e.name != "NOVA_AMQP_PORT"));
    }

    #[test]
    fn digests_are_stamped_only_while_non_empty_and_release_skips_the_api() {
        let spec = example().spec;
        let keys = |role: Role, d: &Digests, release: Option<&str>| -> Vec<String> {
            with(&spec, d, |i| {
                let inputs = PodInputs {
                    installed_release: release,
                    ..*i
                };
                annotations(&inputs, role).into_keys().collect()
            })
        };
        let four = [
            annotations::API_DB_CONNECTION,
            annotations::AUTHTOKEN,
            annotations::DB_CONNECTION,
            annotations::TRANSPORT_URL,
        ];
        let full = digests();
        assert_eq!(keys(Role::Api, &full, Some("2026.1")), four);
        assert_eq!(keys(Role::Job, &full, Some("2026.1")), four);
        let mut metadata = four.to_vec();
        metadata.extend([annotations::INSTALLED_RELEASE, annotations::METADATA_SECRET]);
        metadata.sort_unstable();
        assert_eq!(keys(Role::Metadata, &full, Some("2026.1")), metadata);
        let mut scheduler = four.to_vec();
        scheduler.push(annotations::INSTALLED_RELEASE);
        scheduler.sort_unstable();
        assert_eq!(keys(Role::Scheduler, &full, Some("2026.1")), scheduler);
        assert_eq!(keys(Role::Scheduler, &full, None), four);
        let partial = Digests {
            authtoken: "k".into(),
            ..Default::default()
        };
        assert_eq!(
            keys(Role::Conductor, &partial, None),
            [annotations::AUTHTOKEN]
        );
        let values = with(&spec, &full, |i| annotations(i, Role::Metadata));
        assert_eq!(values[annotations::METADATA_SECRET], "m");
        assert_eq!(values[annotations::INSTALLED_RELEASE], "2026.1");
    }

    #[test]
    fn each_role_mounts_its_files_and_overlay_directory() {
        let spec = example().spec;
        let base = |overlay: Option<&str>| {
            let mut v = vec![("config".to_owned(), CONFIG_DIR.to_owned())];
            if let Some(dir) = overlay {
                v.push(("overlay".to_owned(), dir.to_owned()));
            }
            v.push(("state".to_owned(), STATE_PATH.to_owned()));
            v.push(("tmp".to_owned(), "/tmp".to_owned()));
            v
        };
        assert_eq!(mount_paths(&spec, Role::Api), base(None));
        assert_eq!(mount_paths(&spec, Role::Job), base(None));
        assert_eq!(
            mount_paths(&spec, Role::Scheduler),
            base(Some("/etc/nova/scheduler.conf.d"))
        );
        assert_eq!(
            mount_paths(&spec, Role::Conductor),
            base(Some("/etc/nova/conductor.conf.d"))
        );
        assert_eq!(
            mount_paths(&spec, Role::NovncProxy),
            base(Some("/etc/nova/novncproxy.conf.d"))
        );
        assert_eq!(
            config_keys(&spec, Role::Api),
            Some(vec!["nova.conf".into()])
        );
        assert_eq!(
            config_keys(&spec, Role::Metadata),
            Some(vec!["nova.conf".into(), "metadata.conf".into()])
        );
        assert_eq!(config_keys(&spec, Role::Job), None, "the whole ConfigMap");
        let overlay = with(&spec, &digests(), |i| volumes(i, Role::NovncProxy))[1].clone();
        let cm = overlay.config_map.expect("configMap");
        assert_eq!(cm.name, "nova-config-12345678");
        assert_eq!(cm.items.expect("items")[0].key, "novncproxy.conf");
        let shared = with(&spec, &digests(), |i| mounts(i, Role::Api))[0]
            .mount
            .clone();
        assert_eq!(shared.read_only, Some(true));
    }

    #[test]
    fn json_logging_adds_logging_ini_to_the_shared_directory() {
        let mut spec = example().spec;
        spec.logging = Some(LoggingSpec {
            format: Some(LogFormat::Json),
            ..Default::default()
        });
        assert_eq!(
            config_keys(&spec, Role::Metadata),
            Some(vec![
                "nova.conf".into(),
                "logging.ini".into(),
                "metadata.conf".into()
            ])
        );
    }

    fn tls(mode: DatabaseTLSMode, ca: &str, cert: &str) -> Option<DatabaseTLSSpec> {
        Some(DatabaseTLSSpec {
            mode: Some(mode),
            ca_bundle_secret_ref: SecretRefSpec {
                name: ca.into(),
                key: None,
            },
            client_cert_secret_ref: SecretRefSpec {
                name: cert.into(),
                key: None,
            },
        })
    }

    #[test]
    fn tls_mounts_appear_only_while_enabled() {
        let mut spec = example().spec;
        spec.api_database.tls = tls(DatabaseTLSMode::VerifyFull, "api-ca", "api-cert");
        spec.database.tls = tls(DatabaseTLSMode::Disabled, "cell-ca", "cell-cert");
        let names = |spec: &NovaSpec, role| -> Vec<String> {
            mount_paths(spec, role)
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(
            names(&spec, Role::Api),
            ["config", "state", "tmp", "db-tls-api"]
        );
        spec.database.tls = tls(DatabaseTLSMode::Require, "cell-ca", "cell-cert");
        spec.messaging.tls = Some(MessagingTLSSpec {
            ca_bundle_secret_ref: SecretRefSpec {
                name: "bus-ca".into(),
                key: Some("bundle.pem".into()),
            },
        });
        assert_eq!(
            mount_paths(&spec, Role::Job)[3..],
            [
                ("db-tls-api".to_owned(), "/etc/nova-db-tls/api".to_owned()),
                ("db-tls-cell".to_owned(), "/etc/nova-db-tls/cell".to_owned()),
                ("rabbitmq-ca".to_owned(), "/etc/rabbitmq-ca".to_owned()),
            ]
        );
        assert_eq!(
            names(&spec, Role::NovncProxy),
            [
                "config",
                "overlay",
                "state",
                "tmp",
                "db-tls-cell",
                "rabbitmq-ca"
            ],
            "the proxy opens no nova_api connection"
        );
        let volumes = with(&spec, &digests(), |i| volumes(i, Role::Api));
        let api_tls = volumes[3].projected.clone().expect("projected");
        assert_eq!(api_tls.default_mode, Some(0o400));
        let files: Vec<(String, String, String)> = api_tls
            .sources
            .expect("sources")
            .into_iter()
            .flat_map(|s| {
                let secret = s.secret.expect("secret");
                secret
                    .items
                    .expect("items")
                    .into_iter()
                    .map(move |i| (secret.name.clone(), i.key, i.path))
            })
            .collect();
        let f = |s: &str, k: &str, p: &str| (s.to_owned(), k.to_owned(), p.to_owned());
        assert_eq!(
            files,
            [
                f("api-ca", "ca.crt", "ca.crt"),
                f("api-cert", "tls.crt", "tls.crt"),
                f("api-cert", "tls.key", "tls.key")
            ]
        );
        let bus = volumes[5]
            .projected
            .clone()
            .expect("projected")
            .sources
            .expect("sources");
        let item = &bus[0]
            .secret
            .as_ref()
            .expect("secret")
            .items
            .as_ref()
            .expect("items")[0];
        assert_eq!(
            (item.key.as_str(), item.path.as_str()),
            ("bundle.pem", "ca.crt")
        );
    }

    #[test]
    fn the_security_context_is_restricted() {
        let c = serde_json::to_value(container_security_context()).expect("json");
        assert_eq!(
            c,
            serde_json::json!({
                "allowPrivilegeEscalation": false,
                "capabilities": { "drop": ["ALL"] },
                "readOnlyRootFilesystem": true,
                "runAsGroup": 42424,
                "runAsNonRoot": true,
                "runAsUser": 42424,
                "seccompProfile": { "type": "RuntimeDefault" }
            })
        );
        assert_eq!(pod_security_context().fs_group, Some(42424));
    }

    fn quantities(r: &ResourceRequirements) -> serde_json::Value {
        serde_json::to_value(r).expect("json")
    }

    #[test]
    fn resources_default_per_resource() {
        let mut spec = example().spec;
        let defaults = |cpu: &str, mem: &str| serde_json::json!({ "requests": { "cpu": cpu, "memory": mem }, "limits": { "memory": mem } });
        for (role, mem) in [
            (Role::Api, "720Mi"),
            (Role::Metadata, "720Mi"),
            (Role::Scheduler, "720Mi"),
            (Role::Conductor, "720Mi"),
            (Role::NovncProxy, "368Mi"),
        ] {
            assert_eq!(
                quantities(&role_resources(&spec, role)),
                defaults("70m", mem),
                "{role:?}"
            );
        }
        assert_eq!(quantities(&job_resources(&spec)), defaults("70m", "368Mi"));
        spec.scheduler = Some(NovaSchedulerSpec {
            workers: Some(3),
            ..Default::default()
        });
        assert_eq!(
            quantities(&role_resources(&spec, Role::Scheduler)),
            defaults("70m", "1072Mi")
        );
        spec.metadata.uwsgi = Some(UWSGISpec {
            processes: Some(2),
            threads: Some(2),
            ..Default::default()
        });
        assert_eq!(Role::Metadata.memory_mebibytes(&spec), 784);
        // A CPU limit alone gets no request beside it; a zero is kept as written.
        let written: ResourceRequirements = serde_json::from_value(serde_json::json!({
            "limits": { "cpu": "1" }, "requests": { "memory": "0" }
        }))
        .expect("resources");
        assert_eq!(
            quantities(&resources(Some(&written), 720)),
            serde_json::json!({ "limits": { "cpu": "1" }, "requests": { "memory": "0" } })
        );
    }

    fn block(f: impl FnOnce(&mut DeploymentSpec)) -> Option<DeploymentSpec> {
        let mut d = DeploymentSpec::default();
        f(&mut d);
        Some(d)
    }

    #[test]
    fn replicas_and_grace_resolve_per_role() {
        let mut spec = example().spec;
        assert_eq!(Role::Api.replicas(&spec), 3);
        assert_eq!(Role::Metadata.replicas(&spec), 1);
        assert_eq!(Role::NovncProxy.replicas(&spec), 1);
        spec.metadata.deployment = block(|_| {});
        assert_eq!(Role::Metadata.replicas(&spec), 3, "the schema default");
        spec.metadata.deployment = block(|d| d.replicas = Some(0));
        assert_eq!(Role::Metadata.replicas(&spec), 1);
        spec.metadata.deployment = block(|d| d.replicas = Some(4));
        assert_eq!(Role::Metadata.replicas(&spec), 4);

        assert_eq!(Role::Scheduler.grace_seconds(&spec), 200);
        assert_eq!(Role::Conductor.grace_seconds(&spec), 200);
        assert_eq!(Role::Api.grace_seconds(&spec), 30);
        spec.scheduler = Some(NovaSchedulerSpec {
            deployment: block(|d| d.termination_grace_period_seconds = Some(60)),
            ..Default::default()
        });
        assert_eq!(Role::Scheduler.grace_seconds(&spec), 60);
    }

    #[test]
    fn pre_stop_sleeps_five_seconds_unless_disabled() {
        let hook = serde_json::to_value(pre_stop(None)).expect("json");
        assert_eq!(
            hook,
            serde_json::json!({ "preStop": { "exec": { "command": ["/bin/sh", "-c", "sleep 5"] } } })
        );
        assert!(pre_stop(block(|d| d.pre_stop_sleep_seconds = Some(0)).as_ref()).is_none());
        let ten = serde_json::to_value(pre_stop(
            block(|d| d.pre_stop_sleep_seconds = Some(10)).as_ref(),
        ))
        .expect("json");
        assert_eq!(ten["preStop"]["exec"]["command"][2], "sleep 10");
    }

    #[test]
    fn topology_spread_defaults_to_zone_and_hostname_and_keeps_an_empty_list() {
        let selector = nova_api::labels::selector("nova", "api");
        let spread = serde_json::to_value(topology_spread(None, &selector)).expect("json");
        let one = |key: &str| {
            serde_json::json!({
                "labelSelector": { "matchLabels": {
                    "app.kubernetes.io/component": "api",
                    "app.kubernetes.io/instance": "nova",
                    "app.kubernetes.io/name": "nova" } },
                "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway"
            })
        };
        assert_eq!(
            spread,
            serde_json::json!([
                one("topology.kubernetes.io/zone"),
                one("kubernetes.io/hostname")
            ])
        );
        let empty = block(|d| d.topology_spread_constraints = Some(Vec::new()));
        assert!(topology_spread(empty.as_ref(), &selector).is_empty());
    }

    fn node_affinity() -> Affinity {
        Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: Vec::new(),
                }),
                ..Default::default()
            }),
            pod_affinity: Some(PodAffinity::default()),
            ..Default::default()
        }
    }

    #[test]
    fn jobs_fall_back_to_the_api_placement_and_opt_out_with_empty_values() {
        let mut spec = example().spec;
        spec.api.get_or_insert_with(Default::default).deployment = block(|d| {
            d.priority_class_name = Some("high".into());
            d.placement = NodePlacementSpec {
                node_selector: Some(BTreeMap::from([("pool".into(), "control".into())])),
                tolerations: Some(vec![Toleration {
                    key: Some("dedicated".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]),
                affinity: Some(node_affinity()),
            };
        });
        let api = deployment_placement(Role::Api.deployment(&spec));
        assert_eq!(api.priority_class_name.as_deref(), Some("high"));
        assert!(
            api.affinity
                .as_ref()
                .is_some_and(|a| a.pod_affinity.is_some())
        );

        let inherited = job_placement(&spec);
        assert_eq!(inherited.priority_class_name.as_deref(), Some("high"));
        assert_eq!(inherited.node_selector, api.node_selector);
        assert_eq!(inherited.tolerations, api.tolerations);
        let affinity = inherited.affinity.expect("node affinity");
        assert!(affinity.node_affinity.is_some());
        assert!(
            affinity.pod_affinity.is_none(),
            "API pod affinity stays behind"
        );

        spec.jobs = Some(JobSpec {
            resources: None,
            priority_class_name: Some(String::new()),
            placement: NodePlacementSpec {
                node_selector: Some(BTreeMap::new()),
                tolerations: Some(Vec::new()),
                affinity: Some(Affinity::default()),
            },
            migration_deadline_seconds: None,
        });
        assert_eq!(job_placement(&spec), Placement::default());
    }

    #[test]
    fn the_container_carries_image_env_mounts_and_security() {
        let mut spec = example().spec;
        let c = with(&spec, &digests(), |i| {
            container(
                i,
                Role::Api,
                vec!["uwsgi".into()],
                vec![plain("OS_NOVA_CONFIG_DIR", CONFIG_DIR)],
            )
        });
        assert_eq!(c.name, "nova-api");
        assert_eq!(c.image.as_deref(), Some("ghcr.io/c5c3/nova:2026.1"));
        assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
        let env = c.env.expect("env");
        assert_eq!(
            env.last().map(|e| e.name.as_str()),
            Some("OS_NOVA_CONFIG_DIR")
        );
        assert_eq!(c.volume_mounts.expect("mounts").len(), 3);
        spec.image.tag = None;
        spec.image.digest = Some(format!("sha256:{}", "a".repeat(64)));
        let pinned = with(&spec, &digests(), |i| {
            container(i, Role::Job, Vec::new(), Vec::new())
        });
        assert_eq!(pinned.image_pull_policy.as_deref(), Some("IfNotPresent"));
    }
}
