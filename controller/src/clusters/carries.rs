//! Whether a live object already carries exactly what an apply would write, so the apply can be
//! skipped (`DESIGN.md` principle 3).
//!
//! Two things must hold. The values: every field of the desired object has the same value in
//! the live object (maps may hold more keys that other managers own; an atomic list must be
//! equal, element by element; an associative list must hold every desired element). And the
//! field set: the fields this operator's field manager owns (its `Apply` entry in
//! `metadata.managedFields`) are exactly the fields of the desired object, so a field the
//! operator stopped writing (a dropped label, a removed data key) is released by the next
//! apply instead of lingering. A live object without such an entry (created by an older
//! version with create/replace, or by someone else) is never carried: the first apply takes it
//! over.

use serde_json::{Map, Value};

/// The `fieldsV1` of `manager`'s `Apply` entry on the main resource, when the live object has one.
pub fn applied_fields<'a>(live: &'a Value, manager: &str) -> Option<&'a Map<String, Value>> {
    live["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|entry| {
            entry["manager"] == manager
                && entry["operation"] == "Apply"
                && entry["subresource"].as_str().unwrap_or_default().is_empty()
        })?
        .get("fieldsV1")?
        .as_object()
}

/// Whether `live` carries `desired` (an apply body: apiVersion, kind, metadata with name and
/// namespace, and the managed fields) with exactly the fields `manager` owns.
pub fn carries(live: &Value, desired: &Value, manager: &str) -> bool {
    let Some(fields) = applied_fields(live, manager) else {
        return false;
    };
    let mut desired = desired.clone();
    if let Some(top) = desired.as_object_mut() {
        // Identity, not managed fields: the server never lists them in fieldsV1.
        top.remove("apiVersion");
        top.remove("kind");
        if let Some(meta) = top.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("name");
            meta.remove("namespace");
            if meta.is_empty() {
                top.remove("metadata");
            }
        }
    }
    node(&desired, live, Some(fields))
}

/// Whether `live` holds every value of `desired` (maps may hold more keys, lists are compared
/// element by element), whoever owns the fields: whether a read object already reflects a
/// desired part of it, such as a pod template.
pub fn holds_values(live: &Value, desired: &Value) -> bool {
    node(desired, live, None)
}

/// The managed field names of one fieldsV1 node (`f:<name>` entries; `.` marks the node itself).
fn field_names(fields: &Map<String, Value>) -> impl Iterator<Item = &str> {
    fields.keys().filter_map(|k| k.strip_prefix("f:"))
}

/// How many list members one fieldsV1 list node owns (`k:` associative keys, `v:` set values,
/// `i:` indices); zero for an atomic list, which is owned whole.
fn list_members(fields: &Map<String, Value>) -> usize {
    fields
        .keys()
        .filter(|k| k.starts_with("k:") || k.starts_with("v:") || k.starts_with("i:"))
        .count()
}

fn node(desired: &Value, live: &Value, fields: Option<&Map<String, Value>>) -> bool {
    match desired {
        Value::Object(wanted) => {
            let Value::Object(have) = live else {
                return false;
            };
            let present: Vec<(&String, &Value)> =
                wanted.iter().filter(|(_, v)| !v.is_null()).collect();
            if let Some(fields) = fields {
                let mut owned: Vec<&str> = field_names(fields).collect();
                let mut wanted_names: Vec<&str> = present.iter().map(|(k, _)| k.as_str()).collect();
                owned.sort_unstable();
                wanted_names.sort_unstable();
                if owned != wanted_names {
                    return false;
                }
            }
            present.into_iter().all(|(key, value)| {
                have.get(key).is_some_and(|live_value| {
                    let child = match fields
                        .and_then(|f| f.get(&format!("f:{key}")))
                        .and_then(Value::as_object)
                    {
                        // A leaf: a scalar, or an atomic map or struct (a label selector),
                        // which the manager owns whole; its value is compared as it is.
                        Some(leaf) if leaf.is_empty() => None,
                        Some(owned) => Some(owned),
                        // A field the manager does not own.
                        None => fields.map(|_| &*EMPTY),
                    };
                    node(value, live_value, child)
                })
            })
        }
        Value::Array(wanted) => {
            let Value::Array(have) = live else {
                return false;
            };
            match fields.map(list_members) {
                // Associative or set list: we own as many members as we want, each present.
                Some(owned) if owned > 0 => {
                    owned == wanted.len()
                        && wanted.iter().all(|w| have.iter().any(|h| node(w, h, None)))
                }
                // Atomic list (or inside a list member): equal, element by element.
                _ => {
                    have.len() == wanted.len()
                        && wanted.iter().zip(have).all(|(w, h)| node(w, h, None))
                }
            }
        }
        scalar => scalar == live,
    }
}

/// A fieldsV1 node with no children (a leaf the manager owns).
static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MANAGER: &str = "cobaltcore-operator";

    fn live(object: Value, fields: Value) -> Value {
        let mut object = object;
        object["metadata"]["managedFields"] = json!([
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {"f:other": {}}}}},
            {"manager": MANAGER, "operation": "Apply", "fieldsV1": fields}
        ]);
        object
    }

    fn desired() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "n", "namespace": "ns", "labels": {"a": "1"},
                         "ownerReferences": [{"uid": "u1", "kind": "Nova", "name": "nova", "apiVersion": "x/v1", "controller": true}]},
            "type": "Opaque",
            "data": {"connection": "ZHNu"}
        })
    }

    fn fields() -> Value {
        json!({
            "f:data": {".": {}, "f:connection": {}},
            "f:metadata": {"f:labels": {".": {}, "f:a": {}}, "f:ownerReferences": {".": {}, "k:{\"uid\":\"u1\"}": {}}},
            "f:type": {}
        })
    }

    fn live_secret() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "n", "namespace": "ns", "uid": "s1", "resourceVersion": "7",
                         "labels": {"a": "1", "other": "x"},
                         "ownerReferences": [{"uid": "u1", "kind": "Nova", "name": "nova", "apiVersion": "x/v1", "controller": true}]},
            "type": "Opaque",
            "data": {"connection": "ZHNu"}
        })
    }

    #[test]
    fn an_object_carrying_the_desired_fields_is_carried() {
        assert!(carries(&live(live_secret(), fields()), &desired(), MANAGER));
    }

    #[test]
    fn what_is_not_carried() {
        let cases: Vec<(&str, Value, Value)> = vec![
            ("no Apply entry of ours", live_secret(), Value::Null),
            (
                "a drifted value",
                {
                    let mut l = live_secret();
                    l["data"]["connection"] = json!("b3RoZXI=");
                    l
                },
                fields(),
            ),
            (
                "a removed label",
                {
                    let mut l = live_secret();
                    l["metadata"]["labels"] = json!({"other": "x"});
                    l
                },
                fields(),
            ),
            ("a field we own but no longer want", live_secret(), {
                let mut f = fields();
                f["f:data"]["f:old"] = json!({});
                f
            }),
            ("a field we want but do not own yet", live_secret(), {
                let mut f = fields();
                f.as_object_mut().map(|o| o.remove("f:type"));
                f
            }),
            ("a second owned list member", live_secret(), {
                let mut f = fields();
                f["f:metadata"]["f:ownerReferences"]["k:{\"uid\":\"u2\"}"] = json!({});
                f
            }),
        ];
        for (what, object, fields) in cases {
            let object = if fields.is_null() {
                object
            } else {
                live(object, fields)
            };
            assert!(!carries(&object, &desired(), MANAGER), "{what}");
        }
    }

    #[test]
    fn atomic_lists_compare_in_order_and_associative_lists_tolerate_other_members() {
        let wanted = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n"},
                            "spec": {"args": ["a", "b"]}});
        let owned = json!({"f:spec": {"f:args": {}}});
        let same = live(
            json!({"metadata": {}, "spec": {"args": ["a", "b"]}}),
            owned.clone(),
        );
        let swapped = live(
            json!({"metadata": {}, "spec": {"args": ["b", "a"]}}),
            owned.clone(),
        );
        let longer = live(
            json!({"metadata": {}, "spec": {"args": ["a", "b", "c"]}}),
            owned,
        );
        assert!(carries(&same, &wanted, MANAGER));
        assert!(!carries(&swapped, &wanted, MANAGER));
        assert!(!carries(&longer, &wanted, MANAGER));

        let mut shared = live(live_secret(), fields());
        shared["metadata"]["ownerReferences"]
            .as_array_mut()
            .expect("list")
            .push(json!({"uid": "u9", "kind": "Other", "name": "o", "apiVersion": "y/v1"}));
        assert!(
            carries(&shared, &desired(), MANAGER),
            "another manager's owner reference is not ours to remove"
        );
    }

    #[test]
    fn an_atomic_map_is_owned_whole_and_compared_by_value() {
        // A Service selector (and a LabelSelector) is atomic: fieldsV1 lists it as a leaf.
        let wanted = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "n"},
                            "spec": {"selector": {"app": "a", "tier": "t"}}});
        let owned = json!({"f:spec": {"f:selector": {}}});
        let same = live(
            json!({"metadata": {}, "spec": {"selector": {"app": "a", "tier": "t"}}}),
            owned.clone(),
        );
        let drifted = live(
            json!({"metadata": {}, "spec": {"selector": {"app": "b", "tier": "t"}}}),
            owned,
        );
        assert!(carries(&same, &wanted, MANAGER));
        assert!(!carries(&drifted, &wanted, MANAGER));
    }
}
