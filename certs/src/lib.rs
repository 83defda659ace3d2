//! Test and development certificates generated in-process with rcgen.
//!
//! The test control plane needs a CA, an API server serving certificate, an admin client
//! certificate and webhook serving certificates; a developer running the webhook locally needs
//! the same serving bundle on disk. Keeping the recipe in one crate means every caller gets the
//! extensions Go's TLS stack insists on (IP SANs for `https://127.0.0.1`, serverAuth/clientAuth
//! EKUs, CA basic constraints), which `openssl` one-liners easily get wrong.
//!
//! Keys are ECDSA P-256 (ring cannot generate RSA keys); Go, rustls and kube-apiserver's
//! service-account signer all accept them.

use std::fs;
use std::io;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// Why a certificate could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("writing {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// A PEM certificate with its PEM (PKCS#8) private key.
#[derive(Clone, Debug)]
pub struct IssuedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A self-signed certificate authority that can issue serving and client certificates.
pub struct CertificateAuthority {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl CertificateAuthority {
    /// Creates a new CA with the given common name and a fresh key.
    pub fn new(common_name: &str) -> Result<Self, CertError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        let key_pem = key.serialize_pem();
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate (what goes into a `caBundle` or `certificate-authority-data`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key (kube-controller-manager's cluster signer needs it).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Issues a serving certificate (EKU serverAuth). Each SAN that parses as an IP address
    /// becomes an IP SAN, anything else a DNS SAN: Go ignores the CN, so a URL host must be
    /// among them.
    pub fn issue_serving(&self, common_name: &str, sans: &[&str]) -> Result<IssuedCert, CertError> {
        let mut params = CertificateParams::new(owned(sans))?;
        params.distinguished_name = dn(common_name, &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        self.sign(params)
    }

    /// Issues a client certificate (EKU clientAuth). Kubernetes reads the user from the CN and
    /// the groups from the organizations, so `("admin", &["system:masters"])` is a cluster admin.
    pub fn issue_client(
        &self,
        common_name: &str,
        organizations: &[&str],
    ) -> Result<IssuedCert, CertError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(common_name, organizations);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Result<IssuedCert, CertError> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A bare signing key pair, e.g. the service-account token signer.
#[derive(Clone, Debug)]
pub struct SigningKeyPair {
    /// PKCS#8 private key.
    pub private_pem: String,
    /// SubjectPublicKeyInfo public key.
    pub public_pem: String,
}

/// Generates a fresh signing key pair.
pub fn signing_key_pair() -> Result<SigningKeyPair, CertError> {
    let key = KeyPair::generate()?;
    Ok(SigningKeyPair {
        private_pem: key.serialize_pem(),
        public_pem: key.public_key_pem(),
    })
}

/// A serving certificate with the CA that signed it: what a webhook needs, and what its
/// registration's `caBundle` must contain.
#[derive(Clone, Debug)]
pub struct ServingBundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl ServingBundle {
    /// Creates a throw-away CA and a serving certificate for `sans` signed by it.
    pub fn generate(common_name: &str, sans: &[&str]) -> Result<Self, CertError> {
        let ca = CertificateAuthority::new(&format!("{common_name} CA"))?;
        let leaf = ca.issue_serving(common_name, sans)?;
        Ok(Self {
            ca_pem: ca.cert_pem().to_owned(),
            cert_pem: leaf.cert_pem,
            key_pem: leaf.key_pem,
        })
    }

    /// Writes `ca.crt`, `tls.crt` and `tls.key` (mode 0600) into `dir`, creating it: the key
    /// names of a cert-manager/`kubernetes.io/tls` Secret, so the webhook reads the same layout
    /// locally and in a cluster.
    pub fn write_to_dir(&self, dir: &Path) -> Result<(), CertError> {
        fs::create_dir_all(dir).map_err(|source| io_err(dir, source))?;
        write_file(&dir.join("ca.crt"), &self.ca_pem, false)?;
        write_file(&dir.join("tls.crt"), &self.cert_pem, false)?;
        write_file(&dir.join("tls.key"), &self.key_pem, true)?;
        Ok(())
    }
}

/// Writes `contents` to `path`; `private` files get mode 0600 from creation on.
pub fn write_file(path: &Path, contents: &str, private: bool) -> Result<(), CertError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    if private {
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|source| io_err(path, source))?;
    file.write_all(contents.as_bytes())
        .map_err(|source| io_err(path, source))
}

fn io_err(path: &Path, source: io::Error) -> CertError {
    CertError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn dn(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

fn owned(sans: &[&str]) -> Vec<String> {
    sans.iter().map(|s| (*s).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_bundle_is_written_with_a_private_key_file() {
        let bundle = ServingBundle::generate("webhook", &["127.0.0.1", "localhost"]).unwrap();
        assert!(bundle.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(bundle.key_pem.contains("PRIVATE KEY"));
        let dir = tempfile::tempdir().unwrap();
        bundle.write_to_dir(dir.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            fs::read_to_string(dir.path().join("tls.crt")).unwrap(),
            bundle.cert_pem
        );
    }

    #[test]
    fn a_ca_issues_distinct_client_and_serving_certs() {
        let ca = CertificateAuthority::new("ca").unwrap();
        let client = ca.issue_client("admin", &["system:masters"]).unwrap();
        let server = ca.issue_serving("apiserver", &["127.0.0.1"]).unwrap();
        assert_ne!(client.cert_pem, server.cert_pem);
        assert_ne!(client.key_pem, server.key_pem);
    }
}
