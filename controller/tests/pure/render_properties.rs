//! Property-style tests: determinism under any ordering of the input maps, no credential in
//! any rendered document, refusal of a line break in any verbatim input (naming the field,
//! never the value), and the extraConfig merge.

use std::collections::BTreeMap;

use crate::render_support::{example, full, parse, value};
use nova_api::defaults::default_nova;
use nova_api::v1alpha1::{
    ClusterRef, EndpointOverrideSpec, ExtraConfig, GatewayParentRefSpec, GatewaySpec, LogFormat,
    LoggingSpec, MessagingTLSSpec, NovaConsoleProxySpec, NovaEndpointsSpec, NovaRemoteComputeSpec,
    NovaSpec, OptionalEndpointSpec, SecretRefSpec,
};
use nova_controller::render::{
    ContractVariant, RenderError, contract_static_keys, data_hash, data_hash8,
    render_compute_fragment, render_config,
};
use sha2::{Digest, Sha256};

/// A small deterministic PRNG (xorshift64*), so a failing case reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

const EXTRA: [(&str, &str, &str); 9] = [
    ("DEFAULT", "cpu_allocation_ratio", "4.0"),
    ("DEFAULT", "ram_allocation_ratio", "1.5"),
    (
        "filter_scheduler",
        "build_failure_weight_multiplier",
        "1000000.0",
    ),
    ("filter_scheduler", "host_subset_size", "3"),
    ("placement", "timeout", "120"),
    ("libvirt", "virt_type", "kvm"),
    ("quota", "instances", "50"),
    ("quota", "cores", "200"),
    ("wsgi", "keep_alive", "false"),
];

const LOGGERS: [(&str, &str); 5] = [
    ("oslo.messaging", "DEBUG"),
    ("amqp", "WARNING"),
    ("keystonemiddleware", "ERROR"),
    ("sqlalchemy", "INFO"),
    ("nova.scheduler", "CRITICAL"),
];

/// The YAML of fixture 2's spec, with extraConfig and perLoggerLevels written in the order
/// `extra` and `loggers` give.
fn yaml_with(extra: &[(&str, &str, &str)], loggers: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(crate::render_support::golden_dir().join("full.yaml"))
        .expect("full.yaml");
    let cut = text.find("    perLoggerLevels:").expect("perLoggerLevels");
    text.truncate(cut);
    text.push_str("    perLoggerLevels:\n");
    for (name, level) in loggers {
        text.push_str(&format!("      {name}: {level}\n"));
    }
    text.push_str("  extraConfig:\n");
    // Group by section in first-seen order, keys in the given order.
    let mut seen: Vec<&str> = Vec::new();
    for (section, _, _) in extra {
        if !seen.contains(section) {
            seen.push(section);
        }
    }
    for section in seen {
        text.push_str(&format!("    {section}:\n"));
        for (_, key, value) in extra.iter().filter(|(s, _, _)| *s == section) {
            text.push_str(&format!("      {key}: \"{value}\"\n"));
        }
    }
    text
}

#[test]
fn rendering_is_deterministic_under_any_ordering_of_the_input_maps() {
    let baseline = {
        let nova = parse(&yaml_with(&EXTRA, &LOGGERS));
        let name = nova.metadata.name.clone().expect("name");
        let ns = nova.metadata.namespace.clone().expect("namespace");
        (
            render_config(&name, &ns, &nova.spec).expect("renders"),
            render_compute_fragment(&name, &ns, &nova.spec, ContractVariant::Remote)
                .expect("renders"),
        )
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..64 {
        let mut extra = EXTRA;
        let mut loggers = LOGGERS;
        rng.shuffle(&mut extra);
        rng.shuffle(&mut loggers);
        let nova = parse(&yaml_with(&extra, &loggers));
        let name = nova.metadata.name.clone().expect("name");
        let ns = nova.metadata.namespace.clone().expect("namespace");
        let config = render_config(&name, &ns, &nova.spec).expect("renders");
        assert_eq!(config, baseline.0, "order {extra:?} {loggers:?}");
        let remote = render_compute_fragment(&name, &ns, &nova.spec, ContractVariant::Remote)
            .expect("renders");
        assert_eq!(remote, baseline.1);

        // The same maps built by insertion in the shuffled order.
        let mut spec = nova.spec.clone();
        let mut built: ExtraConfig = BTreeMap::new();
        for (section, key, value) in extra {
            built
                .entry(section.to_owned())
                .or_default()
                .insert(key.to_owned(), value.to_owned());
        }
        spec.extra_config = Some(built);
        let levels: BTreeMap<String, String> = loggers
            .iter()
            .map(|(n, l)| ((*n).to_owned(), (*l).to_owned()))
            .collect();
        spec.logging.as_mut().expect("logging").per_logger_levels = Some(levels);
        assert_eq!(
            render_config(&name, &ns, &spec).expect("renders"),
            baseline.0
        );
    }
    // And the merged keys are really there, sorted.
    let conf = baseline.0.nova_conf();
    assert!(conf.contains("[quota]\ncores = 200\ninstances = 50\n\n[scheduler]"));
    assert!(conf.contains("default_log_levels = amqp=WARNING,keystonemiddleware=ERROR,nova.scheduler=CRITICAL,oslo.messaging=DEBUG,sqlalchemy=INFO\n"));
}

#[test]
fn a_defaulted_and_an_undefaulted_spec_render_the_same_bytes() {
    for (name, namespace, spec) in [example(), full()] {
        let mut defaulted = spec.clone();
        default_nova(&mut defaulted);
        assert_ne!(defaulted, spec, "defaulting changed something");
        assert_eq!(
            render_config(&name, &namespace, &spec).expect("renders"),
            render_config(&name, &namespace, &defaulted).expect("renders")
        );
        for variant in [ContractVariant::InCluster, ContractVariant::Remote] {
            assert_eq!(
                render_compute_fragment(&name, &namespace, &spec, variant),
                render_compute_fragment(&name, &namespace, &defaulted, variant)
            );
        }
    }
}

/// A spec with every switch drawn at random, every Secret reference named after a marker.
fn random_spec(rng: &mut Rng, base: &NovaSpec) -> NovaSpec {
    let mut spec = base.clone();
    let marker = |what: &str| SecretRefSpec {
        name: format!("planted-{what}"),
        key: Some(format!("planted-key-{what}")),
    };
    spec.service_user.secret_ref = marker("password");
    spec.metadata.shared_secret_ref = marker("shared-secret");
    spec.database.secret_ref = marker("db");
    spec.api_database.secret_ref = marker("api-db");
    spec.messaging.secret_ref = None;
    spec.messaging.cluster_ref = Some(ClusterRef {
        name: "rabbitmq".into(),
    });
    spec.messaging.tls = rng.coin().then(|| MessagingTLSSpec {
        ca_bundle_secret_ref: marker("ca"),
    });
    spec.remote_compute =
        spec.messaging
            .tls
            .as_ref()
            .filter(|_| rng.coin())
            .map(|_| NovaRemoteComputeSpec {
                keystone_endpoint: "https://keystone.example.com/v3".into(),
                transport_url_secret_ref: marker("remote-transport"),
            });
    let pin = |rng: &mut Rng, url: &str| {
        rng.coin().then(|| EndpointOverrideSpec {
            override_url: Some(url.to_owned()),
        })
    };
    let optional = |rng: &mut Rng, url: &str| {
        rng.coin().then(|| OptionalEndpointSpec {
            enabled: Some(rng.coin()),
            override_url: rng.coin().then(|| url.to_owned()),
        })
    };
    spec.endpoints = Some(NovaEndpointsSpec {
        placement: pin(rng, "http://placement:8778"),
        neutron: pin(rng, "http://neutron:9696"),
        glance: pin(rng, "http://glance:9292"),
        cinder: optional(rng, "http://cinder:8776/v3/%(project_id)s"),
        barbican: optional(rng, "http://barbican:9311"),
    });
    spec.console_proxy = rng.coin().then(|| NovaConsoleProxySpec {
        enabled: Some(rng.coin()),
        deployment: None,
        gateway: None,
    });
    spec.region = rng.coin().then(|| "RegionOne".to_owned());
    spec.logging = rng.coin().then(|| LoggingSpec {
        format: Some(if rng.coin() {
            LogFormat::Json
        } else {
            LogFormat::Text
        }),
        debug: Some(rng.coin()),
        per_logger_levels: rng
            .coin()
            .then(|| [("amqp".to_owned(), "WARNING".to_owned())].into()),
        ..Default::default()
    });
    spec
}

#[test]
fn no_rendered_document_ever_carries_a_credential() {
    let mut rng = Rng(0x5eed);
    let (name, namespace, base) = example();
    for _ in 0..256 {
        let spec = random_spec(&mut rng, &base);
        let mut documents: Vec<(String, String)> = render_config(&name, &namespace, &spec)
            .expect("renders")
            .documents
            .into_iter()
            .collect();
        let mut variants = vec![ContractVariant::InCluster];
        if spec.remote_compute.is_some() {
            variants.push(ContractVariant::Remote);
        }
        for variant in variants {
            for (key, text) in
                contract_static_keys(&name, &namespace, &spec, variant).expect("renders")
            {
                documents.push((format!("{variant:?}/{key}"), text));
            }
        }
        for (doc, text) in &documents {
            assert!(!text.contains("planted"), "{doc} names a Secret:\n{text}");
            for line in text.lines() {
                let key = line.split(" =").next().unwrap_or_default();
                assert!(
                    !["password", "transport_url", "metadata_proxy_shared_secret"].contains(&key),
                    "{doc}: {line}"
                );
                if key == "connection" {
                    assert!(
                        line == "connection = mysql+pymysql://placeholder"
                            || line == "connection =",
                        "{doc}: {line}"
                    );
                }
                // No DSN or broker URL, and no userinfo in any URL.
                assert!(!line.contains("rabbit://"), "{doc}: {line}");
                if let Some((_, rest)) = line.split_once("://") {
                    let authority = rest.split('/').next().unwrap_or_default();
                    assert!(!authority.contains('@'), "{doc}: {line}");
                }
            }
        }
        // nova.conf never registers a host name: every process uses its pod name.
        let conf = &documents
            .iter()
            .find(|(d, _)| d == "nova.conf")
            .expect("nova.conf")
            .1;
        assert_eq!(value(conf, "DEFAULT", "host"), None);
    }
}

const MARKER: &str = "INJECTED-MARKER";

type Plant = fn(&mut NovaSpec, String);

/// Every typed field rendered verbatim, the documents it reaches, and how to plant a value.
fn verbatim_fields() -> Vec<(&'static str, bool, bool, Plant)> {
    // (field, reaches nova.conf, reaches the fragment, plant)
    vec![
        ("spec.region", true, true, |s, v| s.region = Some(v)),
        ("spec.serviceUser.username", true, true, |s, v| {
            s.service_user.username = Some(v)
        }),
        ("spec.serviceUser.projectName", true, true, |s, v| {
            s.service_user.project_name = Some(v)
        }),
        ("spec.serviceUser.userDomainName", true, true, |s, v| {
            s.service_user.user_domain_name = Some(v)
        }),
        ("spec.serviceUser.projectDomainName", true, true, |s, v| {
            s.service_user.project_domain_name = Some(v)
        }),
        ("spec.consoleProxy.gateway.hostname", true, true, |s, v| {
            s.console_proxy = Some(NovaConsoleProxySpec {
                gateway: Some(GatewaySpec {
                    hostname: v,
                    parent_ref: GatewayParentRefSpec {
                        name: "gw".into(),
                        ..Default::default()
                    },
                    ..Default::default()
                }),
                ..Default::default()
            })
        }),
        ("spec.keystoneEndpoint", true, true, |s, v| {
            s.keystone_endpoint = v
        }),
        ("spec.keystonePublicEndpoint", true, true, |s, v| {
            s.keystone_public_endpoint = Some(v)
        }),
        ("spec.endpoints.placement.override", true, true, |s, v| {
            endpoints(s).placement = Some(EndpointOverrideSpec {
                override_url: Some(v),
            })
        }),
        ("spec.endpoints.neutron.override", true, true, |s, v| {
            endpoints(s).neutron = Some(EndpointOverrideSpec {
                override_url: Some(v),
            })
        }),
        ("spec.endpoints.glance.override", true, true, |s, v| {
            endpoints(s).glance = Some(EndpointOverrideSpec {
                override_url: Some(v),
            })
        }),
        ("spec.endpoints.cinder.override", true, true, |s, v| {
            endpoints(s).cinder = Some(OptionalEndpointSpec {
                enabled: Some(true),
                override_url: Some(v),
            })
        }),
        ("spec.endpoints.barbican.override", true, true, |s, v| {
            endpoints(s).barbican = Some(OptionalEndpointSpec {
                enabled: Some(true),
                override_url: Some(v),
            })
        }),
        ("spec.cache.clusterRef.name", true, false, |s, v| {
            s.cache.cluster_ref = Some(ClusterRef { name: v })
        }),
        ("spec.cache.backend", true, false, |s, v| {
            s.cache.backend = Some(v)
        }),
    ]
}

fn endpoints(spec: &mut NovaSpec) -> &mut NovaEndpointsSpec {
    spec.endpoints.get_or_insert_with(Default::default)
}

#[test]
fn a_line_break_in_a_verbatim_typed_field_is_refused_naming_the_field() {
    let (name, namespace, base) = example();
    for (field, in_conf, in_fragment, plant) in verbatim_fields() {
        for brk in ["\n", "\r", "\r\n"] {
            let mut spec = base.clone();
            plant(&mut spec, format!("ok{brk}{MARKER} = 1"));
            let want = RenderError::ControlCharacter {
                field: field.to_owned(),
            };
            let config = render_config(&name, &namespace, &spec);
            let fragment =
                render_compute_fragment(&name, &namespace, &spec, ContractVariant::InCluster);
            if in_conf {
                assert_eq!(config.as_ref().err(), Some(&want), "{field} {brk:?}");
            }
            if in_fragment {
                assert_eq!(fragment.as_ref().err(), Some(&want), "{field} {brk:?}");
            } else {
                assert!(fragment.is_ok(), "{field} does not reach the fragment");
            }
            let message = want.to_string();
            assert!(message.starts_with(field), "{message}");
            assert!(!message.contains(MARKER), "{message}");
        }
    }

    // The remote Keystone endpoint reaches the remote fragment only.
    let (name, namespace, base) = full();
    let mut spec = base.clone();
    spec.remote_compute
        .as_mut()
        .expect("remote")
        .keystone_endpoint = format!("https://k\n{MARKER}");
    assert_eq!(
        render_compute_fragment(&name, &namespace, &spec, ContractVariant::Remote),
        Err(RenderError::ControlCharacter {
            field: "spec.remoteCompute.keystoneEndpoint".into()
        })
    );
    assert!(render_compute_fragment(&name, &namespace, &spec, ContractVariant::InCluster).is_ok());
    assert!(render_config(&name, &namespace, &spec).is_ok());

    // A brownfield cache server and a per-logger level name their entry.
    let mut spec = base.clone();
    spec.cache.servers = Some(vec!["a:11211".into(), format!("b:11211\n{MARKER}")]);
    assert_eq!(
        render_config(&name, &namespace, &spec).err(),
        Some(RenderError::ControlCharacter {
            field: "spec.cache.servers[1]".into()
        })
    );
    let mut spec = base.clone();
    spec.logging
        .as_mut()
        .expect("logging")
        .per_logger_levels
        .as_mut()
        .expect("levels")
        .insert("amqp".into(), format!("DEBUG\n{MARKER}"));
    assert_eq!(
        render_config(&name, &namespace, &spec).err(),
        Some(RenderError::ControlCharacter {
            field: "spec.logging.perLoggerLevels[\"amqp\"]".into()
        })
    );
    // A disabled Cinder's override is not read, so it is not refused either.
    let mut spec = base;
    endpoints(&mut spec).cinder = Some(OptionalEndpointSpec {
        enabled: Some(false),
        override_url: Some(format!("http://c\n{MARKER}")),
    });
    assert!(render_config(&name, &namespace, &spec).is_ok());
}

fn extra(entries: &[(&str, &str, &str)]) -> ExtraConfig {
    let mut out = ExtraConfig::new();
    for (section, key, value) in entries {
        out.entry((*section).to_owned())
            .or_default()
            .insert((*key).to_owned(), (*value).to_owned());
    }
    out
}

#[test]
fn a_line_break_anywhere_in_extra_config_is_refused_naming_the_section() {
    let (name, namespace, base) = example();
    for brk in ["\n", "\r"] {
        let value = format!("1{brk}{MARKER} = 2");
        let cases = [
            (
                format!("quota{brk}x"),
                "instances".to_owned(),
                "1".to_owned(),
            ),
            (
                "quota".to_owned(),
                format!("instances{brk}x"),
                "1".to_owned(),
            ),
            ("quota".to_owned(), "instances".to_owned(), value.clone()),
        ];
        for (section, key, value) in cases {
            let mut spec = base.clone();
            spec.extra_config = Some(extra(&[
                ("DEFAULT", "cpu_allocation_ratio", "4.0"),
                (&section, &key, &value),
            ]));
            let err = render_config(&name, &namespace, &spec).expect_err("refused");
            assert_eq!(
                err,
                RenderError::ExtraConfigControlCharacter {
                    section: section.clone()
                }
            );
            assert_eq!(err.section(), Some(section.as_str()));
            assert!(err.is_injection());
            let message = err.to_string();
            assert!(!message.contains(MARKER), "{message}");
            assert!(!message.contains(['\n', '\r']), "{message}");
            assert!(
                message.starts_with("extraConfig section \"quota"),
                "{message}"
            );
            // The fragment carries no extraConfig, so it is unaffected.
            assert!(
                render_compute_fragment(&name, &namespace, &spec, ContractVariant::InCluster)
                    .is_ok()
            );
        }
    }
    assert_eq!(
        RenderError::ExtraConfigControlCharacter {
            section: "x".into()
        }
        .to_string(),
        "extraConfig section \"x\" contains a newline or carriage return"
    );
}

#[test]
fn extra_config_keys_oslo_would_misread_and_empty_sections_are_refused() {
    let (name, namespace, base) = example();
    for key in ["password=hunter2", "password ", " debug", "a:b", "#x", ""] {
        let mut spec = base.clone();
        spec.extra_config = Some(extra(&[("placement", key, "v")]));
        let err = render_config(&name, &namespace, &spec).expect_err("refused");
        assert_eq!(
            err,
            RenderError::ExtraConfigUnreadableKey {
                section: "placement".into()
            },
            "{key:?}"
        );
        assert!(!err.to_string().contains("hunter2"));
    }
    let mut spec = base;
    spec.extra_config = Some(extra(&[("", "k", "v")]));
    assert_eq!(
        render_config(&name, &namespace, &spec).err(),
        Some(RenderError::ExtraConfigEmptySection)
    );
}

#[test]
fn a_user_value_wins_over_an_operator_default_and_the_owned_key_is_reported() {
    let (name, namespace, mut spec) = example();
    let before = render_config(&name, &namespace, &spec).expect("renders");
    spec.extra_config = Some(extra(&[
        (
            "filter_scheduler",
            "build_failure_weight_multiplier",
            "1000000.0",
        ),
        ("Placement", "timeout", "120"),
        ("DEFAULT", "debug", "true"),
        ("quota", "instances", "50"),
        ("DEFAULT", "cpu_allocation_ratio", "4.0"),
    ]));
    let rendered = render_config(&name, &namespace, &spec).expect("renders");
    let conf = rendered.nova_conf();
    assert_eq!(
        value(conf, "filter_scheduler", "build_failure_weight_multiplier").as_deref(),
        Some("1000000.0")
    );
    // A differently-cased section lands in the operator's section, where it is in force.
    assert_eq!(value(conf, "placement", "timeout").as_deref(), Some("120"));
    assert!(!conf.contains("[Placement]"));
    assert_eq!(value(conf, "DEFAULT", "debug").as_deref(), Some("true"));
    // Non-owned keys are merged...
    assert_eq!(value(conf, "quota", "instances").as_deref(), Some("50"));
    assert_eq!(
        value(conf, "DEFAULT", "cpu_allocation_ratio").as_deref(),
        Some("4.0")
    );
    // ...and only the owned ones are reported, sorted by section then key.
    assert_eq!(
        rendered.override_entries(),
        [
            "[DEFAULT] debug",
            "[filter_scheduler] build_failure_weight_multiplier",
            "[placement] timeout"
        ]
    );
    // The hash follows the content; the overlays do not change.
    assert_ne!(rendered.hash8, before.hash8);
    for doc in [
        "metadata.conf",
        "scheduler.conf",
        "conductor.conf",
        "novncproxy.conf",
    ] {
        assert_eq!(rendered.documents[doc], before.documents[doc]);
    }

    // A non-owned key alone is merged and reports nothing.
    spec.extra_config = Some(extra(&[("quota", "instances", "50")]));
    let rendered = render_config(&name, &namespace, &spec).expect("renders");
    assert!(rendered.overridden_owned_keys.is_empty());
    assert!(rendered.nova_conf().contains("\n[quota]\ninstances = 50\n"));

    // Setting an owned key to the operator's own value is still an override.
    spec.extra_config = Some(extra(&[("placement", "timeout", "60")]));
    let rendered = render_config(&name, &namespace, &spec).expect("renders");
    assert_eq!(rendered.override_entries(), ["[placement] timeout"]);
    assert_eq!(rendered.nova_conf(), before.nova_conf());
}

#[test]
fn the_data_hash_follows_the_documented_format() {
    let data: BTreeMap<String, String> = [
        ("nova.conf".to_owned(), "[DEFAULT]\n".to_owned()),
        ("a".to_owned(), "".to_owned()),
    ]
    .into();
    let manual = "1:a=0:\n9:nova.conf=10:[DEFAULT]\n\n";
    let want = hex::encode(Sha256::digest(manual.as_bytes()));
    assert_eq!(data_hash(&data), want);
    assert_eq!(data_hash8(&data), want[..8]);

    let (name, namespace, spec) = example();
    let rendered = render_config(&name, &namespace, &spec).expect("renders");
    assert_eq!(rendered.hash8, data_hash(&rendered.documents)[..8]);
    assert_eq!(
        rendered.config_map_name(&name),
        format!("nova-config-{}", rendered.hash8)
    );
}
