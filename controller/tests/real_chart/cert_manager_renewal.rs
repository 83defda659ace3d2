//! The chart's cert-manager mode on the real node through renewals, under admission load
//! (issue 33, certificates with a lifecycle).
//!
//! **Injects**: the real cert-manager CRDs, and a SIMULATED cert-manager
//! (`nova_test_harness::simulated_cert_manager`: issuance, key rotation and CA injection with
//! real effects; cert-manager itself cannot run here) serving the release installed with
//! `webhook.certificate.certManager.enabled=true`. While eight clients send the API server
//! reviews of Novas (server-side dry runs), the chart's CA Certificate is renewed (its
//! `rotationPolicy: Never` keeps the key), then the serving Certificate is renewed with a new
//! key (cert-manager's default rotation): the renewed CA alone is injected at once, while the
//! webhook serves the old certificate until the new one reaches its pod through the Secret
//! volume; a Nova the release's controller holds is deleted.
//!
//! **Asserts**: the CA's key stays and its certificate changes; the serving key changes and
//! the webhook reloads it without a restart; no review of any phase was refused and each got a
//! working webhook's answer; the deleted Nova was finalized within 30 s.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Client, ResourceExt};
use nova_test_harness::simulated_cert_manager::SimulatedCertManager;
use nova_testkit::admission_load::{Phases, assert_nothing_refused, load_for};
use nova_testkit::prelude::*;

use crate::certificate_drills::{STEADY, dry_run_load, finalized_in_time, held_nova, injected};
use crate::chart_install::on_the_real_node;
use crate::webhook_flood::{restarts, webhook_pod};

/// What the webhook logs when it has loaded a rotated certificate from its mount.
const RELOADED: &str = "serving certificate reloaded";

/// The key and the certificate of the TLS Secret `name`.
async fn key_and_cert(secrets: &Api<Secret>, name: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let data = secrets.get_opt(name).await.ok()??.data?;
    Some((
        data.get("tls.key")?.0.clone(),
        data.get("tls.crt")?.0.clone(),
    ))
}

/// The webhook container's log in `ns` (its one replica) and the container's restarts.
async fn webhook_log(client: &Client, ns: &str) -> (String, i32) {
    let pod = webhook_pod(client, ns).await;
    let log = nova_test_harness::pods::logs(client, ns, &pod.name_any(), "webhook")
        .await
        .expect("the webhook's log");
    (log, restarts(&pod))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cert_manager_mode_keeps_admission_up_through_ca_and_key_rotating_renewals() {
    let _timed = nova_testkit::stack::timed().await;
    let (cp, client, home, chart) = on_the_real_node().await;
    let crds = nova_test_harness::crd_files(&[
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/crds/chart")
    ])
    .expect("the chart's CRDs");
    let cert_manager_crds: Vec<PathBuf> = crds
        .into_iter()
        .filter(|f| f.display().to_string().contains("cert-manager.io_"))
        .collect();
    assert_eq!(
        cert_manager_crds.len(),
        3,
        "Issuer, ClusterIssuer, Certificate"
    );
    nova_test_harness::install_crds(&client, &cert_manager_crds, Duration::from_secs(60))
        .await
        .expect("install cert-manager's CRDs");

    let ns = cp.namespace("nova-cm").await.expect("namespace");
    let release = "nova-cm";
    let fullname = format!("{release}-nova-operator");
    let (ca_secret, serving_secret) = (
        format!("{fullname}-webhook-ca"),
        format!("{fullname}-webhook-tls"),
    );
    let cert_manager = SimulatedCertManager::start(client.clone(), &ns);
    let mut args = scoped_install_args(release, &ns, &chart);
    args.extend_from_slice(&["--set", "webhook.certificate.certManager.enabled=true"]);
    // The simulation issues the Secret the webhook pod mounts meanwhile, on another worker.
    tokio::task::block_in_place(|| helm_ok(home.path(), cp, &args));
    webhook_denies(&client, &ns).await;
    held_nova(&client, &ns, STEADY).await;
    held_nova(&client, &ns, "doomed-cm").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    let phases = Phases::new(&["issued", "ca-renewed", "serving-renewed"]);
    let load = dry_run_load(&client, &ns, &phases);
    load_for(Duration::from_secs(5)).await;

    // The CA renewed with its key. Nothing is injected yet: the injector reads the serving
    // Certificate's Secret, whose ca.crt changes with its next issuance.
    phases.enter("ca-renewed");
    let (ca_key, ca_cert) = key_and_cert(&secrets, &ca_secret)
        .await
        .expect("the CA Secret");
    let bundle = injected(&client, &fullname).await;
    cert_manager.renew(&format!("{fullname}-webhook-ca"));
    let renewed_key = Wait::new("the CA renewed", Duration::from_secs(60))
        .every(Duration::from_millis(500))
        .until(|| async {
            key_and_cert(&secrets, &ca_secret)
                .await
                .filter(|(_, cert)| *cert != ca_cert)
                .map(|(key, _)| key)
        })
        .await
        .expect("a renewed CA certificate");
    assert_eq!(renewed_key, ca_key, "the CA kept its key");
    load_for(Duration::from_secs(5)).await;

    // The serving certificate renewed with a new key by the renewed CA, which alone is then
    // injected while the webhook still serves the certificate the old CA certificate signed
    // (with the same key), until the kubelet updates its Secret volume (its sync period: about
    // a minute) and the webhook reloads.
    phases.enter("serving-renewed");
    let serving_key = key_and_cert(&secrets, &serving_secret).await.map(|p| p.0);
    cert_manager.renew(&format!("{fullname}-webhook"));
    Wait::new("the serving certificate reissued", Duration::from_secs(60))
        .every(Duration::from_millis(500))
        .until(|| async {
            key_and_cert(&secrets, &serving_secret).await.map(|p| p.0) != serving_key
        })
        .await
        .expect("a new serving key");
    Wait::new("the renewed CA injected", Duration::from_secs(60))
        .every(Duration::from_millis(500))
        .until(|| async { injected(&client, &fullname).await != bundle })
        .await
        .expect("the renewed CA was injected");
    let injected_at = std::time::Instant::now();
    let reloaded = Wait::new(
        "the webhook to reload the renewed certificate",
        Duration::from_secs(240),
    )
    .every(Duration::from_secs(2))
    .until(|| async {
        let (log, restarts) = webhook_log(&client, &ns).await;
        match log.matches(RELOADED).count() {
            0 => Seen::Saw(format!("no reload logged, {restarts} restarts")),
            _ => Seen::Done(restarts),
        }
    })
    .await
    .expect("the webhook reloaded its certificate");
    eprintln!(
        "cert-manager drill: the renewed certificate reloaded {:.0}s after the renewed CA was injected",
        injected_at.elapsed().as_secs_f64()
    );
    assert_eq!(reloaded, 0, "reloaded without a restart");
    finalized_in_time(&client, &ns, "doomed-cm").await;
    load_for(Duration::from_secs(5)).await;
    let tally = load.finish().await;
    assert_nothing_refused(&tally, phases.names());

    finalized_in_time(&client, &ns, STEADY).await;
    tokio::task::block_in_place(|| {
        helm_ok(
            home.path(),
            cp,
            &["uninstall", release, "--namespace", &ns, "--wait"],
        )
    });
    drop(cert_manager);
}
