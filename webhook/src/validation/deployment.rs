//! Pod-level rules: DeploymentSpec, node placement, tolerations, resources, priority classes,
//! vertical and horizontal autoscaling, and the jobs block (`common-types.md` Part 1).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nova_api::defaults::DEFAULT_PRE_STOP_SECONDS;
use nova_api::v1alpha1::{
    AutoscalingSpec, DeploymentSpec, JobSpec, NodePlacementSpec, UWSGISpec, VerticalAutoscalingSpec,
};
use serde_json::Value;

use super::common::floor;
use super::{behavior, probes, quantity};
use crate::field::{BadValue, FieldError, Path, Violations, go_quote};
use crate::grammar;
use crate::lookups::{Lookups, PriorityClassLookup};

/// Go's `%v` of a `map[string]string`: `map[k1:v1 k2:v2]`, keys sorted.
fn go_map(map: &BTreeMap<String, String>) -> String {
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", entries.join(" "))
}

/// One deployment block and what it is measured against.
pub struct Block<'a> {
    /// `spec.<block>.deployment`.
    pub path: Path<'a>,
    /// The block.
    pub deployment: &'a DeploymentSpec,
    /// The grace period the block resolves to when unset (200 for the scheduler and conductor).
    pub default_grace: i64,
    /// The component the block's Deployment selects on.
    pub component: &'a str,
}

/// Every DeploymentSpec rule on one block.
pub fn deployment(cr_name: &str, block: &Block<'_>, lookups: &Lookups, errors: &mut Violations) {
    let d = block.deployment;
    let p = &block.path;
    floor(
        p,
        "replicas",
        d.replicas,
        1,
        "replicas must be at least 1",
        errors,
    );
    floor(
        p,
        "terminationGracePeriodSeconds",
        d.termination_grace_period_seconds,
        10,
        "terminationGracePeriodSeconds must be at least 10",
        errors,
    );
    if let Some(s) = d.pre_stop_sleep_seconds
        && s < 0
    {
        errors.push(FieldError::invalid(
            p.child("preStopSleepSeconds"),
            s,
            "preStopSleepSeconds must be non-negative",
        ));
    }
    let grace = d
        .termination_grace_period_seconds
        .unwrap_or(block.default_grace);
    let pre_stop = d.pre_stop_sleep_seconds.unwrap_or(DEFAULT_PRE_STOP_SECONDS);
    if pre_stop >= grace {
        errors.push(FieldError::invalid(
            p.child("preStopSleepSeconds"),
            pre_stop,
            format!("preStopSleepSeconds ({pre_stop}) must be strictly less than terminationGracePeriodSeconds ({grace})"),
        ));
    }
    if let Some(strategy) = &d.strategy
        && strategy.type_.as_deref() == Some("Recreate")
        && strategy.rolling_update.is_some()
    {
        errors.push(FieldError::forbidden(
            p.child("strategy").child("rollingUpdate"),
            "rollingUpdate must not be set when strategy.type is Recreate",
        ));
    }
    if let Some(resources) = &d.resources {
        requests_within_limits(&p.child("resources"), resources, errors);
    }
    if let Some(pc) = d.priority_class_name.as_deref()
        && !pc.is_empty()
    {
        priority_class(&p.child("priorityClassName"), pc, lookups, errors);
    }
    if let Some(tscs) = &d.topology_spread_constraints {
        topology_spread(
            &p.child("topologySpreadConstraints"),
            tscs,
            &nova_api::labels::selector(cr_name, block.component),
            errors,
        );
    }
    placement(p, &d.placement, errors);
    if let Some(vpa) = &d.vertical_autoscaling {
        vertical_autoscaling(&p.child("verticalAutoscaling"), vpa, errors);
    }
    if let Some(timing) = &d.probes {
        probes::rules(&p.child("probes"), timing, block.component, errors);
    }
}

/// A uWSGI harakiri must end strictly inside the drain window of the deployment block it runs
/// in (the block's grace period minus its preStop sleep, each resolved when unset).
pub fn harakiri(
    uwsgi_path: &Path,
    uwsgi: &UWSGISpec,
    d: Option<&DeploymentSpec>,
    default_grace: i64,
    errors: &mut Violations,
) {
    let Some(h) = uwsgi.harakiri else { return };
    let grace = d
        .and_then(|d| d.termination_grace_period_seconds)
        .unwrap_or(default_grace);
    let pre_stop = d
        .and_then(|d| d.pre_stop_sleep_seconds)
        .unwrap_or(DEFAULT_PRE_STOP_SECONDS);
    let drain = grace - pre_stop;
    if i64::from(h) >= drain {
        errors.push(FieldError::invalid(
            uwsgi_path.child("harakiri"),
            h,
            format!("harakiri ({h}) must be strictly less than terminationGracePeriodSeconds - preStopSleepSeconds ({drain})"),
        ));
    }
}

/// Every quantity parses, and every request of a resource that also has a limit does not
/// exceed it.
pub fn requests_within_limits(
    path: &Path,
    resources: &ResourceRequirements,
    errors: &mut Violations,
) {
    let requests = parsed(&path.child("requests"), resources.requests.as_ref(), errors);
    let limits = parsed(&path.child("limits"), resources.limits.as_ref(), errors);
    for (res, (r, request)) in requests {
        if let Some((l, limit)) = limits.get(res)
            && r > *l
        {
            errors.push(FieldError::invalid(
                path.child("requests").child(res),
                request,
                format!("{res} request must not exceed limit ({limit})"),
            ));
        }
    }
}

/// The quantities of a resource map that parse, by resource, each beside its text; one that
/// does not is reported on `path.<resource>`.
fn parsed<'a>(
    path: &Path,
    map: Option<&'a BTreeMap<String, Quantity>>,
    errors: &mut Violations,
) -> BTreeMap<&'a str, (f64, &'a str)> {
    map.into_iter()
        .flatten()
        .filter_map(|(res, q)| {
            quantity::checked(&path.child(res), &q.0, errors)
                .map(|v| (res.as_str(), (v, q.0.as_str())))
        })
        .collect()
}

/// The PriorityClass must exist; an unreachable API server fails closed on this field.
pub fn priority_class(path: &Path, name: &str, lookups: &Lookups, errors: &mut Violations) {
    match lookups.priority_class(name) {
        None | Some(PriorityClassLookup::Exists) => {}
        Some(PriorityClassLookup::NotFound) => errors.push(FieldError::not_found(path, name)),
        Some(PriorityClassLookup::Unavailable(why)) => errors.push(FieldError::internal(
            path,
            format!(
                "cannot verify that PriorityClass {} exists: {why}",
                go_quote(name)
            ),
        )),
    }
}

fn topology_spread(
    path: &Path,
    tscs: &[TopologySpreadConstraint],
    selector: &BTreeMap<String, String>,
    errors: &mut Violations,
) {
    for (i, tsc) in tscs.iter().enumerate() {
        let at = path.index(i);
        let sel_path = at.child("labelSelector");
        let Some(sel) = &tsc.label_selector else {
            errors.push(FieldError::required(
                sel_path,
                "labelSelector is required on each TopologySpreadConstraint",
            ));
            continue;
        };
        let match_labels = sel.match_labels.clone().unwrap_or_default();
        if &match_labels != selector {
            let value = serde_json::to_value(&match_labels).unwrap_or(Value::Null);
            errors.push(FieldError::invalid(
                sel_path.child("matchLabels"),
                BadValue::Json(value),
                format!(
                    "labelSelector.matchLabels must equal the Deployment selector labels {}",
                    go_map(selector)
                ),
            ));
        }
        if sel
            .match_expressions
            .as_ref()
            .is_some_and(|e| !e.is_empty())
        {
            errors.push(FieldError::invalid_omitted(
                sel_path.child("matchExpressions"),
                "matchExpressions are not allowed; labelSelector must use matchLabels only",
            ));
        }
    }
}

/// The node selector grammar and the toleration rules of a placement block.
pub fn placement(path: &Path, placement: &NodePlacementSpec, errors: &mut Violations) {
    if let Some(selector) = &placement.node_selector {
        node_selector(&path.child("nodeSelector"), selector, errors);
    }
    if let Some(tolerations) = &placement.tolerations {
        self::tolerations(&path.child("tolerations"), tolerations, errors);
    }
}

/// Label keys (qualified names, errors on the map with the key as value) and label values
/// (errors on `[key]`), keys in sorted order.
pub fn node_selector(path: &Path, selector: &BTreeMap<String, String>, errors: &mut Violations) {
    for (key, value) in selector {
        for msg in grammar::qualified_name(key) {
            errors.push(FieldError::invalid(path, key, msg));
        }
        for msg in grammar::label_value(value) {
            errors.push(FieldError::invalid(path.key(key), value, msg));
        }
    }
}

const OPERATORS: [&str; 4] = ["Equal", "Exists", "Lt", "Gt"];
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The API server's toleration rules.
pub fn tolerations(path: &Path, tolerations: &[Toleration], errors: &mut Violations) {
    for (i, t) in tolerations.iter().enumerate() {
        let p = path.index(i);
        let key = t.key.as_deref().unwrap_or("");
        let operator = t.operator.as_deref().unwrap_or("");
        let value = t.value.as_deref().unwrap_or("");
        let effect = t.effect.as_deref().unwrap_or("");
        if !key.is_empty() {
            for msg in grammar::qualified_name(key) {
                errors.push(FieldError::invalid(p.child("key"), key, msg));
            }
        }
        if key.is_empty() && operator != "Exists" {
            errors.push(FieldError::invalid(
                p.child("operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errors.push(FieldError::invalid(
                p.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "" | "Equal" => {
                let msgs = grammar::label_value(value);
                if !msgs.is_empty() {
                    errors.push(FieldError::invalid(p.child("value"), value, msgs.join(";")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errors.push(FieldError::invalid(
                        p.child("value"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            "Lt" | "Gt" => {
                let digits = value.strip_prefix('-').unwrap_or(value);
                if digits.is_empty()
                    || !digits.bytes().all(|b| b.is_ascii_digit())
                    || value.parse::<i64>().is_err()
                {
                    errors.push(FieldError::invalid(
                        p.child("value"),
                        value,
                        "value must be an integer when `operator` is 'Lt' or 'Gt'",
                    ));
                }
            }
            other => errors.push(FieldError::not_supported(
                p.child("operator"),
                other,
                &OPERATORS,
            )),
        }
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            errors.push(FieldError::not_supported(
                p.child("effect"),
                effect,
                &EFFECTS,
            ));
        }
    }
}

const VPA_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// A VerticalAutoscalingSpec (the updateMode enum is checked on the raw object).
pub fn vertical_autoscaling(path: &Path, vpa: &VerticalAutoscalingSpec, errors: &mut Violations) {
    let min = vpa_bounds(&path.child("minAllowed"), vpa.min_allowed.as_ref(), errors);
    let max = vpa_bounds(&path.child("maxAllowed"), vpa.max_allowed.as_ref(), errors);
    for (res, (lo, shown)) in min {
        if max.get(res).is_some_and(|(hi, _)| lo > *hi) {
            errors.push(FieldError::invalid(
                path.child("minAllowed").key(res),
                shown,
                "must not exceed maxAllowed",
            ));
        }
    }
    floor(
        path,
        "minReplicas",
        vpa.min_replicas,
        1,
        "must be at least 1",
        errors,
    );
}

/// The parsed bounds of a VPA bound map (`path[cpu]`, `path[memory]`); a key outside the two is
/// not supported and a quantity that does not parse is reported.
fn vpa_bounds<'a>(
    path: &Path,
    map: Option<&'a BTreeMap<String, Quantity>>,
    errors: &mut Violations,
) -> BTreeMap<&'a str, (f64, &'a str)> {
    let mut parsed = BTreeMap::new();
    for (res, q) in map.into_iter().flatten() {
        if !VPA_RESOURCES.contains(&res.as_str()) {
            errors.push(FieldError::not_supported(
                path.key(res),
                res,
                &VPA_RESOURCES,
            ));
        } else if let Some(v) = quantity::checked(&path.key(res), &q.0, errors) {
            parsed.insert(res.as_str(), (v, q.0.as_str()));
        }
    }
    parsed
}

/// The jobs block: requests within limits, an existing PriorityClass, node placement.
pub fn jobs(path: &Path, jobs: &JobSpec, lookups: &Lookups, errors: &mut Violations) {
    if let Some(resources) = &jobs.resources {
        requests_within_limits(&path.child("resources"), resources, errors);
    }
    if let Some(pc) = jobs.priority_class_name.as_deref()
        && !pc.is_empty()
    {
        priority_class(&path.child("priorityClassName"), pc, lookups, errors);
    }
    placement(path, &jobs.placement, errors);
}

/// spec.autoscaling: bounds, targets, the implicit minimum and the target-request rule.
pub fn autoscaling(
    path: &Path,
    a: &AutoscalingSpec,
    api_deployment: Option<&DeploymentSpec>,
    errors: &mut Violations,
) {
    if a.max_replicas < 1 {
        errors.push(FieldError::invalid(
            path.child("maxReplicas"),
            a.max_replicas,
            "maxReplicas must be at least 1",
        ));
    }
    if let Some(min) = a.min_replicas {
        if min < 1 {
            errors.push(FieldError::invalid(
                path.child("minReplicas"),
                min,
                "minReplicas must be at least 1",
            ));
        }
        if min > a.max_replicas {
            errors.push(FieldError::invalid(
                path.child("minReplicas"),
                min,
                "minReplicas must not exceed maxReplicas",
            ));
        }
    } else {
        let replicas = api_deployment
            .and_then(|d| d.replicas)
            .filter(|r| *r > 0)
            .unwrap_or(3);
        if a.max_replicas >= 1 && a.max_replicas < replicas {
            errors.push(FieldError::invalid(
                path.child("maxReplicas"),
                a.max_replicas,
                format!(
                    "maxReplicas must be >= spec.api.deployment.replicas ({replicas}) when minReplicas is not set, because minReplicas defaults to spec.api.deployment.replicas"
                ),
            ));
        }
    }
    let targets = [
        ("targetCPUUtilization", a.target_cpu_utilization, "cpu"),
        (
            "targetMemoryUtilization",
            a.target_memory_utilization,
            "memory",
        ),
    ];
    for (field, target, _) in targets {
        if let Some(t) = target
            && !(1..=100).contains(&t)
        {
            errors.push(FieldError::invalid(
                path.child(field),
                t,
                format!("{field} must be between 1 and 100"),
            ));
        }
    }
    if a.target_cpu_utilization.is_none() && a.target_memory_utilization.is_none() {
        errors.push(FieldError::required(
            path,
            "at least one of targetCPUUtilization or targetMemoryUtilization must be set",
        ));
    }
    if let Some(b) = &a.behavior {
        behavior::behavior(&path.child("behavior"), b, errors);
    }
    let resources = api_deployment.and_then(|d| d.resources.as_ref());
    let res_path = Path::new("spec.api.deployment.resources");
    for (field, target, res) in targets {
        if target.is_none() {
            continue;
        }
        let target_field = format!("{path}.{field}");
        let request = resources
            .and_then(|r| r.requests.as_ref())
            .and_then(|m| m.get(res));
        let limit = resources
            .and_then(|r| r.limits.as_ref())
            .and_then(|m| m.get(res));
        match (request, limit) {
            (Some(q), _) => {
                if quantity::parse(&q.0).is_ok_and(|v| v <= 0.0) {
                    errors.push(FieldError::invalid(
                        res_path.child("requests").child(res),
                        &q.0,
                        format!("{res} request must be greater than zero while {target_field} is set: the HorizontalPodAutoscaler divides the pods' usage by the sum of their containers' requests"),
                    ));
                }
            }
            (None, Some(q)) => {
                if quantity::parse(&q.0).is_ok_and(|v| v <= 0.0) {
                    errors.push(FieldError::invalid(
                        res_path.child("limits").child(res),
                        &q.0,
                        format!("{res} limit must be greater than zero while {target_field} is set: without a request the API server copies the limit into the request, and the HorizontalPodAutoscaler divides the pods' usage by the sum of their containers' requests"),
                    ));
                }
            }
            (None, None) => {}
        }
    }
}
