//! The generated CustomResourceDefinitions, as committed under `crds/` and in the chart.
//!
//! Two things make them fit for `kubectl apply` and Helm upgrades:
//! - The schemas of the upstream Kubernetes types a spec embeds (affinity, tolerations,
//!   resources, ...) are kept whole but without their descriptions
//!   ([`crate::v1alpha1::upstream::Upstream`]): that takes the Nova CRD from 369 KB of JSON
//!   to under the 256 KiB that client-side apply's annotation may hold.
//! - Each carries [`SCHEMA_HASH_ANNOTATION`], a digest of its spec, so the controller can tell
//!   a served CRD that lags behind its binary (`nova-controller`'s CRD check).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::v1alpha1::{Nova, NovaCompute};

/// Where the CRDs are committed as plain manifests (`kubectl apply --server-side -f crds/`),
/// relative to the repository root.
pub const DIR: &str = "crds";

/// Where the chart's copies are committed: templates (never the chart's `crds/`, which Helm
/// installs once and never upgrades), each behind `crds.enabled` and kept on uninstall with
/// `crds.keep` ([`to_chart_template`]). `crdgen` writes both directories, so neither is
/// ever copied by hand.
pub const CHART_DIR: &str = "charts/nova-operator/templates/crds";

/// Every CRD with the file name it is committed under.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("nova.openstack.c5c3.io_novas.yaml", finish(Nova::crd())),
        (
            "nova.openstack.c5c3.io_novacomputes.yaml",
            finish(NovaCompute::crd()),
        ),
    ]
}

/// The annotation holding the digest of a CRD's spec ([`schema_hash`]).
pub const SCHEMA_HASH_ANNOTATION: &str = "nova.openstack.c5c3.io/schema-hash";

/// The digest of a CRD's spec (SHA-256 of its JSON, hex), as [`SCHEMA_HASH_ANNOTATION`]
/// carries it.
pub fn schema_hash(crd: &CustomResourceDefinition) -> String {
    let spec = serde_json::to_vec(&crd.spec).expect("a CRD spec always serializes");
    hex::encode(Sha256::digest(spec))
}

/// The CRD names (`<plural>.<group>`) with the digest this build's schemas have.
pub fn compiled_hashes() -> Vec<(String, String)> {
    all()
        .into_iter()
        .map(|(_, crd)| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let hash = crd
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SCHEMA_HASH_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            (name, hash)
        })
        .collect()
}

/// Renders one CRD as the YAML document written to disk.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser_error::Error> {
    serde_saphyr::to_string(crd)
}

/// Renders one CRD as the chart's template: the same document behind `crds.enabled`, with
/// the chart's labels and, under `crds.keep`, `helm.sh/resource-policy: keep` (an uninstall
/// that deleted the CRD would delete every Nova and pool with it).
pub fn to_chart_template(
    crd: &CustomResourceDefinition,
) -> Result<String, serde_saphyr::ser_error::Error> {
    let mut template = String::from("{{- if .Values.crds.enabled }}\n");
    for line in to_yaml(crd)?.lines() {
        // The metadata's own keys are the only lines indented by exactly two spaces before
        // `spec:`; `name` follows `annotations` there (the fields' order).
        if line.starts_with("  name: ") && !template.contains("\n  labels:\n") {
            template
                .push_str("  labels:\n    {{- include \"nova-operator.labels\" . | nindent 4 }}\n");
        }
        template.push_str(line);
        template.push('\n');
        if line == "  annotations:" {
            template.push_str(
                "    {{- if .Values.crds.keep }}\n    helm.sh/resource-policy: keep\n    {{- end }}\n",
            );
        }
    }
    template.push_str("{{- end }}\n");
    Ok(template)
}

/// Drops the `nullable: true` schemars adds to every `Option` (without it the API server prunes
/// an explicit `null` before defaulting and validation, so `field: null` reads exactly like an
/// absent field in every CEL `has()` and in the stored object, as it does for Go-generated
/// CRDs), then stamps the schema digest.
fn finish(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(&crd).expect("a CRD always serializes");
    strip_nullable(&mut value);
    let mut crd: CustomResourceDefinition =
        serde_json::from_value(value).expect("stripping keeps a valid CRD");
    let hash = schema_hash(&crd);
    crd.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(SCHEMA_HASH_ANNOTATION.to_owned(), hash);
    crd
}

fn strip_nullable(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("nullable");
            map.values_mut().for_each(strip_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}
