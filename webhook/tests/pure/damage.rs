//! Deterministic damage to JSON values, and the fuzz seeds with variations of them, shared by
//! the tests that fuzz the reviews without libFuzzer (`robustness`, `paths`, `defaulting`): a
//! fixed-seed generator, so every run sees the same inputs.

use nova_webhook::review::{Offline, Verb, Webhook, handle};
use serde_json::{Value, json};

/// xorshift64*: deterministic and dependency-free.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
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
pub fn mutate(v: &mut Value, rng: &mut Rng, depth: usize) {
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

/// `body` cut short at a random point (when `cut`), then up to two of its bits flipped.
pub fn bytes(body: &[u8], rng: &mut Rng, cut: bool) -> Vec<u8> {
    let mut raw = body.to_vec();
    if cut {
        let at = rng.below(raw.len());
        raw.truncate(at);
    }
    let flips = rng.below(3);
    for _ in 0..flips {
        if !raw.is_empty() {
            let at = rng.below(raw.len());
            raw[at] ^= 1 << rng.below(8);
        }
    }
    raw
}

/// The libFuzzer seeds (`webhook/fuzz/seeds/admission/`), by file name: AdmissionReviews of
/// both samples, as the API server sends them.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/admission");
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|entry| {
            let path = entry.expect("a seed").path();
            let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                body,
            )
        })
        .collect();
    seeds.sort();
    assert_eq!(seeds.len(), 2, "one seed per kind in {dir}");
    seeds
}

/// The bases the variations start from: each seed, and each seed with its defaulting patch
/// applied (when it has one), so that already defaulted objects are varied too.
pub fn bases() -> Vec<(String, Value)> {
    let mut bases = Vec::new();
    for (name, seed) in seeds() {
        let review: Value = serde_json::from_slice(&seed).expect("a seed is JSON");
        let kind = &review["request"]["kind"]["kind"];
        let mutate = Webhook::ALL
            .into_iter()
            .find(|w| w.verb == Verb::Mutate && kind == w.kind)
            .expect("a seed of a known kind");
        let handled = futures::executor::block_on(handle(mutate, &seed, &Offline));
        let ops = handled.response.and_then(|r| r.patch_ops());
        if let Some(ops) = ops {
            let patch: json_patch::Patch = serde_json::from_value(ops).expect("an RFC 6902 patch");
            let mut defaulted = review.clone();
            json_patch::patch(&mut defaulted["request"]["object"], &patch).expect("it applies");
            bases.push((format!("{name} defaulted"), defaulted));
        }
        bases.push((name, review));
    }
    bases
}

/// A variation of the review `seed`: its object damaged in one to four places, and the request
/// around it varied the ways the webhooks tell apart: a CREATE, an UPDATE of the seed's
/// object, the UPDATE of an object being deleted (its spec unchanged or damaged), the
/// request's own fields damaged, or its kind left out (read from the object then).
pub fn variation(seed: &Value, rng: &mut Rng) -> Value {
    let mut review = seed.clone();
    let request = &mut review["request"];
    let stored = request["object"].clone();
    let object = &mut request["object"];
    let damages = rng.below(5);
    for _ in 0..damages {
        mutate(object, rng, 0);
    }
    match rng.below(6) {
        0 => {}
        1 | 2 => {
            request["operation"] = json!("UPDATE");
            request["oldObject"] = stored;
        }
        3 => {
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("deletionTimestamp".into(), json!("2026-01-01T00:00:00Z"));
            }
            request["operation"] = json!("UPDATE");
            request["oldObject"] = stored;
        }
        4 => mutate(request, rng, 0),
        _ => {
            if let Some(request) = request.as_object_mut() {
                request.remove("kind");
            }
        }
    }
    review
}
