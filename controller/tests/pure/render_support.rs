//! Fixtures and golden-file helpers shared by the render test binaries.
#![allow(dead_code)]

use std::path::PathBuf;

use nova_api::v1alpha1::{Nova, NovaSpec};

/// The two releases a nova.conf must render byte-identically at.
pub const RELEASES: [&str; 2] = ["2026.1", "2026.2"];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The golden directory.
pub fn golden_dir() -> PathBuf {
    manifest_dir().join("tests").join("golden")
}

/// Parses a Nova manifest.
pub fn parse(yaml: &str) -> Nova {
    serde_saphyr::from_str(yaml).expect("a Nova manifest")
}

/// The spec's Example (examples/nova.yaml): (name, namespace, spec).
pub fn example() -> (String, String, NovaSpec) {
    let text = std::fs::read_to_string(manifest_dir().join("../examples/nova.yaml"))
        .expect("examples/nova.yaml");
    split(parse(&text))
}

/// Golden fixture 2 (tests/golden/full.yaml).
pub fn full() -> (String, String, NovaSpec) {
    let text = std::fs::read_to_string(golden_dir().join("full.yaml")).expect("full.yaml");
    split(parse(&text))
}

fn split(nova: Nova) -> (String, String, NovaSpec) {
    (
        nova.metadata.name.expect("name"),
        nova.metadata.namespace.expect("namespace"),
        nova.spec,
    )
}

/// `spec` at `release` (image tag following it, as a release bump would do).
pub fn at_release(spec: &NovaSpec, release: &str) -> NovaSpec {
    let mut spec = spec.clone();
    spec.open_stack_release = release.to_owned();
    spec.image.tag = Some(release.to_owned());
    spec
}

/// Compares `actual` with the golden file `name`, or rewrites it when UPDATE_GOLDEN=1.
pub fn assert_golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("golden dir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    pretty_assertions::assert_str_eq!(expected, actual, "golden file {name}");
}

/// The `[section]` headers of an INI text, in order.
pub fn sections(ini: &str) -> Vec<String> {
    ini.lines()
        .filter(|l| l.starts_with('[') && l.ends_with(']'))
        .map(|l| l[1..l.len() - 1].to_owned())
        .collect()
}

/// The value of `[section] key` in an INI text.
pub fn value(ini: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in ini.lines() {
        if line.starts_with('[') && line.ends_with(']') {
            current = line[1..line.len() - 1].to_owned();
        } else if current == section
            && let Some((k, v)) = line.split_once(" =")
            && k == key
        {
            return Some(v.trim_start().to_owned());
        }
    }
    None
}

/// The (section, key) pairs of an INI text.
pub fn keys(ini: &str) -> Vec<(String, String)> {
    let mut current = String::new();
    let mut out = Vec::new();
    for line in ini.lines() {
        if line.starts_with('[') && line.ends_with(']') {
            current = line[1..line.len() - 1].to_owned();
        } else if let Some((k, _)) = line.split_once(" =") {
            out.push((current.clone(), k.to_owned()));
        }
    }
    out
}
