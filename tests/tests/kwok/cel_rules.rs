//! The schema layer of both CRDs against the real API server (issue 3, first "must be true"
//! bullet):
//!
//! * both generated CRDs are Established, and every `x-kubernetes-validations` rule they serve
//!   has a case below (checked by walking the served schemas, so a new rule without a case fails);
//! * the spec's Example Nova and the sample NovaCompute are accepted by a real create, and the
//!   stored objects carry exactly the schema defaults;
//! * one table-driven case per create-time rule and path, each with a valid twin so a rule that
//!   rejects everything is caught (server-side dry-run creates);
//! * the transition rules, exercised with real updates (PUT and merge patch), plus ordinary edits
//!   that they must not block;
//! * a few OpenAPI keywords (patterns, an enum, minProperties) that reject what they should.
//!
//! No admission webhook is registered in this test binary: only the CRD schema decides.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use nova_test_harness::{ControlPlane, shared};
use serde_json::{Map, Value, json};

const GROUP: &str = "nova.openstack.c5c3.io";
const VERSION: &str = "v1alpha1";

// The exact messages, as the specification gives them (nova-crd.txt "Defaulting and
// validation", common-types.md Part 1, novacompute.md §2.8).
const TARGET_IMMUTABLE: &str = "targetClusterRef is immutable";
const SCHEMAS_DIFFER: &str = "apiDatabase and database must name different schemas";
const NOT_CELL0: &str = "apiDatabase must not name the cell0 schema derived from database";
const SAME_CREDENTIALS_MODE: &str = "apiDatabase and database must use the same credentialsMode";
const CONSOLE_DISABLED: &str =
    "consoleProxy.deployment must not be set when consoleProxy.enabled is false";
const REMOTE_NEEDS_TLS: &str = "remoteCompute requires messaging.tls: a compute on another cluster verifies the broker against the messaging CA bundle";
const VPA_BESIDE_HPA: &str = "spec.api.deployment.verticalAutoscaling cannot be set while spec.autoscaling scales the same Deployment";
const API_DB_IMMUTABLE: &str =
    "apiDatabase.database is immutable: the schema holds the cell map and every instance mapping";
const API_DB_MODE: &str = "apiDatabase mode (managed clusterRef vs brownfield host) is immutable";
const DB_IMMUTABLE: &str =
    "database.database is immutable: the cell mappings store the schema name";
const DB_MODE: &str = "database mode (managed clusterRef vs brownfield host) is immutable";
const DB_AT_MOST_58: &str = "database.database must be at most 58 characters: cell0 is provisioned as <database>_cell0 under the 64-character schema limit";
const DB_XOR: &str = "exactly one of clusterRef or host must be set";
const DB_DYNAMIC: &str = "credentialsMode Dynamic requires clusterRef (managed mode)";
const IMAGE_XOR: &str = "exactly one of image.tag or image.digest must be set";
const CACHE_XOR: &str = "exactly one of clusterRef or servers must be set";
const CACHE_NEWLINE: &str = "clusterRef.name must not contain a newline or carriage return";
const MESSAGING_XOR: &str = "exactly one of clusterRef or secretRef must be set";
const INGRESS_SOURCE: &str = "at least one ingress source must be specified";
const HPA_TARGET: &str =
    "at least one of targetCPUUtilization or targetMemoryUtilization must be set";
const HPA_MIN_MAX: &str = "minReplicas must not exceed maxReplicas";
const LOGGER_NAME: &str = "logger name must not be empty";
const LOGGER_LEVEL: &str = "per-logger level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL";
const KEEPALIVE: &str = "httpKeepAliveTimeout may only be set when httpKeepAlive is true";
const PRESTOP: &str =
    "preStopSleepSeconds must be strictly less than terminationGracePeriodSeconds";
const LIVENESS_SUCCESS: &str = "liveness.successThreshold must be 1";
const STARTUP_SUCCESS: &str = "startup.successThreshold must be 1";
const VPA_MIN: &str = "minAllowed may only name cpu and memory";
const VPA_MAX: &str = "maxAllowed may only name cpu and memory";
const NOVA_REF_IMMUTABLE: &str = "novaRef is immutable";
const CPU_MODELS: &str = "cpuModels is required when cpuMode is custom and must be empty otherwise";

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The five Deployment blocks of a Nova, each carrying the shared DeploymentSpec rules.
const NOVA_DEPLOYMENTS: [&str; 5] = [
    "spec.api.deployment",
    "spec.metadata.deployment",
    "spec.scheduler.deployment",
    "spec.conductor.deployment",
    "spec.consoleProxy.deployment",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Nova,
    NovaCompute,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::Nova => "novas",
            Kind::NovaCompute => "novacomputes",
        }
    }

    fn crd_name(self) -> String {
        format!("{}.{GROUP}", self.plural())
    }

    fn resource(self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, &format!("{self:?}"));
        ApiResource::from_gvk_with_plural(&gvk, self.plural())
    }

    fn api(self, client: kube::Client, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client, ns, &self.resource())
    }

    /// `examples/nova.yaml` (the spec's Example Nova) or `examples/novacompute.yaml`, as JSON,
    /// without its namespace so it can be created in the test's own.
    fn sample(self) -> Result<Value> {
        let file = match self {
            Kind::Nova => "nova.yaml",
            Kind::NovaCompute => "novacompute.yaml",
        };
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut value: Value =
            serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        value["metadata"]
            .as_object_mut()
            .context("sample without metadata")?
            .remove("namespace");
        Ok(value)
    }
}

/// What the API server must answer.
#[derive(Clone, Debug)]
enum Expect {
    Accept,
    /// HTTP 422 `Invalid` with a cause on `field` whose message ends with `message` (the API
    /// server prefixes `Invalid value: ` and, for OpenAPI keywords, the value and path), and a
    /// Status message that contains it.
    Reject {
        field: String,
        message: &'static str,
    },
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Accept => write!(f, "accepted"),
            Expect::Reject { field, message } => write!(f, "422 on {field}: {message:?}"),
        }
    }
}

/// One create-time case: the valid sample of `kind` with `patch` merged into it.
struct Case {
    name: String,
    kind: Kind,
    /// An RFC 7386 JSON merge patch: `null` deletes a field, arrays are replaced whole.
    patch: Value,
    expect: Expect,
}

/// `{"a": {"b": {"c": leaf}}}` for the path `a.b.c`.
fn nest(path: &str, leaf: Value) -> Value {
    path.rsplit('.').fold(leaf, |inner, key| {
        let mut map = Map::new();
        map.insert(key.to_owned(), inner);
        Value::Object(map)
    })
}

fn reject(kind: Kind, name: &str, patch: Value, field: &str, message: &'static str) -> Case {
    Case {
        name: name.to_owned(),
        kind,
        patch,
        expect: Expect::Reject {
            field: field.to_owned(),
            message,
        },
    }
}

fn accept(kind: Kind, name: &str, patch: Value) -> Case {
    Case {
        name: name.to_owned(),
        kind,
        patch,
        expect: Expect::Accept,
    }
}

/// A remoteCompute block that passes its own schema.
fn remote_compute() -> Value {
    json!({
        "keystoneEndpoint": "https://keystone.example.com/v3",
        "transportURLSecretRef": { "name": "nova-remote-transport" }
    })
}

fn messaging_tls() -> Value {
    json!({ "tls": { "caBundleSecretRef": { "name": "rabbitmq-ca" } } })
}

/// Every create-time case, grouped by the rule's block. Names read as "<block>: <what>".
#[rustfmt::skip]
fn create_cases() -> Vec<Case> {
    use Kind::{Nova, NovaCompute};
    let mut cases = Vec::new();
    let mut add = |c: Case| cases.push(c);

    // ImageSpec on spec.image (Nova).
    add(reject(Nova, "image: tag and digest", json!({"spec": {"image": {"digest": DIGEST}}}), "spec.image", IMAGE_XOR));
    add(reject(Nova, "image: neither tag nor digest", json!({"spec": {"image": {"tag": null}}}), "spec.image", IMAGE_XOR));
    add(accept(Nova, "image: digest instead of tag", json!({"spec": {"image": {"tag": null, "digest": DIGEST}}})));

    // DatabaseSpec on both database blocks.
    for (block, other) in [("apiDatabase", "database"), ("database", "apiDatabase")] {
        let path = format!("spec.{block}");
        let patch = |b: Value| nest(&path, b);
        add(reject(Nova, &format!("{block}: clusterRef and host"), patch(json!({"host": "db.example.com"})), &path, DB_XOR));
        add(reject(Nova, &format!("{block}: neither clusterRef nor host"), patch(json!({"clusterRef": null})), &path, DB_XOR));
        add(accept(Nova, &format!("{block}: brownfield host"), patch(json!({"clusterRef": null, "host": "db.example.com", "port": 3307}))));
        // The other block is Dynamic too, so only this block's rule fails.
        let mut dynamic_host = patch(json!({"clusterRef": null, "host": "db.example.com", "credentialsMode": "Dynamic"}));
        json_patch::merge(&mut dynamic_host, &nest(&format!("spec.{other}"), json!({"credentialsMode": "Dynamic"})));
        add(reject(Nova, &format!("{block}: credentialsMode Dynamic with host"), dynamic_host, &path, DB_DYNAMIC));
    }
    add(accept(Nova, "databases: both Dynamic with clusterRef", json!({"spec": {"apiDatabase": {"credentialsMode": "Dynamic"}, "database": {"credentialsMode": "Dynamic"}}})));
    add(reject(Nova, "database: schema name of 59 characters", json!({"spec": {"database": {"database": "n".repeat(59)}}}), "spec.database", DB_AT_MOST_58));
    add(accept(Nova, "database: schema name of 58 characters", json!({"spec": {"database": {"database": "n".repeat(58)}}})));
    add(accept(Nova, "apiDatabase: schema name of 64 characters (the 58 bound is the cell block's)", json!({"spec": {"apiDatabase": {"database": "a".repeat(64)}}})));

    // CacheSpec.
    add(reject(Nova, "cache: clusterRef and servers", json!({"spec": {"cache": {"servers": ["mc-0.example.com:11211"]}}}), "spec.cache", CACHE_XOR));
    add(reject(Nova, "cache: neither clusterRef nor servers", json!({"spec": {"cache": {"clusterRef": null}}}), "spec.cache", CACHE_XOR));
    add(reject(Nova, "cache: an empty servers list alone", json!({"spec": {"cache": {"clusterRef": null, "servers": []}}}), "spec.cache", CACHE_XOR));
    add(accept(Nova, "cache: brownfield servers", json!({"spec": {"cache": {"clusterRef": null, "servers": ["mc-0.example.com:11211", "mc-1.example.com:11211"]}}})));
    add(accept(Nova, "cache: clusterRef beside an empty servers list", json!({"spec": {"cache": {"servers": []}}})));
    add(reject(Nova, "cache: newline in clusterRef.name", json!({"spec": {"cache": {"clusterRef": {"name": "openstack-memcached\nmemcache_servers = evil:11211"}}}}), "spec.cache", CACHE_NEWLINE));
    add(reject(Nova, "cache: carriage return in clusterRef.name", json!({"spec": {"cache": {"clusterRef": {"name": "openstack-memcached\r"}}}}), "spec.cache", CACHE_NEWLINE));
    add(accept(Nova, "cache: clusterRef.name without control characters", json!({"spec": {"cache": {"clusterRef": {"name": "memcached-2.openstack"}}}})));

    // MessagingSpec.
    add(reject(Nova, "messaging: clusterRef and secretRef", json!({"spec": {"messaging": {"secretRef": {"name": "nova-transport"}}}}), "spec.messaging", MESSAGING_XOR));
    add(reject(Nova, "messaging: empty block", json!({"spec": {"messaging": {"clusterRef": null}}}), "spec.messaging", MESSAGING_XOR));
    add(accept(Nova, "messaging: brownfield secretRef", json!({"spec": {"messaging": {"clusterRef": null, "secretRef": {"name": "nova-transport"}}}})));

    // NetworkPolicySpec.
    add(reject(Nova, "networkPolicy: no ingress source", json!({"spec": {"networkPolicy": {"ingress": []}}}), "spec.networkPolicy", INGRESS_SOURCE));
    add(accept(Nova, "networkPolicy: one ingress source", json!({"spec": {"networkPolicy": {"ingress": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}]}}})));

    // AutoscalingSpec.
    add(reject(Nova, "autoscaling: no utilization target", json!({"spec": {"autoscaling": {"maxReplicas": 5}}}), "spec.autoscaling", HPA_TARGET));
    add(reject(Nova, "autoscaling: minReplicas above maxReplicas", json!({"spec": {"autoscaling": {"minReplicas": 6, "maxReplicas": 5, "targetCPUUtilization": 80}}}), "spec.autoscaling", HPA_MIN_MAX));
    add(accept(Nova, "autoscaling: memory target, minReplicas equal to maxReplicas", json!({"spec": {"autoscaling": {"minReplicas": 5, "maxReplicas": 5, "targetMemoryUtilization": 80}}})));
    add(accept(Nova, "autoscaling: cpu target without minReplicas", json!({"spec": {"autoscaling": {"maxReplicas": 5, "targetCPUUtilization": 80}}})));

    // LoggingSpec.perLoggerLevels.
    let levels = |m: Value| json!({"spec": {"logging": {"perLoggerLevels": m}}});
    add(reject(Nova, "logging: empty logger name", levels(json!({"": "DEBUG"})), "spec.logging.perLoggerLevels", LOGGER_NAME));
    add(reject(Nova, "logging: unknown level TRACE", levels(json!({"oslo.messaging": "TRACE"})), "spec.logging.perLoggerLevels", LOGGER_LEVEL));
    add(reject(Nova, "logging: lower-case level", levels(json!({"sqlalchemy": "debug"})), "spec.logging.perLoggerLevels", LOGGER_LEVEL));
    add(accept(Nova, "logging: named loggers with valid levels", levels(json!({"oslo.messaging": "DEBUG", "sqlalchemy": "WARNING", "keystonemiddleware": "CRITICAL"}))));

    // UWSGISpec on both uwsgi blocks.
    for path in ["spec.api.uwsgi", "spec.metadata.uwsgi"] {
        add(reject(Nova, &format!("{path}: keep-alive timeout with keep-alive off"), nest(path, json!({"httpKeepAlive": false, "httpKeepAliveTimeout": 30})), path, KEEPALIVE));
        add(accept(Nova, &format!("{path}: keep-alive timeout with keep-alive on"), nest(path, json!({"httpKeepAlive": true, "httpKeepAliveTimeout": 30}))));
    }
    add(accept(Nova, "spec.api.uwsgi: keep-alive timeout with keep-alive unset", nest("spec.api.uwsgi", json!({"httpKeepAliveTimeout": 30}))));

    // DeploymentSpec and VerticalAutoscalingSpec on all five Deployment blocks.
    for path in NOVA_DEPLOYMENTS {
        add(reject(Nova, &format!("{path}: preStop 30 against the default grace period 30"), nest(path, json!({"preStopSleepSeconds": 30})), path, PRESTOP));
        add(accept(Nova, &format!("{path}: preStop 29 against the default grace period 30"), nest(path, json!({"preStopSleepSeconds": 29}))));
    }
    add(reject(Nova, "spec.api.deployment: preStop 10 against grace period 10", nest("spec.api.deployment", json!({"terminationGracePeriodSeconds": 10, "preStopSleepSeconds": 10})), "spec.api.deployment", PRESTOP));
    add(accept(Nova, "spec.api.deployment: grace period 10 against the default preStop 5", nest("spec.api.deployment", json!({"terminationGracePeriodSeconds": 10}))));
    add(accept(Nova, "spec.api.deployment: preStop 0 (hook off) against grace period 10", nest("spec.api.deployment", json!({"terminationGracePeriodSeconds": 10, "preStopSleepSeconds": 0}))));
    for path in NOVA_DEPLOYMENTS {
        for (probe, message) in [("liveness", LIVENESS_SUCCESS), ("startup", STARTUP_SUCCESS)] {
            let at = format!("{path}.probes.{probe}");
            add(reject(Nova, &format!("{at}: successThreshold 2"), nest(&at, json!({"successThreshold": 2})), &at, message));
            add(accept(Nova, &format!("{at}: successThreshold 1"), nest(&at, json!({"successThreshold": 1, "periodSeconds": 20}))));
        }
    }
    let vpa_paths = NOVA_DEPLOYMENTS
        .iter()
        .map(|d| (Nova, format!("{d}.verticalAutoscaling")))
        .chain([(NovaCompute, "spec.verticalAutoscaling".to_owned())]);
    for (kind, path) in vpa_paths {
        add(reject(kind, &format!("{path}: minAllowed names a GPU"), nest(&path, json!({"updateMode": "Auto", "minAllowed": {"cpu": "100m", "nvidia.com/gpu": "1"}})), &path, VPA_MIN));
        add(reject(kind, &format!("{path}: maxAllowed names ephemeral-storage"), nest(&path, json!({"updateMode": "Auto", "maxAllowed": {"memory": "2Gi", "ephemeral-storage": "1Gi"}})), &path, VPA_MAX));
        add(accept(kind, &format!("{path}: cpu and memory bounds"), nest(&path, json!({"updateMode": "Auto", "minAllowed": {"cpu": "100m", "memory": "128Mi"}, "maxAllowed": {"cpu": "2", "memory": "2Gi"}, "minReplicas": 1}))));
    }

    // The rules on NovaSpec.
    add(reject(Nova, "spec: apiDatabase and database name one schema", json!({"spec": {"apiDatabase": {"database": "nova"}}}), "spec", SCHEMAS_DIFFER));
    add(accept(Nova, "spec: distinct schema names", json!({"spec": {"apiDatabase": {"database": "nova_api_1"}, "database": {"database": "nova_cell1"}}})));
    add(reject(Nova, "spec: apiDatabase names the cell0 schema", json!({"spec": {"apiDatabase": {"database": "nova_cell0"}}}), "spec", NOT_CELL0));
    add(accept(Nova, "spec: apiDatabase names another cell's schema", json!({"spec": {"apiDatabase": {"database": "nova_cell1"}}})));
    add(reject(Nova, "spec: credentialsMode Dynamic on apiDatabase only", json!({"spec": {"apiDatabase": {"credentialsMode": "Dynamic"}}}), "spec", SAME_CREDENTIALS_MODE));
    add(reject(Nova, "spec: credentialsMode Dynamic on database only", json!({"spec": {"database": {"credentialsMode": "Dynamic"}}}), "spec", SAME_CREDENTIALS_MODE));
    add(accept(Nova, "spec: explicit Static beside an unset credentialsMode", json!({"spec": {"apiDatabase": {"credentialsMode": "Static"}}})));
    add(reject(Nova, "spec: console deployment while the proxy is disabled", json!({"spec": {"consoleProxy": {"enabled": false, "deployment": {"replicas": 1}}}}), "spec", CONSOLE_DISABLED));
    add(accept(Nova, "spec: console disabled without a deployment block", json!({"spec": {"consoleProxy": {"enabled": false}}})));
    add(accept(Nova, "spec: console enabled with a deployment block", json!({"spec": {"consoleProxy": {"enabled": true, "deployment": {"replicas": 2}}}})));
    add(reject(Nova, "spec: remoteCompute without messaging.tls", json!({"spec": {"remoteCompute": remote_compute()}}), "spec", REMOTE_NEEDS_TLS));
    add(accept(Nova, "spec: remoteCompute with messaging.tls", json!({"spec": {"remoteCompute": remote_compute(), "messaging": messaging_tls()}})));
    let hpa = json!({"maxReplicas": 5, "targetCPUUtilization": 80});
    add(reject(Nova, "spec: API VPA beside spec.autoscaling", json!({"spec": {"autoscaling": hpa, "api": {"deployment": {"verticalAutoscaling": {"updateMode": "Auto"}}}}}), "spec", VPA_BESIDE_HPA));
    add(accept(Nova, "spec: metadata VPA beside spec.autoscaling", json!({"spec": {"autoscaling": hpa, "metadata": {"deployment": {"verticalAutoscaling": {"updateMode": "Auto"}}}}})));
    add(accept(Nova, "spec: API VPA without spec.autoscaling", json!({"spec": {"api": {"deployment": {"verticalAutoscaling": {"updateMode": "Off"}}}}})));
    add(accept(Nova, "spec: targetClusterRef on create (transition rules are UPDATE-only)", json!({"spec": {"targetClusterRef": {"name": "cluster-a"}}})));

    // Nova OpenAPI keywords (no CEL).
    add(reject(Nova, "schema: openStackRelease 2026.3", json!({"spec": {"openStackRelease": "2026.3"}}), "spec.openStackRelease", r"should match '^\d{4}\.[12]$'"));
    add(accept(Nova, "schema: openStackRelease 2026.2", json!({"spec": {"openStackRelease": "2026.2"}})));
    add(reject(Nova, "schema: keystoneEndpoint without a scheme", json!({"spec": {"keystoneEndpoint": "keystone.openstack.svc:5000/v3"}}), "spec.keystoneEndpoint", "should match '^https?://'"));
    add(reject(Nova, "schema: remoteCompute.keystoneEndpoint over http", json!({"spec": {"remoteCompute": {"keystoneEndpoint": "http://keystone.example.com/v3"}, "messaging": messaging_tls()}}), "spec.remoteCompute.keystoneEndpoint", "should match '^https://'"));
    add(reject(Nova, "schema: logging.format xml", json!({"spec": {"logging": {"format": "xml"}}}), "spec.logging.format", r#"Unsupported value: "xml": supported values: "text", "json""#));
    add(accept(Nova, "schema: logging.format json", json!({"spec": {"logging": {"format": "json"}}})));

    // NovaCompute: ImageSpec, libvirt, OpenAPI keywords.
    let image = |i: Value| json!({"spec": {"image": i}});
    add(reject(NovaCompute, "image: tag and digest", image(json!({"repository": "ghcr.io/c5c3/nova-compute", "tag": "2026.1", "digest": DIGEST})), "spec.image", IMAGE_XOR));
    add(reject(NovaCompute, "image: repository only", image(json!({"repository": "ghcr.io/c5c3/nova-compute"})), "spec.image", IMAGE_XOR));
    add(accept(NovaCompute, "image: digest only", image(json!({"repository": "ghcr.io/c5c3/nova-compute", "digest": DIGEST}))));
    add(accept(NovaCompute, "image: tag only", image(json!({"repository": "ghcr.io/c5c3/nova-compute", "tag": "2026.1"}))));
    let libvirt = |l: Value| json!({"spec": {"libvirt": l}});
    add(reject(NovaCompute, "libvirt: cpuMode custom without cpuModels", libvirt(json!({"cpuMode": "custom"})), "spec.libvirt", CPU_MODELS));
    add(reject(NovaCompute, "libvirt: cpuMode custom with empty cpuModels", libvirt(json!({"cpuMode": "custom", "cpuModels": []})), "spec.libvirt", CPU_MODELS));
    add(reject(NovaCompute, "libvirt: cpuModels with cpuMode host-model", libvirt(json!({"cpuMode": "host-model", "cpuModels": ["Haswell-noTSX"]})), "spec.libvirt", CPU_MODELS));
    add(reject(NovaCompute, "libvirt: cpuModels without cpuMode", libvirt(json!({"cpuModels": ["Haswell-noTSX"]})), "spec.libvirt", CPU_MODELS));
    add(accept(NovaCompute, "libvirt: cpuMode custom with cpuModels", libvirt(json!({"cpuMode": "custom", "cpuModels": ["Haswell-noTSX", "Cascadelake-Server"]}))));
    add(accept(NovaCompute, "libvirt: cpuMode host-passthrough alone", libvirt(json!({"cpuMode": "host-passthrough", "virtType": "qemu"}))));
    add(accept(NovaCompute, "spec: targetClusterRef on create (transition rules are UPDATE-only)", json!({"spec": {"targetClusterRef": {"name": "cluster-a"}}})));
    add(reject(NovaCompute, "schema: empty nodeSelector", json!({"spec": {"nodeSelector": {"openstack.c5c3.io/nova-compute-pool": null}}}), "spec.nodeSelector", "should have at least 1 properties"));
    add(reject(NovaCompute, "schema: lower-case trait", json!({"spec": {"traits": ["CUSTOM_POOL_A", "custom_gpu"]}}), "spec.traits[1]", "should match '^CUSTOM_[A-Z0-9_]+$'"));
    add(reject(NovaCompute, "schema: host trait without the CUSTOM_ prefix", json!({"spec": {"hostTraits": [{"node": "node-1", "traits": ["GPU_A100"]}]}}), "spec.hostTraits[0].traits[0]", "should match '^CUSTOM_[A-Z0-9_]+$'"));
    add(accept(NovaCompute, "schema: custom traits", json!({"spec": {"traits": ["CUSTOM_POOL_A", "CUSTOM_GPU_2"]}})));
    add(reject(NovaCompute, "schema: libvirt.virtType xen", libvirt(json!({"virtType": "xen"})), "spec.libvirt.virtType", r#"Unsupported value: "xen": supported values: "kvm", "qemu""#));
    add(reject(NovaCompute, "schema: cpuModels item with a space", libvirt(json!({"cpuMode": "custom", "cpuModels": ["Haswell noTSX"]})), "spec.libvirt.cpuModels[0]", "should match '^[A-Za-z0-9_.-]+$'"));
    add(reject(NovaCompute, "schema: updateStrategy.type Recreate", json!({"spec": {"updateStrategy": {"type": "Recreate"}}}), "spec.updateStrategy.type", r#"Unsupported value: "Recreate": supported values: "RollingUpdate", "OnDelete""#));
    add(reject(NovaCompute, "schema: empty novaRef.name", json!({"spec": {"novaRef": {"name": ""}}}), "spec.novaRef.name", "should be at least 1 chars long"));
    cases
}

/// The starting point of an update case: the valid sample of its kind with a patch merged in.
#[derive(Clone, Copy, Debug)]
enum Start {
    /// The Example Nova: both databases managed (clusterRef), no targetClusterRef.
    NovaManaged,
    /// Both databases brownfield (host), on the target cluster `cluster-a`.
    NovaBrownfieldRemote,
    /// The sample pool, no targetClusterRef.
    Compute,
    /// The sample pool on the target cluster `cluster-a`.
    ComputeRemote,
}

impl Start {
    fn kind(self) -> Kind {
        match self {
            Start::NovaManaged | Start::NovaBrownfieldRemote => Kind::Nova,
            Start::Compute | Start::ComputeRemote => Kind::NovaCompute,
        }
    }

    fn patch(self) -> Value {
        match self {
            Start::NovaManaged | Start::Compute => json!({}),
            Start::NovaBrownfieldRemote => json!({"spec": {
                "apiDatabase": {"clusterRef": null, "host": "db.example.com"},
                "database": {"clusterRef": null, "host": "db.example.com"},
                "targetClusterRef": {"name": "cluster-a"}
            }}),
            Start::ComputeRemote => json!({"spec": {"targetClusterRef": {"name": "cluster-a"}}}),
        }
    }
}

/// How an update is sent.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// GET, merge the patch locally, PUT the whole object (with its resourceVersion).
    Replace,
    /// PATCH with the merge patch itself.
    MergePatch,
}

/// One update case: a fresh object created from `start`, then updated with `patch`.
struct UpdateCase {
    name: &'static str,
    start: Start,
    via: Via,
    patch: Value,
    expect: Expect,
}

#[rustfmt::skip]
fn update_cases() -> Vec<UpdateCase> {
    use Start::{Compute, ComputeRemote, NovaBrownfieldRemote, NovaManaged};
    use Via::{MergePatch, Replace};
    let rejected = |name, start, via, patch, field: &str, message| UpdateCase {
        name,
        start,
        via,
        patch,
        expect: Expect::Reject {
            field: field.to_owned(),
            message,
        },
    };
    let accepted = |name, start, via, patch| UpdateCase {
        name,
        start,
        via,
        patch,
        expect: Expect::Accept,
    };
    let ordinary_nova = json!({"metadata": {"labels": {"team": "compute"}}, "spec": {
        "openStackRelease": "2026.2",
        "image": {"tag": "2026.2"},
        "keystoneEndpoint": "https://keystone.example.com/v3",
        "api": {"deployment": {"replicas": 5}},
        "logging": {"format": "json"},
        "apiDatabase": {"port": 3307, "secretRef": {"name": "nova-api-db-2"}},
        "database": {"port": 3307}
    }});
    let ordinary_compute = json!({"metadata": {"labels": {"team": "compute"}}, "spec": {
        "nodeSelector": {"openstack.c5c3.io/nova-compute-pool": "b"},
        "traits": ["CUSTOM_POOL_B"],
        "libvirt": {"virtType": "qemu"},
        "image": {"repository": "ghcr.io/c5c3/nova-compute", "tag": "2026.1"}
    }});
    vec![
        // The schema names (spec.apiDatabase / spec.database).
        rejected("apiDatabase.database renamed", NovaManaged, Replace, json!({"spec": {"apiDatabase": {"database": "nova_api_v2"}}}), "spec.apiDatabase", API_DB_IMMUTABLE),
        rejected("database.database renamed", NovaManaged, MergePatch, json!({"spec": {"database": {"database": "nova_v2"}}}), "spec.database", DB_IMMUTABLE),
        // The database modes.
        rejected("apiDatabase clusterRef -> host", NovaManaged, Replace, json!({"spec": {"apiDatabase": {"clusterRef": null, "host": "db.example.com"}}}), "spec.apiDatabase", API_DB_MODE),
        rejected("apiDatabase host -> clusterRef", NovaBrownfieldRemote, MergePatch, json!({"spec": {"apiDatabase": {"host": null, "clusterRef": {"name": "openstack-mariadb"}}}}), "spec.apiDatabase", API_DB_MODE),
        rejected("database clusterRef -> host", NovaManaged, MergePatch, json!({"spec": {"database": {"clusterRef": null, "host": "db.example.com"}}}), "spec.database", DB_MODE),
        rejected("database host -> clusterRef", NovaBrownfieldRemote, Replace, json!({"spec": {"database": {"host": null, "clusterRef": {"name": "openstack-mariadb"}}}}), "spec.database", DB_MODE),
        // targetClusterRef: rule 1 (presence) on add and remove, rule 2 (name) on rename.
        rejected("Nova targetClusterRef added", NovaManaged, Replace, json!({"spec": {"targetClusterRef": {"name": "cluster-a"}}}), "spec", TARGET_IMMUTABLE),
        rejected("Nova targetClusterRef removed", NovaBrownfieldRemote, MergePatch, json!({"spec": {"targetClusterRef": null}}), "spec", TARGET_IMMUTABLE),
        rejected("Nova targetClusterRef renamed", NovaBrownfieldRemote, Replace, json!({"spec": {"targetClusterRef": {"name": "cluster-b"}}}), "spec", TARGET_IMMUTABLE),
        // Ordinary edits pass the transition rules.
        accepted("Nova ordinary edit (managed, local)", NovaManaged, Replace, ordinary_nova.clone()),
        accepted("Nova ordinary edit (brownfield, remote)", NovaBrownfieldRemote, MergePatch, ordinary_nova),
        accepted("Nova mode-preserving edits (clusterRef renamed, host renamed)", NovaManaged, Replace, json!({"spec": {"apiDatabase": {"clusterRef": {"name": "mariadb-2"}}, "database": {"clusterRef": {"name": "mariadb-2"}}}})),
        accepted("Nova brownfield host renamed", NovaBrownfieldRemote, MergePatch, json!({"spec": {"apiDatabase": {"host": "db2.example.com"}, "database": {"host": "10.0.0.7"}}})),
        accepted("Nova targetClusterRef unchanged, spec edited", NovaBrownfieldRemote, Replace, json!({"spec": {"targetClusterRef": {"name": "cluster-a"}, "region": "RegionTwo"}})),
        // NovaCompute: novaRef and targetClusterRef.
        rejected("NovaCompute novaRef renamed", Compute, Replace, json!({"spec": {"novaRef": {"name": "nova-2"}}}), "spec", NOVA_REF_IMMUTABLE),
        rejected("NovaCompute novaRef renamed (patch)", ComputeRemote, MergePatch, json!({"spec": {"novaRef": {"name": "nova-2"}}}), "spec", NOVA_REF_IMMUTABLE),
        rejected("NovaCompute targetClusterRef added", Compute, MergePatch, json!({"spec": {"targetClusterRef": {"name": "cluster-a"}}}), "spec", TARGET_IMMUTABLE),
        rejected("NovaCompute targetClusterRef removed", ComputeRemote, Replace, json!({"spec": {"targetClusterRef": null}}), "spec", TARGET_IMMUTABLE),
        rejected("NovaCompute targetClusterRef renamed", ComputeRemote, MergePatch, json!({"spec": {"targetClusterRef": {"name": "cluster-b"}}}), "spec", TARGET_IMMUTABLE),
        accepted("NovaCompute ordinary edit (local)", Compute, Replace, ordinary_compute.clone()),
        accepted("NovaCompute ordinary edit (remote)", ComputeRemote, MergePatch, ordinary_compute),
    ]
}

async fn control_plane() -> Result<&'static ControlPlane> {
    let t0 = Instant::now();
    let cp = shared()
        .await
        .context("starting the shared control plane")?;
    println!(
        "control plane for this test after {:.2}s (API server usable after {:.2}s at start-up); logs in {}",
        t0.elapsed().as_secs_f64(),
        cp.timings().api_ready.as_secs_f64(),
        cp.log_dir().display()
    );
    Ok(cp)
}

fn to_object(value: Value) -> Result<DynamicObject> {
    serde_json::from_value(value).context("the case is not a Kubernetes object")
}

/// The API server's answer in full, for failure messages.
fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => {
            let causes = status
                .details
                .as_ref()
                .map(|d| {
                    d.causes
                        .iter()
                        .map(|c| format!("\n      cause {}: {}", c.field, c.message))
                        .collect::<String>()
                })
                .unwrap_or_default();
            format!(
                "HTTP {} {}: {}{causes}",
                status.code, status.reason, status.message
            )
        }
        other => format!("{other}"),
    }
}

/// Checks the API server's answer against `expect`; `Err` carries the explanation.
fn verdict<T>(expect: &Expect, result: &Result<T, kube::Error>) -> Result<(), String> {
    match (expect, result) {
        (Expect::Accept, Ok(_)) => Ok(()),
        (Expect::Accept, Err(e)) => Err(format!("expected acceptance, got {}", describe(e))),
        (Expect::Reject { .. }, Ok(_)) => Err("the API server accepted it".to_owned()),
        (Expect::Reject { field, message }, Err(e)) => {
            let kube::Error::Api(status) = e else {
                return Err(format!("not an API rejection: {}", describe(e)));
            };
            let cause_matches = status.details.as_ref().is_some_and(|d| {
                d.causes
                    .iter()
                    .any(|c| c.field == *field && c.message.ends_with(message))
            });
            if status.code == 422
                && status.reason == "Invalid"
                && status.message.contains(message)
                && cause_matches
            {
                Ok(())
            } else {
                Err(format!("got {}", describe(e)))
            }
        }
    }
}

/// One row of a table run: the case, its patch and expectation, and the verdict.
struct Row {
    case: String,
    detail: String,
    outcome: Result<(), String>,
}

/// Prints one line per case (with the details for a failure) and returns the failures.
fn report(title: &str, rows: &[Row]) -> Vec<String> {
    println!("{title}");
    let mut failures = Vec::new();
    for row in rows {
        match &row.outcome {
            Ok(()) => println!("  ok    {}", row.case),
            Err(why) => {
                let text = format!("{}\n{}\n        server: {why}", row.case, row.detail);
                println!("  FAIL  {text}");
                failures.push(text);
            }
        }
    }
    failures
}

#[tokio::test]
async fn generated_crds_are_established_and_every_rule_has_a_case() -> Result<()> {
    let cp = control_plane().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(cp.client()?);
    let creates = create_cases();
    let updates = update_cases();
    let mut missing = Vec::new();
    let mut total = 0;
    for kind in [Kind::Nova, Kind::NovaCompute] {
        let crd = crds
            .get(&kind.crd_name())
            .await
            .with_context(|| format!("get CRD {}", kind.crd_name()))?;
        let conditions = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        for wanted in ["NamesAccepted", "Established"] {
            assert!(
                conditions
                    .iter()
                    .any(|c| c.type_ == wanted && c.status == "True"),
                "CRD {} is not {wanted}: {conditions:?}",
                kind.crd_name()
            );
        }
        let crd = serde_json::to_value(&crd)?;
        let versions = crd["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(versions.len(), 1, "{kind:?}: one served version");
        let mut rules = Vec::new();
        collect_rules(&versions[0]["schema"]["openAPIV3Schema"], "", &mut rules);
        let transitions = rules.iter().filter(|r| r.rule.contains("oldSelf")).count();
        println!(
            "{}: Established, {} CEL rules served ({transitions} transition rules)",
            kind.crd_name(),
            rules.len()
        );
        total += rules.len();
        for rule in rules {
            let expects = |e: &Expect| matches!(e, Expect::Reject { field, message } if *field == rule.path && *message == rule.message);
            let covered = if rule.rule.contains("oldSelf") {
                updates
                    .iter()
                    .any(|c| c.start.kind() == kind && expects(&c.expect))
            } else {
                creates.iter().any(|c| c.kind == kind && expects(&c.expect))
            };
            if !covered {
                missing.push(format!(
                    "{kind:?} {}: {:?} (rule {:?})",
                    rule.path, rule.message, rule.rule
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "served CEL rules without a rejecting case in this file:\n  {}",
        missing.join("\n  ")
    );
    println!("all {total} served CEL rules (every rule on every path) have a rejecting case");
    Ok(())
}

struct Rule {
    path: String,
    rule: String,
    message: String,
}

/// Every `x-kubernetes-validations` entry below `node`, with its field path as the API server
/// reports it (`spec.api.deployment`; `[*]` stands for any list index or map key, though no rule
/// sits below one today).
fn collect_rules(node: &Value, path: &str, out: &mut Vec<Rule>) {
    for rule in node["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.push(Rule {
            path: path.to_owned(),
            rule: rule["rule"].as_str().unwrap_or_default().to_owned(),
            message: rule["message"].as_str().unwrap_or_default().to_owned(),
        });
    }
    if let Some(properties) = node["properties"].as_object() {
        for (name, child) in properties {
            let child_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            collect_rules(child, &child_path, out);
        }
    }
    for keyword in ["items", "additionalProperties"] {
        if node[keyword].is_object() {
            collect_rules(&node[keyword], &format!("{path}[*]"), out);
        }
    }
}

/// Every leaf of `value` as (JSON pointer, value); empty objects and arrays count as leaves.
fn leaves(value: &Value, pointer: &str, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                leaves(child, &format!("{pointer}/{key}"), out);
            }
        }
        other => {
            out.insert(pointer.to_owned(), other.clone());
        }
    }
}

/// What the API server added to `sent` (pointer → value), after checking it kept every field.
fn added_by_server(sent: &Value, stored: &Value) -> Result<BTreeMap<String, Value>> {
    let mut sent_leaves = BTreeMap::new();
    leaves(&sent["spec"], "/spec", &mut sent_leaves);
    for (pointer, value) in &sent_leaves {
        let kept = stored.pointer(pointer);
        // An empty object sent may come back filled with defaults.
        let same =
            kept == Some(value) || (value == &json!({}) && kept.is_some_and(Value::is_object));
        if !same {
            bail!("the API server changed {pointer}: sent {value}, stored {kept:?}");
        }
    }
    let mut stored_leaves = BTreeMap::new();
    leaves(&stored["spec"], "/spec", &mut stored_leaves);
    Ok(stored_leaves
        .into_iter()
        .filter(|(pointer, _)| sent.pointer(pointer).is_none())
        .collect())
}

fn expected(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(p, v)| ((*p).to_owned(), v.clone()))
        .collect()
}

#[tokio::test]
async fn the_example_nova_and_the_sample_pool_are_accepted_with_their_schema_defaults() -> Result<()>
{
    let cp = control_plane().await?;
    let ns = cp.namespace("cel-examples").await?;
    let client = cp.client()?;

    let stored_defaults = [
        (
            Kind::Nova,
            expected(&[
                ("/spec/apiDatabase/deletionPolicy", json!("Retain")),
                ("/spec/apiDatabase/replicas", json!(3)),
                ("/spec/apiDatabase/storageSize", json!("100Gi")),
                ("/spec/database/deletionPolicy", json!("Retain")),
                ("/spec/database/replicas", json!(3)),
                ("/spec/database/storageSize", json!("100Gi")),
                ("/spec/cache/backend", json!("dogpile.cache.pymemcache")),
                ("/spec/cache/replicas", json!(3)),
            ]),
        ),
        (
            Kind::NovaCompute,
            expected(&[
                ("/spec/libvirt/virtType", json!("kvm")),
                ("/spec/updateStrategy/type", json!("RollingUpdate")),
            ]),
        ),
    ];
    for (kind, want) in stored_defaults {
        let api = kind.api(client.clone(), &ns);
        let sample = kind.sample()?;
        let name = sample["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        api.create(&PostParams::default(), &to_object(sample.clone())?)
            .await
            .map_err(|e| anyhow::anyhow!("real create of the {kind:?} sample: {}", describe(&e)))?;
        let stored = serde_json::to_value(api.get(&name).await?)?;
        let added = added_by_server(&sample, &stored)?;
        assert_eq!(
            added, want,
            "{kind:?} {name}: the schema defaults the API server stored"
        );
        println!("{kind:?} {name} created; schema defaults stored: {added:?}");
    }

    // Blocks that are present get their nested defaults; absent blocks get none (the
    // DeploymentSpec subtlety of common-types.md: `deployment: {}` stores replicas 3).
    let present_blocks = [
        (
            Kind::Nova,
            json!({"spec": {
                "api": {"deployment": {}, "uwsgi": {}},
                "metadata": {"uwsgi": {}},
                "scheduler": {"deployment": {}},
                "logging": {},
                "secretStoreRef": {"name": "openbao"}
            }}),
            expected(&[
                ("/spec/apiDatabase/deletionPolicy", json!("Retain")),
                ("/spec/apiDatabase/replicas", json!(3)),
                ("/spec/apiDatabase/storageSize", json!("100Gi")),
                ("/spec/database/deletionPolicy", json!("Retain")),
                ("/spec/database/replicas", json!(3)),
                ("/spec/database/storageSize", json!("100Gi")),
                ("/spec/cache/backend", json!("dogpile.cache.pymemcache")),
                ("/spec/cache/replicas", json!(3)),
                ("/spec/api/deployment/replicas", json!(3)),
                ("/spec/api/uwsgi/processes", json!(2)),
                ("/spec/api/uwsgi/threads", json!(1)),
                ("/spec/metadata/uwsgi/processes", json!(2)),
                ("/spec/metadata/uwsgi/threads", json!(1)),
                ("/spec/scheduler/deployment/replicas", json!(3)),
                ("/spec/logging/format", json!("text")),
                ("/spec/logging/level", json!("INFO")),
                ("/spec/secretStoreRef/kind", json!("ClusterSecretStore")),
            ]),
        ),
        (
            Kind::NovaCompute,
            json!({"spec": {"libvirt": {"cpuMode": "host-model"}, "updateStrategy": {"maxUnavailable": 2}}}),
            expected(&[
                ("/spec/libvirt/virtType", json!("kvm")),
                ("/spec/updateStrategy/type", json!("RollingUpdate")),
            ]),
        ),
    ];
    for (kind, patch, want) in present_blocks {
        let mut object = kind.sample()?;
        json_patch::merge(&mut object, &patch);
        object["metadata"]["name"] = json!("defaults");
        let created = kind
            .api(client.clone(), &ns)
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &to_object(object.clone())?,
            )
            .await
            .map_err(|e| anyhow::anyhow!("dry-run create of {kind:?} {patch}: {}", describe(&e)))?;
        let added = added_by_server(&object, &serde_json::to_value(created)?)?;
        assert_eq!(added, want, "{kind:?} with {patch}: the schema defaults");
    }
    Ok(())
}

#[tokio::test]
async fn every_create_time_rule_rejects_its_violation_and_admits_its_twin() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("cel-create").await?;
    let client = cp.client()?;
    let samples = BTreeMap::from([
        (Kind::Nova, Kind::Nova.sample()?),
        (Kind::NovaCompute, Kind::NovaCompute.sample()?),
    ]);
    let cases = create_cases();
    let rejections = cases
        .iter()
        .filter(|c| matches!(c.expect, Expect::Reject { .. }))
        .count();

    let started = Instant::now();
    let rows: Vec<Row> = stream::iter(cases.iter().enumerate())
        .map(|(i, case)| {
            let mut object = samples[&case.kind].clone();
            json_patch::merge(&mut object, &case.patch);
            object["metadata"]["name"] = json!(format!("cel-{i:03}"));
            let api = case.kind.api(client.clone(), &ns);
            async move {
                let outcome = match to_object(object) {
                    Ok(object) => {
                        let params = PostParams {
                            dry_run: true,
                            ..PostParams::default()
                        };
                        let result = api.create(&params, &object).await;
                        verdict(&case.expect, &result)
                    }
                    Err(e) => Err(format!("{e:#}")),
                };
                Row {
                    case: format!(
                        "{:<11} {} (cel-{i:03})",
                        format!("{:?}", case.kind),
                        case.name
                    ),
                    detail: format!(
                        "        patch:  {}\n        expect: {}",
                        case.patch, case.expect
                    ),
                    outcome,
                }
            }
        })
        .buffered(4)
        .collect()
        .await;
    let took = started.elapsed();

    let failures = report("create-time cases (server-side dry-run creates):", &rows);
    println!(
        "{} create-time cases ({rejections} rejections, {} valid twins) took {:.2}s ({:.1} ms per case)",
        cases.len(),
        cases.len() - rejections,
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / cases.len() as f64
    );
    if !failures.is_empty() {
        bail!(
            "{} of {} create-time cases failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
    Ok(())
}

/// Creates the start object of `case` as `name`, sends the update, and checks the verdict and
/// what is stored afterwards (the update applied when accepted, nothing changed when rejected).
async fn run_update(
    client: &kube::Client,
    ns: &str,
    name: &str,
    case: &UpdateCase,
) -> Result<(), String> {
    let kind = case.start.kind();
    let api = kind.api(client.clone(), ns);
    let mut object = kind.sample().map_err(|e| format!("{e:#}"))?;
    json_patch::merge(&mut object, &case.start.patch());
    object["metadata"]["name"] = json!(name);
    let object = to_object(object).map_err(|e| format!("{e:#}"))?;
    api.create(&PostParams::default(), &object)
        .await
        .map_err(|e| format!("creating the start object failed: {}", describe(&e)))?;
    let before = api
        .get(name)
        .await
        .map_err(|e| format!("get after create: {}", describe(&e)))?;
    let before = serde_json::to_value(before).map_err(|e| e.to_string())?;

    let result = match case.via {
        Via::Replace => {
            let mut updated = before.clone();
            json_patch::merge(&mut updated, &case.patch);
            let updated = to_object(updated).map_err(|e| format!("{e:#}"))?;
            api.replace(name, &PostParams::default(), &updated).await
        }
        Via::MergePatch => {
            api.patch(name, &PatchParams::default(), &Patch::Merge(&case.patch))
                .await
        }
    };
    verdict(&case.expect, &result)?;

    let after = api
        .get(name)
        .await
        .map_err(|e| format!("get after update: {}", describe(&e)))?;
    let after = serde_json::to_value(after).map_err(|e| e.to_string())?;
    match case.expect {
        Expect::Accept => {
            // The stored spec is the old one with the update merged in (plus any defaults
            // of blocks the update added), and the generation moved.
            let mut want = before["spec"].clone();
            json_patch::merge(&mut want, &case.patch["spec"]);
            added_by_server(&json!({ "spec": want }), &after).map_err(|e| format!("{e:#}"))?;
            if after["metadata"]["generation"] == before["metadata"]["generation"] {
                return Err("accepted, but the stored generation did not move".to_owned());
            }
            Ok(())
        }
        Expect::Reject { .. } => {
            if after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"] {
                return Err("rejected, yet the stored object changed".to_owned());
            }
            Ok(())
        }
    }
}

#[tokio::test]
async fn transition_rules_hold_on_real_updates_and_ordinary_edits_pass() -> Result<()> {
    let cp = control_plane().await?;
    let ns = cp.namespace("cel-update").await?;
    let client = cp.client()?;
    let cases = update_cases();
    let started = Instant::now();
    let mut rows = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let name = format!("upd-{i:02}");
        let outcome = run_update(&client, &ns, &name, case).await;
        rows.push(Row {
            case: format!(
                "{:<11} {} ({name}: from {:?} via {:?})",
                format!("{:?}", case.start.kind()),
                case.name,
                case.start,
                case.via
            ),
            detail: format!(
                "        patch:  {}\n        expect: {}",
                case.patch, case.expect
            ),
            outcome,
        });
    }
    let took: Duration = started.elapsed();
    let failures = report(
        "update cases (real creates, then PUT or merge PATCH):",
        &rows,
    );
    println!(
        "{} update cases took {:.2}s",
        cases.len(),
        took.as_secs_f64()
    );
    if !failures.is_empty() {
        bail!(
            "{} of {} update cases failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
    Ok(())
}
