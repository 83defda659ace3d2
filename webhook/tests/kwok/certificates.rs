//! The self-signed mode (`nova-webhook --self-signed-secret`) behind the real API server, under
//! the drills' admission load (eight clients creating and updating Novas and trying an invalid
//! one), two replicas on one Secret: the webhook creates its Secret, injects the CA into its configurations and becomes
//! ready; a serving certificate of 30 s is renewed before it expires and the load runs past
//! that expiry; the Secret deleted is re-created and the bundle re-injected; in steady state
//! nothing is written. And the chart: `helm template | kubectl apply` twice (GitOps) leaves the
//! injected caBundle and the Secret as they were, under load through the chart's own
//! configurations. Every refused request is counted; none is allowed.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use nova_certs::{PemCert, parse_certificates};
use nova_test_harness::local_webhook::{
    LocalWebhook, example_named, nova_registration, nova_resource,
};
use nova_test_harness::{
    Canary, CanaryExpectation, WebhookRegistration, helm, register_webhooks, shared,
    unregister_webhooks, wait_for_webhook,
};
use nova_testkit::fixtures::EXAMPLE_NOVA_YAML as EXAMPLE_NOVA;
use nova_testkit::wait::Wait;

use crate::drills::every_stored_nova_went_through_the_webhook;
use nova_testkit::admission_load::{DENIED, Load, Phases, assert_nothing_refused, load_for};
use nova_testkit::charts::kubectl_ok;

/// The serving certificate's life: renewed at two-thirds (20 s), so the test sees a renewal
/// and the first certificate's expiry within a minute.
const SERVING_SECONDS: u64 = 30;
const SYNC_SECONDS: u64 = 1;
const PROPAGATION_SECONDS: u64 = 3;
const SECRET: &str = "nova-webhook-tls";
/// What the webhook logs each time it starts serving the Secret's pair.
const SERVED: &str = "serving certificate from the Secret now served";

/// The self-signed flags; `serving_seconds` the serving life, the CA's three times it.
fn self_signed_args(
    ns: &str,
    secret: &str,
    configuration: &str,
    serving_seconds: u64,
) -> Vec<String> {
    vec![
        format!("--self-signed-secret={secret}"),
        format!("--webhook-configuration={configuration}"),
        format!("--namespace={ns}"),
        "--certificate-names=127.0.0.1".into(),
        format!("--ca-validity-seconds={}", 3 * serving_seconds),
        format!("--certificate-validity-seconds={serving_seconds}"),
        format!("--certificate-sync-seconds={SYNC_SECONDS}"),
        format!("--ca-propagation-seconds={PROPAGATION_SECONDS}"),
        "--api-timeout-seconds=5".into(),
    ]
}

/// The Secret's uid, resourceVersion, serving certificate and CA bundle.
struct Stored {
    uid: String,
    resource_version: String,
    leaf: PemCert,
    bundle: Vec<PemCert>,
}

async fn stored(secrets: &Api<Secret>) -> Option<Stored> {
    let secret = secrets.get_opt(SECRET).await.ok()??;
    let data = secret.data?;
    let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    Some(Stored {
        uid: secret.metadata.uid?,
        resource_version: secret.metadata.resource_version?,
        leaf: parse_certificates(&text("tls.crt")?).ok()?.remove(0),
        bundle: parse_certificates(&text("ca.crt")?).ok()?,
    })
}

/// Every webhook's caBundle in both configurations named `name`, and their resourceVersions.
async fn injected(client: &kube::Client, name: &str) -> (Vec<Vec<u8>>, Vec<String>) {
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let m = mutating.get(name).await.expect("mutating configuration");
    let v = validating
        .get(name)
        .await
        .expect("validating configuration");
    let bundles = nova_webhook::selfsigned::injected_bundles(&m, &v);
    let versions = vec![
        m.metadata.resource_version.unwrap_or_default(),
        v.metadata.resource_version.unwrap_or_default(),
    ];
    (bundles, versions)
}

/// Waits until the API server calls the webhook (the canary, an invalid Nova, is denied).
async fn wait_called(client: &kube::Client, ns: &str) {
    let canary = example_named(EXAMPLE_NOVA, "canary-api", ns).unwrap();
    wait_for_webhook(
        client,
        &Canary {
            resource: nova_resource("Nova", "novas"),
            namespace: Some(ns.to_owned()),
            object: canary,
            expect: CanaryExpectation::DeniedWith(DENIED.into()),
        },
        Duration::from_secs(60),
    )
    .await
    .expect("the webhook is called");
}

/// Waits until the webhook has started serving the Secret's pair `n` times.
async fn wait_served(webhook: &LocalWebhook, n: usize) -> Duration {
    let started = Instant::now();
    Wait::new(
        format!("the webhook to serve a pair from the Secret {n}x"),
        Duration::from_secs(60),
    )
    .every(Duration::from_millis(100))
    .until(|| async { webhook.log_lines_containing(SERVED) >= n })
    .await
    .expect("served");
    started.elapsed()
}

/// `/metrics` of the webhook.
async fn metrics(webhook: &LocalWebhook) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", webhook.metrics_port()))
        .await
        .expect("metrics port");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

/// The value of the series `name` (a counter never incremented is absent: zero).
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn self_signed_certificate_is_renewed_and_recreated_under_load_with_no_refused_request() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = shared().await.expect("control plane");
    let ns = cp.namespace("self-signed").await.expect("namespace");
    let client = cp.client().expect("client");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let name = format!("nova-webhook-{ns}");

    // The configurations exist before the webhook (the chart renders them without a caBundle);
    // it is ready once it has injected its CA, and only then is it pointed at.
    let placeholder = nova_registration(&name, &ns, "https://127.0.0.1:1", "");
    register_webhooks(&client, &placeholder)
        .await
        .expect("register");
    let started = Instant::now();
    let webhook = LocalWebhook::start_with(
        env!("CARGO_BIN_EXE_nova-webhook").as_ref(),
        self_signed_args(&ns, SECRET, &name, SERVING_SECONDS),
        cp,
        &ns,
    )
    .await
    .expect("the self-signed webhook starts and is ready");
    // A second replica on the same Secret and configurations: the two must converge, one
    // write per renewal between them (the API server calls the first).
    let replica = LocalWebhook::start_with(
        env!("CARGO_BIN_EXE_nova-webhook").as_ref(),
        self_signed_args(&ns, SECRET, &name, SERVING_SECONDS),
        cp,
        &format!("{ns}-replica"),
    )
    .await
    .expect("the second replica starts and is ready");
    eprintln!(
        "certs: created, injected and ready after {:?} (both replicas)",
        started.elapsed()
    );
    let first = stored(&secrets).await.expect("the Secret was created");
    let (bundles, _) = injected(&client, &name).await;
    let first_bundle: Vec<u8> = first.bundle.iter().flat_map(|c| c.pem.bytes()).collect();
    assert!(
        bundles.iter().all(|b| *b == first_bundle),
        "every webhook trusts the CA"
    );
    // Pointed at the webhook, with the injected bundle (the registration applies it as is).
    let registration = WebhookRegistration {
        url_base: webhook.url_base(),
        ca_bundle_pem: String::from_utf8(first_bundle).unwrap(),
        ..placeholder
    };
    register_webhooks(&client, &registration)
        .await
        .expect("register");
    wait_called(&client, &ns).await;

    let phases = Phases::new(&["first", "renewed", "deleted", "recreated", "steady"]);
    let load = Load::start(&client, &ns, &phases);

    // Renewal before expiry.
    let renewed = Wait::new(
        "the serving certificate renewed",
        Duration::from_secs(2 * SERVING_SECONDS),
    )
    .every(Duration::from_millis(200))
    .until(|| async { stored(&secrets).await.filter(|s| s.leaf != first.leaf) })
    .await
    .expect("renewed");
    let left = first.leaf.validity.remaining(SystemTime::now());
    eprintln!(
        "certs: renewed at {:.0}% of the first certificate's life, {left:?} before it expired",
        100.0 * (1.0 - left.as_secs_f64() / first.leaf.validity.life().as_secs_f64())
    );
    assert!(left > Duration::ZERO, "renewed before expiry");
    assert_eq!(renewed.uid, first.uid, "the same Secret, replaced");
    assert_eq!(
        renewed.bundle, first.bundle,
        "the same CA signs the renewal"
    );
    let swap = wait_served(&webhook, 2).await;
    eprintln!("certs: the renewed certificate served {swap:?} after it was seen in the Secret");
    phases.enter("renewed");
    // Through the first certificate's expiry under load: a point in time, not a state.
    let past_expiry = first.leaf.validity.remaining(SystemTime::now()) + Duration::from_secs(2);
    load_for(past_expiry).await;

    // The Secret deleted.
    phases.enter("deleted");
    let deleted = Instant::now();
    secrets
        .delete(SECRET, &DeleteParams::default())
        .await
        .expect("delete the Secret");
    let recreated = Wait::new("the Secret re-created", Duration::from_secs(30))
        .every(Duration::from_millis(100))
        .until(|| async { stored(&secrets).await.filter(|s| s.uid != first.uid) })
        .await
        .expect("re-created");
    let recreated_after = deleted.elapsed();
    assert_eq!(
        recreated.bundle.len(),
        2,
        "the new CA and the one still trusted"
    );
    assert_eq!(recreated.bundle[1], first.bundle[0]);
    let new_bundle: Vec<u8> = recreated
        .bundle
        .iter()
        .flat_map(|c| c.pem.bytes())
        .collect();
    Wait::new("the new bundle injected", Duration::from_secs(30))
        .every(Duration::from_millis(100))
        .until(|| async {
            injected(&client, &name)
                .await
                .0
                .iter()
                .all(|b| *b == new_bundle)
        })
        .await
        .expect("injected");
    let injected_after = deleted.elapsed();
    wait_served(&webhook, 3).await;
    let served_after = deleted.elapsed();
    eprintln!(
        "certs: Secret deleted; re-created after {recreated_after:?}, bundle injected after \
         {injected_after:?}, the new CA's certificate served after {served_after:?}"
    );
    phases.enter("recreated");
    load_for(Duration::from_secs(3)).await;

    // Steady state: no write for several syncs.
    phases.enter("steady");
    let before = (
        stored(&secrets).await.unwrap().resource_version,
        injected(&client, &name).await.1,
    );
    load_for(Duration::from_secs(4 * SYNC_SECONDS)).await;
    let after = (
        stored(&secrets).await.unwrap().resource_version,
        injected(&client, &name).await.1,
    );
    assert_eq!(before, after, "a steady webhook writes nothing");

    let tally = load.finish().await;
    assert_nothing_refused(&tally, phases.names());
    let stored_novas = every_stored_nova_went_through_the_webhook(&client, &ns).await;
    eprintln!("certs: {stored_novas} Novas stored, each defaulted and validated; 0 refused");

    let text = metrics(&webhook).await;
    let expiry = metric(&text, "nova_webhook_certificate_expiry_seconds");
    assert!(expiry > 0.0 && expiry <= SERVING_SECONDS as f64, "{expiry}");
    // Between the two replicas: one renewal, and two creations (at start, after the delete);
    // replicas that fought would have written more.
    let other = metrics(&replica).await;
    let writes = |what: &str| {
        let series = format!("nova_webhook_certificate_renewals_total{{what=\"{what}\"}}");
        metric(&text, &series) + metric(&other, &series)
    };
    eprintln!(
        "certs: Secret writes by both replicas: {} serving, {} regenerated, {} sync failures",
        writes("serving"),
        writes("regenerated"),
        metric(&text, "nova_webhook_certificate_sync_failures_total")
            + metric(&other, "nova_webhook_certificate_sync_failures_total")
    );
    // The regenerated certificate may come due before the end on a slow machine: a second
    // serving write then, never more.
    assert_eq!(writes("regenerated"), 2.0);
    assert!(
        (1.0..=2.0).contains(&writes("serving")),
        "{}",
        writes("serving")
    );
    // Both serve the same latest certificate: each started serving every one.
    Wait::new(
        "both replicas to serve the same certificate",
        Duration::from_secs(10),
    )
    .until(|| async {
        replica.log_lines_containing(SERVED) == webhook.log_lines_containing(SERVED)
    })
    .await
    .expect("the replicas agree");
    unregister_webhooks(&client, &name)
        .await
        .expect("unregister");
}

/// The rendering, its webhook configurations pointed at `url_base` instead of the Service
/// (the test API server cannot reach a Service), as one YAML stream.
fn pointed_at(rendering: &str, url_base: &str) -> String {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(rendering).expect("YAML");
    docs.into_iter()
        .filter(|d| !d.is_null())
        .map(|mut d| {
            if d["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("WebhookConfiguration"))
            {
                for hook in d["webhooks"].as_array_mut().into_iter().flatten() {
                    let path = hook["clientConfig"]["service"]["path"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    hook["clientConfig"] = serde_json::json!({"url": format!("{url_base}{path}")});
                }
            }
            format!("---\n{}\n", serde_json::to_string(&d).unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_template_applied_twice_keeps_the_injected_ca_and_the_secret_under_load() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = shared().await.expect("control plane");
    let ns = cp.namespace("gitops").await.expect("namespace");
    let client = cp.client().expect("client");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    // Names of its own (the configurations are cluster-scoped), admission limited to `ns`,
    // and no CRDs: they are the shared control plane's, and the delete at the end would take
    // them (and every other test's Novas) with it.
    let values = [
        "--set".to_owned(),
        format!("fullnameOverride={ns}"),
        "--set".to_owned(),
        "rbac.scope=namespace".to_owned(),
        "--set".to_owned(),
        "crds.enabled=false".to_owned(),
    ];
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let home = tempfile::tempdir().unwrap();
    let render = || helm::template(home.path(), &ns, &values).expect("helm template");
    let rendering = render();
    assert_eq!(rendering, render(), "helm template renders the same twice");
    assert!(!rendering.contains("caBundle:"), "no caBundle rendered");
    let secret_name = format!("{ns}-webhook-tls");
    assert!(
        !rendering.contains(&format!("name: {secret_name}\n")),
        "no Secret rendered"
    );

    // The webhook as the chart runs it (its Secret, its configurations), started before the
    // configurations exist, as helm creates the Deployment first: it makes and serves its
    // Secret, and is ready once the first apply brings the configurations and it injects.
    // Lives long enough that no renewal falls inside the test: what changes is the apply's.
    let args = self_signed_args(&ns, &secret_name, &ns, 3600);
    let start =
        LocalWebhook::start_with(env!("CARGO_BIN_EXE_nova-webhook").as_ref(), args, cp, &ns);
    let first_apply = async {
        // A moment for the webhook to start and find no configuration (a duration, not a
        // state: the order is what is tested).
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            secrets.get_opt(&secret_name).await.unwrap().is_some(),
            "the Secret is made before the configurations exist"
        );
        kubectl_ok(
            cp,
            &["apply", "-f", "-"],
            &pointed_at(&rendering, "https://127.0.0.1:1"),
        );
    };
    let (webhook, ()) = tokio::join!(start, first_apply);
    let webhook = webhook.expect("the self-signed webhook starts and is ready");
    let stream = pointed_at(&rendering, &webhook.url_base());
    kubectl_ok(cp, &["apply", "-f", "-"], &stream);
    wait_called(&client, &ns).await;

    let read = || async {
        let secret = secrets.get(&secret_name).await.expect("the Secret");
        let (bundles, _) = injected(&client, &ns).await;
        (secret.metadata.resource_version, secret.data, bundles)
    };
    let before = read().await;
    assert!(before.2.iter().all(|b| !b.is_empty()), "injected");

    let phases = Phases::new(&["gitops"]);
    let load = Load::start(&client, &ns, &phases);
    load_for(Duration::from_secs(2)).await;
    // The GitOps loop: render again, apply again, twice.
    for _ in 0..2 {
        kubectl_ok(
            cp,
            &["apply", "-f", "-"],
            &pointed_at(&render(), &webhook.url_base()),
        );
        assert_eq!(
            read().await,
            before,
            "the apply left the caBundle and the Secret as they were"
        );
        load_for(Duration::from_secs(2)).await;
    }
    let tally = load.finish().await;
    assert_nothing_refused(&tally, phases.names());
    assert_eq!(
        read().await,
        before,
        "nothing to re-inject after the applies"
    );

    drop(webhook);
    kubectl_ok(
        cp,
        &["delete", "--ignore-not-found", "--wait=false", "-f", "-"],
        &pointed_at(&rendering, "https://127.0.0.1:1"),
    );
}
