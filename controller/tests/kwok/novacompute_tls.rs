//! A pool's OpenStack calls verify an https Keystone against the Nova's `spec.tls` bundle
//! (issue 30). Keystone here is a loopback TLS listener with a certificate the test issued
//! (`nova_test_harness::https`: the handshake is real, the answer a fixed 503), routed to the
//! Keystone URL the Nova names. With a bundle of another CA the pool's AggregatesReady names
//! the endpoint and the TLS error, and never the password; with the issuing CA the handshake
//! passes and the pool reports Keystone's answer instead.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, PostParams};
use nova_api::v1alpha1::{NovaCompute, NovaTLSSpec, SecretRefSpec};
use nova_certs::CertificateAuthority;
use nova_controller::clusters::Registry;
use nova_testkit::prelude::*;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);
const KEYSTONE_AUTHORITY: &str = "keystone.tls-test.svc:5443";
const PASSWORD: &str = "service-Pa55-tls";

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_verifies_keystone_against_the_novas_ca_bundle_and_names_a_tls_failure() {
    let cp = nova_testkit::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("pool-tls").await.expect("namespace");
    let issuing = CertificateAuthority::new("keystone CA").expect("a CA");
    let other = CertificateAuthority::new("another CA").expect("a CA");
    let host = KEYSTONE_AUTHORITY.split(':').next().expect("a host");
    let issued = issuing
        .issue_serving(host, &[host])
        .expect("a serving certificate");
    let keystone = nova_test_harness::https::serve_fixed(
        &issued.cert_pem,
        &issued.key_pem,
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await
    .expect("the https Keystone");

    let mut nova = example(&ns);
    nova.spec.keystone_endpoint = format!("https://{KEYSTONE_AUTHORITY}/v3");
    nova.spec.tls = Some(NovaTLSSpec {
        ca_bundle_secret_ref: SecretRefSpec {
            name: "keystone-ca".into(),
            key: None,
        },
    });
    create_published(&client, &nova).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    put_secret(&secrets, "keystone-ca", &[("ca.crt", other.cert_pem())]).await;
    put_secret(&secrets, "nova-keystone", &[("password", PASSWORD)]).await;
    let mut contract = contract(PASSWORD).to_vec();
    contract.push(("endpoint-ca.crt", other.cert_pem()));
    put_secret(&secrets, "nova-compute-config", &contract).await;
    mark_mirror(&secrets, "nova-compute-config").await;

    let nodes: Api<Node> = Api::all(client.clone());
    let label = format!("tls-{ns}");
    create_zoned_node(&nodes, &format!("{ns}-node"), &label, "az1").await;
    let routes = BTreeMap::from([(KEYSTONE_AUTHORITY.to_owned(), keystone)]);
    start_novacompute_for_pools_in(
        client.clone(),
        &ns,
        Registry::default().route_services(routes),
    )
    .await;
    let pools: Api<NovaCompute> = Api::namespaced(client.clone(), &ns);
    pools
        .create(
            &PostParams::default(),
            &pool(&ns, "pool-tls", "nova", json!({POOL_LABEL: label})),
        )
        .await
        .expect("create the pool");

    let refused = pool_reason_for(
        &pools,
        "pool-tls",
        "AggregatesReady",
        "ComputeAPIError",
        WAIT,
    )
    .await
    .expect("the pool reports the TLS failure");
    assert!(
        refused.contains(&format!("TLS with {KEYSTONE_AUTHORITY}"))
            && refused.contains("UnknownIssuer"),
        "the endpoint and the TLS error: {refused}"
    );
    assert!(!refused.contains(PASSWORD), "{refused}");

    put_secret(&secrets, "keystone-ca", &[("ca.crt", issuing.cert_pem())]).await;
    let aggregates = |p: &NovaCompute| {
        condition_of(p, "AggregatesReady")
            .map(|(_, _, message)| message.to_owned())
            .unwrap_or_default()
    };
    let verified = wait_pool_for(
        &pools,
        "pool-tls",
        "AggregatesReady names Keystone's answer",
        WAIT,
        |p| aggregates(p).contains("HTTP 503"),
    )
    .await
    .expect("the handshake passes with the issuing CA");
    assert!(
        !aggregates(&verified).contains("TLS with"),
        "{}",
        aggregates(&verified)
    );
}
