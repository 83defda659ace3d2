//! The webhook process follows its log filter file (`--log-filter-file`, the chart's logging
//! ConfigMap): an edit becomes the filter without a restart, a filter that does not parse is
//! ignored and named, and the process keeps serving throughout.

use std::time::Duration;

use nova_test_harness::local_webhook::{CertDir, LocalWebhook};
use nova_test_harness::shared;
use nova_testkit::wait::{Seen, Wait};

/// Waits until the webhook's log holds a line with `text`, failing with the log's tail.
async fn logged(webhook: &LocalWebhook, text: &str) {
    // Longer than the follow period (5 s), with room for a loaded machine.
    Wait::new(format!("a log line with {text:?}"), Duration::from_secs(30))
        .until(|| async {
            if webhook.log_lines_containing(text) > 0 {
                Seen::Done(())
            } else {
                Seen::Saw(format!("the log's tail: {}", webhook.log_tail(20)))
            }
        })
        .await
        .expect("the webhook logged it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_follows_its_log_filter_file_without_a_restart() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cp = shared().await.expect("control plane");
    let dir = tempfile::tempdir().expect("dir");
    let bundle =
        nova_certs::ServingBundle::generate("nova-webhook", &["127.0.0.1"]).expect("bundle");
    let certs = CertDir::new(dir.path(), &bundle.cert_pem, &bundle.key_pem).expect("certs");
    let filter = dir.path().join("filter");
    std::fs::write(&filter, "warn\n").expect("the filter");
    let webhook = LocalWebhook::start_with(
        env!("CARGO_BIN_EXE_nova-webhook").as_ref(),
        vec![
            format!("--tls-cert-file={}", certs.cert().display()),
            format!("--tls-private-key-file={}", certs.key().display()),
            format!("--log-filter-file={}", filter.display()),
        ],
        cp,
        "log-filter",
    )
    .await
    .expect("nova-webhook starts and is ready");
    // Under `warn` the start-up's info lines are filtered out.
    assert_eq!(
        webhook.log_lines_containing("serving certificate loaded"),
        0,
        "the file's filter is in force from the start: {}",
        webhook.log_tail(20)
    );

    std::fs::write(&filter, "info,nova_webhook=debug\n").expect("the new filter");
    logged(
        &webhook,
        r#"log filter changed from "warn" to "info,nova_webhook=debug""#,
    )
    .await;

    std::fs::write(&filter, "nova_webhook=loud\n").expect("a bad filter");
    logged(&webhook, r#"log filter "nova_webhook=loud""#).await;
    assert!(
        webhook.log_lines_containing("ignored") > 0,
        "{}",
        webhook.log_tail(20)
    );
    assert!(webhook.ready().await, "the webhook serves throughout");
}
