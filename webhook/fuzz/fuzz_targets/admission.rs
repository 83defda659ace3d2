//! Any bytes, as an AdmissionReview body, through both kinds the way the API server calls
//! them: the defaulting webhook first, its patch applied to the object, then the validating
//! webhook on the patched review. Decoding, defaulting and validation must answer, never panic;
//! a patch must apply to the object it was computed for; and no input may take more than 10 ms
//! of CPU (thread CPU time, so a preempted run on a busy machine does not count). A hang is a
//! property of the input and repeats; a page-fault storm or a stall of the host does not, so
//! an input over the budget is run twice more and fails only if it is over every time. The
//! Offline resolver answers the API lookups.
//!
//! An input that is JSON is then checked against the defaulting oracle (the pure tier's
//! `oracle.rs`, included): the defaulting patch gives the object the controller's defaulting
//! gives. It runs outside the CPU budget.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_webhook::review::{Handled, Offline, Webhook, handle};
use serde_json::Value;

#[path = "../../tests/pure/oracle.rs"]
mod oracle;

const BUDGET: Duration = Duration::from_millis(10);
/// How often an input is run before it counts as over the budget.
const TRIES: usize = 3;

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn run(webhook: Webhook, body: &[u8]) -> Handled {
    futures::executor::block_on(handle(webhook, body, &Offline))
}

/// The review with the mutating response's patch applied to `request.object`, when there is
/// one; the patch must apply.
fn patched(body: &[u8], mutated: &Handled) -> Option<Vec<u8>> {
    let ops = mutated.response.as_ref()?.patch_ops()?;
    let mut review: Value = serde_json::from_slice(body).ok()?;
    let patch: json_patch::Patch = serde_json::from_value(ops).expect("the patch is RFC 6902");
    let object = review.pointer_mut("/request/object").expect("a patched review has an object");
    json_patch::patch(object, &patch).expect("the patch applies to the object it was made for");
    serde_json::to_vec(&review).ok()
}

/// The thread CPU time one mutate-then-validate of both kinds takes on `body`.
fn admit(body: &[u8]) -> Duration {
    let started = thread_cpu();
    for (mutate, validate) in [
        (Webhook::mutate::<Nova>(), Webhook::validate::<Nova>()),
        (Webhook::mutate::<NovaCompute>(), Webhook::validate::<NovaCompute>()),
    ] {
        let mutated = run(mutate, body);
        match patched(body, &mutated) {
            Some(next) => run(validate, &next),
            None => run(validate, body),
        };
    }
    thread_cpu() - started
}

fuzz_target!(|body: &[u8]| {
    let spent: Vec<Duration> = (0..TRIES)
        .map(|_| admit(body))
        .take_while(|spent| *spent >= BUDGET)
        .collect();
    assert!(
        spent.len() < TRIES,
        "one input took {spent:?} of CPU, over {BUDGET:?} every time"
    );
    if let Ok(review) = serde_json::from_slice::<Value>(body) {
        oracle::defaulting(&review);
    }
});
