//! The four webhooks as functions from a request body to a response body, generic over the
//! admitted kind ([`Admitted`]): `wire` (the AdmissionReview types), `mutate` (defaulting),
//! `validate` (validation). The HTTP handler only reads the body and writes the result.
//!
//! A request that cannot be understood becomes an error response, never a panic.

pub mod mutate;
mod tracked;
pub mod validate;
pub mod wire;

use futures::future::BoxFuture;
use nova_api::v1alpha1::{Nova, NovaCompute};

pub use self::wire::{Response, Review, ReviewError, envelope_bytes, parse};
use crate::admitted::Admitted;
pub use crate::lookups::{Offline, Resolver};

/// What a webhook does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Defaulting.
    Mutate,
    /// Validation.
    Validate,
}

type Run = for<'a> fn(&'a Review<'a>, &'a dyn Resolver) -> BoxFuture<'a, Response>;

/// A webhook's single pass: the review decoded with its object, when the webhook can answer
/// from that alone; `None` sends the body down the general path (the object kept raw), which
/// answers whatever the single pass does not: a body that is no review, an object that does
/// not decode (named field by field there), a request without its kind. It reads the body as
/// text: [`handle`] sends a body that is not UTF-8 down the general path.
type Direct = for<'a> fn(Webhook, &'a str, &'a dyn Resolver) -> BoxFuture<'a, Option<Handled>>;

/// One of the four webhooks: a verb on a kind, at its path.
#[derive(Clone, Copy)]
pub struct Webhook {
    /// Defaulting or validation.
    pub verb: Verb,
    /// The kind admitted.
    pub kind: &'static str,
    /// The HTTP path: `/<mutate|validate>-nova-openstack-c5c3-io-v1alpha1-<kind>`.
    pub path: &'static str,
    run: Run,
    direct: Direct,
}

impl Webhook {
    /// Every webhook.
    pub const ALL: [Webhook; 4] = [
        Webhook::mutate::<Nova>(),
        Webhook::validate::<Nova>(),
        Webhook::mutate::<NovaCompute>(),
        Webhook::validate::<NovaCompute>(),
    ];

    /// The defaulting webhook of `K`.
    pub const fn mutate<K: Admitted>() -> Self {
        Webhook {
            verb: Verb::Mutate,
            kind: K::KIND,
            path: K::MUTATE_PATH,
            run: run_mutate::<K>,
            direct: direct_mutate::<K>,
        }
    }

    /// The validating webhook of `K`.
    pub const fn validate<K: Admitted>() -> Self {
        Webhook {
            verb: Verb::Validate,
            kind: K::KIND,
            path: K::VALIDATE_PATH,
            run: run_validate::<K>,
            direct: direct_validate::<K>,
        }
    }
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.path)
    }
}

impl PartialEq for Webhook {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

fn run_mutate<'a, K: Admitted>(
    review: &'a Review<'a>,
    _: &'a dyn Resolver,
) -> BoxFuture<'a, Response> {
    Box::pin(std::future::ready(mutate::mutate::<K>(review)))
}

/// The defaulting webhook in one pass: the spec decoded with the review.
fn direct_mutate<'a, K: Admitted>(
    webhook: Webhook,
    body: &'a str,
    _: &'a dyn Resolver,
) -> BoxFuture<'a, Option<Handled>> {
    Box::pin(std::future::ready(
        wire::parse_as::<mutate::Received<'_, K::Spec>>(body)
            .ok()
            .and_then(|mut review| {
                let resp = mutate::mutate_received::<K>(&mut review)?;
                Some(handled(webhook, &review, resp))
            }),
    ))
}

/// The validating webhook in one pass: the object decoded with the review.
fn direct_validate<'a, K: Admitted>(
    webhook: Webhook,
    body: &'a str,
    resolver: &'a dyn Resolver,
) -> BoxFuture<'a, Option<Handled>> {
    Box::pin(async move {
        let mut review = wire::parse_as::<Box<K>>(body).ok()?;
        let resp = validate::validate_decoded::<K>(&mut review, resolver).await?;
        Some(handled(webhook, &review, resp))
    })
}

fn run_validate<'a, K: Admitted>(
    review: &'a Review<'a>,
    resolver: &'a dyn Resolver,
) -> BoxFuture<'a, Response> {
    Box::pin(validate::validate::<K>(review, resolver))
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

/// Runs a webhook on a raw body. A body that is not an AdmissionReview is answered with 400
/// and a plain message.
pub async fn handle(webhook: Webhook, body: &[u8], resolver: &dyn Resolver) -> Handled {
    if let Some(handled) = direct(webhook, body, resolver).await {
        return handled;
    }
    general(webhook, body, resolver).await
}

/// The single pass, on a body that is UTF-8. JSON is: read as bytes, the single pass would
/// skip unchecked the strings of the object its types do not name (serde_json checks the
/// UTF-8 of what it decodes, not of what it skips), and so answer a body whose raw object the
/// general path rejects as no JSON.
async fn direct(webhook: Webhook, body: &[u8], resolver: &dyn Resolver) -> Option<Handled> {
    let text = std::str::from_utf8(body).ok()?;
    (webhook.direct)(webhook, text, resolver).await
}

/// Both paths of [`handle`] on one body, each alone: the single pass's answer (`None` where it
/// declines) and the general path's. Public only for the pure tier's differential test
/// (`tests/pure/paths.rs`), which shows that wherever the single pass answers, it answers as
/// the general path would; the server calls [`handle`].
#[doc(hidden)]
pub async fn both_paths(
    webhook: Webhook,
    body: &[u8],
    resolver: &dyn Resolver,
) -> (Option<Handled>, Handled) {
    let direct = direct(webhook, body, resolver).await;
    (direct, general(webhook, body, resolver).await)
}

/// The general path: the review parsed with its object kept raw; it answers every body.
async fn general(webhook: Webhook, body: &[u8], resolver: &dyn Resolver) -> Handled {
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
    let resp = (webhook.run)(&review, resolver).await;
    handled(webhook, &review, resp)
}

/// The answer to a review: the response in its envelope, traced.
fn handled<O>(webhook: Webhook, review: &Review<'_, O>, resp: Response) -> Handled {
    trace_verdict(webhook, &review.request, &resp);
    Handled {
        status: 200,
        body: envelope_bytes(&review.api_version, &resp),
        response: Some(resp),
        operation: review.request.operation.clone().into_owned(),
    }
}

/// The request's one span, opened once the verdict is known so that its level can follow it:
/// info for a denial, debug for an admission (a busy cluster admits thousands a minute). It
/// carries what an operator greps for, never a field value.
fn trace_verdict<O>(webhook: Webhook, req: &wire::Request<'_, O>, resp: &Response) {
    macro_rules! verdict_span {
        ($level:expr) => {{
            let span = tracing::span!(
                $level,
                "admission",
                webhook = webhook.path,
                uid = %req.uid,
                kind = webhook.kind,
                namespace = req.namespace.as_deref().unwrap_or(""),
                name = req.name.as_deref().unwrap_or(""),
                operation = %req.operation,
                verdict = resp.outcome(),
                violations = resp.violations(),
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

#[cfg(test)]
mod tests;
