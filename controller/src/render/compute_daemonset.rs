//! The pool DaemonSet `{name}-nova-compute` (`novacompute.md` §5.6–5.8): the node affinity
//! from the selector and the excluded and held nodes, the host-integrated pod (host network,
//! the libvirt, Open vSwitch and storage host mounts), two init containers and the privileged
//! nova-compute container.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, HostPathVolumeSource, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec,
    SeccompProfile, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nova_api::defaults::DEFAULT_GRACE_SECONDS;
use nova_api::labels::{
    COMPONENT, NOVA_COMPUTE_COMPONENT, novacompute_common, novacompute_selector,
};
use nova_api::names::NovaComputeNames;
use nova_api::v1alpha1::{ImageSpec, NovaComputeSpec, UpdateStrategyType};

use super::contract_keys as keys;
use super::paths::{COMPUTE_CONFIG_DIR, STATE_PATH};
use super::pod::{
    TMP_DIR, container_security_context, from_secret, image_pull_secrets, resources_defaulted,
};

/// The pod-template annotation carrying the contract digest (the reference's spelling).
pub const COMPUTE_CONFIG_HASH: &str = "nova.openstack.c5c3.io/compute-config-hash";
/// Where the pool ConfigMap is mounted (nova-compute's `--config-dir`).
pub const POOL_CONFIG_DIR: &str = "/etc/nova/compute-pool.conf.d";
/// The CPU request of a pool container whose resources name no CPU.
pub const CPU_REQUEST: &str = "150m";
/// The memory request and limit of a pool container whose resources name no memory.
pub const MEMORY_MEBIBYTES: i64 = 768;
/// The OVSDB socket the chassis gate and os-vif talk to.
const OVSDB_SOCKET: &str = "/run/openvswitch/db.sock";
const WAIT_FOR_CHASSIS: &str = include_str!("wait_for_chassis.py");

/// The node field a `matchFields` requirement can name.
const NODE_NAME_FIELD: &str = "metadata.name";

/// What the DaemonSet is built from.
#[derive(Clone, Debug)]
pub struct PoolInputs<'a> {
    /// The pool's name.
    pub name: &'a str,
    /// The pool's spec.
    pub spec: &'a NovaComputeSpec,
    /// The nova-compute image.
    pub image: &'a ImageSpec,
    /// The compute contract Secret.
    pub contract_secret: &'a str,
    /// The pool ConfigMap.
    pub config_map: &'a str,
    /// The contract digest.
    pub contract_hash: &'a str,
    /// The node affinity.
    pub affinity: NodeAffinity,
}

fn requirement(key: &str, operator: &str, value: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: operator.to_owned(),
        values: Some(vec![value.to_owned()]),
    }
}

/// The node affinity of a pool: unless it is deleting, one term matching `selector` (keys
/// sorted) that excludes each `excluded` node (a `Conflict`); plus one term per `kept` node
/// (a held node keeps its pod whatever its labels say). None when no term remains.
pub fn node_affinity(
    selector: &BTreeMap<String, String>,
    excluded: &BTreeSet<String>,
    kept: &BTreeSet<String>,
    deleting: bool,
) -> Option<NodeAffinity> {
    let mut terms = Vec::new();
    if !deleting {
        let expressions = selector
            .iter()
            .map(|(k, v)| requirement(k, "In", v))
            .collect();
        let fields: Vec<NodeSelectorRequirement> = excluded
            .iter()
            .map(|node| requirement(NODE_NAME_FIELD, "NotIn", node))
            .collect();
        terms.push(NodeSelectorTerm {
            match_expressions: Some(expressions),
            match_fields: (!fields.is_empty()).then_some(fields),
        });
    }
    terms.extend(kept.iter().map(|node| NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![requirement(NODE_NAME_FIELD, "In", node)]),
    }));
    (!terms.is_empty()).then(|| NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: terms,
        }),
        ..Default::default()
    })
}

fn from_field(var: &str, path: &str) -> EnvVar {
    EnvVar {
        name: var.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The nova-compute environment, in its fixed order: the node's identity from the downward
/// API, the bus URL and the passwords from the contract (never rendered into a file).
fn environment(contract: &str) -> Vec<EnvVar> {
    let mut env = vec![
        from_field("OS_DEFAULT__HOST", "spec.nodeName"),
        from_field("OS_DEFAULT__MY_IP", "status.hostIP"),
        from_field("OS_VNC__SERVER_PROXYCLIENT_ADDRESS", "status.hostIP"),
        from_field("OS_LIBVIRT__LIVE_MIGRATION_INBOUND_ADDR", "status.hostIP"),
        from_secret("OS_DEFAULT__TRANSPORT_URL", contract, keys::TRANSPORT_URL),
    ];
    for section in [
        "KEYSTONE_AUTHTOKEN",
        "SERVICE_USER",
        "PLACEMENT",
        "NEUTRON",
        "CINDER",
    ] {
        env.push(from_secret(
            &format!("OS_{section}__PASSWORD"),
            contract,
            keys::PASSWORD,
        ));
    }
    env
}

/// One host mount: the volume and where the main container mounts it.
struct HostMount {
    volume: &'static str,
    path: &'static str,
    type_: Option<&'static str>,
    read_only: bool,
    propagation: Option<&'static str>,
}

const fn host(volume: &'static str, path: &'static str, type_: Option<&'static str>) -> HostMount {
    HostMount {
        volume,
        path,
        type_,
        read_only: false,
        propagation: None,
    }
}

const DIRECTORY: Option<&str> = Some("DirectoryOrCreate");

/// The host mounts of the main container, in order.
const HOST_MOUNTS: [HostMount; 10] = [
    host("run-libvirt", "/run/libvirt", DIRECTORY),
    HostMount {
        // NFS mounts under /var/lib/nova/mnt must reach the host's QEMU.
        propagation: Some("Bidirectional"),
        ..host("var-lib-nova", STATE_PATH, DIRECTORY)
    },
    host("run-openvswitch", "/run/openvswitch", DIRECTORY),
    host("dev", "/dev", None),
    HostMount {
        read_only: true,
        ..host("sys-fs-cgroup", "/sys/fs/cgroup", None)
    },
    HostMount {
        read_only: true,
        ..host("lib-modules", "/lib/modules", None)
    },
    host("etc-iscsi", "/etc/iscsi", DIRECTORY),
    host("etc-nvme", "/etc/nvme", DIRECTORY),
    host("etc-multipath", "/etc/multipath", DIRECTORY),
    host(
        "etc-multipath-conf",
        "/etc/multipath.conf",
        Some("FileOrCreate"),
    ),
];

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn main_mounts() -> Vec<VolumeMount> {
    let mut mounts = vec![
        mount("compute-config", COMPUTE_CONFIG_DIR, true),
        mount("pool-config", POOL_CONFIG_DIR, true),
    ];
    mounts.extend(HOST_MOUNTS.iter().map(|m| VolumeMount {
        mount_propagation: m.propagation.map(str::to_owned),
        ..mount(m.volume, m.path, m.read_only)
    }));
    mounts.push(mount("tmp", TMP_DIR, false));
    mounts
}

fn volumes(inputs: &PoolInputs<'_>) -> Vec<Volume> {
    let mut volumes = vec![
        Volume {
            name: "compute-config".to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(inputs.contract_secret.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "pool-config".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: inputs.config_map.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    volumes.extend(HOST_MOUNTS.iter().map(|m| Volume {
        name: m.volume.to_owned(),
        host_path: Some(HostPathVolumeSource {
            path: m.path.to_owned(),
            type_: m.type_.map(str::to_owned),
        }),
        ..Default::default()
    }));
    volumes.push(Volume {
        name: "tmp".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
    volumes
}

fn runtime_default() -> Option<SeccompProfile> {
    Some(SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        ..Default::default()
    })
}

/// `mkdir` as root with only DAC_OVERRIDE, so it can create the directory under a root-owned
/// host path without any other privilege.
fn instances_dir_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            add: Some(vec!["DAC_OVERRIDE".to_owned()]),
            drop: Some(vec!["ALL".to_owned()]),
        }),
        privileged: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_group: Some(0),
        run_as_non_root: Some(false),
        run_as_user: Some(0),
        seccomp_profile: runtime_default(),
        ..Default::default()
    }
}

/// Root and privileged: the libvirt socket's group differs per host, the host directories are
/// root-owned, and the privsep daemons need the capabilities.
fn compute_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(true),
        privileged: Some(true),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(false),
        run_as_user: Some(0),
        ..Default::default()
    }
}

fn update_strategy(spec: &NovaComputeSpec) -> DaemonSetUpdateStrategy {
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    match strategy.type_ {
        Some(UpdateStrategyType::OnDelete) => DaemonSetUpdateStrategy {
            type_: Some("OnDelete".to_owned()),
            rolling_update: None,
        },
        _ => DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".to_owned()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_unavailable: Some(strategy.max_unavailable.unwrap_or(IntOrString::Int(1))),
                ..Default::default()
            }),
        },
    }
}

/// The pool DaemonSet.
pub fn daemonset(inputs: &PoolInputs<'_>) -> DaemonSet {
    let spec = inputs.spec;
    let resources = resources_defaulted(spec.resources.as_ref(), CPU_REQUEST, MEMORY_MEBIBYTES);
    let image = Some(inputs.image.reference());
    let pull = Some(inputs.image.pull_policy().to_owned());
    let init = |name: &str, command: Vec<String>| Container {
        name: name.to_owned(),
        image: image.clone(),
        image_pull_policy: pull.clone(),
        command: Some(command),
        resources: Some(resources.clone()),
        ..Default::default()
    };
    let create_instances_dir = Container {
        security_context: Some(instances_dir_security()),
        volume_mounts: Some(vec![mount("var-lib-nova", STATE_PATH, false)]),
        ..init(
            "create-instances-dir",
            ["mkdir", "-p", "-m", "0755", "/var/lib/nova/instances"]
                .map(str::to_owned)
                .to_vec(),
        )
    };
    let wait_for_chassis = Container {
        env: Some(vec![EnvVar {
            name: "OVSDB_SOCKET".to_owned(),
            value: Some(OVSDB_SOCKET.to_owned()),
            ..Default::default()
        }]),
        security_context: Some(container_security_context()),
        volume_mounts: Some(vec![mount("run-openvswitch", "/run/openvswitch", false)]),
        ..init(
            "wait-for-chassis",
            vec!["python3".into(), "-c".into(), WAIT_FOR_CHASSIS.into()],
        )
    };
    let nova_compute = Container {
        env: Some(environment(inputs.contract_secret)),
        security_context: Some(compute_security()),
        volume_mounts: Some(main_mounts()),
        ..init(
            NOVA_COMPUTE_COMPONENT,
            [
                "nova-compute",
                "--config-file",
                "/etc/nova/compute-config/nova-compute.conf",
                "--config-dir",
                POOL_CONFIG_DIR,
            ]
            .map(str::to_owned)
            .to_vec(),
        )
    };
    let mut labels = novacompute_common(inputs.name);
    labels.insert(COMPONENT.to_owned(), NOVA_COMPUTE_COMPONENT.to_owned());
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(NovaComputeNames::new(inputs.name).daemonset()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(novacompute_selector(inputs.name)),
                ..Default::default()
            },
            update_strategy: Some(update_strategy(spec)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(BTreeMap::from([(
                        COMPUTE_CONFIG_HASH.to_owned(),
                        inputs.contract_hash.to_owned(),
                    )])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    affinity: Some(Affinity {
                        node_affinity: Some(inputs.affinity.clone()),
                        ..Default::default()
                    }),
                    containers: vec![nova_compute],
                    dns_policy: Some("ClusterFirstWithHostNet".to_owned()),
                    host_network: Some(true),
                    image_pull_secrets: image_pull_secrets(spec.image_pull_secrets.as_deref()),
                    init_containers: Some(vec![create_instances_dir, wait_for_chassis]),
                    // No fsGroup: it would be applied to the host directories.
                    security_context: Some(PodSecurityContext {
                        seccomp_profile: runtime_default(),
                        ..Default::default()
                    }),
                    termination_grace_period_seconds: Some(DEFAULT_GRACE_SECONDS),
                    tolerations: spec.tolerations.clone(),
                    volumes: Some(volumes(inputs)),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn spec(extra: serde_json::Value) -> NovaComputeSpec {
        let mut spec = json!({"novaRef": {"name": "nova"}, "nodeSelector": {"pool": "a"}});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(spec).expect("spec")
    }

    fn rendered(spec: &NovaComputeSpec, image: &ImageSpec) -> serde_json::Value {
        let affinity = node_affinity(
            &spec.node_selector,
            &BTreeSet::new(),
            &BTreeSet::new(),
            false,
        )
        .expect("terms");
        serde_json::to_value(daemonset(&PoolInputs {
            name: "pool-a",
            spec,
            image,
            contract_secret: "nova-compute-config",
            config_map: "pool-a-config-1",
            contract_hash: "h",
            affinity,
        }))
        .expect("serializes")
    }

    fn tagged() -> ImageSpec {
        ImageSpec {
            repository: "ghcr.io/c5c3/nova-compute".into(),
            tag: Some("2026.1".into()),
            digest: None,
        }
    }

    #[test]
    fn defaults_resources_strategy_and_pull_policy() {
        let ds = rendered(&spec(json!({})), &tagged());
        let pod = &ds["spec"]["template"]["spec"];
        for container in [
            &pod["initContainers"][0],
            &pod["initContainers"][1],
            &pod["containers"][0],
        ] {
            assert_eq!(
                container["resources"],
                json!({"requests": {"cpu": "150m", "memory": "768Mi"}, "limits": {"memory": "768Mi"}}),
                "{}",
                container["name"]
            );
            assert_eq!(container["imagePullPolicy"], "Always");
        }
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
        );
        assert!(pod.get("tolerations").is_none());
        assert!(
            pod["securityContext"].get("fsGroup").is_none(),
            "never on host paths"
        );
        assert!(pod["containers"][0].get("livenessProbe").is_none());
    }

    #[test]
    fn the_spec_shapes_strategy_resources_tolerations_image_and_pull_secrets() {
        let spec = spec(json!({
            "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": "25%"},
            "resources": {"requests": {"cpu": "0"}, "limits": {"hugepages-2Mi": "1Gi"}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "compute", "effect": "NoSchedule"}]
        }));
        let pinned = ImageSpec {
            tag: None,
            digest: Some(format!("sha256:{}", "a".repeat(64))),
            ..tagged()
        };
        let ds = rendered(&spec, &pinned);
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(
            ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            "25%"
        );
        assert_eq!(
            pod["containers"][0]["resources"],
            json!({"requests": {"cpu": "0", "memory": "768Mi"}, "limits": {"hugepages-2Mi": "1Gi", "memory": "768Mi"}}),
            "a named zero is kept; memory still defaults"
        );
        assert_eq!(pod["tolerations"][0]["key"], "dedicated");
        assert!(
            pod.get("imagePullSecrets").is_none(),
            "none named, none set"
        );
        let pulled = rendered(
            &self::spec(json!({"imagePullSecrets": [{"name": "registry"}]})),
            &tagged(),
        );
        assert_eq!(
            pulled["spec"]["template"]["spec"]["imagePullSecrets"],
            json!([{"name": "registry"}])
        );
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert!(
            pod["containers"][0]["image"]
                .as_str()
                .is_some_and(|i| i.contains("@sha256:"))
        );
        let on_delete = rendered(&spec_on_delete(), &tagged());
        assert_eq!(
            on_delete["spec"]["updateStrategy"],
            json!({"type": "OnDelete"})
        );
    }

    fn spec_on_delete() -> NovaComputeSpec {
        spec(json!({"updateStrategy": {"type": "OnDelete"}}))
    }

    fn terms(affinity: &NodeAffinity) -> serde_json::Value {
        serde_json::to_value(affinity).expect("serializes")
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            .clone()
    }

    #[test]
    fn the_affinity_selects_excludes_conflicts_and_keeps_draining_nodes() {
        let selector = BTreeMap::from([
            ("zeta".to_owned(), "1".to_owned()),
            ("alpha".to_owned(), "a".to_owned()),
        ]);
        let affinity = node_affinity(&selector, &set(&["n9", "n2"]), &set(&["n5", "n3"]), false)
            .expect("terms");
        assert_eq!(
            terms(&affinity),
            json!([
                {
                    "matchExpressions": [
                        {"key": "alpha", "operator": "In", "values": ["a"]},
                        {"key": "zeta", "operator": "In", "values": ["1"]}
                    ],
                    "matchFields": [
                        {"key": "metadata.name", "operator": "NotIn", "values": ["n2"]},
                        {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
                    ]
                },
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n5"]}]}
            ])
        );
        let plain =
            node_affinity(&selector, &BTreeSet::new(), &BTreeSet::new(), false).expect("terms");
        assert!(terms(&plain)[0].get("matchFields").is_none());
        let deleting = node_affinity(&selector, &set(&["n2"]), &set(&["n3"]), true).expect("terms");
        assert_eq!(
            terms(&deleting),
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]),
            "a deleting pool keeps only its draining nodes"
        );
        assert_eq!(
            node_affinity(&selector, &set(&["n2"]), &BTreeSet::new(), true),
            None,
            "no term: the DaemonSet goes"
        );
    }
}
