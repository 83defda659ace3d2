//! Fault drills of the admission webhook behind the real API server, under load: eight clients
//! create and update Novas and try an invalid one (a name ending in `-api`, which only the
//! webhook rejects) as fast as the API server answers, while the real `nova-webhook` process is
//! SIGKILLed and restarted, or its serving certificate is rotated (same CA, then a CA roll
//! through an old+new `caBundle`). Every outcome is tallied per phase and printed; the drills
//! then check that nothing was ever admitted without the webhook: every stored Nova carries
//! the webhook's defaults (the updates remove one, so an update admitted without defaulting
//! shows too) and no `-api` Nova exists. Needs the control-plane binaries.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use nova_certs::CertificateAuthority;
use nova_test_harness::local_webhook::{
    CertDir, LocalWebhook, example_named, nova_registration, nova_resource,
};
use nova_test_harness::{
    Canary, CanaryExpectation, WebhookRegistration, register_webhooks, shared, unregister_webhooks,
    wait_for_webhook,
};
use serde_json::json;

use nova_testkit::admission_load::{
    DENIED, Load, Outcome, Phases, count, load_for, wrong_while_up,
};
use nova_testkit::fixtures::EXAMPLE_NOVA_YAML as EXAMPLE_NOVA;
use nova_testkit::wait::Wait;

/// Every stored Nova was defaulted by the webhook (also after its last update) and none is
/// the invalid one; returns how many there are.
pub(crate) async fn every_stored_nova_went_through_the_webhook(
    client: &kube::Client,
    ns: &str,
) -> usize {
    let novas: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &nova_resource("Nova", "novas"));
    let stored = novas.list(&ListParams::default()).await.unwrap().items;
    for nova in &stored {
        let name = nova.metadata.name.clone().unwrap_or_default();
        assert!(!name.ends_with("-api"), "{name} was admitted unvalidated");
        let spec = &nova.data["spec"];
        assert_eq!(
            (
                &spec["serviceUser"]["username"],
                &spec["scheduler"]["workers"]
            ),
            (&json!("nova"), &json!(2)),
            "{name} was admitted undefaulted: {spec}"
        );
    }
    stored.len()
}

/// The webhook process and its registration in a fresh namespace, checked to be called.
struct Drill {
    client: kube::Client,
    ns: String,
    webhook: LocalWebhook,
    registration: WebhookRegistration,
    certs: CertDir,
    _dir: tempfile::TempDir,
}

impl Drill {
    async fn start(prefix: &str, ca: &CertificateAuthority) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cp = shared().await.expect("control plane");
        let ns = cp.namespace(prefix).await.expect("namespace");
        let client = cp.client().expect("client");
        let dir = tempfile::tempdir().unwrap();
        let leaf = ca.issue_serving("nova-webhook", &["127.0.0.1"]).unwrap();
        let certs = CertDir::new(dir.path(), &leaf.cert_pem, &leaf.key_pem).unwrap();
        let webhook = LocalWebhook::start(
            env!("CARGO_BIN_EXE_nova-webhook").as_ref(),
            &certs,
            1,
            cp,
            &ns,
        )
        .await
        .expect("nova-webhook starts and is ready");
        let registration = nova_registration(
            &format!("nova-webhook-{ns}"),
            &ns,
            &webhook.url_base(),
            ca.cert_pem(),
        );
        let drill = Self {
            client,
            ns,
            webhook,
            registration,
            certs,
            _dir: dir,
        };
        drill.register_and_wait().await;
        drill
    }

    /// (Re-)registers and waits until the API server calls the webhook.
    async fn register_and_wait(&self) {
        register_webhooks(&self.client, &self.registration)
            .await
            .expect("registration");
        let canary = example_named(EXAMPLE_NOVA, "canary-api", &self.ns).unwrap();
        wait_for_webhook(
            &self.client,
            &Canary {
                resource: nova_resource("Nova", "novas"),
                namespace: Some(self.ns.clone()),
                object: canary,
                expect: CanaryExpectation::DeniedWith(DENIED.into()),
            },
            Duration::from_secs(60),
        )
        .await
        .expect("the webhook is called");
    }

    /// Waits until the webhook has logged `n` certificate reloads.
    async fn wait_for_reloads(&self, n: usize) {
        Wait::new(
            format!("the webhook to reload its certificate {n}x"),
            Duration::from_secs(30),
        )
        .until(|| async {
            self.webhook
                .log_lines_containing("serving certificate reloaded")
                >= n
        })
        .await
        .expect("the reloads");
    }

    async fn end(self) {
        unregister_webhooks(&self.client, &self.registration.name)
            .await
            .expect("unregister");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_webhook_fails_closed_under_load_and_recovers_after_restart() {
    let ca = CertificateAuthority::new("nova-webhook CA").unwrap();
    let mut drill = Drill::start("drill-webhook-kill", &ca).await;
    let phases = Phases::new(&["up", "killing", "killed", "restarting", "restarted"]);
    let started = Instant::now();
    let load = Load::start(&drill.client, &drill.ns, &phases);
    load_for(Duration::from_secs(3)).await;

    // A request in flight at the kill is refused: it belongs to no phase asserted on.
    phases.enter("killing");
    drill.webhook.kill().expect("SIGKILL");
    phases.enter("killed");
    load_for(Duration::from_secs(3)).await;

    phases.enter("restarting");
    let restart = Instant::now();
    drill.webhook.restart().await.expect("restart");
    eprintln!(
        "drill: restarted webhook ready after {:?}",
        restart.elapsed()
    );
    phases.enter("restarted");
    load_for(Duration::from_secs(3)).await;
    let tally = load.finish().await;
    eprintln!("drill: webhook kill drill ran {:?}", started.elapsed());

    for phase in ["up", "killed", "restarted"] {
        assert!(count(&tally, phase) > 0, "no request in phase {phase}");
    }
    let mut wrong = wrong_while_up(&tally, "up");
    wrong.extend(wrong_while_up(&tally, "restarted"));
    wrong.extend(
        tally
            .iter()
            .filter(|((p, _, outcome), _)| *p == "killed" && *outcome != Outcome::Refused)
            .map(|((p, op, outcome), n)| format!("{p}: {op:?} {outcome:?} x{n}")),
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
    let stored = every_stored_nova_went_through_the_webhook(&drill.client, &drill.ns).await;
    eprintln!("drill: {stored} Novas stored, each defaulted and validated");
    drill.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serving_certificate_rotation_and_ca_roll_under_load_fail_no_request() {
    let old_ca = CertificateAuthority::new("nova-webhook CA").unwrap();
    let new_ca = CertificateAuthority::new("nova-webhook CA").unwrap();
    let mut drill = Drill::start("drill-webhook-rotation", &old_ca).await;
    let phases = Phases::new(&["rotation"]);
    let started = Instant::now();
    let load = Load::start(&drill.client, &drill.ns, &phases);
    load_for(Duration::from_secs(2)).await;

    // A new leaf from the same CA.
    let leaf = old_ca
        .issue_serving("nova-webhook", &["127.0.0.1"])
        .unwrap();
    drill.certs.rotate(&leaf.cert_pem, &leaf.key_pem).unwrap();
    drill.wait_for_reloads(1).await;
    eprintln!("drill: serving a new leaf of the same CA");
    load_for(Duration::from_secs(2)).await;

    // The CA roll: trust both, serve the new CA's leaf, then trust only the new CA.
    drill.registration.ca_bundle_pem = format!("{}{}", old_ca.cert_pem(), new_ca.cert_pem());
    drill.register_and_wait().await;
    // The API server picks the configuration up from its informer; give it time to, as a
    // CA-injecting controller does, before the leaf changes.
    load_for(Duration::from_secs(3)).await;
    let leaf = new_ca
        .issue_serving("nova-webhook", &["127.0.0.1"])
        .unwrap();
    drill.certs.rotate(&leaf.cert_pem, &leaf.key_pem).unwrap();
    drill.wait_for_reloads(2).await;
    eprintln!("drill: serving the new CA's leaf with both CAs trusted");
    load_for(Duration::from_secs(2)).await;
    drill.registration.ca_bundle_pem = new_ca.cert_pem().to_owned();
    drill.register_and_wait().await;
    eprintln!("drill: only the new CA trusted");
    load_for(Duration::from_secs(3)).await;
    let tally = load.finish().await;
    eprintln!("drill: rotation drill ran {:?}", started.elapsed());

    assert!(count(&tally, "rotation") > 0);
    let wrong = wrong_while_up(&tally, "rotation");
    assert!(wrong.is_empty(), "{wrong:#?}");
    let stored = every_stored_nova_went_through_the_webhook(&drill.client, &drill.ns).await;
    eprintln!("drill: {stored} Novas stored, each defaulted and validated");
    drill.end().await;
}
