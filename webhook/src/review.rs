//! AdmissionReview (`admission.k8s.io/v1`) in and out, and the admission logic of the four
//! webhooks as functions from a review to a response. The HTTP handler only reads the body,
//! resolves the lookups the API server has to answer, and writes the response.
//!
//! A request that cannot be understood becomes an error response, never a panic.

use std::future::Future;

use base64::Engine as _;
use nova_api::defaults::{default_nova, default_novacompute};
use nova_api::v1alpha1::{Nova, NovaCompute};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::decode::{Undecodable, decode};
use crate::field::{FieldError, GROUP, Status};
use crate::validation::novacompute::NovaRelease;
use crate::validation::{self, Operation, Outcome, ResolvedLookups};

/// The version both kinds are served at.
pub const VERSION: &str = "v1alpha1";

/// The kind a webhook admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Nova.
    Nova,
    /// NovaCompute.
    NovaCompute,
}

impl Kind {
    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Nova => "Nova",
            Kind::NovaCompute => "NovaCompute",
        }
    }
}

/// One of the four webhooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Webhook {
    /// Defaulting.
    Mutate(Kind),
    /// Validation.
    Validate(Kind),
}

impl Webhook {
    /// Every webhook.
    pub const ALL: [Webhook; 4] = [
        Webhook::Mutate(Kind::Nova),
        Webhook::Validate(Kind::Nova),
        Webhook::Mutate(Kind::NovaCompute),
        Webhook::Validate(Kind::NovaCompute),
    ];

    /// The HTTP path: `/<mutate|validate>-nova-openstack-c5c3-io-v1alpha1-<kind>`.
    pub fn path(self) -> &'static str {
        match self {
            Webhook::Mutate(Kind::Nova) => "/mutate-nova-openstack-c5c3-io-v1alpha1-nova",
            Webhook::Validate(Kind::Nova) => "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
            Webhook::Mutate(Kind::NovaCompute) => {
                "/mutate-nova-openstack-c5c3-io-v1alpha1-novacompute"
            }
            Webhook::Validate(Kind::NovaCompute) => {
                "/validate-nova-openstack-c5c3-io-v1alpha1-novacompute"
            }
        }
    }
}

/// `GroupVersionKind` of a request.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Gvk {
    /// The group.
    #[serde(default)]
    pub group: String,
    /// The version.
    #[serde(default)]
    pub version: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
}

/// The part of `AdmissionRequest` the webhooks read.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// Echoed in the response.
    pub uid: String,
    /// The object's kind.
    #[serde(default)]
    pub kind: Option<Gvk>,
    /// The object's name (empty with generateName).
    #[serde(default)]
    pub name: Option<String>,
    /// The object's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(default)]
    pub operation: String,
    /// The new object, kept raw: it is decoded once, straight into its kind.
    #[serde(default)]
    pub object: Option<Box<RawValue>>,
    /// The stored object on UPDATE, kept raw.
    #[serde(default)]
    pub old_object: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    request: Option<Request>,
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

/// A decoded review.
#[derive(Clone, Debug)]
pub struct Review {
    /// The review's apiVersion, echoed.
    pub api_version: String,
    /// The request.
    pub request: Request,
}

/// Parses a request body.
pub fn parse(body: &[u8]) -> Result<Review, ReviewError> {
    let review: ReviewIn =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    Ok(Review {
        api_version: review
            .api_version
            .unwrap_or_else(|| "admission.k8s.io/v1".to_owned()),
        request,
    })
}

/// `AdmissionResponse`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// The request's uid.
    pub uid: String,
    /// The verdict.
    pub allowed: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// `JSONPatch` when a patch is returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// The base64 of the RFC 6902 patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Warnings shown to the client.
    #[serde(skip_serializing_if = "Vec::is_empty")]
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
            uid: uid.to_owned(),
            allowed: false,
            status: Some(status),
            patch_type: None,
            patch: None,
            warnings: Vec::new(),
        }
    }

    /// The outcome label of the metrics.
    pub fn outcome(&self) -> &'static str {
        match (&self.status, self.allowed) {
            (_, true) if self.patch.is_some() => "patched",
            (_, true) => "allowed",
            (Some(s), false) if s.code >= 500 => "error",
            (Some(s), false) if s.code == 400 => "bad_request",
            _ => "denied",
        }
    }

    /// The decoded patch (tests).
    pub fn patch_ops(&self) -> Option<Value> {
        let b64 = self.patch.as_ref()?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The AdmissionReview answering `review`.
pub fn envelope(api_version: &str, response: &Response) -> Value {
    serde_json::json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "response": response,
    })
}

/// The envelope serialized.
pub fn envelope_bytes(api_version: &str, response: &Response) -> Vec<u8> {
    serde_json::to_vec(&envelope(api_version, response)).unwrap_or_default()
}

/// The common first steps: kind and operation checks, and the object itself. `Err` is the
/// final response; `Ok(None)` admits without further work (DELETE, CONNECT).
fn start(req: &Request, kind: Kind) -> Result<Option<(Operation, &RawValue)>, Box<Response>> {
    let uid = &req.uid;
    let (group, version, got_kind) = match &req.kind {
        Some(gvk) => (gvk.group.clone(), gvk.version.clone(), gvk.kind.clone()),
        None => {
            #[derive(Default, Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct TypeMeta {
                #[serde(default)]
                api_version: Option<String>,
                #[serde(default)]
                kind: Option<String>,
            }
            let meta: TypeMeta = req
                .object
                .as_ref()
                .and_then(|o| serde_json::from_str(o.get()).ok())
                .unwrap_or_default();
            let api_version = meta.api_version.unwrap_or_default();
            let (g, v) = api_version.split_once('/').unwrap_or(("", &api_version));
            (g.to_owned(), v.to_owned(), meta.kind.unwrap_or_default())
        }
    };
    if group != GROUP || version != VERSION || got_kind != kind.name() {
        return Err(Box::new(Response::deny(
            uid,
            Status::bad_request(format!(
                "this webhook admits {GROUP}/{VERSION} {}, not {}/{} {}",
                kind.name(),
                if group.is_empty() { "core" } else { &group },
                version,
                if got_kind.is_empty() {
                    "(no kind)"
                } else {
                    &got_kind
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
        return Ok(None);
    }
    let Some(object) = req.object.as_deref().filter(|o| is_present(o)) else {
        return Err(Box::new(Response::deny(
            uid,
            Status::bad_request("request.object is missing"),
        )));
    };
    if op == Operation::Update
        && req
            .old_object
            .as_deref()
            .filter(|o| is_present(o))
            .is_none()
    {
        return Err(Box::new(Response::deny(
            uid,
            Status::bad_request("request.oldObject is missing on UPDATE"),
        )));
    }
    Ok(Some((op, object)))
}

fn is_present(raw: &RawValue) -> bool {
    raw.get().trim() != "null"
}

/// The defaulting webhooks: the RFC 6902 patch from the spec as received to the defaulted one.
/// A CR being deleted is left alone, so the finalizer removal keeps an unchanged spec.
pub fn mutate(review: &Review, kind: Kind) -> Response {
    let req = &review.request;
    let (op, raw) = match start(req, kind) {
        Err(resp) => return *resp,
        Ok(None) => return Response::allow(&req.uid),
        Ok(Some(found)) => found,
    };
    let Ok(object) = serde_json::from_str::<Value>(raw.get()) else {
        return Response::allow(&req.uid);
    };
    if op == Operation::Update && Head::of(raw).deleting() {
        return Response::allow(&req.uid);
    }
    let Some(spec) = object.get("spec") else {
        return Response::allow(&req.uid);
    };
    // A spec that does not decode is left to the schema and the validating webhook, which
    // name the offending field; the defaulting webhook has nothing to add to it.
    let defaulted = match kind {
        Kind::Nova => serde_json::from_value::<nova_api::v1alpha1::NovaSpec>(spec.clone())
            .ok()
            .map(|mut s| {
                let before = serde_json::to_value(&s);
                default_nova(&mut s);
                (before, serde_json::to_value(&s))
            }),
        Kind::NovaCompute => {
            serde_json::from_value::<nova_api::v1alpha1::NovaComputeSpec>(spec.clone())
                .ok()
                .map(|mut s| {
                    let before = serde_json::to_value(&s);
                    default_novacompute(&mut s);
                    (before, serde_json::to_value(&s))
                })
        }
    };
    let Some((Ok(before), Ok(after))) = defaulted else {
        return Response::allow(&req.uid);
    };
    let patch = spec_patch(&before, &after);
    let mut resp = Response::allow(&req.uid);
    if !patch.0.is_empty() {
        // The patch is computed on the spec as the types read it; it must apply to the object
        // as received. It does for every object the schema admits; one it does not (a block
        // written as a list, say) is left to the schema, which rejects it.
        let mut probe = serde_json::json!({ "spec": spec });
        if json_patch::patch(&mut probe, &patch.0).is_err() {
            return resp;
        }
        match serde_json::to_vec(&patch) {
            Ok(bytes) => {
                resp.patch_type = Some("JSONPatch".to_owned());
                resp.patch = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
            Err(e) => {
                return Response::deny(
                    &req.uid,
                    Status::internal(format!("encoding the patch: {e}")),
                );
            }
        }
    }
    resp
}

/// The patch between two specs, addressed under `/spec`. `before` is the received spec as the
/// types read it, so the patch carries the defaults only.
pub fn spec_patch(before: &Value, after: &Value) -> json_patch::Patch {
    let wrap = |spec: &Value| serde_json::json!({ "spec": spec });
    json_patch::diff(&wrap(before), &wrap(after))
}

/// What the validating webhook of a kind needs resolved before it can decide.
pub enum Prepared {
    /// Decided already.
    Done(Box<Response>),
    /// A Nova to validate; the PriorityClass names to resolve.
    Nova {
        /// The new object.
        new: Box<Nova>,
        /// The stored object on UPDATE.
        old: Option<Box<Nova>>,
        /// The operation.
        op: Operation,
        /// The PriorityClass names the rules look up.
        priority_classes: Vec<String>,
    },
    /// A NovaCompute to validate; whether its Nova must be read.
    NovaCompute {
        /// The new object.
        new: Box<NovaCompute>,
        /// The stored object on UPDATE.
        old: Option<Box<NovaCompute>>,
        /// The operation.
        op: Operation,
        /// Whether the referenced Nova must be read (the catalog check runs).
        needs_nova: bool,
    },
}

/// The few fields read before the typed decode, borrowed from the body: whether the object is
/// being deleted, its spec as raw JSON, and its name (for an object that does not decode).
#[derive(Default, Deserialize)]
struct Head<'a> {
    #[serde(default, borrow)]
    metadata: MetaHead<'a>,
    #[serde(default, borrow)]
    spec: Option<&'a RawValue>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaHead<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    deletion_timestamp: Option<&'a RawValue>,
}

impl<'a> Head<'a> {
    /// The head of `raw`; empty when it is not an object.
    fn of(raw: &'a RawValue) -> Self {
        serde_json::from_str(raw.get()).unwrap_or_default()
    }

    fn deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

/// Whether two raw specs are the same JSON (key order and spacing aside).
fn same_spec(a: Option<&RawValue>, b: Option<&RawValue>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.get() == b.get()
                || matches!(
                    (
                        serde_json::from_str::<Value>(a.get()),
                        serde_json::from_str::<Value>(b.get()),
                    ),
                    (Ok(x), Ok(y)) if x == y
                )
        }
        _ => false,
    }
}

/// The finalizer removal of a CR being deleted: an UPDATE of an object with a deletion
/// timestamp whose spec is unchanged is admitted without validation. It is decided on the raw
/// specs, before any typed decoding, because it exists for exactly the stored object today's
/// types may no longer decode.
fn deletion_bypass(op: Operation, new: &RawValue, old: Option<&RawValue>) -> bool {
    if op != Operation::Update {
        return false;
    }
    let head = Head::of(new);
    head.deleting() && old.is_some_and(|old| same_spec(head.spec, Head::of(old).spec))
}

/// The response to an object that does not decode into its kind: its fields in the API
/// server's field-error style (422), or the decoder's message for a body that is not JSON (400).
fn undecodable(req: &Request, kind: Kind, raw: &RawValue, why: Undecodable) -> Prepared {
    let status = match why {
        Undecodable::Fields(errors) => {
            let name = Head::of(raw)
                .metadata
                .name
                .or_else(|| req.name.clone())
                .unwrap_or_default();
            Status::invalid(kind.name(), &name, &errors)
        }
        Undecodable::Malformed(e) => {
            Status::bad_request(format!("decoding the object {}: {e}", kind.name()))
        }
    };
    Prepared::Done(Box::new(Response::deny(&req.uid, status)))
}

/// The response to a stored object that does not decode (and is not being deleted): nothing
/// the user sent can fix it, so it is a 400 naming the stored fields.
fn undecodable_stored(req: &Request, kind: Kind, why: Undecodable) -> Prepared {
    let detail = match why {
        Undecodable::Fields(errors) => crate::field::aggregate(&errors).unwrap_or_default(),
        Undecodable::Malformed(e) => e,
    };
    Prepared::Done(Box::new(Response::deny(
        &req.uid,
        Status::bad_request(format!(
            "decoding the stored object {}: {detail}",
            kind.name()
        )),
    )))
}

/// Decodes a validation request.
pub fn prepare(review: &Review, kind: Kind) -> Prepared {
    let req = &review.request;
    let (op, object) = match start(req, kind) {
        Err(resp) => return Prepared::Done(resp),
        Ok(None) => return Prepared::Done(Box::new(Response::allow(&req.uid))),
        Ok(Some(found)) => found,
    };
    let old_value = req
        .old_object
        .as_deref()
        .filter(|_| op == Operation::Update);
    if deletion_bypass(op, object, old_value) {
        return Prepared::Done(Box::new(Response::allow(&req.uid)));
    }
    match kind {
        Kind::Nova => {
            let new: Nova = match decode(object.get()) {
                Ok(v) => v,
                Err(why) => return undecodable(req, kind, object, why),
            };
            let old: Option<Nova> = match old_value.map(|v| decode(v.get())).transpose() {
                Ok(v) => v,
                Err(why) => return undecodable_stored(req, kind, why),
            };
            let priority_classes = validation::nova::priority_class_names(&new.spec);
            Prepared::Nova {
                new: Box::new(new),
                old: old.map(Box::new),
                op,
                priority_classes,
            }
        }
        Kind::NovaCompute => {
            let new: NovaCompute = match decode(object.get()) {
                Ok(v) => v,
                Err(why) => return undecodable(req, kind, object, why),
            };
            let old: Option<NovaCompute> = match old_value.map(|v| decode(v.get())).transpose() {
                Ok(v) => v,
                Err(why) => return undecodable_stored(req, kind, why),
            };
            let needs_nova = validation::novacompute::needs_nova(&new, old.as_ref(), op);
            Prepared::NovaCompute {
                new: Box::new(new),
                old: old.map(Box::new),
                op,
                needs_nova,
            }
        }
    }
}

/// The response of a finished validation.
pub fn respond(uid: &str, kind: Kind, name: &str, outcome: Outcome) -> Response {
    let mut resp = if outcome.errors.is_empty() {
        Response::allow(uid)
    } else {
        Response::deny(uid, Status::invalid(kind.name(), name, &outcome.errors))
    };
    resp.warnings = outcome.warnings;
    resp
}

/// The lookups that need the API server.
pub trait Resolver {
    /// Resolves the PriorityClass names; `enabled: false` when no client is configured.
    fn priority_classes(&self, names: &[String]) -> impl Future<Output = ResolvedLookups> + Send;
    /// Reads the Nova `namespace/name` (uncached). `Err` is the read error's text.
    fn nova(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<NovaRelease, String>> + Send;
}

/// A resolver without a cluster: every lookup skipped, every Nova absent.
pub struct Offline;

impl Resolver for Offline {
    async fn priority_classes(&self, _names: &[String]) -> ResolvedLookups {
        ResolvedLookups::default()
    }

    async fn nova(&self, _namespace: &str, _name: &str) -> Result<NovaRelease, String> {
        Ok(NovaRelease::NotFound)
    }
}

/// Runs a validating webhook end to end.
pub async fn validate<R: Resolver>(review: &Review, kind: Kind, resolver: &R) -> Response {
    let uid = review.request.uid.as_str();
    match prepare(review, kind) {
        Prepared::Done(resp) => *resp,
        Prepared::Nova {
            new,
            old,
            op,
            priority_classes,
        } => {
            let lookups = if priority_classes.is_empty() {
                ResolvedLookups::default()
            } else {
                resolver.priority_classes(&priority_classes).await
            };
            let outcome = validation::nova::validate(&new, old.as_deref(), op, &lookups);
            respond(
                uid,
                kind,
                new.metadata.name.as_deref().unwrap_or(""),
                outcome,
            )
        }
        Prepared::NovaCompute {
            new,
            old,
            op,
            needs_nova,
        } => {
            let nova = if needs_nova {
                let ns = new
                    .metadata
                    .namespace
                    .clone()
                    .or_else(|| review.request.namespace.clone())
                    .unwrap_or_default();
                match resolver.nova(&ns, &new.spec.nova_ref.name).await {
                    Ok(found) => Some(found),
                    Err(e) => {
                        return Response::deny(
                            uid,
                            Status::internal(format!(
                                "reading Nova {ns}/{}: {e}",
                                new.spec.nova_ref.name
                            )),
                        );
                    }
                }
            } else {
                None
            };
            let mut new = *new;
            if new.metadata.namespace.is_none() {
                new.metadata.namespace = review.request.namespace.clone();
            }
            let outcome =
                validation::novacompute::validate(&new, old.as_deref(), op, nova.as_ref());
            respond(
                uid,
                kind,
                new.metadata.name.as_deref().unwrap_or(""),
                outcome,
            )
        }
    }
}

/// What a handled request produced.
pub struct Handled {
    /// The HTTP status: 200 for every AdmissionReview, 400 for a body that is none.
    pub status: u16,
    /// The response body.
    pub body: Vec<u8>,
    /// The admission response, when there is one.
    pub response: Option<Response>,
    /// The review's operation (metric label).
    pub operation: String,
}

/// Runs any webhook on a raw body. A body that is not an AdmissionReview is answered with 400
/// and a plain message.
pub async fn handle<R: Resolver>(webhook: Webhook, body: &[u8], resolver: &R) -> Handled {
    let review = match parse(body) {
        Ok(r) => r,
        Err(e) => {
            return Handled {
                status: 400,
                body: e.to_string().into_bytes(),
                response: None,
                operation: "unknown".into(),
            };
        }
    };
    let resp = match webhook {
        Webhook::Mutate(kind) => mutate(&review, kind),
        Webhook::Validate(kind) => validate(&review, kind, resolver).await,
    };
    trace_verdict(webhook, &review.request, &resp);
    Handled {
        status: 200,
        body: envelope_bytes(&review.api_version, &resp),
        response: Some(resp),
        operation: review.request.operation.clone(),
    }
}

/// The request's one span, opened once the verdict is known so that its level can follow it:
/// info for a denial, debug for an admission (a busy cluster admits thousands a minute). It
/// carries what an operator greps for, never a field value.
fn trace_verdict(webhook: Webhook, req: &Request, resp: &Response) {
    let (Webhook::Mutate(kind) | Webhook::Validate(kind)) = webhook;
    let violations = resp
        .status
        .as_ref()
        .and_then(|s| s.details.as_ref())
        .map_or(0, |d| d.causes.len());
    macro_rules! verdict_span {
        ($level:expr) => {{
            let span = tracing::span!(
                $level,
                "admission",
                webhook = webhook.path(),
                uid = %req.uid,
                kind = kind.name(),
                namespace = req.namespace.as_deref().unwrap_or(""),
                name = req.name.as_deref().unwrap_or(""),
                operation = %req.operation,
                verdict = resp.outcome(),
                violations,
            );
            span.in_scope(|| tracing::event!($level, "admission reviewed"));
        }};
    }
    if resp.allowed {
        verdict_span!(tracing::Level::DEBUG);
    } else {
        verdict_span!(tracing::Level::INFO);
    }
}

/// A field error list as a status (tests, golden files).
pub fn invalid_status(kind: Kind, name: &str, errors: &[FieldError]) -> Status {
    Status::invalid(kind.name(), name, errors)
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
