//! Any bytes, as an AdmissionReview body, through all four webhooks: decoding, defaulting and
//! validation must answer, never panic. The Offline resolver answers the API lookups.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nova_webhook::review::{Offline, Webhook, handle};

fuzz_target!(|body: &[u8]| {
    for webhook in Webhook::ALL {
        futures::executor::block_on(handle(webhook, body, &Offline));
    }
});
