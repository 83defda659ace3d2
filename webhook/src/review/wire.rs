//! The AdmissionReview (`admission.k8s.io/v1`) wire types: the request fields the webhooks
//! read, kept borrowed and raw where they are decoded later, and the response written straight
//! from its struct.
//!
//! These are hand-written rather than `kube::core::admission`'s: kube's `AdmissionRequest<T>`
//! decodes the object eagerly, either into the typed kind (then an object today's types cannot
//! read fails the whole review, before the deletion bypass and the field errors can run) or
//! into a `DynamicObject`, whose `serde_json::Value` tree is then decoded a second time. Its
//! `T` must be a `kube::Resource`, so it cannot carry the object raw. Measured on the
//! defaulted Example Nova (`cargo bench -p nova-webhook --bench admission`, `wire:` entries,
//! a loaded 2-core machine): review plus typed object 8.4 µs here, 30.2 µs through
//! `AdmissionReview<DynamicObject>` (3.6 times), 10.2 µs through the typed
//! `AdmissionReview<Nova>`, which loses the raw object the two paths above need.

use std::borrow::Cow;

use base64::Engine as _;
use serde::de::{Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::field::{GROUP, Status};
use crate::validation::Operation;

/// The version both kinds are served at.
pub const VERSION: &str = "v1alpha1";

/// `GroupVersionKind` of a request.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Gvk<'a> {
    /// The group.
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    /// The version.
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    /// The kind.
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
}

/// The part of `AdmissionRequest` the webhooks read, borrowed from the body: strings without
/// escapes and both objects are slices of it, not copies. The new object is kept raw unless
/// a webhook decodes it with the review (`O`, see [`parse_as`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "O: Deserialize<'de>"))]
pub struct Request<'a, O = &'a RawValue> {
    /// Echoed in the response.
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    /// The object's kind.
    #[serde(default, borrow)]
    pub kind: Option<Gvk<'a>>,
    /// The object's name (empty with generateName).
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    /// The object's namespace.
    #[serde(default, borrow)]
    pub namespace: Option<Cow<'a, str>>,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(default, borrow)]
    pub operation: Cow<'a, str>,
    /// The new object: raw, decoded once later straight into its kind, or already decoded.
    #[serde(default)]
    pub object: Option<O>,
    /// The stored object on UPDATE, kept raw.
    #[serde(default, borrow)]
    pub old_object: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[serde(bound(deserialize = "O: Deserialize<'de>"))]
struct ReviewIn<'a, O> {
    #[serde(default, borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    request: Option<Request<'a, O>>,
}

/// Why a body is not an AdmissionReview at all (answered with HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON of the expected shape.
    #[error("the request body is not an AdmissionReview: {0}")]
    NotJson(String),
    /// No `request`.
    #[error("the AdmissionReview carries no request")]
    NoRequest,
}

/// A decoded review, borrowed from its body.
#[derive(Clone, Debug)]
pub struct Review<'a, O = &'a RawValue> {
    /// The review's apiVersion, echoed.
    pub api_version: Cow<'a, str>,
    /// The request.
    pub request: Request<'a, O>,
}

/// Parses a request body, the new object kept raw.
///
/// A body that is UTF-8 is checked as such once, as a whole, and read as text: read as bytes,
/// every string in it would be checked on its own (8k instructions of a defaulting review).
pub fn parse(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    match std::str::from_utf8(body) {
        Ok(text) => parse_as(text),
        Err(_) => review(serde_json::from_slice(body)),
    }
}

/// Parses a request body known to be UTF-8, the new object decoded as `O` in the same pass.
pub fn parse_as<'a, O: Deserialize<'a>>(text: &'a str) -> Result<Review<'a, O>, ReviewError> {
    review(serde_json::from_str(text))
}

/// The review a body decoded into.
fn review<'a, O>(
    decoded: serde_json::Result<ReviewIn<'a, O>>,
) -> Result<Review<'a, O>, ReviewError> {
    let review = decoded.map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    Ok(Review {
        api_version: review
            .api_version
            .unwrap_or(Cow::Borrowed("admission.k8s.io/v1")),
        request,
    })
}

/// `AdmissionResponse`, written by [`envelope_bytes`].
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The request's uid.
    pub uid: String,
    /// The verdict.
    pub allowed: bool,
    /// Why not.
    pub status: Option<Status>,
    /// `JSONPatch` when a patch is returned.
    pub patch_type: Option<&'static str>,
    /// The base64 of the RFC 6902 patch; only [`Response::patched`] sets it, so it is always
    /// base64, which a JSON string carries unescaped.
    patch: Option<String>,
    /// Warnings shown to the client.
    pub warnings: Vec<String>,
}

impl Response {
    /// Admitted, nothing to say.
    pub fn allow(uid: &str) -> Self {
        Response {
            uid: uid.to_owned(),
            allowed: true,
            status: None,
            patch_type: None,
            patch: None,
            warnings: Vec::new(),
        }
    }

    /// Denied with a status.
    pub fn deny(uid: &str, status: Status) -> Self {
        Response {
            status: Some(status),
            allowed: false,
            ..Response::allow(uid)
        }
    }

    /// Admitted with an RFC 6902 patch (its JSON bytes).
    pub fn patched(uid: &str, patch: &[u8]) -> Self {
        Response {
            patch_type: Some("JSONPatch"),
            patch: Some(base64::engine::general_purpose::STANDARD.encode(patch)),
            ..Response::allow(uid)
        }
    }

    /// The outcome label of the metrics and the trace.
    pub fn outcome(&self) -> &'static str {
        match (&self.status, self.allowed) {
            (_, true) if self.patch.is_some() => "patched",
            (_, true) => "allowed",
            (Some(s), false) if s.code >= 500 => "error",
            (Some(s), false) if s.code == 400 => "bad_request",
            _ => "denied",
        }
    }

    /// The number of violated fields a denial names.
    pub fn violations(&self) -> usize {
        self.status
            .as_ref()
            .and_then(|s| s.details.as_ref())
            .map_or(0, |d| d.causes.len())
    }

    /// The decoded patch (tests).
    pub fn patch_ops(&self) -> Option<Value> {
        let b64 = self.patch.as_ref()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The AdmissionReview answering a review, serialized: `apiVersion`, `kind`, and the response
/// with its members in declaration order, each optional one only when set. Written around the
/// parts rather than derived, so that the patch, already base64, is copied as it is instead of
/// going through the string escaper (about a tenth of a defaulting review's instructions).
pub fn envelope_bytes(api_version: &str, response: &Response) -> Vec<u8> {
    let patch = response.patch.as_deref();
    let mut out = Vec::with_capacity(192 + patch.map_or(0, str::len));
    out.extend_from_slice(b"{\"apiVersion\":");
    json(&mut out, api_version);
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    json(&mut out, &response.uid);
    out.extend_from_slice(if response.allowed {
        b",\"allowed\":true"
    } else {
        b",\"allowed\":false"
    });
    if let Some(status) = &response.status {
        out.extend_from_slice(b",\"status\":");
        json(&mut out, status);
    }
    if let Some(patch_type) = response.patch_type {
        out.extend_from_slice(b",\"patchType\":");
        json(&mut out, patch_type);
    }
    if let Some(patch) = patch {
        out.extend_from_slice(b",\"patch\":\"");
        out.extend_from_slice(patch.as_bytes());
        out.push(b'"');
    }
    if !response.warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":");
        json(&mut out, &response.warnings);
    }
    out.extend_from_slice(b"}}");
    out
}

/// Appends `value` as JSON (strings escaped); writing into a `Vec` cannot fail.
fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(out, value);
}

/// The common first steps: the kind and operation checks, and the object itself. `Err` is the
/// final response: a refusal, or the admission of a DELETE or CONNECT, which needs no further
/// work. A request without its kind is checked against the object's own apiVersion and kind.
pub fn admissible<'r>(
    req: &'r Request<'_>,
    kind: &str,
) -> Result<(Operation, &'r RawValue), Box<Response>> {
    let found = match &req.kind {
        Some(gvk) => admissible_as(req, gvk, kind),
        None => admissible_as(req, &object_gvk(req.object), kind),
    };
    found.map(|(op, raw)| (op, *raw))
}

/// The kind of a raw object, from its apiVersion and kind (empty where they are missing).
fn object_gvk(object: Option<&RawValue>) -> Gvk<'static> {
    #[derive(Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct TypeMeta {
        #[serde(default)]
        api_version: Option<String>,
        #[serde(default)]
        kind: Option<String>,
    }
    let meta: TypeMeta = object
        .and_then(|o| serde_json::from_str(o.get()).ok())
        .unwrap_or_default();
    let api_version = meta.api_version.unwrap_or_default();
    let (g, v) = api_version.split_once('/').unwrap_or(("", &api_version));
    Gvk {
        group: Cow::Owned(g.to_owned()),
        version: Cow::Owned(v.to_owned()),
        kind: Cow::Owned(meta.kind.unwrap_or_default()),
    }
}

/// [`admissible`] for a request of kind `gvk`, whatever form its object has.
pub fn admissible_as<'r, O>(
    req: &'r Request<'_, O>,
    gvk: &Gvk<'_>,
    kind: &str,
) -> Result<(Operation, &'r O), Box<Response>> {
    let uid = &req.uid;
    let (group, version, got_kind) = (&*gvk.group, &*gvk.version, &*gvk.kind);
    if group != GROUP || version != VERSION || got_kind != kind {
        return Err(Box::new(Response::deny(
            uid,
            Status::bad_request(format!(
                "this webhook admits {GROUP}/{VERSION} {kind}, not {}/{} {}",
                if group.is_empty() { "core" } else { group },
                version,
                if got_kind.is_empty() {
                    "(no kind)"
                } else {
                    got_kind
                }
            )),
        )));
    }
    let Some(op) = Operation::parse(&req.operation) else {
        return Err(Box::new(Response::deny(
            uid,
            Status::bad_request(format!("unknown operation {:?}", req.operation)),
        )));
    };
    if matches!(op, Operation::Delete | Operation::Connect) {
        return Err(Box::new(Response::allow(uid)));
    }
    let Some(object) = req.object.as_ref() else {
        return Err(Box::new(Response::deny(
            uid,
            Status::bad_request("request.object is missing"),
        )));
    };
    if op == Operation::Update && old_object(req, op).is_none() {
        return Err(Box::new(Response::deny(
            uid,
            Status::bad_request("request.oldObject is missing on UPDATE"),
        )));
    }
    Ok((op, object))
}

/// `T` read from a JSON object only. A derived struct also reads a JSON array, its members'
/// values in declaration order (serde's sequence form): an object written `[metadata, spec]`
/// would give a [`Head`] whose spec no `/spec` of a patch reaches.
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(AsMap(d)).map(Object)
    }
}

/// A decoder asked for anything reads a map.
struct AsMap<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for AsMap<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// The stored object of an UPDATE.
pub fn old_object<'r, O>(req: &Request<'r, O>, op: Operation) -> Option<&'r RawValue> {
    req.old_object.filter(|_| op == Operation::Update)
}

/// The few fields read before the typed decode, borrowed from the body: whether the object is
/// being deleted, its spec undecoded (raw JSON by default; the defaulting webhook reads it as
/// its member list), and its name (for an object that does not decode).
#[derive(Deserialize)]
pub struct Head<'a, S = &'a RawValue> {
    #[serde(default, borrow)]
    metadata: MetaHead<'a>,
    /// The spec, undecoded.
    pub spec: Option<S>,
}

impl<S> Default for Head<'_, S> {
    fn default() -> Self {
        Head {
            metadata: MetaHead::default(),
            spec: None,
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaHead<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    deletion_timestamp: Option<&'a RawValue>,
}

impl<'a, S: Deserialize<'a>> Head<'a, S> {
    /// The head of `raw`; empty when it is not an object.
    pub fn of(raw: &'a RawValue) -> Self {
        serde_json::from_str(raw.get()).map_or_else(|_| Head::default(), |Object(head)| head)
    }

    /// Whether the object carries a deletion timestamp.
    pub fn deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// `metadata.name`.
    pub fn name(self) -> Option<String> {
        self.metadata.name
    }
}
