//! The validating webhook of the Nova kind (`nova-crd.txt`, "Defaulting and validation").

use std::sync::LazyLock;

use nova_api::claims;
use nova_api::defaults::{DEFAULT_GRACE_SECONDS, RPC_DRAIN_GRACE_SECONDS};
use nova_api::labels::component;
use nova_api::names::{NOVA_NAME_MAX, nova_forbidden_suffix};
use nova_api::owned_keys::{self, OwnedKey};
use nova_api::v1alpha1::{
    AutoscalingSpec, CredentialsMode, DeploymentSpec, Nova, NovaConsoleProxySpec, NovaSpec,
};

use super::common::floor;
use super::deployment::{self, Block};
use super::urls::{self, Schemes};
use super::{Operation, Outcome, common, extra_config};
use crate::field::{FieldError, Path, Violations};
use crate::lookups::{Lookups, NovaList};

/// The owned-key registry of nova.conf.
pub static REGISTRY: LazyLock<Vec<OwnedKey>> =
    LazyLock::new(|| owned_keys::nova().copied().collect());

/// The message of a Nova name above the bound.
pub fn name_too_long_message() -> String {
    format!(
        "name must be at most {NOVA_NAME_MAX} characters: the {{name}}-db-archive CronJob must fit the 52-character CronJob name limit"
    )
}

/// The message of a Nova name ending in a reserved suffix.
pub fn forbidden_suffix_message(suffix: &str) -> String {
    if suffix == "-cell0" {
        format!(
            "name must not end in \"{suffix}\": it is the suffix of every cell0 Database and Grant, so this Nova's cell schema objects would collide with another Nova's cell0 objects"
        )
    } else {
        format!(
            "name must not end in \"{suffix}\": a Nova named by the rest of the name builds its children under exactly that name"
        )
    }
}

/// The PriorityClass names a Nova's validation looks up.
pub fn priority_class_names(spec: &NovaSpec) -> Vec<String> {
    let mut names: Vec<String> = deployments(spec)
        .into_iter()
        .filter_map(|(_, d, _)| d.priority_class_name.clone())
        .chain(
            spec.jobs
                .as_ref()
                .and_then(|j| j.priority_class_name.clone()),
        )
        .filter(|n| !n.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The deployment blocks validated by the pod-level rules: (block name, block, component).
/// The console block only while the proxy is enabled and the block exists.
fn deployments(spec: &NovaSpec) -> Vec<(&'static str, &DeploymentSpec, &'static str)> {
    let mut out = Vec::new();
    if let Some(d) = spec.api.as_ref().and_then(|a| a.deployment.as_ref()) {
        out.push(("api", d, component::API));
    }
    if let Some(d) = spec.metadata.deployment.as_ref() {
        out.push(("metadata", d, component::METADATA));
    }
    if let Some(d) = spec.scheduler.as_ref().and_then(|s| s.deployment.as_ref()) {
        out.push(("scheduler", d, component::SCHEDULER));
    }
    if let Some(d) = spec.conductor.as_ref().and_then(|s| s.deployment.as_ref()) {
        out.push(("conductor", d, component::CONDUCTOR));
    }
    if let Some(console) = &spec.console_proxy
        && console.enabled.unwrap_or(true)
        && let Some(d) = console.deployment.as_ref()
    {
        out.push(("consoleProxy", d, component::NOVNCPROXY));
    }
    out
}

fn effective_mode(mode: Option<CredentialsMode>) -> CredentialsMode {
    mode.unwrap_or(CredentialsMode::Static)
}

/// An enum value's name as the API writes it (its serde name), not restated here.
fn variant_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

/// Validates a Nova admission.
pub fn validate(
    new: &Nova,
    old: Option<&Nova>,
    operation: Operation,
    lookups: &Lookups,
) -> Outcome {
    let mut out = Outcome::default();
    let old_spec = old
        .map(|o| &o.spec)
        .filter(|_| operation == Operation::Update);
    let name = new.metadata.name.as_deref().unwrap_or("");
    let errors = &mut out.errors;
    let warnings = &mut out.warnings;

    if operation == Operation::Create {
        if name.len() > NOVA_NAME_MAX {
            errors.push(FieldError::invalid(
                "metadata.name",
                name,
                name_too_long_message(),
            ));
        }
        if let Some(suffix) = nova_forbidden_suffix(name) {
            errors.push(FieldError::invalid(
                "metadata.name",
                name,
                forbidden_suffix_message(suffix),
            ));
        }
    }
    spec_rules(name, &new.spec, old_spec, lookups, errors, warnings);
    claim_rules(new, lookups, errors);
    out
}

/// Whether the admission must list every Nova for the schema claim check: on create, and on
/// an update that moves a schema to another server (the schema names are immutable).
pub fn needs_claim_check(new: &Nova, old: Option<&Nova>, operation: Operation) -> bool {
    match (operation, old) {
        (Operation::Create, _) => true,
        (Operation::Update, Some(old)) => claims::claims(new) != claims::claims(old),
        _ => false,
    }
}

/// No schema of the Nova may be one another Nova already uses on the same server
/// (`nova_api::claims`); when the Novas could not be listed, each schema field fails closed.
fn claim_rules(new: &Nova, lookups: &Lookups, errors: &mut Violations) {
    match &lookups.novas {
        None => {}
        Some(NovaList::Listed(novas)) => {
            for conflict in claims::conflicts(new, novas) {
                errors.push(FieldError::invalid(
                    conflict.claim.field,
                    &conflict.claim.schema,
                    conflict.message(),
                ));
            }
        }
        Some(NovaList::Unavailable(why)) => {
            let mut fields: Vec<&str> = claims::claims(new).iter().map(|c| c.field).collect();
            fields.dedup();
            for field in fields {
                errors.push(FieldError::internal(
                    field,
                    format!("cannot verify that no other Nova uses this schema: {why}"),
                ));
            }
        }
    }
}

/// Every spec rule, block by block, in the order the errors are reported.
fn spec_rules(
    name: &str,
    spec: &NovaSpec,
    old: Option<&NovaSpec>,
    lookups: &Lookups,
    errors: &mut Violations,
    warnings: &mut Vec<String>,
) {
    let root = Path::new("spec");
    common::release(
        &spec.open_stack_release,
        old.map(|o| o.open_stack_release.as_str()),
        errors,
        warnings,
    );
    common::image(&root.child("image"), &spec.image, errors);
    super::pod_metadata::rules(&root, spec, errors);
    super::extra_volumes::rules(&root, spec, errors);
    database_rules(&root, spec, old, errors);
    common::cache(&root.child("cache"), &spec.cache, errors);
    common::messaging(&root.child("messaging"), &spec.messaging, errors);
    secret_ref_rules(&root, spec, errors);
    endpoint_rules(&root, spec, errors);
    rendered_rules(&root, spec, errors);
    if let Some(console) = &spec.console_proxy {
        console_rules(&root.child("consoleProxy"), console, errors);
    }
    if let Some(gw) = &spec.gateway {
        common::gateway(&root.child("gateway"), gw, errors);
    }
    if let Some(gw) = &spec.metadata.gateway {
        common::gateway(&root.child("metadata").child("gateway"), gw, errors);
    }
    workload_rules(&root, name, spec, lookups, errors);
    if let Some(a) = &spec.autoscaling {
        autoscaling_rules(&root, a, spec, errors);
    }
    if let Some(np) = &spec.network_policy
        && np.ingress.is_empty()
    {
        errors.push(FieldError::required(
            root.child("networkPolicy").child("ingress"),
            "at least one ingress source must be specified",
        ));
    }
    if let Some(logging) = &spec.logging {
        common::logging(&root.child("logging"), logging, errors);
    }
    if let Some(store) = &spec.secret_store_ref {
        common::secret_store(&root.child("secretStoreRef"), store, errors);
    }
    common::target_cluster(
        &root.child("targetClusterRef"),
        spec.target_cluster_ref.as_ref(),
        old.map(|o| o.target_cluster_ref.as_ref()),
        errors,
    );
    archive_rules(&root.child("dbArchive"), spec, old, errors, warnings);
    extra_config_rules(spec, old, errors, warnings);
}

/// The two database blocks, the rules between them, and their transition rules.
fn database_rules(root: &Path, spec: &NovaSpec, old: Option<&NovaSpec>, errors: &mut Violations) {
    let api_db = root.child("apiDatabase");
    let cell_db = root.child("database");
    common::database(&api_db, &spec.api_database, errors);
    common::database(&cell_db, &spec.database, errors);
    if spec.api_database.database == spec.database.database {
        errors.push(FieldError::invalid(
            api_db.child("database"),
            &spec.api_database.database,
            "apiDatabase and database must name different schemas",
        ));
    }
    if spec.api_database.database == format!("{}_cell0", spec.database.database) {
        errors.push(FieldError::invalid(
            api_db.child("database"),
            &spec.api_database.database,
            "apiDatabase must not name the cell0 schema derived from database",
        ));
    }
    let (api_mode, cell_mode) = (
        effective_mode(spec.api_database.credentials_mode),
        effective_mode(spec.database.credentials_mode),
    );
    if api_mode != cell_mode {
        errors.push(FieldError::invalid(
            cell_db.child("credentialsMode"),
            variant_name(&cell_mode),
            "apiDatabase and database must use the same credentialsMode",
        ));
    }
    if spec.database.database.len() > 58 {
        errors.push(FieldError::invalid(
            cell_db.child("database"),
            &spec.database.database,
            "database.database must be at most 58 characters: cell0 is provisioned as <database>_cell0 under the 64-character schema limit",
        ));
    }
    let Some(old) = old else { return };
    if spec.api_database.database != old.api_database.database {
        errors.push(FieldError::invalid(
            api_db.child("database"),
            &spec.api_database.database,
            "apiDatabase.database is immutable: the schema holds the cell map and every instance mapping",
        ));
    }
    if spec.api_database.cluster_ref.is_some() != old.api_database.cluster_ref.is_some() {
        errors.push(FieldError::invalid_omitted(
            api_db,
            "apiDatabase mode (managed clusterRef vs brownfield host) is immutable",
        ));
    }
    if spec.database.database != old.database.database {
        errors.push(FieldError::invalid(
            cell_db.child("database"),
            &spec.database.database,
            "database.database is immutable: the cell mappings store the schema name",
        ));
    }
    if spec.database.cluster_ref.is_some() != old.database.cluster_ref.is_some() {
        errors.push(FieldError::invalid_omitted(
            cell_db,
            "database mode (managed clusterRef vs brownfield host) is immutable",
        ));
    }
}

/// Secret references whose name has no default.
fn secret_ref_rules(root: &Path, spec: &NovaSpec, errors: &mut Violations) {
    if spec.metadata.shared_secret_ref.name.is_empty() {
        errors.push(FieldError::required(
            root.child("metadata").child("sharedSecretRef").child("name"),
            "sharedSecretRef.name must be set (the Secret holding the value the Neutron metadata agent signs proxied requests with)",
        ));
    }
    if spec.service_user.secret_ref.name.is_empty() {
        errors.push(FieldError::required(
            root.child("serviceUser").child("secretRef").child("name"),
            "secretRef.name must be set (the Secret holding the service-user password)",
        ));
    }
    if let Some(tls) = &spec.tls
        && tls.ca_bundle_secret_ref.name.is_empty()
    {
        errors.push(FieldError::required(
            root.child("tls").child("caBundleSecretRef").child("name"),
            "caBundleSecretRef.name must be set when spec.tls is configured (the Secret holding the CA bundle Keystone and the service endpoints are verified against)",
        ));
    }
}

/// The Keystone endpoints, the endpoint overrides and the remote-compute block.
fn endpoint_rules(root: &Path, spec: &NovaSpec, errors: &mut Violations) {
    let keystone = root.child("keystoneEndpoint");
    if spec.keystone_endpoint.is_empty() {
        errors.push(FieldError::required(
            keystone,
            "keystoneEndpoint must be set",
        ));
    } else {
        urls::check(
            &keystone,
            &spec.keystone_endpoint,
            Schemes::HttpOrHttps,
            errors,
        );
    }
    if let Some(public) = spec
        .keystone_public_endpoint
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        urls::check(
            &root.child("keystonePublicEndpoint"),
            public,
            Schemes::HttpOrHttps,
            errors,
        );
    }
    if let Some(endpoints) = &spec.endpoints {
        let path = root.child("endpoints");
        let overrides = [
            (
                "placement",
                endpoints
                    .placement
                    .as_ref()
                    .and_then(|e| e.override_url.as_deref()),
            ),
            (
                "neutron",
                endpoints
                    .neutron
                    .as_ref()
                    .and_then(|e| e.override_url.as_deref()),
            ),
            (
                "glance",
                endpoints
                    .glance
                    .as_ref()
                    .and_then(|e| e.override_url.as_deref()),
            ),
            (
                "cinder",
                endpoints
                    .cinder
                    .as_ref()
                    .and_then(|e| e.override_url.as_deref()),
            ),
            (
                "barbican",
                endpoints
                    .barbican
                    .as_ref()
                    .and_then(|e| e.override_url.as_deref()),
            ),
        ];
        for (service, url) in overrides {
            if let Some(url) = url.filter(|u| !u.is_empty()) {
                urls::check(
                    &path.child(service).child("override"),
                    url,
                    Schemes::HttpOrHttps,
                    errors,
                );
            }
        }
    }
    let Some(remote) = &spec.remote_compute else {
        return;
    };
    let path = root.child("remoteCompute");
    if spec.messaging.tls.is_none() {
        errors.push(FieldError::required(
            root.child("messaging").child("tls"),
            "remoteCompute requires messaging.tls: a compute on another cluster verifies the broker against the messaging CA bundle",
        ));
    }
    let keystone = path.child("keystoneEndpoint");
    if remote.keystone_endpoint.is_empty() {
        errors.push(FieldError::required(
            keystone,
            "keystoneEndpoint must be set",
        ));
    } else {
        urls::check(
            &keystone,
            &remote.keystone_endpoint,
            Schemes::HttpsOnly,
            errors,
        );
    }
    if remote.transport_url_secret_ref.name.is_empty() {
        errors.push(FieldError::required(
            path.child("transportURLSecretRef").child("name"),
            "transportURLSecretRef.name must be set (the Secret holding the broker's external rabbit:// URL)",
        ));
    }
}

/// Control characters in the typed fields rendered verbatim into nova.conf.
fn rendered_rules(root: &Path, spec: &NovaSpec, errors: &mut Violations) {
    common::rendered(&root.child("region"), spec.region.as_deref(), errors);
    let user = &spec.service_user;
    let path = root.child("serviceUser");
    for (field, value) in [
        ("username", &user.username),
        ("projectName", &user.project_name),
        ("userDomainName", &user.user_domain_name),
        ("projectDomainName", &user.project_domain_name),
    ] {
        common::rendered(&path.child(field), value.as_deref(), errors);
    }
}

/// The console proxy: its deployment only while enabled, and its gateway, whose hostname is
/// rendered into nova.conf and whose path must be the root.
fn console_rules(path: &Path, console: &NovaConsoleProxySpec, errors: &mut Violations) {
    if console.enabled == Some(false) && console.deployment.is_some() {
        errors.push(FieldError::forbidden(
            path.child("deployment"),
            "consoleProxy.deployment must not be set when consoleProxy.enabled is false",
        ));
    }
    let Some(gw) = &console.gateway else { return };
    let gw_path = path.child("gateway");
    common::gateway(&gw_path, gw, errors);
    common::rendered(&gw_path.child("hostname"), Some(&gw.hostname), errors);
    if let Some(prefix) = gw.path.as_deref()
        && !prefix.is_empty()
        && prefix != "/"
    {
        errors.push(FieldError::invalid(
            gw_path.child("path"),
            prefix,
            "path must be empty or \"/\": the console page and the WebSocket it opens both live at the root of the hostname, so a prefix route would match neither",
        ));
    }
}

/// The five deployment blocks, their uWSGI and worker counts, and the jobs block.
fn workload_rules(
    root: &Path,
    name: &str,
    spec: &NovaSpec,
    lookups: &Lookups,
    errors: &mut Violations,
) {
    for (block, d, component) in deployments(spec) {
        let default_grace = if matches!(block, "scheduler" | "conductor") {
            RPC_DRAIN_GRACE_SECONDS
        } else {
            DEFAULT_GRACE_SECONDS
        };
        let block_path = root.child(block);
        let b = Block {
            path: block_path.child("deployment"),
            deployment: d,
            default_grace,
            component,
        };
        deployment::deployment(name, &b, lookups, errors);
    }
    for (block, d, uwsgi) in [
        (
            "api",
            spec.api.as_ref().and_then(|a| a.deployment.as_ref()),
            spec.api.as_ref().and_then(|a| a.uwsgi.as_ref()),
        ),
        (
            "metadata",
            spec.metadata.deployment.as_ref(),
            spec.metadata.uwsgi.as_ref(),
        ),
    ] {
        if let Some(u) = uwsgi {
            let block_path = root.child(block);
            let uwsgi_path = block_path.child("uwsgi");
            common::uwsgi(&uwsgi_path, u, errors);
            deployment::harakiri(&uwsgi_path, u, d, DEFAULT_GRACE_SECONDS, errors);
        }
    }
    for (block, workers) in [
        ("scheduler", spec.scheduler.as_ref().and_then(|s| s.workers)),
        ("conductor", spec.conductor.as_ref().and_then(|s| s.workers)),
    ] {
        floor(
            &root.child(block),
            "workers",
            workers,
            1,
            "workers must be at least 1",
            errors,
        );
    }
    if let Some(jobs) = &spec.jobs {
        deployment::jobs(&root.child("jobs"), jobs, lookups, errors);
    }
}

/// Autoscaling of the API Deployment, and no VPA on the Deployment it scales.
fn autoscaling_rules(root: &Path, a: &AutoscalingSpec, spec: &NovaSpec, errors: &mut Violations) {
    let api_deployment = spec.api.as_ref().and_then(|a| a.deployment.as_ref());
    deployment::autoscaling(&root.child("autoscaling"), a, api_deployment, errors);
    if api_deployment.is_some_and(|d| d.vertical_autoscaling.is_some()) {
        errors.push(FieldError::invalid_omitted(
            root.child("api")
                .child("deployment")
                .child("verticalAutoscaling"),
            "spec.api.deployment.verticalAutoscaling cannot be set while spec.autoscaling scales the same Deployment",
        ));
    }
}

/// The archive: bounds, the cron grammar, and the retention warning.
fn archive_rules(
    path: &Path,
    spec: &NovaSpec,
    old: Option<&NovaSpec>,
    errors: &mut Violations,
    warnings: &mut Vec<String>,
) {
    if let Some(archive) = &spec.db_archive {
        if let Some(schedule) = archive.schedule.as_deref().filter(|s| !s.is_empty()) {
            common::cron_schedule(&path.child("schedule"), schedule, errors);
        }
        for (field, value, min, detail) in [
            ("maxRows", archive.max_rows, 1, "maxRows must be at least 1"),
            ("sleep", archive.sleep, 0, "sleep must be non-negative"),
            (
                "retentionDays",
                archive.retention_days,
                1,
                "retentionDays must be at least 1",
            ),
        ] {
            floor(path, field, value, min, detail, errors);
        }
    }
    let Some(old) = old else { return };
    let before = old.db_archive.as_ref().and_then(|a| a.retention_days);
    let after = spec.db_archive.as_ref().and_then(|a| a.retention_days);
    match (before, after) {
        (Some(b), Some(a)) if a < b => warnings.push(format!(
            "{path}.retentionDays lowered from {b} to {a}: the next archive run also moves the rows soft-deleted between {a} and {b} days ago into the shadow tables"
        )),
        (Some(b), None) => warnings.push(format!(
            "{path}.retentionDays removed (was {b}): the next archive run moves every soft-deleted row, including those of the last {b} days, into the shadow tables"
        )),
        _ => {}
    }
}

/// extraConfig: the guards always; the catalog on create, and on update only when extraConfig
/// or the release changed.
fn extra_config_rules(
    spec: &NovaSpec,
    old: Option<&NovaSpec>,
    errors: &mut Violations,
    warnings: &mut Vec<String>,
) {
    let Some(extra) = &spec.extra_config else {
        return;
    };
    extra_config::guards(extra, &REGISTRY, errors);
    let rescan = old.is_none_or(|o| {
        o.extra_config != spec.extra_config || o.open_stack_release != spec.open_stack_release
    });
    if rescan {
        extra_config::catalog_check(extra, &spec.open_stack_release, &REGISTRY, errors, warnings);
    }
}

#[cfg(test)]
#[path = "nova_tests.rs"]
mod tests;
