//! helm run against a test control plane, as the chart's tests drive it.

use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::api::ApiResource;
use nova_api::v1alpha1::Nova;
use nova_test_harness::{Canary, CanaryExpectation, ControlPlane, helm, wait_for_webhook};

use crate::fixtures::example;

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

/// Runs kubectl with `args` against `cp`, `stdin` on its input (a rendering to apply), and
/// returns how it ended.
pub fn kubectl(cp: &ControlPlane, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(nova_test_harness::testbin_dir().join("kubectl"))
        .args(["--kubeconfig", &cp.kubeconfig_path().display().to_string()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl");
    child
        .stdin
        .take()
        .expect("kubectl's input")
        .write_all(stdin.as_bytes())
        .expect("kubectl reads its input");
    child.wait_with_output().expect("kubectl")
}

/// [`kubectl`], failing the test with kubectl's error output unless it succeeded.
pub fn kubectl_ok(cp: &ControlPlane, args: &[&str], stdin: &str) {
    let out = kubectl(cp, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How long `helm install --wait` may take (the node pulls nothing: the images are imported).
pub const INSTALL_TIMEOUT: &str = "5m";

/// `helm <verb> <release> <chart>` into `ns`, waiting for the release's objects.
pub fn install_args<'a>(
    verb: &'a str,
    release: &'a str,
    ns: &'a str,
    chart: &'a str,
) -> Vec<&'a str> {
    vec![
        verb,
        release,
        chart,
        "--namespace",
        ns,
        "--wait",
        "--timeout",
        INSTALL_TIMEOUT,
    ]
}

/// The install of a release limited to `ns`: Roles only, the controller under --namespace,
/// one webhook replica admitting that namespace alone; the CRDs are left to the cluster-wide
/// release or the harness (one owner).
pub fn scoped_install_args<'a>(release: &'a str, ns: &'a str, chart: &'a str) -> Vec<&'a str> {
    let mut args = install_args("install", release, ns, chart);
    args.extend_from_slice(&[
        "--set",
        "rbac.scope=namespace",
        "--set",
        "webhook.replicas=1",
        "--set",
        "crds.enabled=false",
    ]);
    args
}

/// The API server calls the validating webhook through the Service: a Nova only the webhook
/// rejects is denied with its message.
pub async fn webhook_denies(client: &Client, ns: &str) {
    webhook_denies_within(client, ns, Duration::from_secs(60)).await;
}

/// [`webhook_denies`], waiting at most `within`.
pub async fn webhook_denies_within(client: &Client, ns: &str, within: Duration) {
    let mut nova = serde_json::to_value(example(ns)).expect("json");
    nova["metadata"]["name"] = "canary-api".into();
    wait_for_webhook(
        client,
        &Canary {
            resource: ApiResource::erase::<Nova>(&()),
            namespace: Some(ns.to_owned()),
            object: nova,
            expect: CanaryExpectation::DeniedWith(
                "admission webhook \"vnova.kb.io\" denied the request".into(),
            ),
        },
        within,
    )
    .await
    .expect("the validating webhook answers through its Service");
}
