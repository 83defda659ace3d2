//! The pure decisions of the self-signed mode: what the Secret must hold at a time, and when a
//! new certificate may be served.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use nova_certs::{CertError, CertificateAuthority, PemCert, Validity, parse_certificates};

use super::*;

/// How long certificates live and which names the serving certificate carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// The CA's life.
    pub ca: Duration,
    /// The serving certificate's life.
    pub serving: Duration,
    /// The serving certificate's DNS names and IP addresses.
    pub names: Vec<String>,
}

impl Lifetimes {
    /// Refused when the lives do not work together: a CA rolled at two-thirds of its life must
    /// outlive every serving certificate it signed (one issued just before the roll lives a
    /// serving life), so its last third must hold a serving life.
    pub fn check(&self) -> Result<(), String> {
        if self.names.is_empty() {
            return Err("the serving certificate needs at least one name".into());
        }
        if self.serving < Duration::from_secs(3) {
            return Err("the serving certificate must live at least 3 seconds".into());
        }
        if self.ca.as_secs_f64() * (1.0 - RENEW_AFTER) < self.serving.as_secs_f64() {
            return Err(format!(
                "the CA ({} s) must live at least three times as long as the serving certificate ({} s)",
                self.ca.as_secs(),
                self.serving.as_secs()
            ));
        }
        Ok(())
    }

    fn names(&self) -> String {
        self.names.join(",")
    }

    fn validity(life: Duration, now: SystemTime) -> Validity {
        let backdate = MAX_BACKDATE.min(life / 10);
        Validity::starting(now - backdate, life)
    }
}

/// What the Secret holds or should hold.
#[derive(Clone, PartialEq, Eq)]
pub struct Material {
    /// `ca.crt`.
    pub bundle: String,
    /// `ca.key`.
    pub ca_key: String,
    /// `tls.crt`.
    pub cert: String,
    /// `tls.key`.
    pub key: String,
    /// The names annotation.
    pub names: String,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("bundle", &self.bundle)
            .field("cert", &self.cert)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Material {
    /// What a Secret's data and annotations hold; a missing or non-UTF-8 key reads as empty.
    pub fn from_secret(secret: &Secret) -> Self {
        let data = secret.data.clone().unwrap_or_default();
        let text = |key: &str| {
            data.get(key)
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
                .unwrap_or_default()
        };
        let names = secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NAMES_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        Self {
            bundle: text(CA_BUNDLE_KEY),
            ca_key: text(CA_KEY_KEY),
            cert: text(CERT_KEY),
            key: text(KEY_KEY),
            names,
        }
    }

    /// The Secret's data.
    pub fn data(&self) -> BTreeMap<String, ByteString> {
        [
            (CA_BUNDLE_KEY, &self.bundle),
            (CA_KEY_KEY, &self.ca_key),
            (CERT_KEY, &self.cert),
            (KEY_KEY, &self.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect()
    }
}

/// Why the Secret is (re)written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No Secret.
    Missing,
    /// The CA cannot be used (a message that names what, never quoting a key).
    BrokenCa(String),
    /// The CA is past two-thirds of its life: a new one signs from now on.
    CaDue,
    /// A CA of the bundle expired and is dropped.
    ExpiredCaDropped,
    /// The serving certificate cannot be used (missing, unparsable, its key not its own,
    /// signed by no CA of the bundle, or issued for other names).
    BrokenServing(String),
    /// The serving certificate is past two-thirds of its life.
    ServingDue,
}

/// What to do with the Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// It holds what it should.
    Keep,
    /// Write this, for these reasons.
    Write(Material, Vec<Reason>),
}

/// Decides what the Secret should hold at `now`. `stored` is its content (`None`: no Secret);
/// `trusted` the CAs the webhook configurations trust now, kept in a regenerated bundle so the
/// serving certificates of the CA being replaced stay trusted while replicas still serve them.
pub fn plan(
    stored: Option<&Material>,
    trusted: &[PemCert],
    lifetimes: &Lifetimes,
    now: SystemTime,
) -> Result<Plan, CertError> {
    let mut reasons = Vec::new();
    let empty = Material {
        bundle: String::new(),
        ca_key: String::new(),
        cert: String::new(),
        key: String::new(),
        names: String::new(),
    };
    let stored = match stored {
        Some(s) => s,
        None => {
            reasons.push(Reason::Missing);
            &empty
        }
    };
    let unexpired = |c: &PemCert| c.validity.not_after > now;
    let old_bundle: Vec<PemCert> = parse_certificates(&stored.bundle).unwrap_or_default();
    let stored_ca = CertificateAuthority::from_pem(&stored.bundle, &stored.ca_key).and_then(|ca| {
        match old_bundle.first() {
            Some(first) => Ok((ca, first.clone())),
            None => Err(CertError::Invalid("no CA certificate".into())),
        }
    });

    // The signing CA and the bundle.
    let (signer, mut bundle) = match stored_ca {
        Ok((ca, first)) if unexpired(&first) && !first.validity.past(RENEW_AFTER, now) => {
            (ca, old_bundle.clone())
        }
        Ok(_) => {
            reasons.push(Reason::CaDue);
            let ca = new_ca(lifetimes, now)?;
            let mut bundle = parse_certificates(ca.cert_pem())?;
            bundle.extend(old_bundle.iter().cloned());
            (ca, bundle)
        }
        Err(e) => {
            if !reasons.contains(&Reason::Missing) {
                reasons.push(Reason::BrokenCa(e.to_string()));
            }
            let ca = new_ca(lifetimes, now)?;
            let mut bundle = parse_certificates(ca.cert_pem())?;
            bundle.extend(old_bundle.iter().chain(trusted).cloned());
            (ca, bundle)
        }
    };
    // Drop the expired CAs and the duplicates (the signing CA stays first).
    let before = bundle.len();
    let mut seen = std::collections::HashSet::new();
    bundle.retain(|c| unexpired(c) && seen.insert(c.der.clone()));
    let dropped_expired = old_bundle.iter().any(|c| !unexpired(c));
    if bundle.len() < before && dropped_expired && reasons.is_empty() {
        reasons.push(Reason::ExpiredCaDropped);
    }

    // The serving certificate.
    let serving = match serving_problem(stored, &bundle, lifetimes, now) {
        None => None,
        Some(reason) => {
            // A missing Secret is reason enough.
            if !reasons.contains(&Reason::Missing) {
                reasons.push(reason);
            }
            let signer_cert = &bundle[0];
            let mut validity = Lifetimes::validity(lifetimes.serving, now);
            validity.not_after = validity.not_after.min(signer_cert.validity.not_after);
            let names: Vec<&str> = lifetimes.names.iter().map(String::as_str).collect();
            Some(signer.issue_serving_valid("nova-webhook", &names, validity)?)
        }
    };

    if reasons.is_empty() {
        return Ok(Plan::Keep);
    }
    let (cert, key) = match serving {
        Some(issued) => (issued.cert_pem, issued.key_pem),
        None => (stored.cert.clone(), stored.key.clone()),
    };
    Ok(Plan::Write(
        Material {
            bundle: bundle.iter().map(|c| c.pem.as_str()).collect(),
            ca_key: signer.key_pem().to_owned(),
            cert,
            key,
            names: lifetimes.names(),
        },
        reasons,
    ))
}

pub(super) fn new_ca(
    lifetimes: &Lifetimes,
    now: SystemTime,
) -> Result<CertificateAuthority, CertError> {
    CertificateAuthority::new_valid("nova-webhook CA", Lifetimes::validity(lifetimes.ca, now))
}

/// Why the stored serving certificate cannot stay, if it cannot.
pub(super) fn serving_problem(
    stored: &Material,
    bundle: &[PemCert],
    lifetimes: &Lifetimes,
    now: SystemTime,
) -> Option<Reason> {
    let broken = |what: &str| Some(Reason::BrokenServing(what.to_owned()));
    let Ok(certs) = parse_certificates(&stored.cert) else {
        return broken("no serving certificate that parses");
    };
    let leaf = &certs[0];
    if !leaf.matches_key(&stored.key) {
        return broken("the serving key is not the certificate's");
    }
    if !bundle.iter().any(|ca| leaf.issued_by(ca)) {
        return broken("the serving certificate is signed by no CA of the bundle");
    }
    if stored.names != lifetimes.names() {
        return broken("the serving certificate was issued for other names");
    }
    if leaf.validity.not_after <= now || leaf.validity.past(RENEW_AFTER, now) {
        return Some(Reason::ServingDue);
    }
    None
}

/// Every webhook's `caBundle` in both configurations, the mutating ones first (empty where
/// none is set).
pub fn injected_bundles(
    mutating: &MutatingWebhookConfiguration,
    validating: &ValidatingWebhookConfiguration,
) -> Vec<Vec<u8>> {
    let configs = mutating
        .webhooks
        .iter()
        .flatten()
        .map(|w| &w.client_config)
        .chain(
            validating
                .webhooks
                .iter()
                .flatten()
                .map(|w| &w.client_config),
        );
    configs
        .map(|c| {
            c.ca_bundle
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default()
        })
        .collect()
}

/// The CAs of a `caBundle`; one that does not parse trusts nothing.
pub fn bundle_certs(pem: &[u8]) -> Vec<PemCert> {
    std::str::from_utf8(pem)
        .ok()
        .and_then(|s| parse_certificates(s).ok())
        .unwrap_or_default()
}

/// Whether a new serving certificate may replace the one served: always when nothing usable
/// is served; otherwise once the CA that signed the new one has been trusted by both
/// configurations for `propagation` (the API server reads its configurations through an
/// informer: a certificate served the instant its CA is injected can be refused).
pub fn may_serve(
    served: Option<&PemCert>,
    issuer_trusted_since: Option<Instant>,
    propagation: Duration,
    now: SystemTime,
    instant: Instant,
) -> bool {
    match served {
        None => true,
        Some(s) if s.validity.not_after <= now => true,
        Some(_) => issuer_trusted_since.is_some_and(|t| instant.duration_since(t) >= propagation),
    }
}
