//! The Secrets step (`common-types.md` §3.6): the secret-store gate, then the credential gates
//! in their fixed order, then the values and digests later steps need.

use k8s_openapi::api::core::v1::Secret;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective::{self, secret_keys};
use nova_api::v1alpha1::{Nova, NovaSpec, SecretRefSpec, SecretStoreKind};

use kube::ResourceExt;

use crate::clusters::SecretValues;
use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::{Digests, Resolved};
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::kinds;
use crate::pipeline::uses::{Uses, names};
use crate::pipeline::{
    Gate, Plan, REQUEUE_SECRET_POLLING, StepError, StepFuture, Waiting, observe_then_plan,
};
use crate::sensitive::Sensitive;

const CONDITION: NovaConditionType = NovaConditionType::SecretsReady;

/// What a gate's value is for, once it passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Only gated here; the DBConnectionSecrets step reads the Secret itself.
    Database,
    /// The service-user password.
    ServicePassword,
    /// The metadata shared secret.
    MetadataSharedSecret,
    /// The broker CA bundle.
    MessagingCa,
    /// spec.tls's CA bundle (beyond the spec, issue 30).
    EndpointCa,
}

/// One credential gate: a Secret that must exist with every expected key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialGate {
    /// What the value is for.
    pub use_: Use,
    /// The Secret's name, in the CR's namespace.
    pub secret: String,
    /// The keys it must hold; the first is the value the gate passes on.
    pub keys: Vec<String>,
    /// The wait reason.
    pub reason: Reason,
    /// How a message names what is awaited, e.g. "Database credentials".
    pub noun: &'static str,
    /// Whether an existing but empty value waits too (the metadata shared secret).
    pub refuse_empty: bool,
}

/// The credential gates in the seed's order: the two database Secrets (nova_api first), the
/// service-user password, the metadata shared secret, on a TLS bus the broker CA bundle and,
/// while spec.tls is set, the CA bundle of Keystone and the service endpoints.
pub fn gates(spec: &NovaSpec) -> Vec<CredentialGate> {
    let db = |name: &str| CredentialGate {
        use_: Use::Database,
        secret: name.to_owned(),
        keys: vec!["username".to_owned(), "password".to_owned()],
        reason: Reason::WaitingForDBCredentials,
        noun: "Database credentials",
        refuse_empty: false,
    };
    let mut gates = vec![
        db(&spec.api_database.secret_ref.name),
        db(&spec.database.secret_ref.name),
        one_key(
            Use::ServicePassword,
            &spec.service_user.secret_ref,
            secret_keys::SERVICE_USER_PASSWORD,
            Reason::WaitingForServiceUserCredentials,
            "Service user credentials",
        ),
        CredentialGate {
            refuse_empty: true,
            ..one_key(
                Use::MetadataSharedSecret,
                &spec.metadata.shared_secret_ref,
                secret_keys::METADATA_SHARED_SECRET,
                Reason::WaitingForMetadataSharedSecret,
                "Metadata shared secret",
            )
        },
    ];
    if let Some(tls) = &spec.messaging.tls {
        gates.push(one_key(
            Use::MessagingCa,
            &tls.ca_bundle_secret_ref,
            secret_keys::MESSAGING_CA,
            Reason::WaitingForMessagingCA,
            "Messaging CA bundle",
        ));
    }
    if let Some(tls) = &spec.tls {
        gates.push(one_key(
            Use::EndpointCa,
            &tls.ca_bundle_secret_ref,
            secret_keys::ENDPOINT_CA,
            Reason::WaitingForEndpointCA,
            "Endpoint CA bundle",
        ));
    }
    gates
}

/// A gate on one key of `reference` (`default_key` unless the reference names another).
fn one_key(
    use_: Use,
    reference: &SecretRefSpec,
    default_key: &str,
    reason: Reason,
    noun: &'static str,
) -> CredentialGate {
    CredentialGate {
        use_,
        secret: reference.name.clone(),
        keys: vec![effective::secret_key(reference, default_key).to_owned()],
        reason,
        noun,
        refuse_empty: false,
    }
}

/// The selected secret store, as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Store {
    /// A ClusterSecretStore, which a namespace-scoped operator cannot read.
    Unreadable,
    /// Not found.
    Absent,
    /// Found, Ready or not.
    Present {
        /// Whether it reports Ready=True.
        ready: bool,
    },
}

/// One gate's Secret and the same-named ExternalSecret (read only to explain a wait).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credential {
    /// The gate's keys the Secret holds; None when it does not exist.
    pub secret: Option<SecretValues>,
    /// Whether the ExternalSecret is Ready; None when it does not exist.
    pub external_secret: Option<bool>,
}

/// What the Secrets step reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The selected store.
    pub store: Store,
    /// One entry per gate of [`gates`], in order.
    pub credentials: Vec<Credential>,
}

/// The Secrets the Nova names, their ExternalSecrets and the effective store, read by name.
pub const KINDS: &[Uses] = &[
    names(|| KindSpec::of::<Secret>(Caching::OnDemand)),
    names(|| KindSpec::external(kinds::secret_store(), Caching::Full)),
    names(|| KindSpec::external(kinds::cluster_secret_store(), Caching::Full).cluster_scoped()),
    names(|| KindSpec::external(kinds::external_secret(), Caching::Full)),
];

/// The Secrets step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let cluster = &pass.cluster;
    let (kind, name) = effective::secret_store(&pass.cr.spec);
    let store =
        if kind == SecretStoreKind::ClusterSecretStore && cluster.namespace_scope().is_some() {
            Store::Unreadable
        } else {
            let (resource, namespace) = match kind {
                SecretStoreKind::ClusterSecretStore => (kinds::cluster_secret_store(), None),
                SecretStoreKind::SecretStore => (kinds::secret_store(), Some(ns)),
            };
            match cluster.get(&resource, namespace, &name).await? {
                Some(store) => Store::Present {
                    ready: kinds::is_ready(&store),
                },
                None => Store::Absent,
            }
        };
    let mut credentials = Vec::new();
    for gate in gates(&pass.cr.spec) {
        let keys: Vec<&str> = gate.keys.iter().map(String::as_str).collect();
        let secret = cluster.secret(ns, &gate.secret, &keys).await?;
        let external_secret = cluster
            .get(&kinds::external_secret(), Some(ns), &gate.secret)
            .await?
            .map(|es| kinds::is_ready(&es));
        credentials.push(Credential {
            secret,
            external_secret,
        });
    }
    Ok(Observed { store, credentials })
}

/// The Secrets step's plan.
pub fn plan(nova: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    ready(nova, observed)
        .unwrap_or_else(|waiting| Plan::wait(CONDITION, waiting, REQUEUE_SECRET_POLLING))
}

fn ready(nova: &Nova, observed: &Observed) -> Result<NovaPlan, Waiting> {
    let ns = nova.namespace().unwrap_or_default();
    store_gate(nova, &ns, &observed.store).ready()?;
    let mut passed = Vec::new();
    for (gate, credential) in gates(&nova.spec).iter().zip(&observed.credentials) {
        passed.push((gate.use_, credential_gate(&ns, gate, credential).ready()?));
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
        return Ok(Plan::fail(StepError::Refused(
            "a credential gate passed without its value".to_owned(),
        )));
    };
    let resolved = Resolved {
        digests: Digests {
            authtoken: password.digest(),
            metadata_secret: shared_secret.digest(),
            ..Default::default()
        },
        service_password: Some(password),
        metadata_shared_secret: Some(shared_secret),
        messaging_ca: value(Use::MessagingCa),
        endpoint_ca: value(Use::EndpointCa),
        ..Default::default()
    };
    Ok(Plan::proceed()
        .ready(
            CONDITION,
            Reason::SecretsAvailable,
            "All required Secrets are available",
        )
        .resolve(resolved))
}

/// The store gate: a namespace-scoped operator cannot read a ClusterSecretStore, and a store
/// that is not Ready means the upstream backend is unreachable.
fn store_gate(nova: &Nova, ns: &str, store: &Store) -> Gate<()> {
    let (kind, name) = effective::secret_store(&nova.spec);
    let kind_name = match kind {
        SecretStoreKind::ClusterSecretStore => "ClusterSecretStore",
        SecretStoreKind::SecretStore => "SecretStore",
    };
    match store {
        Store::Present { ready: true } => Gate::Ready(()),
        Store::Unreadable => Gate::wait(
            Reason::ClusterSecretStoreUnsupported,
            format!(
                "ClusterSecretStore \"{name}\" cannot be read by a namespace-scoped operator; set spec.secretStoreRef to a SecretStore in namespace \"{ns}\""
            ),
        ),
        Store::Absent | Store::Present { ready: false } => Gate::wait(
            Reason::SecretStoreNotReady,
            format!("{kind_name} \"{name}\" is not ready; upstream secret backend unreachable"),
        ),
    }
}

/// Passes with the first expected key's value when the Secret holds every expected key;
/// otherwise explains the wait, with the ExternalSecret's state wording the message.
fn credential_gate(ns: &str, gate: &CredentialGate, credential: &Credential) -> Gate<Sensitive> {
    let name = &gate.secret;
    if let Some(secret) = &credential.secret {
        let values: Vec<Option<&Sensitive>> = gate.keys.iter().map(|k| secret.get(k)).collect();
        if let [Some(first), ..] = values[..]
            && values.iter().all(Option::is_some)
        {
            if gate.refuse_empty && values.iter().flatten().any(|v| v.is_empty()) {
                return Gate::wait(
                    Reason::MetadataSharedSecretEmpty,
                    format!(
                        "{} Secret {ns}/{name} key \"{}\" is empty; nova would verify every proxied metadata request against an empty key",
                        gate.noun, gate.keys[0]
                    ),
                );
            }
            return Gate::Ready(first.clone());
        }
    }
    let message = match (&credential.secret, credential.external_secret) {
        (_, None) => format!("{} ExternalSecret {ns}/{name} not found yet", gate.noun),
        (Some(_), Some(true)) => {
            format!("{} Secret exists but is missing expected keys", gate.noun)
        }
        _ => format!(
            "Waiting for the {} Secret {ns}/{name} to be synced",
            gate.noun.to_lowercase()
        ),
    };
    Gate::wait(gate.reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::{example, values};
    use nova_api::v1alpha1::{MessagingTLSSpec, NovaTLSSpec, SecretRefSpec, SecretStoreRefSpec};

    fn complete(nova: &Nova) -> Vec<Credential> {
        gates(&nova.spec)
            .iter()
            .map(|g| Credential {
                secret: Some(values(
                    &g.keys
                        .iter()
                        .map(|k| (k.as_str(), format!("value-of-{}-{k}", g.secret)))
                        .collect::<Vec<_>>(),
                )),
                external_secret: Some(true),
            })
            .collect()
    }

    fn observed(nova: &Nova) -> Observed {
        Observed {
            store: Store::Present { ready: true },
            credentials: complete(nova),
        }
    }

    fn verdict(plan: &NovaPlan) -> (bool, Reason, String) {
        let v = plan.verdict(CONDITION).expect("a SecretsReady verdict");
        (v.ok, v.reason, v.message.clone())
    }

    #[test]
    fn every_gate_passing_resolves_the_values_and_their_digests() {
        let nova = example();
        let plan = plan(&nova, &observed(&nova), &Resolved::default());
        assert_eq!(
            verdict(&plan),
            (
                true,
                Reason::SecretsAvailable,
                "All required Secrets are available".into()
            )
        );
        assert_eq!(plan.flow, crate::pipeline::Flow::Continue);
        let password = plan.resolved.service_password.as_ref().expect("password");
        assert_eq!(password.expose(), "value-of-nova-keystone-password");
        assert_eq!(plan.resolved.digests.authtoken, password.digest());
        assert!(!plan.resolved.digests.metadata_secret.is_empty());
        assert!(plan.resolved.messaging_ca.is_none(), "no TLS bus");
        assert!(plan.children.is_empty());
    }

    #[test]
    fn every_wait_reason_in_gate_order() {
        let ns = "openstack";
        let mut tls = example();
        tls.spec.messaging.tls = Some(MessagingTLSSpec {
            ca_bundle_secret_ref: SecretRefSpec {
                name: "rabbitmq-ca".into(),
                key: None,
            },
        });
        let mut cluster_store = example();
        cluster_store.spec.secret_store_ref = Some(SecretStoreRefSpec {
            kind: Some(SecretStoreKind::ClusterSecretStore),
            name: "openbao".into(),
        });
        let without = |nova: &Nova, gate: usize, credential: Credential| {
            let mut o = observed(nova);
            o.credentials[gate] = credential;
            o
        };
        let missing = Credential::default();
        let cases: Vec<(&str, Nova, Observed, Reason, String)> = vec![
            (
                "default store absent",
                example(),
                Observed {
                    store: Store::Absent,
                    ..observed(&example())
                },
                Reason::SecretStoreNotReady,
                "ClusterSecretStore \"openbao-cluster-store\" is not ready; upstream secret backend unreachable".into(),
            ),
            (
                "store not ready",
                example(),
                Observed {
                    store: Store::Present { ready: false },
                    ..observed(&example())
                },
                Reason::SecretStoreNotReady,
                "ClusterSecretStore \"openbao-cluster-store\" is not ready; upstream secret backend unreachable".into(),
            ),
            (
                "namespace-scoped operator",
                cluster_store.clone(),
                Observed {
                    store: Store::Unreadable,
                    ..observed(&cluster_store)
                },
                Reason::ClusterSecretStoreUnsupported,
                format!("ClusterSecretStore \"openbao\" cannot be read by a namespace-scoped operator; set spec.secretStoreRef to a SecretStore in namespace \"{ns}\""),
            ),
            (
                "api database Secret and ExternalSecret absent",
                example(),
                without(&example(), 0, missing.clone()),
                Reason::WaitingForDBCredentials,
                format!("Database credentials ExternalSecret {ns}/nova-api-db not found yet"),
            ),
            (
                "cell database Secret not synced",
                example(),
                without(&example(), 1, Credential { secret: None, external_secret: Some(false) }),
                Reason::WaitingForDBCredentials,
                format!("Waiting for the database credentials Secret {ns}/nova-db to be synced"),
            ),
            (
                "synced but missing a key",
                example(),
                without(&example(), 1, Credential { secret: Some(values(&[("password", "p".into())])), external_secret: Some(true) }),
                Reason::WaitingForDBCredentials,
                "Database credentials Secret exists but is missing expected keys".into(),
            ),
            (
                "service user",
                example(),
                without(&example(), 2, missing.clone()),
                Reason::WaitingForServiceUserCredentials,
                format!("Service user credentials ExternalSecret {ns}/nova-keystone not found yet"),
            ),
            (
                "metadata shared secret",
                example(),
                without(&example(), 3, missing.clone()),
                Reason::WaitingForMetadataSharedSecret,
                format!("Metadata shared secret ExternalSecret {ns}/nova-metadata-secret not found yet"),
            ),
            (
                "empty metadata shared secret",
                example(),
                without(&example(), 3, Credential { secret: Some(values(&[("shared_secret", String::new())])), external_secret: None }),
                Reason::MetadataSharedSecretEmpty,
                format!("Metadata shared secret Secret {ns}/nova-metadata-secret key \"shared_secret\" is empty; nova would verify every proxied metadata request against an empty key"),
            ),
            (
                "messaging CA on a TLS bus",
                tls.clone(),
                without(&tls, 4, missing.clone()),
                Reason::WaitingForMessagingCA,
                format!("Messaging CA bundle ExternalSecret {ns}/rabbitmq-ca not found yet"),
            ),
        ];
        for (what, nova, observed, reason, message) in cases {
            let plan = plan(&nova, &observed, &Resolved::default());
            assert_eq!(verdict(&plan), (false, reason, message), "{what}");
            assert_eq!(
                plan.flow,
                crate::pipeline::Flow::RequeueAfter(REQUEUE_SECRET_POLLING),
                "{what}"
            );
            assert_eq!(
                plan.resolved,
                Resolved::default(),
                "{what}: nothing resolved"
            );
        }
    }

    #[test]
    fn a_tls_bus_resolves_the_ca_bundle() {
        let mut nova = example();
        nova.spec.messaging.tls = Some(MessagingTLSSpec {
            ca_bundle_secret_ref: SecretRefSpec {
                name: "rabbitmq-ca".into(),
                key: None,
            },
        });
        let plan = plan(&nova, &observed(&nova), &Resolved::default());
        assert_eq!(
            plan.resolved.messaging_ca.as_ref().map(Sensitive::expose),
            Some("value-of-rabbitmq-ca-ca.crt")
        );
    }

    #[test]
    fn spec_tls_waits_for_its_ca_bundle_then_resolves_it() {
        let mut nova = example();
        nova.spec.tls = Some(NovaTLSSpec {
            ca_bundle_secret_ref: SecretRefSpec {
                name: "keystone-ca".into(),
                key: Some("bundle.pem".into()),
            },
        });
        let plan = plan(&nova, &observed(&nova), &Resolved::default());
        assert_eq!(
            plan.resolved.endpoint_ca.as_ref().map(Sensitive::expose),
            Some("value-of-keystone-ca-bundle.pem")
        );
        let mut missing = observed(&nova);
        missing.credentials.last_mut().expect("the CA gate").secret = None;
        let (ok, reason, message) = verdict(&super::plan(&nova, &missing, &Resolved::default()));
        assert!(!ok);
        assert_eq!(reason, Reason::WaitingForEndpointCA);
        assert!(message.contains("keystone-ca"), "{message}");
    }
}
