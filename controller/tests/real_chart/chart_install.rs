//! The chart installed onto the real node from the locally built images (`images/build.sh`):
//! both Deployments become Available, the API server calls the webhook through its Service
//! with the chart's certificate, the controller converges the sample Nova and runs the sample
//! pool's Kubernetes rows under its own ServiceAccount with no 403 in its log (cluster-wide and
//! namespace-scoped), the cluster-wide release adopts the CRDs already there (keeping them on
//! uninstall), an upgrade that changes only the webhook's values, the controller's log filter
//! and the Nova CRD updates the served CRD, rolls only the webhook (the running controller
//! takes its new log filter from its ConfigMap) and keeps the generated CA, a regenerated
//! certificate reaches the running webhook pods by their hot reload, and `helm test` passes in
//! both scopes.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::{Nova, NovaCompute};
use nova_test_harness::{ControlPlane, helm};
use nova_testkit::prelude::*;
use serde_json::{Value, json};

/// `helm test` of `release`: its self-test pod passes (the CRDs current, the webhook
/// answering); helm fails otherwise. (`--logs` is not asked for: the passed pod is deleted by
/// its hook policy before helm would read them.)
fn helm_test(home: &Path, cp: &ControlPlane, release: &str, ns: &str) {
    let out = helm_ok(
        home,
        cp,
        &["test", release, "--namespace", ns, "--timeout", "2m"],
    );
    assert!(
        out.contains("Phase:") && out.contains("Succeeded"),
        "helm test reports the self-test passed:\n{out}"
    );
}

/// The shared control plane with the real node (the operator's images built), its client, a
/// helm home and the chart's directory.
pub(crate) async fn on_the_real_node() -> (&'static ControlPlane, Client, tempfile::TempDir, String)
{
    assert!(
        nova_test_harness::images::operator_manifest_path().is_file(),
        "the operator images are not built: run images/build.sh"
    );
    let cp = nova_test_harness::shared_real_node()
        .await
        .expect("control plane with the real node");
    let client = cp.client().expect("client");
    let home = tempfile::tempdir().expect("helm home");
    (cp, client, home, helm::chart_dir().display().to_string())
}

pub(crate) async fn available(client: &Client, ns: &str, name: &str) -> Deployment {
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("deployment");
    let status = deployment.status.clone().expect("status");
    assert!(
        status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Available" && c.status == "True"),
        "{name} is Available: {status:?}"
    );
    deployment
}

/// Every log line of the component's pods.
async fn component_logs(client: &Client, ns: &str, component: &str) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/component={component}")))
        .await
        .expect("pods");
    let mut text = String::new();
    for pod in pods {
        text += &nova_test_harness::pods::logs(client, ns, &pod.name_any(), component)
            .await
            .expect("logs");
    }
    text
}

/// The controller, untouched by the upgrade, takes the log filter the upgrade wrote into its
/// logging ConfigMap once the kubelet has updated the mounted file (its sync period, about a
/// minute): the runtime switch on the real node, no restart.
async fn follows_its_new_log_filter(client: &Client, release_ns: &str) {
    Wait::new(
        "the controller follows its new log filter",
        Duration::from_secs(150),
    )
    .until(|| async {
        let logs = component_logs(client, release_ns, "controller").await;
        let changed = logs
            .lines()
            .any(|l| l.contains("log filter changed") && l.contains("nova_controller=debug"));
        if changed {
            Seen::Done(())
        } else {
            let tail: Vec<&str> = logs.lines().rev().take(5).collect();
            Seen::Saw(format!(
                "no filter change in the controller's log; its last lines: {tail:?}"
            ))
        }
    })
    .await
    .expect("the controller switched its log level without a restart");
}

/// The kwok node nova's and the pool's pods are placed on.
const KWOK_NODE: &str = "kwok-node-0";

fn kwok_tolerations() -> Value {
    json!([{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}])
}

/// The sample Nova with its five workloads and its Jobs placed on the kwok node: this test is
/// about the operator's pods, so nova's own pods are faked (ready or complete at once) rather
/// than run without a database; `real_openstack.rs` runs nova for real.
fn sample_on_kwok(ns: &str) -> Nova {
    let mut nova = serde_json::to_value(example(ns)).expect("json");
    let on_kwok = json!({
        "nodeSelector": {"kubernetes.io/hostname": KWOK_NODE},
        "tolerations": kwok_tolerations(),
    });
    for block in ["api", "conductor", "scheduler", "metadata", "consoleProxy"] {
        let mut deployment = on_kwok.clone();
        deployment["replicas"] = 1.into();
        nova["spec"][block]["deployment"] = deployment;
    }
    nova["spec"]["jobs"] = on_kwok;
    serde_json::from_value(nova).expect("Nova")
}

/// The sample pool on the kwok node, beside the sample Nova: the controller runs the pool's
/// Kubernetes rows (NovaRef through ComputeVPA: the Nova and its contract, the node, the pool
/// ConfigMap, the DaemonSet kwok makes ready, the VPA) and reaches its first OpenStack row,
/// which reports the Keystone nothing answers here (`novacompute_real` and the main job run a
/// pool against the real OpenStack).
async fn pool_reaches_openstack(client: &Client, ns: &str) {
    let labels = json!({"metadata": {"labels": {
        POOL_LABEL: ns, "topology.kubernetes.io/zone": "zone-a"
    }}});
    Api::<Node>::all(client.clone())
        .patch(KWOK_NODE, &PatchParams::default(), &Patch::Merge(labels))
        .await
        .expect("label the kwok node");
    let mut pool = sample_pool(ns, ns);
    pool["spec"]["tolerations"] = kwok_tolerations();
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), ns);
    pools
        .create(
            &PostParams::default(),
            &serde_json::from_value(pool).expect("a NovaCompute"),
        )
        .await
        .expect("create the sample pool");
    wait_pool_for(
        &pools,
        "pool-a",
        "its OpenStack rows (DaemonSetReady True, AggregatesReady present)",
        Duration::from_secs(300),
        |p| holds(p, "DaemonSetReady", "True") && condition_of(p, "AggregatesReady").is_some(),
    )
    .await
    .expect("the pool reached its OpenStack rows");
}

/// The sample Nova converges and the sample pool reaches its OpenStack rows under the
/// controller's ServiceAccount, and nothing was forbidden.
async fn converges_without_403(client: &Client, release_ns: &str, ns: &str) {
    provide_inputs(client, ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    novas
        .create(&PostParams::default(), &sample_on_kwok(ns))
        .await
        .expect("create the sample Nova");
    // Through DeploymentReady: the workloads run on the kwok node here, so no nova-api answers
    // the in-cluster operator's health probe.
    wait_true(&novas, "nova", &CONVERGED[..7], || Ok(())).await;
    pool_reaches_openstack(client, ns).await;
    let logs = component_logs(client, release_ns, "controller").await;
    assert!(!logs.is_empty(), "the controller logs");
    // A denied request shows as the API error's reason and code (a bare "403" would match
    // timestamps).
    for needle in [
        "forbidden",
        "Forbidden",
        "code: 403",
        "\"code\":403",
        " 403 ",
    ] {
        assert!(
            !logs.contains(needle),
            "the controller's log has {needle}:\n{logs}"
        );
    }
}

/// The cluster-wide release's controller.trust: the corporate CA's ConfigMap.
const CORPORATE_TRUST: [&str; 2] = ["--set", "controller.trust.configMap=corp-ca"];

/// The controller found the image's CA set (Mozilla's, over a hundred roots) and read the one
/// certificate of controller.trust, as its start-up line says.
async fn trusts_the_image_roots_and_the_corporate_ca(client: &Client, release_ns: &str) {
    let logs = component_logs(client, release_ns, "controller").await;
    let line = logs
        .lines()
        .find(|l| l.contains("verified against the system roots"))
        .unwrap_or_else(|| panic!("the controller's trust line:\n{logs}"));
    let fields: Value = serde_json::from_str(line).expect("a JSON log line");
    let roots = fields["fields"]["system_roots"]
        .as_u64()
        .or_else(|| fields["system_roots"].as_u64())
        .unwrap_or_default();
    assert!(roots > 100, "the image's CA set: {line}");
    let extra = fields["fields"]["ca_file_certificates"]
        .as_u64()
        .or_else(|| fields["ca_file_certificates"].as_u64());
    assert_eq!(extra, Some(1), "controller.trust's bundle: {line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chart_runs_the_operator_on_the_real_node() {
    let (cp, client, home, chart) = on_the_real_node().await;

    // Cluster-wide install. The harness applied the CRDs, as an administrator would have
    // before the chart templated them: the release adopts them.
    // With a corporate CA for the controller's own OpenStack calls (controller.trust).
    let release_ns = cp.namespace("nova-system").await.expect("namespace");
    let corp = nova_certs::CertificateAuthority::new("corporate root").expect("a CA");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &release_ns);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "corp-ca"},
                "data": {"ca.crt": corp.cert_pem()}
            }))
            .expect("a ConfigMap"),
        )
        .await
        .expect("the corporate CA");
    let mut install = install_args("install", "nova-operator", &release_ns, &chart);
    install.push("--take-ownership");
    install.extend_from_slice(&CORPORATE_TRUST);
    helm_ok(home.path(), cp, &install);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        "novas.nova.openstack.c5c3.io",
        "novacomputes.nova.openstack.c5c3.io",
    ] {
        let annotations = crds.get(crd).await.expect("crd").metadata.annotations;
        let annotations = annotations.unwrap_or_default();
        assert_eq!(
            (
                annotations
                    .get("meta.helm.sh/release-name")
                    .map(String::as_str),
                annotations
                    .get("helm.sh/resource-policy")
                    .map(String::as_str)
            ),
            (Some("nova-operator"), Some("keep")),
            "{crd} is the release's, kept on uninstall"
        );
    }
    let controller = available(&client, &release_ns, "nova-operator-controller").await;
    let webhook = available(&client, &release_ns, "nova-operator-webhook").await;
    trusts_the_image_roots_and_the_corporate_ca(&client, &release_ns).await;
    let ns = cp.namespace("nova-chart").await.expect("namespace");
    webhook_denies(&client, &ns).await;
    helm_test(home.path(), cp, "nova-operator", &release_ns);
    converges_without_403(&client, &release_ns, &ns).await;

    // An upgrade that changes only the webhook's values rolls only the webhook, and keeps
    // the webhook's own certificate and the CA it injected (nothing certificate-related is
    // rendered).
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &release_ns);
    let tls = secrets
        .get("nova-operator-webhook-tls")
        .await
        .expect("tls")
        .data;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let bundle = |c: ValidatingWebhookConfiguration| {
        c.webhooks.unwrap_or_default()[0]
            .client_config
            .ca_bundle
            .clone()
    };
    let ca = bundle(configs.get("nova-operator").await.expect("config"));
    // The upgrade's chart changed the Nova CRD: the upgrade updates the served one (forced over
    // the fields the harness's apply co-owns, as any adopted CRD needs).
    let changed = tempfile::tempdir().expect("chart copy");
    let marker = "(changed by the upgrade)";
    let upgraded = helm::chart_with_changed_crd(changed.path(), marker).expect("chart copy");
    let upgraded = upgraded.display().to_string();
    let mut args = install_args("upgrade", "nova-operator", &release_ns, &upgraded);
    // A webhook value that rolls it (an argument), and a new log filter for the controller,
    // which rolls nothing: the running controller follows it from its mounted ConfigMap.
    args.extend_from_slice(&[
        "--set",
        "webhook.logFormat=text",
        "--set",
        "controller.logLevel=info\\,nova_controller=debug",
        "--force-conflicts",
    ]);
    // The values the release was installed with stay (as a values file an SRE keeps would).
    args.extend_from_slice(&CORPORATE_TRUST);
    helm_ok(home.path(), cp, &args);
    let served = crds.get("novas.nova.openstack.c5c3.io").await.expect("crd");
    let description = helm::schema_description(&served);
    assert!(
        description.ends_with(marker),
        "the upgrade updated the served CRD: {description}"
    );
    let controller_after = available(&client, &release_ns, "nova-operator-controller").await;
    let webhook_after = available(&client, &release_ns, "nova-operator-webhook").await;
    assert_eq!(
        controller_after.metadata.generation, controller.metadata.generation,
        "the controller Deployment is untouched"
    );
    assert_eq!(
        webhook_after.metadata.generation,
        webhook.metadata.generation.map(|g| g + 1),
        "the webhook Deployment rolled once"
    );
    assert_eq!(
        secrets
            .get("nova-operator-webhook-tls")
            .await
            .expect("tls")
            .data,
        tls,
        "the serving certificate survives the upgrade"
    );
    assert_eq!(
        bundle(configs.get("nova-operator").await.expect("config")),
        ca,
        "the CA bundle survives the upgrade"
    );
    webhook_denies(&client, &ns).await;

    // The Secret removed: the running webhook pods re-create it with a new CA, inject it
    // beside the old one and serve the new certificate, no restart; an upgrade changes
    // nothing of it.
    let pods = |client: Client, ns: String| async move {
        let listed = Api::<Pod>::namespaced(client, &ns)
            .list(&ListParams::default().labels("app.kubernetes.io/component=webhook"))
            .await
            .expect("pods");
        let mut names: Vec<String> = listed
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(ResourceExt::name_any)
            .collect();
        names.sort();
        names
    };
    let before = pods(client.clone(), release_ns.clone()).await;
    secrets
        .delete("nova-operator-webhook-tls", &Default::default())
        .await
        .expect("delete the serving Secret");
    let rotated = Wait::new("a new CA injected", Duration::from_secs(60))
        .until(|| async {
            let now = bundle(configs.get("nova-operator").await.ok()?);
            (now != ca).then_some(now)
        })
        .await
        .expect("the webhook re-created its Secret");
    helm_ok(home.path(), cp, &args);
    assert_eq!(
        bundle(configs.get("nova-operator").await.expect("config")),
        rotated,
        "the upgrade keeps the injected CA"
    );
    webhook_denies_within(&client, &ns, Duration::from_secs(30)).await;
    assert_eq!(
        pods(client.clone(), release_ns.clone()).await,
        before,
        "the same webhook pods serve the new certificate"
    );
    follows_its_new_log_filter(&client, &release_ns).await;
    helm_ok(
        home.path(),
        cp,
        &[
            "uninstall",
            "nova-operator",
            "--namespace",
            &release_ns,
            "--wait",
        ],
    );

    // The uninstall kept the CRDs.
    for crd in [
        "novas.nova.openstack.c5c3.io",
        "novacomputes.nova.openstack.c5c3.io",
    ] {
        assert!(
            crds.get_opt(crd).await.expect("crd").is_some(),
            "{crd} outlives the release"
        );
    }

    // Namespace-scoped install: Roles only, the controller under --namespace.
    let scoped = cp.namespace("nova-scoped").await.expect("namespace");
    helm_ok(
        home.path(),
        cp,
        &scoped_install_args("nova-scoped", &scoped, &chart),
    );
    available(&client, &scoped, "nova-scoped-nova-operator-controller").await;
    available(&client, &scoped, "nova-scoped-nova-operator-webhook").await;
    webhook_denies(&client, &scoped).await;
    helm_test(home.path(), cp, "nova-scoped", &scoped);
    converges_without_403(&client, &scoped, &scoped).await;
    helm_ok(
        home.path(),
        cp,
        &["uninstall", "nova-scoped", "--namespace", &scoped, "--wait"],
    );
}
