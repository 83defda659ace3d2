//! The five Deployments and what fronts them (`nova-crd.txt`, "Config directories and
//! mounts", "Sub-Resource Naming Convention"; `common-types.md` §3.16 and UWSGISpec): the
//! Deployment of each role built from the pod blocks, the Services of the three front ends and
//! the API's PodDisruptionBudget. Pure functions of the spec and what the steps resolved.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec as K8sDeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, ExecAction, HTTPGetAction, PodSpec, PodTemplateSpec, Probe,
    Service, ServicePort, ServiceSpec, TCPSocketAction,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nova_api::defaults::{DEFAULT_UWSGI_PROCESSES, DEFAULT_UWSGI_THREADS};
use nova_api::labels;
use nova_api::v1alpha1::{NovaSpec, ProbeTimingSpec};

use super::paths::{CONFIG_DIR, NOVNCPROXY_PORT};
use super::pod::{self, PodInputs, Role};

/// The API's port, its Service's and the HTTPRoute backend's.
pub const API_PORT: u16 = 8774;
/// The metadata API's port.
pub const METADATA_PORT: u16 = 8775;
/// The paste configuration every uWSGI front end loads first.
pub const API_PASTE_INI: &str = "/var/lib/openstack/etc/nova/api-paste.ini";
/// The uWSGI request log format.
pub const UWSGI_LOG_FORMAT: &str =
    "%(method) %(uri) => generated %(rsize) bytes in %(msecs) msecs (%(proto) %(status))";
/// The label every Job's pods carry, which the PDB selector excludes.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// The readiness probe of the two bus workloads ("nova-amqp-ready"): the pod holds an
/// established TCP connection to the broker port `NOVA_AMQP_PORT` names. The port travels in
/// the environment, so it stays out of the Unhealthy event the kubelet copies a probe's output
/// into; the check reads the pod's own socket tables, so it needs nothing the image lacks.
pub const AMQP_READY: &str = "port=$(printf ':%04X' \"$NOVA_AMQP_PORT\") && awk -v p=\"$port\" '$4 == \"01\" && substr($3, length($3) - 4) == p { up = 1 } END { exit !up }' /proc/net/tcp /proc/net/tcp6";

/// The HTTP port a role serves, if any.
pub fn port(role: Role) -> Option<u16> {
    match role {
        Role::Api => Some(API_PORT),
        Role::Metadata => Some(METADATA_PORT),
        Role::NovncProxy => Some(NOVNCPROXY_PORT),
        _ => None,
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The uWSGI launch of an HTTP front end, in the shared builder's order: bind, keep-alive,
/// request log, module, master and process model, `--die-on-term` (the trailing argument of
/// both front ends, so SIGTERM stops them), and the harakiri last.
pub fn uwsgi_command(spec: &NovaSpec, role: Role) -> Vec<String> {
    let (bind, module) = match role {
        Role::Metadata => (METADATA_PORT, "nova.wsgi.metadata:application"),
        _ => (API_PORT, "nova.wsgi.osapi_compute:application"),
    };
    let uwsgi = role.uwsgi(spec).cloned().unwrap_or_default();
    let positive = |v: Option<i32>, default: i32| v.filter(|n| *n > 0).unwrap_or(default);
    let mut command = vec!["uwsgi".to_owned(), "--http".to_owned(), format!(":{bind}")];
    if uwsgi.http_keep_alive.unwrap_or(true) {
        command.push("--http-keepalive".to_owned());
        if let Some(timeout) = uwsgi.http_keep_alive_timeout.filter(|t| *t > 0) {
            command.extend(["--http-keepalive-timeout".to_owned(), timeout.to_string()]);
        }
    }
    command.extend(strings(&[
        "--log-master",
        "--log-format",
        UWSGI_LOG_FORMAT,
        "--module",
        module,
        "--master",
        "--lazy-apps",
        "--need-app",
        "--processes",
    ]));
    command.push(positive(uwsgi.processes, DEFAULT_UWSGI_PROCESSES).to_string());
    command.push("--threads".to_owned());
    command.push(positive(uwsgi.threads, DEFAULT_UWSGI_THREADS).to_string());
    // uWSGI 2.0 reloads on SIGTERM; without this the pod only ends when the grace period
    // runs out and the kubelet kills it (measured on the real node: 28 s instead of ~6 s).
    command.push("--die-on-term".to_owned());
    if let Some(harakiri) = uwsgi.harakiri.filter(|h| *h > 0) {
        command.extend(["--harakiri".to_owned(), harakiri.to_string()]);
    }
    command
}

/// The console-script launch of a bus or console role: the shared config directory, then its
/// overlay directory.
pub fn console_script_command(role: Role) -> Vec<String> {
    let mut command = vec![role.container_name().to_owned()];
    command.extend(["--config-dir".to_owned(), CONFIG_DIR.to_owned()]);
    if let Some((dir, _)) = role.overlay() {
        command.extend(["--config-dir".to_owned(), dir.to_owned()]);
    }
    command
}

fn front_end_env(role: Role) -> Vec<EnvVar> {
    let files = match role {
        Role::Metadata => format!("{API_PASTE_INI};nova.conf;metadata.conf"),
        _ => format!("{API_PASTE_INI};nova.conf"),
    };
    [
        ("OS_NOVA_CONFIG_DIR", CONFIG_DIR.to_owned()),
        ("OS_NOVA_CONFIG_FILES", files),
    ]
    .into_iter()
    .map(|(name, value)| EnvVar {
        name: name.to_owned(),
        value: Some(value),
        ..Default::default()
    })
    .collect()
}

fn http_probe(port: u16, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/".to_owned()),
            port: IntOrString::Int(i32::from(port)),
            scheme: Some("HTTP".to_owned()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

fn tcp_probe(port: u16, period: i32, failures: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(i32::from(port)),
            ..Default::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

/// The probes of a role: (startup, readiness, liveness). The front ends answer their root
/// documents without a token; the proxy accepts a TCP connection; the bus workloads are ready
/// while they hold a broker connection (no liveness: a broker outage must not restart them).
fn probes(role: Role) -> (Option<Probe>, Option<Probe>, Option<Probe>) {
    match role {
        Role::Api | Role::Metadata => {
            let port = port(role).unwrap_or(API_PORT);
            (
                Some(http_probe(port, 2, 90)),
                Some(http_probe(port, 5, 3)),
                Some(http_probe(port, 10, 3)),
            )
        }
        Role::NovncProxy => (
            Some(tcp_probe(NOVNCPROXY_PORT, 2, 90)),
            Some(tcp_probe(NOVNCPROXY_PORT, 5, 3)),
            Some(tcp_probe(NOVNCPROXY_PORT, 10, 3)),
        ),
        Role::Scheduler | Role::Conductor => (
            None,
            Some(Probe {
                exec: Some(ExecAction {
                    command: Some(strings(&["/bin/sh", "-c", AMQP_READY])),
                }),
                period_seconds: Some(10),
                timeout_seconds: Some(5),
                failure_threshold: Some(3),
                ..Default::default()
            }),
            None,
        ),
        Role::Job => (None, None, None),
    }
}

/// A rendered probe under a deployment block's timing overrides: each field set replaces the
/// operator's value, the handler stays.
fn timed(probe: Option<Probe>, timing: Option<&ProbeTimingSpec>) -> Option<Probe> {
    let mut probe = probe?;
    if let Some(t) = timing {
        probe.initial_delay_seconds = t.initial_delay_seconds.or(probe.initial_delay_seconds);
        probe.period_seconds = t.period_seconds.or(probe.period_seconds);
        probe.timeout_seconds = t.timeout_seconds.or(probe.timeout_seconds);
        probe.failure_threshold = t.failure_threshold.or(probe.failure_threshold);
        probe.success_threshold = t.success_threshold.or(probe.success_threshold);
    }
    Some(probe)
}

/// The container of a long-running role.
pub fn workload_container(inputs: &PodInputs<'_>, role: Role) -> Container {
    let spec = inputs.spec;
    let (command, extra_env) = match role {
        Role::Api | Role::Metadata => (uwsgi_command(spec, role), front_end_env(role)),
        _ => (console_script_command(role), Vec::new()),
    };
    let (startup, readiness, liveness) = probes(role);
    let timing = role.deployment(spec).and_then(|d| d.probes.as_ref());
    Container {
        ports: port(role).map(|p| {
            vec![ContainerPort {
                container_port: i32::from(p),
                name: Some("http".to_owned()),
                protocol: Some("TCP".to_owned()),
                ..Default::default()
            }]
        }),
        resources: Some(pod::role_resources(spec, role)),
        lifecycle: pod::pre_stop(role.deployment(spec)),
        startup_probe: timed(startup, timing.and_then(|t| t.startup.as_ref())),
        readiness_probe: timed(readiness, timing.and_then(|t| t.readiness.as_ref())),
        liveness_probe: timed(liveness, timing.and_then(|t| t.liveness.as_ref())),
        ..pod::container(inputs, role, command, extra_env)
    }
}

/// The pod labels of a role: the common labels plus its component.
pub fn pod_labels(name: &str, role: Role) -> BTreeMap<String, String> {
    let mut labels = labels::common(name);
    if let Some(component) = role.component() {
        labels.insert(labels::COMPONENT.to_owned(), component.to_owned());
    }
    labels
}

/// The pod selector of a role's Deployment and Service.
pub fn selector(name: &str, role: Role) -> BTreeMap<String, String> {
    labels::selector(name, role.component().unwrap_or_default())
}

/// The pod template of a long-running role.
pub fn pod_template(inputs: &PodInputs<'_>, role: Role) -> PodTemplateSpec {
    let spec = inputs.spec;
    let block = role.deployment(spec);
    let placement = pod::deployment_placement(block);
    let annotations = pod::annotations(inputs, role);
    PodTemplateSpec {
        metadata: Some(pod::pod_metadata(
            spec,
            pod_labels(inputs.name, role),
            annotations,
        )),
        spec: Some(PodSpec {
            containers: vec![workload_container(inputs, role)],
            image_pull_secrets: pod::image_pull_secrets(spec.image_pull_secrets.as_deref()),
            volumes: Some(pod::volumes(inputs, role)),
            security_context: Some(pod::pod_security_context()),
            termination_grace_period_seconds: Some(role.grace_seconds(spec)),
            topology_spread_constraints: Some(pod::topology_spread(
                block,
                &selector(inputs.name, role),
            ))
            .filter(|t| !t.is_empty()),
            node_selector: placement.node_selector,
            tolerations: placement.tolerations,
            affinity: placement.affinity,
            priority_class_name: placement.priority_class_name,
            ..Default::default()
        }),
    }
}

/// The default rollout: surge one new pod before an old one goes, never below the count.
fn default_strategy() -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".to_owned()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(0)),
        }),
    }
}

/// Whether an HPA owns the API Deployment's replica count.
pub fn autoscaled(spec: &NovaSpec, role: Role) -> bool {
    role == Role::Api && spec.autoscaling.is_some()
}

/// The live Deployment's replica count, as an autoscaled apply must treat it
/// (`common-types.md`: "spec.replicas is left unmanaged" while an HPA owns the count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveReplicas {
    /// No Deployment yet: it is created with 1 and the HPA scales it.
    Absent,
    /// The operator still owns `spec.replicas` with this count (autoscaling was just switched
    /// on): it is written back, so the apply changes nothing, until the HPA's first scale takes
    /// the field over.
    Owned(i32),
    /// Another manager (the HPA) owns the count, or the operator owns a 1 the server's default
    /// restores anyway: the field is left out of the apply, so no pass, not even one whose
    /// cache has not yet seen the HPA's latest scale, writes an old count back.
    Released,
}

impl LiveReplicas {
    /// The count the apply writes, if any.
    fn written(self) -> Option<i32> {
        match self {
            Self::Absent => Some(1),
            Self::Owned(count) if count != 1 => Some(count),
            Self::Owned(_) | Self::Released => None,
        }
    }
}

/// The Deployment of a long-running role. While an HPA owns the API's count, the apply leaves
/// it to the autoscaler (`LiveReplicas`).
pub fn deployment(inputs: &PodInputs<'_>, role: Role, live: LiveReplicas) -> Deployment {
    let spec = inputs.spec;
    let replicas = if autoscaled(spec, role) {
        live.written()
    } else {
        Some(role.replicas(spec))
    };
    Deployment {
        metadata: ObjectMeta {
            name: role.deployment_name(inputs.name),
            ..Default::default()
        },
        spec: Some(K8sDeploymentSpec {
            replicas,
            selector: LabelSelector {
                match_labels: Some(selector(inputs.name, role)),
                ..Default::default()
            },
            strategy: Some(
                role.deployment(spec)
                    .and_then(|d| d.strategy.clone())
                    .unwrap_or_else(default_strategy),
            ),
            template: pod_template(inputs, role),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The ClusterIP Service of a front end (API, metadata, console proxy), selecting its pods by
/// component so maintenance pods never become endpoints.
pub fn service(name: &str, role: Role) -> Option<Service> {
    let port = port(role)?;
    Some(Service {
        metadata: ObjectMeta {
            name: role.deployment_name(name),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(selector(name, role)),
            ports: Some(vec![ServicePort {
                name: Some("http".to_owned()),
                port: i32::from(port),
                protocol: Some("TCP".to_owned()),
                target_port: Some(IntOrString::Int(i32::from(port))),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The API's minimum pod count the PDB protects: the HPA minimum while autoscaling (explicit,
/// or the effective replicas), else the effective replicas.
pub fn api_floor(spec: &NovaSpec) -> i32 {
    spec.autoscaling
        .as_ref()
        .and_then(|a| a.min_replicas)
        .unwrap_or_else(|| Role::Api.replicas(spec))
}

/// The API's PodDisruptionBudget: at least one pod while more than one runs, else one may go
/// (a drain must be able to evict the last pod). Its selector is the API's, minus Job pods.
pub fn api_pdb(name: &str, spec: &NovaSpec) -> PodDisruptionBudget {
    let (min_available, max_unavailable) = if api_floor(spec) > 1 {
        (Some(IntOrString::Int(1)), None)
    } else {
        (None, Some(IntOrString::Int(1)))
    };
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Role::Api.deployment_name(name),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available,
            max_unavailable,
            selector: Some(LabelSelector {
                match_labels: Some(selector(name, Role::Api)),
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: JOB_NAME_LABEL.to_owned(),
                    operator: "DoesNotExist".to_owned(),
                    values: None,
                }]),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The cluster-local URL of the API Service, `status.endpoint` without a gateway and the URL
/// the health check probes.
pub fn api_service_url(name: &str, namespace: &str) -> String {
    format!("http://{name}.{namespace}.svc.cluster.local:{API_PORT}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::example;
    use nova_api::defaults::READINESS_ONLY;
    use nova_api::v1alpha1::{DeploymentSpec, NovaAPISpec, ProbesSpec};

    #[test]
    fn timing_overrides_replace_the_rendered_values_and_keep_the_handler() {
        let timing = ProbeTimingSpec {
            initial_delay_seconds: Some(5),
            failure_threshold: Some(6),
            ..Default::default()
        };
        let rendered = http_probe(API_PORT, 10, 3);
        let probe = timed(Some(rendered.clone()), Some(&timing)).expect("a probe");
        assert_eq!(
            probe,
            Probe {
                initial_delay_seconds: Some(5),
                failure_threshold: Some(6),
                ..rendered.clone()
            }
        );
        assert_eq!(timed(Some(rendered.clone()), None), Some(rendered));
        assert_eq!(
            timed(None, Some(&timing)),
            None,
            "no probe, nothing to time"
        );

        let mut spec = example().spec;
        spec.api = Some(NovaAPISpec {
            deployment: Some(DeploymentSpec {
                probes: Some(ProbesSpec {
                    liveness: Some(timing),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        let digests = pod::Digests::default();
        let container = workload_container(
            &PodInputs {
                name: "nova",
                spec: &spec,
                config_map: "nova-config",
                digests: &digests,
                installed_release: None,
                broker_port: None,
            },
            Role::Api,
        );
        let liveness = container.liveness_probe.expect("liveness");
        assert_eq!(
            (liveness.initial_delay_seconds, liveness.period_seconds),
            (Some(5), Some(10))
        );
        assert_eq!(
            container.readiness_probe,
            Some(http_probe(API_PORT, 5, 3)),
            "the other probes keep the operator's timing"
        );
    }

    #[test]
    fn the_image_paths_the_processes_run_from_are_off_limits_to_extra_mounts() {
        for path in [API_PASTE_INI, super::super::paths::NOVNC_WEB] {
            assert!(nova_api::volumes::operator_path(path).is_some(), "{path}");
        }
    }

    #[test]
    fn the_roles_without_liveness_and_startup_probes_are_the_ones_the_webhook_knows() {
        for role in Role::WORKLOADS {
            let (startup, readiness, liveness) = probes(role);
            let readiness_only = READINESS_ONLY.contains(&role.component().unwrap_or_default());
            assert!(readiness.is_some(), "{role:?}");
            assert_eq!(startup.is_none(), readiness_only, "{role:?}");
            assert_eq!(liveness.is_none(), readiness_only, "{role:?}");
        }
    }
}
