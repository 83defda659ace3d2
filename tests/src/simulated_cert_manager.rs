//! **SIMULATED cert-manager** for one namespace: cert-manager's controller and CA injector do
//! not run here (no image can be pulled and its commands are not served as Go modules), so
//! this plays the part the chart's cert-manager mode relies on, with real effects, on the real
//! cert-manager CRDs (`tests/crds/chart`):
//! - a `Certificate` whose `Issuer` is `selfSigned` gets a self-signed certificate in its
//!   Secret (`tls.crt`, `tls.key`, `ca.crt` = itself); with `privateKey.rotationPolicy: Never`
//!   a renewal keeps the key already stored, otherwise (cert-manager's default since 1.18) it
//!   takes a new one;
//! - a `Certificate` whose `Issuer` is `ca` gets a certificate for its `dnsNames` signed by the
//!   CA of the Issuer's Secret, with a new key on every issuance, and `ca.crt` = that CA;
//! - the CA injector: every webhook configuration annotated `cert-manager.io/inject-ca-from:
//!   <namespace>/<certificate>` gets that Certificate's Secret's `ca.crt` as the `caBundle` of
//!   each of its webhooks (the current CA only, as cert-manager injects).
//!
//! Renewals happen when the test asks ([`SimulatedCertManager::renew`], as `cmctl renew` does),
//! not by time. Issuers and Certificates get a Ready condition saying SIMULATED. It polls every
//! 500 ms on a task of the caller's runtime until dropped.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use nova_certs::{CertificateAuthority, Validity};
use serde_json::{Value, json};

use crate::{Result, kube_err};

/// The annotation cert-manager's CA injector reads.
const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";
/// The field manager of everything this writes.
const MANAGER: &str = "simulated-cert-manager";
/// The life of what it issues (cert-manager's default: 90 days).
const LIFE: Duration = Duration::from_secs(90 * 86_400);

/// Runs the simulation for one namespace until dropped.
pub struct SimulatedCertManager {
    /// Certificates the test asked to renew, not yet re-issued.
    renewals: Arc<Mutex<BTreeSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SimulatedCertManager {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SimulatedCertManager {
    /// Starts it for the Issuers, Certificates and injection annotations of `namespace`.
    pub fn start(client: Client, namespace: &str) -> Self {
        let renewals = Arc::new(Mutex::new(BTreeSet::new()));
        let state = Simulation {
            client,
            namespace: namespace.to_owned(),
            renewals: renewals.clone(),
        };
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = state.pass().await {
                    eprintln!("SIMULATED cert-manager in {}: {e}", state.namespace);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Self { renewals, task }
    }

    /// Asks for the Certificate `name` to be issued again (its Secret replaced).
    pub fn renew(&self, name: &str) {
        self.renewals
            .lock()
            .expect("renewals")
            .insert(name.to_owned());
    }
}

struct Simulation {
    client: Client,
    namespace: String,
    renewals: Arc<Mutex<BTreeSet<String>>>,
}

fn cert_manager(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "cert-manager.io".into(),
        version: "v1".into(),
        api_version: "cert-manager.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Whether `object` already carries the Ready condition this sets.
fn reported_ready(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    String::from_utf8(secret.data.as_ref()?.get(key)?.0.clone()).ok()
}

impl Simulation {
    async fn pass(&self) -> Result<()> {
        let issuers: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &cert_manager("Issuer", "issuers"),
        );
        let certificates: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &cert_manager("Certificate", "certificates"),
        );
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        for issuer in issuers
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing Issuers"))?
            .iter()
            .filter(|issuer| !reported_ready(issuer))
        {
            self.ready(&issuers, &issuer.name_any(), "the Issuer is ready")
                .await?;
        }
        for certificate in certificates
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing Certificates"))?
        {
            let name = certificate.name_any();
            let spec = &certificate.data["spec"];
            let secret_name = spec["secretName"].as_str().unwrap_or_default();
            let stored = secrets
                .get_opt(secret_name)
                .await
                .map_err(kube_err("reading a Certificate's Secret"))?;
            let renewing = self.renewals.lock().expect("renewals").contains(&name);
            if stored.is_some() && !renewing {
                continue;
            }
            let issuer_name = spec["issuerRef"]["name"].as_str().unwrap_or_default();
            let Some(issuer) = issuers
                .get_opt(issuer_name)
                .await
                .map_err(kube_err("reading an Issuer"))?
            else {
                continue;
            };
            let Some(data) = self.issue(&issuer, spec, stored.as_ref(), &secrets).await? else {
                continue;
            };
            let secret = json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": secret_name, "annotations": {
                    "cert-manager.io/certificate-name": name}},
                "type": "kubernetes.io/tls",
                "data": data,
            });
            secrets
                .patch(
                    secret_name,
                    &PatchParams::apply(MANAGER).force(),
                    &Patch::Apply(&secret),
                )
                .await
                .map_err(kube_err("writing a Certificate's Secret"))?;
            self.renewals.lock().expect("renewals").remove(&name);
            eprintln!(
                "SIMULATED cert-manager: issued Certificate {}/{name}",
                self.namespace
            );
            self.ready(&certificates, &name, "the certificate is issued")
                .await?;
        }
        self.inject(&certificates, &secrets).await
    }

    /// The Secret data of `spec` issued by `issuer`; None while the issuer cannot sign yet.
    async fn issue(
        &self,
        issuer: &DynamicObject,
        spec: &Value,
        stored: Option<&Secret>,
        secrets: &Api<Secret>,
    ) -> Result<Option<Value>> {
        let b64 = |s: &str| serde_json::to_value(ByteString(s.as_bytes().to_vec())).expect("bytes");
        let validity = Validity::starting(SystemTime::now(), LIFE);
        let invalid = |what: &str, e: nova_certs::CertError| crate::Error::Invalid {
            context: format!("SIMULATED cert-manager: {what}"),
            message: e.to_string(),
        };
        if issuer.data["spec"]["selfSigned"].is_object() {
            let keep_key = spec["privateKey"]["rotationPolicy"] == "Never";
            let kept = stored
                .filter(|_| keep_key)
                .and_then(|s| Some((text(s, "tls.crt")?, text(s, "tls.key")?)));
            let common_name = spec["commonName"].as_str().unwrap_or("simulated");
            let ca = match kept {
                Some((cert, key)) => CertificateAuthority::from_pem(&cert, &key)
                    .and_then(|ca| ca.renewed(validity))
                    .map_err(|e| invalid("renewing a CA with its key", e))?,
                None => CertificateAuthority::new_valid(common_name, validity)
                    .map_err(|e| invalid("a new CA", e))?,
            };
            return Ok(Some(json!({
                "tls.crt": b64(ca.cert_pem()),
                "tls.key": b64(ca.key_pem()),
                "ca.crt": b64(ca.cert_pem()),
            })));
        }
        let ca_secret = issuer.data["spec"]["ca"]["secretName"]
            .as_str()
            .unwrap_or_default();
        let Some(ca_secret) = secrets
            .get_opt(ca_secret)
            .await
            .map_err(kube_err("reading a CA Issuer's Secret"))?
        else {
            return Ok(None);
        };
        let (Some(cert), Some(key)) = (text(&ca_secret, "tls.crt"), text(&ca_secret, "tls.key"))
        else {
            return Ok(None);
        };
        let ca = CertificateAuthority::from_pem(&cert, &key)
            .map_err(|e| invalid("the CA Issuer's CA", e))?;
        let names: Vec<&str> = spec["dnsNames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let leaf = ca
            .issue_serving_valid(
                names.first().copied().unwrap_or("simulated"),
                &names,
                validity,
            )
            .map_err(|e| invalid("a serving certificate", e))?;
        Ok(Some(json!({
            "tls.crt": b64(&leaf.cert_pem),
            "tls.key": b64(&leaf.key_pem),
            "ca.crt": b64(ca.cert_pem()),
        })))
    }

    /// Sets the Ready condition of `name` (SIMULATED in its message).
    async fn ready(&self, api: &Api<DynamicObject>, name: &str, message: &str) -> Result<()> {
        let status = json!({"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "Simulated",
            "message": format!("SIMULATED cert-manager: {message}"),
        }]}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .map_err(kube_err("setting a Ready condition"))?;
        Ok(())
    }

    /// The CA injector: the `ca.crt` of the annotated Certificate's Secret into every webhook
    /// of both kinds of configuration.
    async fn inject(&self, certificates: &Api<DynamicObject>, secrets: &Api<Secret>) -> Result<()> {
        self.inject_kind::<MutatingWebhookConfiguration>(certificates, secrets)
            .await?;
        self.inject_kind::<ValidatingWebhookConfiguration>(certificates, secrets)
            .await
    }

    async fn inject_kind<K: Configuration>(
        &self,
        certificates: &Api<DynamicObject>,
        secrets: &Api<Secret>,
    ) -> Result<()> {
        let configs: Api<K> = Api::all(self.client.clone());
        for mut config in configs
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing webhook configurations"))?
        {
            let Some(certificate) = config
                .annotations()
                .get(INJECT_CA_FROM)
                .and_then(|from| from.split_once('/'))
                .filter(|(ns, _)| *ns == self.namespace)
                .map(|(_, name)| name.to_owned())
            else {
                continue;
            };
            let Some(ca) = self.ca_of(certificates, secrets, &certificate).await else {
                continue;
            };
            let wanted = ByteString(ca.into_bytes());
            let mut changed = false;
            for client_config in config.client_configs() {
                if client_config.ca_bundle.as_ref() != Some(&wanted) {
                    client_config.ca_bundle = Some(wanted.clone());
                    changed = true;
                }
            }
            if changed {
                configs
                    .replace(&config.name_any(), &PostParams::default(), &config)
                    .await
                    .map_err(kube_err("injecting a webhook configuration's CA"))?;
            }
        }
        Ok(())
    }

    /// The `ca.crt` of the Secret of the Certificate `name`, once issued.
    async fn ca_of(
        &self,
        certificates: &Api<DynamicObject>,
        secrets: &Api<Secret>,
        name: &str,
    ) -> Option<String> {
        let certificate = certificates.get_opt(name).await.ok()??;
        let secret = certificate.data["spec"]["secretName"].as_str()?;
        text(&secrets.get_opt(secret).await.ok()??, "ca.crt")
    }
}

/// A webhook configuration of either kind: its webhooks' client configurations.
trait Configuration:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
{
    fn client_configs(&mut self) -> Vec<&mut WebhookClientConfig>;
}

/// Both kinds hold their webhooks' client configurations the same way.
macro_rules! configuration {
    ($($kind:ty),*) => {$(
        impl Configuration for $kind {
            fn client_configs(&mut self) -> Vec<&mut WebhookClientConfig> {
                self.webhooks
                    .iter_mut()
                    .flatten()
                    .map(|w| &mut w.client_config)
                    .collect()
            }
        }
    )*};
}

configuration!(MutatingWebhookConfiguration, ValidatingWebhookConfiguration);
