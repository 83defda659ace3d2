//! Table-driven tests of the 26 NovaCompute rules and the traits rules.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nova_api::v1alpha1::{
    ImageSpec, NovaComputeHostTraits, NovaComputeLibvirtSpec, NovaComputeUpdateStrategy,
    TargetClusterRefSpec, VPAUpdateMode, VerticalAutoscalingSpec,
};
use pretty_assertions::assert_eq;

use super::*;
use crate::validation::testing::{self, errors};

type Edit = fn(&mut NovaCompute);

fn found() -> Option<NovaRelease> {
    Some(NovaRelease::Found("2026.1".into()))
}

fn create(edit: Edit) -> Outcome {
    let mut n = testing::novacompute();
    edit(&mut n);
    let nova = needs_nova(&n, None, Operation::Create)
        .then(found)
        .flatten();
    validate(&n, None, Operation::Create, nova.as_ref())
}

fn update(old_edit: Edit, new_edit: Edit) -> Outcome {
    let mut old = testing::novacompute();
    old_edit(&mut old);
    let mut new = old.clone();
    new_edit(&mut new);
    let nova = needs_nova(&new, Some(&old), Operation::Update)
        .then(found)
        .flatten();
    validate(&new, Some(&old), Operation::Update, nova.as_ref())
}

fn check(cases: &[(&str, Edit, &[&str])]) {
    for (name, edit, want) in cases {
        assert_eq!(errors(&create(*edit)), want.to_vec(), "case {name}");
    }
}

fn tol(key: &str, op: &str, value: &str, effect: &str, seconds: Option<i64>) -> Toleration {
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Toleration {
        key: opt(key),
        operator: opt(op),
        value: opt(value),
        effect: opt(effect),
        toleration_seconds: seconds,
    }
}

fn strategy(
    type_: Option<UpdateStrategyType>,
    mu: IntOrString,
) -> Option<NovaComputeUpdateStrategy> {
    Some(NovaComputeUpdateStrategy {
        type_,
        max_unavailable: Some(mu),
    })
}

fn extra(n: &mut NovaCompute, section: &str, key: &str, value: &str) {
    n.spec
        .extra_config
        .get_or_insert_with(Default::default)
        .entry(section.into())
        .or_default()
        .insert(key.into(), value.into());
}

const OFFBOARDING: &str = "tolerates kvm.cloud.sap/offboarding:NoExecute; openstack-hypervisor-operator deletes the compute service only after every agent pod on the node is gone, and a nova-compute that stays re-registers it";

#[test]
fn the_example_pool_is_admitted() {
    assert_eq!(create(|_| {}), Outcome::default());
}

#[test]
fn rules_1_to_8() {
    check(&[
        (
            "63 characters",
            |n| n.metadata.name = Some("p".repeat(63)),
            &[],
        ),
        (
            "64 characters",
            |n| n.metadata.name = Some("p".repeat(64)),
            &[
                "metadata.name: Invalid value: \"pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp\": name must be at most 63 characters: it is the app.kubernetes.io/instance label value of every child",
            ],
        ),
        (
            "empty novaRef",
            |n| n.spec.nova_ref.name.clear(),
            &[
                "spec.novaRef.name: Required value: novaRef.name must be set (the Nova this node pool joins)",
            ],
        ),
        (
            "target without name",
            |n| n.spec.target_cluster_ref = Some(TargetClusterRefSpec::default()),
            &["spec.targetClusterRef.name: Required value: target cluster name must be set"],
        ),
        (
            "image",
            |n| {
                n.spec.image = Some(ImageSpec {
                    repository: "ghcr.io/c5c3/nova-compute".into(),
                    tag: Some("2026.1".into()),
                    digest: None,
                })
            },
            &[],
        ),
        (
            "image without repository, both pins",
            |n| {
                n.spec.image = Some(ImageSpec {
                    repository: String::new(),
                    tag: Some("2026.1".into()),
                    digest: Some(format!("sha256:{}", "0".repeat(64))),
                })
            },
            &[
                "spec.image.repository: Required value: repository must be set",
                "spec.image: Invalid value: exactly one of image.tag or image.digest must be set",
            ],
        ),
    ]);
    let long_update = update(
        |n| n.metadata.name = Some("p".repeat(64)),
        |n| n.spec.traits = None,
    );
    assert_eq!(long_update, Outcome::default(), "rule 1 is CREATE only");
    assert_eq!(
        errors(&update(|_| {}, |n| n.spec.nova_ref.name = "other".into())),
        vec!["spec.novaRef.name: Invalid value: \"other\": novaRef is immutable"]
    );
    assert_eq!(
        errors(&update(
            |_| {},
            |n| n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "east".into()
            })
        )),
        vec![
            "spec.targetClusterRef: Invalid value: targetClusterRef is immutable (adding or removing it after creation is not permitted)"
        ]
    );
    assert_eq!(
        errors(&update(
            |n| n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "east".into()
            }),
            |n| n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "west".into()
            })
        )),
        vec![
            "spec.targetClusterRef.name: Invalid value: \"west\": targetClusterRef is immutable (the children already exist on the previously named cluster)"
        ]
    );
}

#[test]
fn rules_9_to_12_node_selection() {
    check(&[
        ("empty selector", |n| n.spec.node_selector.clear(), &["spec.nodeSelector: Required value: nodeSelector must carry at least one label"]),
        ("selector grammar", |n| n.spec.node_selector = BTreeMap::from([("-bad".into(), "ok".into()), ("good".into(), "bad value".into())]), &[
            "spec.nodeSelector: Invalid value: \"-bad\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "spec.nodeSelector[good]: Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ]),
        ("tolerations that do not match the offboarding taint", |n| n.spec.tolerations = Some(vec![
            tol("kvm.cloud.sap/offboarding", "Exists", "", "NoExecute", Some(60)),
            tol("kvm.cloud.sap/offboarding", "Exists", "", "NoSchedule", None),
            tol("kvm.cloud.sap/offboarding", "Equal", "yes", "NoExecute", None),
            tol("other", "Exists", "", "", None),
        ]), &[]),
        ("tolerations that match it", |n| n.spec.tolerations = Some(vec![
            tol("kvm.cloud.sap/offboarding", "Exists", "", "NoExecute", None),
            tol("kvm.cloud.sap/offboarding", "", "", "", None),
            tol("", "Exists", "", "", None),
            tol("kvm.cloud.sap/offboarding", "Equal", "", "NoExecute", None),
        ]), &[
            &*Box::leak(format!("spec.tolerations[0]: Invalid value: {{\"effect\":\"NoExecute\",\"key\":\"kvm.cloud.sap/offboarding\",\"operator\":\"Exists\"}}: {OFFBOARDING}").into_boxed_str()),
            &*Box::leak(format!("spec.tolerations[1]: Invalid value: {{\"key\":\"kvm.cloud.sap/offboarding\"}}: {OFFBOARDING}").into_boxed_str()),
            &*Box::leak(format!("spec.tolerations[2]: Invalid value: {{\"operator\":\"Exists\"}}: {OFFBOARDING}").into_boxed_str()),
            &*Box::leak(format!("spec.tolerations[3]: Invalid value: {{\"effect\":\"NoExecute\",\"key\":\"kvm.cloud.sap/offboarding\",\"operator\":\"Equal\"}}: {OFFBOARDING}").into_boxed_str()),
        ]),
    ]);
}

#[test]
fn rules_13_to_15_update_strategy() {
    check(&[
        (
            "1",
            |n| n.spec.update_strategy = strategy(None, IntOrString::Int(1)),
            &[],
        ),
        (
            "1%",
            |n| {
                n.spec.update_strategy = strategy(
                    Some(UpdateStrategyType::RollingUpdate),
                    IntOrString::String("1%".into()),
                )
            },
            &[],
        ),
        (
            "OnDelete",
            |n| {
                n.spec.update_strategy =
                    strategy(Some(UpdateStrategyType::OnDelete), IntOrString::Int(1))
            },
            &[
                "spec.updateStrategy.maxUnavailable: Invalid value: 1: maxUnavailable applies to RollingUpdate only",
            ],
        ),
        (
            "unparseable",
            |n| n.spec.update_strategy = strategy(None, IntOrString::String("3".into())),
            &[
                "spec.updateStrategy.maxUnavailable: Invalid value: \"3\": maxUnavailable must be an integer or a percentage such as \"25%\"",
            ],
        ),
        (
            "0",
            |n| n.spec.update_strategy = strategy(None, IntOrString::Int(0)),
            &[
                "spec.updateStrategy.maxUnavailable: Invalid value: 0: maxUnavailable must resolve to at least 1 for RollingUpdate",
            ],
        ),
        (
            "0%",
            |n| n.spec.update_strategy = strategy(None, IntOrString::String("0%".into())),
            &[
                "spec.updateStrategy.maxUnavailable: Invalid value: \"0%\": maxUnavailable must resolve to at least 1 for RollingUpdate",
            ],
        ),
        (
            "OnDelete without maxUnavailable",
            |n| {
                n.spec.update_strategy = Some(NovaComputeUpdateStrategy {
                    type_: Some(UpdateStrategyType::OnDelete),
                    max_unavailable: None,
                })
            },
            &[],
        ),
    ]);
}

#[test]
fn rules_17_to_20_vpa_and_libvirt() {
    let q = |s: &str| Quantity(s.into());
    let _ = q;
    check(&[
        (
            "vpa",
            |n| {
                n.spec.vertical_autoscaling = Some(VerticalAutoscalingSpec {
                    update_mode: VPAUpdateMode::Initial,
                    min_allowed: Some(BTreeMap::from([("memory".into(), Quantity("1Gi".into()))])),
                    max_allowed: Some(BTreeMap::from([("memory".into(), Quantity("2Gi".into()))])),
                    min_replicas: Some(1),
                })
            },
            &[],
        ),
        (
            "vpa rules",
            |n| {
                n.spec.vertical_autoscaling = Some(VerticalAutoscalingSpec {
                    update_mode: VPAUpdateMode::Off,
                    min_allowed: Some(BTreeMap::from([("memory".into(), Quantity("3Gi".into()))])),
                    max_allowed: Some(BTreeMap::from([
                        ("memory".into(), Quantity("2Gi".into())),
                        ("gpu".into(), Quantity("1".into())),
                    ])),
                    min_replicas: Some(0),
                })
            },
            &[
                "spec.verticalAutoscaling.maxAllowed[gpu]: Unsupported value: \"gpu\": supported values: \"cpu\", \"memory\"",
                "spec.verticalAutoscaling.minAllowed[memory]: Invalid value: \"3Gi\": must not exceed maxAllowed",
                "spec.verticalAutoscaling.minReplicas: Invalid value: 0: must be at least 1",
            ],
        ),
        (
            "custom with models",
            |n| {
                n.spec.libvirt = Some(NovaComputeLibvirtSpec {
                    cpu_mode: Some(CpuMode::Custom),
                    cpu_models: Some(vec!["Haswell".into()]),
                    ..Default::default()
                })
            },
            &[],
        ),
        (
            "custom without models",
            |n| {
                n.spec.libvirt = Some(NovaComputeLibvirtSpec {
                    cpu_mode: Some(CpuMode::Custom),
                    ..Default::default()
                })
            },
            &[
                "spec.libvirt.cpuModels: Invalid value: cpuModels is required when cpuMode is custom and must be empty otherwise",
            ],
        ),
        (
            "models without custom",
            |n| {
                n.spec.libvirt = Some(NovaComputeLibvirtSpec {
                    cpu_mode: Some(CpuMode::HostModel),
                    cpu_models: Some(vec!["Haswell".into()]),
                    ..Default::default()
                })
            },
            &[
                "spec.libvirt.cpuModels: Invalid value: cpuModels is required when cpuMode is custom and must be empty otherwise",
            ],
        ),
    ]);
}

#[test]
fn rules_21_to_26_extra_config() {
    check(&[
        (
            "guards",
            |n| {
                extra(n, "", "a", "b");
                extra(n, "a\rb", "k", "v");
                extra(n, "libvirt", "", "v");
                extra(n, "libvirt", "cpu_power_management", "true\n");
            },
            &[
                "spec.extraConfig: Invalid value: \"\": extraConfig section name must not be empty",
                "spec.extraConfig: Invalid value: \"a\\rb\": extraConfig section name must not contain a newline or carriage return",
                "spec.extraConfig[libvirt]: Invalid value: \"\": extraConfig key must not be empty",
                "spec.extraConfig[libvirt][cpu_power_management]: Invalid value: extraConfig key and value must not contain a newline or carriage return: the rendered INI writes them verbatim, so a newline injects arbitrary config lines",
            ],
        ),
        (
            "rejected keys",
            |n| {
                extra(n, "DEFAULT", "host", "node-1");
                extra(n, "libvirt", "live_migration_scheme", "tcp");
            },
            &[
                "spec.extraConfig[DEFAULT][host]: Forbidden: host is managed via spec.nodeName (downward API) and must not be set in extraConfig (the host is the node name, env-injected via OS_DEFAULT__HOST; the aggregates, the drain and openstack-hypervisor-operator all find the service by it)",
                "spec.extraConfig[libvirt][live_migration_scheme]: Forbidden: live_migration_scheme is managed via operator-computed and must not be set in extraConfig (every pool migrates over libvirt TLS with QEMU-native TLS; another transport breaks migration between pools or sends guest memory in clear)",
            ],
        ),
        (
            "reported keys and open keys",
            |n| {
                extra(n, "libvirt", "virt_type", "qemu");
                extra(n, "libvirt", "live_migration_bandwidth", "100");
                extra(n, "vnc", "server_listen", "0.0.0.0");
            },
            &[],
        ),
        (
            "catalog",
            |n| {
                extra(n, "libvirt", "no_such_option", "1");
                extra(n, "hyperv", "x", "1");
            },
            &[
                "spec.extraConfig[hyperv][x]: Invalid value: \"hyperv\": no such section in the nova 2026.1 option catalog",
                "spec.extraConfig[libvirt][no_such_option]: Invalid value: \"no_such_option\": no such option in the nova 2026.1 option catalog",
            ],
        ),
    ]);
}

#[test]
fn the_catalog_follows_the_referenced_nova() {
    let mut n = testing::novacompute();
    extra(&mut n, "libvirt", "no_such_option", "1");
    assert!(needs_nova(&n, None, Operation::Create));
    let absent = validate(&n, None, Operation::Create, Some(&NovaRelease::NotFound));
    assert_eq!(
        absent,
        Outcome {
            errors: Violations::default(),
            warnings: vec![
                "extraConfig catalog check skipped: Nova openstack/nova not found".into()
            ]
        }
    );
    let newer = validate(
        &n,
        None,
        Operation::Create,
        Some(&NovaRelease::Found("2027.1".into())),
    );
    assert_eq!(
        newer.warnings,
        vec![
            "spec.extraConfig was not validated against an option catalog: no catalog for release \"2027.1\" is embedded in this operator build"
        ]
    );
    // Rejected keys are reported even while the Nova is absent.
    extra(&mut n, "DEFAULT", "my_ip", "10.0.0.1");
    let got = validate(&n, None, Operation::Create, Some(&NovaRelease::NotFound));
    assert_eq!(
        errors(&got),
        vec![
            "spec.extraConfig[DEFAULT][my_ip]: Forbidden: my_ip is managed via status.hostIP (downward API) and must not be set in extraConfig (the address is env-injected via OS_DEFAULT__MY_IP; a file override is ignored at runtime)"
        ]
    );
    // An empty overlay reads nothing and warns nothing.
    let mut empty = testing::novacompute();
    empty.spec.extra_config = Some(Default::default());
    assert!(!needs_nova(&empty, None, Operation::Create));
    // On update the catalog runs only when extraConfig changed.
    let unrelated = update(
        |n| extra(n, "libvirt", "no_such_option", "1"),
        |n| n.spec.traits = None,
    );
    assert_eq!(unrelated, Outcome::default());
    let changed = update(|_| {}, |n| extra(n, "libvirt", "no_such_option", "1"));
    assert_eq!(
        errors(&changed),
        vec![
            "spec.extraConfig[libvirt][no_such_option]: Invalid value: \"no_such_option\": no such option in the nova 2026.1 option catalog"
        ]
    );
}

#[test]
fn traits_rules() {
    check(&[
        ("bad traits", |n| n.spec.traits = Some(vec!["CUSTOM_OK".into(), "HW_CPU_X86_AVX".into(), "CUSTOM_".into(), format!("CUSTOM_{}", "A".repeat(250))]), &[
            "spec.traits[1]: Invalid value: \"HW_CPU_X86_AVX\": must be a custom trait: CUSTOM_ followed by upper-case letters, digits or underscores, at most 255 characters",
            "spec.traits[2]: Invalid value: \"CUSTOM_\": must be a custom trait: CUSTOM_ followed by upper-case letters, digits or underscores, at most 255 characters",
            &*Box::leak(format!("spec.traits[3]: Invalid value: \"CUSTOM_{}\": must be a custom trait: CUSTOM_ followed by upper-case letters, digits or underscores, at most 255 characters", "A".repeat(250)).into_boxed_str()),
        ]),
        ("host traits", |n| n.spec.host_traits = Some(vec![
            NovaComputeHostTraits { node: "node-1".into(), traits: vec!["CUSTOM_A".into()] },
            NovaComputeHostTraits { node: String::new(), traits: vec![] },
            NovaComputeHostTraits { node: "Node_2".into(), traits: vec!["custom_b".into()] },
            NovaComputeHostTraits { node: "node-1".into(), traits: vec!["CUSTOM_B".into()] },
        ]), &[
            "spec.hostTraits[1].node: Required value: node must be set",
            "spec.hostTraits[1].traits: Required value: traits must name at least one trait",
            "spec.hostTraits[2].node: Invalid value: \"Node_2\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "spec.hostTraits[2].traits[0]: Invalid value: \"custom_b\": must be a custom trait: CUSTOM_ followed by upper-case letters, digits or underscores, at most 255 characters",
            "spec.hostTraits[3].node: Duplicate value: \"node-1\"",
        ]),
    ]);
}

#[test]
fn the_pool_quantities_parse() {
    check(&[
        (
            "resources",
            |n| {
                n.spec.resources = Some(k8s_openapi::api::core::v1::ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".into(), Quantity("lots".into())),
                        ("memory".into(), Quantity("2Gi".into())),
                    ])),
                    limits: Some(BTreeMap::from([("memory".into(), Quantity("1Gi".into()))])),
                    ..Default::default()
                })
            },
            &[
                "spec.resources.requests.cpu: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.resources.requests.memory: Invalid value: \"2Gi\": memory request must not exceed limit (1Gi)",
            ],
        ),
        (
            "vpa bounds and in-place resize",
            |n| {
                n.spec.vertical_autoscaling = Some(VerticalAutoscalingSpec {
                    update_mode: VPAUpdateMode::InPlaceOrRecreate,
                    min_allowed: Some(BTreeMap::from([("memory".into(), Quantity("1Qi".into()))])),
                    max_allowed: None,
                    min_replicas: None,
                })
            },
            &[
                "spec.verticalAutoscaling.minAllowed[memory]: Invalid value: \"1Qi\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ],
        ),
    ]);
}

#[test]
fn the_pools_pull_secrets_follow_the_api_servers_grammar() {
    check(&[
        (
            "a registry Secret",
            |n| {
                n.spec.image_pull_secrets = Some(vec![LocalObjectReference {
                    name: "registry-credentials".into(),
                }]);
            },
            &[],
        ),
        (
            "empty and upper-case names",
            |n| {
                n.spec.image_pull_secrets = Some(vec![
                    LocalObjectReference { name: "".into() },
                    LocalObjectReference {
                        name: "Registry".into(),
                    },
                ]);
            },
            &[
                "spec.imagePullSecrets[0].name: Required value: the name of a Secret in the pool's namespace",
                r#"spec.imagePullSecrets[1].name: Invalid value: "Registry": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
            ],
        ),
    ]);
}
