//! Every child name of both kinds, the name bounds and the forbidden suffixes
//! (`nova-crd.txt`, "Sub-Resource Naming Convention"; `common-types.md` Part 2, "Names";
//! `novacompute.md` §5.6 and §8). A child's name is computed here and nowhere else.

use sha2::{Digest, Sha256};

/// Longest Nova name admitted on create: what the 52-character CronJob cap leaves once
/// `-db-archive` is appended.
pub const NOVA_NAME_MAX: usize = 41;
/// Longest NovaCompute name admitted on create: it is the instance label value of every child.
pub const NOVACOMPUTE_NAME_MAX: usize = 63;
/// Longest name of a CR that names a target cluster: it is a label value on every remote child.
pub const TARGET_CLUSTER_CR_NAME_MAX: usize = 63;
/// Kubernetes' CronJob name cap (its controller appends an 11-character suffix per Job).
pub const CRONJOB_NAME_MAX: usize = 52;
/// Kubernetes' Job name cap (a Job name becomes a pod label value).
pub const JOB_NAME_MAX: usize = 63;
/// Longest SQL schema name.
pub const SCHEMA_NAME_MAX: usize = 64;
/// Longest cell schema name, so that `<database>_cell0` stays within [`SCHEMA_NAME_MAX`].
pub const CELL_SCHEMA_NAME_MAX: usize = 58;

/// Suffixes a Nova name must not end in: a Nova named by the rest of the name builds children
/// under exactly that name (and `-cell0` is the suffix of every cell0 Database and Grant).
pub const NOVA_FORBIDDEN_SUFFIXES: [&str; 7] = [
    "-api",
    "-metadata",
    "-scheduler",
    "-conductor",
    "-novncproxy",
    "-console",
    "-cell0",
];

/// The cell0 holding pen's cell name.
pub const CELL0: &str = "cell0";
/// The single real cell every instance and compute pool maps into.
pub const CELL1: &str = "cell1";

/// The suffix of the db-archive CronJob.
const DB_ARCHIVE_SUFFIX: &str = "-db-archive";
/// The suffix of the host-discovery Job.
const DISCOVER_HOSTS_SUFFIX: &str = "-discover-hosts";

/// The forbidden suffix a Nova name ends in, if any.
pub fn nova_forbidden_suffix(name: &str) -> Option<&'static str> {
    NOVA_FORBIDDEN_SUFFIXES
        .into_iter()
        .find(|s| name.ends_with(s))
}

/// The first 8 lowercase hex characters of SHA-256 over `input`.
pub fn short_hash(input: &[u8]) -> String {
    hex::encode(Sha256::digest(input))[..8].to_owned()
}

/// `{name}{suffix}` while it fits `max`; otherwise the longest prefix of `name` that fits
/// with `-<8 hex of SHA-256(name)>` and the suffix, trailing `-` and `.` trimmed.
pub fn collapsed(name: &str, suffix: &str, max: usize) -> String {
    if name.len() + suffix.len() <= max {
        return format!("{name}{suffix}");
    }
    let keep = max.saturating_sub(suffix.len() + 9);
    let prefix: String = name.chars().take(keep).collect();
    let prefix = prefix.trim_end_matches(['-', '.']);
    format!("{prefix}-{}{suffix}", short_hash(name.as_bytes()))
}

/// Names of the children of one Nova.
#[derive(Clone, Copy, Debug)]
pub struct NovaNames<'a> {
    name: &'a str,
}

impl<'a> NovaNames<'a> {
    /// The names of the Nova called `name`.
    pub fn new(name: &'a str) -> Self {
        Self { name }
    }

    /// The API Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler, main
    /// NetworkPolicy and HTTPRoute: the bare CR name.
    pub fn api(&self) -> String {
        self.name.to_owned()
    }

    /// The metadata Deployment, its Service and its HTTPRoute.
    pub fn metadata(&self) -> String {
        format!("{}-metadata", self.name)
    }

    /// The scheduler Deployment.
    pub fn scheduler(&self) -> String {
        format!("{}-scheduler", self.name)
    }

    /// The conductor Deployment.
    pub fn conductor(&self) -> String {
        format!("{}-conductor", self.name)
    }

    /// The console proxy Deployment, its Service and its VNC-egress NetworkPolicy.
    pub fn novncproxy(&self) -> String {
        format!("{}-novncproxy", self.name)
    }

    /// The console HTTPRoute.
    pub fn console_route(&self) -> String {
        format!("{}-console", self.name)
    }

    /// The base of the content-addressed config ConfigMaps (their prune label value).
    pub fn config_base(&self) -> String {
        format!("{}-config", self.name)
    }

    /// The config ConfigMap whose data digests to `hash8`.
    pub fn config(&self, hash8: &str) -> String {
        format!("{}-{hash8}", self.config_base())
    }

    /// The MariaDB instance name of the nova_api block (Database, User, Grant).
    pub fn api_db_instance(&self) -> String {
        format!("{}-api", self.name)
    }

    /// The MariaDB instance name of the cell block (Database, User, Grant).
    pub fn cell_db_instance(&self) -> String {
        self.name.to_owned()
    }

    /// The SQL schema of cell0, derived from the cell schema.
    pub fn cell0_schema(database: &str) -> String {
        format!("{database}_cell0")
    }

    /// The Database and Grant of cell0: its SQL name lowercased with `_` mapped to `-`.
    pub fn cell0_object(&self, database: &str) -> String {
        let sql = Self::cell0_schema(database)
            .to_lowercase()
            .replace('_', "-");
        format!("{}-{sql}", self.name)
    }

    /// The derived DSN Secret of the nova_api schema.
    pub fn api_db_connection(&self) -> String {
        format!("{}-db-connection", self.api_db_instance())
    }

    /// The derived DSN Secret of the cell schema.
    pub fn db_connection(&self) -> String {
        format!("{}-db-connection", self.cell_db_instance())
    }

    /// The derived transport URL Secret.
    pub fn transport_url(&self) -> String {
        format!("{}-transport-url", self.name)
    }

    /// The compute contract Secret (stable name, updated in place).
    pub fn compute_config(&self) -> String {
        format!("{}-compute-config", self.name)
    }

    /// The remote compute contract Secret, while spec.remoteCompute is set.
    pub fn remote_compute_config(&self) -> String {
        format!("{}-remote-compute-config", self.name)
    }

    /// The hypervisor operator's auth Secret a ControlPlane copies beside the contract.
    pub fn hypervisor_operator_auth(&self) -> String {
        format!("{}-hypervisor-operator-auth", self.name)
    }

    /// The steady-state migration Job.
    pub fn db_sync(&self) -> String {
        format!("{}-db-sync", self.name)
    }

    /// The expand phase Job of a release upgrade.
    pub fn db_expand(&self) -> String {
        format!("{}-db-expand", self.name)
    }

    /// The migrate phase Job of a release upgrade.
    pub fn db_migrate(&self) -> String {
        format!("{}-db-migrate", self.name)
    }

    /// The contract phase Job of a release upgrade.
    pub fn db_contract(&self) -> String {
        format!("{}-db-contract", self.name)
    }

    /// The archive CronJob, collapsed onto a hash for a name admitted before the 41-character bound.
    pub fn db_archive(&self) -> String {
        collapsed(self.name, DB_ARCHIVE_SUFFIX, CRONJOB_NAME_MAX)
    }

    /// The host-discovery Job every pool of this Nova shares, collapsed past 63 characters.
    pub fn discover_hosts(&self) -> String {
        collapsed(self.name, DISCOVER_HOSTS_SUFFIX, JOB_NAME_MAX)
    }
}

/// Names of the children of one NovaCompute.
#[derive(Clone, Copy, Debug)]
pub struct NovaComputeNames<'a> {
    name: &'a str,
}

impl<'a> NovaComputeNames<'a> {
    /// The names of the NovaCompute called `name`.
    pub fn new(name: &'a str) -> Self {
        Self { name }
    }

    /// The nova-compute DaemonSet, also the name of its VerticalPodAutoscaler.
    pub fn daemonset(&self) -> String {
        format!("{}-nova-compute", self.name)
    }

    /// The base of the pool's content-addressed ConfigMaps (their prune label value).
    pub fn config_base(&self) -> String {
        format!("{}-config", self.name)
    }

    /// The pool ConfigMap whose data digests to `hash8`.
    pub fn config(&self, hash8: &str) -> String {
        format!("{}-{hash8}", self.config_base())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nova_children_follow_the_naming_table() {
        let n = NovaNames::new("nova");
        let table = [
            (n.api(), "nova"),
            (n.metadata(), "nova-metadata"),
            (n.scheduler(), "nova-scheduler"),
            (n.conductor(), "nova-conductor"),
            (n.novncproxy(), "nova-novncproxy"),
            (n.console_route(), "nova-console"),
            (n.config_base(), "nova-config"),
            (n.config("0123abcd"), "nova-config-0123abcd"),
            (n.api_db_connection(), "nova-api-db-connection"),
            (n.db_connection(), "nova-db-connection"),
            (n.transport_url(), "nova-transport-url"),
            (n.compute_config(), "nova-compute-config"),
            (n.remote_compute_config(), "nova-remote-compute-config"),
            (
                n.hypervisor_operator_auth(),
                "nova-hypervisor-operator-auth",
            ),
            (n.db_sync(), "nova-db-sync"),
            (n.db_expand(), "nova-db-expand"),
            (n.db_migrate(), "nova-db-migrate"),
            (n.db_contract(), "nova-db-contract"),
            (n.db_archive(), "nova-db-archive"),
            (n.api_db_instance(), "nova-api"),
            (n.cell_db_instance(), "nova"),
            (n.cell0_object("nova"), "nova-nova-cell0"),
            (n.discover_hosts(), "nova-discover-hosts"),
        ];
        for (got, want) in table {
            assert_eq!(got, want);
        }
        assert_eq!(NovaNames::cell0_schema("nova"), "nova_cell0");
        assert_eq!(n.cell0_object("Nova_Cell"), "nova-nova-cell-cell0");
    }

    #[test]
    fn the_41_character_name_fits_the_52_character_cronjob_budget() {
        let name = "n".repeat(NOVA_NAME_MAX);
        let cron = NovaNames::new(&name).db_archive();
        assert_eq!(cron, format!("{name}-db-archive"));
        assert_eq!(cron.len(), CRONJOB_NAME_MAX);
    }

    #[test]
    fn a_grandfathered_name_collapses_onto_its_hash() {
        let name = format!("nova-{}", "x".repeat(45));
        let cron = NovaNames::new(&name).db_archive();
        assert_eq!(cron.len(), CRONJOB_NAME_MAX);
        assert_eq!(
            cron,
            format!(
                "nova-{}-{}-db-archive",
                "x".repeat(27),
                short_hash(name.as_bytes())
            )
        );
        // The spec's own example: a 50-character name keeps 39 characters before the hash.
        let job = NovaNames::new(&name).discover_hosts();
        assert_eq!(
            job,
            format!("nova-{}-f95b4e61-discover-hosts", "x".repeat(34))
        );
        assert_eq!(job.len(), JOB_NAME_MAX);
    }

    #[test]
    fn the_collapsed_prefix_drops_trailing_separators() {
        let name = format!("{}-.{}", "a".repeat(31), "b".repeat(20));
        let cron = NovaNames::new(&name).db_archive();
        assert!(cron.starts_with(&format!("{}-", "a".repeat(31))));
        assert!(!cron.contains("-.-"));
        assert!(cron.len() < CRONJOB_NAME_MAX);
    }

    #[test]
    fn the_collapse_is_content_stable() {
        let a = format!("{}a", "n".repeat(48));
        let b = format!("{}b", "n".repeat(48));
        assert_eq!(
            NovaNames::new(&a).discover_hosts(),
            NovaNames::new(&a).discover_hosts()
        );
        assert_ne!(
            NovaNames::new(&a).discover_hosts(),
            NovaNames::new(&b).discover_hosts()
        );
        // A name whose plain Job name still fits 63 characters is not collapsed.
        let fits = "n".repeat(JOB_NAME_MAX - "-discover-hosts".len());
        assert_eq!(
            NovaNames::new(&fits).discover_hosts(),
            format!("{fits}-discover-hosts")
        );
    }

    #[test]
    fn forbidden_suffixes() {
        for (name, suffix) in [
            ("nova-api", Some("-api")),
            ("nova-metadata", Some("-metadata")),
            ("x-scheduler", Some("-scheduler")),
            ("x-conductor", Some("-conductor")),
            ("x-novncproxy", Some("-novncproxy")),
            ("x-console", Some("-console")),
            ("nova-nova-cell0", Some("-cell0")),
            ("nova", None),
            ("api", None),
            ("nova-apis", None),
        ] {
            assert_eq!(nova_forbidden_suffix(name), suffix, "{name}");
        }
    }

    #[test]
    fn novacompute_children() {
        let n = NovaComputeNames::new("pool-a");
        assert_eq!(n.daemonset(), "pool-a-nova-compute");
        assert_eq!(n.config_base(), "pool-a-config");
        assert_eq!(n.config("deadbeef"), "pool-a-config-deadbeef");
    }
}
