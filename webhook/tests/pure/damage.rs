//! Deterministic damage to JSON values, for the tests that fuzz the reviews without libFuzzer:
//! a fixed-seed generator, so every run sees the same inputs.

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
