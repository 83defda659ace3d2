//! The defaulting webhook of a kind: the RFC 6902 patch from the spec as received to the
//! defaulted one. A CR being deleted is left alone, so the finalizer removal keeps its spec.
//!
//! The spec is decoded typed in the same pass as the review (its members noted on the way,
//! [`Tracked`]) and defaulted in place. The defaulting reports each change as it makes it
//! ([`Changes`]): the path and, already as JSON, the value set (a block it created, whole). The
//! patch is written from those reports, checked against the received members along their
//! paths: the spec is not serialized, before or after, and nothing is compared.
//! (The earlier patch serialized the spec before and after defaulting and walked the two
//! side by side: 93.5k of a defaulting review's 184.3k instructions, callgrind, the Example.
//! Its successor read the object three times: skipped raw with the review, as its member list,
//! and typed from those members, then the objects along the paths again: 114.6k.)

use std::ops::Range;

use nova_api::defaults::Changes;
use serde::Serialize;

use super::tracked::{Members, Tracked};
use super::wire::{self, Head, Object, Response, Review};
use crate::admitted::Admitted;
use crate::field::Status;
use crate::validation::Operation;

/// A received object as the defaulting webhook reads it: its head, and its spec decoded as `S`
/// with the members its objects had.
pub type Received<'a, S> = Object<Head<'a, Tracked<'a, S>>>;

/// Runs the defaulting webhook of `K` on a review whose object is raw.
pub fn mutate<K: Admitted>(review: &Review<'_>) -> Response {
    let req = &review.request;
    match wire::admissible(req, K::KIND) {
        Err(resp) => *resp,
        Ok((op, raw)) => defaulted::<K>(&req.uid, op, Head::of(raw)),
    }
}

/// Runs the defaulting webhook of `K` on a review decoded with its object (one pass over the
/// body); `None` for a request without its kind, which only the raw object's own apiVersion
/// and kind answer.
pub fn mutate_received<K: Admitted>(
    review: &mut Review<'_, Received<'_, K::Spec>>,
) -> Option<Response> {
    let req = &mut review.request;
    let op = match wire::admissible_as(req, req.kind.as_ref()?, K::KIND) {
        Ok((op, _)) => op,
        Err(resp) => return Some(*resp),
    };
    let Object(received) = req.object.take()?;
    Some(defaulted::<K>(&req.uid, op, received))
}

/// The defaulting of a received object.
fn defaulted<K: Admitted>(
    uid: &str,
    op: Operation,
    received: Head<'_, Tracked<'_, K::Spec>>,
) -> Response {
    if op == Operation::Update && received.deleting() {
        return Response::allow(uid);
    }
    // A spec that does not decode is left to the schema and the validating webhook, which
    // name the offending field; the defaulting webhook has nothing to add to it. So is a spec
    // that is no object (serde's sequence form of a struct): no member path exists in it for
    // a patch to address. (Either leaves the head empty.)
    let Some(Tracked {
        value: mut spec,
        members,
    }) = received.spec
    else {
        return Response::allow(uid);
    };
    let mut changes = Recorded::default();
    K::default_spec(&mut *spec, &mut changes);
    if let Some(e) = changes.error {
        return Response::deny(uid, Status::internal(format!("encoding the patch: {e}")));
    }
    match changes.patch(&members) {
        Some(patch) => Response::patched(uid, &patch),
        None => Response::allow(uid),
    }
}

/// The changes the defaulting reported, in the order it made them.
struct Recorded {
    changes: Vec<Change>,
    /// The member names of every path, one after the other.
    keys: Vec<&'static str>,
    /// The JSON of every value set, one after the other.
    values: Vec<u8>,
    /// A value that did not serialize.
    error: Option<serde_json::Error>,
}

/// One change: its path (in [`Recorded::keys`]) and the value set (in [`Recorded::values`]),
/// none for a removal.
struct Change {
    path: Range<usize>,
    value: Option<Range<usize>>,
}

impl Default for Recorded {
    /// Room for the Example's 14 defaults and more, so that recording grows nothing.
    fn default() -> Self {
        Recorded {
            changes: Vec::with_capacity(32),
            keys: Vec::with_capacity(96),
            values: Vec::with_capacity(1024),
            error: None,
        }
    }
}

impl Changes for Recorded {
    fn set<T: Serialize + ?Sized>(&mut self, path: &[&'static str], value: &T) {
        let start = self.values.len();
        if let Err(e) = serde_json::to_writer(&mut self.values, value) {
            self.error.get_or_insert(e);
        }
        let value = Some(start..self.values.len());
        self.push(path, value);
    }

    fn removed(&mut self, path: &[&'static str]) {
        self.push(path, None);
    }
}

impl Recorded {
    fn push(&mut self, path: &[&'static str], value: Option<Range<usize>>) {
        let start = self.keys.len();
        self.keys.extend_from_slice(path);
        self.changes.push(Change {
            path: start..self.keys.len(),
            value,
        });
    }

    /// The RFC 6902 patch, addressed under `/spec`, of the reported changes, as JSON, in the
    /// order they were made: `add` for a member the received spec lacks, `replace` for one it
    /// has (null, empty or zero), `remove`.
    ///
    /// `None` when nothing changed, or when the patch would not apply to the spec as
    /// `received`: the types also read a block written as a JSON array (serde's sequence form
    /// of a struct), or supply a block the received spec lacks, where no member path exists;
    /// such a spec is left to the schema rather than answered with a patch the API server
    /// cannot apply.
    fn patch(&self, received: &Members<'_>) -> Option<Vec<u8>> {
        if self.changes.is_empty() {
            return None;
        }
        let mut json = Vec::with_capacity(self.values.len() + 64 * self.changes.len());
        json.push(b'[');
        // The received objects along the current path: the defaults fill one block after the
        // other, so consecutive changes share them and each is mostly read once.
        let mut objects: Vec<(&str, u32)> = Vec::new();
        for change in &self.changes {
            if json.len() > 1 {
                json.push(b',');
            }
            let path = &self.keys[change.path.clone()];
            let (leaf, parents) = path.split_last()?;
            let shared = objects
                .iter()
                .zip(parents)
                .take_while(|((key, _), parent)| key == *parent)
                .count();
            objects.truncate(shared);
            for key in &parents[shared..] {
                let here = objects.last().map_or(Members::ROOT, |(_, o)| *o);
                objects.push((key, received.object(here, key)?));
            }
            let here = objects.last().map_or(Members::ROOT, |(_, o)| *o);
            let present = received.has(here, leaf);
            let op = match (&change.value, present) {
                (None, false) => return None,
                (None, true) => "remove",
                (Some(_), false) => "add",
                (Some(_), true) => "replace",
            };
            self.op(op, path, change.value.as_ref(), &mut json);
        }
        json.push(b']');
        Some(json)
    }

    /// Writes one operation.
    fn op(&self, op: &str, path: &[&str], value: Option<&Range<usize>>, json: &mut Vec<u8>) {
        json.extend_from_slice(b"{\"op\":\"");
        json.extend_from_slice(op.as_bytes());
        json.extend_from_slice(b"\",\"path\":\"/spec");
        // The member names are the types' own (camelCase): nothing to escape for the pointer
        // or the JSON string.
        for key in path {
            json.push(b'/');
            json.extend_from_slice(key.as_bytes());
        }
        json.push(b'"');
        if let Some(value) = value {
            json.extend_from_slice(b",\"value\":");
            json.extend_from_slice(&self.values[value.clone()]);
        }
        json.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The patch of `changes` for a spec received as `received`, decoded.
    fn patch(changes: &[(&[&'static str], Option<Value>)], received: &str) -> Option<Value> {
        let received: Tracked<'_, Value> = serde_json::from_str(received).ok()?;
        let mut recorded = Recorded::default();
        for (path, value) in changes {
            match value {
                Some(v) => recorded.set(path, v),
                None => recorded.removed(path),
            }
        }
        recorded
            .patch(&received.members)
            .map(|p| serde_json::from_slice(&p).unwrap())
    }

    #[test]
    fn add_for_an_absent_member_replace_for_a_present_one_in_the_order_made() {
        let changes: &[(&[&str], Option<Value>)] = &[
            (&["z"], Some(json!(2))),
            (&["m", "new"], Some(json!({"n": 1}))),
            (&["m", "drop"], None),
            (&["b"], Some(json!([1]))),
            (&["a", "key"], Some(json!("k"))),
        ];
        let received = r#"{"a":{"key":""},"z":null,"m":{"keep":true,"drop":1}}"#;
        assert_eq!(
            patch(changes, received),
            Some(json!([
                {"op": "replace", "path": "/spec/z", "value": 2},
                {"op": "add", "path": "/spec/m/new", "value": {"n": 1}},
                {"op": "remove", "path": "/spec/m/drop"},
                {"op": "add", "path": "/spec/b", "value": [1]},
                {"op": "replace", "path": "/spec/a/key", "value": "k"},
            ]))
        );
    }

    #[test]
    fn no_change_is_no_patch() {
        assert_eq!(patch(&[], r#"{"a":{"b":1}}"#), None);
    }

    #[test]
    fn a_patch_that_would_not_apply_to_the_received_spec_is_none() {
        let add: &[(&[&str], Option<Value>)] = &[(&["a", "c"], Some(json!(2)))];
        // A block written in serde's sequence form, which the types read but no path reaches.
        assert_eq!(patch(add, r#"{"a":[1]}"#), None);
        // A block the types supplied that the received spec lacks.
        assert_eq!(patch(add, r#"{}"#), None);
        // A member to remove that the received spec lacks.
        assert_eq!(patch(&[(&["a", "b"], None)], r#"{"a":{}}"#), None);
        // A spec that is no object.
        assert_eq!(patch(add, "[]"), None);
    }
}
