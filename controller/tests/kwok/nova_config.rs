//! The Config and ComputeConfig steps against a real API server: the immutable,
//! content-addressed ConfigMap and its history, ExtraConfigHealthy and its event, the
//! contract Secrets updated in place, the remote contract, and the last-good rule.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use nova_api::v1alpha1::Nova;
use nova_testkit::prelude::*;
use serde_json::json;

async fn config_maps(api: &Api<ConfigMap>) -> Vec<ConfigMap> {
    let selector = "cobaltcore.c5c3.io/config-base=nova-config";
    api.list(&ListParams::default().labels(selector))
        .await
        .expect("list")
        .items
}

async fn wait_for_config_maps(
    api: &Api<ConfigMap>,
    check: impl Fn(&[ConfigMap]) -> bool,
) -> Vec<ConfigMap> {
    Wait::new("the config ConfigMaps to settle", TIMEOUT)
        .until(|| async {
            let items = config_maps(api).await;
            if check(&items) {
                Seen::Done(items)
            } else {
                Seen::Saw(format!(
                    "{:?}",
                    items.iter().map(|c| c.name_any()).collect::<Vec<_>>()
                ))
            }
        })
        .await
        .expect("the ConfigMaps")
}

async fn patch_spec(novas: &Api<Nova>, spec: serde_json::Value) {
    novas
        .patch(
            "nova",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .expect("patch");
}

fn text(secret: &Secret, key: &str) -> String {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .unwrap_or_default();
    String::from_utf8(bytes).expect("utf8")
}

#[tokio::test(flavor = "multi_thread")]
async fn config_map_history_owned_keys_contracts_and_last_good() {
    let cp = nova_test_harness::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("nova-config").await.expect("namespace");
    provide_inputs(&client, &ns).await;
    start_controller(client.clone(), &ns).await;
    let novas: Api<Nova> = Api::namespaced(client.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    novas
        .create(&PostParams::default(), &example(&ns))
        .await
        .expect("create Nova");

    // One immutable, content-addressed ConfigMap with the five documents.
    wait_for(&novas, "ComputeConfigReady", "ComputeConfigPublished").await;
    let first = wait_for_config_maps(&cms, |items| items.len() == 1)
        .await
        .remove(0);
    assert_eq!(first.immutable, Some(true));
    let keys: Vec<_> = first.data.clone().unwrap_or_default().into_keys().collect();
    assert_eq!(
        keys,
        [
            "conductor.conf",
            "metadata.conf",
            "nova.conf",
            "novncproxy.conf",
            "scheduler.conf"
        ]
    );
    let hash = first
        .name_any()
        .strip_prefix("nova-config-")
        .expect("content-addressed name")
        .to_owned();
    assert_eq!(hash.len(), 8);
    assert_eq!(
        wait_for(&novas, "ExtraConfigHealthy", "NoOwnedKeysOverridden").await,
        "spec.extraConfig overrides no operator-owned keys"
    );
    let nova_conf = first
        .data
        .as_ref()
        .and_then(|d| d.get("nova.conf"))
        .cloned()
        .unwrap_or_default();
    for value in PLANTED {
        assert!(!nova_conf.contains(value), "nova.conf carries a credential");
    }

    // An unchanged spec reuses it.
    let touch = json!({"metadata": {"annotations": {"test.nova/touch": "1"}}});
    novas
        .patch("nova", &PatchParams::default(), &Patch::Merge(touch))
        .await
        .expect("touch");
    absence_window(Duration::from_secs(2)).await;
    assert_eq!(config_maps(&cms).await.len(), 1);

    // Each changed extraConfig renders a new one; history is pruned to three besides the current.
    for ratio in ["2.0", "3.0", "4.0", "5.0", "6.0"] {
        patch_spec(
            &novas,
            json!({"extraConfig": {"DEFAULT": {"cpu_allocation_ratio": ratio}}}),
        )
        .await;
        wait_for_config_maps(&cms, |items| {
            items.iter().any(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get("nova.conf"))
                    .is_some_and(|c| c.contains(&format!("cpu_allocation_ratio = {ratio}")))
            })
        })
        .await;
    }
    let kept = wait_for_config_maps(&cms, |items| items.len() == 4).await;
    assert!(
        !kept.iter().any(|cm| cm.name_any() == first.name_any()),
        "the oldest was pruned"
    );
    assert_eq!(
        wait_for(&novas, "ExtraConfigHealthy", "NoOwnedKeysOverridden").await,
        "spec.extraConfig overrides no operator-owned keys"
    );

    // An overridden owned key is honoured and reported, with one Warning event.
    patch_spec(&novas, json!({"extraConfig": {"filter_scheduler": {"build_failure_weight_multiplier": "1000000.0"}}})).await;
    let message = wait_for(&novas, "ExtraConfigHealthy", "OwnedKeysOverridden").await;
    assert_eq!(
        message,
        "spec.extraConfig overrides operator-owned keys: [filter_scheduler] build_failure_weight_multiplier"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    Wait::new("a Warning ExtraConfigOwnedKeyOverride event", TIMEOUT)
        .until(|| async {
            let listed = events.list(&Default::default()).await?;
            Ok(listed
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("ExtraConfigOwnedKeyOverride")
                        && e.type_.as_deref() == Some("Warning")
                })
                .then_some(()))
        })
        .await
        .expect("the event");

    // The contract: stable name, the six documented keys minus ca.crt, updated in place.
    let contract = secrets.get("nova-compute-config").await.expect("contract");
    let mut keys: Vec<_> = contract
        .data
        .clone()
        .unwrap_or_default()
        .into_keys()
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "cell_name",
            "metadata_proxy_shared_secret",
            "nova-compute.conf",
            "password",
            "transport_url"
        ]
    );
    assert_eq!(text(&contract, "cell_name"), "cell1");
    assert_eq!(text(&contract, "password"), SERVICE_PASSWORD);
    let nova = novas.get("nova").await.expect("nova");
    assert_eq!(
        nova.status
            .and_then(|s| s.compute_config_secret_ref)
            .map(|r| r.name)
            .as_deref(),
        Some("nova-compute-config")
    );
    patch_spec(&novas, json!({"region": "region-two"})).await;
    let now = Wait::new("the contract to pick up the region", TIMEOUT)
        .until(|| async {
            let now = secrets.get("nova-compute-config").await?;
            Ok(text(&now, "nova-compute.conf")
                .contains("region-two")
                .then_some(now))
        })
        .await
        .expect("the contract's region");
    assert_eq!(now.uid(), contract.uid(), "updated in place, not recreated");

    // The remote contract: waits for its URL without halting, then publishes, then goes away.
    put_secret(
        &secrets,
        "rabbitmq-ca",
        &[(
            "ca.crt",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )],
    )
    .await;
    patch_spec(
        &novas,
        json!({"messaging": {"tls": {"caBundleSecretRef": {"name": "rabbitmq-ca"}}},
               "remoteCompute": {"keystoneEndpoint": "https://keystone.example.com/v3", "transportURLSecretRef": {"name": "remote-url"}}}),
    )
    .await;
    let message = wait_for(&novas, "ComputeConfigReady", "WaitingForRemoteTransportURL").await;
    assert_eq!(
        message,
        format!("spec.remoteCompute.transportURLSecretRef: Secret {ns}/remote-url not found")
    );
    put_secret(
        &secrets,
        "remote-url",
        &[("transport_url", "amqp://u:remote-pw@rmq.example.com:5671/")],
    )
    .await;
    let message = wait_for(&novas, "ComputeConfigReady", "ComputeConfigError").await;
    assert_eq!(
        message,
        "spec.remoteCompute.transportURLSecretRef: scheme must be rabbit, got \"amqp\""
    );
    put_secret(
        &secrets,
        "remote-url",
        &[(
            "transport_url",
            "rabbit://u:remote-pw@rmq.example.com:5671/",
        )],
    )
    .await;
    wait_for(&novas, "ComputeConfigReady", "ComputeConfigPublished").await;
    let remote = secrets
        .get("nova-remote-compute-config")
        .await
        .expect("remote contract");
    assert_eq!(
        text(&remote, "transport_url"),
        "rabbit://u:remote-pw@rmq.example.com:5671/"
    );
    assert!(
        text(&remote, "nova-compute.conf").contains("auth_url = https://keystone.example.com/v3")
    );
    assert!(text(&remote, "ca.crt").starts_with("-----BEGIN CERTIFICATE-----"));
    patch_spec(&novas, json!({"remoteCompute": null})).await;
    Wait::new("the remote contract withdrawn", TIMEOUT)
        .for_deletion(&secrets, "nova-remote-compute-config")
        .await
        .expect("the remote contract is gone");
    wait_for(&novas, "ComputeConfigReady", "ComputeConfigPublished").await;
    // The pass that deleted the Secret clears the reference when it writes the status, after
    // the steps behind ComputeConfig.
    wait_nova_until(
        &novas,
        "nova",
        "status.remoteComputeConfigSecretRef cleared",
        TIMEOUT,
        |n| {
            n.status
                .as_ref()
                .is_none_or(|s| s.remote_compute_config_secret_ref.is_none())
        },
    )
    .await
    .expect("the reference cleared");

    // The last-good rule: with the live API Deployment mounting the current ConfigMap, a section
    // carrying a newline is not rendered; the mounted ConfigMap stays in use.
    let current = wait_for_config_maps(&cms, |items| {
        items.iter().any(|cm| {
            cm.data
                .as_ref()
                .and_then(|d| d.get("nova.conf"))
                .is_some_and(|c| {
                    c.contains("[oslo_messaging_rabbit]\n") && c.contains("ssl = true")
                })
        })
    })
    .await;
    let tls_bus = |cm: &&ConfigMap| {
        cm.data
            .as_ref()
            .and_then(|d| d.get("nova.conf"))
            .is_some_and(|c| c.contains("ssl = true"))
    };
    let newest = current.iter().find(tls_bus).expect("newest").name_any();
    // The Deployment step keeps the API Deployment on the newest ConfigMap.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    Wait::new(format!("the API Deployment to mount {newest}"), TIMEOUT)
        .for_object(&deployments, "nova", |d| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|s| s.volumes.as_ref())
                .is_some_and(|volumes| {
                    volumes
                        .iter()
                        .any(|v| v.config_map.as_ref().is_some_and(|c| c.name == newest))
                })
        })
        .await
        .expect("the mounted ConfigMap");
    let before = config_maps(&cms).await.len();
    patch_spec(&novas, json!({"extraConfig": {"DEFAULT": {"cpu_allocation_ratio": "1.0\n[DEFAULT]\ntransport_url = evil"}}})).await;
    let message = wait_for(&novas, "SecretsReady", "ConfigError").await;
    assert!(
        message.contains("\"DEFAULT\""),
        "names the section: {message}"
    );
    assert!(!message.contains("evil"), "never the value: {message}");
    absence_window(Duration::from_secs(2)).await;
    assert_eq!(
        config_maps(&cms).await.len(),
        before,
        "no ConfigMap is rendered from the invalid spec"
    );
    assert_eq!(
        condition(&novas, "ComputeConfigReady")
            .await
            .map(|c| c.1)
            .as_deref(),
        Some("ComputeConfigPublished")
    );
}
