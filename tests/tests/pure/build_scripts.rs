//! The build scripts' stamps depend on what was built from, never on where the repository is:
//! they hashed file paths too, so every git worktree rebuilt the shared cache.

use std::path::Path;
use std::process::Command;

fn hash_files(file: &Path) -> String {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("build-lib.sh");
    let out = Command::new("bash")
        .arg("-c")
        .arg(". \"$1\"; hash_files \"$2\"")
        .arg("_")
        .arg(&lib)
        .arg(file)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_owned()
}

#[test]
fn a_stamp_hash_is_the_same_from_every_checkout() {
    let go_mod = Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s-bins/go.mod");
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    for dir in [&a, &b] {
        std::fs::copy(&go_mod, dir.path().join("go.mod")).expect("copy");
    }
    let (ha, hb) = (
        hash_files(&a.path().join("go.mod")),
        hash_files(&b.path().join("go.mod")),
    );
    assert_eq!(ha.len(), 16);
    assert_eq!(ha, hb);
}
