//! Table-driven tests of every Nova rule: each rejecting case asserts the exact field path and
//! message of every error it produces; accepting cases sit beside them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscalerBehavior,
};
use k8s_openapi::api::core::v1::{
    LocalObjectReference, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use nova_api::v1alpha1::{
    AutoscalingSpec, ClusterRef, CredentialsMode, DBArchiveSpec, EndpointOverrideSpec,
    GatewayParentRefSpec, GatewaySpec, JobSpec, LoggingSpec, MessagingTLSSpec, NetworkPolicySpec,
    NovaEndpointsSpec, NovaRemoteComputeSpec, NovaTLSSpec, PodMetadataSpec, SecretRefSpec,
    SecretStoreRefSpec, TargetClusterRefSpec, VPAUpdateMode, VerticalAutoscalingSpec,
};
use pretty_assertions::assert_eq;

use super::*;
use crate::lookups::PriorityClassLookup;
use crate::validation::testing::{self, block, errors};

type Edit = fn(&mut Nova);

struct Case {
    name: &'static str,
    edit: Edit,
    want: &'static [&'static str],
}

fn run_create(edit: Edit, lookups: &Lookups) -> Outcome {
    let mut n = testing::nova();
    edit(&mut n);
    validate(&n, None, Operation::Create, lookups)
}

fn run_update(old_edit: Edit, new_edit: Edit) -> Outcome {
    let mut old = testing::nova();
    old_edit(&mut old);
    let mut new = old.clone();
    new_edit(&mut new);
    validate(&new, Some(&old), Operation::Update, &Lookups::default())
}

fn check_cases(cases: &[Case]) {
    let lookups = testing::lookups(&["high-priority"]);
    for case in cases {
        let got = run_create(case.edit, &lookups);
        assert_eq!(errors(&got), case.want.to_vec(), "case {}", case.name);
    }
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_owned())
}

fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
    let map = |e: &[(&str, &str)]| {
        (!e.is_empty()).then(|| {
            e.iter()
                .map(|(k, v)| ((*k).to_owned(), q(v)))
                .collect::<BTreeMap<_, _>>()
        })
    };
    ResourceRequirements {
        requests: map(requests),
        limits: map(limits),
        ..Default::default()
    }
}

fn api(n: &mut Nova) -> &mut DeploymentSpec {
    block(&mut n.spec.api.as_mut().expect("defaulted").deployment)
}

fn scheduler(n: &mut Nova) -> &mut DeploymentSpec {
    block(&mut n.spec.scheduler.as_mut().expect("defaulted").deployment)
}

fn metadata(n: &mut Nova) -> &mut DeploymentSpec {
    block(&mut n.spec.metadata.deployment)
}

fn tls() -> Option<MessagingTLSSpec> {
    Some(MessagingTLSSpec {
        ca_bundle_secret_ref: SecretRefSpec {
            name: "rabbit-ca".into(),
            key: None,
        },
    })
}

fn remote(endpoint: &str) -> Option<NovaRemoteComputeSpec> {
    Some(NovaRemoteComputeSpec {
        keystone_endpoint: endpoint.into(),
        transport_url_secret_ref: SecretRefSpec {
            name: "remote-url".into(),
            key: Some("transport_url".into()),
        },
    })
}

fn toleration(key: &str, op: &str, value: &str, effect: &str, seconds: Option<i64>) -> Toleration {
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Toleration {
        key: opt(key),
        operator: opt(op),
        value: opt(value),
        effect: opt(effect),
        toleration_seconds: seconds,
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn extra(n: &mut Nova, section: &str, key: &str, value: &str) {
    n.spec
        .extra_config
        .get_or_insert_with(Default::default)
        .entry(section.into())
        .or_default()
        .insert(key.into(), value.into());
}

#[test]
fn the_example_is_admitted_as_written_and_defaulted() {
    let lookups = testing::lookups(&[]);
    for n in [testing::example_nova(), testing::nova()] {
        let got = validate(&n, None, Operation::Create, &lookups);
        assert_eq!(got, Outcome::default());
    }
}

#[test]
fn name_rules_apply_on_create_only() {
    check_cases(&[
        Case {
            name: "41 characters",
            edit: |n| n.metadata.name = Some("a".repeat(41)),
            want: &[],
        },
        Case {
            name: "42 characters",
            edit: |n| n.metadata.name = Some("a".repeat(42)),
            want: &[
                "metadata.name: Invalid value: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": name must be at most 41 characters: the {name}-db-archive CronJob must fit the 52-character CronJob name limit",
            ],
        },
        Case {
            name: "-api",
            edit: |n| n.metadata.name = Some("nova-api".into()),
            want: &[
                "metadata.name: Invalid value: \"nova-api\": name must not end in \"-api\": a Nova named by the rest of the name builds its children under exactly that name",
            ],
        },
        Case {
            name: "-novncproxy",
            edit: |n| n.metadata.name = Some("x-novncproxy".into()),
            want: &[
                "metadata.name: Invalid value: \"x-novncproxy\": name must not end in \"-novncproxy\": a Nova named by the rest of the name builds its children under exactly that name",
            ],
        },
        Case {
            name: "-cell0",
            edit: |n| n.metadata.name = Some("nova-nova-cell0".into()),
            want: &[
                "metadata.name: Invalid value: \"nova-nova-cell0\": name must not end in \"-cell0\": it is the suffix of every cell0 Database and Grant, so this Nova's cell schema objects would collide with another Nova's cell0 objects",
            ],
        },
        Case {
            name: "-apis is no reserved suffix",
            edit: |n| n.metadata.name = Some("nova-apis".into()),
            want: &[],
        },
    ]);
    let got = run_update(
        |n| n.metadata.name = Some(format!("{}-api", "a".repeat(42))),
        |n| n.spec.region = Some("RegionOne".into()),
    );
    assert_eq!(
        errors(&got),
        Vec::<String>::new(),
        "a grandfathered name is not re-checked on update"
    );
}

#[test]
fn the_release_pattern_and_floor() {
    check_cases(&[
        Case {
            name: "2026.2",
            edit: |n| n.spec.open_stack_release = "2026.2".into(),
            want: &[],
        },
        Case {
            name: "pattern",
            edit: |n| n.spec.open_stack_release = "latest".into(),
            want: &[
                r#"spec.openStackRelease: Invalid value: "latest": should match '^\d{4}\.[12]$'"#,
            ],
        },
        Case {
            name: "below the floor",
            edit: |n| n.spec.open_stack_release = "2025.2".into(),
            want: &[
                "spec.openStackRelease: Invalid value: \"2025.2\": must be 2026.1 or later: this operator version no longer supports OpenStack releases below 2026.1",
            ],
        },
    ]);
    let changed = run_update(
        |n| n.spec.open_stack_release = "2025.1".into(),
        |n| n.spec.open_stack_release = "2025.2".into(),
    );
    assert_eq!(
        errors(&changed),
        vec![
            "spec.openStackRelease: Invalid value: \"2025.2\": must be 2026.1 or later: this operator version no longer supports OpenStack releases below 2026.1"
        ]
    );
    let unchanged = run_update(
        |n| n.spec.open_stack_release = "2025.2".into(),
        |n| n.spec.region = Some("RegionOne".into()),
    );
    assert_eq!(errors(&unchanged), Vec::<String>::new());
    assert_eq!(
        unchanged.warnings,
        vec![
            "spec.openStackRelease \"2025.2\" is below 2026.1, the oldest OpenStack release this operator version supports; the unchanged value is admitted, but the operator renders the 2026.1 configuration for it. Set spec.openStackRelease to 2026.1 or later."
        ]
    );
    let raised = run_update(
        |n| n.spec.open_stack_release = "2025.2".into(),
        |n| n.spec.open_stack_release = "2026.1".into(),
    );
    assert_eq!(raised, Outcome::default());
}

#[test]
fn image_database_cache_and_messaging_unions() {
    check_cases(&[
        Case {
            name: "digest only",
            edit: |n| {
                n.spec.image.tag = None;
                n.spec.image.digest = Some(format!("sha256:{}", "a".repeat(64)));
            },
            want: &[],
        },
        Case {
            name: "tag and digest",
            edit: |n| n.spec.image.digest = Some(format!("sha256:{}", "a".repeat(64))),
            want: &[
                "spec.image: Invalid value: exactly one of image.tag or image.digest must be set",
            ],
        },
        Case {
            name: "neither",
            edit: |n| n.spec.image.tag = None,
            want: &[
                "spec.image: Invalid value: exactly one of image.tag or image.digest must be set",
            ],
        },
        Case {
            name: "repository",
            edit: |n| n.spec.image.repository.clear(),
            want: &["spec.image.repository: Required value: repository must be set"],
        },
        Case {
            name: "database with host and clusterRef",
            edit: |n| n.spec.api_database.host = Some("db.example.com".into()),
            want: &[
                "spec.apiDatabase: Invalid value: exactly one of clusterRef or host must be set",
            ],
        },
        Case {
            name: "database with neither",
            edit: |n| n.spec.database.cluster_ref = None,
            want: &["spec.database: Invalid value: exactly one of clusterRef or host must be set"],
        },
        Case {
            name: "brownfield databases",
            edit: |n| {
                for db in [&mut n.spec.api_database, &mut n.spec.database] {
                    db.cluster_ref = None;
                    db.host = Some("db.example.com".into());
                }
            },
            want: &[],
        },
        Case {
            name: "Dynamic on both, managed",
            edit: |n| {
                n.spec.api_database.credentials_mode = Some(CredentialsMode::Dynamic);
                n.spec.database.credentials_mode = Some(CredentialsMode::Dynamic);
            },
            want: &[],
        },
        Case {
            name: "Dynamic without clusterRef",
            edit: |n| {
                for db in [&mut n.spec.api_database, &mut n.spec.database] {
                    db.cluster_ref = None;
                    db.host = Some("db.example.com".into());
                    db.credentials_mode = Some(CredentialsMode::Dynamic);
                }
            },
            want: &[
                "spec.apiDatabase.credentialsMode: Invalid value: \"Dynamic\": credentialsMode Dynamic requires clusterRef (managed mode)",
                "spec.database.credentialsMode: Invalid value: \"Dynamic\": credentialsMode Dynamic requires clusterRef (managed mode)",
            ],
        },
        Case {
            name: "cache with both",
            edit: |n| n.spec.cache.servers = Some(vec!["memcached:11211".into()]),
            want: &["spec.cache: Invalid value: exactly one of clusterRef or servers must be set"],
        },
        Case {
            name: "cache with an empty server list",
            edit: |n| {
                n.spec.cache.cluster_ref = None;
                n.spec.cache.servers = Some(vec![]);
            },
            want: &["spec.cache: Invalid value: exactly one of clusterRef or servers must be set"],
        },
        Case {
            name: "brownfield cache with a newline",
            edit: |n| {
                n.spec.cache.cluster_ref = None;
                n.spec.cache.servers = Some(vec!["a:11211".into(), "b:11211\nx".into()]);
            },
            want: &[
                "spec.cache.servers[1]: Invalid value: \"b:11211\\nx\": value must not contain a newline or carriage return: it is rendered verbatim into the service configuration file, so a newline injects arbitrary config lines",
            ],
        },
        Case {
            name: "cache clusterRef with a carriage return",
            edit: |n| {
                n.spec.cache.cluster_ref = Some(ClusterRef {
                    name: "mc\r".into(),
                })
            },
            want: &[
                "spec.cache.clusterRef.name: Invalid value: \"mc\\r\": value must not contain a newline or carriage return: it is rendered verbatim into the service configuration file, so a newline injects arbitrary config lines",
            ],
        },
        Case {
            name: "messaging with neither",
            edit: |n| n.spec.messaging.cluster_ref = None,
            want: &[
                "spec.messaging: Invalid value: exactly one of clusterRef or secretRef must be set",
            ],
        },
        Case {
            name: "messaging brownfield",
            edit: |n| {
                n.spec.messaging.cluster_ref = None;
                n.spec.messaging.secret_ref = Some(SecretRefSpec {
                    name: "rabbit-url".into(),
                    key: None,
                });
            },
            want: &[],
        },
        Case {
            name: "messaging tls without a CA name",
            edit: |n| n.spec.messaging.tls = Some(MessagingTLSSpec::default()),
            want: &[
                "spec.messaging.tls.caBundleSecretRef.name: Required value: caBundleSecretRef.name must be set when spec.messaging.tls is configured",
            ],
        },
        Case {
            name: "endpoint tls without a CA name",
            edit: |n| n.spec.tls = Some(NovaTLSSpec::default()),
            want: &[
                "spec.tls.caBundleSecretRef.name: Required value: caBundleSecretRef.name must be set when spec.tls is configured (the Secret holding the CA bundle Keystone and the service endpoints are verified against)",
            ],
        },
        Case {
            name: "endpoint tls with a CA name",
            edit: |n| {
                n.spec.tls = Some(NovaTLSSpec {
                    ca_bundle_secret_ref: SecretRefSpec {
                        name: "keystone-ca".into(),
                        key: None,
                    },
                })
            },
            want: &[],
        },
    ]);
}

#[test]
fn the_database_pair_rules() {
    check_cases(&[
        Case {
            name: "same schema",
            edit: |n| n.spec.api_database.database = "nova".into(),
            want: &[
                "spec.apiDatabase.database: Invalid value: \"nova\": apiDatabase and database must name different schemas",
            ],
        },
        Case {
            name: "api on cell0",
            edit: |n| n.spec.api_database.database = "nova_cell0".into(),
            want: &[
                "spec.apiDatabase.database: Invalid value: \"nova_cell0\": apiDatabase must not name the cell0 schema derived from database",
            ],
        },
        Case {
            name: "credentials modes differ",
            edit: |n| n.spec.api_database.credentials_mode = Some(CredentialsMode::Dynamic),
            want: &[
                "spec.database.credentialsMode: Invalid value: \"Static\": apiDatabase and database must use the same credentialsMode",
            ],
        },
        Case {
            name: "explicit Static equals empty",
            edit: |n| n.spec.database.credentials_mode = Some(CredentialsMode::Static),
            want: &[],
        },
        Case {
            name: "58 characters",
            edit: |n| n.spec.database.database = "c".repeat(58),
            want: &[],
        },
        Case {
            name: "59 characters",
            edit: |n| n.spec.database.database = "c".repeat(59),
            want: &[
                "spec.database.database: Invalid value: \"ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\": database.database must be at most 58 characters: cell0 is provisioned as <database>_cell0 under the 64-character schema limit",
            ],
        },
    ]);
    let renamed = run_update(
        |_| {},
        |n| {
            n.spec.api_database.database = "nova_api2".into();
            n.spec.database.database = "nova2".into();
        },
    );
    assert_eq!(
        errors(&renamed),
        vec![
            "spec.apiDatabase.database: Invalid value: \"nova_api2\": apiDatabase.database is immutable: the schema holds the cell map and every instance mapping",
            "spec.database.database: Invalid value: \"nova2\": database.database is immutable: the cell mappings store the schema name",
        ]
    );
    let remoded = run_update(
        |_| {},
        |n| {
            for db in [&mut n.spec.api_database, &mut n.spec.database] {
                db.cluster_ref = None;
                db.host = Some("db.example.com".into());
            }
        },
    );
    assert_eq!(
        errors(&remoded),
        vec![
            "spec.apiDatabase: Invalid value: apiDatabase mode (managed clusterRef vs brownfield host) is immutable",
            "spec.database: Invalid value: database mode (managed clusterRef vs brownfield host) is immutable",
        ]
    );
    let same = run_update(|_| {}, |n| n.spec.database.port = Some(3307));
    assert_eq!(same, Outcome::default());
}

#[test]
fn references_endpoints_and_remote_compute() {
    check_cases(&[
        Case {
            name: "empty shared secret name",
            edit: |n| n.spec.metadata.shared_secret_ref.name.clear(),
            want: &[
                "spec.metadata.sharedSecretRef.name: Required value: sharedSecretRef.name must be set (the Secret holding the value the Neutron metadata agent signs proxied requests with)",
            ],
        },
        Case {
            name: "empty service-user secret name",
            edit: |n| n.spec.service_user.secret_ref.name.clear(),
            want: &[
                "spec.serviceUser.secretRef.name: Required value: secretRef.name must be set (the Secret holding the service-user password)",
            ],
        },
        Case {
            name: "https keystone",
            edit: |n| n.spec.keystone_endpoint = "https://keystone.example.com/v3".into(),
            want: &[],
        },
        Case {
            name: "empty keystone",
            edit: |n| n.spec.keystone_endpoint.clear(),
            want: &["spec.keystoneEndpoint: Required value: keystoneEndpoint must be set"],
        },
        Case {
            name: "keystone without scheme, with credentials",
            edit: |n| n.spec.keystone_endpoint = "admin:s3cret@keystone:5000/v3".into(),
            want: &[
                "spec.keystoneEndpoint: Invalid value: must be an http or https URL with a scheme and a host, such as https://keystone.example.com/v3",
            ],
        },
        Case {
            name: "keystone ftp",
            edit: |n| n.spec.keystone_endpoint = "ftp://keystone/v3".into(),
            want: &[
                "spec.keystoneEndpoint: Invalid value: must use the http or https scheme, not \"ftp\"",
            ],
        },
        Case {
            name: "keystone without host",
            edit: |n| n.spec.keystone_endpoint = "http:///v3".into(),
            want: &["spec.keystoneEndpoint: Invalid value: must name a host"],
        },
        Case {
            name: "public endpoint with a newline",
            edit: |n| n.spec.keystone_public_endpoint = Some("https://k.example.com/\nv3".into()),
            want: &[
                "spec.keystonePublicEndpoint: Invalid value: must not contain control characters such as a newline or carriage return",
            ],
        },
        Case {
            name: "empty public endpoint",
            edit: |n| n.spec.keystone_public_endpoint = Some(String::new()),
            want: &[],
        },
        Case {
            name: "endpoint overrides",
            edit: |n| {
                n.spec.endpoints = Some(NovaEndpointsSpec {
                    placement: Some(EndpointOverrideSpec {
                        override_url: Some("http://placement:8778".into()),
                    }),
                    glance: Some(EndpointOverrideSpec {
                        override_url: Some("glance:9292".into()),
                    }),
                    ..Default::default()
                });
            },
            want: &[
                "spec.endpoints.glance.override: Invalid value: must be an http or https URL with a scheme and a host, such as https://keystone.example.com/v3",
            ],
        },
        Case {
            name: "remote compute",
            edit: |n| {
                n.spec.messaging.tls = tls();
                n.spec.remote_compute = remote("https://keystone.example.com/v3");
            },
            want: &[],
        },
        Case {
            name: "remote compute without messaging.tls",
            edit: |n| n.spec.remote_compute = remote("https://keystone.example.com/v3"),
            want: &[
                "spec.messaging.tls: Required value: remoteCompute requires messaging.tls: a compute on another cluster verifies the broker against the messaging CA bundle",
            ],
        },
        Case {
            name: "remote keystone over http",
            edit: |n| {
                n.spec.messaging.tls = tls();
                n.spec.remote_compute = remote("http://keystone.example.com/v3");
            },
            want: &[
                "spec.remoteCompute.keystoneEndpoint: Invalid value: must use the https scheme, not \"http\": the nova service-user password is sent to it on every token request, across a cluster boundary",
            ],
        },
        Case {
            name: "remote keystone without a scheme",
            edit: |n| {
                n.spec.messaging.tls = tls();
                n.spec.remote_compute = remote("keystone.example.com/v3");
            },
            want: &[
                "spec.remoteCompute.keystoneEndpoint: Invalid value: must be an https URL with a scheme and a host, such as https://keystone.example.com/v3",
            ],
        },
        Case {
            name: "remote transport secret without a name",
            edit: |n| {
                n.spec.messaging.tls = tls();
                n.spec.remote_compute = remote("https://keystone.example.com/v3");
                n.spec
                    .remote_compute
                    .as_mut()
                    .unwrap()
                    .transport_url_secret_ref
                    .name
                    .clear();
            },
            want: &[
                "spec.remoteCompute.transportURLSecretRef.name: Required value: transportURLSecretRef.name must be set (the Secret holding the broker's external rabbit:// URL)",
            ],
        },
    ]);
}

#[test]
fn control_characters_in_rendered_fields() {
    const MSG: &str = "value must not contain a newline or carriage return: it is rendered verbatim into nova.conf and nova-compute.conf, so a newline injects arbitrary config lines";
    let cases: [(Edit, String); 5] = [
        (
            |n| n.spec.region = Some("RegionOne\n[DEFAULT]".into()),
            format!("spec.region: Invalid value: \"RegionOne\\n[DEFAULT]\": {MSG}"),
        ),
        (
            |n| n.spec.service_user.username = Some("nova\r".into()),
            format!("spec.serviceUser.username: Invalid value: \"nova\\r\": {MSG}"),
        ),
        (
            |n| n.spec.service_user.project_name = Some("a\nb".into()),
            format!("spec.serviceUser.projectName: Invalid value: \"a\\nb\": {MSG}"),
        ),
        (
            |n| n.spec.service_user.user_domain_name = Some("a\nb".into()),
            format!("spec.serviceUser.userDomainName: Invalid value: \"a\\nb\": {MSG}"),
        ),
        (
            |n| n.spec.service_user.project_domain_name = Some("a\nb".into()),
            format!("spec.serviceUser.projectDomainName: Invalid value: \"a\\nb\": {MSG}"),
        ),
    ];
    for (edit, want) in cases {
        assert_eq!(errors(&run_create(edit, &Lookups::default())), vec![want]);
    }
    let hostname = run_create(
        |n| {
            n.spec
                .console_proxy
                .as_mut()
                .unwrap()
                .gateway
                .as_mut()
                .unwrap()
                .hostname = "console.example.com\n".into()
        },
        &Lookups::default(),
    );
    assert_eq!(
        errors(&hostname),
        vec![
            "spec.consoleProxy.gateway.hostname: Invalid value: \"console.example.com\\n\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned(),
            format!(
                "spec.consoleProxy.gateway.hostname: Invalid value: \"console.example.com\\n\": {MSG}"
            ),
        ]
    );
    assert_eq!(
        run_create(
            |n| n.spec.region = Some("RegionOne".into()),
            &Lookups::default()
        ),
        Outcome::default()
    );
}

#[test]
fn console_and_gateways() {
    check_cases(&[
        Case {
            name: "disabled proxy with a deployment block",
            edit: |n| n.spec.console_proxy.as_mut().unwrap().enabled = Some(false),
            want: &[
                "spec.consoleProxy.deployment: Forbidden: consoleProxy.deployment must not be set when consoleProxy.enabled is false",
            ],
        },
        Case {
            name: "disabled proxy without a block, whose replicas are not measured",
            edit: |n| {
                let c = n.spec.console_proxy.as_mut().unwrap();
                c.enabled = Some(false);
                c.deployment = None;
            },
            want: &[],
        },
        Case {
            name: "console path /",
            edit: |n| {
                n.spec
                    .console_proxy
                    .as_mut()
                    .unwrap()
                    .gateway
                    .as_mut()
                    .unwrap()
                    .path = Some("/".into())
            },
            want: &[],
        },
        Case {
            name: "console path prefix",
            edit: |n| {
                n.spec
                    .console_proxy
                    .as_mut()
                    .unwrap()
                    .gateway
                    .as_mut()
                    .unwrap()
                    .path = Some("/vnc".into())
            },
            want: &[
                "spec.consoleProxy.gateway.path: Invalid value: \"/vnc\": path must be empty or \"/\": the console page and the WebSocket it opens both live at the root of the hostname, so a prefix route would match neither",
            ],
        },
        Case {
            name: "console gateway without hostname",
            edit: |n| {
                n.spec
                    .console_proxy
                    .as_mut()
                    .unwrap()
                    .gateway
                    .as_mut()
                    .unwrap()
                    .hostname
                    .clear()
            },
            want: &[
                "spec.consoleProxy.gateway.hostname: Required value: hostname must be set when spec.consoleProxy.gateway is configured",
            ],
        },
        Case {
            name: "api and metadata gateways",
            edit: |n| {
                n.spec.gateway = Some(GatewaySpec {
                    hostname: "nova.example.com".into(),
                    ..Default::default()
                });
                n.spec.metadata.gateway = Some(GatewaySpec {
                    parent_ref: GatewayParentRefSpec {
                        name: "gw".into(),
                        ..Default::default()
                    },
                    ..Default::default()
                });
            },
            want: &[
                "spec.gateway.parentRef.name: Required value: parentRef.name must be set when spec.gateway is configured",
                "spec.metadata.gateway.hostname: Required value: hostname must be set when spec.metadata.gateway is configured",
            ],
        },
    ]);
}

#[test]
fn deployment_block_rules() {
    check_cases(&[
        Case {
            name: "replicas 0",
            edit: |n| api(n).replicas = Some(0),
            want: &["spec.api.deployment.replicas: Invalid value: 0: replicas must be at least 1"],
        },
        Case {
            name: "grace below 10, which the preStop also reaches",
            edit: |n| metadata(n).termination_grace_period_seconds = Some(5),
            want: &[
                "spec.metadata.deployment.terminationGracePeriodSeconds: Invalid value: 5: terminationGracePeriodSeconds must be at least 10",
                "spec.metadata.deployment.preStopSleepSeconds: Invalid value: 5: preStopSleepSeconds (5) must be strictly less than terminationGracePeriodSeconds (5)",
            ],
        },
        Case {
            name: "negative preStop",
            edit: |n| metadata(n).pre_stop_sleep_seconds = Some(-1),
            want: &[
                "spec.metadata.deployment.preStopSleepSeconds: Invalid value: -1: preStopSleepSeconds must be non-negative",
            ],
        },
        Case {
            name: "preStop equal to the default grace",
            edit: |n| api(n).pre_stop_sleep_seconds = Some(30),
            want: &[
                "spec.api.deployment.preStopSleepSeconds: Invalid value: 30: preStopSleepSeconds (30) must be strictly less than terminationGracePeriodSeconds (30)",
            ],
        },
        Case {
            name: "scheduler preStop within its 200 s",
            edit: |n| scheduler(n).pre_stop_sleep_seconds = Some(150),
            want: &[],
        },
        Case {
            name: "harakiri inside the drain window",
            edit: |n| {
                n.spec
                    .api
                    .as_mut()
                    .unwrap()
                    .uwsgi
                    .as_mut()
                    .unwrap()
                    .harakiri = Some(24)
            },
            want: &[],
        },
        Case {
            name: "harakiri at the drain window",
            edit: |n| {
                n.spec
                    .api
                    .as_mut()
                    .unwrap()
                    .uwsgi
                    .as_mut()
                    .unwrap()
                    .harakiri = Some(25)
            },
            want: &[
                "spec.api.uwsgi.harakiri: Invalid value: 25: harakiri (25) must be strictly less than terminationGracePeriodSeconds - preStopSleepSeconds (25)",
            ],
        },
        Case {
            name: "metadata harakiri against its own block",
            edit: |n| {
                metadata(n).termination_grace_period_seconds = Some(60);
                n.spec.metadata.uwsgi.as_mut().unwrap().harakiri = Some(60);
            },
            want: &[
                "spec.metadata.uwsgi.harakiri: Invalid value: 60: harakiri (60) must be strictly less than terminationGracePeriodSeconds - preStopSleepSeconds (55)",
            ],
        },
        Case {
            name: "uwsgi floors and keep-alive",
            edit: |n| {
                let u = n.spec.api.as_mut().unwrap().uwsgi.as_mut().unwrap();
                u.processes = Some(0);
                u.http_keep_alive = Some(false);
                u.http_keep_alive_timeout = Some(5);
            },
            want: &[
                "spec.api.uwsgi.processes: Invalid value: 0: processes must be at least 1",
                "spec.api.uwsgi.httpKeepAliveTimeout: Invalid value: 5: httpKeepAliveTimeout may only be set when httpKeepAlive is true",
            ],
        },
        Case {
            name: "Recreate with rollingUpdate",
            edit: |n| {
                api(n).strategy = Some(DeploymentStrategy {
                    type_: Some("Recreate".into()),
                    rolling_update: Some(RollingUpdateDeployment::default()),
                })
            },
            want: &[
                "spec.api.deployment.strategy.rollingUpdate: Forbidden: rollingUpdate must not be set when strategy.type is Recreate",
            ],
        },
        Case {
            name: "Recreate alone",
            edit: |n| {
                api(n).strategy = Some(DeploymentStrategy {
                    type_: Some("Recreate".into()),
                    rolling_update: None,
                })
            },
            want: &[],
        },
        Case {
            name: "request above limit",
            edit: |n| {
                metadata(n).resources = Some(resources(
                    &[("cpu", "2"), ("memory", "512Mi")],
                    &[("cpu", "1500m"), ("memory", "1Gi")],
                ))
            },
            want: &[
                "spec.metadata.deployment.resources.requests.cpu: Invalid value: \"2\": cpu request must not exceed limit (1500m)",
            ],
        },
        Case {
            name: "request equal to limit",
            edit: |n| {
                metadata(n).resources =
                    Some(resources(&[("memory", "1Gi")], &[("memory", "1024Mi")]))
            },
            want: &[],
        },
        Case {
            name: "workers 0",
            edit: |n| n.spec.conductor.as_mut().unwrap().workers = Some(0),
            want: &["spec.conductor.workers: Invalid value: 0: workers must be at least 1"],
        },
        Case {
            name: "workers 1",
            edit: |n| n.spec.scheduler.as_mut().unwrap().workers = Some(1),
            want: &[],
        },
    ]);
}

#[test]
fn priority_classes_are_looked_up() {
    check_cases(&[
        Case {
            name: "existing",
            edit: |n| scheduler(n).priority_class_name = Some("high-priority".into()),
            want: &[],
        },
        Case {
            name: "missing",
            edit: |n| scheduler(n).priority_class_name = Some("nope".into()),
            want: &["spec.scheduler.deployment.priorityClassName: Not found: \"nope\""],
        },
        Case {
            name: "jobs",
            edit: |n| {
                n.spec.jobs = Some(JobSpec {
                    priority_class_name: Some("nope".into()),
                    ..Default::default()
                })
            },
            want: &["spec.jobs.priorityClassName: Not found: \"nope\""],
        },
        Case {
            name: "jobs opting out",
            edit: |n| {
                n.spec.jobs = Some(JobSpec {
                    priority_class_name: Some(String::new()),
                    ..Default::default()
                })
            },
            want: &[],
        },
    ]);
    let mut n = testing::nova();
    api(&mut n).priority_class_name = Some("high-priority".into());
    n.spec.jobs = Some(JobSpec {
        priority_class_name: Some("batch".into()),
        ..Default::default()
    });
    assert_eq!(
        priority_class_names(&n.spec),
        vec!["batch", "high-priority"]
    );
    let down = Lookups {
        priority_classes: Some(BTreeMap::from([(
            "high-priority".to_owned(),
            PriorityClassLookup::Unavailable(
                "the Kubernetes API is unavailable: connection refused".into(),
            ),
        )])),
        nova: None,
        novas: None,
    };
    let got = validate(&n, None, Operation::Create, &down);
    assert_eq!(
        errors(&got),
        vec![
            "spec.api.deployment.priorityClassName: Internal error: cannot verify that PriorityClass \"high-priority\" exists: the Kubernetes API is unavailable: connection refused",
            "spec.jobs.priorityClassName: Not found: \"batch\"",
        ]
    );
    assert_eq!(
        validate(&n, None, Operation::Create, &Lookups::default()),
        Outcome::default(),
        "no client: skipped"
    );
}

#[test]
fn topology_spread_and_placement() {
    check_cases(&[
        Case {
            name: "the scheduler's own selector",
            edit: |n| {
                scheduler(n).topology_spread_constraints = Some(vec![TopologySpreadConstraint {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(labels(&[
                            ("app.kubernetes.io/name", "nova"),
                            ("app.kubernetes.io/instance", "nova"),
                            ("app.kubernetes.io/component", "scheduler"),
                        ])),
                        match_expressions: None,
                    }),
                    max_skew: 1,
                    topology_key: "kubernetes.io/hostname".into(),
                    when_unsatisfiable: "DoNotSchedule".into(),
                    ..Default::default()
                }])
            },
            want: &[],
        },
        Case {
            name: "an empty list is used verbatim",
            edit: |n| api(n).topology_spread_constraints = Some(vec![]),
            want: &[],
        },
        Case {
            name: "no selector, wrong labels, expressions",
            edit: |n| {
                api(n).topology_spread_constraints = Some(vec![
                    TopologySpreadConstraint {
                        max_skew: 1,
                        topology_key: "zone".into(),
                        when_unsatisfiable: "ScheduleAnyway".into(),
                        ..Default::default()
                    },
                    TopologySpreadConstraint {
                        label_selector: Some(LabelSelector {
                            match_labels: Some(labels(&[
                                ("app.kubernetes.io/name", "nova"),
                                ("app.kubernetes.io/instance", "nova"),
                            ])),
                            match_expressions: Some(vec![LabelSelectorRequirement {
                                key: "a".into(),
                                operator: "Exists".into(),
                                values: None,
                            }]),
                        }),
                        max_skew: 1,
                        topology_key: "zone".into(),
                        when_unsatisfiable: "ScheduleAnyway".into(),
                        ..Default::default()
                    },
                ])
            },
            want: &[
                "spec.api.deployment.topologySpreadConstraints[0].labelSelector: Required value: labelSelector is required on each TopologySpreadConstraint",
                "spec.api.deployment.topologySpreadConstraints[1].labelSelector.matchLabels: Invalid value: {\"app.kubernetes.io/instance\":\"nova\",\"app.kubernetes.io/name\":\"nova\"}: labelSelector.matchLabels must equal the Deployment selector labels map[app.kubernetes.io/component:api app.kubernetes.io/instance:nova app.kubernetes.io/name:nova]",
                "spec.api.deployment.topologySpreadConstraints[1].labelSelector.matchExpressions: Invalid value: matchExpressions are not allowed; labelSelector must use matchLabels only",
            ],
        },
        Case {
            name: "node selector",
            edit: |n| {
                api(n).placement.node_selector =
                    Some(labels(&[("node-role.kubernetes.io/control-plane", "")]))
            },
            want: &[],
        },
        Case {
            name: "node selector grammar",
            edit: |n| {
                metadata(n).placement.node_selector =
                    Some(labels(&[("bad key", "ok"), ("zone", "-x")]))
            },
            want: &[
                "spec.metadata.deployment.nodeSelector: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "spec.metadata.deployment.nodeSelector[zone]: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ],
        },
        Case {
            name: "valid tolerations",
            edit: |n| {
                api(n).placement.tolerations = Some(vec![
                    toleration("", "Exists", "", "", None),
                    toleration("dedicated", "Equal", "nova", "NoSchedule", None),
                    toleration(
                        "node.kubernetes.io/unreachable",
                        "Exists",
                        "",
                        "NoExecute",
                        Some(300),
                    ),
                    toleration("gpu", "Gt", "3", "", None),
                ])
            },
            want: &[],
        },
        Case {
            name: "toleration rules",
            edit: |n| {
                api(n).placement.tolerations = Some(vec![
                    toleration("", "Equal", "", "", None),
                    toleration("a", "Exists", "x", "NoSchedule", Some(10)),
                    toleration("a", "Lt", "x", "", None),
                    toleration("a", "In", "", "Sometimes", None),
                ])
            },
            want: &[
                "spec.api.deployment.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
                "spec.api.deployment.tolerations[1].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
                "spec.api.deployment.tolerations[1].value: Invalid value: \"x\": value must be empty when `operator` is 'Exists'",
                "spec.api.deployment.tolerations[2].value: Invalid value: \"x\": value must be an integer when `operator` is 'Lt' or 'Gt'",
                "spec.api.deployment.tolerations[3].operator: Unsupported value: \"In\": supported values: \"Equal\", \"Exists\", \"Lt\", \"Gt\"",
                "spec.api.deployment.tolerations[3].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            ],
        },
        Case {
            name: "jobs placement and resources",
            edit: |n| {
                n.spec.jobs = Some(JobSpec {
                    resources: Some(resources(&[("memory", "2Gi")], &[("memory", "1Gi")])),
                    placement: nova_api::v1alpha1::NodePlacementSpec {
                        node_selector: Some(labels(&[("a/b/c", "x")])),
                        ..Default::default()
                    },
                    ..Default::default()
                })
            },
            want: &[
                "spec.jobs.resources.requests.memory: Invalid value: \"2Gi\": memory request must not exceed limit (1Gi)",
                "spec.jobs.nodeSelector: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ],
        },
        Case {
            name: "a disabled console block is not measured",
            edit: |n| {
                let c = n.spec.console_proxy.as_mut().unwrap();
                c.enabled = Some(false);
                block(&mut c.deployment).replicas = Some(0);
            },
            want: &[
                "spec.consoleProxy.deployment: Forbidden: consoleProxy.deployment must not be set when consoleProxy.enabled is false",
            ],
        },
    ]);
}

fn vpa() -> VerticalAutoscalingSpec {
    VerticalAutoscalingSpec {
        update_mode: VPAUpdateMode::Auto,
        min_allowed: None,
        max_allowed: None,
        min_replicas: None,
    }
}

fn autoscaling(max: i32) -> AutoscalingSpec {
    AutoscalingSpec {
        max_replicas: max,
        target_cpu_utilization: Some(80),
        ..Default::default()
    }
}

#[test]
fn vertical_and_horizontal_autoscaling() {
    check_cases(&[
        Case {
            name: "vpa bounds",
            edit: |n| {
                metadata(n).vertical_autoscaling = Some(VerticalAutoscalingSpec {
                    min_allowed: Some(BTreeMap::from([
                        ("cpu".into(), q("100m")),
                        ("memory".into(), q("1Gi")),
                    ])),
                    max_allowed: Some(BTreeMap::from([
                        ("cpu".into(), q("1")),
                        ("memory".into(), q("2Gi")),
                    ])),
                    min_replicas: Some(1),
                    ..vpa()
                })
            },
            want: &[],
        },
        Case {
            name: "vpa rules",
            edit: |n| {
                scheduler(n).vertical_autoscaling = Some(VerticalAutoscalingSpec {
                    min_allowed: Some(BTreeMap::from([
                        ("cpu".into(), q("2")),
                        ("ephemeral-storage".into(), q("1Gi")),
                    ])),
                    max_allowed: Some(BTreeMap::from([("cpu".into(), q("1"))])),
                    min_replicas: Some(0),
                    ..vpa()
                })
            },
            want: &[
                "spec.scheduler.deployment.verticalAutoscaling.minAllowed[ephemeral-storage]: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"memory\"",
                "spec.scheduler.deployment.verticalAutoscaling.minAllowed[cpu]: Invalid value: \"2\": must not exceed maxAllowed",
                "spec.scheduler.deployment.verticalAutoscaling.minReplicas: Invalid value: 0: must be at least 1",
            ],
        },
        Case {
            name: "api vpa beside autoscaling",
            edit: |n| {
                api(n).vertical_autoscaling = Some(vpa());
                n.spec.autoscaling = Some(autoscaling(5));
            },
            want: &[
                "spec.api.deployment.verticalAutoscaling: Invalid value: spec.api.deployment.verticalAutoscaling cannot be set while spec.autoscaling scales the same Deployment",
            ],
        },
        Case {
            name: "api vpa alone",
            edit: |n| api(n).vertical_autoscaling = Some(vpa()),
            want: &[],
        },
        Case {
            name: "autoscaling",
            edit: |n| n.spec.autoscaling = Some(autoscaling(3)),
            want: &[],
        },
        Case {
            name: "implicit minimum",
            edit: |n| n.spec.autoscaling = Some(autoscaling(2)),
            want: &[
                "spec.autoscaling.maxReplicas: Invalid value: 2: maxReplicas must be >= spec.api.deployment.replicas (3) when minReplicas is not set, because minReplicas defaults to spec.api.deployment.replicas",
            ],
        },
        Case {
            name: "explicit minimum",
            edit: |n| {
                n.spec.autoscaling = Some(AutoscalingSpec {
                    min_replicas: Some(1),
                    ..autoscaling(2)
                })
            },
            want: &[],
        },
        Case {
            name: "bounds and targets",
            edit: |n| {
                n.spec.autoscaling = Some(AutoscalingSpec {
                    min_replicas: Some(0),
                    max_replicas: 0,
                    target_cpu_utilization: Some(0),
                    target_memory_utilization: Some(101),
                    behavior: None,
                })
            },
            want: &[
                "spec.autoscaling.maxReplicas: Invalid value: 0: maxReplicas must be at least 1",
                "spec.autoscaling.minReplicas: Invalid value: 0: minReplicas must be at least 1",
                "spec.autoscaling.targetCPUUtilization: Invalid value: 0: targetCPUUtilization must be between 1 and 100",
                "spec.autoscaling.targetMemoryUtilization: Invalid value: 101: targetMemoryUtilization must be between 1 and 100",
            ],
        },
        Case {
            name: "min above max, no target",
            edit: |n| {
                n.spec.autoscaling = Some(AutoscalingSpec {
                    min_replicas: Some(4),
                    max_replicas: 3,
                    ..Default::default()
                })
            },
            want: &[
                "spec.autoscaling.minReplicas: Invalid value: 4: minReplicas must not exceed maxReplicas",
                "spec.autoscaling: Required value: at least one of targetCPUUtilization or targetMemoryUtilization must be set",
            ],
        },
        Case {
            name: "zero request and zero limit under targets",
            edit: |n| {
                api(n).resources = Some(resources(&[("cpu", "0")], &[("memory", "0")]));
                n.spec.autoscaling = Some(AutoscalingSpec {
                    target_memory_utilization: Some(70),
                    ..autoscaling(3)
                });
            },
            want: &[
                "spec.api.deployment.resources.requests.cpu: Invalid value: \"0\": cpu request must be greater than zero while spec.autoscaling.targetCPUUtilization is set: the HorizontalPodAutoscaler divides the pods' usage by the sum of their containers' requests",
                "spec.api.deployment.resources.limits.memory: Invalid value: \"0\": memory limit must be greater than zero while spec.autoscaling.targetMemoryUtilization is set: without a request the API server copies the limit into the request, and the HorizontalPodAutoscaler divides the pods' usage by the sum of their containers' requests",
            ],
        },
    ]);
}

#[test]
fn policy_logging_store_and_target_cluster() {
    check_cases(&[
        Case {
            name: "network policy without sources",
            edit: |n| n.spec.network_policy = Some(NetworkPolicySpec::default()),
            want: &[
                "spec.networkPolicy.ingress: Required value: at least one ingress source must be specified",
            ],
        },
        Case {
            name: "per-logger levels",
            edit: |n| {
                n.spec.logging = Some(LoggingSpec {
                    per_logger_levels: Some(labels(&[
                        ("", "INFO"),
                        ("oslo.messaging", "TRACE"),
                        ("a\nb", "DEBUG"),
                    ])),
                    ..Default::default()
                })
            },
            want: &[
                "spec.logging.perLoggerLevels: Invalid value: \"\": logger name must not be empty",
                "spec.logging.perLoggerLevels: Invalid value: \"a\\nb\": value must not contain a newline or carriage return: it is rendered verbatim into nova.conf and nova-compute.conf, so a newline injects arbitrary config lines",
                "spec.logging.perLoggerLevels[oslo.messaging]: Invalid value: \"TRACE\": level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
            ],
        },
        Case {
            name: "valid per-logger levels",
            edit: |n| {
                n.spec.logging = Some(LoggingSpec {
                    per_logger_levels: Some(labels(&[("oslo.messaging", "WARNING")])),
                    ..Default::default()
                })
            },
            want: &[],
        },
        Case {
            name: "store without name",
            edit: |n| {
                n.spec.secret_store_ref = Some(SecretStoreRefSpec {
                    kind: None,
                    name: String::new(),
                })
            },
            want: &["spec.secretStoreRef.name: Required value: store name must be set"],
        },
        Case {
            name: "store",
            edit: |n| {
                n.spec.secret_store_ref = Some(SecretStoreRefSpec {
                    kind: None,
                    name: "vault".into(),
                })
            },
            want: &[],
        },
        Case {
            name: "target cluster without name",
            edit: |n| n.spec.target_cluster_ref = Some(TargetClusterRefSpec::default()),
            want: &["spec.targetClusterRef.name: Required value: target cluster name must be set"],
        },
    ]);
    let added = run_update(
        |_| {},
        |n| {
            n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "east".into(),
            })
        },
    );
    assert_eq!(
        errors(&added),
        vec![
            "spec.targetClusterRef: Invalid value: targetClusterRef is immutable (adding or removing it after creation is not permitted)"
        ]
    );
    let removed = run_update(
        |n| {
            n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "east".into(),
            })
        },
        |n| n.spec.target_cluster_ref = None,
    );
    assert_eq!(
        errors(&removed),
        vec![
            "spec.targetClusterRef: Invalid value: targetClusterRef is immutable (adding or removing it after creation is not permitted)"
        ]
    );
    let renamed = run_update(
        |n| {
            n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "east".into(),
            })
        },
        |n| {
            n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "west".into(),
            })
        },
    );
    assert_eq!(
        errors(&renamed),
        vec![
            "spec.targetClusterRef.name: Invalid value: \"west\": targetClusterRef is immutable (the children already exist on the previously named cluster)"
        ]
    );
    let kept = run_update(
        |n| {
            n.spec.target_cluster_ref = Some(TargetClusterRefSpec {
                name: "east".into(),
            })
        },
        |n| n.spec.region = Some("r".into()),
    );
    assert_eq!(kept, Outcome::default());
}

fn archive(a: DBArchiveSpec) -> impl Fn(&mut Nova) {
    move |n| n.spec.db_archive = Some(a.clone())
}

#[test]
fn the_archive_block() {
    check_cases(&[
        Case {
            name: "descriptor",
            edit: |n| {
                n.spec.db_archive = Some(DBArchiveSpec {
                    schedule: Some("@weekly".into()),
                    ..Default::default()
                })
            },
            want: &[],
        },
        Case {
            name: "five fields",
            edit: |n| {
                n.spec.db_archive = Some(DBArchiveSpec {
                    schedule: Some("30 2 * * 0".into()),
                    max_rows: Some(1),
                    sleep: Some(0),
                    retention_days: Some(1),
                    ..Default::default()
                })
            },
            want: &[],
        },
        Case {
            name: "time zone",
            edit: |n| {
                n.spec.db_archive = Some(DBArchiveSpec {
                    schedule: Some("CRON_TZ=UTC 0 3 * * *".into()),
                    ..Default::default()
                })
            },
            want: &[
                "spec.dbArchive.schedule: Invalid value: \"CRON_TZ=UTC 0 3 * * *\": TZ and CRON_TZ are not allowed in the schedule: the CronJob API rejects them",
            ],
        },
        Case {
            name: "grammar",
            edit: |n| {
                n.spec.db_archive = Some(DBArchiveSpec {
                    schedule: Some("0 25 * * *".into()),
                    ..Default::default()
                })
            },
            want: &[
                "spec.dbArchive.schedule: Invalid value: \"0 25 * * *\": invalid cron expression: end of range (25) above maximum (23): 25",
            ],
        },
        Case {
            name: "bounds",
            edit: |n| {
                n.spec.db_archive = Some(DBArchiveSpec {
                    max_rows: Some(0),
                    sleep: Some(-1),
                    retention_days: Some(0),
                    ..Default::default()
                })
            },
            want: &[
                "spec.dbArchive.maxRows: Invalid value: 0: maxRows must be at least 1",
                "spec.dbArchive.sleep: Invalid value: -1: sleep must be non-negative",
                "spec.dbArchive.retentionDays: Invalid value: 0: retentionDays must be at least 1",
            ],
        },
    ]);
    let _ = archive(DBArchiveSpec::default());
    let lowered = run_update(
        |n| {
            n.spec.db_archive = Some(DBArchiveSpec {
                retention_days: Some(30),
                ..Default::default()
            })
        },
        |n| n.spec.db_archive.as_mut().unwrap().retention_days = Some(3),
    );
    assert_eq!(errors(&lowered), Vec::<String>::new());
    assert_eq!(
        lowered.warnings,
        vec![
            "spec.dbArchive.retentionDays lowered from 30 to 3: the next archive run also moves the rows soft-deleted between 3 and 30 days ago into the shadow tables"
        ]
    );
    let dropped = run_update(
        |n| {
            n.spec.db_archive = Some(DBArchiveSpec {
                retention_days: Some(30),
                ..Default::default()
            })
        },
        |n| n.spec.db_archive = None,
    );
    assert_eq!(
        dropped.warnings,
        vec![
            "spec.dbArchive.retentionDays removed (was 30): the next archive run moves every soft-deleted row, including those of the last 30 days, into the shadow tables"
        ]
    );
    let raised = run_update(
        |n| {
            n.spec.db_archive = Some(DBArchiveSpec {
                retention_days: Some(3),
                ..Default::default()
            })
        },
        |n| n.spec.db_archive.as_mut().unwrap().retention_days = Some(30),
    );
    assert_eq!(raised, Outcome::default());
    let set = run_update(
        |_| {},
        |n| {
            n.spec.db_archive = Some(DBArchiveSpec {
                retention_days: Some(3),
                ..Default::default()
            })
        },
    );
    assert_eq!(set, Outcome::default());
}

#[test]
fn extra_config_guards_owned_keys_and_catalog() {
    check_cases(&[
        Case {
            name: "a catalogued option",
            edit: |n| {
                extra(
                    n,
                    "filter_scheduler",
                    "build_failure_weight_multiplier",
                    "1000000.0",
                )
            },
            want: &[],
        },
        Case {
            name: "a reported owned key",
            edit: |n| extra(n, "placement", "timeout", "90"),
            want: &[],
        },
        Case {
            name: "a rejected owned key, any section case",
            edit: |n| extra(n, "Keystone_Authtoken", "password", "s3cret"),
            want: &[
                "spec.extraConfig[Keystone_Authtoken][password]: Forbidden: password is managed via spec.serviceUser.secretRef and must not be set in extraConfig (the password is env-injected via OS_KEYSTONE_AUTHTOKEN__PASSWORD; a file value is inert at runtime and only copies the service-user password into the rendered config)",
            ],
        },
        Case {
            name: "unknown option and section",
            edit: |n| {
                extra(n, "DEFAULT", "no_such_option", "1");
                extra(n, "no_such_section", "x", "1");
            },
            want: &[
                "spec.extraConfig[DEFAULT][no_such_option]: Invalid value: \"no_such_option\": no such option in the nova 2026.1 option catalog",
                "spec.extraConfig[no_such_section][x]: Invalid value: \"no_such_section\": no such section in the nova 2026.1 option catalog",
            ],
        },
        Case {
            name: "guards",
            edit: |n| {
                extra(n, "", "a", "b");
                extra(n, "DEFAULT", "", "b");
                extra(
                    n,
                    "DEFAULT",
                    "vif_plugging_timeout",
                    "1\n[DEFAULT]\ntransport_url = x",
                );
            },
            want: &[
                "spec.extraConfig: Invalid value: \"\": extraConfig section name must not be empty",
                "spec.extraConfig[DEFAULT]: Invalid value: \"\": extraConfig key must not be empty",
                "spec.extraConfig[DEFAULT][vif_plugging_timeout]: Invalid value: extraConfig key and value must not contain a newline or carriage return: the rendered INI writes them verbatim, so a newline injects arbitrary config lines",
            ],
        },
        Case {
            name: "a value that does not parse as its type",
            edit: |n| extra(n, "libvirt", "tx_queue_size", "2048"),
            want: &[
                "spec.extraConfig[libvirt][tx_queue_size]: Invalid value: \"2048\": not one of the choices: [libvirt] tx_queue_size expects one of 256, 512, 1024",
            ],
        },
    ]);
    let deprecated = run_create(
        |n| extra(n, "DEFAULT", "api_paste_config", "/etc/nova/api-paste.ini"),
        &Lookups::default(),
    );
    assert_eq!(
        deprecated.warnings,
        vec![
            "spec.extraConfig [DEFAULT] api_paste_config: deprecated option in nova 2026.1, replaced by [wsgi] api_paste_config"
        ]
    );
    let uncatalogued = run_create(
        |n| {
            n.spec.open_stack_release = "2027.1".into();
            extra(n, "DEFAULT", "whatever", "1");
        },
        &Lookups::default(),
    );
    assert_eq!(uncatalogued, Outcome {
        errors: Violations::default(),
        warnings: vec!["spec.extraConfig was not validated against an option catalog: no catalog for release \"2027.1\" is embedded in this operator build".into()],
    });
    // Update gating: an unrelated edit does not re-run the scan on a stored unknown option.
    let unrelated = run_update(
        |n| extra(n, "DEFAULT", "no_such_option", "1"),
        |n| n.spec.region = Some("r".into()),
    );
    assert_eq!(unrelated, Outcome::default());
    let touched = run_update(
        |n| extra(n, "DEFAULT", "no_such_option", "1"),
        |n| extra(n, "DEFAULT", "no_such_option", "2"),
    );
    assert_eq!(
        errors(&touched),
        vec![
            "spec.extraConfig[DEFAULT][no_such_option]: Invalid value: \"no_such_option\": no such option in the nova 2026.1 option catalog"
        ]
    );
    let release = run_update(
        |n| extra(n, "DEFAULT", "no_such_option", "1"),
        |n| n.spec.open_stack_release = "2026.2".into(),
    );
    assert_eq!(
        errors(&release),
        vec![
            "spec.extraConfig[DEFAULT][no_such_option]: Invalid value: \"no_such_option\": no such option in the nova 2026.2 option catalog"
        ]
    );
    // No message quotes an extraConfig value.
    let secret = run_create(
        |n| {
            extra(n, "neutron", "password", "hunter2");
            extra(n, "DEFAULT", "my_block_storage_ip", "hunter2\n");
        },
        &Lookups::default(),
    );
    assert!(
        errors(&secret).iter().all(|m| !m.contains("hunter2")),
        "{:?}",
        errors(&secret)
    );
}

#[test]
fn every_violation_is_reported_at_once() {
    let mut n = testing::nova();
    n.metadata.name = Some("nova-api".into());
    n.spec.open_stack_release = "2025.2".into();
    n.spec.image.tag = None;
    n.spec.region = Some("a\nb".into());
    let got = validate(&n, None, Operation::Create, &Lookups::default());
    assert_eq!(got.errors.iter().count(), 4, "{:?}", errors(&got));
}

fn behavior(edit: fn(&mut HorizontalPodAutoscalerBehavior)) -> Option<AutoscalingSpec> {
    let mut b = HorizontalPodAutoscalerBehavior {
        scale_up: Some(HPAScalingRules {
            stabilization_window_seconds: Some(0),
            select_policy: Some("Max".into()),
            policies: Some(vec![HPAScalingPolicy {
                type_: "Pods".into(),
                value: 4,
                period_seconds: 60,
            }]),
            ..Default::default()
        }),
        scale_down: Some(HPAScalingRules {
            stabilization_window_seconds: Some(3600),
            select_policy: Some("Disabled".into()),
            policies: Some(vec![HPAScalingPolicy {
                type_: "Percent".into(),
                value: 100,
                period_seconds: 1800,
            }]),
            tolerance: Some(q("0.05")),
        }),
    };
    edit(&mut b);
    Some(AutoscalingSpec {
        behavior: Some(b),
        ..autoscaling(3)
    })
}

fn scale_up(b: &mut HorizontalPodAutoscalerBehavior) -> &mut HPAScalingRules {
    b.scale_up.as_mut().expect("set")
}

fn scale_down(b: &mut HorizontalPodAutoscalerBehavior) -> &mut HPAScalingRules {
    b.scale_down.as_mut().expect("set")
}

#[test]
fn the_hpa_behavior_is_held_to_the_bounds_of_autoscaling_v2() {
    check_cases(&[
        Case {
            name: "at the bounds",
            edit: |n| n.spec.autoscaling = behavior(|_| {}),
            want: &[],
        },
        Case {
            name: "empty rules (the API server defaults the policies)",
            edit: |n| {
                n.spec.autoscaling = behavior(|b| {
                    b.scale_up = Some(HPAScalingRules::default());
                    b.scale_down = None;
                })
            },
            want: &[],
        },
        Case {
            name: "windows",
            edit: |n| {
                n.spec.autoscaling = behavior(|b| {
                    scale_down(b).stabilization_window_seconds = Some(3601);
                    scale_up(b).stabilization_window_seconds = Some(-1);
                })
            },
            want: &[
                "spec.autoscaling.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal to zero",
                "spec.autoscaling.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600",
            ],
        },
        Case {
            name: "select policy and policies",
            edit: |n| {
                n.spec.autoscaling = behavior(|b| {
                    scale_up(b).select_policy = Some("Sometimes".into());
                    scale_up(b).policies = Some(vec![
                        HPAScalingPolicy {
                            type_: "Nodes".into(),
                            value: 0,
                            period_seconds: 1801,
                        },
                        HPAScalingPolicy {
                            type_: "Percent".into(),
                            value: -5,
                            period_seconds: 0,
                        },
                    ]);
                })
            },
            want: &[
                "spec.autoscaling.behavior.scaleUp.selectPolicy: Unsupported value: \"Sometimes\": supported values: \"Disabled\", \"Max\", \"Min\"",
                "spec.autoscaling.behavior.scaleUp.policies[0].type: Unsupported value: \"Nodes\": supported values: \"Percent\", \"Pods\"",
                "spec.autoscaling.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
                "spec.autoscaling.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
                "spec.autoscaling.behavior.scaleUp.policies[1].value: Invalid value: -5: must be greater than zero",
                "spec.autoscaling.behavior.scaleUp.policies[1].periodSeconds: Invalid value: 0: must be greater than zero",
            ],
        },
        Case {
            name: "tolerance",
            edit: |n| {
                n.spec.autoscaling = behavior(|b| {
                    scale_up(b).tolerance = Some(q("-0.1"));
                    scale_down(b).tolerance = Some(q("some"));
                })
            },
            want: &[
                "spec.autoscaling.behavior.scaleUp.tolerance: Invalid value: \"-0.1\": must be greater than or equal to zero",
                "spec.autoscaling.behavior.scaleDown.tolerance: Invalid value: \"some\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ],
        },
    ]);
}

#[test]
fn every_quantity_must_parse() {
    check_cases(&[
        Case {
            name: "deployment requests and limits",
            edit: |n| {
                api(n).resources = Some(resources(
                    &[("cpu", "lots"), ("memory", "1Gi")],
                    &[("cpu", "2"), ("memory", "1 Gi")],
                ));
                n.spec.autoscaling = Some(autoscaling(3));
            },
            want: &[
                "spec.api.deployment.resources.requests.cpu: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.api.deployment.resources.limits.memory: Invalid value: \"1 Gi\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ],
        },
        Case {
            name: "every block",
            edit: |n| {
                let bad = || Some(resources(&[("cpu", "1x")], &[]));
                metadata(n).resources = bad();
                scheduler(n).resources = bad();
                block(&mut n.spec.conductor.as_mut().expect("defaulted").deployment).resources =
                    bad();
                block(&mut n.spec.console_proxy.as_mut().expect("defaulted").deployment)
                    .resources = bad();
                n.spec.jobs = Some(JobSpec {
                    resources: Some(resources(&[], &[("memory", "1mm")])),
                    ..Default::default()
                });
            },
            want: &[
                "spec.metadata.deployment.resources.requests.cpu: Invalid value: \"1x\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.scheduler.deployment.resources.requests.cpu: Invalid value: \"1x\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.conductor.deployment.resources.requests.cpu: Invalid value: \"1x\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.consoleProxy.deployment.resources.requests.cpu: Invalid value: \"1x\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.jobs.resources.limits.memory: Invalid value: \"1mm\": unable to parse quantity's suffix",
            ],
        },
        Case {
            name: "vpa bounds",
            edit: |n| {
                metadata(n).vertical_autoscaling = Some(VerticalAutoscalingSpec {
                    min_allowed: Some(BTreeMap::from([("cpu".into(), q("a lot"))])),
                    max_allowed: Some(BTreeMap::from([
                        ("cpu".into(), q("1")),
                        ("memory".into(), q("")),
                    ])),
                    ..vpa()
                })
            },
            want: &[
                "spec.metadata.deployment.verticalAutoscaling.minAllowed[cpu]: Invalid value: \"a lot\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.metadata.deployment.verticalAutoscaling.maxAllowed[memory]: Invalid value: \"\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ],
        },
        Case {
            name: "in-place resize",
            edit: |n| {
                metadata(n).vertical_autoscaling = Some(VerticalAutoscalingSpec {
                    update_mode: VPAUpdateMode::InPlaceOrRecreate,
                    ..vpa()
                })
            },
            want: &[],
        },
    ]);
}

#[test]
fn verbatim_fields_hosts_and_hostnames() {
    check_cases(&[
        Case {
            name: "cache backend",
            edit: |n| n.spec.cache.backend = Some("dogpile.cache.pymemcache\n[x]".into()),
            want: &[
                "spec.cache.backend: Invalid value: \"dogpile.cache.pymemcache\\n[x]\": value must not contain a newline or carriage return: it is rendered verbatim into the service configuration file, so a newline injects arbitrary config lines",
            ],
        },
        Case {
            name: "brownfield host with a port",
            edit: |n| {
                n.spec.database.cluster_ref = None;
                n.spec.database.host = Some("db.example.com:3307".into());
            },
            want: &[
                "spec.database.host: Invalid value: \"db.example.com:3307\": host must not include a port: set the port in spec.database.port",
            ],
        },
        Case {
            name: "brownfield IPv6 literal",
            edit: |n| {
                n.spec.database.cluster_ref = None;
                n.spec.database.host = Some("fd00::10".into());
            },
            want: &[],
        },
        Case {
            name: "gateway hostnames",
            edit: |n| {
                let gw = |hostname: &str| GatewaySpec {
                    hostname: hostname.into(),
                    parent_ref: GatewayParentRefSpec {
                        name: "gw".into(),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                n.spec.gateway = Some(gw("Nova.Example.com"));
                n.spec.metadata.gateway = Some(gw("metadata.example.com"));
                n.spec.console_proxy.as_mut().expect("defaulted").gateway =
                    Some(gw("console_example.com"));
            },
            want: &[
                "spec.consoleProxy.gateway.hostname: Invalid value: \"console_example.com\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.gateway.hostname: Invalid value: \"Nova.Example.com\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        },
    ]);
}

#[test]
fn a_release_below_the_floor_takes_the_floor_branch_however_old() {
    check_cases(&[Case {
        name: "2009.2 on create",
        edit: |n| n.spec.open_stack_release = "2009.2".into(),
        want: &[
            "spec.openStackRelease: Invalid value: \"2009.2\": must be 2026.1 or later: this operator version no longer supports OpenStack releases below 2026.1",
        ],
    }]);
    let unchanged = run_update(
        |n| n.spec.open_stack_release = "2009.2".into(),
        |n| n.spec.region = Some("RegionOne".into()),
    );
    assert_eq!(errors(&unchanged), Vec::<String>::new());
    assert_eq!(unchanged.warnings.len(), 1, "{:?}", unchanged.warnings);
}

/// A Nova `name` in `openstack` on the example's schemas and MariaDB.
fn claimant(name: &str) -> Nova {
    let mut n = testing::nova();
    n.metadata.name = Some(name.into());
    n.metadata.namespace = Some("openstack".into());
    n
}

#[test]
fn a_schema_another_nova_uses_on_the_same_mariadb_is_refused_naming_it() {
    let first = claimant("nova");
    let mut second = claimant("nova-b");
    second.spec.database.database = "nova_b".into();
    let listed = |novas: Vec<Nova>| Lookups {
        novas: Some(NovaList::Listed(novas)),
        ..testing::lookups(&["high-priority"])
    };
    assert!(needs_claim_check(&second, None, Operation::Create));
    let got = validate(
        &second,
        None,
        Operation::Create,
        &listed(vec![first.clone()]),
    );
    assert_eq!(
        errors(&got),
        vec![
            "spec.apiDatabase.database: Invalid value: \"nova_api\": schema nova_api on MariaDB openstack/openstack-mariadb is already used by Nova openstack/nova (spec.apiDatabase.database): two Novas on one schema would migrate and delete each other's data"
        ]
    );
    // Itself among the listed Novas (an update) is no conflict; another namespace is another
    // MariaDB.
    let itself = validate(
        &first,
        None,
        Operation::Create,
        &listed(vec![first.clone()]),
    );
    assert!(itself.errors.is_empty(), "{:?}", errors(&itself));
    let mut elsewhere = second.clone();
    elsewhere.metadata.namespace = Some("other".into());
    let got = validate(
        &elsewhere,
        None,
        Operation::Create,
        &listed(vec![first.clone()]),
    );
    assert!(got.errors.is_empty(), "{:?}", errors(&got));
    // An update that keeps every schema where it was lists nothing.
    assert!(!needs_claim_check(&first, Some(&first), Operation::Update));
    let mut moved = first.clone();
    moved.spec.database.cluster_ref = Some(ClusterRef {
        name: "other-mariadb".into(),
    });
    assert!(needs_claim_check(&moved, Some(&first), Operation::Update));
}

#[test]
fn the_claim_check_fails_closed_on_both_schema_fields_when_the_novas_cannot_be_listed() {
    let down = Lookups {
        novas: Some(NovaList::Unavailable(
            "the Kubernetes API did not answer within 3s".into(),
        )),
        ..testing::lookups(&["high-priority"])
    };
    let got = validate(&claimant("nova"), None, Operation::Create, &down);
    assert_eq!(
        errors(&got),
        vec![
            "spec.apiDatabase.database: Internal error: cannot verify that no other Nova uses this schema: the Kubernetes API did not answer within 3s",
            "spec.database.database: Internal error: cannot verify that no other Nova uses this schema: the Kubernetes API did not answer within 3s",
        ]
    );
}

fn pod_metadata(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Option<PodMetadataSpec> {
    Some(PodMetadataSpec {
        labels: Some(self::labels(labels)),
        annotations: Some(self::labels(annotations)),
    })
}

#[test]
fn pull_secrets_and_pod_metadata_follow_the_api_servers_grammar_and_leave_the_operators_keys() {
    check_cases(&[
        Case {
            name: "a mesh's label and a secrets agent's annotation",
            edit: |n| {
                n.spec.pod_metadata = pod_metadata(
                    &[("sidecar.istio.io/inject", "true")],
                    &[("vault.hashicorp.com/agent-inject", "true")],
                );
                n.spec.image_pull_secrets = Some(vec![LocalObjectReference {
                    name: "registry-credentials".into(),
                }]);
            },
            want: &[],
        },
        Case {
            name: "the operator's label and annotation",
            edit: |n| {
                n.spec.pod_metadata = pod_metadata(
                    &[("app.kubernetes.io/component", "api")],
                    &[("nova.c5c3.io/transport-url-hash", "0")],
                )
            },
            want: &[
                r#"spec.podMetadata.labels: Invalid value: "app.kubernetes.io/component": the operator sets this label on every pod and selects the pods by it"#,
                r#"spec.podMetadata.annotations: Invalid value: "nova.c5c3.io/transport-url-hash": annotations under nova.c5c3.io/ are the operator's (its credential digests roll the pods)"#,
            ],
        },
        Case {
            name: "bad grammar",
            edit: |n| {
                n.spec.pod_metadata = pod_metadata(&[("team", "a b")], &[("bad key!", "x")]);
                n.spec.image_pull_secrets = Some(vec![
                    LocalObjectReference { name: "".into() },
                    LocalObjectReference {
                        name: "Registry".into(),
                    },
                ]);
            },
            want: &[
                r#"spec.imagePullSecrets[0].name: Required value: the name of a Secret in the Nova's namespace"#,
                r#"spec.imagePullSecrets[1].name: Invalid value: "Registry": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
                r#"spec.podMetadata.labels[team]: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#,
                r#"spec.podMetadata.annotations: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            ],
        },
    ]);
}

fn timing(
    f: impl FnOnce(&mut nova_api::v1alpha1::ProbeTimingSpec),
) -> Option<nova_api::v1alpha1::ProbeTimingSpec> {
    let mut t = nova_api::v1alpha1::ProbeTimingSpec::default();
    f(&mut t);
    Some(t)
}

fn probes(d: &mut DeploymentSpec) -> &mut nova_api::v1alpha1::ProbesSpec {
    d.probes.get_or_insert_with(Default::default)
}

#[test]
fn probe_timing_stays_in_the_api_servers_bounds_on_the_probes_a_workload_runs() {
    check_cases(&[
        Case {
            name: "slower liveness and startup on the API, a slower readiness on the scheduler",
            edit: |n| {
                let p = probes(api(n));
                p.liveness = timing(|t| {
                    t.period_seconds = Some(20);
                    t.failure_threshold = Some(6);
                    t.success_threshold = Some(1);
                });
                p.startup = timing(|t| t.initial_delay_seconds = Some(0));
                probes(scheduler(n)).readiness = timing(|t| {
                    t.timeout_seconds = Some(10);
                    t.success_threshold = Some(2);
                });
            },
            want: &[],
        },
        Case {
            name: "zeroes and negatives",
            edit: |n| {
                probes(api(n)).liveness = timing(|t| {
                    t.initial_delay_seconds = Some(-1);
                    t.period_seconds = Some(0);
                    t.timeout_seconds = Some(0);
                    t.failure_threshold = Some(0);
                    t.success_threshold = Some(0);
                });
            },
            want: &[
                "spec.api.deployment.probes.liveness.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.api.deployment.probes.liveness.periodSeconds: Invalid value: 0: must be greater than or equal to 1",
                "spec.api.deployment.probes.liveness.timeoutSeconds: Invalid value: 0: must be greater than or equal to 1",
                "spec.api.deployment.probes.liveness.failureThreshold: Invalid value: 0: must be greater than or equal to 1",
                "spec.api.deployment.probes.liveness.successThreshold: Invalid value: 0: must be greater than or equal to 1",
            ],
        },
        Case {
            name: "successThreshold above 1 on liveness and startup",
            edit: |n| {
                let p = probes(metadata(n));
                p.liveness = timing(|t| t.success_threshold = Some(2));
                p.readiness = timing(|t| t.success_threshold = Some(2));
                p.startup = timing(|t| t.success_threshold = Some(3));
            },
            want: &[
                "spec.metadata.deployment.probes.liveness.successThreshold: Invalid value: 2: must be 1",
                "spec.metadata.deployment.probes.startup.successThreshold: Invalid value: 3: must be 1",
            ],
        },
        Case {
            name: "liveness and startup on a bus workload",
            edit: |n| {
                let p = probes(scheduler(n));
                p.liveness = timing(|t| t.period_seconds = Some(0));
                p.startup = timing(|t| t.period_seconds = Some(5));
            },
            want: &[
                "spec.scheduler.deployment.probes.liveness: Forbidden: the scheduler runs no liveness probe: a broker outage must not restart it",
                "spec.scheduler.deployment.probes.startup: Forbidden: the scheduler runs no startup probe: a broker outage must not restart it",
            ],
        },
    ]);
}

fn secret_volume(name: &str) -> k8s_openapi::api::core::v1::Volume {
    k8s_openapi::api::core::v1::Volume {
        name: name.into(),
        secret: Some(k8s_openapi::api::core::v1::SecretVolumeSource {
            secret_name: Some(name.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str) -> k8s_openapi::api::core::v1::VolumeMount {
    k8s_openapi::api::core::v1::VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        ..Default::default()
    }
}

#[test]
fn extra_volumes_and_mounts_follow_the_api_servers_rules_and_leave_the_operators_alone() {
    check_cases(&[
        Case {
            name: "a CA bundle and a policy file",
            edit: |n| {
                n.spec.extra_volumes = Some(vec![secret_volume("corporate-ca"), {
                    let mut v = secret_volume("policy");
                    v.secret = None;
                    v.config_map = Some(k8s_openapi::api::core::v1::ConfigMapVolumeSource {
                        name: "nova-policy".into(),
                        ..Default::default()
                    });
                    v
                }]);
                n.spec.extra_volume_mounts = Some(vec![
                    mount("corporate-ca", "/etc/ssl/corporate-ca"),
                    mount("policy", "/etc/nova-policy"),
                    mount("policy", "/etc/nova-policy-copy"),
                ]);
            },
            want: &[],
        },
        Case {
            name: "names: empty, bad grammar, the operator's, twice",
            edit: |n| {
                n.spec.extra_volumes = Some(vec![
                    secret_volume(""),
                    secret_volume("Corporate.CA"),
                    secret_volume("config"),
                    secret_volume("ca"),
                    secret_volume("ca"),
                ]);
            },
            want: &[
                "spec.extraVolumes[0].name: Required value",
                r#"spec.extraVolumes[1].name: Invalid value: "Corporate.CA": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
                r#"spec.extraVolumes[2].name: Invalid value: "config": the operator's own volume of this name is in every pod the Nova runs"#,
                r#"spec.extraVolumes[4].name: Duplicate value: "ca""#,
            ],
        },
        Case {
            name: "types: none, two, one the restricted standard forbids",
            edit: |n| {
                let mut none = secret_volume("none");
                none.secret = None;
                let mut two = secret_volume("two");
                two.empty_dir = Some(Default::default());
                let mut host = secret_volume("host");
                host.secret = None;
                host.host_path = Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
                    path: "/".into(),
                    type_: None,
                });
                n.spec.extra_volumes = Some(vec![none, two, host]);
            },
            want: &[
                "spec.extraVolumes[0]: Required value: must specify a volume type",
                "spec.extraVolumes[1].secret: Forbidden: may not specify more than 1 volume type",
                "spec.extraVolumes[2].hostPath: Forbidden: the Nova's pods keep the restricted Pod Security Standard, which allows only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret volumes",
            ],
        },
        Case {
            name: "mounts: unknown or operator volume, paths of the operator, relative, repeated",
            edit: |n| {
                n.spec.extra_volumes = Some(vec![secret_volume("ca")]);
                n.spec.extra_volume_mounts = Some(vec![
                    mount("x", "/etc/x"),
                    mount("config", "/etc/y"),
                    mount("", "/etc/z"),
                    mount("ca", "/etc/nova"),
                    mount("ca", "/etc/nova-db-tls/api/extra"),
                    mount("ca", "/var/lib/nova/../x"),
                    mount("ca", "etc/relative"),
                    mount("ca", "/etc/ca/"),
                    mount("ca", "/etc//ca"),
                    mount("ca", ""),
                ]);
            },
            want: &[
                r#"spec.extraVolumeMounts[0].name: Not found: "x""#,
                r#"spec.extraVolumeMounts[1].name: Not found: "config""#,
                "spec.extraVolumeMounts[2].name: Required value",
                r#"spec.extraVolumeMounts[3].mountPath: Invalid value: "/etc/nova": must not be at or under /etc/nova, which the operator mounts or runs from"#,
                r#"spec.extraVolumeMounts[4].mountPath: Invalid value: "/etc/nova-db-tls/api/extra": must not be at or under /etc/nova-db-tls, which the operator mounts or runs from"#,
                r#"spec.extraVolumeMounts[5].mountPath: Invalid value: "/var/lib/nova/../x": must not contain '..'"#,
                r#"spec.extraVolumeMounts[5].mountPath: Invalid value: "/var/lib/nova/../x": must not be at or under /var/lib/nova, which the operator mounts or runs from"#,
                r#"spec.extraVolumeMounts[6].mountPath: Invalid value: "etc/relative": must be an absolute path"#,
                r#"spec.extraVolumeMounts[8].mountPath: Invalid value: "/etc//ca": must be unique"#,
                "spec.extraVolumeMounts[9].mountPath: Required value",
            ],
        },
        Case {
            name: "subPath and propagation",
            edit: |n| {
                n.spec.extra_volumes = Some(vec![secret_volume("ca")]);
                let mut escaping = mount("ca", "/etc/a");
                escaping.sub_path = Some("../x".into());
                escaping.sub_path_expr = Some("$(POD_NAME)".into());
                let mut absolute = mount("ca", "/etc/b");
                absolute.sub_path = Some("/x".into());
                absolute.mount_propagation = Some("Bidirectional".into());
                n.spec.extra_volume_mounts = Some(vec![escaping, absolute]);
            },
            want: &[
                r#"spec.extraVolumeMounts[0].subPath: Invalid value: "../x": must not contain '..'"#,
                r#"spec.extraVolumeMounts[0].subPathExpr: Invalid value: "$(POD_NAME)": subPathExpr and subPath are mutually exclusive"#,
                r#"spec.extraVolumeMounts[1].subPath: Invalid value: "/x": must be a relative path"#,
                r#"spec.extraVolumeMounts[1].mountPropagation: Unsupported value: "Bidirectional": supported values: "HostToContainer", "None""#,
            ],
        },
    ]);
}
