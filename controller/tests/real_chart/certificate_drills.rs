//! The chart-installed webhook's own certificates on the real node, under admission load
//! (issue 33, the certificate drills).
//!
//! **Injects**, while eight clients send the API server reviews of Novas (server-side dry runs:
//! valid creates, updates of an existing Nova, and an invalid create only the webhook denies):
//! - a serving certificate of 90 s (`--certificate-validity-seconds` through `extraArgs`,
//!   synced every 5 s), run past its expiry;
//! - the webhook's TLS Secret deleted, then the release upgraded with the same values;
//! - the chart rendered by `helm template` and applied with `kubectl apply` (a GitOps
//!   install), then rendered and applied twice more.
//!
//! In each, a Nova the release's controller holds by its finalizer is deleted.
//!
//! **Asserts**: the serving certificate is renewed before it expires; a deleted Secret is
//! re-created with a new CA and that CA injected; the GitOps applies leave the Secret and the
//! injected caBundle as they were; no review of any phase was refused (the API server could
//! not call or trust the webhook) and each got a working webhook's answer; every deleted Nova
//! was gone (its finalizer removed) within 30 s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use nova_api::v1alpha1::Nova;
use nova_certs::{PemCert, parse_certificates};
use nova_test_harness::helm;
use nova_testkit::admission_load::{
    Load, Phases, Writes, assert_nothing_refused, load_for, nova_with_own_schemas,
};
use nova_testkit::prelude::*;

use crate::chart_install::{available, on_the_real_node};

/// The serving certificate's life in the renewal drill: renewed at two-thirds (60 s).
const SERVING_SECONDS: u64 = 90;
/// The chart's values for that life: the flags given again through `extraArgs` (the last
/// value wins), a CA of at least three serving lives, and a 5 s sync.
const SHORT_LIVES: [&str; 4] = [
    "--set",
    "webhook.certificate.selfSigned.syncSeconds=5",
    "--set-json",
    r#"webhook.extraArgs=["--certificate-validity-seconds=90","--ca-validity-seconds=3600"]"#,
];
/// How soon a deleted Nova must be gone.
const FINALIZED_WITHIN: Duration = Duration::from_secs(30);
/// The Nova the load's updates dry-run against.
pub(crate) const STEADY: &str = "steady";

/// The serving certificate of the Secret `name`, when it holds one.
async fn serving(secrets: &Api<Secret>, name: &str) -> Option<PemCert> {
    let data = secrets.get_opt(name).await.ok()??.data?;
    let pem = String::from_utf8(data.get("tls.crt")?.0.clone()).ok()?;
    parse_certificates(&pem).ok()?.into_iter().next()
}

/// The caBundle of every webhook of both configurations named `name`.
pub(crate) async fn injected(client: &Client, name: &str) -> Vec<Vec<u8>> {
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(name)
        .await
        .expect("the mutating configuration");
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get(name)
        .await
        .expect("the validating configuration");
    nova_webhook::selfsigned::injected_bundles(&mutating, &validating)
}

/// Eight clients' reviews of Novas in `ns` (dry runs: nothing stored, no controller work), the
/// updates against the [`STEADY`] Nova.
pub(crate) fn dry_run_load(client: &Client, ns: &str, phases: &Arc<Phases>) -> Load {
    Load::start_with(
        client,
        ns,
        phases,
        Writes::DryRun {
            update: STEADY.into(),
        },
    )
}

/// Creates the Nova `name` in `ns` (on schemas of its own) and waits until the controller
/// holds it by its finalizer.
pub(crate) async fn held_nova(client: &Client, ns: &str, name: &str) {
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    let nova: Nova = serde_json::from_value(nova_with_own_schemas(name, ns)).expect("a Nova");
    novas
        .create(&PostParams::default(), &nova)
        .await
        .expect("create the Nova");
    Wait::new(
        format!("the controller's finalizer on Nova {ns}/{name}"),
        Duration::from_secs(120),
    )
    .about::<Nova>(client, Some(ns), name)
    .for_object(&novas, name, |n| !n.finalizers().is_empty())
    .await
    .expect("the controller holds the Nova");
}

/// Deletes the Nova `name` in `ns` and asserts it is gone, its finalizer removed, within
/// [`FINALIZED_WITHIN`].
pub(crate) async fn finalized_in_time(client: &Client, ns: &str, name: &str) {
    let novas: Api<Nova> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    novas
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete the Nova");
    Wait::new(format!("Nova {ns}/{name} gone"), Duration::from_secs(120))
        .about::<Nova>(client, Some(ns), name)
        .for_deletion(&novas, name)
        .await
        .expect("the deleted Nova is finalized");
    let took = started.elapsed();
    eprintln!(
        "certs drill: Nova {name} finalized {:.1}s after its delete",
        took.as_secs_f64()
    );
    assert!(
        took < FINALIZED_WITHIN,
        "Nova {name} took {took:?} to be finalized"
    );
}

/// The Secret's data and the injected bundles, to compare before and after an apply.
async fn certificate_state(
    client: &Client,
    secrets: &Api<Secret>,
    secret: &str,
    config: &str,
) -> (Option<BTreeMap<String, ByteString>>, Vec<Vec<u8>>) {
    let data = secrets.get(secret).await.expect("the Secret").data;
    (data, injected(client, config).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_chart_webhook_renews_and_recovers_its_certificate_under_load() {
    let _timed = nova_testkit::stack::timed().await;
    let (cp, client, home, chart) = on_the_real_node().await;
    let ns = cp.namespace("nova-certs").await.expect("namespace");
    let release = "nova-certs";
    let config = format!("{release}-nova-operator");
    let secret = format!("{config}-webhook-tls");
    let mut args = scoped_install_args(release, &ns, &chart);
    args.extend_from_slice(&SHORT_LIVES);
    helm_ok(home.path(), cp, &args);
    available(&client, &ns, &format!("{config}-webhook")).await;
    webhook_denies(&client, &ns).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let first = serving(&secrets, &secret)
        .await
        .expect("the serving certificate");
    assert_eq!(
        first.validity.life(),
        Duration::from_secs(SERVING_SECONDS),
        "extraArgs set the serving life"
    );
    held_nova(&client, &ns, STEADY).await;
    held_nova(&client, &ns, "doomed-renewal").await;
    held_nova(&client, &ns, "doomed-secret").await;

    let phases = Phases::new(&["renewal", "secret-deleted"]);
    let load = dry_run_load(&client, &ns, &phases);

    // The 90 s certificate: renewed before it expires, and the load runs past its expiry.
    let renewed = Wait::new(
        "the serving certificate renewed",
        Duration::from_secs(2 * SERVING_SECONDS),
    )
    .every(Duration::from_millis(500))
    .until(|| async { serving(&secrets, &secret).await.filter(|c| *c != first) })
    .await
    .expect("renewed");
    let left = first.validity.remaining(SystemTime::now());
    eprintln!(
        "certs drill: renewed {left:?} before the first certificate expired (life {SERVING_SECONDS}s); the new one lives {:?}",
        renewed.validity.life()
    );
    assert!(left > Duration::ZERO, "renewed only after the expiry");
    finalized_in_time(&client, &ns, "doomed-renewal").await;
    // Past the first certificate's expiry (a time to reach, not a state).
    tokio::time::sleep(first.validity.remaining(SystemTime::now()) + Duration::from_secs(5)).await;

    // The Secret deleted and the release upgraded with the same values.
    phases.enter("secret-deleted");
    let before = injected(&client, &config).await;
    secrets
        .delete(&secret, &DeleteParams::default())
        .await
        .expect("delete the webhook's Secret");
    args[0] = "upgrade";
    // The load's clients keep running on the other workers meanwhile.
    tokio::task::block_in_place(|| helm_ok(home.path(), cp, &args));
    Wait::new("a new CA injected", Duration::from_secs(60))
        .every(Duration::from_millis(500))
        .until(|| async { injected(&client, &config).await != before })
        .await
        .expect("the webhook re-created its Secret and injected its CA");
    finalized_in_time(&client, &ns, "doomed-secret").await;
    load_for(Duration::from_secs(15)).await;
    let tally = load.finish().await;
    assert_nothing_refused(&tally, phases.names());

    finalized_in_time(&client, &ns, STEADY).await;
    helm_ok(
        home.path(),
        cp,
        &["uninstall", release, "--namespace", &ns, "--wait"],
    );
    gitops_applies_keep_the_certificate(cp, &client, home.path()).await;
}

/// The chart rendered by `helm template` and applied by kubectl (as Argo CD or Flux would),
/// then rendered and applied twice more under load: the Secret and the injected caBundle stay
/// as the webhook made them, no review is refused, a deleted Nova is finalized in time.
async fn gitops_applies_keep_the_certificate(
    cp: &nova_test_harness::ControlPlane,
    client: &Client,
    home: &std::path::Path,
) {
    let ns = cp.namespace("nova-gitops").await.expect("namespace");
    let fullname = format!("{ns}-ops");
    let values = [
        "--set".to_owned(),
        format!("fullnameOverride={fullname}"),
        "--set".to_owned(),
        "rbac.scope=namespace".to_owned(),
        "--set".to_owned(),
        "webhook.replicas=1".to_owned(),
        "--set".to_owned(),
        "crds.enabled=false".to_owned(),
        "--skip-tests".to_owned(),
    ];
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let render = || helm::template(home, &ns, &values).expect("helm template");
    let rendering = render();
    kubectl_ok(cp, &["apply", "-f", "-"], &rendering);
    // Nothing waits for the applied objects as `helm --wait` does.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let webhook = format!("{fullname}-webhook");
    Wait::new(format!("{webhook} Available"), Duration::from_secs(300))
        .about::<Deployment>(client, Some(&ns), &webhook)
        .for_object(&deployments, &webhook, |d| {
            d.status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
        .await
        .expect("the GitOps install's webhook is Available");
    webhook_denies(client, &ns).await;
    held_nova(client, &ns, STEADY).await;
    held_nova(client, &ns, "doomed-gitops").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = format!("{fullname}-webhook-tls");
    let before = certificate_state(client, &secrets, &secret, &fullname).await;

    let phases = Phases::new(&["gitops"]);
    let load = dry_run_load(client, &ns, &phases);
    for _ in 0..2 {
        let rendering = render();
        tokio::task::block_in_place(|| kubectl_ok(cp, &["apply", "-f", "-"], &rendering));
        assert_eq!(
            certificate_state(client, &secrets, &secret, &fullname).await,
            before,
            "the apply left the Secret and the injected caBundle as they were"
        );
        load_for(Duration::from_secs(5)).await;
    }
    finalized_in_time(client, &ns, "doomed-gitops").await;
    let tally = load.finish().await;
    assert_nothing_refused(&tally, phases.names());
    assert_eq!(
        certificate_state(client, &secrets, &secret, &fullname).await,
        before,
        "nothing re-injected after the applies"
    );

    finalized_in_time(client, &ns, STEADY).await;
    kubectl_ok(
        cp,
        &["delete", "--ignore-not-found", "--wait=true", "-f", "-"],
        &rendering,
    );
}
