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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _,
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
    /// PEM or DER that does not hold what it should; the message never quotes key material.
    #[error("{0}")]
    Invalid(String),
}

/// When a certificate is valid: from `not_before` to `not_after`, both inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Validity {
    /// Valid from `now` for `life` (X.509 stores whole seconds: both ends are truncated).
    pub fn starting(now: SystemTime, life: Duration) -> Self {
        let not_before = whole_seconds(now);
        Self {
            not_before,
            not_after: not_before + Duration::from_secs(life.as_secs()),
        }
    }

    /// The whole life.
    pub fn life(&self) -> Duration {
        self.not_after
            .duration_since(self.not_before)
            .unwrap_or_default()
    }

    /// What is left at `now` (zero once expired).
    pub fn remaining(&self, now: SystemTime) -> Duration {
        self.not_after.duration_since(now).unwrap_or_default()
    }

    /// Whether `now` is past `fraction` of the life (or outside it altogether).
    pub fn past(&self, fraction: f64, now: SystemTime) -> bool {
        if now < self.not_before {
            return true;
        }
        let elapsed = now.duration_since(self.not_before).unwrap_or_default();
        elapsed.as_secs_f64() >= self.life().as_secs_f64() * fraction
    }

    fn apply(&self, params: &mut CertificateParams) {
        params.not_before = self.not_before.into();
        params.not_after = self.not_after.into();
    }
}

fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// One certificate of a PEM text: its own PEM block, its DER and its validity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PemCert {
    pub pem: String,
    pub der: Vec<u8>,
    pub validity: Validity,
}

impl PemCert {
    /// Whether `issuer`'s key signed this certificate.
    pub fn issued_by(&self, issuer: &PemCert) -> bool {
        let (Ok((_, leaf)), Ok((_, ca))) = (
            x509_parser::parse_x509_certificate(&self.der),
            x509_parser::parse_x509_certificate(&issuer.der),
        ) else {
            return false;
        };
        leaf.verify_signature(Some(ca.public_key())).is_ok()
    }

    /// Whether `key_pem` is the private key of this certificate. A key that does not parse
    /// does not match.
    pub fn matches_key(&self, key_pem: &str) -> bool {
        let Ok(key) = KeyPair::from_pem(key_pem) else {
            return false;
        };
        x509_parser::parse_x509_certificate(&self.der)
            .is_ok_and(|(_, cert)| cert.public_key().raw == key.subject_public_key_info())
    }
}

/// Every certificate of a PEM text, in order. Fails on a block that does not parse, and on a
/// text without a certificate.
pub fn parse_certificates(pem: &str) -> Result<Vec<PemCert>, CertError> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(BEGIN) {
        let Some(len) = rest[start..].find(END) else {
            return Err(CertError::Invalid("an unterminated PEM certificate".into()));
        };
        let block = &rest[start..start + len + END.len()];
        rest = &rest[start + len + END.len()..];
        let (_, parsed) = x509_parser::pem::parse_x509_pem(block.as_bytes())
            .map_err(|_| CertError::Invalid("a PEM block that does not parse".into()))?;
        let (_, cert) = x509_parser::parse_x509_certificate(&parsed.contents)
            .map_err(|_| CertError::Invalid("a certificate that does not parse".into()))?;
        let at = |t: &x509_parser::time::ASN1Time| {
            let secs = t.timestamp();
            UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0))
        };
        let validity = Validity {
            not_before: at(&cert.validity().not_before),
            not_after: at(&cert.validity().not_after),
        };
        out.push(PemCert {
            pem: format!("{block}\n"),
            der: parsed.contents.clone(),
            validity,
        });
    }
    if out.is_empty() {
        return Err(CertError::Invalid("no PEM certificate".into()));
    }
    Ok(out)
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
        Self::generate(common_name, None)
    }

    /// Creates a new CA valid for `validity` only.
    pub fn new_valid(common_name: &str, validity: Validity) -> Result<Self, CertError> {
        Self::generate(common_name, Some(validity))
    }

    /// The CA stored as `cert_pem` (its first certificate) and `key_pem`, refused when the key
    /// is not the certificate's.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, CertError> {
        let cert = parse_certificates(cert_pem)?.remove(0);
        if !cert.matches_key(key_pem) {
            return Err(CertError::Invalid(
                "the CA key is not the CA certificate's".into(),
            ));
        }
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_der(&cert.der.as_slice().into(), key)?;
        Ok(Self {
            cert_pem: cert.pem,
            key_pem: key_pem.to_owned(),
            issuer,
        })
    }

    fn generate(common_name: &str, validity: Option<Validity>) -> Result<Self, CertError> {
        Self::self_signed(common_name, validity, KeyPair::generate()?)
    }

    /// This CA renewed for `validity`: a new certificate with the same subject and key (so
    /// the same key identifier), as cert-manager renews a CA whose key never rotates. A
    /// certificate the old one signed verifies against the new one.
    pub fn renewed(&self, validity: Validity) -> Result<Self, CertError> {
        let cert = parse_certificates(&self.cert_pem)?.remove(0);
        let (_, x509) = x509_parser::parse_x509_certificate(&cert.der)
            .map_err(|e| CertError::Invalid(format!("the CA certificate: {e}")))?;
        let common_name = x509
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .ok_or_else(|| CertError::Invalid("the CA certificate has no common name".into()))?
            .to_owned();
        Self::self_signed(
            &common_name,
            Some(validity),
            KeyPair::from_pem(&self.key_pem)?,
        )
    }

    fn self_signed(
        common_name: &str,
        validity: Option<Validity>,
        key: KeyPair,
    ) -> Result<Self, CertError> {
        let mut params = CertificateParams::default();
        if let Some(v) = validity {
            v.apply(&mut params);
        }
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
        self.serving(common_name, sans, None)
    }

    /// Issues a serving certificate valid for `validity` only.
    pub fn issue_serving_valid(
        &self,
        common_name: &str,
        sans: &[&str],
        validity: Validity,
    ) -> Result<IssuedCert, CertError> {
        self.serving(common_name, sans, Some(validity))
    }

    fn serving(
        &self,
        common_name: &str,
        sans: &[&str],
        validity: Option<Validity>,
    ) -> Result<IssuedCert, CertError> {
        let mut params = CertificateParams::new(owned(sans))?;
        if let Some(v) = validity {
            v.apply(&mut params);
        }
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
    fn a_stored_ca_issues_certificates_of_the_given_validity_that_verify_against_it() {
        let now = SystemTime::now();
        let life = Validity::starting(now, Duration::from_secs(3600));
        let ca = CertificateAuthority::new_valid("ca", life).unwrap();
        let again = CertificateAuthority::from_pem(ca.cert_pem(), ca.key_pem()).unwrap();
        let leaf_life = Validity::starting(now, Duration::from_secs(60));
        let leaf = again
            .issue_serving_valid("webhook", &["127.0.0.1"], leaf_life)
            .unwrap();
        let leaf_cert = parse_certificates(&leaf.cert_pem).unwrap().remove(0);
        let ca_cert = parse_certificates(ca.cert_pem()).unwrap().remove(0);
        assert_eq!(leaf_cert.validity, leaf_life);
        assert_eq!(ca_cert.validity, life);
        assert!(leaf_cert.issued_by(&ca_cert));
        assert!(leaf_cert.matches_key(&leaf.key_pem));
        assert!(!leaf_cert.matches_key(ca.key_pem()));
        let other = CertificateAuthority::new("other").unwrap();
        let other_cert = parse_certificates(other.cert_pem()).unwrap().remove(0);
        assert!(!leaf_cert.issued_by(&other_cert));
        // A key that is not the certificate's is refused, and the error quotes no key.
        let err = CertificateAuthority::from_pem(ca.cert_pem(), other.key_pem())
            .err()
            .unwrap()
            .to_string();
        assert!(!err.contains("PRIVATE"), "{err}");
        // A bundle parses into its certificates, in order.
        let bundle = format!("{}{}", ca.cert_pem(), other.cert_pem());
        let both = parse_certificates(&bundle).unwrap();
        assert_eq!(both, vec![ca_cert, other_cert]);
        assert!(parse_certificates("garbage").is_err());
        assert!(life.past(2.0 / 3.0, now + Duration::from_secs(2400)));
        assert!(!life.past(2.0 / 3.0, now + Duration::from_secs(2000)));
    }

    #[test]
    fn a_ca_renewed_with_its_key_still_verifies_what_it_signed_before() {
        let now = SystemTime::now();
        let ca = CertificateAuthority::new_valid(
            "nova-webhook-ca",
            Validity::starting(now, Duration::from_secs(60)),
        )
        .unwrap();
        let before = ca.issue_serving("webhook", &["127.0.0.1"]).unwrap();
        let longer = Validity::starting(now, Duration::from_secs(3600));
        let renewed = ca.renewed(longer).unwrap();
        assert_ne!(renewed.cert_pem(), ca.cert_pem(), "a new certificate");
        assert_eq!(renewed.key_pem(), ca.key_pem(), "the same key");
        let renewed_cert = parse_certificates(renewed.cert_pem()).unwrap().remove(0);
        assert_eq!(renewed_cert.validity, longer);
        let subject = |pem: &str| {
            let der = parse_certificates(pem).unwrap().remove(0).der;
            let (_, x509) = x509_parser::parse_x509_certificate(&der).unwrap();
            x509.subject().to_string()
        };
        assert_eq!(subject(renewed.cert_pem()), subject(ca.cert_pem()));
        let leaf = parse_certificates(&before.cert_pem).unwrap().remove(0);
        assert!(
            leaf.issued_by(&renewed_cert),
            "signed before, verified after"
        );
        let after = renewed.issue_serving("webhook", &["127.0.0.1"]).unwrap();
        let old_cert = parse_certificates(ca.cert_pem()).unwrap().remove(0);
        let after = parse_certificates(&after.cert_pem).unwrap().remove(0);
        assert!(after.issued_by(&old_cert), "signed after, verified before");
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
