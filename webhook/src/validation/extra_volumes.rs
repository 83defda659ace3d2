//! `spec.extraVolumes` and `spec.extraVolumeMounts` of a Nova (issue 30, beyond the spec): the
//! API server's rules for a pod's volumes and a container's mounts, with its messages, checked
//! here so a bad entry is refused on the Nova rather than by every pod template the controller
//! applies; the volume types the "restricted" Pod Security Standard allows, which the Nova's
//! pods keep; and the operator's own volume names and paths (`nova_api::volumes`), which the
//! extras cannot take.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Volume, VolumeMount};
use nova_api::v1alpha1::NovaSpec;
use nova_api::volumes::{OPERATOR_VOLUMES, operator_path, segments};

use crate::field::{FieldError, Path, Violations};
use crate::grammar;

/// The volume types of the "restricted" Pod Security Standard.
pub const RESTRICTED_TYPES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The mount propagations of an unprivileged container (Bidirectional needs a privileged one).
const PROPAGATIONS: [&str; 2] = ["HostToContainer", "None"];

/// Both fields of `spec`.
pub fn rules(root: &Path, spec: &NovaSpec, errors: &mut Violations) {
    let declared = volumes(
        &root.child("extraVolumes"),
        spec.extra_volumes.as_deref().unwrap_or_default(),
        errors,
    );
    if let Some(mounts) = &spec.extra_volume_mounts {
        self::mounts(&root.child("extraVolumeMounts"), mounts, &declared, errors);
    }
}

/// Each volume's name and type; the names declared.
fn volumes<'a>(path: &Path, volumes: &'a [Volume], errors: &mut Violations) -> BTreeSet<&'a str> {
    let mut declared = BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let item = path.index(i);
        let name = item.child("name");
        let value = volume.name.as_str();
        if value.is_empty() {
            errors.push(FieldError::required(name, ""));
        } else {
            for msg in grammar::dns1123_label(value) {
                errors.push(FieldError::invalid(name, value, msg));
            }
            if OPERATOR_VOLUMES.contains(&value) {
                errors.push(FieldError::invalid(
                    name,
                    value,
                    "the operator's own volume of this name is in every pod the Nova runs",
                ));
            }
            if !declared.insert(value) {
                errors.push(FieldError::duplicate(name, value));
            }
        }
        volume_type(&item, volume, errors);
    }
    declared
}

/// Exactly one volume type, one the restricted standard allows.
fn volume_type(path: &Path, volume: &Volume, errors: &mut Violations) {
    let json = serde_json::to_value(volume).unwrap_or_default();
    let types: Vec<&str> = json
        .as_object()
        .into_iter()
        .flat_map(|fields| fields.keys())
        .map(String::as_str)
        .filter(|key| *key != "name")
        .collect();
    let Some((first, more)) = types.split_first() else {
        errors.push(FieldError::required(path, "must specify a volume type"));
        return;
    };
    for extra in more {
        errors.push(FieldError::forbidden(
            path.child(extra),
            "may not specify more than 1 volume type",
        ));
    }
    if !RESTRICTED_TYPES.contains(first) {
        errors.push(FieldError::forbidden(
            path.child(first),
            format!(
                "the Nova's pods keep the restricted Pod Security Standard, which allows only {} volumes",
                RESTRICTED_TYPES.join(", ")
            ),
        ));
    }
}

fn mounts(path: &Path, mounts: &[VolumeMount], declared: &BTreeSet<&str>, errors: &mut Violations) {
    let mut paths = BTreeSet::new();
    for (i, mount) in mounts.iter().enumerate() {
        let item = path.index(i);
        let name = item.child("name");
        if mount.name.is_empty() {
            errors.push(FieldError::required(name, ""));
        } else if !declared.contains(mount.name.as_str()) {
            errors.push(FieldError::not_found(name, mount.name.as_str()));
        }
        mount_path(
            &item.child("mountPath"),
            &mount.mount_path,
            &mut paths,
            errors,
        );
        if let Some(sub) = mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
            sub_path(&item.child("subPath"), sub, errors);
            if mount
                .sub_path_expr
                .as_deref()
                .is_some_and(|e| !e.is_empty())
            {
                errors.push(FieldError::invalid(
                    item.child("subPathExpr"),
                    mount.sub_path_expr.as_deref().unwrap_or_default(),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
        }
        if let Some(propagation) = mount.mount_propagation.as_deref()
            && !PROPAGATIONS.contains(&propagation)
        {
            errors.push(FieldError::not_supported(
                item.child("mountPropagation"),
                propagation,
                &PROPAGATIONS,
            ));
        }
    }
}

/// An absolute path without `..`, unique among the mounts, off the operator's directories.
fn mount_path<'a>(
    path: &Path,
    value: &'a str,
    seen: &mut BTreeSet<Vec<&'a str>>,
    errors: &mut Violations,
) {
    if value.is_empty() {
        errors.push(FieldError::required(path, ""));
        return;
    }
    if !value.starts_with('/') {
        errors.push(FieldError::invalid(path, value, "must be an absolute path"));
    }
    parent_free(path, value, errors);
    if let Some(owned) = operator_path(value) {
        errors.push(FieldError::invalid(
            path,
            value,
            format!("must not be at or under {owned}, which the operator mounts or runs from"),
        ));
    }
    if !seen.insert(segments(value).collect()) {
        errors.push(FieldError::invalid(path, value, "must be unique"));
    }
}

/// The API server's `validateLocalDescendingPath`.
fn sub_path(path: &Path, value: &str, errors: &mut Violations) {
    if value.starts_with('/') {
        errors.push(FieldError::invalid(path, value, "must be a relative path"));
    }
    parent_free(path, value, errors);
}

fn parent_free(path: &Path, value: &str, errors: &mut Violations) {
    if value.split('/').any(|s| s == "..") {
        errors.push(FieldError::invalid(path, value, "must not contain '..'"));
    }
}
