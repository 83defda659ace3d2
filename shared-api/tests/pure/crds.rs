//! The generated CRDs: committed files in sync, every CEL rule and enum of the spec present,
//! and a structural schema the API server accepts.

use nova_api::crd;
use serde_json::Value;

fn schemas() -> Vec<(&'static str, Value)> {
    crd::all()
        .into_iter()
        .map(|(file, crd)| {
            let value = serde_json::to_value(&crd).expect("serializes");
            (
                file,
                value["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone(),
            )
        })
        .collect()
}

fn schema(file_prefix: &str) -> Value {
    schemas()
        .into_iter()
        .find(|(file, _)| file.contains(file_prefix))
        .map(|(_, s)| s)
        .expect("known CRD")
}

/// Follows a dotted property path; `[]` steps into list items, `{}` into map values.
fn at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .filter(|s| !s.is_empty())
        .fold(schema, |node, step| match step {
            "[]" => &node["items"],
            "{}" => &node["additionalProperties"],
            name => &node["properties"][name],
        })
}

fn rules(node: &Value) -> Vec<(String, String)> {
    node["x-kubernetes-validations"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .map(|r| {
                    (
                        r["rule"].as_str().unwrap_or_default().to_owned(),
                        r["message"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Both committed copies: the repository's manifests and the chart's templates.
#[test]
fn committed_crds_match_what_crdgen_writes() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (file, crd) in crd::all() {
        for (dir, want) in [
            (crd::DIR, crd::to_yaml(&crd).expect("renders")),
            (
                crd::CHART_DIR,
                crd::to_chart_template(&crd).expect("renders"),
            ),
        ] {
            let got = std::fs::read_to_string(root.join(dir).join(file)).unwrap_or_default();
            assert!(
                got == want,
                "{dir}/{file} is stale: run `cargo run -p nova-api --bin crdgen`"
            );
        }
    }
}

/// What `kubectl apply` (client-side) stores of an object, in its last-applied annotation,
/// must stay under the API server's 256 KiB limit on all annotations together.
const ANNOTATIONS_LIMIT: usize = 256 * 1024;

#[test]
fn every_crd_fits_the_annotation_client_side_apply_writes() {
    for (file, crd) in crd::all() {
        let json = serde_json::to_string(&crd).expect("serializes");
        eprintln!("{file}: {} bytes of JSON", json.len());
        assert!(
            json.len() < ANNOTATIONS_LIMIT * 3 / 4,
            "{file}: {} bytes of JSON, too close to the {ANNOTATIONS_LIMIT} bytes kubectl apply may annotate",
            json.len()
        );
    }
}

/// The upstream types lose their descriptions, never their structure; our own fields keep
/// theirs, a field of an upstream type included.
#[test]
fn only_the_upstream_types_lose_their_descriptions() {
    let nova = schema("novas");
    for own in [
        "spec.api.deployment.replicas",
        "spec.api.deployment.resources",
        "spec.jobs.affinity",
        "spec.jobs.tolerations",
        "spec.networkPolicy.additionalEgress",
        "status.conditions",
    ] {
        assert!(
            at(&nova, own)["description"].is_string(),
            "{own} keeps its description"
        );
    }
    for upstream in [
        "spec.jobs.affinity.nodeAffinity",
        "spec.jobs.tolerations.[].key",
        "spec.api.deployment.resources.limits",
        "status.conditions.[].reason",
    ] {
        let node = at(&nova, upstream);
        assert!(node.is_object(), "{upstream} is still in the schema");
        assert!(node.get("description").is_none(), "{upstream}: {node}");
    }
    let text = serde_json::to_string(&nova).expect("json");
    assert!(
        !text.contains("x-nova-upstream-type"),
        "the marker is dropped"
    );
}

#[test]
fn every_crd_carries_the_digest_of_its_spec() {
    for (file, crd) in crd::all() {
        let annotations = crd.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get(crd::SCHEMA_HASH_ANNOTATION),
            Some(&crd::schema_hash(&crd)),
            "{file}"
        );
    }
}

/// (path, exact message) of every CEL rule the spec gives, per CRD.
const NOVA_RULES: &[(&str, &str)] = &[
    ("spec", "targetClusterRef is immutable"),
    (
        "spec",
        "apiDatabase and database must name different schemas",
    ),
    (
        "spec",
        "apiDatabase must not name the cell0 schema derived from database",
    ),
    (
        "spec",
        "apiDatabase and database must use the same credentialsMode",
    ),
    (
        "spec",
        "consoleProxy.deployment must not be set when consoleProxy.enabled is false",
    ),
    (
        "spec",
        "remoteCompute requires messaging.tls: a compute on another cluster verifies the broker against the messaging CA bundle",
    ),
    (
        "spec",
        "spec.api.deployment.verticalAutoscaling cannot be set while spec.autoscaling scales the same Deployment",
    ),
    (
        "spec.apiDatabase",
        "apiDatabase.database is immutable: the schema holds the cell map and every instance mapping",
    ),
    (
        "spec.apiDatabase",
        "apiDatabase mode (managed clusterRef vs brownfield host) is immutable",
    ),
    (
        "spec.database",
        "database.database is immutable: the cell mappings store the schema name",
    ),
    (
        "spec.database",
        "database mode (managed clusterRef vs brownfield host) is immutable",
    ),
    (
        "spec.database",
        "database.database must be at most 58 characters: cell0 is provisioned as <database>_cell0 under the 64-character schema limit",
    ),
    (
        "spec.apiDatabase",
        "exactly one of clusterRef or host must be set",
    ),
    (
        "spec.apiDatabase",
        "credentialsMode Dynamic requires clusterRef (managed mode)",
    ),
    (
        "spec.database",
        "exactly one of clusterRef or host must be set",
    ),
    (
        "spec.database",
        "credentialsMode Dynamic requires clusterRef (managed mode)",
    ),
    (
        "spec.image",
        "exactly one of image.tag or image.digest must be set",
    ),
    (
        "spec.cache",
        "exactly one of clusterRef or servers must be set",
    ),
    (
        "spec.cache",
        "clusterRef.name must not contain a newline or carriage return",
    ),
    (
        "spec.messaging",
        "exactly one of clusterRef or secretRef must be set",
    ),
    (
        "spec.networkPolicy",
        "at least one ingress source must be specified",
    ),
    (
        "spec.autoscaling",
        "at least one of targetCPUUtilization or targetMemoryUtilization must be set",
    ),
    (
        "spec.autoscaling",
        "minReplicas must not exceed maxReplicas",
    ),
    (
        "spec.logging.perLoggerLevels",
        "logger name must not be empty",
    ),
    (
        "spec.logging.perLoggerLevels",
        "per-logger level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
    ),
    (
        "spec.api.uwsgi",
        "httpKeepAliveTimeout may only be set when httpKeepAlive is true",
    ),
    (
        "spec.metadata.uwsgi",
        "httpKeepAliveTimeout may only be set when httpKeepAlive is true",
    ),
    (
        "spec.api.deployment",
        "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds",
    ),
    (
        "spec.metadata.deployment",
        "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds",
    ),
    (
        "spec.scheduler.deployment",
        "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds",
    ),
    (
        "spec.conductor.deployment",
        "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds",
    ),
    (
        "spec.consoleProxy.deployment",
        "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds",
    ),
    (
        "spec.api.deployment.verticalAutoscaling",
        "minAllowed may only name cpu and memory",
    ),
    (
        "spec.api.deployment.verticalAutoscaling",
        "maxAllowed may only name cpu and memory",
    ),
    (
        "spec.consoleProxy.deployment.verticalAutoscaling",
        "maxAllowed may only name cpu and memory",
    ),
];

const NOVACOMPUTE_RULES: &[(&str, &str)] = &[
    ("spec", "targetClusterRef is immutable"),
    ("spec", "novaRef is immutable"),
    (
        "spec.libvirt",
        "cpuModels is required when cpuMode is custom and must be empty otherwise",
    ),
    (
        "spec.image",
        "exactly one of image.tag or image.digest must be set",
    ),
    (
        "spec.verticalAutoscaling",
        "minAllowed may only name cpu and memory",
    ),
    (
        "spec.verticalAutoscaling",
        "maxAllowed may only name cpu and memory",
    ),
];

#[test]
fn every_cel_rule_is_present_with_its_exact_message() {
    for (prefix, table) in [("novas", NOVA_RULES), ("novacomputes", NOVACOMPUTE_RULES)] {
        let root = schema(prefix);
        for (path, message) in table {
            let found = rules(at(&root, path));
            assert!(
                found.iter().any(|(_, m)| m == message),
                "{prefix} {path}: no rule with message {message:?}; found {found:?}"
            );
        }
    }
}

#[test]
fn the_transition_rules_compare_with_old_self() {
    let nova = schema("novas");
    let immutable: Vec<_> = rules(at(&nova, "spec"))
        .into_iter()
        .filter(|(_, m)| m == "targetClusterRef is immutable")
        .map(|(r, _)| r)
        .collect();
    assert_eq!(
        immutable,
        [
            "has(self.targetClusterRef) == has(oldSelf.targetClusterRef)",
            "!has(self.targetClusterRef) || !has(oldSelf.targetClusterRef) || self.targetClusterRef.name == oldSelf.targetClusterRef.name",
        ]
    );
    for path in ["spec.apiDatabase", "spec.database"] {
        let rules = rules(at(&nova, path));
        assert!(
            rules
                .iter()
                .any(|(r, _)| r == "self.database == oldSelf.database"),
            "{path}"
        );
        assert!(
            rules
                .iter()
                .any(|(r, _)| r == "has(self.clusterRef) == has(oldSelf.clusterRef)"),
            "{path}"
        );
    }
    let compute = schema("novacomputes");
    assert!(
        rules(at(&compute, "spec"))
            .iter()
            .any(|(r, _)| r == "self.novaRef.name == oldSelf.novaRef.name")
    );
}

fn enum_values(node: &Value) -> Vec<String> {
    node["enum"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_enum_carries_exactly_the_spec_values() {
    let nova = schema("novas");
    let compute = schema("novacomputes");
    let table: &[(&Value, &str, &[&str])] = &[
        (
            &nova,
            "spec.apiDatabase.credentialsMode",
            &["Static", "Dynamic"],
        ),
        (
            &nova,
            "spec.database.tls.mode",
            &["disabled", "prefer", "require", "verify-ca", "verify-full"],
        ),
        (
            &nova,
            "spec.secretStoreRef.kind",
            &["ClusterSecretStore", "SecretStore"],
        ),
        (&nova, "spec.logging.format", &["text", "json"]),
        (
            &nova,
            "spec.logging.level",
            &["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        ),
        (
            &nova,
            "spec.api.deployment.verticalAutoscaling.updateMode",
            &["Off", "Initial", "Recreate", "InPlaceOrRecreate", "Auto"],
        ),
        (
            &nova,
            "status.upgradePhase",
            &["Expanding", "Migrating", "RollingUpdate", "Contracting"],
        ),
        (&compute, "spec.libvirt.virtType", &["kvm", "qemu"]),
        (
            &compute,
            "spec.libvirt.cpuMode",
            &["host-model", "host-passthrough", "custom", "none"],
        ),
        (
            &compute,
            "spec.libvirt.imagesType",
            &["default", "qcow2", "raw", "flat"],
        ),
        (
            &compute,
            "spec.updateStrategy.type",
            &["RollingUpdate", "OnDelete"],
        ),
        (
            &compute,
            "spec.verticalAutoscaling.updateMode",
            &["Off", "Initial", "Recreate", "InPlaceOrRecreate", "Auto"],
        ),
        (
            &compute,
            "status.nodes.[].phase",
            &["Pending", "Active", "Draining", "Releasing", "Conflict"],
        ),
    ];
    for (root, path, want) in table {
        assert_eq!(enum_values(at(root, path)), *want, "{path}");
    }
}

#[test]
fn schema_defaults_match_the_spec() {
    let nova = schema("novas");
    let compute = schema("novacomputes");
    let table: &[(&Value, &str, Value)] = &[
        (&nova, "spec.api.deployment.replicas", 3.into()),
        (&nova, "spec.apiDatabase.replicas", 3.into()),
        (&nova, "spec.apiDatabase.storageSize", "100Gi".into()),
        (&nova, "spec.database.replicas", 3.into()),
        (&nova, "spec.cache.replicas", 3.into()),
        (
            &nova,
            "spec.cache.backend",
            "dogpile.cache.pymemcache".into(),
        ),
        (&nova, "spec.logging.format", "text".into()),
        (&nova, "spec.logging.level", "INFO".into()),
        (&nova, "spec.api.uwsgi.processes", 2.into()),
        (&nova, "spec.api.uwsgi.threads", 1.into()),
        (
            &nova,
            "spec.secretStoreRef.kind",
            "ClusterSecretStore".into(),
        ),
        (&compute, "spec.libvirt", serde_json::json!({})),
        (&compute, "spec.libvirt.virtType", "kvm".into()),
        (&compute, "spec.updateStrategy", serde_json::json!({})),
        (&compute, "spec.updateStrategy.type", "RollingUpdate".into()),
    ];
    for (root, path, want) in table {
        assert_eq!(&at(root, path)["default"], want, "{path}");
    }
    // Render-time defaults are never schema defaults.
    for path in [
        "spec.api.deployment.terminationGracePeriodSeconds",
        "spec.api.deployment.preStopSleepSeconds",
        "spec.dbArchive.schedule",
        "spec.dbArchive.maxRows",
        "spec.scheduler.workers",
        "spec.consoleProxy.enabled",
    ] {
        assert!(
            at(&nova, path)["default"].is_null(),
            "{path} must not carry a schema default"
        );
    }
}

/// The field descriptions are doc comments, literal text: they must name the render-time
/// defaults the webhook, the renderer and the CEL rule take from `nova_api::defaults`.
#[test]
fn the_deployment_block_describes_its_render_time_defaults() {
    use nova_api::defaults::{DEFAULT_GRACE_SECONDS, DEFAULT_PRE_STOP_SECONDS};
    let nova = schema("novas");
    for (field, default) in [
        (
            "terminationGracePeriodSeconds",
            format!("; {DEFAULT_GRACE_SECONDS} at render time when unset"),
        ),
        (
            "preStopSleepSeconds",
            format!("; {DEFAULT_PRE_STOP_SECONDS} when unset"),
        ),
    ] {
        let description = at(&nova, &format!("spec.api.deployment.{field}"))["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(description.contains(&default), "{field}: {description:?}");
    }
}

#[test]
fn patterns_and_bounds_match_the_spec() {
    let nova = schema("novas");
    let table: &[(&str, &str, Value)] = &[
        ("spec.openStackRelease", "pattern", r"^\d{4}\.[12]$".into()),
        ("spec.keystoneEndpoint", "pattern", "^https?://".into()),
        ("spec.keystoneEndpoint", "minLength", 1.into()),
        (
            "spec.remoteCompute.keystoneEndpoint",
            "pattern",
            "^https://".into(),
        ),
        (
            "spec.endpoints.placement.override",
            "pattern",
            "^https?://".into(),
        ),
        ("spec.database.database", "maxLength", 64.into()),
        (
            "spec.database.database",
            "pattern",
            "^[A-Za-z0-9_]+$".into(),
        ),
        ("spec.database.port", "maximum", 65535.into()),
        (
            "spec.image.digest",
            "pattern",
            "^sha256:[a-f0-9]{64}$".into(),
        ),
        ("spec.scheduler.workers", "minimum", 1.into()),
        ("spec.dbArchive.sleep", "minimum", 0.into()),
        (
            "spec.api.deployment.terminationGracePeriodSeconds",
            "minimum",
            10.into(),
        ),
        (
            "spec.autoscaling.targetCPUUtilization",
            "maximum",
            100.into(),
        ),
        (
            "spec.api.deployment.verticalAutoscaling.minAllowed",
            "maxProperties",
            2.into(),
        ),
    ];
    for (path, keyword, want) in table {
        let got = &at(&nova, path)[*keyword];
        // Minimum and maximum come back as JSON floats; compare numbers by value.
        let same = match (got.as_f64(), want.as_f64()) {
            (Some(g), Some(w)) => g == w,
            _ => got == want,
        };
        assert!(same, "{path} {keyword}: {got} != {want}");
    }
    let required = at(&nova, "spec")["required"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for field in [
        "openStackRelease",
        "image",
        "apiDatabase",
        "database",
        "cache",
        "messaging",
        "metadata",
        "keystoneEndpoint",
        "serviceUser",
    ] {
        assert!(required.contains(&field.into()), "spec.{field} is required");
    }
    let compute = schema("novacomputes");
    assert_eq!(at(&compute, "spec.nodeSelector")["minProperties"], 1);
    assert_eq!(
        at(&compute, "spec.traits.[]")["pattern"],
        "^CUSTOM_[A-Z0-9_]+$"
    );
    assert_eq!(
        at(&compute, "spec.hostTraits")["x-kubernetes-list-map-keys"],
        serde_json::json!(["node"])
    );
    assert_eq!(
        at(&compute, "status.nodes")["x-kubernetes-list-type"],
        "map"
    );
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    for prefix in ["novas", "novacomputes"] {
        let conditions = at(&schema(prefix), "status.conditions").clone();
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{prefix}");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"]),
            "{prefix}"
        );
    }
}

#[test]
fn extra_config_is_a_typed_map_of_string_maps() {
    for prefix in ["novas", "novacomputes"] {
        let extra = at(&schema(prefix), "spec.extraConfig").clone();
        assert_eq!(extra["type"], "object");
        assert_eq!(
            extra["additionalProperties"]["additionalProperties"]["type"],
            "string"
        );
    }
}

/// Walks every schema node, reporting what the API server would refuse as non-structural.
fn structural_violations(node: &Value, path: &str, out: &mut Vec<String>) {
    let Some(map) = node.as_object() else { return };
    let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !map.contains_key("type") && !int_or_string && !preserve {
        out.push(format!("{path}: no type"));
    }
    if map.contains_key("properties") && map.contains_key("additionalProperties") {
        out.push(format!("{path}: properties beside additionalProperties"));
    }
    for keyword in ["$ref", "nullable", "oneOf", "allOf", "definitions"] {
        if map.contains_key(keyword) {
            out.push(format!("{path}: {keyword}"));
        }
    }
    if preserve {
        out.push(format!("{path}: x-kubernetes-preserve-unknown-fields"));
    }
    if let Some(any_of) = map.get("anyOf") {
        // Only the int-or-string shape may use anyOf, and only without types inside.
        let typed = any_of
            .as_array()
            .into_iter()
            .flatten()
            .any(|b| b.get("type").is_some() && !int_or_string);
        if typed {
            out.push(format!("{path}: anyOf outside int-or-string"));
        }
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            structural_violations(child, &format!("{path}.{name}"), out);
        }
    }
    for (keyword, step) in [("items", "[]"), ("additionalProperties", "{}")] {
        if let Some(child) = map.get(keyword) {
            structural_violations(child, &format!("{path}.{step}"), out);
        }
    }
}

#[test]
fn the_schemas_are_structural_without_free_form_fields() {
    for (file, root) in schemas() {
        let mut violations = Vec::new();
        structural_violations(&root, "", &mut violations);
        assert!(violations.is_empty(), "{file}: {violations:#?}");
    }
}

#[test]
fn printer_columns_match_the_spec() {
    let ready = |field: &str| format!(".status.conditions[?(@.type=='Ready')].{field}");
    for (file, crd) in crd::all() {
        let got: Vec<(String, String, i32)> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.json_path.clone(), c.priority.unwrap_or(0)))
            .collect();
        // The spec's columns, and (issue 30) the Ready reason and message under `-o wide`,
        // the upgrade's phase and target, and the pool's Active and Draining counts.
        let want: Vec<(&str, String, i32)> = if file.contains("novacomputes") {
            vec![
                ("Ready", ready("status"), 0),
                ("Reason", ready("reason"), 1),
                ("Desired", ".status.desiredNumberScheduled".into(), 0),
                ("Ready pods", ".status.numberReady".into(), 0),
                ("Active", ".status.activeNodes".into(), 0),
                ("Draining", ".status.drainingNodes".into(), 0),
                ("Age", ".metadata.creationTimestamp".into(), 0),
                ("Message", ready("message"), 1),
            ]
        } else {
            vec![
                ("Ready", ready("status"), 0),
                ("Reason", ready("reason"), 1),
                ("Release", ".status.installedRelease".into(), 0),
                ("Upgrade", ".status.upgradePhase".into(), 0),
                ("Target", ".status.targetRelease".into(), 1),
                ("Endpoint", ".status.endpoint".into(), 0),
                ("Age", ".metadata.creationTimestamp".into(), 0),
                ("Message", ready("message"), 1),
            ]
        };
        let want: Vec<(String, String, i32)> = want
            .into_iter()
            .map(|(n, p, priority)| (n.to_owned(), p, priority))
            .collect();
        assert_eq!(got, want, "{file}");
        let version = &crd.spec.versions[0];
        assert!(version.served && version.storage, "{file}");
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{file}"
        );
        assert_eq!(crd.spec.scope, "Namespaced");
    }
}

/// `kubectl get openstack` lists both kinds, and `kubectl get nv,nvc` is short (issue 30).
#[test]
fn both_kinds_have_short_names_and_the_openstack_category() {
    for (file, crd) in crd::all() {
        let names = &crd.spec.names;
        let short = if names.kind == "Nova" { "nv" } else { "nvc" };
        assert_eq!(
            names.short_names.as_deref(),
            Some(&[short.to_owned()][..]),
            "{file}"
        );
        assert_eq!(
            names.categories.as_deref(),
            Some(&["openstack".to_owned()][..]),
            "{file}"
        );
    }
}

/// The generated references (conditions, events) are committed as `refgen` writes them.
#[test]
fn the_generated_references_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (relative, markdown) in nova_api::reference::all() {
        let path = root.join(relative);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == markdown,
            "{} is stale: run `cargo run -p nova-api --bin refgen`",
            path.display()
        );
    }
}
