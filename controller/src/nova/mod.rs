//! The Nova controller: its pipeline table, its steps (one file each: observe through the
//! cluster handle, then a pure plan), its cleanup, its watches and indexes.

pub mod claimants;
pub mod controller;
pub mod db_provision;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod job_run;
pub mod release;
pub mod resolved;
pub mod rollout;
pub mod route;
pub mod steps;
pub mod workload;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use nova_api::conditions::NovaConditionType as C;
use nova_api::v1alpha1::{Nova, NovaStatus};

use crate::pipeline::kinds;
use crate::pipeline::uses::Role;
use crate::pipeline::{Pass, PlanOf, Reconciled, Stage, member, parallel, seq};
use steps::{
    compute_config, conductor, config, console_http_route, console_proxy, database, db_archive,
    db_connection, deployment, endpoint_warnings, finalize, health_check, hpa, http_route,
    metadata, metadata_http_route, network_policy, scheduler, secrets, transport_url, vpa,
};

/// One pass over one Nova.
pub type NovaPass = Pass<Nova>;
/// A Nova step's plan.
pub type NovaPlan = PlanOf<Nova>;

/// The Nova pipeline, in order. The workload steps run behind the Database step, in the order
/// a release upgrade rolls them; DBArchive follows them, and the parallel group behind it has no
/// inter-dependency. Each row names a file in `steps/`.
pub static PIPELINE: [Stage<Nova>; 14] = [
    seq("EndpointWarnings", C::SecretsReady, endpoint_warnings::run),
    seq("Secrets", C::SecretsReady, secrets::run).using(secrets::KINDS),
    seq("DBConnectionSecrets", C::SecretsReady, db_connection::run).using(db_connection::KINDS),
    seq("TransportURLSecret", C::SecretsReady, transport_url::run).using(transport_url::KINDS),
    seq("Config", C::SecretsReady, config::run).using(config::KINDS),
    seq("ComputeConfig", C::ComputeConfigReady, compute_config::run).using(compute_config::KINDS),
    seq("Database", C::DatabaseReady, database::run).using(database::KINDS),
    seq("Conductor", C::ConductorReady, conductor::run).using(workload::KINDS),
    seq("Scheduler", C::SchedulerReady, scheduler::run).using(workload::KINDS),
    seq("Metadata", C::MetadataReady, metadata::run).using(workload::WITH_SERVICE),
    seq("ConsoleProxy", C::ConsoleProxyReady, console_proxy::run).using(workload::WITH_SERVICE),
    seq("Deployment", C::DeploymentReady, deployment::run).using(deployment::KINDS),
    seq("DBArchive", C::DBArchiveReady, db_archive::run).using(db_archive::KINDS),
    parallel(&[
        member("HTTPRoute", C::HTTPRouteReady, http_route::run).using(route::KINDS),
        member(
            "MetadataHTTPRoute",
            C::MetadataHTTPRouteReady,
            metadata_http_route::run,
        )
        .using(route::KINDS),
        member(
            "ConsoleHTTPRoute",
            C::ConsoleHTTPRouteReady,
            console_http_route::run,
        )
        .using(route::KINDS),
        member("HealthCheck", C::NovaAPIReady, health_check::run),
        member("HPA", C::HPAReady, hpa::run).using(hpa::KINDS),
        member("VPA", C::VPAReady, vpa::run).using(vpa::KINDS),
        member("NetworkPolicy", C::NetworkPolicyReady, network_policy::run)
            .using(network_policy::KINDS),
    ]),
];

/// Every table: what the rows' declared kinds are gathered from (`pipeline::kinds`).
pub static TABLES: &[&[Stage<Nova>]] = &[&PIPELINE, &CLEANUP];

/// What a deleting Nova runs before its finalizer is released.
pub static CLEANUP: [Stage<Nova>; 1] =
    [seq("DatabaseFinalizer", C::DatabaseReady, finalize::run).using(finalize::KINDS)];

/// The finalizer that holds a Nova until its database CRs are released.
pub const FINALIZER: &str = "nova.openstack.c5c3.io/finalizer";

impl Reconciled for Nova {
    type Status = NovaStatus;
    type Resolved = resolved::Resolved;
    type StatusUpdate = resolved::StatusUpdate;
    type Condition = C;
    type Shared = claimants::Claimants;

    const FINALIZER: &'static str = FINALIZER;
    const TARGET_GATE: C = C::SecretsReady;
    const PAUSED: C = C::Paused;

    fn aggregated() -> &'static [C] {
        &C::AGGREGATED
    }

    fn pipeline() -> &'static [Stage<Self>] {
        &PIPELINE
    }

    fn cleanup(&self) -> &'static [Stage<Self>] {
        &CLEANUP
    }

    fn status(&self) -> Option<&NovaStatus> {
        self.status.as_ref()
    }

    fn conditions(status: &mut NovaStatus) -> &mut Vec<Condition> {
        &mut status.conditions
    }

    fn set_observed_generation(status: &mut NovaStatus, generation: Option<i64>) {
        status.observed_generation = generation;
    }

    fn update(status: &mut NovaStatus, update: resolved::StatusUpdate) {
        update.apply(status);
    }

    fn common_labels(&self) -> BTreeMap<String, String> {
        nova_api::labels::common(&self.name_any())
    }

    fn target_cluster(&self) -> Option<&str> {
        self.spec
            .target_cluster_ref
            .as_ref()
            .map(|t| t.name.as_str())
    }

    /// The kinds the rows own: Deployments, Services, ConfigMaps, Secrets, Jobs, the CronJob,
    /// the PDB, the HPA, the NetworkPolicy, the HTTPRoutes, the three MariaDB kinds and the VPA
    /// (`common-types.md` §3.17 "Nova's remote kinds").
    fn remote_kinds() -> Vec<kube::core::ApiResource> {
        kinds::in_role(TABLES, Role::Owns)
    }

    fn forget_metrics(metrics: &crate::metrics::Metrics, namespace: &str, name: &str) {
        metrics.forget_nova(namespace, name);
    }

    fn report_status(
        metrics: &crate::metrics::Metrics,
        namespace: &str,
        name: &str,
        status: &NovaStatus,
    ) {
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        metrics
            .nova_ready
            .with_label_values(&[name, namespace])
            .set(i64::from(ready));
    }
}
