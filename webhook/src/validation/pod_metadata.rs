//! `spec.imagePullSecrets` and `spec.podMetadata` of a Nova, and a NovaCompute's
//! `spec.imagePullSecrets` (issue 30, beyond the spec): the API server's grammar for Secret
//! names and for label and annotation keys and values, checked here so a bad value is refused
//! on the CR rather than by every pod template the controller applies; and the operator's own
//! keys (`nova_api::labels::POD_LABELS`, annotations under `POD_ANNOTATION_PREFIX`), which a
//! Nova cannot set.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::LocalObjectReference;
use nova_api::labels::{POD_ANNOTATION_PREFIX, POD_LABELS};
use nova_api::v1alpha1::NovaSpec;

use crate::field::{FieldError, Path, Violations};
use crate::grammar;

/// Both fields of `spec`.
pub fn rules(root: &Path, spec: &NovaSpec, errors: &mut Violations) {
    if let Some(secrets) = &spec.image_pull_secrets {
        pull_secrets(&root.child("imagePullSecrets"), secrets, "Nova", errors);
    }
    let Some(metadata) = &spec.pod_metadata else {
        return;
    };
    let path = root.child("podMetadata");
    if let Some(labels) = &metadata.labels {
        self::labels(&path.child("labels"), labels, errors);
    }
    if let Some(annotations) = &metadata.annotations {
        self::annotations(&path.child("annotations"), annotations, errors);
    }
}

/// A CR's `spec.imagePullSecrets` (a Nova's, a pool's): each names a Secret in the `owner`'s
/// namespace.
pub fn pull_secrets(
    path: &Path,
    secrets: &[LocalObjectReference],
    owner: &str,
    errors: &mut Violations,
) {
    for (i, secret) in secrets.iter().enumerate() {
        let item = path.index(i);
        let name = item.child("name");
        if secret.name.is_empty() {
            errors.push(FieldError::required(
                name,
                format!("the name of a Secret in the {owner}'s namespace"),
            ));
            continue;
        }
        for msg in grammar::dns1123_subdomain(&secret.name) {
            errors.push(FieldError::invalid(name, secret.name.as_str(), msg));
        }
    }
}

fn labels(path: &Path, labels: &BTreeMap<String, String>, errors: &mut Violations) {
    for (key, value) in labels {
        for msg in grammar::qualified_name(key) {
            errors.push(FieldError::invalid(path, key.as_str(), msg));
        }
        if POD_LABELS.contains(&key.as_str()) {
            errors.push(FieldError::invalid(
                path,
                key.as_str(),
                "the operator sets this label on every pod and selects the pods by it",
            ));
        }
        for msg in grammar::label_value(value) {
            errors.push(FieldError::invalid(path.key(key), value.as_str(), msg));
        }
    }
}

fn annotations(path: &Path, annotations: &BTreeMap<String, String>, errors: &mut Violations) {
    for key in annotations.keys() {
        for msg in grammar::qualified_name(key) {
            errors.push(FieldError::invalid(path, key.as_str(), msg));
        }
        if key.starts_with(POD_ANNOTATION_PREFIX) {
            errors.push(FieldError::invalid(
                path,
                key.as_str(),
                format!(
                    "annotations under {POD_ANNOTATION_PREFIX} are the operator's (its credential digests roll the pods)"
                ),
            ));
        }
    }
}
