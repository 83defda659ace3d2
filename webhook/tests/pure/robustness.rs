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

use nova_testkit::fixtures::EXAMPLE_NOVA_YAML as EXAMPLE_NOVA;
use nova_testkit::fixtures::EXAMPLE_POOL_YAML as EXAMPLE_POOL;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const STRINGS: &[&str] = &[
    "",
    "\n",
    "a\r\nb",
    "$x",
    "-1",
    "0",
    "2025.2",
    "2026.3",
    "9999999999999999999999",
    "CUSTOM_",
    "@daily",
    "* * * * 7",
    "http://",
    "https://u:p@h/",
    "ftp://x",
    "Exists",
    "NoExecute",
    "custom",
    "OnDelete",
    "50%",
    "1e3",
    "500m",
    "Gi",
    "nova-api",
    "\u{0}",
    "é",
    "DEFAULT",
    "kvm.cloud.sap/offboarding",
];

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 2 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => json!(rng.below(3) == 0),
        2 => json!((rng.next() as i64) >> rng.below(64)),
        3 => json!(STRINGS[rng.below(STRINGS.len())]),
        4 => json!("x".repeat(rng.below(300))),
        5 => Value::Array(
            (0..rng.below(3))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(3) {
                map.insert(
                    STRINGS[rng.below(STRINGS.len())].to_owned(),
                    random_value(rng, depth + 1),
                );
            }
            Value::Object(map)
        }
    }
}

/// Damages one random node of `v`.
fn mutate(v: &mut Value, rng: &mut Rng, depth: usize) {
    let descend = rng.below(4) != 0 && depth < 8;
    match v {
        Value::Object(map) if descend && !map.is_empty() => {
            let key = map
                .keys()
                .nth(rng.below(map.len()))
                .cloned()
                .unwrap_or_default();
            match rng.below(6) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(
                        STRINGS[rng.below(STRINGS.len())].to_owned(),
                        random_value(rng, depth),
                    );
                }
                _ => {
                    if let Some(child) = map.get_mut(&key) {
                        mutate(child, rng, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) if descend && !items.is_empty() => {
            let i = rng.below(items.len());
            mutate(&mut items[i], rng, depth + 1);
        }
        other => *other = random_value(rng, depth),
    }
}

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
        let mut raw = body.clone();
        let cut = rng.below(raw.len());
        raw.truncate(cut);
        let flips = rng.below(3);
        for _ in 0..flips {
            if !raw.is_empty() {
                let at = rng.below(raw.len());
                raw[at] ^= 1 << rng.below(8);
            }
        }
        for webhook in Webhook::ALL {
            let _ = futures::executor::block_on(handle(webhook, &raw, &Offline));
        }
    }
}
