//! The validating webhook of the NovaCompute kind (`novacompute.md` §3.2–§3.5).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nova_api::names::NOVACOMPUTE_NAME_MAX;
use nova_api::owned_keys::{self, OwnedKey};
use nova_api::v1alpha1::{CpuMode, NovaCompute, NovaComputeSpec, UpdateStrategyType};
use serde_json::Value;

use super::{Operation, Outcome, common, deployment, extra_config, pod_metadata};
use crate::field::{BadValue, FieldError, Path, Violations};
use crate::grammar;
use crate::lookups::NovaRelease;

/// The owned-key registry of compute-pool.conf.
pub static REGISTRY: LazyLock<Vec<OwnedKey>> =
    LazyLock::new(|| owned_keys::novacompute().copied().collect());

/// The taint openstack-hypervisor-operator puts on a node it offboards.
pub const OFFBOARDING_TAINT: &str = "kvm.cloud.sap/offboarding";

/// Whether this admission runs the catalog check, and so needs the referenced Nova read.
pub fn needs_nova(new: &NovaCompute, old: Option<&NovaCompute>, operation: Operation) -> bool {
    let has_extra = new
        .spec
        .extra_config
        .as_ref()
        .is_some_and(|e| !e.is_empty());
    match operation {
        Operation::Create => has_extra,
        Operation::Update => {
            has_extra && old.is_none_or(|old| old.spec.extra_config != new.spec.extra_config)
        }
        _ => false,
    }
}

/// Validates a NovaCompute admission. `nova` is the referenced Nova, read by the caller
/// exactly when [`needs_nova`] says so (a read error fails the admission before this runs).
pub fn validate(
    new: &NovaCompute,
    old: Option<&NovaCompute>,
    operation: Operation,
    nova: Option<&NovaRelease>,
) -> Outcome {
    let mut out = Outcome::default();
    let old_spec = old
        .map(|o| &o.spec)
        .filter(|_| operation == Operation::Update);
    let spec = &new.spec;
    let root = Path::new("spec");
    let errors = &mut out.errors;
    let warnings = &mut out.warnings;
    let namespace = new.metadata.namespace.as_deref().unwrap_or("");

    // Rule 26: the catalog check, on create and when extraConfig changed.
    if let Some(extra) = spec.extra_config.as_ref().filter(|e| !e.is_empty()) {
        let changed = old_spec.is_none_or(|o| o.extra_config != spec.extra_config);
        if changed {
            match nova {
                Some(NovaRelease::Found(release)) => {
                    extra_config::catalog_check(extra, release, &REGISTRY, errors, warnings);
                }
                Some(NovaRelease::NotFound) => warnings.push(format!(
                    "extraConfig catalog check skipped: Nova {namespace}/{} not found",
                    spec.nova_ref.name
                )),
                None => {}
            }
        }
    }

    // Rule 1, CREATE only.
    if operation == Operation::Create {
        let name = new.metadata.name.as_deref().unwrap_or("");
        if name.len() > NOVACOMPUTE_NAME_MAX {
            errors.push(FieldError::invalid(
                "metadata.name",
                name,
                "name must be at most 63 characters: it is the app.kubernetes.io/instance label value of every child",
            ));
        }
    }

    // Rules 3–6.
    common::target_cluster(
        &root.child("targetClusterRef"),
        spec.target_cluster_ref.as_ref(),
        old_spec.map(|o| o.target_cluster_ref.as_ref()),
        errors,
    );
    if let Some(old) = old_spec
        && old.nova_ref.name != spec.nova_ref.name
    {
        errors.push(FieldError::invalid(
            root.child("novaRef").child("name"),
            &spec.nova_ref.name,
            "novaRef is immutable",
        ));
    }

    spec_rules(spec, errors);
    out
}

fn spec_rules(spec: &NovaComputeSpec, errors: &mut Violations) {
    let root = Path::new("spec");
    // Rule 2.
    if spec.nova_ref.name.is_empty() {
        errors.push(FieldError::required(
            root.child("novaRef").child("name"),
            "novaRef.name must be set (the Nova this node pool joins)",
        ));
    }
    // Rules 7, 8.
    if let Some(image) = &spec.image {
        common::image(&root.child("image"), image, errors);
    }
    if let Some(secrets) = &spec.image_pull_secrets {
        pod_metadata::pull_secrets(&root.child("imagePullSecrets"), secrets, "pool", errors);
    }
    // Rules 9–11.
    let selector_path = root.child("nodeSelector");
    if spec.node_selector.is_empty() {
        errors.push(FieldError::required(
            selector_path,
            "nodeSelector must carry at least one label",
        ));
    }
    deployment::node_selector(&selector_path, &spec.node_selector, errors);
    // Rule 12.
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        if t.toleration_seconds.is_none() && tolerates_offboarding(t) {
            errors.push(FieldError::invalid(
                root.child("tolerations").index(i),
                BadValue::Json(serde_json::to_value(t).unwrap_or(Value::Null)),
                "tolerates kvm.cloud.sap/offboarding:NoExecute; openstack-hypervisor-operator deletes the compute service only after every agent pod on the node is gone, and a nova-compute that stays re-registers it",
            ));
        }
    }
    // Rules 13–15.
    if let Some(strategy) = &spec.update_strategy
        && let Some(mu) = &strategy.max_unavailable
    {
        let strategy_path = root.child("updateStrategy");
        let path = strategy_path.child("maxUnavailable");
        let shown = BadValue::Json(serde_json::to_value(mu).unwrap_or(Value::Null));
        if strategy.type_ == Some(UpdateStrategyType::OnDelete) {
            errors.push(FieldError::invalid(
                path,
                shown,
                "maxUnavailable applies to RollingUpdate only",
            ));
        } else {
            match scaled_max_unavailable(mu) {
                None => errors.push(FieldError::invalid(
                    path,
                    shown,
                    "maxUnavailable must be an integer or a percentage such as \"25%\"",
                )),
                Some(n) if n < 1 => errors.push(FieldError::invalid(
                    path,
                    shown,
                    "maxUnavailable must resolve to at least 1 for RollingUpdate",
                )),
                Some(_) => {}
            }
        }
    }
    // The quantities the DaemonSet carries: each parses, no request above its limit (the API
    // server refuses either in the DaemonSet the operator applies).
    if let Some(resources) = &spec.resources {
        deployment::requests_within_limits(&root.child("resources"), resources, errors);
    }
    // Rules 16–19 (16, the updateMode enum, when the object is decoded).
    if let Some(vpa) = &spec.vertical_autoscaling {
        deployment::vertical_autoscaling(&root.child("verticalAutoscaling"), vpa, errors);
    }
    // Rule 20.
    if let Some(libvirt) = &spec.libvirt {
        let custom = libvirt.cpu_mode == Some(CpuMode::Custom);
        let has_models = libvirt.cpu_models.as_ref().is_some_and(|m| !m.is_empty());
        if custom != has_models {
            errors.push(FieldError::invalid_omitted(
                root.child("libvirt").child("cpuModels"),
                "cpuModels is required when cpuMode is custom and must be empty otherwise",
            ));
        }
    }
    // Rules 21–25.
    if let Some(extra) = &spec.extra_config {
        extra_config::guards(extra, &REGISTRY, errors);
    }
    // The traits rules.
    for (i, t) in spec.traits.iter().flatten().enumerate() {
        trait_name(&root.child("traits").index(i), t, errors);
    }
    let mut nodes = BTreeSet::new();
    let host_traits = root.child("hostTraits");
    for (i, ht) in spec.host_traits.iter().flatten().enumerate() {
        let p = host_traits.index(i);
        if ht.node.is_empty() {
            errors.push(FieldError::required(p.child("node"), "node must be set"));
        } else {
            for msg in grammar::dns1123_subdomain(&ht.node) {
                errors.push(FieldError::invalid(p.child("node"), &ht.node, msg));
            }
            if !nodes.insert(ht.node.as_str()) {
                errors.push(FieldError::duplicate(p.child("node"), &ht.node));
            }
        }
        if ht.traits.is_empty() {
            errors.push(FieldError::required(
                p.child("traits"),
                "traits must name at least one trait",
            ));
        }
        for (j, t) in ht.traits.iter().enumerate() {
            trait_name(&p.child("traits").index(j), t, errors);
        }
    }
}

fn trait_name(path: &Path, name: &str, errors: &mut Violations) {
    let ok = name.len() <= 255
        && name.strip_prefix("CUSTOM_").is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        });
    if !ok {
        errors.push(FieldError::invalid(
            path,
            name,
            "must be a custom trait: CUSTOM_ followed by upper-case letters, digits or underscores, at most 255 characters",
        ));
    }
}

/// Kubernetes' toleration matching against the offboarding taint (empty value, NoExecute).
fn tolerates_offboarding(t: &Toleration) -> bool {
    let effect = t.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != "NoExecute" {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != OFFBOARDING_TAINT {
        return false;
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("").is_empty(),
        "Exists" => true,
        _ => false,
    }
}

/// maxUnavailable scaled against 100 and rounded up; None when unparseable.
fn scaled_max_unavailable(mu: &IntOrString) -> Option<i64> {
    match mu {
        IntOrString::Int(i) => Some(i64::from(*i)),
        IntOrString::String(s) => {
            // strconv.Atoi of the part before "%"; ceil(p * 100 / 100) = p.
            s.strip_suffix('%')?.parse::<i64>().ok()
        }
    }
}

#[cfg(test)]
#[path = "novacompute_tests.rs"]
mod tests;
