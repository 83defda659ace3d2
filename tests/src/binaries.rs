//! Where the control-plane binaries live.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The Kubernetes version `tests/build-control-plane.sh` builds.
pub const K8S_VERSION: &str = "1.36.3";

/// The binaries a control plane needs.
pub(crate) const CONTROL_PLANE: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
];

/// The binaries the real node needs on top (`tests/build-node.sh`).
pub(crate) const NODE: &[&str] = &crate::node::BINARIES;

/// `$HOME/.cache/nova-operator-testbin/v<version>`, the build script's default output.
pub fn default_testbin_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/nova-operator-testbin")
        .join(format!("v{K8S_VERSION}"))
}

/// `NOVA_TESTBIN` if set, else [`default_testbin_dir`].
pub fn testbin_dir() -> PathBuf {
    std::env::var_os("NOVA_TESTBIN")
        .filter(|v| !v.is_empty())
        .map_or_else(default_testbin_dir, PathBuf::from)
}

/// Checks that every binary of `required` is present and executable in `dir`.
pub(crate) fn check(dir: &Path, required: &[&str]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|name| {
            std::fs::metadata(dir.join(name))
                .map(|m| !m.is_file() || m.permissions().mode() & 0o111 == 0)
                .unwrap_or(true)
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::MissingBinaries {
            dir: dir.to_path_buf(),
            missing: missing.join(", "),
            script: if required == NODE {
                "tests/build-node.sh"
            } else {
                "tests/build-control-plane.sh"
            },
        })
    }
}
