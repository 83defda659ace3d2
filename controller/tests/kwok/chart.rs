//! The Helm chart (`charts/nova-operator`): `helm lint` and a server-side dry-run of the
//! rendering against the real API server for each value set; tests on the rendered manifests
//! (least-privilege RBAC derived from the kinds the code registers, the four webhook paths
//! with a CA bundle, independent Deployments, a strict schema); the chart's CRDs, dashboard
//! and alerts checked against the code. The dry-run covers the cert-manager and Prometheus
//! operator objects too: their CRDs (`tests/crds/chart`) are installed first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use nova_controller::clusters::Caching;
use nova_controller::clusters::availability::TargetClusterAvailability;
use nova_controller::{nova, novacompute};
use nova_test_harness::helm;
use nova_testkit::charts::kubectl;
use prometheus::core::Collector as _;
use serde_json::Value;

/// The value sets every chart test renders: the defaults, cert-manager, the namespace scope,
/// HA replicas, monitoring on, and the SRE knobs at once (extra args, env, volumes and mounts,
/// digests, pull secrets, ServiceAccount annotations, OpenShift, NetworkPolicies).
const VALUE_SETS: &[(&str, &[&str])] = &[
    ("defaults", &[]),
    (
        "cert-manager",
        &["--set", "webhook.certificate.certManager.enabled=true"],
    ),
    ("namespace-scoped", &["--set", "rbac.scope=namespace"]),
    (
        "ha",
        &[
            "--set",
            "controller.replicas=3",
            "--set",
            "webhook.replicas=3",
        ],
    ),
    (
        "monitoring",
        &[
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "metrics.prometheusRule.enabled=true",
        ],
    ),
    ("extended", EXTENDED),
];

/// Every escape hatch and image setting at once: extra args, env, volumes and mounts, digests,
/// pull secrets, ServiceAccount annotations, the OpenShift mode and the NetworkPolicies.
const EXTENDED: &[&str] = &[
    "--set-json",
    r#"controller.extraArgs=["--clusters-namespace=platform-clusters"]"#,
    "--set-json",
    r#"webhook.extraArgs=["--max-connections=256"]"#,
    "--set-json",
    r#"controller.extraEnv=[{"name":"HTTPS_PROXY","value":"http://proxy.example.org:3128"}]"#,
    "--set-json",
    r#"webhook.extraEnv=[{"name":"TZ","value":"UTC"}]"#,
    "--set-json",
    r#"controller.extraVolumes=[{"name":"ca-bundle","configMap":{"name":"openstack-ca"}}]"#,
    "--set-json",
    r#"controller.extraVolumeMounts=[{"name":"ca-bundle","mountPath":"/etc/nova-controller/ca","readOnly":true}]"#,
    "--set-json",
    r#"webhook.extraVolumes=[{"name":"tmp","emptyDir":{}}]"#,
    "--set-json",
    r#"webhook.extraVolumeMounts=[{"name":"tmp","mountPath":"/tmp"}]"#,
    "--set",
    "controller.image.digest=sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "--set",
    "webhook.image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "--set",
    "imagePullSecrets[0]=registry-credentials",
    "--set-json",
    r#"controller.serviceAccount.annotations={"iam.gke.io/gcp-service-account":"nova-operator@example.iam.gserviceaccount.com"}"#,
    "--set-json",
    r#"webhook.serviceAccount.annotations={"eks.amazonaws.com/role-arn":"arn:aws:iam::123456789012:role/nova-webhook"}"#,
    "--set",
    "openshift=true",
    "--set",
    "networkPolicy.enabled=true",
    "--set-json",
    r#"networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]"#,
    "--set-json",
    r#"networkPolicy.webhook.ingressFrom=[{"ipBlock":{"cidr":"10.0.0.0/8"}}]"#,
    "--set-json",
    r#"networkPolicy.egress=[{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]},{"ports":[{"port":443,"protocol":"TCP"},{"port":6443,"protocol":"TCP"}]}]"#,
];

const NAMESPACE: &str = "nova-system";

/// A helm home of its own, so helm never reads or writes the user's.
pub(crate) fn home() -> tempfile::TempDir {
    tempfile::tempdir().expect("helm home")
}

fn render(extra: &[&str]) -> Vec<Value> {
    let text = helm::template(home().path(), NAMESPACE, extra).expect("helm template");
    documents(&text)
}

/// The documents of a rendering, empty ones left out.
pub(crate) fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .expect("the rendering is YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The document of `kind` named `name`.
pub(crate) fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendering"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The (group, resource) pairs a set of rules grants `verb` on.
fn granted(rules: &Value, verb: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for rule in rules.as_array().into_iter().flatten() {
        if !strings(&rule["verbs"]).iter().any(|v| v == verb) {
            continue;
        }
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                out.insert((group.clone(), resource));
            }
        }
    }
    out
}

/// What the controller's code touches beyond the registered kinds: its own CR (status,
/// finalizer, owner references), events, Job pods, the leader Lease, the pools' Hypervisors
/// (read live and patched by the Traits step), its two CRDs (their schema digest read at
/// start).
fn extra_resources() -> BTreeSet<(String, String)> {
    [
        ("nova.openstack.c5c3.io", "novas"),
        ("nova.openstack.c5c3.io", "novas/status"),
        ("nova.openstack.c5c3.io", "novas/finalizers"),
        ("nova.openstack.c5c3.io", "novacomputes"),
        ("nova.openstack.c5c3.io", "novacomputes/status"),
        ("nova.openstack.c5c3.io", "novacomputes/finalizers"),
        ("events.k8s.io", "events"),
        ("", "pods"),
        ("coordination.k8s.io", "leases"),
        ("kvm.cloud.sap", "hypervisors"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    ]
    .into_iter()
    .map(|(g, r)| (g.to_owned(), r.to_owned()))
    .collect()
}

/// A (group, resource) pair, as RBAC names a kind.
type Kind = (String, String);

/// Every kind both controllers register, split by scope.
fn registered() -> (BTreeSet<Kind>, BTreeSet<Kind>) {
    let (mut namespaced, mut cluster) = (BTreeSet::new(), BTreeSet::new());
    for spec in nova::controller::kinds()
        .into_iter()
        .chain(novacompute::controller::kinds())
    {
        let key = (spec.resource.group.clone(), spec.resource.plural.clone());
        if spec.cluster_scoped {
            cluster.insert(key);
        } else {
            namespaced.insert(key);
        }
    }
    (namespaced, cluster)
}

#[test]
fn the_chart_lints_with_every_value_set() {
    let chart = helm::chart_dir().display().to_string();
    for (name, extra) in VALUE_SETS {
        let mut args = vec!["lint", "--strict", chart.as_str()];
        args.extend_from_slice(extra);
        let out = helm::run(home().path(), &args).expect("helm");
        assert!(
            out.success,
            "helm lint ({name}) failed:\n{}{}",
            out.stdout, out.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_value_set_passes_a_server_side_dry_run() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    // cert-manager's and the Prometheus operator's CRDs, which only the chart's optional
    // objects need (tests/crds/chart, collected from their modules).
    let extra = nova_test_harness::crd_files(&[
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/crds/chart")
    ])
    .expect("chart CRDs");
    assert!(!extra.is_empty(), "tests/crds/chart holds the CRDs");
    nova_test_harness::install_crds(
        &cp.client().expect("client"),
        &extra,
        std::time::Duration::from_secs(60),
    )
    .await
    .expect("install the chart's CRDs");
    for (name, extra) in VALUE_SETS {
        let ns = cp.namespace("chart").await.expect("namespace");
        // Without the `helm test` hooks: a dry run stores nothing, so the test pod's
        // ServiceAccount would not exist for its admission; `real_chart` runs `helm test`.
        let mut args = extra.to_vec();
        args.push("--no-hooks");
        let text = helm::template(home().path(), &ns, &args).expect("helm template");
        let served = documents(&text);
        let stream: String = served
            .iter()
            .map(|d| format!("---\n{}\n", serde_json::to_string(d).expect("json")))
            .collect();
        let out = kubectl(cp, &["apply", "--dry-run=server", "-f", "-"], &stream);
        assert!(
            out.status.success(),
            "dry-run of the {name} rendering failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let applied = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            applied.lines().count(),
            served.len(),
            "{name}: every document was accepted:\n{applied}"
        );
    }
}

#[test]
fn no_rule_has_a_wildcard() {
    for (name, extra) in VALUE_SETS {
        for doc in render(extra) {
            if !matches!(doc["kind"].as_str(), Some("Role" | "ClusterRole")) {
                continue;
            }
            for rule in doc["rules"].as_array().into_iter().flatten() {
                for field in ["apiGroups", "resources", "verbs"] {
                    assert!(
                        !strings(&rule[field]).iter().any(|s| s.contains('*')),
                        "{name}: {} {} has a wildcard in {field}",
                        doc["kind"],
                        doc["metadata"]["name"]
                    );
                }
            }
        }
    }
}

#[test]
fn the_controller_role_covers_exactly_the_kinds_the_code_registers() {
    let (namespaced, cluster) = registered();
    let read = |rules: &Value| {
        let get = granted(rules, "get");
        let list = granted(rules, "list");
        let watch = granted(rules, "watch");
        get.intersection(&list)
            .filter(|k| watch.contains(k))
            .cloned()
            .collect::<BTreeSet<_>>()
    };
    let every = |rules: &Value| {
        rules
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| {
                let groups = strings(&r["apiGroups"]);
                strings(&r["resources"])
                    .into_iter()
                    .flat_map(move |res| groups.clone().into_iter().map(move |g| (g, res.clone())))
            })
            .collect::<BTreeSet<_>>()
    };

    let docs = render(&[]);
    let role = &find(&docs, "ClusterRole", "nova-operator-controller")["rules"];
    let readable = read(role);
    for kind in namespaced.iter().chain(&cluster) {
        assert!(
            readable.contains(kind),
            "no get/list/watch rule for {kind:?}"
        );
    }
    let allowed: BTreeSet<_> = namespaced
        .iter()
        .chain(&cluster)
        .cloned()
        .chain(extra_resources())
        .collect();
    for kind in every(role) {
        assert!(
            allowed.contains(&kind),
            "the ClusterRole grants {kind:?}, which the code never registers or touches"
        );
    }

    // The namespace scope: the same rules as a Role in the watched namespace, without the
    // cluster-scoped kinds, and no ClusterRole for the controller.
    let docs = render(&["--set", "rbac.scope=namespace"]);
    let role = find(&docs, "Role", "nova-operator-controller");
    assert_eq!(role["metadata"]["namespace"], NAMESPACE);
    let readable = read(&role["rules"]);
    for kind in &namespaced {
        assert!(
            readable.contains(kind),
            "namespaced: no read rule for {kind:?}"
        );
    }
    for kind in &cluster {
        assert!(
            !every(&role["rules"]).contains(kind),
            "namespaced: {kind:?} is cluster-scoped"
        );
    }
    assert!(
        !docs
            .iter()
            .any(|d| d["kind"] == "ClusterRole"
                && d["metadata"]["name"] == "nova-operator-controller"),
        "the namespace scope renders no ClusterRole for the controller"
    );
    // The pools' Nodes are still read, live: get and list cluster-wide, never watch; their
    // Hypervisors read and patched; the two CRDs read by name.
    let nodes = &find(&docs, "ClusterRole", "nova-operator-controller-nodes")["rules"];
    let node = (String::new(), "nodes".to_owned());
    assert!(granted(nodes, "get").contains(&node) && granted(nodes, "list").contains(&node));
    assert!(
        !granted(nodes, "watch").contains(&node),
        "no Node informer in this scope"
    );
    let hypervisor = ("kvm.cloud.sap".to_owned(), "hypervisors".to_owned());
    assert!(
        granted(nodes, "get").contains(&hypervisor)
            && granted(nodes, "patch").contains(&hypervisor),
        "the Traits step reads and patches the pools' Hypervisors in this scope too"
    );
    let crd = (
        "apiextensions.k8s.io".to_owned(),
        "customresourcedefinitions".to_owned(),
    );
    assert!(
        granted(nodes, "get").contains(&crd),
        "the CRD check in this scope too"
    );
    assert_eq!(every(nodes), BTreeSet::from([node, hypervisor, crd]));
    let deployment = find(&docs, "Deployment", "nova-operator-controller");
    let args = strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(args.contains(&format!("--namespace={NAMESPACE}")));
    assert!(
        args.contains(&"--clusters-namespace=".to_owned()),
        "the registration Secrets live outside the watched namespace: target clusters are off"
    );

    // The Lease is a Role in the release namespace in both scopes; the lease loop writes it by
    // update at the resourceVersion it read.
    let lease = find(&docs, "Role", "nova-operator-controller-leader-election");
    assert!(
        granted(&lease["rules"], "update")
            .contains(&("coordination.k8s.io".into(), "leases".into()))
    );
}

/// What the code writes, derived from the code: every kind the pipeline applies for the sample
/// Nova (an offline run of the same plans) may be created and patched, and no kind the handle
/// caches metadata-only (which its apply refuses) may be.
#[tokio::test]
async fn the_controller_may_write_exactly_the_kinds_the_pipeline_applies() {
    let nova = nova_controller::offline::read_nova(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/nova.yaml"),
    )
    .expect("sample");
    let rendered = nova_controller::offline::render(nova.clone(), Default::default())
        .await
        .expect("render");
    let pool = nova_controller::offline::read_pool(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/novacompute.yaml"),
    )
    .expect("sample pool");
    let pool = nova_controller::offline::render_pool(pool, nova, Default::default())
        .await
        .expect("render the pool");
    let kinds: Vec<_> = nova::controller::kinds()
        .into_iter()
        .chain(novacompute::controller::kinds())
        .collect();
    let plural = |object: &Value| -> Kind {
        let (api_version, kind) = (object["apiVersion"].as_str(), object["kind"].as_str());
        let spec = kinds
            .iter()
            .find(|k| {
                Some(k.resource.api_version.as_str()) == api_version
                    && Some(k.resource.kind.as_str()) == kind
            })
            .unwrap_or_else(|| {
                panic!(
                    "the pipeline applies {api_version:?} {kind:?}, which kinds() does not register"
                )
            });
        (spec.resource.group.clone(), spec.resource.plural.clone())
    };
    let applied: BTreeSet<Kind> = rendered
        .objects
        .iter()
        .chain(&pool.objects)
        .map(plural)
        .collect();
    assert!(
        applied.len() >= 4,
        "the sample renders children: {applied:?}"
    );

    let docs = render(&[]);
    let role = &find(&docs, "ClusterRole", "nova-operator-controller")["rules"];
    let writable: BTreeSet<Kind> = granted(role, "create")
        .intersection(&granted(role, "patch"))
        .cloned()
        .collect();
    for kind in &applied {
        assert!(
            writable.contains(kind),
            "the pipeline applies {kind:?}: the rules need create and patch"
        );
    }
    for spec in kinds.iter().filter(|k| k.caching == Caching::Metadata) {
        let kind = (spec.resource.group.clone(), spec.resource.plural.clone());
        assert!(
            !granted(role, "create").contains(&kind) && !granted(role, "patch").contains(&kind),
            "{kind:?} is cached metadata-only, so the handle never applies it: no create or patch"
        );
    }
}

#[test]
fn the_webhook_reads_priority_classes_and_novas_only() {
    let docs = render(&[]);
    let role = &find(&docs, "ClusterRole", "nova-operator-webhook")["rules"];
    assert_eq!(
        serde_json::to_value(role).expect("json"),
        serde_json::json!([
            {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get"]},
            {"apiGroups": ["nova.openstack.c5c3.io"], "resources": ["novas"], "verbs": ["list"]},
            {"apiGroups": ["nova.openstack.c5c3.io"], "resources": ["novas"], "verbs": ["get"]}
        ])
    );
}

#[test]
fn the_webhook_configurations_carry_the_four_paths_and_no_ca_bundle() {
    let docs = render(&[]);
    let mut paths = BTreeMap::new();
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        for hook in find(&docs, kind, "nova-operator")["webhooks"]
            .as_array()
            .expect("webhooks")
        {
            let config = &hook["clientConfig"];
            assert!(
                config.get("caBundle").is_none(),
                "{}: the caBundle is injected, never rendered",
                hook["name"]
            );
            assert_eq!(config["service"]["name"], "nova-operator-webhook");
            assert_eq!(config["service"]["port"], 443);
            assert_eq!(hook["failurePolicy"], "Fail");
            assert_eq!(hook["sideEffects"], "None");
            assert_eq!(hook["admissionReviewVersions"], serde_json::json!(["v1"]));
            assert_eq!(hook["timeoutSeconds"], 10);
            assert_eq!(
                hook["rules"][0]["operations"],
                serde_json::json!(["CREATE", "UPDATE"])
            );
            paths.insert(
                hook["name"].as_str().expect("name").to_owned(),
                config["service"]["path"].as_str().expect("path").to_owned(),
            );
        }
    }
    let want: BTreeMap<String, String> = [
        (
            "mnova.kb.io",
            "/mutate-nova-openstack-c5c3-io-v1alpha1-nova",
        ),
        (
            "mnovacompute.kb.io",
            "/mutate-nova-openstack-c5c3-io-v1alpha1-novacompute",
        ),
        (
            "vnova.kb.io",
            "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
        ),
        (
            "vnovacompute.kb.io",
            "/validate-nova-openstack-c5c3-io-v1alpha1-novacompute",
        ),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(paths, want);

    // In every value set, every webhook is called only for a CREATE or an UPDATE that may
    // change the spec (webhook/README.md, "What skips admission"): the exact CEL is pinned.
    let (condition, expression) = nova_test_harness::local_webhook::ADMISSION_MATCH_CONDITION;
    let conditions = serde_json::json!([{"name": condition, "expression": expression}]);
    for (name, extra) in VALUE_SETS {
        let docs = render(extra);
        for kind in [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ] {
            let hooks = find(&docs, kind, "nova-operator")["webhooks"]
                .as_array()
                .expect("webhooks");
            assert_eq!(hooks.len(), 2, "{name}: {kind} has a webhook per kind");
            for hook in hooks {
                assert_eq!(
                    hook["matchConditions"], conditions,
                    "{name}: {kind} {}",
                    hook["name"]
                );
            }
        }
    }

    // With cert-manager: the CA injected from the Certificate.
    let docs = render(&["--set", "webhook.certificate.certManager.enabled=true"]);
    assert!(!docs.iter().any(|d| d["kind"] == "Secret"));
    let mutating = find(&docs, "MutatingWebhookConfiguration", "nova-operator");
    assert_eq!(
        mutating["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!("{NAMESPACE}/nova-operator-webhook")
    );
    let certificate = find(&docs, "Certificate", "nova-operator-webhook");
    assert_eq!(
        certificate["spec"]["secretName"],
        "nova-operator-webhook-tls"
    );
    assert_eq!(
        certificate["spec"]["dnsNames"][0],
        format!("nova-operator-webhook.{NAMESPACE}.svc")
    );
}

/// Every document but the named Deployment.
fn without(docs: Vec<Value>, deployment: &str) -> Vec<Value> {
    docs.into_iter()
        .filter(|d| !(d["kind"] == "Deployment" && d["metadata"]["name"] == deployment))
        .collect()
}

/// The webhook container of a rendering.
fn webhook_container(docs: &[Value]) -> &Value {
    &find(docs, "Deployment", "nova-operator-webhook")["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn self_signed_mode_renders_the_same_every_time_and_grants_one_secret_and_two_configurations() {
    // Nothing generated: two renders of every value set are identical (GitOps-stable).
    for (name, extra) in VALUE_SETS {
        let once = helm::template(home().path(), NAMESPACE, extra).expect("helm template");
        let twice = helm::template(home().path(), NAMESPACE, extra).expect("helm template");
        assert_eq!(once, twice, "{name}: two renders differ");
    }
    let docs = render(&[]);
    assert!(
        !docs.iter().any(|d| d["kind"] == "Secret"),
        "the webhook creates its Secret"
    );
    let container = webhook_container(&docs);
    let args = strings(&container["args"]);
    for flag in [
        "--self-signed-secret=nova-operator-webhook-tls",
        "--webhook-configuration=nova-operator",
        "--certificate-names=nova-operator-webhook,nova-operator-webhook.nova-system,nova-operator-webhook.nova-system.svc,nova-operator-webhook.nova-system.svc.cluster.local",
        "--ca-validity-seconds=31536000",
        "--certificate-validity-seconds=7776000",
        "--certificate-sync-seconds=15",
    ] {
        assert!(args.contains(&flag.to_owned()), "{flag} in {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--tls-")), "{args:?}");
    assert_eq!(
        container["volumeMounts"],
        serde_json::json!([{"name": "logging", "mountPath": "/etc/nova-webhook/logging", "readOnly": true}]),
        "no certificate mount: the webhook reads its Secret itself"
    );
    assert_eq!(
        container["env"][0],
        serde_json::json!({"name": "NOVA_WEBHOOK_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
    );
    assert_eq!(
        find(&docs, "Role", "nova-operator-webhook-certificate")["rules"],
        serde_json::json!([
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["nova-operator-webhook-tls"], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}
        ])
    );
    assert_eq!(
        find(&docs, "ClusterRole", "nova-operator-webhook-ca-injection")["rules"],
        serde_json::json!([
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"], "resourceNames": ["nova-operator"], "verbs": ["get", "patch"]}
        ])
    );
    let binding = find(&docs, "RoleBinding", "nova-operator-webhook-certificate");
    assert_eq!(binding["subjects"][0]["name"], "nova-operator-webhook");

    // With cert-manager: the mounted Secret, no certificate RBAC, a CA that keeps its key.
    let docs = render(&["--set", "webhook.certificate.certManager.enabled=true"]);
    let args = strings(&webhook_container(&docs)["args"]);
    assert!(args.contains(&"--tls-cert-file=/tls/tls.crt".to_owned()));
    assert!(!args.iter().any(|a| a.starts_with("--self-signed")));
    assert!(
        !docs
            .iter()
            .any(|d| d["metadata"]["name"] == "nova-operator-webhook-certificate")
    );
    assert!(
        !docs
            .iter()
            .any(|d| d["metadata"]["name"] == "nova-operator-webhook-ca-injection")
    );
    assert_eq!(
        find(&docs, "Certificate", "nova-operator-webhook-ca")["spec"]["privateKey"]["rotationPolicy"],
        "Never"
    );

    // Lives that do not work together are refused at render.
    let out = helm::run(
        home().path(),
        &[
            "template",
            "nova-operator",
            &helm::chart_dir().display().to_string(),
            "--set",
            "webhook.certificate.selfSigned.caValidityDays=100",
        ],
    )
    .expect("helm");
    assert!(
        !out.success && out.stderr.contains("three times"),
        "{}",
        out.stderr
    );
}

#[test]
fn changing_one_binary_leaves_the_other_untouched() {
    let base = render(&[]);
    let webhook = render(&["--set", "webhook.replicas=5"]);
    assert_eq!(
        find(&webhook, "Deployment", "nova-operator-webhook")["spec"]["replicas"],
        5
    );
    assert_eq!(
        without(base.clone(), "nova-operator-webhook"),
        without(webhook, "nova-operator-webhook"),
        "webhook.replicas changes only the webhook Deployment"
    );
    let controller = render(&[
        "--set",
        "controller.replicas=2",
        "--set",
        "controller.podDisruptionBudget.enabled=false",
    ]);
    assert_eq!(
        without(base, "nova-operator-controller"),
        without(controller, "nova-operator-controller"),
        "controller.replicas changes only the controller Deployment"
    );
}

#[test]
fn both_deployments_are_hardened_and_probed() {
    for (name, extra) in VALUE_SETS {
        let docs = render(extra);
        for deployment in ["nova-operator-controller", "nova-operator-webhook"] {
            let pod = &find(&docs, "Deployment", deployment)["spec"]["template"]["spec"];
            assert_eq!(
                pod["securityContext"]["runAsNonRoot"], true,
                "{name} {deployment}"
            );
            let c = &pod["containers"][0];
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{name} {deployment}");
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{name} {deployment}");
            assert_eq!(sc["runAsNonRoot"], true, "{name} {deployment}");
            assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
            assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
            assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
            assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
            assert_eq!(
                pod["serviceAccountName"], deployment,
                "each binary runs under its own ServiceAccount"
            );
        }
        let controller = find(&docs, "Deployment", "nova-operator-controller");
        assert!(
            strings(&controller["spec"]["template"]["spec"]["containers"][0]["args"])
                .contains(&"--leader-elect=true".to_owned())
        );
        let pdbs: Vec<&Value> = docs
            .iter()
            .filter(|d| d["kind"] == "PodDisruptionBudget")
            .collect();
        let expected = if *name == "ha" { 2 } else { 1 };
        assert_eq!(
            pdbs.len(),
            expected,
            "{name}: a PDB per component with more than one replica"
        );
    }
}

#[test]
fn the_schema_rejects_unknown_and_mistyped_values() {
    for (set, field) in [
        ("controller.replica=2", "replica"),
        ("webhook.replicas=two", "replicas"),
        ("rbac.scope=everywhere", "scope"),
        ("metrics.dashbord.enabled=true", "dashbord"),
        ("controller.image.digest=sha256:abc", "digest"),
        ("webhook.extraArgs=--verbose", "extraArgs"),
        ("openshift=yes", "openshift"),
        ("controller.podSecurityContext.runAsUsr=0", "runAsUsr"),
        ("networkPolicy.enable=true", "enable"),
    ] {
        let err = helm::template(home().path(), NAMESPACE, &["--set", set])
            .expect_err(&format!("{set} must be rejected"))
            .to_string();
        assert!(err.contains(field), "{set}: the error names {field}: {err}");
    }
}

/// The CRDs a rendering holds, by name.
fn rendered_crds(docs: &[Value]) -> BTreeMap<String, Value> {
    docs.iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .map(|d| {
            (
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                d.clone(),
            )
        })
        .collect()
}

/// The chart renders exactly the generated CRDs (crdgen writes its templates) with the chart's
/// labels and, by default, the keep policy; `crds.keep=false` drops the policy and
/// `crds.enabled=false` the CRDs.
#[test]
fn the_chart_renders_the_generated_crds_kept_on_uninstall() {
    let generated: BTreeMap<String, Value> = nova_api::crd::all()
        .iter()
        .map(|(_, crd)| {
            let value = serde_json::to_value(crd).expect("json");
            (crd.metadata.name.clone().unwrap_or_default(), value)
        })
        .collect();
    let rendered = rendered_crds(&render(&[]));
    assert_eq!(
        rendered.keys().collect::<Vec<_>>(),
        generated.keys().collect::<Vec<_>>()
    );
    for (name, mut crd) in rendered {
        let metadata = crd["metadata"].as_object_mut().expect("metadata");
        let labels = metadata.remove("labels").unwrap_or_default();
        assert_eq!(
            labels["app.kubernetes.io/managed-by"], "Helm",
            "{name}: {labels}"
        );
        let annotations = metadata["annotations"]
            .as_object_mut()
            .expect("annotations");
        assert_eq!(
            annotations.remove("helm.sh/resource-policy"),
            Some("keep".into()),
            "{name} is kept"
        );
        assert!(
            crd == generated[&name],
            "{name}: the chart's template differs from the generated CRD: run `cargo run -p nova-api --bin crdgen`"
        );
    }
    for crd in rendered_crds(&render(&["--set", "crds.keep=false"])).values() {
        assert!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"].is_null(),
            "{crd}"
        );
    }
    assert!(rendered_crds(&render(&["--set", "crds.enabled=false"])).is_empty());
}

/// Every metric family either binary registers (a sample of each is recorded so an unlabelled
/// vector shows up), with the series suffixes of histograms.
fn exported_series() -> BTreeSet<String> {
    let controller = nova_controller::metrics::Metrics::new().expect("metrics");
    controller
        .reconcile_duration
        .with_label_values(&["x"])
        .observe(0.0);
    controller
        .reconcile_errors
        .with_label_values(&["x", "y"])
        .inc();
    controller.db_sync.record("ns", "x", true, 1.0);
    controller.db_archive.record("ns", "x", false, 1.0);
    controller.nova_ready.with_label_values(&["x", "ns"]).set(1);
    controller.report_pool("ns", "x", &[]);
    controller
        .crd_schema_current
        .with_label_values(&["novas.nova.openstack.c5c3.io"])
        .set(1);
    controller
        .openstack_requests
        .observe("keystone", "POST", Some(201), 0.1);
    controller
        .pass_deadline_exceeded
        .with_label_values(&["Nova"])
        .inc();
    let webhook = nova_webhook::metrics::Metrics::new().expect("metrics");
    webhook.observe("x", "CREATE", "allowed", 0.0);
    webhook.rejected(nova_webhook::metrics::Rejected::Connection);
    let text = controller.render() + &webhook.render();
    // The target clusters' series exist only beside a fleet: their descriptions name them.
    let fleet = TargetClusterAvailability::new(std::sync::Weak::new()).expect("series");
    let targets = fleet.desc().into_iter().map(|d| d.fq_name.clone());
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .chain(targets)
        .collect()
}

fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("nova_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The per-Nova series carry the Nova's namespace in `namespace`, which the alerts name: both
/// ServiceMonitors honour the scraped labels, so Prometheus keeps it.
#[test]
fn the_service_monitors_keep_the_novas_namespace_label() {
    let docs = render(&["--set", "metrics.serviceMonitor.enabled=true"]);
    for component in ["controller", "webhook"] {
        let monitor = find(
            &docs,
            "ServiceMonitor",
            &format!("nova-operator-{component}"),
        );
        assert_eq!(
            monitor["spec"]["endpoints"][0]["honorLabels"],
            Value::Bool(true),
            "{component}: {monitor}"
        );
    }
    let series = nova_controller::metrics::Metrics::new().expect("metrics");
    series
        .nova_ready
        .with_label_values(&["nova", "openstack"])
        .set(1);
    assert!(
        series
            .render()
            .contains(r#"nova_operator_nova_ready{namespace="openstack",nova="nova"} 1"#),
        "the Nova's namespace is the series' `namespace` label"
    );
}

#[test]
fn the_dashboard_and_the_alerts_use_only_exported_metrics() {
    let exported = exported_series();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(helm::chart_dir().join("dashboards/nova-operator.json"))
            .expect("dashboard"),
    )
    .expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "nova-operator");
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            exprs.push(target["expr"].as_str().expect("expr").to_owned());
        }
    }
    let alerts: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(helm::chart_dir().join("files/alerts.yaml")).expect("alerts"),
    )
    .expect("alerts YAML");
    for group in alerts["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            exprs.push(rule["expr"].as_str().expect("expr").to_owned());
        }
    }
    // What an SRE pages on and looks at is there: a Nova not Ready, failed db-sync and
    // archive runs, and the panels for each.
    let alert_names: BTreeSet<&str> = alerts["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str())
        .collect();
    for alert in [
        "NovaNotReady",
        "NovaDBSyncFailed",
        "NovaDBArchiveFailed",
        "NovaOperatorNoLeader",
    ] {
        assert!(alert_names.contains(alert), "{alert}: {alert_names:?}");
    }
    for metric in [
        "nova_operator_nova_ready",
        "nova_operator_db_sync_total",
        "nova_operator_db_sync_duration_seconds_bucket",
        "nova_operator_db_archive_total",
        "nova_operator_db_archive_duration_seconds_bucket",
    ] {
        assert!(
            exprs.iter().any(|e| metric_names(e).contains(metric)),
            "no panel or alert reads {metric}"
        );
    }
    for expr in &exprs {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{expr} names a metric");
        for name in names {
            assert!(
                exported.contains(&name),
                "{name} (in {expr}) is not exported: {exported:?}"
            );
        }
    }

    // The rendered ConfigMap carries the file unchanged.
    let docs = render(&[]);
    let cm = find(&docs, "ConfigMap", "nova-operator-dashboard");
    let carried: Value =
        serde_json::from_str(cm["data"]["nova-operator.json"].as_str().expect("json"))
            .expect("json");
    assert_eq!(carried, dashboard);
}

/// Every alert links its runbook, `<runbookBaseURL>/<alert>.md`, and that runbook is a file of
/// `docs/runbooks/`; every runbook there belongs to an alert.
#[test]
fn every_alert_links_a_runbook_that_exists() {
    let base = "https://runbooks.example.org/nova";
    let docs = render(&[
        "--set",
        "metrics.prometheusRule.enabled=true",
        "--set",
        &format!("metrics.prometheusRule.runbookBaseURL={base}/"),
    ]);
    let rule = find(&docs, "PrometheusRule", "nova-operator");
    let runbooks = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/runbooks");
    let mut linked = BTreeSet::new();
    for group in rule["spec"]["groups"].as_array().expect("groups") {
        for alert in group["rules"].as_array().expect("rules") {
            let name = alert["alert"].as_str().expect("alert");
            let url = alert["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_default();
            assert_eq!(url, format!("{base}/{name}.md"), "{name}");
            assert!(
                runbooks.join(format!("{name}.md")).is_file(),
                "docs/runbooks/{name}.md is missing"
            );
            linked.insert(format!("{name}.md"));
        }
    }
    let written: BTreeSet<String> = std::fs::read_dir(&runbooks)
        .expect("docs/runbooks")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|f| f != "README.md")
        .collect();
    assert_eq!(written, linked, "a runbook without its alert");
}

/// Each binary follows its log filter in a ConfigMap of its own, mounted where its
/// `--log-filter-file` points; `<binary>.logLevel` fills it, and no RUST_LOG competes with it.
#[test]
fn both_binaries_follow_their_log_filter_in_a_configmap() {
    for binary in ["controller", "webhook"] {
        let docs = render(&["--set", &format!("{binary}.logLevel=debug\\,kube=info")]);
        let config_map = format!("nova-operator-{binary}-logging");
        let config = find(&docs, "ConfigMap", &config_map);
        assert_eq!(config["data"]["filter"], "debug,kube=info", "{binary}");
        let pod = pod_spec(&docs, &format!("nova-operator-{binary}"));
        let container = &pod["containers"][0];
        let args = strings(&container["args"]);
        let file = args
            .iter()
            .find_map(|a| a.strip_prefix("--log-filter-file="))
            .expect("--log-filter-file");
        let logging = |list: &'static str, of: &Value| {
            of[list]
                .as_array()
                .into_iter()
                .flatten()
                .find(|entry| entry["name"] == "logging")
                .cloned()
                .unwrap_or_else(|| panic!("{binary}: no logging entry in {list}"))
        };
        let mount = logging("volumeMounts", container);
        assert_eq!(
            Some(file),
            mount["mountPath"]
                .as_str()
                .map(|dir| format!("{dir}/filter"))
                .as_deref(),
            "{binary}"
        );
        let volume = logging("volumes", pod);
        assert_eq!(volume["configMap"]["name"], config_map.as_str());
        assert!(
            !container["env"].to_string().contains("RUST_LOG"),
            "{binary}: the file is the one source of the filter"
        );
    }
}

/// The pod spec of one of the two Deployments.
fn pod_spec<'a>(docs: &'a [Value], deployment: &str) -> &'a Value {
    &find(docs, "Deployment", deployment)["spec"]["template"]["spec"]
}

/// A digest pins the image (`repository@digest`, the tag ignored); without one the reference
/// stays `repository:tag`.
#[test]
fn a_digest_pins_the_image() {
    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let docs = render(&[
        "--set",
        &format!("controller.image.digest={DIGEST}"),
        "--set",
        "controller.image.tag=9.9.9",
        "--set",
        "webhook.image.tag=9.9.9",
    ]);
    assert_eq!(
        pod_spec(&docs, "nova-operator-controller")["containers"][0]["image"],
        format!("localhost/nova-operator/nova-controller@{DIGEST}")
    );
    assert_eq!(
        pod_spec(&docs, "nova-operator-webhook")["containers"][0]["image"],
        "localhost/nova-operator/nova-webhook:9.9.9",
        "the webhook has no digest: its tag"
    );
    let docs = render(&[]);
    for (deployment, repository) in [
        (
            "nova-operator-controller",
            "localhost/nova-operator/nova-controller:",
        ),
        (
            "nova-operator-webhook",
            "localhost/nova-operator/nova-webhook:",
        ),
    ] {
        let image = pod_spec(&docs, deployment)["containers"][0]["image"]
            .as_str()
            .expect("image")
            .to_owned();
        assert!(
            image.starts_with(repository) && !image.contains('@'),
            "{deployment}: {image}"
        );
    }
}

/// extraArgs, extraEnv, extraVolumes and extraVolumeMounts come after what the chart renders
/// itself: the controller's logging ConfigMap and, with cert-manager, the webhook's
/// certificate stay first.
#[test]
fn extra_args_env_and_volumes_come_after_the_charts_own() {
    let extra = EXTENDED;
    let base = render(&[]);
    let docs = render(extra);

    // Arguments: the chart's own, unchanged, then the extra ones in their order.
    for (deployment, added) in [
        (
            "nova-operator-controller",
            vec!["--clusters-namespace=platform-clusters"],
        ),
        ("nova-operator-webhook", vec!["--max-connections=256"]),
    ] {
        let mut want = strings(&pod_spec(&base, deployment)["containers"][0]["args"]);
        assert!(!want.is_empty(), "{deployment} has arguments of its own");
        want.extend(added.into_iter().map(str::to_owned));
        assert_eq!(
            strings(&pod_spec(&docs, deployment)["containers"][0]["args"]),
            want,
            "{deployment}"
        );
    }

    // Environment: the chart's variables first.
    let controller = &pod_spec(&docs, "nova-operator-controller")["containers"][0];
    assert_eq!(
        controller["env"],
        serde_json::json!([
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "HTTPS_PROXY", "value": "http://proxy.example.org:3128"}
        ])
    );
    let webhook = &pod_spec(&docs, "nova-operator-webhook")["containers"][0];
    let names: Vec<&str> = webhook["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(names, ["NOVA_WEBHOOK_NAMESPACE", "TZ"]);

    // Volumes and mounts: the logging ConfigMap first.
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["name"].as_str().map(str::to_owned))
            .collect()
    };
    let pod = pod_spec(&docs, "nova-operator-controller");
    assert_eq!(names(&pod["volumes"]), ["logging", "ca-bundle"]);
    assert_eq!(
        pod["volumes"][1],
        serde_json::json!({"name": "ca-bundle", "configMap": {"name": "openstack-ca"}})
    );
    assert_eq!(names(&controller["volumeMounts"]), ["logging", "ca-bundle"]);
    assert_eq!(
        controller["volumeMounts"][1],
        serde_json::json!({"name": "ca-bundle", "mountPath": "/etc/nova-controller/ca", "readOnly": true})
    );
    // The self-signed webhook mounts only its logging ConfigMap of its own.
    assert_eq!(
        names(&pod_spec(&docs, "nova-operator-webhook")["volumes"]),
        ["logging", "tmp"]
    );
    assert_eq!(names(&webhook["volumeMounts"]), ["logging", "tmp"]);
    // With cert-manager its certificate comes after the logging ConfigMap.
    let mut with_cert_manager = extra.to_vec();
    with_cert_manager.extend(["--set", "webhook.certificate.certManager.enabled=true"]);
    let docs = render(&with_cert_manager);
    let pod = pod_spec(&docs, "nova-operator-webhook");
    assert_eq!(names(&pod["volumes"]), ["logging", "tls", "tmp"]);
    assert_eq!(
        names(&pod["containers"][0]["volumeMounts"]),
        ["logging", "tls", "tmp"]
    );
    assert_eq!(pod["containers"][0]["volumeMounts"][1]["mountPath"], "/tls");
}

/// Both pods pull with the top-level imagePullSecrets, given as names or as {name: ...}; none
/// by default.
#[test]
fn both_pods_pull_with_the_image_pull_secrets() {
    let docs = render(&[
        "--set-json",
        r#"imagePullSecrets=["registry-credentials",{"name":"mirror-credentials"}]"#,
    ]);
    for deployment in ["nova-operator-controller", "nova-operator-webhook"] {
        assert_eq!(
            pod_spec(&docs, deployment)["imagePullSecrets"],
            serde_json::json!([{"name": "registry-credentials"}, {"name": "mirror-credentials"}]),
            "{deployment}"
        );
    }
    let docs = render(&[]);
    for deployment in ["nova-operator-controller", "nova-operator-webhook"] {
        assert!(
            pod_spec(&docs, deployment)
                .get("imagePullSecrets")
                .is_none(),
            "{deployment}"
        );
    }
}

/// The security contexts default to the hardened ones; `openshift=true` leaves runAsUser and
/// runAsGroup out of the pod's (the restricted SCC assigns them) and keeps the rest.
#[test]
fn openshift_leaves_the_uid_and_gid_to_the_scc() {
    let hardened = serde_json::json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}
    });
    let base = render(&[]);
    let openshift = render(&["--set", "openshift=true"]);
    for deployment in ["nova-operator-controller", "nova-operator-webhook"] {
        assert_eq!(
            pod_spec(&base, deployment)["securityContext"],
            serde_json::json!({
                "runAsNonRoot": true,
                "runAsUser": 65532,
                "runAsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"}
            }),
            "{deployment}: the defaults"
        );
        assert_eq!(
            pod_spec(&openshift, deployment)["securityContext"],
            serde_json::json!({
                "runAsNonRoot": true,
                "seccompProfile": {"type": "RuntimeDefault"}
            }),
            "{deployment}: OpenShift assigns the UID and GID"
        );
        for docs in [&base, &openshift] {
            assert_eq!(
                pod_spec(docs, deployment)["containers"][0]["securityContext"],
                hardened,
                "{deployment}"
            );
        }
    }
    // A value is merged into the defaults; null drops a key.
    let docs = render(&[
        "--set",
        "controller.podSecurityContext.fsGroup=65532",
        "--set",
        "webhook.containerSecurityContext.readOnlyRootFilesystem=null",
    ]);
    let controller = &pod_spec(&docs, "nova-operator-controller")["securityContext"];
    assert_eq!(controller["fsGroup"], 65532);
    assert_eq!(controller["runAsUser"], 65532);
    let webhook = &pod_spec(&docs, "nova-operator-webhook")["containers"][0]["securityContext"];
    assert!(webhook.get("readOnlyRootFilesystem").is_none(), "{webhook}");
    assert_eq!(webhook["allowPrivilegeEscalation"], false);
}

/// `serviceAccount.create=false`: no ServiceAccount rendered, the pods run under the named
/// pre-created account and every binding names it, in both scopes. The created accounts carry
/// `serviceAccount.annotations`.
#[test]
fn a_pre_created_service_account_is_used_and_bound() {
    for scope in ["cluster", "namespace"] {
        let docs = render(&[
            "--set",
            &format!("rbac.scope={scope}"),
            "--set",
            "controller.serviceAccount.create=false",
            "--set",
            "controller.serviceAccount.name=platform-nova-controller",
            "--set",
            "webhook.serviceAccount.create=false",
            "--set",
            "webhook.serviceAccount.name=platform-nova-webhook",
        ]);
        assert!(
            !docs.iter().any(|d| d["kind"] == "ServiceAccount"
                && d["metadata"]["annotations"]["helm.sh/hook"].is_null()),
            "{scope}: the accounts are pre-created (only `helm test` makes one of its own)"
        );
        for component in ["controller", "webhook"] {
            assert_eq!(
                pod_spec(&docs, &format!("nova-operator-{component}"))["serviceAccountName"],
                format!("platform-nova-{component}"),
                "{scope}"
            );
        }
        let mut bound = BTreeSet::new();
        // The release's bindings (`helm test` binds its own account).
        for binding in docs.iter().filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("RoleBinding" | "ClusterRoleBinding")
            ) && d["metadata"]["annotations"]["helm.sh/hook"].is_null()
        }) {
            let component = binding["metadata"]["labels"]["app.kubernetes.io/component"]
                .as_str()
                .unwrap_or_default();
            for subject in binding["subjects"].as_array().expect("subjects") {
                assert_eq!(subject["kind"], "ServiceAccount");
                assert_eq!(subject["namespace"], NAMESPACE);
                assert_eq!(
                    subject["name"],
                    format!("platform-nova-{component}"),
                    "{scope}: {} {}",
                    binding["kind"],
                    binding["metadata"]["name"]
                );
                bound.insert(subject["name"].as_str().unwrap_or_default().to_owned());
            }
        }
        assert_eq!(
            bound,
            BTreeSet::from([
                "platform-nova-controller".to_owned(),
                "platform-nova-webhook".to_owned()
            ]),
            "{scope}: both accounts are bound"
        );
    }

    // create=false without a name is refused at render.
    let err = helm::template(
        home().path(),
        NAMESPACE,
        &["--set", "webhook.serviceAccount.create=false"],
    )
    .expect_err("a pre-created account needs its name")
    .to_string();
    assert!(err.contains("webhook.serviceAccount.name"), "{err}");

    // Workload identity: the annotations on the account the chart creates.
    let docs = render(&[
        "--set-json",
        r#"controller.serviceAccount.annotations={"iam.gke.io/gcp-service-account":"nova-operator@example.iam.gserviceaccount.com"}"#,
    ]);
    assert_eq!(
        find(&docs, "ServiceAccount", "nova-operator-controller")["metadata"]["annotations"],
        serde_json::json!({"iam.gke.io/gcp-service-account": "nova-operator@example.iam.gserviceaccount.com"})
    );
    assert!(
        find(&docs, "ServiceAccount", "nova-operator-webhook")["metadata"]
            .get("annotations")
            .is_none()
    );
}

/// `<fullname>-view` and `<fullname>-edit` aggregate into Kubernetes' view, edit and admin, in
/// both scopes, and grant only the two kinds: view reads, edit also writes.
#[test]
fn the_aggregated_roles_carry_the_labels_and_only_the_two_kinds() {
    let kinds: BTreeSet<Kind> = ["novas", "novacomputes"]
        .into_iter()
        .map(|r| ("nova.openstack.c5c3.io".to_owned(), r.to_owned()))
        .collect();
    let read = ["get", "list", "watch"];
    let write = ["create", "update", "patch", "delete", "deletecollection"];
    let aggregation = |role: &Value| -> BTreeSet<String> {
        role["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("rbac.authorization.k8s.io/aggregate-to-"))
            .map(|(k, v)| {
                assert_eq!(v.as_str(), Some("true"), "{k}");
                k.clone()
            })
            .collect()
    };
    for scope in ["cluster", "namespace"] {
        let docs = render(&["--set", &format!("rbac.scope={scope}")]);
        let view = find(&docs, "ClusterRole", "nova-operator-view");
        let edit = find(&docs, "ClusterRole", "nova-operator-edit");
        assert_eq!(
            aggregation(view),
            BTreeSet::from(["rbac.authorization.k8s.io/aggregate-to-view".to_owned()]),
            "{scope}"
        );
        assert_eq!(
            aggregation(edit),
            BTreeSet::from([
                "rbac.authorization.k8s.io/aggregate-to-edit".to_owned(),
                "rbac.authorization.k8s.io/aggregate-to-admin".to_owned()
            ]),
            "{scope}"
        );
        for verb in read {
            assert_eq!(granted(&view["rules"], verb), kinds, "{scope}: view {verb}");
            assert_eq!(granted(&edit["rules"], verb), kinds, "{scope}: edit {verb}");
        }
        for verb in write {
            assert!(
                granted(&view["rules"], verb).is_empty(),
                "{scope}: view may not {verb}"
            );
            assert_eq!(granted(&edit["rules"], verb), kinds, "{scope}: edit {verb}");
        }
        // Nothing beyond the two kinds (no status, no finalizers) and these verbs.
        for role in [view, edit] {
            for rule in role["rules"].as_array().expect("rules") {
                assert_eq!(strings(&rule["apiGroups"]), ["nova.openstack.c5c3.io"]);
                for resource in strings(&rule["resources"]) {
                    assert!(
                        ["novas", "novacomputes"].contains(&resource.as_str()),
                        "{scope}: {resource}"
                    );
                }
                for verb in strings(&rule["verbs"]) {
                    assert!(
                        read.contains(&verb.as_str()) || write.contains(&verb.as_str()),
                        "{scope}: {verb}"
                    );
                }
                assert!(rule.get("resourceNames").is_none());
            }
        }
    }
    let docs = render(&["--set", "rbac.aggregateToDefaultRoles=false"]);
    assert!(
        !docs.iter().any(|d| {
            d["metadata"]["name"] == "nova-operator-view"
                || d["metadata"]["name"] == "nova-operator-edit"
        }),
        "rbac.aggregateToDefaultRoles=false renders neither"
    );
}

/// networkPolicy.enabled: a NetworkPolicy per binary selecting exactly its pods, ingress on
/// its container ports only (the controller's metrics and health, the webhook's admission
/// and metrics) from anywhere by default, egress open; the peers and egress rules given are
/// placed where they belong.
#[test]
fn the_network_policies_select_each_binarys_pods_and_open_its_ports() {
    assert!(
        !render(&[]).iter().any(|d| d["kind"] == "NetworkPolicy"),
        "off by default"
    );
    let docs = render(&[
        "--set",
        "networkPolicy.enabled=true",
        "--set",
        "controller.metricsPort=9090",
        "--set",
        "webhook.port=10443",
    ]);
    for (deployment, want) in [
        ("nova-operator-controller", [9090_i64, 8081]),
        ("nova-operator-webhook", [10443, 8080]),
    ] {
        let policy = &find(&docs, "NetworkPolicy", deployment)["spec"];
        let selected = &find(&docs, "Deployment", deployment)["spec"]["selector"]["matchLabels"];
        assert_eq!(
            policy["podSelector"]["matchLabels"], *selected,
            "{deployment}"
        );
        assert_eq!(
            policy["policyTypes"],
            serde_json::json!(["Ingress"]),
            "{deployment}: egress stays open"
        );
        assert!(policy.get("egress").is_none(), "{deployment}");
        let ingress = policy["ingress"].as_array().expect("ingress");
        assert!(
            ingress.iter().all(|rule| rule.get("from").is_none()),
            "{deployment}: from anywhere by default"
        );
        let opened: Vec<Value> = ingress
            .iter()
            .flat_map(|rule| rule["ports"].as_array().into_iter().flatten())
            .map(|port| {
                assert_eq!(port["protocol"], "TCP", "{deployment}");
                port["port"].clone()
            })
            .collect();
        let served: Vec<Value> = pod_spec(&docs, deployment)["containers"][0]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .map(|port| port["containerPort"].clone())
            .collect();
        assert_eq!(
            opened, served,
            "{deployment}: the container's ports, no other"
        );
        assert_eq!(opened, want.map(Value::from), "{deployment}");
    }

    let monitoring = serde_json::json!([
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]);
    let api_server = serde_json::json!([{"ipBlock": {"cidr": "10.0.0.0/8"}}]);
    let dns = serde_json::json!([{"ports": [{"port": 53, "protocol": "UDP"}]}]);
    let docs = render(&[
        "--set",
        "networkPolicy.enabled=true",
        "--set-json",
        &format!("networkPolicy.metricsFrom={monitoring}"),
        "--set-json",
        &format!("networkPolicy.webhook.ingressFrom={api_server}"),
        "--set-json",
        &format!("networkPolicy.egress={dns}"),
    ]);
    let controller = &find(&docs, "NetworkPolicy", "nova-operator-controller")["spec"];
    assert_eq!(controller["ingress"][0]["ports"][0]["port"], 8080);
    assert_eq!(controller["ingress"][0]["from"], monitoring, "metrics");
    assert_eq!(controller["ingress"][1]["ports"][0]["port"], 8081);
    assert!(
        controller["ingress"][1].get("from").is_none(),
        "health: the kubelet's probes"
    );
    let webhook = &find(&docs, "NetworkPolicy", "nova-operator-webhook")["spec"];
    assert_eq!(webhook["ingress"][0]["ports"][0]["port"], 9443);
    assert_eq!(webhook["ingress"][0]["from"], api_server, "admission");
    assert_eq!(webhook["ingress"][1]["ports"][0]["port"], 8080);
    assert_eq!(webhook["ingress"][1]["from"], monitoring, "metrics");
    for policy in [controller, webhook] {
        assert_eq!(
            policy["policyTypes"],
            serde_json::json!(["Ingress", "Egress"])
        );
        assert_eq!(policy["egress"], dns);
    }
}

/// The install notes say what was installed, how to check it and what to do next.
#[test]
fn the_notes_tell_what_was_installed_and_what_comes_next() {
    let chart = helm::chart_dir().display().to_string();
    let notes = |extra: &[&str]| -> String {
        let mut args = vec![
            "install",
            "nova-operator",
            chart.as_str(),
            "--namespace",
            NAMESPACE,
            "--dry-run=client",
        ];
        args.extend_from_slice(extra);
        let out = helm::run(home().path(), &args).expect("helm");
        assert!(out.success, "{}{}", out.stdout, out.stderr);
        out.stdout
            .split_once("\nNOTES:\n")
            .map(|(_, notes)| notes.to_owned())
            .unwrap_or_else(|| panic!("no NOTES in:\n{}", out.stdout))
    };
    let text = notes(&[]);
    for line in [
        "Deployment nova-operator-controller",
        "Deployment nova-operator-webhook",
        "cluster-wide",
        "self-signed",
        "nova-operator-webhook-tls",
        "installed and upgraded by this release",
        "kubectl -n nova-system get deploy,pods",
        "kubectl get crd novas.nova.openstack.c5c3.io",
        "kubectl apply -f examples/nova.yaml",
        "docs/user-guide.md",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    let text = notes(&[
        "--set",
        "rbac.scope=namespace",
        "--set",
        "rbac.watchNamespace=tenant",
        "--set",
        "webhook.certificate.certManager.enabled=true",
        "--set",
        "crds.enabled=false",
    ]);
    for line in [
        "the namespace tenant only",
        "cert-manager",
        "not managed by this release",
        "kubectl -n tenant get nova",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    assert!(!text.contains("cluster-wide"), "{text}");
}

/// The controller knows its own namespace (the downward API), which a Nova's NetworkPolicy
/// admits for the controller's health check of the Nova API.
#[test]
fn the_controller_knows_its_namespace_for_the_novas_network_policy() {
    let docs = render(&[]);
    let deployment = find(&docs, "Deployment", "nova-operator-controller");
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
    let var = env
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == nova::steps::network_policy::OPERATOR_NAMESPACE_ENV)
        .expect("the operator's namespace variable");
    assert_eq!(
        var["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
}

/// `helm test` runs `nova-controller selftest` from the controller's image, under a
/// ServiceAccount that may read the two CRDs and create Novas (dry runs) only in the namespace
/// the webhooks admit; every object of it is a test hook, deleted once it passed.
#[test]
fn helm_test_runs_the_selftest_with_just_enough_rights() {
    for (scope, target) in [("cluster", NAMESPACE), ("namespace", "openstack")] {
        let docs = render(&[
            "--set",
            &format!("rbac.scope={scope}"),
            "--set",
            "rbac.watchNamespace=openstack",
        ]);
        let hooks: Vec<&Value> = docs
            .iter()
            .filter(|d| d["metadata"]["annotations"]["helm.sh/hook"] == "test")
            .collect();
        let kinds: BTreeSet<&str> = hooks.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            BTreeSet::from([
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "Pod"
            ]),
            "{scope}"
        );
        for hook in &hooks {
            assert_eq!(
                hook["metadata"]["annotations"]["helm.sh/hook-delete-policy"],
                "before-hook-creation,hook-succeeded",
                "{scope}: {hook}"
            );
        }
        let pod = find(&docs, "Pod", "nova-operator-selftest");
        let container = &pod["spec"]["containers"][0];
        assert_eq!(
            strings(&container["args"]),
            ["selftest".to_owned(), format!("--namespace={target}")],
            "{scope}"
        );
        let controller = find(&docs, "Deployment", "nova-operator-controller");
        assert_eq!(
            container["image"], controller["spec"]["template"]["spec"]["containers"][0]["image"],
            "the controller's image"
        );
        let role = find(&docs, "Role", "nova-operator-selftest");
        assert_eq!(role["metadata"]["namespace"], target, "{scope}");
        assert_eq!(
            granted(&role["rules"], "create"),
            BTreeSet::from([("nova.openstack.c5c3.io".to_owned(), "novas".to_owned())])
        );
        let cluster = &find(&docs, "ClusterRole", "nova-operator-selftest")["rules"];
        assert_eq!(
            granted(cluster, "get"),
            BTreeSet::from([(
                "apiextensions.k8s.io".to_owned(),
                "customresourcedefinitions".to_owned()
            )])
        );
        assert_eq!(
            cluster[0]["resourceNames"].as_array().map(Vec::len),
            Some(2)
        );
    }
}

/// controller.trust mounts a ConfigMap's or a Secret's PEM bundle and hands it to `--ca-file`
/// (the controller adds it to the image's system roots); naming both is refused, naming neither
/// renders neither.
#[test]
fn the_controller_trusts_the_bundle_controller_trust_names() {
    let controller = |docs: &[Value]| pod_spec(docs, "nova-operator-controller").clone();
    let plain = controller(&render(&[]));
    assert!(
        !strings(&plain["containers"][0]["args"])
            .iter()
            .any(|a| a.starts_with("--ca-file")),
        "no bundle, no --ca-file"
    );
    for (source, volume) in [
        (
            "configMap",
            serde_json::json!({"name": "trust", "configMap": {"name": "corp-ca",
                "items": [{"key": "bundle.pem", "path": "bundle.pem"}]}}),
        ),
        (
            "secret",
            serde_json::json!({"name": "trust", "secret": {"secretName": "corp-ca",
                "items": [{"key": "bundle.pem", "path": "bundle.pem"}]}}),
        ),
    ] {
        let docs = render(&[
            "--set",
            &format!("controller.trust.{source}=corp-ca"),
            "--set",
            "controller.trust.key=bundle.pem",
        ]);
        let pod = controller(&docs);
        assert!(
            strings(&pod["containers"][0]["args"])
                .contains(&"--ca-file=/etc/nova-controller/trust/bundle.pem".to_owned()),
            "{source}"
        );
        assert_eq!(pod["volumes"][1], volume, "{source}");
        assert_eq!(
            pod["containers"][0]["volumeMounts"][1],
            serde_json::json!({"name": "trust", "mountPath": "/etc/nova-controller/trust", "readOnly": true}),
            "{source}"
        );
    }
    let err = helm::template(
        home().path(),
        NAMESPACE,
        &[
            "--set",
            "controller.trust.configMap=a",
            "--set",
            "controller.trust.secret=b",
        ],
    )
    .expect_err("both is refused");
    assert!(
        err.to_string()
            .contains("controller.trust: name a configMap or a secret, not both"),
        "{err}"
    );
}
