//! The defaulting webhook of a kind: the RFC 6902 patch from the spec as received to the
//! defaulted one. A CR being deleted is left alone, so the finalizer removal keeps its spec.
//!
//! The spec is decoded once, typed, from the borrowed body; the patch is the difference the
//! defaulting made, found by walking the two specs' JSON trees side by side and written as
//! bytes in one pass.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::wire::{self, Head, Response, Review};
use crate::admitted::Admitted;
use crate::field::Status;
use crate::validation::Operation;

/// Runs the defaulting webhook of `K` on a review.
pub fn mutate<K: Admitted>(review: &Review) -> Response {
    let req = &review.request;
    let uid = req.uid.as_str();
    let (op, raw) = match wire::admissible(req, K::KIND) {
        Err(resp) => return *resp,
        Ok(None) => return Response::allow(uid),
        Ok(Some(found)) => found,
    };
    let head = Head::of(raw);
    if op == Operation::Update && head.deleting() {
        return Response::allow(uid);
    }
    // A spec that does not decode is left to the schema and the validating webhook, which
    // name the offending field; the defaulting webhook has nothing to add to it.
    let Some(spec) = head.spec else {
        return Response::allow(uid);
    };
    let Ok(before) = serde_json::from_str::<K::Spec>(spec.get()) else {
        return Response::allow(uid);
    };
    let mut after = before.clone();
    K::default_spec(&mut after);
    if after == before {
        return Response::allow(uid);
    }
    let (before, after) = match (serde_json::to_value(&before), serde_json::to_value(&after)) {
        (Ok(b), Ok(a)) => (b, a),
        (Err(e), _) | (_, Err(e)) => {
            return Response::deny(uid, Status::internal(format!("encoding the patch: {e}")));
        }
    };
    let ops = spec_patch(&before, &after);
    // The types also read a block written as a JSON array (serde's sequence form of a
    // struct), where no member path exists; such a spec is left to the schema, which refuses
    // it, rather than answered with a patch the API server cannot apply.
    if ops.is_empty() || !applies(spec, &ops) {
        return Response::allow(uid);
    }
    match serde_json::to_vec(&ops) {
        Ok(patch) => Response::patched(uid, &patch),
        Err(e) => Response::deny(uid, Status::internal(format!("encoding the patch: {e}"))),
    }
}

/// The RFC 6902 patch, addressed under `/spec`, that turns `before` into `after`: `add` for a
/// member only `after` has, `remove` for one only `before` has, `replace` for a value that
/// differs (arrays are replaced whole; defaulting never edits inside one). `before` is the
/// received spec as the types read it, so the patch carries the defaults only.
pub fn spec_patch<'a>(before: &Value, after: &'a Value) -> Vec<Op<'a>> {
    let mut ops = Vec::new();
    let mut path = String::from("/spec");
    diff(&mut path, before, after, &mut ops);
    ops
}

/// Whether every operation finds its place in the spec as received: the parent object of an
/// `add`, the member a `remove` or `replace` names.
fn applies(received: &RawValue, ops: &[Op<'_>]) -> bool {
    let Ok(spec) = serde_json::from_str::<Value>(received.get()) else {
        return false;
    };
    ops.iter().all(|op| {
        let tokens = op.path.strip_prefix("/spec/").unwrap_or("");
        let mut node = &spec;
        let mut tokens = tokens
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"));
        let Some(mut token) = tokens.next() else {
            return false;
        };
        for next in tokens {
            match node.get(&token) {
                Some(child) => node = child,
                None => return false,
            }
            token = next;
        }
        node.is_object() && (op.op == "add" || node.get(&token).is_some())
    })
}

/// One patch operation.
#[derive(Debug, Serialize)]
pub struct Op<'a> {
    op: &'static str,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a Value>,
}

fn diff<'a>(path: &mut String, before: &Value, after: &'a Value, ops: &mut Vec<Op<'a>>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => diff_members(path, b, a, ops),
        _ if before == after => {}
        _ => ops.push(Op {
            op: "replace",
            path: path.clone(),
            value: Some(after),
        }),
    }
}

fn diff_members<'a>(
    path: &mut String,
    before: &Map<String, Value>,
    after: &'a Map<String, Value>,
    ops: &mut Vec<Op<'a>>,
) {
    let len = path.len();
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        push_token(path, key);
        ops.push(Op {
            op: "remove",
            path: path.clone(),
            value: None,
        });
        path.truncate(len);
    }
    for (key, a) in after {
        push_token(path, key);
        match before.get(key) {
            Some(b) => diff(path, b, a, ops),
            None => ops.push(Op {
                op: "add",
                path: path.clone(),
                value: Some(a),
            }),
        }
        path.truncate(len);
    }
}

/// Appends `/<key>` with RFC 6901 escaping.
fn push_token(path: &mut String, key: &str) {
    path.push('/');
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}
