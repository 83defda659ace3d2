//! The main job's condition view (`scripts/view.py`) fed what `nova-controller conditions`
//! prints: a condition no step of the build sets is marked as not implemented (never shown as
//! pending), the view's exit code tells Ready, settled-but-unreachable and converging apart,
//! and with `--pools-active` (the main job on the real node) it ends only once every pool is
//! Ready with all its nodes Active, naming what it still waits for until then.

use std::io::Write as _;
use std::process::{Command, Stdio};

use nova_api::conditions::NovaConditionType;
use serde_json::{Value, json};

/// What `nova-controller conditions` prints: each Nova condition type but Ready, with its tags.
fn build_conditions() -> Vec<(String, Vec<String>)> {
    let out = Command::new(env!("CARGO_BIN_EXE_nova-controller"))
        .arg("conditions")
        .output()
        .expect("nova-controller conditions");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace().map(str::to_owned);
            (words.next().expect("a condition type"), words.collect())
        })
        .collect()
}

/// The build's condition types tagged `tag`.
fn tagged(tag: &str) -> Vec<String> {
    build_conditions()
        .into_iter()
        .filter(|(_, tags)| tags.iter().any(|t| t == tag))
        .map(|(condition, _)| condition)
        .collect()
}

/// The condition types a step of the build reports on.
fn implemented() -> Vec<String> {
    tagged("step")
}

/// Runs the view on `items` with `implemented`; its exit code and output.
fn view(items: Value, implemented: &[String]) -> (i32, String) {
    view_with(items, implemented, &[])
}

/// [`view`] with the view's options. The view reads the build's own list with `step` on
/// exactly the `implemented` conditions, as a build that lacks the others would print it.
fn view_with(items: Value, implemented: &[String], options: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().expect("dir");
    let list = dir.path().join("conditions");
    let lines: Vec<String> = build_conditions()
        .into_iter()
        .map(|(condition, tags)| {
            let tags = tags.into_iter().filter(|t| t != "step");
            let step = implemented.contains(&condition).then(|| "step".to_owned());
            std::iter::once(condition)
                .chain(tags)
                .chain(step)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    std::fs::write(&list, lines.join("\n")).expect("write");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/view.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(&list)
        .args(options)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(json!({ "items": items }).to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("view");
    (
        out.status.code().expect("exit code"),
        String::from_utf8(out.stdout).expect("utf-8"),
    )
}

fn nova(conditions: &[(&str, &str)], observed: i64) -> Value {
    json!({
        "kind": "Nova",
        "metadata": {"name": "nova", "namespace": "openstack", "generation": 1},
        "status": {
            "observedGeneration": observed,
            "conditions": conditions.iter().map(|(t, s)| json!({
                "type": t, "status": s, "reason": "R", "message": format!("{t} says {s}")
            })).collect::<Vec<_>>(),
        },
    })
}

#[test]
fn the_build_lists_the_conditions_its_pipeline_sets() {
    let conditions = implemented();
    assert_eq!(conditions.first().map(String::as_str), Some("SecretsReady"));
    assert!(conditions.iter().any(|c| c == "ComputeConfigReady"));
    assert!(
        !conditions.iter().any(|c| c == "Ready"),
        "Ready is the aggregate, not a step's"
    );
}

#[test]
fn the_build_tags_the_conditions_ready_needs() {
    let want: Vec<&str> = NovaConditionType::AGGREGATED
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(tagged("aggregated"), want);
    assert!(
        build_conditions()
            .iter()
            .any(|(c, tags)| c == "ExtraConfigHealthy" && tags.is_empty()),
        "ExtraConfigHealthy is listed, outside the aggregate and no step's own"
    );
}

#[test]
fn missing_conditions_are_named_not_implemented_and_the_view_says_ready_is_out_of_reach() {
    let implemented = vec!["SecretsReady".to_owned(), "ComputeConfigReady".to_owned()];
    let converged = nova(
        &[
            ("Ready", "False"),
            ("SecretsReady", "True"),
            ("ComputeConfigReady", "True"),
        ],
        1,
    );
    let (code, out) = view(json!([converged]), &implemented);
    assert_eq!(code, 2, "settled, Ready unreachable:\n{out}");
    assert!(
        out.contains("DatabaseReady            -        NotImplementedYet"),
        "{out}"
    );
    assert!(out.contains("SecretsReady             True"), "{out}");
    assert!(
        out.contains("not implemented in this build yet: DatabaseReady"),
        "{out}"
    );

    // Implemented but not reported yet (an earlier step waits): converging, not missing.
    let implemented = vec!["SecretsReady".to_owned(), "DatabaseReady".to_owned()];
    let (code, out) = view(json!([nova(&[("SecretsReady", "False")], 0)]), &implemented);
    assert!(
        out.contains(
            "DatabaseReady            -                                   not reported yet"
        ),
        "{out}"
    );
    assert_eq!(
        code, 1,
        "the current generation is not observed yet: converging:\n{out}"
    );
}

#[test]
fn a_ready_nova_ends_the_view_and_a_pool_without_status_says_why() {
    let ready = nova(&[("Ready", "True")], 1);
    let pool = json!({
        "kind": "NovaCompute",
        "metadata": {"name": "pool-a", "namespace": "openstack"},
        "spec": {"novaRef": {"name": "nova"}},
    });
    let (code, out) = view(json!([ready, pool]), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("no status yet: the controller has not reconciled the pool"),
        "{out}"
    );
    let (code, _) = view(json!([]), &[]);
    assert_eq!(code, 1, "no Nova yet: still converging");
}

/// A pool with its ledger: one node per `(name, phase)`, as the Nodes step reported it; Ready,
/// and ServicesReady as the sub-condition that holds it when it is not.
fn pool(nodes: &[(&str, &str)]) -> Value {
    pool_ready(nodes, false)
}

fn pool_ready(nodes: &[(&str, &str)], ready: bool) -> Value {
    let (status, services) = if ready {
        (("True", "Ready"), ("True", "ServicesUp"))
    } else {
        (("False", "NotAllReady"), ("False", "WaitingForHostMapping"))
    };
    let listed = if nodes.is_empty() {
        ("False", "NoMatchingNodes")
    } else {
        ("True", "NodesResolved")
    };
    json!({
        "kind": "NovaCompute",
        "metadata": {"name": "pool-a", "namespace": "openstack"},
        "spec": {"novaRef": {"name": "nova"}},
        "status": {
            "conditions": [
                {"type": "Ready", "status": status.0, "reason": status.1, "message": "m"},
                {"type": "NodesReady", "status": listed.0, "reason": listed.1, "message": "m"},
                {"type": "ServicesReady", "status": services.0, "reason": services.1, "message": "m"},
            ],
            "nodes": nodes.iter().map(|(n, p)| json!({
                "name": n, "phase": p, "zone": "zone-a", "serviceStatus": "enabled", "serviceState": "up"
            })).collect::<Vec<_>>(),
        },
    })
}

#[test]
fn a_pool_shows_its_node_ledger() {
    let ready = nova(&[("Ready", "True")], 1);
    let (code, out) = view(json!([ready, pool(&[("nova-test-node", "Pending")])]), &[]);
    assert_eq!(code, 0, "the Nova alone ends the view:\n{out}");
    assert!(
        out.contains("node nova-test-node      Pending    zone zone-a       service enabled/up"),
        "{out}"
    );
    let (_, out) = view(json!([ready, pool(&[])]), &[]);
    assert!(
        out.contains("no node: nothing matches spec.nodeSelector"),
        "{out}"
    );
}

#[test]
fn with_pools_active_the_view_ends_once_every_pool_is_ready_with_its_nodes_active() {
    let ready = nova(&[("Ready", "True")], 1);
    let pools_active = ["--pools-active"];
    let pending = pool(&[("nova-test-node", "Pending")]);
    let (code, out) = view(json!([ready, pending]), &[]);
    assert_eq!(
        code, 0,
        "without the option the Nova alone ends the view:\n{out}"
    );

    let (code, out) = view_with(json!([ready, pending]), &[], &pools_active);
    assert_eq!(code, 3, "the Nova is Ready, the pool is not yet:\n{out}");
    assert!(
        out.ends_with(
            "waiting for: NovaCompute openstack/pool-a: node nova-test-node Pending; \
             NovaCompute openstack/pool-a: ServicesReady False WaitingForHostMapping\n"
        ),
        "{out}"
    );

    // All nodes Active is not enough while the pool is not Ready.
    let (code, out) = view_with(
        json!([ready, pool(&[("nova-test-node", "Active")])]),
        &[],
        &pools_active,
    );
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("waiting for: NovaCompute openstack/pool-a: ServicesReady False"),
        "{out}"
    );

    let active = pool_ready(&[("nova-test-node", "Active")], true);
    let (code, out) = view_with(json!([ready, active]), &[], &pools_active);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("waiting for"), "{out}");

    // A Ready pool without a node, no pool at all, an unreconciled pool: not there yet.
    let (code, out) = view_with(json!([ready, pool_ready(&[], true)]), &[], &pools_active);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains(
            "waiting for: NovaCompute openstack/pool-a: no node matches spec.nodeSelector"
        ),
        "{out}"
    );
    // Before the Nodes step reports, the ledger is empty because an earlier step waits.
    let waiting = json!({
        "kind": "NovaCompute",
        "metadata": {"name": "pool-a", "namespace": "openstack"},
        "spec": {"novaRef": {"name": "nova"}},
        "status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "NotAllReady", "message": "m"},
            {"type": "NovaReady", "status": "False", "reason": "WaitingForInstalledRelease", "message": "m"},
        ]},
    });
    let (code, out) = view_with(json!([ready, waiting]), &[], &pools_active);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.contains("  no node yet: an earlier step waits"),
        "{out}"
    );
    assert!(
        out.ends_with(
            "waiting for: NovaCompute openstack/pool-a: NovaReady False WaitingForInstalledRelease\n"
        ),
        "{out}"
    );
    let (code, out) = view_with(json!([ready]), &[], &pools_active);
    assert_eq!(code, 3, "{out}");
    assert!(out.ends_with("waiting for: no NovaCompute yet\n"), "{out}");
    let unreconciled = json!({
        "kind": "NovaCompute",
        "metadata": {"name": "pool-a", "namespace": "openstack"},
        "spec": {"novaRef": {"name": "nova"}},
    });
    let (code, out) = view_with(json!([ready, unreconciled]), &[], &pools_active);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.ends_with("waiting for: NovaCompute openstack/pool-a: not reconciled yet\n"),
        "{out}"
    );
}

#[test]
fn the_view_names_the_nova_conditions_that_hold_ready() {
    let converging = nova(
        &[
            ("Ready", "False"),
            ("SecretsReady", "True"),
            ("DatabaseReady", "False"),
            ("ExtraConfigHealthy", "False"),
        ],
        1,
    );
    let active = pool_ready(&[("nova-test-node", "Active")], true);
    let (code, out) = view_with(
        json!([converging, active]),
        &implemented(),
        &["--pools-active"],
    );
    assert_eq!(code, 1, "the Nova is not Ready: converging:\n{out}");
    // ExtraConfigHealthy is reported outside the aggregate: it holds nothing.
    assert!(
        out.ends_with("waiting for: Nova openstack/nova: DatabaseReady False R\n"),
        "{out}"
    );
    let (code, out) = view(json!([nova(&[], 0)]), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with("waiting for: Nova openstack/nova: Ready not reported\n"),
        "{out}"
    );
}
