//! The CRDs' life on a real API server, driven as an SRE drives it, on a control plane of its
//! own that starts without them: the chart installs them (kept on uninstall), an upgrade to a
//! chart whose Nova CRD changed updates the served one, the uninstall leaves them, and
//! `kubectl apply -f crds/` (client-side, the default, which stores the whole object in an
//! annotation of at most 256 KiB) takes them back. Then a controller started against a Nova
//! CRD whose schema digest is another release's warns each Nova (`CRDSchemaOutdated`), exports
//! `nova_operator_crd_schema_current` 0 for it, and goes on reconciling.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nova_api::crd::SCHEMA_HASH_ANNOTATION;
use nova_api::events::EventReason;
use nova_api::v1alpha1::Nova;
use nova_test_harness::{ControlPlane, Options, helm, third_party_dir};
use nova_testkit::prelude::*;
use serde_json::json;

const NOVAS: &str = "novas.nova.openstack.c5c3.io";
const NOVACOMPUTES: &str = "novacomputes.nova.openstack.c5c3.io";
const MARKER: &str = "(changed by the upgrade)";

/// The top-level schema description of the served Nova CRD, and its annotations.
async fn served(crds: &Api<CustomResourceDefinition>) -> (String, Vec<(String, String)>) {
    let crd = crds.get(NOVAS).await.expect("the Nova CRD");
    let description = helm::schema_description(&crd);
    let annotations = crd.metadata.annotations.unwrap_or_default();
    (description, annotations.into_iter().collect())
}

fn annotation<'a>(annotations: &'a [(String, String)], key: &str) -> Option<&'a str> {
    annotations
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chart_installs_upgrades_and_keeps_the_crds_and_a_stale_crd_is_reported() {
    let cp = ControlPlane::start_with(Options {
        crd_dirs: vec![third_party_dir()],
        ..Options::default()
    })
    .await
    .expect("control plane");
    let client = cp.client().expect("client");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(crds.get_opt(NOVAS).await.expect("read").is_none());
    let home = crate::chart::home();
    let kubeconfig = cp.kubeconfig_path().display().to_string();
    let helm = |args: &[&str]| helm_ok(home.path(), &cp, args);
    let release_ns = cp.namespace("crd-release").await.expect("namespace");
    let chart = helm::chart_dir().display().to_string();

    // Installed with the release: served, the chart's, kept.
    helm(&[
        "install",
        "nova-operator",
        &chart,
        "--namespace",
        &release_ns,
    ]);
    for crd in [NOVAS, NOVACOMPUTES] {
        Wait::new(format!("{crd} Established"), TIMEOUT)
            .until(|| async {
                let crd = crds.get(crd).await.ok()?;
                let conditions = crd.status?.conditions?;
                conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            })
            .await
            .expect("established");
    }
    let (description, annotations) = served(&crds).await;
    assert_eq!(
        annotation(&annotations, "helm.sh/resource-policy"),
        Some("keep")
    );
    let compiled = nova_api::crd::compiled_hashes();
    assert_eq!(
        annotation(&annotations, SCHEMA_HASH_ANNOTATION),
        compiled
            .iter()
            .find(|(n, _)| n == NOVAS)
            .map(|(_, h)| h.as_str()),
        "the chart installs this release's schema"
    );
    assert!(!description.ends_with(MARKER), "{description}");

    // An upgrade to a chart whose CRD changed updates it.
    let copy = tempfile::tempdir().expect("chart copy");
    let changed = helm::chart_with_changed_crd(copy.path(), MARKER).expect("chart copy");
    let changed = changed.display().to_string();
    helm(&[
        "upgrade",
        "nova-operator",
        &changed,
        "--namespace",
        &release_ns,
    ]);
    let (description, _) = served(&crds).await;
    assert!(description.ends_with(MARKER), "upgraded: {description}");

    // Uninstalled: the CRDs stay (with them every Nova and pool).
    let uninstalled = helm(&["uninstall", "nova-operator", "--namespace", &release_ns]);
    for crd in [NOVAS, NOVACOMPUTES] {
        assert!(
            crds.get_opt(crd).await.expect("read").is_some(),
            "{crd} outlives the release: {uninstalled}"
        );
    }

    // `kubectl apply -f crds/`, client-side: the whole CRD fits its annotation.
    let crd_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    let out = std::process::Command::new(nova_test_harness::testbin_dir().join("kubectl"))
        .args(["--kubeconfig", &kubeconfig, "apply", "-f"])
        .arg(&crd_dir)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl apply -f crds/: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (description, annotations) = served(&crds).await;
    assert!(
        !description.ends_with(MARKER),
        "applied back: {description}"
    );
    assert!(
        annotation(
            &annotations,
            "kubectl.kubernetes.io/last-applied-configuration"
        )
        .is_some_and(|a| a.len() > 100_000),
        "client-side apply stored the whole CRD"
    );

    // Another release's schema served: the controller says so and reconciles on.
    crds.patch(
        NOVAS,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {SCHEMA_HASH_ANNOTATION: "an-older-release"}}}),
        ),
    )
    .await
    .expect("stamp another release's digest");
    let ns = cp.namespace("crd-stale").await.expect("namespace");
    let metrics = start_controller(client.clone(), &ns).await;
    let current = |crd: &str| metrics.crd_schema_current.with_label_values(&[crd]).get();
    assert_eq!((current(NOVAS), current(NOVACOMPUTES)), (0, 1));
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let nova = example(&ns);
    let name = nova.metadata.name.clone().unwrap_or_default();
    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create the Nova");
    wait_for_event(
        &client,
        &ns,
        EventReason::CRDSchemaOutdated.as_str(),
        TIMEOUT,
    )
    .await;
    let events = events_on(&client, &ns, &name).await.expect("events");
    let (_, note, _) = events
        .iter()
        .find(|(reason, _, _)| reason == EventReason::CRDSchemaOutdated.as_str())
        .expect("the warning");
    assert!(note.contains(NOVAS), "{note}");
    Wait::new("the Nova reconciled on", TIMEOUT)
        .until(|| async {
            let nova = novas.get(&name).await.ok()?;
            nova.status?
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready")
                .then_some(())
        })
        .await
        .expect("a status with Ready");
}
