//! helm run against a test control plane, as the chart's tests drive it.

use std::path::Path;

use nova_test_harness::{ControlPlane, helm};

/// Runs helm with `args` against `cp` (its kubeconfig), with its caches under `home`; fails the
/// test with helm's output unless it succeeded, and returns what it printed.
pub fn helm_ok(home: &Path, cp: &ControlPlane, args: &[&str]) -> String {
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let mut all = args.to_vec();
    all.extend_from_slice(&["--kubeconfig", &kubeconfig]);
    let out = helm::run(home, &all).expect("helm");
    assert!(
        out.success,
        "helm {} failed:\n{}{}",
        args.join(" "),
        out.stdout,
        out.stderr
    );
    out.stdout
}
