//! A loopback HTTPS server that answers every request with one fixed response, for the tests
//! that prove what a client trusts: the TLS handshake is real (rustls, the certificate the test
//! issued), the answer is not a service.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::control_plane::invalid;
use crate::{Result, io_err};

/// Serves `answer` (a whole HTTP/1.1 response) over TLS with the PEM `cert_pem` and `key_pem`
/// on a loopback port, until the test process ends; returns the address.
pub async fn serve_fixed(
    cert_pem: &str,
    key_pem: &str,
    answer: &'static str,
) -> Result<SocketAddr> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid("reading the serving certificate", e))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| invalid("reading the serving key", e))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| invalid("configuring TLS", e))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| invalid("configuring TLS", e))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io_err("binding a loopback port"))?;
    let address = listener
        .local_addr()
        .map_err(io_err("reading the bound address"))?;
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to answer.
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut request = vec![0u8; 16 * 1024];
                let _ = tls.read(&mut request).await;
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    Ok(address)
}
