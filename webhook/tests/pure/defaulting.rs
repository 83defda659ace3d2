//! The defaulting oracle (`oracle.rs`) over the fuzz seeds, the seeds defaulted, and
//! deterministic variations of them (`damage::bases`, `damage::variation`), on every
//! `cargo test`: CI does not run libFuzzer.

use serde_json::{Value, json};

use crate::damage::{self, Rng};
use crate::oracle::{self, Checked};

/// Variations of each base.
const VARIATIONS: usize = 1000;

fn seeds() -> Vec<Value> {
    damage::seeds()
        .into_iter()
        .map(|(_, seed)| serde_json::from_slice(&seed).expect("a seed is JSON"))
        .collect()
}

#[test]
fn the_defaulting_patch_gives_the_object_the_controller_defaults() {
    nova_webhook::catalog::init().unwrap();
    let mut rng = Rng(0xDEFA_0171_5EED);
    let mut reviews = Vec::new();
    for (_, base) in damage::bases() {
        reviews.extend((0..VARIATIONS).map(|_| damage::variation(&base, &mut rng)));
        reviews.push(base);
    }
    let (mut patch, mut no_patch, mut neither) = (0, 0, 0);
    for checked in reviews.iter().flat_map(oracle::defaulting) {
        match checked {
            Checked::Patch => patch += 1,
            Checked::NoPatch => no_patch += 1,
            Checked::Neither => neither += 1,
        }
    }
    eprintln!(
        "{} reviews through both defaulting webhooks: {patch} patched, {no_patch} already defaulted, {neither} neither",
        reviews.len()
    );
    assert!(patch > 0 && no_patch > 0, "{patch} {no_patch} {neither}");
}

/// Regression: an object written as a JSON array, `[metadata, spec]`, was read as its head
/// (serde's sequence form of a struct) and answered with a patch under `/spec`, which no array
/// has. It is left to the schema, unpatched, like any object that does not read.
#[test]
fn an_object_written_as_an_array_is_not_patched() {
    nova_webhook::catalog::init().unwrap();
    for mut review in seeds() {
        let object = &mut review["request"]["object"];
        *object = json!([object["metadata"].take(), object["spec"].take()]);
        assert_eq!(oracle::defaulting(&review), [Checked::Neither; 2]);
    }
}
