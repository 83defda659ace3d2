//! Registering admission webhooks that run as local processes.
//!
//! The API server can only reach a host process through `clientConfig.url`: a `service`
//! reference makes it dial a ClusterIP that nothing routes (and tests must never dial a
//! non-loopback address). Registration is asynchronous inside the API server, so
//! [`wait_for_webhook`] retries a server-side dry-run create of a canary object until the
//! webhook's verdict is observed, rather than trusting that the configuration object exists.

use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};

use crate::{Error, Result, kube_err};

/// One webhook endpoint (one entry of a webhook configuration).
#[derive(Clone, Debug)]
pub struct WebhookEndpoint {
    /// Fully qualified webhook name, e.g. `vnova.nova.openstack.c5c3.io` (at least three
    /// DNS labels); the API server quotes it in denials.
    pub name: String,
    /// Path appended to [`WebhookRegistration::url_base`], e.g. `/validate-nova`.
    pub path: String,
    pub rules: Vec<RuleWithOperations>,
    /// `Fail` (default) or `Ignore`.
    pub failure_policy: String,
    pub namespace_selector: Option<LabelSelector>,
    pub object_selector: Option<LabelSelector>,
    /// 1..=30 seconds.
    pub timeout_seconds: i32,
    /// CEL conditions a request must meet to be sent (none: every matching request is).
    pub match_conditions: Vec<MatchCondition>,
}

impl WebhookEndpoint {
    /// An endpoint for CREATE and UPDATE of `resources` in `group` (`""` for the core group)
    /// at every version in `versions`, failing closed.
    pub fn new(
        name: impl Into<String>,
        path: impl Into<String>,
        group: &str,
        versions: &[&str],
        resources: &[&str],
    ) -> Self {
        Self {
            name: name.into(),
            path: path.into(),
            rules: vec![RuleWithOperations {
                api_groups: Some(vec![group.to_owned()]),
                api_versions: Some(versions.iter().map(|v| (*v).to_owned()).collect()),
                operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
                resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
                scope: Some("*".into()),
            }],
            failure_policy: "Fail".into(),
            namespace_selector: None,
            object_selector: None,
            timeout_seconds: 10,
            match_conditions: Vec::new(),
        }
    }

    /// Sends only the requests that meet the CEL `expression` (named `name`).
    pub fn matching(mut self, name: &str, expression: &str) -> Self {
        self.match_conditions.push(MatchCondition {
            name: name.to_owned(),
            expression: expression.to_owned(),
        });
        self
    }

    /// Limits the endpoint to the namespaces named, so one test's webhook does not affect the
    /// others sharing the control plane.
    pub fn only_in_namespaces(mut self, namespaces: &[&str]) -> Self {
        self.namespace_selector = Some(name_selector(namespaces));
        self
    }

    fn client_config(&self, registration: &WebhookRegistration) -> WebhookClientConfig {
        WebhookClientConfig {
            url: Some(format!(
                "{}{}",
                registration.url_base.trim_end_matches('/'),
                self.path
            )),
            ca_bundle: Some(k8s_openapi::ByteString(
                registration.ca_bundle_pem.as_bytes().to_vec(),
            )),
            service: None,
        }
    }
}

/// A pair of Mutating/ValidatingWebhookConfigurations, both named [`Self::name`], pointing at a
/// webhook served on loopback.
#[derive(Clone, Debug)]
pub struct WebhookRegistration {
    /// Name of both configuration objects.
    pub name: String,
    /// `https://127.0.0.1:<port>`; must be https, without query or fragment.
    pub url_base: String,
    /// PEM of the CA that signed the webhook's serving certificate.
    pub ca_bundle_pem: String,
    pub mutating: Vec<WebhookEndpoint>,
    pub validating: Vec<WebhookEndpoint>,
}

/// Creates or replaces (server-side apply) the configurations of `registration`. A list that
/// is empty removes that configuration.
pub async fn register_webhooks(
    client: &kube::Client,
    registration: &WebhookRegistration,
) -> Result<()> {
    check_url(&registration.url_base)?;
    let params = PatchParams::apply("nova-test-harness").force();
    let meta = ObjectMeta {
        name: Some(registration.name.clone()),
        labels: Some([("nova-test-harness".to_owned(), "true".to_owned())].into()),
        ..ObjectMeta::default()
    };
    let mutating_api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating_api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());

    if registration.mutating.is_empty() {
        delete_if_present(&mutating_api, &registration.name).await?;
    } else {
        let config = MutatingWebhookConfiguration {
            metadata: meta.clone(),
            webhooks: Some(
                registration
                    .mutating
                    .iter()
                    .map(|e| MutatingWebhook {
                        name: e.name.clone(),
                        client_config: e.client_config(registration),
                        rules: Some(e.rules.clone()),
                        admission_review_versions: vec!["v1".into()],
                        side_effects: "None".into(),
                        failure_policy: Some(e.failure_policy.clone()),
                        timeout_seconds: Some(e.timeout_seconds),
                        namespace_selector: e.namespace_selector.clone(),
                        object_selector: e.object_selector.clone(),
                        match_conditions: conditions(e),
                        reinvocation_policy: Some("Never".into()),
                        ..MutatingWebhook::default()
                    })
                    .collect(),
            ),
        };
        apply(&mutating_api, &registration.name, &params, &config).await?;
    }
    if registration.validating.is_empty() {
        delete_if_present(&validating_api, &registration.name).await?;
    } else {
        let config = ValidatingWebhookConfiguration {
            metadata: meta,
            webhooks: Some(
                registration
                    .validating
                    .iter()
                    .map(|e| ValidatingWebhook {
                        name: e.name.clone(),
                        client_config: e.client_config(registration),
                        rules: Some(e.rules.clone()),
                        admission_review_versions: vec!["v1".into()],
                        side_effects: "None".into(),
                        failure_policy: Some(e.failure_policy.clone()),
                        timeout_seconds: Some(e.timeout_seconds),
                        namespace_selector: e.namespace_selector.clone(),
                        object_selector: e.object_selector.clone(),
                        match_conditions: conditions(e),
                        ..ValidatingWebhook::default()
                    })
                    .collect(),
            ),
        };
        apply(&validating_api, &registration.name, &params, &config).await?;
    }
    Ok(())
}

/// The match conditions of an endpoint, absent when it has none.
fn conditions(endpoint: &WebhookEndpoint) -> Option<Vec<MatchCondition>> {
    (!endpoint.match_conditions.is_empty()).then(|| endpoint.match_conditions.clone())
}

/// Deletes both configurations named `name` (absent ones are fine).
pub async fn unregister_webhooks(client: &kube::Client, name: &str) -> Result<()> {
    delete_if_present(
        &Api::<MutatingWebhookConfiguration>::all(client.clone()),
        name,
    )
    .await?;
    delete_if_present(
        &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        name,
    )
    .await
}

/// What proves that the API server calls the webhook.
pub enum CanaryExpectation {
    /// The create is denied and the API server's message contains this text (for instance
    /// `admission webhook "vnova.example.com" denied the request` or the webhook's own
    /// message).
    DeniedWith(String),
    /// The create is admitted and the returned (dry-run) object satisfies the predicate, e.g. a
    /// mutating webhook added a default.
    Admitted(Box<dyn Fn(&DynamicObject) -> bool + Send + Sync>),
}

/// An object to dry-run create until the webhook's verdict shows.
pub struct Canary {
    pub resource: ApiResource,
    /// `None` for cluster-scoped resources.
    pub namespace: Option<String>,
    /// The full object (apiVersion, kind, metadata.name, ...).
    pub object: serde_json::Value,
    pub expect: CanaryExpectation,
}

/// Retries a server-side dry-run create of the canary until the expectation holds, so tests
/// start only once every API server path goes through the webhook. On timeout the error
/// carries the last response seen.
pub async fn wait_for_webhook(
    client: &kube::Client,
    canary: &Canary,
    timeout: Duration,
) -> Result<()> {
    let api: Api<DynamicObject> = match &canary.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &canary.resource),
        None => Api::all_with(client.clone(), &canary.resource),
    };
    let object: DynamicObject =
        serde_json::from_value(canary.object.clone()).map_err(|e| Error::Invalid {
            context: "the webhook canary".into(),
            message: e.to_string(),
        })?;
    let params = PostParams {
        dry_run: true,
        field_manager: Some("nova-test-harness".into()),
    };
    let deadline = Instant::now() + timeout;
    loop {
        let outcome = api.create(&params, &object).await;
        let last = match (&canary.expect, outcome) {
            (CanaryExpectation::DeniedWith(text), Err(kube::Error::Api(status)))
                if status.message.contains(text.as_str()) =>
            {
                return Ok(());
            }
            (CanaryExpectation::Admitted(check), Ok(created)) if check(&created) => return Ok(()),
            (_, Ok(created)) => format!(
                "admitted: {}",
                serde_json::to_string(&created).unwrap_or_default()
            ),
            (_, Err(e)) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: "the webhook canary".into(),
                after: timeout,
                detail: format!("; last response: {last}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A selector matching namespaces by name (the API server labels every namespace with
/// `kubernetes.io/metadata.name`).
pub fn name_selector(namespaces: &[&str]) -> LabelSelector {
    serde_json::from_value(serde_json::json!({
        "matchExpressions": [{
            "key": "kubernetes.io/metadata.name",
            "operator": "In",
            "values": namespaces,
        }]
    }))
    .unwrap_or_default()
}

/// Base64 of a PEM bundle, as `caBundle` appears in YAML (for callers writing manifests).
pub fn ca_bundle_base64(ca_pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(ca_pem)
}

fn check_url(url_base: &str) -> Result<()> {
    let loopback = ["https://127.0.0.1:", "https://localhost:", "https://[::1]:"];
    if loopback.iter().any(|p| url_base.starts_with(p)) && !url_base.contains(['?', '#', '@']) {
        Ok(())
    } else {
        Err(Error::Invalid {
            context: format!("webhook url {url_base:?}"),
            message: "must be https://127.0.0.1:<port> (loopback, no query, fragment or userinfo)"
                .into(),
        })
    }
}

async fn apply<K>(api: &Api<K>, name: &str, params: &PatchParams, object: &K) -> Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, params, &Patch::Apply(object))
        .await
        .map_err(kube_err(format!("applying webhook configuration {name}")))?;
    Ok(())
}

async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("deleting webhook configuration {name}"))(
            e,
        )),
    }
}
