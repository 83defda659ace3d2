//! Decoding an admission object into its kind, and, when it does not decode, the field errors
//! the API server itself would have reported: `spec.gateway.hostname: Required value`, not a
//! decoder message with a line and column. The installed CRD and the webhook's types can
//! differ (an upgrade in progress, an older CRD, a field the schema leaves optional), and then
//! this text is what a `kubectl apply` user reads.
//!
//! The fast path is one typed decode from the borrowed body. Only an object that fails it is
//! decoded again, as a `serde_json::Value` and with the path tracked, once per error: each
//! offending value is removed and the decode retried, so every field that does not decode is
//! named in one response, the way the API server lists every schema violation.

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::field::{BadValue, FieldError};

/// The most field errors one undecodable object reports.
const MAX_ERRORS: usize = 32;

/// Why an object does not decode.
#[derive(Clone, Debug, PartialEq)]
pub enum Undecodable {
    /// It is JSON, but fields do not fit the types: one error per field (a 422).
    Fields(Vec<FieldError>),
    /// It is not JSON at all (a 400, with the decoder's message).
    Malformed(String),
}

/// Decodes `raw` into `K`, boxed: a Nova is several kilobytes, and a review's future moves
/// what it holds.
pub fn decode<K: DeserializeOwned>(raw: &str) -> Result<Box<K>, Undecodable> {
    let e = match serde_json::from_str(raw) {
        Ok(k) => return Ok(Box::new(k)),
        Err(e) => e,
    };
    // The streaming decoder reports some type mismatches (a number where an enum's string
    // belongs) as syntax errors, so whether this is JSON at all is asked of the JSON itself.
    match serde_json::from_str::<Value>(raw) {
        Ok(value) => {
            let errors = field_errors::<K>(value);
            if errors.is_empty() {
                Err(Undecodable::Malformed(e.to_string()))
            } else {
                Err(Undecodable::Fields(errors))
            }
        }
        Err(_) => Err(Undecodable::Malformed(e.to_string())),
    }
}

/// Every field of `value` that does not decode into `K`, in the order the decoder meets them.
fn field_errors<K: DeserializeOwned>(mut value: Value) -> Vec<FieldError> {
    let mut errors: Vec<FieldError> = Vec::new();
    while errors.len() < MAX_ERRORS {
        let Err(e) = serde_path_to_error::deserialize::<_, K>(&value) else {
            break;
        };
        let segments: Vec<&Segment> = e.path().iter().collect();
        let message = e.inner().to_string();
        let at = pointer(&value, &segments);
        let (error, removable) = field_error(&render(&segments), &message, at);
        // A required field whose bad value was removed is reported once, as that value.
        if errors.iter().any(|seen| seen.field == error.field) {
            break;
        }
        errors.push(error);
        if !removable || !remove(&mut value, &segments) {
            break;
        }
    }
    errors
}

/// The field error of one decoder message at `path`, and whether removing the value lets the
/// decode go on to the next error (a missing field cannot be removed).
fn field_error(path: &str, message: &str, at: Option<&Value>) -> (FieldError, bool) {
    let quoted =
        |s: &str| -> Vec<String> { s.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
    if let Some(rest) = message.strip_prefix("missing field ") {
        let field = quoted(rest).pop().unwrap_or_default();
        return (FieldError::required(join(path, &field), ""), false);
    }
    let shown = at.map_or(BadValue::Omitted, |v| bad_value(path, v));
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (_, expected) = rest.split_once("expected").unwrap_or(("", ""));
        let supported = quoted(expected);
        let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
        return (FieldError::not_supported(path, shown, &supported), true);
    }
    let detail = match message.split_once(", expected ") {
        Some((_, expected)) => format!("must be of type {}", json_type(expected)),
        None => message.to_owned(),
    };
    (FieldError::invalid(path, shown, detail), true)
}

/// The JSON type serde's `expected` text names (`i32` → `integer`, `a sequence` → `array`).
fn json_type(expected: &str) -> &str {
    let e = expected.trim_start_matches("a ").trim_start_matches("an ");
    match e {
        _ if e.starts_with(['i', 'u']) && e[1..].bytes().all(|b| b.is_ascii_digit()) => "integer",
        "f32" | "f64" => "number",
        "boolean" => "boolean",
        "string" | "borrowed string" | "string or map" | "char" => "string",
        "sequence" | "tuple" => "array",
        _ if e.starts_with("struct ") || e.starts_with("map") || e.starts_with("enum ") => "object",
        other => other,
    }
}

/// The offending value as the API server shows it; containers and anything under
/// `spec.extraConfig` (which may carry credentials) are not shown.
fn bad_value(path: &str, v: &Value) -> BadValue {
    if path.starts_with("spec.extraConfig") {
        return BadValue::Omitted;
    }
    match v {
        Value::String(s) => BadValue::Str(s.clone()),
        Value::Number(n) => n.as_i64().map_or(BadValue::Json(v.clone()), BadValue::Int),
        Value::Bool(b) => BadValue::Bool(*b),
        Value::Null => BadValue::Json(Value::Null),
        Value::Array(_) | Value::Object(_) => BadValue::Omitted,
    }
}

/// `spec.a[0].b` of the segments; an empty path for the object itself.
fn render(segments: &[&Segment]) -> String {
    let mut out = String::new();
    for s in segments {
        match s {
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Seq { index } => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
            Segment::Unknown => out.push_str(".?"),
        }
    }
    out
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

fn pointer<'v>(value: &'v Value, segments: &[&Segment]) -> Option<&'v Value> {
    segments.iter().try_fold(value, |v, s| match s {
        Segment::Map { key } => v.get(key.as_str()),
        Segment::Seq { index } => v.get(*index),
        Segment::Enum { .. } | Segment::Unknown => None,
    })
}

/// Removes the value the segments lead to: an object member is dropped, an array element is
/// nulled (so later indices keep their numbers). False when there is nothing to remove.
fn remove(value: &mut Value, segments: &[&Segment]) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut node = value;
    for s in parents {
        node = match (s, node) {
            (Segment::Map { key }, Value::Object(m)) => match m.get_mut(key.as_str()) {
                Some(next) => next,
                None => return false,
            },
            (Segment::Seq { index }, Value::Array(a)) => match a.get_mut(*index) {
                Some(next) => next,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, node) {
        (Segment::Map { key }, Value::Object(m)) => m.remove(key.as_str()).is_some(),
        (Segment::Seq { index }, Value::Array(a)) => match a.get_mut(*index) {
            Some(slot) if !slot.is_null() => {
                *slot = Value::Null;
                true
            }
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use nova_api::v1alpha1::{Nova, NovaCompute};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::validation::testing;

    fn nova_with(edit: impl FnOnce(&mut Value)) -> String {
        let mut v = serde_json::to_value(testing::nova()).unwrap();
        edit(&mut v);
        v.to_string()
    }

    fn errors_of<K: DeserializeOwned>(raw: &str) -> Vec<String> {
        match decode::<K>(raw) {
            Ok(_) => Vec::new(),
            Err(Undecodable::Fields(errs)) => errs.iter().map(ToString::to_string).collect(),
            Err(Undecodable::Malformed(m)) => vec![m],
        }
    }

    #[test]
    fn undecodable_fields_are_named_the_api_servers_way() {
        let cases: Vec<(String, Vec<&str>)> = vec![
            (
                nova_with(|v| {
                    v["spec"]["gateway"] = json!({"parentRef": {"name": "gw"}});
                }),
                vec!["spec.gateway.hostname: Required value"],
            ),
            (
                nova_with(|v| v["spec"]["api"]["deployment"]["replicas"] = json!("three")),
                vec![
                    r#"spec.api.deployment.replicas: Invalid value: "three": must be of type integer"#,
                ],
            ),
            (
                nova_with(|v| {
                    v["spec"]["logging"] = json!({"format": "xml", "level": "TRACE"});
                    v["spec"]["database"]["credentialsMode"] = json!("Sometimes");
                }),
                vec![
                    r#"spec.database.credentialsMode: Unsupported value: "Sometimes": supported values: "Static", "Dynamic""#,
                    r#"spec.logging.format: Unsupported value: "xml": supported values: "text", "json""#,
                    r#"spec.logging.level: Unsupported value: "TRACE": supported values: "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL""#,
                ],
            ),
            (
                nova_with(|v| v["spec"]["logging"] = json!({"format": 3})),
                vec!["spec.logging.format: Invalid value: 3: must be of type string"],
            ),
            (
                nova_with(|v| v["spec"]["extraConfig"] = json!({"DEFAULT": {"debug": 1}})),
                vec!["spec.extraConfig.DEFAULT.debug: Invalid value: must be of type string"],
            ),
            (
                nova_with(|v| {
                    v["spec"]
                        .as_object_mut()
                        .unwrap()
                        .remove("image")
                        .map(drop)
                        .unwrap()
                }),
                vec!["spec.image: Required value"],
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(errors_of::<Nova>(&raw), want, "{raw}");
        }
        let pool = json!({
            "apiVersion": "nova.openstack.c5c3.io/v1alpha1", "kind": "NovaCompute",
            "metadata": {"name": "p"},
            "spec": {"novaRef": {"name": "nova"}, "nodeSelector": {"a": "b"},
                     "verticalAutoscaling": {"updateMode": "Sometimes"},
                     "libvirt": {"virtType": "xen"}}
        });
        assert_eq!(
            errors_of::<NovaCompute>(&pool.to_string()),
            vec![
                r#"spec.libvirt.virtType: Unsupported value: "xen": supported values: "kvm", "qemu""#,
                r#"spec.verticalAutoscaling.updateMode: Unsupported value: "Sometimes": supported values: "Off", "Initial", "Recreate", "InPlaceOrRecreate", "Auto""#,
            ]
        );
        assert_eq!(
            decode::<Nova>("{\"spec\": "),
            Err(Undecodable::Malformed(
                "EOF while parsing a value at line 1 column 9".into()
            ))
        );
    }
}
