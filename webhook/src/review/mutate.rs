//! The defaulting webhook of a kind: the RFC 6902 patch from the spec as received to the
//! defaulted one. A CR being deleted is left alone, so the finalizer removal keeps its spec.
//!
//! The spec is read once as its member list, borrowed from the body, decoded typed from those
//! members, and defaulted in place. The patch
//! is the difference the defaulting made: the spec is serialized before and after with a
//! record of where each member lies ([`Tape`]), and the two records are walked side by side,
//! descending only into members whose bytes differ. The operations are written straight into
//! the patch's JSON, carrying those bytes; nothing is parsed back and no JSON tree is built.

use std::borrow::Cow;

use serde::de::value::MapDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::tape::{Entry, Tape};
use super::wire::{self, Head, Response, Review};
use crate::admitted::Admitted;
use crate::field::Status;
use crate::validation::Operation;

/// Runs the defaulting webhook of `K` on a review.
pub fn mutate<K: Admitted>(review: &Review<'_>) -> Response {
    let req = &review.request;
    let uid = &*req.uid;
    let (op, raw) = match wire::admissible(req, K::KIND) {
        Err(resp) => return *resp,
        Ok(None) => return Response::allow(uid),
        Ok(Some(found)) => found,
    };
    let head: Head<'_, Members<'_>> = Head::of(raw);
    if op == Operation::Update && head.deleting() {
        return Response::allow(uid);
    }
    // A spec that does not decode is left to the schema and the validating webhook, which
    // name the offending field; the defaulting webhook has nothing to add to it. So is a spec
    // that is no object (serde's sequence form of a struct): no member path exists in it for
    // a patch to address.
    let Some(received) = head.spec else {
        return Response::allow(uid);
    };
    let Ok(mut spec) = received.decode::<K::Spec>() else {
        return Response::allow(uid);
    };
    let before = match Tape::of(&spec) {
        Ok(t) => t,
        Err(e) => return Response::deny(uid, Status::internal(format!("encoding the patch: {e}"))),
    };
    K::default_spec(&mut spec);
    let after = match Tape::of(&spec) {
        Ok(t) => t,
        Err(e) => return Response::deny(uid, Status::internal(format!("encoding the patch: {e}"))),
    };
    match spec_patch(&before, &after, &received) {
        Some(patch) => Response::patched(uid, &patch),
        None => Response::allow(uid),
    }
}

/// The RFC 6902 patch, addressed under `/spec`, that turns `before` into `after`, as JSON:
/// `add` for a member only `after` has, `remove` for one only `before` has, `replace` for a
/// value that differs (arrays are replaced whole; defaulting never edits inside one). `before`
/// is the received spec as the types read it, so the patch carries the defaults only.
///
/// `None` when nothing changed, or when the patch would not apply to the spec as `received`:
/// the types also read a block written as a JSON array (serde's sequence form of a struct),
/// where no member path exists, and such a spec is left to the schema, which refuses it,
/// rather than answered with a patch the API server cannot apply.
fn spec_patch(before: &Tape, after: &Tape, received: &Members<'_>) -> Option<Vec<u8>> {
    if before.json() == after.json() || !before.is_object() || !after.is_object() {
        return None;
    }
    let mut patch = Patch {
        before,
        after,
        path: String::from("/spec"),
        json: Vec::with_capacity(after.json().len()),
    };
    patch.json.push(b'[');
    patch.diff(0, 0, Received::Read(received)).ok()?;
    if patch.json.len() == 1 {
        // Members written in another order, nothing else: no change.
        return None;
    }
    patch.json.push(b']');
    Some(patch.json)
}

/// The walk over two tapes, writing the operations as it finds them.
struct Patch<'t> {
    before: &'t Tape,
    after: &'t Tape,
    /// The JSON pointer of the object being compared, as JSON string contents.
    path: String,
    json: Vec<u8>,
}

/// The patch does not apply to the spec as received.
struct NotApplicable;

impl<'t> Patch<'t> {
    /// Compares object `old` of `before` with object `new` of `after`; `received` is the same
    /// object in the spec as received, which must be an object holding every member the
    /// operations remove, replace or descend into. Within an object, removals come first,
    /// then the rest, each in key order.
    fn diff(
        &mut self,
        old: usize,
        new: usize,
        received: Received<'_>,
    ) -> Result<(), NotApplicable> {
        if let Received::Raw(raw) = received
            && !raw.get().trim_start().starts_with('{')
        {
            return Err(NotApplicable);
        }
        let old: Vec<Entry<'t>> = self.before.entries(old).collect();
        let new: Vec<Entry<'t>> = self.after.entries(new).collect();
        let mut removed: Vec<&Entry<'t>> = old
            .iter()
            .filter(|o| find(&new, o.key, 0).is_none())
            .collect();
        removed.sort_unstable_by_key(|e| e.key);
        let mut changed: Vec<(&Entry<'t>, Option<&Entry<'t>>)> = Vec::new();
        let mut hint = 0;
        for n in &new {
            let o = find(&old, n.key, hint);
            if let Some(i) = o {
                hint = i + 1;
                if old[i].value == n.value {
                    continue;
                }
            }
            changed.push((n, o.map(|i| &old[i])));
        }
        changed.sort_unstable_by_key(|(n, _)| n.key);
        // The received members are read only when an operation needs one: an object the
        // defaults only add to is not parsed.
        let parsed;
        let here = match received {
            Received::Read(members) => members,
            Received::Raw(_) if removed.is_empty() && changed.iter().all(|(_, o)| o.is_none()) => {
                parsed = Members::default();
                &parsed
            }
            Received::Raw(raw) => {
                parsed = members(raw).ok_or(NotApplicable)?;
                &parsed
            }
        };
        let len = self.path.len();
        for e in removed {
            here.get(e.key).ok_or(NotApplicable)?;
            self.op("remove", e.key, None);
        }
        for (n, o) in changed {
            match (o, o.and_then(|o| o.object), n.object) {
                (None, ..) => self.op("add", n.key, Some(n.value)),
                (Some(_), Some(old_object), Some(new_object)) => {
                    let inner = here.get(n.key).ok_or(NotApplicable)?;
                    push_token(&mut self.path, n.key);
                    self.diff(old_object, new_object, Received::Raw(inner))?;
                    self.path.truncate(len);
                }
                (Some(_), ..) => {
                    here.get(n.key).ok_or(NotApplicable)?;
                    self.op("replace", n.key, Some(n.value));
                }
            }
        }
        Ok(())
    }

    /// Writes one operation on member `key` of the object at `self.path`.
    fn op(&mut self, op: &str, key: &str, value: Option<&str>) {
        if self.json.len() > 1 {
            self.json.push(b',');
        }
        let json = &mut self.json;
        json.extend_from_slice(b"{\"op\":\"");
        json.extend_from_slice(op.as_bytes());
        json.extend_from_slice(b"\",\"path\":\"");
        json.extend_from_slice(self.path.as_bytes());
        let len = self.path.len();
        push_token(&mut self.path, key);
        self.json.extend_from_slice(&self.path.as_bytes()[len..]);
        self.path.truncate(len);
        self.json.push(b'"');
        if let Some(value) = value {
            self.json.extend_from_slice(b",\"value\":");
            self.json.extend_from_slice(value.as_bytes());
        }
        self.json.push(b'}');
    }
}

/// The index of the entry with `key`, looked for from `hint` on first: both tapes come from
/// the same type, so members mostly appear in the same order.
fn find(entries: &[Entry<'_>], key: &str, hint: usize) -> Option<usize> {
    let hint = hint.min(entries.len());
    let (front, back) = entries.split_at(hint);
    back.iter()
        .position(|e| e.key == key)
        .map(|i| i + hint)
        .or_else(|| front.iter().position(|e| e.key == key))
}

/// An object of the received spec: the spec itself, whose members were read with the head,
/// or one below it, still raw, read only when an operation needs one of its members (an object
/// the defaults only add to is not parsed).
#[derive(Clone, Copy)]
enum Received<'r> {
    Read(&'r Members<'r>),
    Raw(&'r RawValue),
}

/// The members of a raw JSON object, each still raw, in document order.
#[derive(Default)]
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Members<'a> {
    /// The object decoded as `T`, member by member, as it would be from its JSON text.
    fn decode<T: Deserialize<'a>>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(MapDeserializer::<_, serde_json::Error>::new(
            self.0.iter().map(|(k, v)| (k.as_ref(), *v)),
        ))
    }

    /// The member a tape key (escaped contents) names; the last one written, as a decoder
    /// reading the object keeps the last of duplicate members.
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        let name = unescape(key);
        self.0
            .iter()
            .rev()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some(entry) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    members.push((entry.0.0, entry.1));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Object)
    }
}

/// A member name, borrowed from the document unless it carries escapes.
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

/// The members of a raw JSON object; `None` for anything but an object.
fn members(raw: &RawValue) -> Option<Members<'_>> {
    serde_json::from_str(raw.get()).ok()
}

/// The member name a tape key (JSON string contents, still escaped) stands for.
fn unescape(key: &str) -> Cow<'_, str> {
    if key.contains('\\') {
        Cow::Owned(serde_json::from_str(&format!("\"{key}\"")).unwrap_or_default())
    } else {
        Cow::Borrowed(key)
    }
}

/// Appends `/<key>` with RFC 6901 escaping. The key is JSON string contents, whose escapes
/// hold neither `~` nor `/`, so the result is still valid JSON string contents.
fn push_token(path: &mut String, key: &str) {
    path.push('/');
    if !key.contains(['~', '/']) {
        path.push_str(key);
        return;
    }
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The patch from `before` to `after` for a spec received as `received`, decoded; a
    /// received spec that is no object has no member list, so no patch.
    fn patch(before: Value, after: Value, received: &str) -> Option<Value> {
        let received = RawValue::from_string(received.to_owned()).unwrap();
        let received = members(&received)?;
        let (before, after) = (Tape::of(&before).unwrap(), Tape::of(&after).unwrap());
        spec_patch(&before, &after, &received).map(|p| serde_json::from_slice(&p).unwrap())
    }

    #[test]
    fn removals_come_first_then_every_change_in_key_order() {
        let before = json!({"z": 1, "m": {"keep": true, "drop": 1}, "a": "x"});
        let after = json!({"z": 2, "m": {"keep": true, "new": {"n": 1}}, "a": "x", "b": [1]});
        let received = r#"{"a":"x","z":1,"m":{"keep":true,"drop":1}}"#;
        assert_eq!(
            patch(before, after, received),
            Some(json!([
                {"op": "add", "path": "/spec/b", "value": [1]},
                {"op": "remove", "path": "/spec/m/drop"},
                {"op": "add", "path": "/spec/m/new", "value": {"n": 1}},
                {"op": "replace", "path": "/spec/z", "value": 2},
            ]))
        );
    }

    #[test]
    fn keys_are_escaped_for_the_pointer_and_the_json() {
        let before = json!({"a/b~c\"d": {"x": 1}});
        let after = json!({"a/b~c\"d": {"x": 2}});
        let received = r#"{"a/b~c\"d":{"x":1}}"#;
        assert_eq!(
            patch(before, after, received),
            Some(json!([{"op": "replace", "path": "/spec/a~1b~0c\"d/x", "value": 2}]))
        );
    }

    #[test]
    fn no_change_is_no_patch() {
        let spec = json!({"a": {"b": 1}});
        assert_eq!(patch(spec.clone(), spec, r#"{"a":{"b":1}}"#), None);
    }

    #[test]
    fn a_patch_that_would_not_apply_to_the_received_spec_is_none() {
        // A block written in serde's sequence form, which the types read but no path reaches.
        let before = json!({"a": {"b": 1}});
        let after = json!({"a": {"b": 1, "c": 2}});
        assert_eq!(patch(before.clone(), after.clone(), r#"{"a":[1]}"#), None);
        // A block the types supplied that the received spec lacks.
        assert_eq!(patch(before.clone(), after.clone(), r#"{}"#), None);
        // A member to replace that the received spec lacks.
        let replaced = json!({"a": {"b": 2}});
        assert_eq!(patch(before, replaced, r#"{"a":{}}"#), None);
        // A spec that is no object.
        assert_eq!(patch(json!({"a": 1}), json!({"a": 2}), "[]"), None);
    }
}
