//! Which certificate authorities an https Keystone, compute or Placement endpoint is verified
//! against: the system's roots (the image's CA store), plus the bundle the controller is
//! started with (`--ca-file`, the chart's `controller.trust`), plus the Nova's own
//! `spec.tls` bundle for the calls a pool makes on that Nova's cloud. Each adds to the ones
//! before; none replaces them.

use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// PEM certificates trusted besides the system's roots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaBundle {
    certificates: Arc<[CertificateDer<'static>]>,
}

impl CaBundle {
    /// The certificates of a PEM text; `what` names its source in the error, which never
    /// quotes the text.
    pub fn from_pem(what: &str, pem: &[u8]) -> Result<Self, String> {
        let certificates = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{what} is not a PEM certificate bundle: {e}"))?;
        if certificates.is_empty() {
            return Err(format!("{what} holds no PEM certificate"));
        }
        Ok(Self {
            certificates: certificates.into(),
        })
    }

    /// The certificates of a PEM file, for `--ca-file`.
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let what = path.display().to_string();
        let pem = std::fs::read(path).map_err(|e| format!("reading {what}: {e}"))?;
        Self::from_pem(&what, &pem)
    }

    fn certificates(&self) -> impl Iterator<Item = &CertificateDer<'static>> {
        self.certificates.iter()
    }

    /// How many certificates the bundle holds.
    pub fn len(&self) -> usize {
        self.certificates.len()
    }

    /// Whether it holds none (never, once built).
    pub fn is_empty(&self) -> bool {
        self.certificates.is_empty()
    }
}

/// The system's roots, read once per process.
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// How many system roots this process found (the image's CA store), for the start-up log.
pub fn system_root_count() -> usize {
    system_roots().len()
}

/// What one transport trusts: the system's roots and the extra bundles, in order.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    extra: Vec<CaBundle>,
}

impl Trust {
    /// The system's roots and `bundle`, when there is one.
    pub fn system_and(bundle: Option<CaBundle>) -> Self {
        Self {
            extra: bundle.into_iter().collect(),
        }
    }

    /// This trust, and `bundle` besides.
    pub fn and(&self, bundle: &CaBundle) -> Self {
        let mut extra = self.extra.clone();
        extra.push(bundle.clone());
        Self { extra }
    }

    /// TLS 1.2/1.3 over the ring provider, verified against these roots. A certificate the
    /// verifier cannot use fails here, naming none of it.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut roots = rustls::RootCertStore::empty();
        // A malformed system root is skipped (the store holds what it can use); an extra
        // bundle is the operator's input, so a certificate of it that cannot be a root is
        // reported.
        let _ = roots.add_parsable_certificates(system_roots().iter().cloned());
        for certificate in self.extra.iter().flat_map(CaBundle::certificates) {
            roots
                .add(certificate.clone())
                .map_err(|e| format!("a trusted CA certificate cannot be used: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_needs_at_least_one_pem_certificate_and_never_quotes_its_text() {
        let error = CaBundle::from_pem("Secret ns/ca key ca.crt", b"not a certificate")
            .expect_err("no certificate");
        assert_eq!(error, "Secret ns/ca key ca.crt holds no PEM certificate");
        let ca = nova_certs::CertificateAuthority::new("test CA").expect("a CA");
        let bundle = CaBundle::from_pem("the bundle", ca.cert_pem().as_bytes()).expect("a bundle");
        assert_eq!(bundle.certificates().count(), 1);
        let trust = Trust::system_and(None).and(&bundle);
        assert!(trust.client_config().is_ok());
    }
}
