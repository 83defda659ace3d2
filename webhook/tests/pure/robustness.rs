//! A deterministic fuzz of the decode-default-validate path: thousands of randomly damaged
//! reviews of both kinds through all four webhooks. None may panic, every AdmissionReview gets
//! an answer with its uid, and every defaulting patch applies to the object it was made for and
//! turns its spec into the spec defaulted.
//!
//! `NOVA_WEBHOOK_FUZZ_ITERATIONS=200000 cargo test -p nova-webhook --release --test pure robustness`
//! runs it longer.

use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_webhook::admitted::Admitted;
use nova_webhook::review::{Offline, Webhook, handle};
use serde_json::{Value, json};

use crate::damage::{self, Rng, mutate};

use nova_testkit::fixtures::EXAMPLE_NOVA_YAML as EXAMPLE_NOVA;
use nova_testkit::fixtures::EXAMPLE_POOL_YAML as EXAMPLE_POOL;

fn review(kind: &str, operation: &str, object: &Value, old: Option<&Value>) -> Vec<u8> {
    let mut request = json!({
        "uid": "fuzz",
        "kind": {"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "kind": kind},
        "operation": operation,
        "namespace": "openstack",
        "object": object,
    });
    if let Some(old) = old {
        request["oldObject"] = old.clone();
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})).unwrap()
}

/// The patched object's spec reads as the received spec defaulted: the patch carries every
/// default the types apply, and nothing else.
fn carries_every_default<K: Admitted>(i: usize, object: &Value, patched: &Value)
where
    K::Spec: PartialEq + std::fmt::Debug,
{
    let mut want: K::Spec = serde_json::from_value(object["spec"].clone())
        .unwrap_or_else(|e| panic!("iteration {i}: a patched spec decoded: {e}"));
    K::default_spec(&mut want, &mut ());
    let got: K::Spec = serde_json::from_value(patched["spec"].clone())
        .unwrap_or_else(|e| panic!("iteration {i}: the patched spec decodes: {e}"));
    assert_eq!(got, want, "iteration {i}: {}", object["spec"]);
}

type Check = fn(usize, &Value, &Value);

#[test]
fn damaged_reviews_never_panic() {
    nova_webhook::catalog::init().unwrap();
    let iterations: usize = std::env::var("NOVA_WEBHOOK_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let bases = [
        (
            [Webhook::mutate::<Nova>(), Webhook::validate::<Nova>()],
            "Nova",
            serde_saphyr::from_str::<Value>(EXAMPLE_NOVA).unwrap(),
            carries_every_default::<Nova> as Check,
        ),
        (
            [
                Webhook::mutate::<NovaCompute>(),
                Webhook::validate::<NovaCompute>(),
            ],
            "NovaCompute",
            serde_saphyr::from_str::<Value>(EXAMPLE_POOL).unwrap(),
            carries_every_default::<NovaCompute> as Check,
        ),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..iterations {
        let (webhooks, name, base, check) = &bases[i % 2];
        let mut object = base.clone();
        for _ in 0..=rng.below(4) {
            mutate(&mut object, &mut rng, 0);
        }
        let (op, old) = if rng.below(2) == 0 {
            ("CREATE", None)
        } else {
            ("UPDATE", Some(base))
        };
        let body = review(name, op, &object, old);
        for webhook in *webhooks {
            let handled = futures::executor::block_on(handle(webhook, &body, &Offline));
            assert_eq!(
                handled.status,
                200,
                "iteration {i}: {}",
                String::from_utf8_lossy(&handled.body)
            );
            let resp = handled.response.expect("a response");
            assert_eq!(resp.uid, "fuzz");
            if let Some(ops) = resp.patch_ops() {
                let patch: json_patch::Patch = serde_json::from_value(ops).unwrap();
                let mut patched = object.clone();
                json_patch::patch(&mut patched, &patch.0).unwrap_or_else(|e| {
                    panic!(
                        "iteration {i}: the patch does not apply: {e}\n{}\n{}",
                        object["spec"],
                        serde_json::to_string(&patch).unwrap_or_default()
                    )
                });
                check(i, &object, &patched);
            }
        }
        // Raw bytes: truncated and bit-flipped bodies.
        let raw = damage::bytes(&body, &mut rng, true);
        for webhook in Webhook::ALL {
            let _ = futures::executor::block_on(handle(webhook, &raw, &Offline));
        }
    }
}
