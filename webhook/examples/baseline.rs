//! The load benchmark's baseline: the same TLS stack, limits and router shape as nova-webhook,
//! answering every POST with a constant allowed AdmissionReview.
//!
//! `cargo run --release -p nova-webhook --example baseline -- <addr> <tls.crt> <tls.key>`

use std::sync::Arc;

use axum::Router;
use axum::routing::post;
use nova_webhook::limits::Limits;
use nova_webhook::metrics::Metrics;
use nova_webhook::server;
use nova_webhook::tls::{self, CertStore};

const RESPONSE: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}"#;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, cert, key] = args.as_slice() else {
        anyhow::bail!("usage: baseline <addr> <tls.crt> <tls.key>");
    };
    let store: Arc<CertStore> = CertStore::new(cert, key);
    store.reload()?;
    let router = Router::new().route(
        "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
        post(|body: axum::body::Bytes| async move {
            drop(body);
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                RESPONSE,
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr.as_str()).await?;
    server::serve_tls(
        listener,
        tls::server_config(store)?,
        router,
        Limits::default(),
        Arc::new(Metrics::new()?),
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    )
    .await;
    Ok(())
}
