//! The defaulting rules of both kinds as pure functions (`nova-crd.txt`, "Defaulting and
//! validation"; `common-types.md` Part 1; `novacompute.md` §3.1). The webhook returns the
//! difference as a JSON patch; the controller's render applies the same function, so a CR that
//! bypassed the webhook renders exactly like one that went through it.
//!
//! Both functions are idempotent: defaulting a defaulted spec changes nothing. `spec.dbArchive`
//! is never touched: its fields are resolved at reconcile time (`effective::db_archive`), so an
//! unset field keeps tracking the operator default across upgrades.

use serde::Serialize;

use crate::effective::secret_keys;
use crate::labels::component;
use crate::v1alpha1::{
    DEFAULT_CACHE_BACKEND, DatabaseSpec, DatabaseTLSMode, DeploymentSpec, LogFormat, LogLevel,
    LoggingSpec, NovaAPISpec, NovaComputeSpec, NovaConductorSpec, NovaConsoleProxySpec,
    NovaSchedulerSpec, NovaSpec, SecretRefSpec, UWSGISpec,
};

/// The replica count the API server's schema default (`+kubebuilder:default=3`) and the
/// shared webhook default give a deployment block, and the API block's own default.
pub const SHARED_REPLICAS: i32 = 3;
/// The one-replica default of the metadata, scheduler, conductor and console-proxy blocks.
pub const SINGLE_REPLICA: i32 = 1;
/// The grace period of a pod whose deployment block names none, for every Nova role but the
/// scheduler and conductor (and of the nova-compute pods). Resolved at render time, never
/// written into the spec: the webhook, the renderer and the CEL rule
/// ([`pre_stop_within_grace_rule`]) all read it from here.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// The scheduler's and conductor's grace period: they drain their RPC server for 165 to 167
/// seconds, so the shared 30 seconds would end every rollout in a SIGKILL.
pub const RPC_DRAIN_GRACE_SECONDS: i64 = 200;
/// The preStop sleep of a deployment block that names none (0 disables the hook), resolved at
/// render time like [`DEFAULT_GRACE_SECONDS`].
pub const DEFAULT_PRE_STOP_SECONDS: i64 = 5;
/// The components whose pods run a readiness probe only (a held broker connection): a broker
/// outage must not restart them, so they run no liveness probe and no startup probe to gate
/// one. A deployment block's `probes` may time only the probes its pods run.
pub const READINESS_ONLY: [&str; 2] = [component::SCHEDULER, component::CONDUCTOR];
/// The scheduler's and conductor's worker count per pod.
pub const DEFAULT_WORKERS: i32 = 2;
/// uWSGI processes per pod.
pub const DEFAULT_UWSGI_PROCESSES: i32 = 2;
/// uWSGI threads per process.
pub const DEFAULT_UWSGI_THREADS: i32 = 1;

/// The service user's Keystone identity defaults.
pub const DEFAULT_SERVICE_USERNAME: &str = "nova";
/// The project the service user scopes to.
pub const DEFAULT_SERVICE_PROJECT: &str = "service";
/// The domain of the service user and of its project.
pub const DEFAULT_DOMAIN: &str = "Default";

/// The CEL rule of every deployment block: the preStop sleep ends strictly inside the grace
/// period, each resolved to its render-time default when unset. Built from the constants, so
/// the API server checks the defaults the webhook and the renderer apply.
pub fn pre_stop_within_grace_rule() -> String {
    format!(
        "(has(self.preStopSleepSeconds) ? self.preStopSleepSeconds : {DEFAULT_PRE_STOP_SECONDS}) < (has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : {DEFAULT_GRACE_SECONDS})"
    )
}

/// Where defaulting reports each change it makes, as it makes it, so that the defaulting
/// webhook writes its JSON patch from the changes themselves instead of serializing the spec
/// before and after and comparing the two (two thirds of a defaulting review's instructions).
/// A path is the member names under `spec`, as serialized.
pub trait Changes {
    /// `value` was set at `path`: a member that was absent, null, empty or zero. An absent
    /// block is reported once, whole, after its own defaults are filled in.
    fn set<T: Serialize + ?Sized>(&mut self, path: &[&'static str], value: &T);
    /// The member at `path` was removed.
    fn removed(&mut self, path: &[&'static str]);
}

/// Changes nobody reads (the controller's render).
impl Changes for () {
    fn set<T: Serialize + ?Sized>(&mut self, _: &[&'static str], _: &T) {}
    fn removed(&mut self, _: &[&'static str]) {}
}

/// The deepest block a default lies in (`spec.metadata.sharedSecretRef.key`).
const MAX_DEPTH: usize = 4;

/// The object being defaulted, as the changes inside it are reported: its path, and where the
/// reports go (nowhere inside a block that is reported whole once filled).
struct At<'c, C> {
    changes: Option<&'c mut C>,
    path: [&'static str; MAX_DEPTH],
    depth: usize,
}

impl<'c, C: Changes> At<'c, C> {
    fn spec(changes: &'c mut C) -> Self {
        At {
            changes: Some(changes),
            path: [""; MAX_DEPTH],
            depth: 0,
        }
    }

    /// Member `key` of this object.
    fn child(&mut self, key: &'static str) -> At<'_, C> {
        let mut path = self.path;
        path[self.depth] = key;
        At {
            changes: self.changes.as_deref_mut(),
            path,
            depth: self.depth + 1,
        }
    }

    /// A block that is being created: what is filled into it is reported with it.
    fn unreported(&self) -> At<'c, C> {
        At {
            changes: None,
            path: self.path,
            depth: self.depth,
        }
    }

    fn set<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) {
        if let Some(changes) = self.changes.as_deref_mut() {
            let mut path = self.path;
            path[self.depth] = key;
            changes.set(&path[..=self.depth], value);
        }
    }

    fn removed(&mut self, key: &'static str) {
        if let Some(changes) = self.changes.as_deref_mut() {
            let mut path = self.path;
            path[self.depth] = key;
            changes.removed(&path[..=self.depth]);
        }
    }
}

/// Fills the block at member `key`: a present one in place, each change reported; an absent one
/// is created by `make`, filled, and then reported whole.
fn block<T: Serialize, C: Changes>(
    slot: &mut Option<T>,
    at: &mut At<'_, C>,
    key: &'static str,
    make: impl FnOnce() -> T,
    fill: impl FnOnce(&mut T, &mut At<'_, C>),
) {
    match slot {
        Some(present) => fill(present, &mut at.child(key)),
        None => {
            let created = slot.insert(make());
            fill(created, &mut at.unreported().child(key));
            at.set(key, created);
        }
    }
}

/// Sets an absent member.
fn or<T: Serialize + Copy, C: Changes>(
    slot: &mut Option<T>,
    at: &mut At<'_, C>,
    key: &'static str,
    default: T,
) {
    if slot.is_none() {
        *slot = Some(default);
        at.set(key, &default);
    }
}

/// Sets an absent or empty string member.
fn fill<C: Changes>(
    value: &mut Option<String>,
    at: &mut At<'_, C>,
    key: &'static str,
    default: &str,
) {
    if value.as_deref().is_none_or(str::is_empty) {
        at.set(key, default);
        *value = Some(default.to_owned());
    }
}

fn fill_key<C: Changes>(secret: &mut SecretRefSpec, at: &mut At<'_, C>, default: &str) {
    fill(&mut secret.key, at, "key", default);
}

/// Resolves a deployment block's replica count: an absent block is materialized with the
/// block's own default, a count of zero takes the block's own default (the shared default
/// would otherwise turn it into 3), and a present block without a count gets the shared
/// default, exactly as the API server's schema default would have done. `grace` is the
/// block's own termination grace period, if it has one.
fn default_deployment<C: Changes>(
    deployment: &mut Option<DeploymentSpec>,
    at: &mut At<'_, C>,
    own_default: i32,
    grace: Option<i64>,
) {
    let make = || DeploymentSpec {
        replicas: Some(own_default),
        ..DeploymentSpec::default()
    };
    block(deployment, at, "deployment", make, |block, at| {
        match block.replicas {
            Some(0) => {
                block.replicas = Some(own_default);
                at.set("replicas", &own_default);
            }
            None => or(&mut block.replicas, at, "replicas", SHARED_REPLICAS),
            Some(_) => {}
        }
        if let Some(grace) = grace {
            or(
                &mut block.termination_grace_period_seconds,
                at,
                "terminationGracePeriodSeconds",
                grace,
            );
        }
    });
}

fn default_uwsgi<C: Changes>(uwsgi: &mut Option<UWSGISpec>, at: &mut At<'_, C>) {
    block(uwsgi, at, "uwsgi", UWSGISpec::default, |block, at| {
        or(
            &mut block.processes,
            at,
            "processes",
            DEFAULT_UWSGI_PROCESSES,
        );
        or(&mut block.threads, at, "threads", DEFAULT_UWSGI_THREADS);
        or(&mut block.http_keep_alive, at, "httpKeepAlive", true);
    });
}

/// The scheduler's and conductor's block: one replica, the RPC drain's grace period, workers.
fn default_rpc_role<T: Serialize + Default, C: Changes>(
    role: &mut Option<T>,
    at: &mut At<'_, C>,
    key: &'static str,
    parts: impl FnOnce(&mut T) -> (&mut Option<DeploymentSpec>, &mut Option<i32>),
) {
    block(role, at, key, T::default, |role, at| {
        let (deployment, workers) = parts(role);
        default_deployment(
            deployment,
            at,
            SINGLE_REPLICA,
            Some(RPC_DRAIN_GRACE_SECONDS),
        );
        or(workers, at, "workers", DEFAULT_WORKERS);
    });
}

fn default_database_tls<C: Changes>(database: &mut DatabaseSpec, at: &mut At<'_, C>) {
    if let Some(tls) = database.tls.as_mut() {
        or(
            &mut tls.mode,
            &mut at.child("tls"),
            "mode",
            DatabaseTLSMode::Require,
        );
    }
}

fn default_logging<C: Changes>(logging: &mut Option<LoggingSpec>, at: &mut At<'_, C>) {
    block(logging, at, "logging", LoggingSpec::default, |block, at| {
        or(&mut block.format, at, "format", LogFormat::Text);
        or(&mut block.level, at, "level", LogLevel::Info);
        or(&mut block.debug, at, "debug", false);
    });
}

/// Applies every Nova default in place.
pub fn default_nova(spec: &mut NovaSpec) {
    default_nova_reporting(spec, &mut ());
}

/// Applies every Nova default in place, reporting each change to `changes`.
pub fn default_nova_reporting<C: Changes>(spec: &mut NovaSpec, changes: &mut C) {
    let mut root = At::spec(changes);
    let at = &mut root;
    // The block-specific replica defaults run before the shared one (inside
    // default_deployment), so an absent block gets its own count rather than 3.
    block(&mut spec.api, at, "api", NovaAPISpec::default, |api, at| {
        default_deployment(&mut api.deployment, at, SHARED_REPLICAS, None);
        default_uwsgi(&mut api.uwsgi, at);
    });

    let metadata = &mut at.child("metadata");
    default_deployment(
        &mut spec.metadata.deployment,
        metadata,
        SINGLE_REPLICA,
        None,
    );
    default_uwsgi(&mut spec.metadata.uwsgi, metadata);
    fill_key(
        &mut spec.metadata.shared_secret_ref,
        &mut metadata.child("sharedSecretRef"),
        secret_keys::METADATA_SHARED_SECRET,
    );

    default_rpc_role(
        &mut spec.scheduler,
        at,
        "scheduler",
        |s: &mut NovaSchedulerSpec| (&mut s.deployment, &mut s.workers),
    );
    default_rpc_role(
        &mut spec.conductor,
        at,
        "conductor",
        |c: &mut NovaConductorSpec| (&mut c.deployment, &mut c.workers),
    );

    block(
        &mut spec.console_proxy,
        at,
        "consoleProxy",
        NovaConsoleProxySpec::default,
        |console, at| {
            if console.enabled.unwrap_or(true) {
                default_deployment(&mut console.deployment, at, SINGLE_REPLICA, None);
            } else if console.deployment.take().is_some() {
                // Removed in the same request that switches the proxy off, so a patch that
                // sets only enabled: false is admitted past the console rule.
                at.removed("deployment");
            }
        },
    );

    default_logging(&mut spec.logging, at);

    fill(
        &mut spec.cache.backend,
        &mut at.child("cache"),
        "backend",
        DEFAULT_CACHE_BACKEND,
    );

    let user = &mut spec.service_user;
    let user_at = &mut at.child("serviceUser");
    fill(
        &mut user.username,
        user_at,
        "username",
        DEFAULT_SERVICE_USERNAME,
    );
    fill(
        &mut user.project_name,
        user_at,
        "projectName",
        DEFAULT_SERVICE_PROJECT,
    );
    fill(
        &mut user.user_domain_name,
        user_at,
        "userDomainName",
        DEFAULT_DOMAIN,
    );
    fill(
        &mut user.project_domain_name,
        user_at,
        "projectDomainName",
        DEFAULT_DOMAIN,
    );
    fill_key(
        &mut user.secret_ref,
        &mut user_at.child("secretRef"),
        secret_keys::SERVICE_USER_PASSWORD,
    );

    if let Some(remote) = spec.remote_compute.as_mut() {
        fill_key(
            &mut remote.transport_url_secret_ref,
            &mut at.child("remoteCompute").child("transportURLSecretRef"),
            secret_keys::TRANSPORT_URL,
        );
    }

    default_database_tls(&mut spec.api_database, &mut at.child("apiDatabase"));
    default_database_tls(&mut spec.database, &mut at.child("database"));
}

/// Applies every NovaCompute default in place: none. Every default is a schema default the API
/// server applies or is resolved at render time; the mutating webhook stays registered so a
/// future materialized default needs no new webhook configuration.
pub fn default_novacompute(_spec: &mut NovaComputeSpec) {}

/// [`default_novacompute`], reporting each change to `changes` (none).
pub fn default_novacompute_reporting<C: Changes>(spec: &mut NovaComputeSpec, _changes: &mut C) {
    default_novacompute(spec);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1alpha1::{
        CacheSpec, ClusterRef, DBArchiveSpec, DatabaseTLSSpec, ImageSpec, MessagingSpec,
        MessagingTLSSpec, NovaMetadataSpec, NovaRemoteComputeSpec, ServiceUserSpec,
    };
    use pretty_assertions::assert_eq;

    fn secret(name: &str) -> SecretRefSpec {
        SecretRefSpec {
            name: name.into(),
            key: None,
        }
    }

    fn db(name: &str) -> DatabaseSpec {
        DatabaseSpec {
            cluster_ref: Some(ClusterRef {
                name: "openstack-mariadb".into(),
            }),
            database: name.into(),
            secret_ref: secret(&format!("{name}-db")),
            ..DatabaseSpec::default()
        }
    }

    /// The spec's Example Nova.
    fn example() -> NovaSpec {
        NovaSpec {
            open_stack_release: "2026.1".into(),
            image: ImageSpec {
                repository: "ghcr.io/c5c3/nova".into(),
                tag: Some("2026.1".into()),
                digest: None,
            },
            image_pull_secrets: None,
            pod_metadata: None,
            extra_volumes: None,
            extra_volume_mounts: None,
            api_database: db("nova_api"),
            database: db("nova"),
            cache: CacheSpec {
                cluster_ref: Some(ClusterRef {
                    name: "openstack-memcached".into(),
                }),
                ..CacheSpec::default()
            },
            messaging: MessagingSpec {
                cluster_ref: Some(ClusterRef {
                    name: "openstack-rabbitmq".into(),
                }),
                ..MessagingSpec::default()
            },
            api: None,
            metadata: NovaMetadataSpec {
                shared_secret_ref: secret("nova-metadata-secret"),
                ..NovaMetadataSpec::default()
            },
            scheduler: None,
            conductor: None,
            jobs: None,
            console_proxy: None,
            keystone_endpoint: "http://keystone.openstack.svc.cluster.local:5000/v3".into(),
            tls: None,
            keystone_public_endpoint: None,
            remote_compute: None,
            service_user: ServiceUserSpec {
                secret_ref: secret("nova-keystone"),
                ..ServiceUserSpec::default()
            },
            region: None,
            endpoints: None,
            db_archive: None,
            gateway: None,
            network_policy: None,
            autoscaling: None,
            logging: None,
            extra_config: None,
            secret_store_ref: None,
            target_cluster_ref: None,
        }
    }

    fn defaulted(mut spec: NovaSpec) -> NovaSpec {
        default_nova(&mut spec);
        spec
    }

    fn replicas(d: &Option<DeploymentSpec>) -> Option<i32> {
        d.as_ref().and_then(|d| d.replicas)
    }

    #[test]
    fn absent_blocks_get_their_own_replica_counts() {
        let spec = defaulted(example());
        assert_eq!(replicas(&spec.api.as_ref().unwrap().deployment), Some(3));
        assert_eq!(replicas(&spec.metadata.deployment), Some(1));
        assert_eq!(
            replicas(&spec.scheduler.as_ref().unwrap().deployment),
            Some(1)
        );
        assert_eq!(
            replicas(&spec.conductor.as_ref().unwrap().deployment),
            Some(1)
        );
        assert_eq!(
            replicas(&spec.console_proxy.as_ref().unwrap().deployment),
            Some(1)
        );
    }

    #[test]
    fn zero_replicas_take_the_blocks_own_default_and_explicit_counts_stay() {
        let mut spec = example();
        spec.metadata.deployment = Some(DeploymentSpec {
            replicas: Some(0),
            ..Default::default()
        });
        spec.scheduler = Some(NovaSchedulerSpec {
            deployment: Some(DeploymentSpec {
                replicas: Some(0),
                ..Default::default()
            }),
            workers: None,
        });
        spec.api = Some(NovaAPISpec {
            deployment: Some(DeploymentSpec {
                replicas: Some(0),
                ..Default::default()
            }),
            uwsgi: None,
        });
        spec.conductor = Some(NovaConductorSpec {
            deployment: Some(DeploymentSpec {
                replicas: Some(5),
                ..Default::default()
            }),
            workers: Some(4),
        });
        let spec = defaulted(spec);
        assert_eq!(replicas(&spec.metadata.deployment), Some(1));
        assert_eq!(
            replicas(&spec.scheduler.as_ref().unwrap().deployment),
            Some(1)
        );
        assert_eq!(replicas(&spec.api.as_ref().unwrap().deployment), Some(3));
        let conductor = spec.conductor.unwrap();
        assert_eq!(replicas(&conductor.deployment), Some(5));
        assert_eq!(conductor.workers, Some(4));
    }

    #[test]
    fn a_present_block_without_a_count_gets_the_shared_default() {
        let mut spec = example();
        spec.metadata.deployment = Some(DeploymentSpec::default());
        let spec = defaulted(spec);
        assert_eq!(replicas(&spec.metadata.deployment), Some(3));
    }

    #[test]
    fn scheduler_and_conductor_get_the_rpc_drain_grace_period_and_two_workers() {
        let mut spec = example();
        spec.conductor = Some(NovaConductorSpec {
            deployment: Some(DeploymentSpec {
                replicas: Some(2),
                termination_grace_period_seconds: Some(60),
                ..Default::default()
            }),
            workers: None,
        });
        let spec = defaulted(spec);
        let scheduler = spec.scheduler.unwrap();
        assert_eq!(
            scheduler
                .deployment
                .unwrap()
                .termination_grace_period_seconds,
            Some(200)
        );
        assert_eq!(scheduler.workers, Some(2));
        let conductor = spec.conductor.unwrap();
        assert_eq!(
            conductor
                .deployment
                .unwrap()
                .termination_grace_period_seconds,
            Some(60),
            "an explicit value is left alone"
        );
        assert_eq!(conductor.workers, Some(2));
        // The other blocks keep the render-time 30 seconds.
        assert_eq!(
            spec.metadata
                .deployment
                .unwrap()
                .termination_grace_period_seconds,
            None
        );
    }

    #[test]
    fn the_console_proxy_block_follows_the_switch() {
        let spec = defaulted(example());
        let console = spec.console_proxy.unwrap();
        assert_eq!(console.enabled, None, "the switch itself is not written");
        assert_eq!(replicas(&console.deployment), Some(1));

        let mut off = example();
        off.console_proxy = Some(NovaConsoleProxySpec {
            enabled: Some(false),
            deployment: Some(DeploymentSpec {
                replicas: Some(1),
                ..Default::default()
            }),
            gateway: None,
        });
        let off = defaulted(off).console_proxy.unwrap();
        assert_eq!(off.enabled, Some(false));
        assert_eq!(off.deployment, None);
    }

    #[test]
    fn both_uwsgi_blocks_are_materialized_and_set_values_kept() {
        let mut spec = example();
        spec.metadata.uwsgi = Some(UWSGISpec {
            processes: Some(4),
            http_keep_alive: Some(false),
            harakiri: Some(30),
            ..Default::default()
        });
        let spec = defaulted(spec);
        let want = UWSGISpec {
            processes: Some(2),
            threads: Some(1),
            http_keep_alive: Some(true),
            harakiri: None,
            http_keep_alive_timeout: None,
        };
        assert_eq!(spec.api.unwrap().uwsgi, Some(want));
        let metadata = spec.metadata.uwsgi.unwrap();
        assert_eq!(
            (
                metadata.processes,
                metadata.threads,
                metadata.http_keep_alive,
                metadata.harakiri
            ),
            (Some(4), Some(1), Some(false), Some(30))
        );
    }

    #[test]
    fn logging_is_materialized_and_zero_leaves_filled() {
        let spec = defaulted(example());
        assert_eq!(
            spec.logging,
            Some(LoggingSpec {
                format: Some(LogFormat::Text),
                level: Some(LogLevel::Info),
                debug: Some(false),
                per_logger_levels: None,
            })
        );
        let mut partial = example();
        partial.logging = Some(LoggingSpec {
            format: Some(LogFormat::Json),
            ..Default::default()
        });
        let logging = defaulted(partial).logging.unwrap();
        assert_eq!(logging.format, Some(LogFormat::Json));
        assert_eq!(logging.level, Some(LogLevel::Info));
        assert_eq!(logging.debug, Some(false));
    }

    #[test]
    fn cache_backend_identity_and_secret_keys_are_filled() {
        let mut spec = example();
        spec.service_user.username = Some(String::new());
        spec.service_user.project_name = Some("admin".into());
        let spec = defaulted(spec);
        assert_eq!(
            spec.cache.backend.as_deref(),
            Some("dogpile.cache.pymemcache")
        );
        let user = &spec.service_user;
        assert_eq!(user.username.as_deref(), Some("nova"));
        assert_eq!(user.project_name.as_deref(), Some("admin"));
        assert_eq!(user.user_domain_name.as_deref(), Some("Default"));
        assert_eq!(user.project_domain_name.as_deref(), Some("Default"));
        assert_eq!(user.secret_ref.key.as_deref(), Some("password"));
        assert_eq!(
            spec.metadata.shared_secret_ref.key.as_deref(),
            Some("shared_secret")
        );
        // Nova's list names no messaging key.
        assert_eq!(spec.messaging.secret_ref, None);
    }

    #[test]
    fn the_remote_transport_key_is_filled_only_while_the_block_is_set() {
        assert_eq!(defaulted(example()).remote_compute, None);
        let mut spec = example();
        spec.messaging.tls = Some(MessagingTLSSpec {
            ca_bundle_secret_ref: secret("rabbit-ca"),
        });
        spec.remote_compute = Some(NovaRemoteComputeSpec {
            keystone_endpoint: "https://keystone.example.com/v3".into(),
            transport_url_secret_ref: SecretRefSpec {
                name: "remote-url".into(),
                key: Some(String::new()),
            },
        });
        let remote = defaulted(spec).remote_compute.unwrap();
        assert_eq!(
            remote.transport_url_secret_ref.key.as_deref(),
            Some("transport_url")
        );
        // The messaging CA key is resolved at use, not written.
    }

    #[test]
    fn a_database_tls_block_without_mode_requires_tls() {
        let mut spec = example();
        let tls = DatabaseTLSSpec {
            mode: None,
            ca_bundle_secret_ref: secret("db-ca"),
            client_cert_secret_ref: secret("db-client"),
        };
        spec.api_database.tls = Some(tls.clone());
        spec.database.tls = Some(DatabaseTLSSpec {
            mode: Some(DatabaseTLSMode::Disabled),
            ..tls
        });
        let spec = defaulted(spec);
        assert_eq!(
            spec.api_database.tls.unwrap().mode,
            Some(DatabaseTLSMode::Require)
        );
        assert_eq!(
            spec.database.tls.unwrap().mode,
            Some(DatabaseTLSMode::Disabled)
        );
    }

    #[test]
    fn db_archive_is_never_touched() {
        assert_eq!(defaulted(example()).db_archive, None);
        let mut spec = example();
        spec.db_archive = Some(DBArchiveSpec::default());
        assert_eq!(defaulted(spec).db_archive, Some(DBArchiveSpec::default()));
        let mut spec = example();
        let archive = DBArchiveSpec {
            retention_days: Some(3),
            ..Default::default()
        };
        spec.db_archive = Some(archive.clone());
        assert_eq!(defaulted(spec).db_archive, Some(archive));
    }

    #[test]
    fn defaulting_is_idempotent() {
        let mut off = example();
        off.console_proxy = Some(NovaConsoleProxySpec {
            enabled: Some(false),
            ..Default::default()
        });
        let mut zero = example();
        zero.metadata.deployment = Some(DeploymentSpec {
            replicas: Some(0),
            ..Default::default()
        });
        for spec in [example(), off, zero] {
            let once = defaulted(spec);
            let twice = defaulted(once.clone());
            assert_eq!(once, twice);
        }
    }

    /// The reported changes, applied to the spec as serialized before defaulting.
    struct Applied(serde_json::Value, usize);

    impl Changes for Applied {
        fn set<T: Serialize + ?Sized>(&mut self, path: &[&'static str], value: &T) {
            self.1 += 1;
            let (leaf, parents) = path.split_last().expect("a path");
            let parent = parents.iter().fold(&mut self.0, |v, key| &mut v[*key]);
            parent[*leaf] = serde_json::to_value(value).expect("serializes");
        }

        fn removed(&mut self, path: &[&'static str]) {
            self.1 += 1;
            let (leaf, parents) = path.split_last().expect("a path");
            let parent = parents.iter().fold(&mut self.0, |v, key| &mut v[*key]);
            parent
                .as_object_mut()
                .expect("an object")
                .remove(*leaf)
                .expect("present");
        }
    }

    #[test]
    fn every_change_is_reported_and_nothing_else() {
        let mut off = example();
        off.console_proxy = Some(NovaConsoleProxySpec {
            enabled: Some(false),
            deployment: Some(DeploymentSpec::default()),
            ..Default::default()
        });
        let mut partial = example();
        partial.metadata.deployment = Some(DeploymentSpec {
            replicas: Some(0),
            ..Default::default()
        });
        partial.scheduler = Some(NovaSchedulerSpec {
            deployment: Some(DeploymentSpec::default()),
            workers: Some(4),
        });
        partial.api = Some(NovaAPISpec {
            deployment: None,
            uwsgi: Some(UWSGISpec {
                threads: Some(8),
                ..Default::default()
            }),
        });
        partial.service_user.username = Some(String::new());
        partial.database.tls = Some(DatabaseTLSSpec::default());
        partial.remote_compute = Some(NovaRemoteComputeSpec {
            transport_url_secret_ref: secret("remote-url"),
            ..Default::default()
        });
        for spec in [example(), off, partial] {
            let mut applied = Applied(serde_json::to_value(&spec).expect("serializes"), 0);
            let mut defaulted = spec;
            default_nova_reporting(&mut defaulted, &mut applied);
            assert_eq!(
                applied.0,
                serde_json::to_value(&defaulted).expect("serializes")
            );
            assert!(applied.1 > 0);
            let mut again = Applied(applied.0.clone(), 0);
            default_nova_reporting(&mut defaulted, &mut again);
            assert_eq!(again.1, 0, "a defaulted spec reports nothing");
        }
    }

    #[test]
    fn novacompute_defaulting_changes_nothing() {
        let mut spec: NovaComputeSpec = serde_json::from_value(serde_json::json!({
            "novaRef": {"name": "nova"},
            "nodeSelector": {"pool": "a"},
        }))
        .expect("spec");
        let before = spec.clone();
        default_novacompute(&mut spec);
        assert_eq!(spec, before);
    }
}
