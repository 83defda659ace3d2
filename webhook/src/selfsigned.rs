//! The self-signed mode: the webhook keeps its own CA and serving certificate in one Secret,
//! renews them, and injects the CA bundle into its webhook configurations.
//!
//! The decisions are pure ([`plan`], [`Servable`]): given what the Secret holds, the CAs the
//! configurations already trust and the time, what to write and what to serve. The shell
//! ([`Manager`]) reads the Secret and both configurations on every sync (each request bounded
//! by a timeout), writes only what the plan says (create, or replace under the resourceVersion
//! it read, so replicas converge on one Secret: the loser of a race gets a conflict, re-reads
//! and keeps the winner's certificates), patches a `caBundle` only where it differs, and hands
//! the pair to the [`CertStore`] the TLS acceptor resolves through.
//!
//! The Secret (`kubernetes.io/tls`): `ca.crt` the CA bundle, the signing CA first and then
//! every earlier CA still valid (a serving certificate they signed may still be served
//! somewhere); `ca.key` the signing CA's key; `tls.crt`, `tls.key` the serving pair. The names
//! the serving certificate was issued for are in an annotation, so a change of names reissues.
//!
//! Never a private key in a log line or an error: [`Material`]'s `Debug` leaves the keys out,
//! and the errors of `nova_certs` never quote key material.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use nova_certs::{CertError, CertificateAuthority, PemCert, Validity, parse_certificates};

use crate::metrics::Metrics;
use crate::tls::CertStore;

/// The CA bundle: the signing CA first, then the earlier CAs still valid.
pub const CA_BUNDLE_KEY: &str = "ca.crt";
/// The signing CA's private key.
pub const CA_KEY_KEY: &str = "ca.key";
/// The serving certificate.
pub const CERT_KEY: &str = "tls.crt";
/// The serving certificate's private key.
pub const KEY_KEY: &str = "tls.key";
/// The names the serving certificate was issued for, comma-separated.
pub const NAMES_ANNOTATION: &str = "nova.openstack.c5c3.io/serving-names";
/// The share of its life after which a certificate is renewed.
pub const RENEW_AFTER: f64 = 2.0 / 3.0;
/// The longest a new certificate is back-dated, for an API server whose clock is behind.
const MAX_BACKDATE: Duration = Duration::from_secs(60);

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

fn new_ca(lifetimes: &Lifetimes, now: SystemTime) -> Result<CertificateAuthority, CertError> {
    CertificateAuthority::new_valid("nova-webhook CA", Lifetimes::validity(lifetimes.ca, now))
}

/// Why the stored serving certificate cannot stay, if it cannot.
fn serving_problem(
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

/// The self-signed mode's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The namespace of the Secret.
    pub namespace: String,
    /// The Secret.
    pub secret: String,
    /// The name of both the Mutating and the Validating configuration.
    pub configuration: String,
    /// The lives and names.
    pub lifetimes: Lifetimes,
    /// Time between syncs.
    pub interval: Duration,
    /// The bound of every API request.
    pub request_timeout: Duration,
    /// How long a new CA must be trusted before a certificate it signed replaces one served.
    pub propagation: Duration,
}

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// An API request failed.
    #[error("{what}: {source}")]
    Api {
        /// The request.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// An API request took longer than the timeout.
    #[error("{0}: no answer within the request timeout")]
    Timeout(String),
    /// Another replica wrote the Secret first; re-read shortly.
    #[error("the Secret changed since it was read")]
    Conflict,
    /// Certificates could not be made.
    #[error(transparent)]
    Cert(#[from] CertError),
    /// The pair could not be served.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// Keeps the Secret, the configurations and the served pair current.
pub struct Manager {
    settings: Settings,
    secrets: Api<Secret>,
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    store: Arc<CertStore>,
    metrics: Arc<Metrics>,
    /// When each CA (DER) was first seen trusted by both configurations.
    trusted_since: HashMap<Vec<u8>, Instant>,
}

impl Manager {
    /// A manager writing through `client`; the store waits for trust before it reports ready.
    pub fn new(
        client: kube::Client,
        settings: Settings,
        store: Arc<CertStore>,
        metrics: Arc<Metrics>,
    ) -> Self {
        store.require_trust();
        Self {
            secrets: Api::namespaced(client.clone(), &settings.namespace),
            mutating: Api::all(client.clone()),
            validating: Api::all(client),
            settings,
            store,
            metrics,
            trusted_since: HashMap::new(),
        }
    }

    async fn bounded<T>(
        &self,
        what: &str,
        request: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, SyncError> {
        match tokio::time::timeout(self.settings.request_timeout, request).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(kube::Error::Api(s))) if s.code == 409 => Err(SyncError::Conflict),
            Ok(Err(source)) => Err(SyncError::Api {
                what: what.to_owned(),
                source,
            }),
            Err(_) => Err(SyncError::Timeout(what.to_owned())),
        }
    }

    /// One pass: read, renew if due, inject, serve.
    pub async fn sync(&mut self) -> Result<(), SyncError> {
        let name = self.settings.configuration.clone();
        let mutating = self
            .bounded(
                "reading the MutatingWebhookConfiguration",
                self.mutating.get_opt(&name),
            )
            .await?;
        let validating = self
            .bounded(
                "reading the ValidatingWebhookConfiguration",
                self.validating.get_opt(&name),
            )
            .await?;
        // A configuration not there yet (helm creates them after the Deployment) holds the
        // Secret back from nothing: it is made and served, and the pod stays unready.
        let empty_mutating = MutatingWebhookConfiguration::default();
        let empty_validating = ValidatingWebhookConfiguration::default();
        let trusted: Vec<PemCert> = injected_bundles(
            mutating.as_ref().unwrap_or(&empty_mutating),
            validating.as_ref().unwrap_or(&empty_validating),
        )
        .iter()
        .flat_map(|b| bundle_certs(b))
        .collect();

        let secret_name = self.settings.secret.clone();
        let secret = self
            .bounded(
                "reading the certificate Secret",
                self.secrets.get_opt(&secret_name),
            )
            .await?;
        let stored = secret.as_ref().map(Material::from_secret);
        let now = SystemTime::now();
        let material = match plan(stored.as_ref(), &trusted, &self.settings.lifetimes, now)? {
            // plan answers Keep only for a Secret that exists.
            Plan::Keep => stored.ok_or_else(|| CertError::Invalid("no Secret to keep".into()))?,
            Plan::Write(material, reasons) => {
                self.write(secret, &material).await?;
                tracing::info!(secret = %secret_name, ?reasons, "certificate Secret written");
                for reason in &reasons {
                    let what = match reason {
                        Reason::Missing | Reason::BrokenCa(_) => "regenerated",
                        Reason::CaDue => "ca",
                        Reason::ServingDue | Reason::BrokenServing(_) => "serving",
                        Reason::ExpiredCaDropped => continue,
                    };
                    self.metrics.certificate_renewed(what);
                }
                material
            }
        };

        // Inject the bundle where it differs.
        let bundle = material.bundle.as_bytes();
        let mutating_patch = mutating.as_ref().and_then(|m| {
            inject_patch(
                &m.metadata,
                m.webhooks.as_deref().unwrap_or_default(),
                bundle,
            )
        });
        self.inject(
            &self.mutating,
            "MutatingWebhookConfiguration",
            mutating_patch,
        )
        .await?;
        let validating_patch = validating.as_ref().and_then(|v| {
            inject_patch(
                &v.metadata,
                v.webhooks.as_deref().unwrap_or_default(),
                bundle,
            )
        });
        self.inject(
            &self.validating,
            "ValidatingWebhookConfiguration",
            validating_patch,
        )
        .await?;
        // Both now trust exactly the bundle.
        let bundle_certs = parse_certificates(&material.bundle)?;
        let instant = Instant::now();
        self.trusted_since
            .retain(|der, _| bundle_certs.iter().any(|c| c.der == *der));
        for ca in &bundle_certs {
            self.trusted_since.entry(ca.der.clone()).or_insert(instant);
        }

        // Serve the Secret's pair when it may replace the served one.
        let candidate = parse_certificates(&material.cert)?.remove(0);
        let served = self.store.served();
        if served.as_ref().map(|s| &s.der) != Some(&candidate.der) {
            let since = bundle_certs
                .iter()
                .find(|ca| candidate.issued_by(ca))
                .and_then(|ca| self.trusted_since.get(&ca.der).copied());
            if may_serve(
                served.as_ref(),
                since,
                self.settings.propagation,
                now,
                instant,
            ) {
                self.store
                    .set_pem(material.cert.as_bytes(), material.key.as_bytes())?;
                tracing::info!(secret = %secret_name, "serving certificate from the Secret now served");
            }
        }
        let both = mutating.is_some() && validating.is_some();
        let served_trusted = both
            && self
                .store
                .served()
                .is_some_and(|s| bundle_certs.iter().any(|ca| s.issued_by(ca)));
        self.store.set_trusted(served_trusted);
        Ok(())
    }

    /// Applies a caBundle patch to the configuration of `kind`, if there is one.
    async fn inject<K>(
        &self,
        api: &Api<K>,
        kind: &str,
        patch: Option<serde_json::Value>,
    ) -> Result<(), SyncError>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let Some(patch) = patch else { return Ok(()) };
        let name = &self.settings.configuration;
        let params = PatchParams::default();
        self.bounded(
            &format!("patching the {kind}'s caBundle"),
            api.patch(name, &params, &Patch::Merge(patch)),
        )
        .await?;
        tracing::info!(configuration = %name, kind, "CA bundle injected");
        Ok(())
    }

    async fn write(&self, existing: Option<Secret>, material: &Material) -> Result<(), SyncError> {
        let annotations = BTreeMap::from([(NAMES_ANNOTATION.to_owned(), material.names.clone())]);
        match existing {
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(self.settings.secret.clone()),
                        namespace: Some(self.settings.namespace.clone()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/managed-by".to_owned(),
                            "nova-webhook".to_owned(),
                        )])),
                        annotations: Some(annotations),
                        ..ObjectMeta::default()
                    },
                    type_: Some("kubernetes.io/tls".to_owned()),
                    data: Some(material.data()),
                    ..Secret::default()
                };
                self.bounded(
                    "creating the certificate Secret",
                    self.secrets.create(&PostParams::default(), &secret),
                )
                .await?;
            }
            Some(mut secret) => {
                // resourceVersion stays as read: a replica that lost a race gets a conflict.
                secret
                    .metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .extend(annotations);
                secret.data = Some(material.data());
                secret.string_data = None;
                let name = self.settings.secret.clone();
                self.bounded(
                    "replacing the certificate Secret",
                    self.secrets.replace(&name, &PostParams::default(), &secret),
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Syncs every interval until `stop` resolves; a conflict re-reads after half a second, a failure is
    /// counted and retried at the next interval (the pair served so far keeps serving).
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            let wait = match self.sync().await {
                Ok(()) => self.settings.interval,
                Err(SyncError::Conflict) => {
                    tracing::debug!(
                        "the Secret or a configuration changed under a write; re-reading"
                    );
                    Duration::from_millis(500)
                }
                Err(e) => {
                    self.metrics.certificate_sync_failed();
                    tracing::warn!(error = %e, "certificate sync failed; the served certificate stays");
                    self.settings.interval
                }
            };
            self.metrics.show_served(self.store.served().as_ref());
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// The merge patch setting every webhook's `caBundle` to `bundle`, or `None` when each
/// already holds it. A merge patch replaces a list whole, so it carries every webhook as read,
/// and the resourceVersion read: a configuration changed since (a helm upgrade) is a conflict,
/// never an overwrite.
pub fn inject_patch<W: serde::Serialize>(
    meta: &ObjectMeta,
    webhooks: &[W],
    bundle: &[u8],
) -> Option<serde_json::Value> {
    let mut list = serde_json::to_value(webhooks).ok()?;
    let encoded = serde_json::Value::String(base64_encode(bundle));
    let mut changed = false;
    for hook in list.as_array_mut()? {
        if hook["clientConfig"]["caBundle"] != encoded {
            hook["clientConfig"]["caBundle"] = encoded.clone();
            changed = true;
        }
    }
    changed.then(|| {
        serde_json::json!({
            "metadata": {"resourceVersion": meta.resource_version},
            "webhooks": list,
        })
    })
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn lifetimes() -> Lifetimes {
        Lifetimes {
            ca: 365 * DAY,
            serving: 90 * DAY,
            names: vec!["svc.ns.svc".into(), "127.0.0.1".into()],
        }
    }

    fn written(plan: Plan) -> (Material, Vec<Reason>) {
        match plan {
            Plan::Write(m, r) => (m, r),
            Plan::Keep => panic!("expected a write"),
        }
    }

    /// A Secret made at `at`.
    fn fresh(at: SystemTime) -> Material {
        written(plan(None, &[], &lifetimes(), at).unwrap()).0
    }

    fn certs(pem: &str) -> Vec<PemCert> {
        parse_certificates(pem).unwrap()
    }

    #[test]
    fn renewal_decisions() {
        let t0 = SystemTime::now();
        let made = fresh(t0);
        let ca0 = certs(&made.bundle)[0].clone();
        let leaf0 = certs(&made.cert)[0].clone();
        assert_eq!(certs(&made.bundle).len(), 1);
        assert!(leaf0.issued_by(&ca0));
        assert!(leaf0.matches_key(&made.key));
        assert!(ca0.matches_key(&made.ca_key));

        let mut broken_key = made.clone();
        broken_key.key = fresh(t0).key;
        let mut garbage_ca = made.clone();
        garbage_ca.bundle = "not a certificate".into();
        let mut garbage_leaf = made.clone();
        garbage_leaf.cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into();
        let mut foreign_leaf = made.clone();
        let other = fresh(t0);
        (foreign_leaf.cert, foreign_leaf.key) = (other.cert.clone(), other.key.clone());
        let mut renamed = made.clone();
        renamed.names = "old.name".into();
        let mut no_ca_key = made.clone();
        no_ca_key.ca_key = String::new();

        let at = |days: u32| t0 + DAY * days;
        // (case, stored, at, expected reasons, CA kept, leaf kept)
        type Case<'a> = (
            &'a str,
            Option<&'a Material>,
            SystemTime,
            Vec<Reason>,
            bool,
            bool,
        );
        let table: Vec<Case> = vec![
            ("missing", None, t0, vec![Reason::Missing], false, false),
            ("fresh", Some(&made), at(1), vec![], true, true),
            ("before 2/3", Some(&made), at(59), vec![], true, true),
            (
                "past 2/3",
                Some(&made),
                at(61),
                vec![Reason::ServingDue],
                true,
                false,
            ),
            (
                "expired",
                Some(&made),
                at(91),
                vec![Reason::ServingDue],
                true,
                false,
            ),
            (
                "key of another",
                Some(&broken_key),
                at(1),
                vec![Reason::BrokenServing(
                    "the serving key is not the certificate's".into(),
                )],
                true,
                false,
            ),
            (
                "leaf garbage",
                Some(&garbage_leaf),
                at(1),
                vec![Reason::BrokenServing(
                    "no serving certificate that parses".into(),
                )],
                true,
                false,
            ),
            (
                "leaf of another CA",
                Some(&foreign_leaf),
                at(1),
                vec![Reason::BrokenServing(
                    "the serving certificate is signed by no CA of the bundle".into(),
                )],
                true,
                false,
            ),
            (
                "renamed",
                Some(&renamed),
                at(1),
                vec![Reason::BrokenServing(
                    "the serving certificate was issued for other names".into(),
                )],
                true,
                false,
            ),
        ];
        for (case, stored, now, reasons, ca_kept, leaf_kept) in table {
            let result = plan(stored, &[], &lifetimes(), now).unwrap();
            if reasons.is_empty() {
                assert_eq!(result, Plan::Keep, "{case}");
                continue;
            }
            let (m, got) = written(result);
            assert_eq!(got, reasons, "{case}");
            assert_eq!(certs(&m.bundle)[0] == ca0, ca_kept, "{case}: CA kept");
            assert_eq!(certs(&m.cert)[0] == leaf0, leaf_kept, "{case}: leaf kept");
            // What is written is whole and consistent, and is kept when planned again.
            let leaf = &certs(&m.cert)[0];
            assert!(leaf.matches_key(&m.key), "{case}");
            assert!(leaf.issued_by(&certs(&m.bundle)[0]), "{case}");
            assert!(leaf.validity.not_after > now, "{case}");
            assert_eq!(
                plan(Some(&m), &[], &lifetimes(), now).unwrap(),
                Plan::Keep,
                "{case}: stable"
            );
        }

        // Broken CA contents make a new CA, without a panic. The old CA, when it still parses,
        // stays in the bundle, and so does the leaf it signed (it is served and trusted).
        for (case, stored, leaf_kept) in [
            ("CA garbage", &garbage_ca, false),
            ("no CA key", &no_ca_key, true),
        ] {
            let (m, got) = written(plan(Some(stored), &[], &lifetimes(), at(1)).unwrap());
            assert!(matches!(got[0], Reason::BrokenCa(_)), "{case}: {got:?}");
            assert!(
                !got.iter().any(|r| format!("{r:?}").contains("PRIVATE")),
                "{case}"
            );
            let bundle = certs(&m.bundle);
            assert_ne!(bundle[0], ca0, "{case}");
            assert!(bundle[0].matches_key(&m.ca_key), "{case}");
            assert_eq!(bundle.contains(&ca0), leaf_kept, "{case}");
            assert_eq!(certs(&m.cert)[0] == leaf0, leaf_kept, "{case}");
            assert_eq!(
                plan(Some(&m), &[], &lifetimes(), at(1)).unwrap(),
                Plan::Keep,
                "{case}"
            );
        }
    }

    #[test]
    fn a_ca_past_two_thirds_rolls_and_the_old_one_stays_trusted_until_it_expires() {
        let t0 = SystemTime::now();
        let l = lifetimes();
        let made = fresh(t0);
        let ca0 = certs(&made.bundle)[0].clone();
        // Walk through time renewing whenever the plan says so.
        let mut current = made;
        let mut rolled_at = None;
        for day in 1..=400u32 {
            let now = t0 + DAY * day;
            if let Plan::Write(m, reasons) = plan(Some(&current), &[], &l, now).unwrap() {
                if reasons.contains(&Reason::CaDue) {
                    rolled_at = Some(day);
                    let bundle = certs(&m.bundle);
                    assert_eq!(bundle.len(), 2, "old CA kept beside the new one");
                    assert_eq!(bundle[1], ca0);
                    // The served leaf is kept unless due itself: its CA is still trusted.
                    if !reasons.contains(&Reason::ServingDue) {
                        assert_eq!(m.cert, current.cert);
                    }
                }
                current = m;
            }
            // At every point the served leaf is valid and signed by a CA of the bundle.
            let leaf = &certs(&current.cert)[0];
            assert!(leaf.validity.not_after > now, "day {day}");
            let bundle = certs(&current.bundle);
            assert!(bundle.iter().any(|ca| leaf.issued_by(ca)), "day {day}");
            assert!(
                bundle.iter().all(|ca| ca.validity.not_after > now),
                "day {day}"
            );
        }
        assert_eq!(rolled_at, Some(244), "rolled at two-thirds of a year");
        assert_eq!(
            certs(&current.bundle).len(),
            1,
            "the old CA dropped once expired"
        );
    }

    #[test]
    fn a_regenerated_bundle_keeps_the_cas_the_configurations_trust() {
        let t0 = SystemTime::now();
        let old = fresh(t0);
        let trusted = certs(&old.bundle);
        let (m, reasons) = written(plan(None, &trusted, &lifetimes(), t0).unwrap());
        assert_eq!(reasons, vec![Reason::Missing]);
        let bundle = certs(&m.bundle);
        assert_eq!(bundle.len(), 2);
        assert_eq!(bundle[1], trusted[0]);
        assert!(certs(&m.cert)[0].issued_by(&bundle[0]));
    }

    #[test]
    fn injection_patches_only_what_differs() {
        use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhook, WebhookClientConfig};
        let meta = ObjectMeta {
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        };
        let hook = |name: &str, bundle: &[u8]| ValidatingWebhook {
            name: name.into(),
            client_config: WebhookClientConfig {
                url: Some(format!("https://127.0.0.1/{name}")),
                ca_bundle: Some(ByteString(bundle.to_vec())),
                service: None,
            },
            ..ValidatingWebhook::default()
        };
        let bundle = b"BUNDLE";
        assert!(inject_patch(&meta, &[hook("a", bundle), hook("b", bundle)], bundle).is_none());
        let patch = inject_patch(&meta, &[hook("a", bundle), hook("b", b"")], bundle).unwrap();
        assert_eq!(
            patch["metadata"],
            serde_json::json!({"resourceVersion": "7"})
        );
        let hooks = patch["webhooks"].as_array().unwrap();
        assert_eq!(hooks.len(), 2, "the list is carried whole");
        for (h, name) in hooks.iter().zip(["a", "b"]) {
            assert_eq!(h["name"], name);
            assert_eq!(h["clientConfig"]["caBundle"], "QlVORExF");
            assert_eq!(
                h["clientConfig"]["url"],
                format!("https://127.0.0.1/{name}")
            );
        }
    }

    #[test]
    fn a_new_certificate_waits_for_its_ca_to_propagate_unless_nothing_usable_is_served() {
        let now = SystemTime::now();
        let served = certs(&fresh(now).cert).remove(0);
        let t = Instant::now();
        let p = Duration::from_secs(10);
        assert!(may_serve(None, None, p, now, t));
        assert!(!may_serve(Some(&served), None, p, now, t));
        assert!(!may_serve(
            Some(&served),
            Some(t),
            p,
            now,
            t + Duration::from_secs(5)
        ));
        assert!(may_serve(Some(&served), Some(t), p, now, t + p));
        assert!(may_serve(Some(&served), None, p, now + 91 * DAY, t));
    }

    #[test]
    fn lifetimes_that_do_not_work_together_are_refused() {
        assert!(lifetimes().check().is_ok());
        let mut l = lifetimes();
        l.ca = 200 * DAY;
        assert!(l.check().is_err());
        l = lifetimes();
        l.names.clear();
        assert!(l.check().is_err());
    }

    #[test]
    fn material_debug_leaves_the_keys_out() {
        let m = fresh(SystemTime::now());
        let shown = format!("{m:?}");
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    }
}
