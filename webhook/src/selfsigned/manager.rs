//! The shell of the self-signed mode: reads the Secret and both configurations, writes what
//! the plan says, injects the bundle and serves the pair.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use nova_certs::{CertError, PemCert, parse_certificates};

use crate::metrics::Metrics;
use crate::tls::CertStore;

use super::*;

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
