//! The validating webhook of a kind: the deletion bypass on the raw specs, one typed decode of
//! each object, the lookups the kind asks for, and every rule at once.

use serde_json::Value;
use serde_json::value::RawValue;

use super::wire::{self, Head, Request, Response, Review};
use crate::admitted::Admitted;
use crate::decode::{Undecodable, decode};
use crate::field::{Status, Violations, aggregate};
use crate::lookups::{Lookups, Resolver};
use crate::validation::Operation;

/// Runs the validating webhook of `K` on a review whose object is raw.
pub async fn validate<K: Admitted>(review: &Review<'_>, resolver: &dyn Resolver) -> Response {
    let req = &review.request;
    let (op, object) = match wire::admissible(req, K::KIND) {
        Err(resp) => return *resp,
        Ok(found) => found,
    };
    let old_raw = wire::old_object(req, op);
    if deletion_bypass(op, object, old_raw) {
        return Response::allow(&req.uid);
    }
    let new: Box<K> = match decode(object.get()) {
        Ok(v) => v,
        Err(why) => return undecodable::<K>(req, object, why),
    };
    validated(req, op, new, old_raw, resolver).await
}

/// Runs the validating webhook of `K` on a review decoded with its object (one pass over the
/// body). `None` for a request without its kind, which only the raw object's own apiVersion
/// and kind answer, and for an object being deleted, whose bypass compares the raw specs.
pub async fn validate_decoded<K: Admitted>(
    review: &mut Review<'_, Box<K>>,
    resolver: &dyn Resolver,
) -> Option<Response> {
    let req = &mut review.request;
    let op = match wire::admissible_as(req, req.kind.as_ref()?, K::KIND) {
        Ok((op, _)) => op,
        Err(resp) => return Some(*resp),
    };
    let new = req.object.take()?;
    if new.meta().deletion_timestamp.is_some() {
        return None;
    }
    let old_raw = wire::old_object(req, op);
    Some(validated(req, op, new, old_raw, resolver).await)
}

/// Validates a decoded object: the stored one decoded, the lookups resolved, every rule.
async fn validated<K: Admitted, O>(
    req: &Request<'_, O>,
    op: Operation,
    mut new: Box<K>,
    old_raw: Option<&RawValue>,
    resolver: &dyn Resolver,
) -> Response {
    let uid = &*req.uid;
    let old: Option<Box<K>> = match old_raw.map(|v| decode(v.get())).transpose() {
        Ok(v) => v,
        Err(why) => return undecodable_stored::<K>(uid, why),
    };
    if new.meta().namespace.is_none() {
        new.meta_mut().namespace = req.namespace.as_deref().map(str::to_owned);
    }
    let needs = new.needs(old.as_deref(), op);
    let lookups = if needs.is_empty() {
        Lookups::default()
    } else {
        match resolver.resolve(&needs).await {
            Ok(found) => found,
            Err(e) => {
                let nova = needs.nova.unwrap_or_default();
                let message = format!("reading Nova {}/{}: {e}", nova.namespace, nova.name);
                return Response::deny(uid, Status::internal(message));
            }
        }
    };
    let outcome = new.validate(old.as_deref(), op, &lookups);
    let mut resp = if outcome.errors.is_empty() {
        Response::allow(uid)
    } else {
        let name = new.meta().name.as_deref().unwrap_or("");
        Response::deny(uid, Status::invalid(K::KIND, name, &outcome.errors))
    };
    resp.warnings = outcome.warnings;
    resp
}

/// The finalizer removal of a CR being deleted: an UPDATE of an object with a deletion
/// timestamp whose spec is unchanged is admitted without validation. It is decided on the raw
/// specs, before any typed decoding, because it exists for exactly the stored object today's
/// types may no longer decode.
fn deletion_bypass(op: Operation, new: &RawValue, old: Option<&RawValue>) -> bool {
    if op != Operation::Update {
        return false;
    }
    let head: Head<'_> = Head::of(new);
    head.deleting() && old.is_some_and(|old| same_json(head.spec, Head::<&RawValue>::of(old).spec))
}

/// Whether two raw values are the same JSON (key order and spacing aside).
fn same_json(a: Option<&RawValue>, b: Option<&RawValue>) -> bool {
    let parse = |r: &RawValue| serde_json::from_str::<Value>(r.get()).ok();
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.get() == b.get() || parse(a).is_some_and(|x| parse(b) == Some(x)),
        _ => false,
    }
}

/// The response to an object that does not decode into its kind: its fields in the API
/// server's field-error style (422), or the decoder's message for a body that is not JSON (400).
fn undecodable<K: Admitted>(req: &Request<'_>, raw: &RawValue, why: Undecodable) -> Response {
    let status = match why {
        Undecodable::Fields(errors) => {
            let name = Head::<&RawValue>::of(raw)
                .name()
                .or_else(|| req.name.as_deref().map(str::to_owned))
                .unwrap_or_default();
            Status::invalid(K::KIND, &name, &Violations::from(errors))
        }
        Undecodable::Malformed(e) => {
            Status::bad_request(format!("decoding the object {}: {e}", K::KIND))
        }
    };
    Response::deny(&req.uid, status)
}

/// The response to a stored object that does not decode (and is not being deleted): nothing
/// the user sent can fix it, so it is a 400 naming the stored fields.
fn undecodable_stored<K: Admitted>(uid: &str, why: Undecodable) -> Response {
    let detail = match why {
        Undecodable::Fields(errors) => aggregate(&Violations::from(errors)).unwrap_or_default(),
        Undecodable::Malformed(e) => e,
    };
    Response::deny(
        uid,
        Status::bad_request(format!("decoding the stored object {}: {detail}", K::KIND)),
    )
}
