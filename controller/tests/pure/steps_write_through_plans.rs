//! Every write a step makes is in its plan (issue 27, "every effect in the plan"): no step
//! file calls a write of the cluster handle or of the OpenStack client. A step holds the
//! handle's read side (`clusters::Handle` derefs to `ClusterReads`), so a write needs its
//! `.writes()` (or `.whole()`), which only the engine and the skeleton call. The engine carries out
//! children and effects (`pipeline/engine.rs`, `pipeline/effects.rs`) and the one executor
//! carries out OpenStack actions (`openstack/action.rs`). A step file's own unit tests are
//! left out: they drive the seams directly.

use std::path::{Path, PathBuf};

use regex::Regex;

/// The way to the handle's write side, the writes themselves (`ClusterWrites::apply` takes an
/// owner and a child, where a plan's `.apply(child)` takes one argument) and the OpenStack
/// client's writes.
const WRITES: &str = r"\.writes\(\)|\.whole\(\)|\.merge_patch\(|\.prune\(&|\.sweep\(|\.delete\(&|\.apply\([^()]*,|\.(create_aggregate|set_aggregate_metadata|delete_aggregate|disable_service|delete_service|ensure_trait|delete_trait)\(";

fn step_files() -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.join("nova"), src.join("novacompute")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a step directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn no_step_file_calls_a_write_of_the_handle_or_the_openstack_client() {
    let writes = Regex::new(WRITES).expect("the pattern");
    let files = step_files();
    assert!(files.len() > 40, "the step files are found: {files:?}");
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a step file");
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            if writes.is_match(line) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a step writes outside its plan (return an Effect instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_pattern_catches_the_writes_it_names() {
    let writes = Regex::new(WRITES).expect("the pattern");
    for line in [
        "cluster.apply(&owner, &discover_hosts_job(&inputs, &image))",
        ".delete(&ApiResource::erase::<Job>(&()), &namespace, &job_name)",
        "self.0.merge_patch(&kinds::hypervisor(), None, node, &patch)",
        "client.create_aggregate(&w.name, w.zone.as_deref()).await",
        "client.disable_service(&s.id, &reason).await",
        "client.delete_trait(&name).await",
        "pass.cluster.writes().apply(&pass.owner, child)",
        "Clusters::new(cluster.whole(), None)",
    ] {
        assert!(writes.is_match(line), "{line}");
    }
    for line in [
        ".apply(Child::new(&config_map))",
        ".apply(render::workloads::deployment(&inputs, &spec))",
        "Action::DeleteTrait { name: name.clone() }",
    ] {
        assert!(!writes.is_match(line), "{line}");
    }
}
