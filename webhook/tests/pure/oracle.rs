//! The defaulting oracle, shared by the pure tier (`defaulting.rs`) and the libFuzzer target
//! (`fuzz/fuzz_targets/admission.rs`, which includes this file): the defaulting webhook's patch,
//! applied to the object in the request, gives the object the controller's own defaulting
//! (`nova_api::defaults::default_nova`, `default_novacompute`) gives, compared as JSON.
//!
//! The webhook defaults the spec alone, so the check is on the spec. With a patch, the patched
//! spec reads (through the types, as the controller reads it) as the received spec defaulted,
//! and every member the patch writes holds exactly the controller's value there: nothing
//! outside the spec, nothing but defaults. Without a patch, an object as the API server sends
//! it (its spec pruned to what the types read, the object readable as its kind, not an UPDATE
//! of an object being deleted) is one the controller's defaulting leaves unchanged. Anything
//! else the webhook leaves to the schema and the validating webhook, unpatched.

use nova_api::defaults::{default_nova, default_novacompute};
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_webhook::admitted::Admitted;
use nova_webhook::review::{Offline, Webhook, handle};
use serde::Serialize;
use serde_json::Value;

/// What the oracle could check of one kind's defaulting of a review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// Admitted with a patch, checked against the controller's defaulting.
    Patch,
    /// Admitted without a patch, the object already as the controller defaults it.
    NoPatch,
    /// Denied, or admitted unpatched for a reason the oracle does not model (an object the
    /// API server would not send).
    Neither,
}

/// Both kinds' defaulting webhooks on `review`, sent as the API server sends a review: its
/// JSON re-serialized (one member per name, valid UTF-8). Panics when an answer breaks the
/// oracle.
pub fn defaulting(review: &Value) -> [Checked; 2] {
    let body = serde_json::to_vec(review).expect("a JSON value serializes");
    [
        check::<Nova>(review, &body, default_nova),
        check::<NovaCompute>(review, &body, default_novacompute),
    ]
}

/// The defaulting webhook of `K` on `body` (`review`'s JSON) against `controller`'s defaulting.
fn check<K: Admitted>(review: &Value, body: &[u8], controller: fn(&mut K::Spec)) -> Checked
where
    K::Spec: Serialize,
{
    let handled = futures::executor::block_on(handle(Webhook::mutate::<K>(), body, &Offline));
    let Some(response) = handled.response.filter(|r| r.allowed) else {
        return Checked::Neither;
    };
    let request = &review["request"];
    let object = &request["object"];
    let kind = K::KIND;
    // The received spec as the controller reads it, and as the controller defaults it.
    let Some((received, defaulted)) = object.get("spec").and_then(|spec| {
        let mut typed: K::Spec = serde_json::from_value(spec.clone()).ok()?;
        let received = json(&typed);
        controller(&mut typed);
        Some((received, json(&typed)))
    }) else {
        assert_eq!(
            response.patch_ops(),
            None,
            "{kind}: a patch for a spec that does not read\n{review}"
        );
        return Checked::Neither;
    };
    let deleting =
        request["operation"] == "UPDATE" && !object["metadata"]["deletionTimestamp"].is_null();
    let Some(ops) = response.patch_ops() else {
        let api_server_form = !deleting
            && object["spec"] == received
            && serde_json::from_value::<K>(object.clone()).is_ok();
        if !api_server_form {
            return Checked::Neither;
        }
        assert_eq!(
            received, defaulted,
            "{kind}: admitted without a patch a spec the controller defaults\n{review}"
        );
        return Checked::NoPatch;
    };
    assert!(
        !deleting,
        "{kind}: patch {ops} for an object being deleted\n{review}"
    );
    let patch: json_patch::Patch =
        serde_json::from_value(ops.clone()).expect("the patch is RFC 6902");
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch)
        .unwrap_or_else(|e| panic!("{kind}: patch {ops} does not apply: {e}\n{review}"));
    let patched: Option<K::Spec> = serde_json::from_value(patched["spec"].take()).ok();
    assert_eq!(
        patched.as_ref().map(json).as_ref(),
        Some(&defaulted),
        "{kind}: patch {ops} does not give the spec defaulted\n{review}"
    );
    for op in ops.as_array().expect("a patch is an array") {
        let path = op["path"].as_str().expect("an operation has a path");
        let under = path
            .strip_prefix("/spec")
            .filter(|p| p.starts_with('/'))
            .unwrap_or_else(|| panic!("{kind}: patch {ops} writes outside the spec\n{review}"));
        assert_eq!(
            op.get("value"),
            defaulted.pointer(under),
            "{kind}: patch {ops} writes at {path} what the controller does not\n{review}"
        );
    }
    Checked::Patch
}

/// A spec as JSON.
fn json<S: Serialize>(spec: &S) -> Value {
    serde_json::to_value(spec).expect("a spec serializes")
}
