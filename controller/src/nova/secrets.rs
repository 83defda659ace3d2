//! The Secrets step (`common-types.md` §3.6): the secret-store gate, then the credential gates
//! in their fixed order, then the values and digests later steps need.

use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective::{self, secret_keys};
use nova_api::v1alpha1::SecretStoreKind;

use super::pass::{NovaPass, secret_value};
use crate::external;
use crate::pipeline::{Flow, REQUEUE_SECRET_POLLING, StepError, StepFuture};
use crate::sensitive::Sensitive;

const CONDITION: NovaConditionType = NovaConditionType::SecretsReady;

/// What a gate's value is for, once it passes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Only gated here; the DBConnectionSecrets step reads the Secret itself.
    Database,
    ServicePassword,
    MetadataSharedSecret,
    MessagingCa,
}

/// One credential gate: a Secret that must exist with every expected key.
struct Gate {
    use_: Use,
    secret: String,
    keys: Vec<String>,
    reason: Reason,
    /// How a message names what is awaited, e.g. "Database credentials".
    noun: &'static str,
    /// Whether an existing but empty value waits too (the metadata shared secret).
    refuse_empty: bool,
}

/// The Secrets step.
pub fn run(pass: &mut NovaPass) -> StepFuture<'_> {
    Box::pin(async move {
        if let Some(flow) = store_gate(pass).await? {
            return Ok(flow);
        }
        let mut passed = Vec::new();
        for gate in gates(pass) {
            match credential_gate(pass, &gate).await? {
                Ok(value) => passed.push((gate.use_, value)),
                Err(flow) => return Ok(flow),
            }
        }
        let value = |wanted: Use| {
            passed
                .iter()
                .find(|(u, _)| *u == wanted)
                .map(|(_, v)| v.clone())
        };
        let (Some(password), Some(shared_secret)) = (
            value(Use::ServicePassword),
            value(Use::MetadataSharedSecret),
        ) else {
            return Err(StepError::Refused(
                "a credential gate passed without its value".to_owned(),
            ));
        };
        pass.resolved.digests.authtoken = password.digest();
        pass.resolved.digests.metadata_secret = shared_secret.digest();
        pass.resolved.service_password = Some(password);
        pass.resolved.metadata_shared_secret = Some(shared_secret);
        pass.resolved.messaging_ca = value(Use::MessagingCa);
        pass.set_condition(
            CONDITION,
            true,
            Reason::SecretsAvailable,
            "All required Secrets are available",
        );
        Ok(Flow::Continue)
    })
}

/// The store gate: a namespace-scoped operator cannot read a ClusterSecretStore, and a store
/// that is not Ready means the upstream backend is unreachable.
async fn store_gate(pass: &mut NovaPass) -> Result<Option<Flow>, StepError> {
    let ns = pass.namespace();
    let (kind, name) = effective::secret_store(&pass.nova.spec);
    if kind == SecretStoreKind::ClusterSecretStore && pass.ctx.scope.is_some() {
        pass.set_condition(
            CONDITION,
            false,
            Reason::ClusterSecretStoreUnsupported,
            format!(
                "ClusterSecretStore \"{name}\" cannot be read by a namespace-scoped operator; set spec.secretStoreRef to a SecretStore in namespace \"{ns}\""
            ),
        );
        return Ok(Some(Flow::RequeueAfter(REQUEUE_SECRET_POLLING)));
    }
    let (api, kind_name) = match kind {
        SecretStoreKind::ClusterSecretStore => (
            kube::Api::all_with(pass.ctx.client.clone(), &external::cluster_secret_store()),
            "ClusterSecretStore",
        ),
        SecretStoreKind::SecretStore => (pass.dynamic(&external::secret_store()), "SecretStore"),
    };
    let store = api
        .get_opt(&name)
        .await
        .map_err(|e| StepError::kube(format!("reading {kind_name} {name}"), e))?;
    if store.as_ref().is_some_and(external::is_ready) {
        return Ok(None);
    }
    pass.set_condition(
        CONDITION,
        false,
        Reason::SecretStoreNotReady,
        format!("{kind_name} \"{name}\" is not ready; upstream secret backend unreachable"),
    );
    Ok(Some(Flow::RequeueAfter(REQUEUE_SECRET_POLLING)))
}

/// The credential gates in the seed's order: the two database Secrets (nova_api first), the
/// service-user password, the metadata shared secret and, on a TLS bus, the broker CA bundle.
fn gates(pass: &NovaPass) -> Vec<Gate> {
    let spec = &pass.nova.spec;
    let db_keys = || vec!["username".to_owned(), "password".to_owned()];
    let mut gates = vec![
        Gate {
            use_: Use::Database,
            secret: spec.api_database.secret_ref.name.clone(),
            keys: db_keys(),
            reason: Reason::WaitingForDBCredentials,
            noun: "Database credentials",
            refuse_empty: false,
        },
        Gate {
            use_: Use::Database,
            secret: spec.database.secret_ref.name.clone(),
            keys: db_keys(),
            reason: Reason::WaitingForDBCredentials,
            noun: "Database credentials",
            refuse_empty: false,
        },
        Gate {
            use_: Use::ServicePassword,
            secret: spec.service_user.secret_ref.name.clone(),
            keys: vec![
                effective::secret_key(
                    &spec.service_user.secret_ref,
                    secret_keys::SERVICE_USER_PASSWORD,
                )
                .to_owned(),
            ],
            reason: Reason::WaitingForServiceUserCredentials,
            noun: "Service user credentials",
            refuse_empty: false,
        },
        Gate {
            use_: Use::MetadataSharedSecret,
            secret: spec.metadata.shared_secret_ref.name.clone(),
            keys: vec![
                effective::secret_key(
                    &spec.metadata.shared_secret_ref,
                    secret_keys::METADATA_SHARED_SECRET,
                )
                .to_owned(),
            ],
            reason: Reason::WaitingForMetadataSharedSecret,
            noun: "Metadata shared secret",
            refuse_empty: true,
        },
    ];
    if let Some(tls) = &spec.messaging.tls {
        gates.push(Gate {
            use_: Use::MessagingCa,
            secret: tls.ca_bundle_secret_ref.name.clone(),
            keys: vec![
                effective::secret_key(&tls.ca_bundle_secret_ref, secret_keys::MESSAGING_CA)
                    .to_owned(),
            ],
            reason: Reason::WaitingForMessagingCA,
            noun: "Messaging CA bundle",
            refuse_empty: false,
        });
    }
    gates
}

/// Passes with the first expected key's value when the Secret exists with every expected key;
/// otherwise explains the wait, asking the same-named ExternalSecret only to word the message.
async fn credential_gate(
    pass: &mut NovaPass,
    gate: &Gate,
) -> Result<Result<Sensitive, Flow>, StepError> {
    let ns = pass.namespace();
    let name = &gate.secret;
    let secret = pass.read_secret(name).await?;
    if let Some(secret) = &secret {
        let values: Vec<_> = gate.keys.iter().map(|k| secret_value(secret, k)).collect();
        if values.iter().all(Option::is_some) {
            let empty = gate.refuse_empty && values.iter().flatten().any(|v| v.is_empty());
            if let (false, Some(Some(first))) = (empty, values.into_iter().next()) {
                return Ok(Ok(first));
            }
            pass.set_condition(
                CONDITION,
                false,
                Reason::MetadataSharedSecretEmpty,
                format!(
                    "{} Secret {ns}/{name} key \"{}\" is empty; nova would verify every proxied metadata request against an empty key",
                    gate.noun, gate.keys[0]
                ),
            );
            return Ok(Err(Flow::RequeueAfter(REQUEUE_SECRET_POLLING)));
        }
    }
    let external_secret = pass
        .dynamic(&external::external_secret())
        .get_opt(name)
        .await
        .map_err(|e| StepError::kube(format!("reading ExternalSecret {ns}/{name}"), e))?;
    let message = match (&secret, &external_secret) {
        (_, None) => format!("{} ExternalSecret {ns}/{name} not found yet", gate.noun),
        (Some(_), Some(es)) if external::is_ready(es) => {
            format!("{} Secret exists but is missing expected keys", gate.noun)
        }
        _ => format!(
            "Waiting for the {} Secret {ns}/{name} to be synced",
            gate.noun.to_lowercase()
        ),
    };
    pass.set_condition(CONDITION, false, gate.reason, message);
    Ok(Err(Flow::RequeueAfter(REQUEUE_SECRET_POLLING)))
}
