//! The defaulting webhook of a kind: the RFC 6902 patch from the spec as received to the
//! defaulted one. A CR being deleted is left alone, so the finalizer removal keeps its spec.
//!
//! The spec is decoded once, typed, from the borrowed body; the patch is the difference the
//! defaulting made, found by walking the two serialized specs side by side, descending only
//! into members whose bytes differ, and it carries those bytes: no JSON tree is built.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::de::Visitor;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::{RawValue, to_raw_value};

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
    let (before, after) = match (to_raw_value(&before), to_raw_value(&after)) {
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
///
/// Both are the serialized specs; equal members compare as equal bytes and are not descended
/// into, and the values the patch carries are those bytes, so no JSON tree is built.
pub fn spec_patch<'a>(before: &'a RawValue, after: &'a RawValue) -> Vec<Op<'a>> {
    let mut ops = Vec::new();
    let mut path = String::from("/spec");
    diff(&mut path, before, after, &mut ops);
    ops
}

/// One patch operation.
#[derive(Debug, Serialize)]
pub struct Op<'a> {
    op: &'static str,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
}

fn diff<'a>(path: &mut String, before: &'a RawValue, after: &'a RawValue, ops: &mut Vec<Op<'a>>) {
    if before.get() == after.get() {
        return;
    }
    let (Some(b), Some(a)) = (members(before), members(after)) else {
        ops.push(Op {
            op: "replace",
            path: path.clone(),
            value: Some(after),
        });
        return;
    };
    let len = path.len();
    for key in b.keys().filter(|k| !a.contains_key(*k)) {
        push_token(path, &key.0);
        ops.push(Op {
            op: "remove",
            path: path.clone(),
            value: None,
        });
        path.truncate(len);
    }
    for (key, value) in a {
        push_token(path, &key.0);
        match b.get(&key) {
            Some(old) => diff(path, old, value, ops),
            None => ops.push(Op {
                op: "add",
                path: path.clone(),
                value: Some(value),
            }),
        }
        path.truncate(len);
    }
}

/// A member name, borrowed from the document unless it carries escapes.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl<'de> Visitor<'de> for Name {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(Name)
    }
}

/// The members of a raw JSON object, each still raw; `None` for anything but an object.
fn members(raw: &RawValue) -> Option<BTreeMap<Key<'_>, &RawValue>> {
    serde_json::from_str(raw.get()).ok()
}

/// Whether every operation finds its place in the spec as received: the parent object of an
/// `add`, the member a `remove` or `replace` names. The spec's members are read once; a
/// deeper parent is read when the (sorted) operations reach it.
fn applies(received: &RawValue, ops: &[Op<'_>]) -> bool {
    let Some(root) = members(received) else {
        return false;
    };
    let mut nested: Option<(&str, BTreeMap<Key<'_>, &RawValue>)> = None;
    ops.iter().all(|op| {
        let Some((parent, last)) = op.path.rsplit_once('/') else {
            return false;
        };
        let parent_members = if parent == "/spec" {
            &root
        } else {
            if nested.as_ref().is_none_or(|(p, _)| *p != parent) {
                let mut tokens = parent.split('/').skip(2);
                let found = tokens
                    .next()
                    .and_then(|first| root.get(&Key(unescape(first))).copied())
                    .and_then(|start| {
                        tokens.try_fold(start, |node, token| {
                            members(node)?.get(&Key(unescape(token))).copied()
                        })
                    })
                    .and_then(members);
                match found {
                    Some(m) => nested = Some((parent, m)),
                    None => return false,
                }
            }
            match &nested {
                Some((_, m)) => m,
                None => return false,
            }
        };
        op.op == "add" || parent_members.contains_key(&Key(unescape(last)))
    })
}

/// An RFC 6901 token as the member name it stands for.
fn unescape(token: &str) -> Cow<'_, str> {
    if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
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
