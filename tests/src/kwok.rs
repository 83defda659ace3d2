//! kwok: fake nodes whose pods become Ready, whose Job pods complete, and whose pods can be
//! told how to terminate.
//!
//! kwok v0.8.0 has no built-in stages, so the harness ships its own copies in `tests/kwok/`
//! (upstream's fast node/pod stages, with `pod-complete` narrowed) plus the project-owned
//! `pod-terminate.yaml`. They are compiled in so the harness works from any directory.

use std::path::{Path, PathBuf};

use crate::{Result, io_err};

/// Annotation (on a pod, usually via a Job's pod template) choosing the containers' exit code;
/// opts the pod into the `nova-pod-terminate` stage. `"0"` ends the pod `Succeeded`, anything
/// else `Failed`.
pub const EXIT_CODE_ANNOTATION: &str = "test.nova.c5c3.io/exit-code";
/// Annotation choosing the containers' termination message; also opts the pod in.
pub const TERMINATION_MESSAGE_ANNOTATION: &str = "test.nova.c5c3.io/termination-message";
/// Optional annotation overriding the termination reason (default `Completed` / `Error`).
pub const TERMINATION_REASON_ANNOTATION: &str = "test.nova.c5c3.io/termination-reason";

/// The fake node the harness creates.
pub const NODE_NAME: &str = "kwok-node-0";
/// The annotation marking kwok's own fake nodes; kwok manages those and no other node.
pub const NODE_ANNOTATION_SELECTOR: &str = "kwok.x-k8s.io/node=fake";
/// The taint the fake node carries beside a real node, so only pods that tolerate it (add a
/// toleration for this key) are scheduled there and everything else runs for real.
pub const FAKE_NODE_TAINT: &str = "kwok.x-k8s.io/node";

const STAGES: [(&str, &str); 6] = [
    (
        "node-initialize.yaml",
        include_str!("../kwok/node-initialize.yaml"),
    ),
    (
        "node-heartbeat-with-lease.yaml",
        include_str!("../kwok/node-heartbeat-with-lease.yaml"),
    ),
    ("pod-ready.yaml", include_str!("../kwok/pod-ready.yaml")),
    (
        "pod-complete.yaml",
        include_str!("../kwok/pod-complete.yaml"),
    ),
    (
        "pod-terminate.yaml",
        include_str!("../kwok/pod-terminate.yaml"),
    ),
    ("pod-delete.yaml", include_str!("../kwok/pod-delete.yaml")),
];

/// Writes the stage files into `dir` and returns their paths (one `--config` each).
pub(crate) fn write_stages(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    STAGES
        .iter()
        .map(|(name, text)| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))?;
            Ok(path)
        })
        .collect()
}

/// The fake node, as the test-control-plane facts describe it, with room for every pod a whole
/// suite leaves behind. Alone it has no taint (there are no real nodes to protect); beside the
/// real node it is tainted `NoSchedule`, so the pods under test run for real by default.
pub(crate) fn node(beside_real_node: bool) -> serde_json::Value {
    let taints = if beside_real_node {
        serde_json::json!([{ "key": FAKE_NODE_TAINT, "value": "fake", "effect": "NoSchedule" }])
    } else {
        serde_json::json!([])
    };
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "annotations": { "node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake" },
            "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "node-role.kubernetes.io/agent": "",
                "type": "kwok"
            }
        },
        "spec": { "taints": taints },
        "status": {
            "allocatable": { "cpu": "1k", "memory": "4Ti", "pods": "1000" },
            "capacity": { "cpu": "1k", "memory": "4Ti", "pods": "1000" }
        }
    })
}
