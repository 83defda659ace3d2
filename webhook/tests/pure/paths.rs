//! The differential test of the two review paths (`src/review/mod.rs`): the single pass, which
//! decodes the review and its object together and declines what it cannot answer from that
//! alone, and the general path, which keeps the object raw and answers every body. `handle`
//! takes the single pass's answer when there is one, so wherever it answers it must answer
//! exactly as the general path would: the same HTTP status and the same AdmissionReview, byte
//! for byte (verdict, status code and message, patch, warnings).
//!
//! The inputs are the fuzz seeds, the seeds defaulted, deterministic variations of them
//! (`damage::bases`, `damage::variation`), each variation also with bits flipped, and the
//! regression cases below, through all four webhooks.

use nova_webhook::review::{Handled, Offline, Webhook, both_paths};
use serde_json::Value;

use crate::damage::{self, Rng};

/// Variations of each base.
const VARIATIONS: usize = 1000;

/// Inputs on which the two paths once disagreed.
const REGRESSIONS: &[&[u8]] = &[
    // A byte that is not UTF-8 in a string of the object no single pass reads (its apiVersion):
    // the single pass, reading bytes, skipped it and answered; the general path's raw object
    // rejects the body as no JSON (400).
    b"{\"request\":{\"uid\":\"u\",\"kind\":{\"group\":\"nova.openstack.c5c3.io\",\"version\":\"v1alpha1\",\"kind\":\"NovaCompute\"},\"operation\":\"CREATE\",\"object\":{\"apiVersion\":\"nova.openstack.c5c3.io\xafv1alpha1\"}}}",
];

/// Runs both paths of `webhook` on `body`; whether the single pass answered.
fn agree(webhook: Webhook, body: &[u8], input: &str) -> bool {
    let (direct, general) = futures::executor::block_on(both_paths(webhook, body, &Offline));
    let Some(direct) = direct else {
        return false;
    };
    let shown = |h: &Handled| String::from_utf8_lossy(&h.body).into_owned();
    let context = || {
        format!(
            "{webhook:?} on {input}:\n  single pass: {} {}\n  general:     {} {}\n  body: {}",
            direct.status,
            shown(&direct),
            general.status,
            shown(&general),
            String::from_utf8_lossy(body)
        )
    };
    assert_eq!(direct.status, general.status, "{}", context());
    assert_eq!(direct.body, general.body, "{}", context());
    assert_eq!(direct.response, general.response, "{}", context());
    assert_eq!(direct.operation, general.operation, "{}", context());
    true
}

#[test]
fn the_single_pass_answers_as_the_general_path_wherever_it_answers() {
    nova_webhook::catalog::init().unwrap();
    let mut bodies: Vec<(String, Vec<u8>)> = REGRESSIONS
        .iter()
        .enumerate()
        .map(|(i, body)| (format!("regression {i}"), body.to_vec()))
        .collect();
    bodies.extend(damage::seeds());
    let mut rng = Rng(0xD1FF_5EED);
    for (name, base) in damage::bases() {
        for i in 0..VARIATIONS {
            let body = serde_json::to_vec(&damage::variation(&base, &mut rng)).unwrap();
            let flipped = damage::bytes(&body, &mut rng, false);
            bodies.push((format!("{name}, variation {i}"), body));
            bodies.push((format!("{name}, variation {i}, bits flipped"), flipped));
        }
        bodies.push((
            format!("{name}, compact"),
            serde_json::to_vec(&base).unwrap(),
        ));
    }
    let mut answered = 0;
    for (input, body) in &bodies {
        for webhook in Webhook::ALL {
            answered += usize::from(agree(webhook, body, input));
        }
    }
    let runs = bodies.len() * Webhook::ALL.len();
    eprintln!(
        "{} bodies, {runs} reviews: the single pass answered {answered}, left {} to the general path",
        bodies.len(),
        runs - answered
    );
    // Not vacuous: the single pass answers a good share (a review for the other kind, most
    // damaged objects and most flipped bits are left to the general path).
    assert!(answered >= runs / 10, "{answered} of {runs}");
}

#[test]
fn the_single_pass_answers_both_seeds_through_both_webhooks_of_their_kind() {
    nova_webhook::catalog::init().unwrap();
    for (name, seed) in damage::seeds() {
        let review: Value = serde_json::from_slice(&seed).unwrap();
        let kind = &review["request"]["kind"]["kind"];
        for webhook in Webhook::ALL.into_iter().filter(|w| kind == w.kind) {
            assert!(agree(webhook, &seed, &name), "{webhook:?} declined {name}");
        }
    }
}
