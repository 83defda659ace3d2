//! The layering rule of `controller/README.md` ("Layering"), kept true: the library's modules
//! stand on floors and a module's code names only modules on lower floors (or itself), so no
//! import runs uphill and no two modules import each other. A file's own unit tests (from its
//! first `#[cfg(test)]` on) are left out: fixtures may reach wherever a test needs.
//!
//! A new top-level module takes a floor here; moving one up or down is a design change to make
//! in the README first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;

/// The library's top-level modules by floor, the ground first (the binary's `cli/` and
/// `main.rs` stand above them all and reach the library as `nova_controller::`).
const FLOORS: &[&[&str]] = &[
    &[
        "objects",
        "sensitive",
        "service_proxy",
        "bounded",
        "ratelimit",
        "progress",
        "leadership",
    ],
    &["render", "metrics"],
    &["openstack", "crd_currency"],
    &["clusters"],
    &["pipeline"],
    &["nova"],
    &["novacompute"],
    &["offline"],
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// Every library source file with its top-level module (`lib.rs` and the binary's files
/// excluded).
fn library_files() -> Vec<(String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            let relative = path.strip_prefix(&src).expect("under src");
            let top = relative
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .expect("a name")
                .trim_end_matches(".rs")
                .to_owned();
            if matches!(top.as_str(), "cli" | "main" | "lib") {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push((top, path));
            }
        }
    }
    files.sort();
    files
}

/// The code of `path` before its unit tests.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file");
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

#[test]
fn every_module_stands_on_a_floor() {
    let unplaced: Vec<_> = library_files()
        .into_iter()
        .filter(|(top, _)| floor_of(top).is_none())
        .map(|(top, _)| top)
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules without a floor in tests/pure/layering.rs: {unplaced:?}"
    );
}

#[test]
fn imports_run_downhill_only() {
    let named = Regex::new(r"crate::([a-z_]+)").expect("the pattern");
    let files = library_files();
    assert!(
        files.len() > 100,
        "the library's files are found: {}",
        files.len()
    );
    let mut uphill: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (top, path) in &files {
        let Some(floor) = floor_of(top) else { continue };
        for found in named.captures_iter(&code_of(path)) {
            let target = &found[1];
            let allowed = target == top || floor_of(target).is_some_and(|f| f < floor);
            if !allowed {
                uphill
                    .entry(format!("{} ({top})", path.display()))
                    .or_default()
                    .push(target.to_owned());
            }
        }
    }
    assert!(
        uphill.is_empty(),
        "imports running uphill or across a floor (file: modules named): {uphill:#?}"
    );
}
