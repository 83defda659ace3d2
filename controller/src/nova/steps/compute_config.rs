//! The ComputeConfig step (`nova-crd.txt`, "Compute contract" and "The remote contract"):
//! `{name}-compute-config` under a stable name, updated in place, and while spec.remoteCompute
//! is set, `{name}-remote-compute-config` for a compute on another cluster.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::core::ApiResource;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective::{self, secret_keys};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{LocalSecretRef, Nova};

use crate::clusters::SecretValues;
use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::{Resolved, StatusUpdate};
use crate::nova::{NovaPass, NovaPlan};
use crate::pipeline::uses::{Uses, names, owns};
use crate::pipeline::{Plan, StepError, StepFuture, observe_then_plan};
use crate::render::broker_url::{self, UrlProblem};
use crate::render::children::{ContractSecrets, contract_data, derived_secret};
use crate::render::{ContractVariant, RenderError};

const CONDITION: NovaConditionType = NovaConditionType::ComputeConfigReady;
const REMOTE_REF: &str = "spec.remoteCompute.transportURLSecretRef";

/// What the ComputeConfig step reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// While spec.remoteCompute is set: the external transport URL Secret's key (None when the
    /// Secret does not exist).
    pub remote_url: Option<SecretValues>,
    /// Whether `{name}-remote-compute-config` exists, and if so whether this Nova controls it.
    pub remote_contract: Option<bool>,
}

/// The remote transport URL Secret, by name, and the two compute contract Secrets.
pub const KINDS: &[Uses] = &[
    names(|| KindSpec::of::<Secret>(Caching::OnDemand)),
    owns(|| KindSpec::of::<Secret>(Caching::OnDemand)),
];

/// The ComputeConfig step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let remote_url = match &pass.cr.spec.remote_compute {
        Some(remote) => {
            let reference = &remote.transport_url_secret_ref;
            let key = effective::secret_key(reference, secret_keys::TRANSPORT_URL);
            pass.cluster.secret(ns, &reference.name, &[key]).await?
        }
        None => None,
    };
    let remote = NovaNames::new(&pass.cr.name_any()).remote_compute_config();
    let remote_contract = pass
        .cluster
        .metadata(&ApiResource::erase::<Secret>(&()), ns, &remote)?
        .map(|m| pass.owner.controls(&m.metadata));
    Ok(Observed {
        remote_url,
        remote_contract,
    })
}

/// The values the Secrets and TransportURLSecret steps resolved for the in-cluster contract.
fn in_cluster_secrets(resolved: &Resolved) -> Option<ContractSecrets> {
    Some(ContractSecrets {
        transport_url: resolved.transport_url.clone()?,
        password: resolved.service_password.clone()?,
        metadata_shared_secret: resolved.metadata_shared_secret.clone()?,
        ca: resolved.messaging_ca.clone(),
        endpoint_ca: resolved.endpoint_ca.clone(),
    })
}

/// A contract the renderers refuse is not written (the published one stays as it was); the
/// condition names the field, and later steps still run.
fn not_rendered(plan: NovaPlan, error: &RenderError) -> NovaPlan {
    plan.report(
        CONDITION,
        false,
        Reason::ComputeConfigError,
        error.to_string(),
    )
}

/// The ComputeConfig step's plan.
pub fn plan(nova: &Nova, observed: &Observed, resolved: &Resolved) -> NovaPlan {
    let name = nova.name_any();
    let ns = nova.namespace().unwrap_or_default();
    let names = NovaNames::new(&name);
    let Some(mut secrets) = in_cluster_secrets(resolved) else {
        return Plan::fail(StepError::Refused(
            "the compute contract ran before its credentials were resolved".to_owned(),
        ));
    };
    let local = names.compute_config();
    let plan = match contract_data(&name, &ns, &nova.spec, ContractVariant::InCluster, &secrets) {
        Ok(data) => Plan::proceed().apply(derived_secret(&local, &data)).set(
            StatusUpdate::ComputeConfigSecretRef(Some(LocalSecretRef {
                name: local.clone(),
            })),
        ),
        Err(error) => return not_rendered(Plan::proceed(), &error),
    };
    let remote = names.remote_compute_config();
    let Some(remote_spec) = &nova.spec.remote_compute else {
        // Without spec.remoteCompute: delete a remote contract this Nova controls (never a
        // same-named Secret it does not) and clear the reference.
        let plan = if observed.remote_contract == Some(true) {
            plan.remove(ApiResource::erase::<Secret>(&()), remote)
        } else {
            plan
        };
        return plan
            .set(StatusUpdate::RemoteComputeConfigSecretRef(None))
            .ready(
                CONDITION,
                Reason::ComputeConfigPublished,
                format!("Published {local}"),
            );
    };
    let reference = &remote_spec.transport_url_secret_ref;
    let key = effective::secret_key(reference, secret_keys::TRANSPORT_URL);
    let url = observed
        .remote_url
        .as_ref()
        .and_then(|s| s.get(key))
        .filter(|v| !v.is_empty());
    let Some(url) = url else {
        // Waiting for the external URL: the condition says so; later steps still run, and a
        // remote contract published earlier stays as it was.
        let what = match &observed.remote_url {
            None => format!("Secret {ns}/{} not found", reference.name),
            Some(_) => format!(
                "Secret {ns}/{} has no non-empty \"{key}\" key",
                reference.name
            ),
        };
        return plan.report(
            CONDITION,
            false,
            Reason::WaitingForRemoteTransportURL,
            format!("{REMOTE_REF}: {what}"),
        );
    };
    if let Err(problem @ UrlProblem::Scheme(_)) = broker_url::check_brownfield(url.expose()) {
        // Another scheme halts the steps behind this one until the Secret is fixed.
        let message = format!("{REMOTE_REF}: {}", problem.describe());
        return plan
            .report(
                CONDITION,
                false,
                Reason::ComputeConfigError,
                message.clone(),
            )
            .failing(StepError::Refused(message));
    }
    secrets.transport_url = url.clone();
    match contract_data(&name, &ns, &nova.spec, ContractVariant::Remote, &secrets) {
        Ok(data) => plan
            .apply(derived_secret(&remote, &data))
            .set(StatusUpdate::RemoteComputeConfigSecretRef(Some(
                LocalSecretRef {
                    name: remote.clone(),
                },
            )))
            .ready(
                CONDITION,
                Reason::ComputeConfigPublished,
                format!("Published {local} and {remote}"),
            ),
        Err(error) => not_rendered(plan, &error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::{example, values};
    use crate::pipeline::Flow;
    use crate::sensitive::Sensitive;
    use nova_api::v1alpha1::{NovaRemoteComputeSpec, SecretRefSpec};

    fn resolved() -> Resolved {
        Resolved {
            transport_url: Some(Sensitive::new("rabbit://u:p@h:5672/")),
            service_password: Some(Sensitive::new("pw")),
            metadata_shared_secret: Some(Sensitive::new("shared")),
            ..Default::default()
        }
    }

    fn remote() -> Nova {
        let mut nova = example();
        nova.spec.remote_compute = Some(NovaRemoteComputeSpec {
            keystone_endpoint: "https://keystone.example.com/v3".into(),
            transport_url_secret_ref: SecretRefSpec {
                name: "remote-url".into(),
                key: None,
            },
        });
        nova
    }

    fn remote_url(url: &str) -> Observed {
        Observed {
            remote_url: Some(values(&[("transport_url", url.into())])),
            remote_contract: None,
        }
    }

    fn verdict(plan: &NovaPlan) -> (bool, Reason, String) {
        let v = plan.verdict(CONDITION).expect("verdict");
        (v.ok, v.reason, v.message.clone())
    }

    #[test]
    fn the_in_cluster_contract_is_published_and_a_stale_remote_one_withdrawn() {
        let observed = Observed {
            remote_url: None,
            remote_contract: Some(true),
        };
        let plan = plan(&example(), &observed, &resolved());
        assert_eq!(
            verdict(&plan),
            (
                true,
                Reason::ComputeConfigPublished,
                "Published nova-compute-config".into()
            )
        );
        assert_eq!(plan.children.len(), 1);
        assert_eq!(plan.children[0].name, "nova-compute-config");
        assert_eq!(plan.removals.len(), 1);
        assert_eq!(plan.removals[0].name, "nova-remote-compute-config");
        assert_eq!(
            plan.status,
            [
                StatusUpdate::ComputeConfigSecretRef(Some(LocalSecretRef {
                    name: "nova-compute-config".into()
                })),
                StatusUpdate::RemoteComputeConfigSecretRef(None),
            ]
        );
        let foreign = super::plan(
            &example(),
            &Observed {
                remote_url: None,
                remote_contract: Some(false),
            },
            &resolved(),
        );
        assert!(
            foreign.removals.is_empty(),
            "a same-named Secret it does not control is left alone"
        );
    }

    #[test]
    fn the_remote_contract_waits_fails_or_publishes() {
        let waiting = plan(&remote(), &Observed::default(), &resolved());
        assert_eq!(
            verdict(&waiting),
            (
                false,
                Reason::WaitingForRemoteTransportURL,
                format!("{REMOTE_REF}: Secret openstack/remote-url not found")
            )
        );
        assert_eq!(
            waiting.flow,
            Flow::Continue,
            "the wait does not halt the pipeline"
        );
        assert_eq!(
            waiting.children.len(),
            1,
            "the in-cluster contract is still published"
        );

        let empty = plan(&remote(), &remote_url(""), &resolved());
        assert_eq!(
            verdict(&empty).2,
            format!(
                "{REMOTE_REF}: Secret openstack/remote-url has no non-empty \"transport_url\" key"
            )
        );

        let wrong = plan(
            &remote(),
            &remote_url("amqp://u:planted@h:5671/"),
            &resolved(),
        );
        assert_eq!(
            verdict(&wrong),
            (
                false,
                Reason::ComputeConfigError,
                format!("{REMOTE_REF}: scheme must be rabbit, got \"amqp\"")
            )
        );
        assert!(wrong.error.is_some());

        let published = plan(
            &remote(),
            &remote_url("rabbit://u:p@rmq.example.com:5671/"),
            &resolved(),
        );
        assert_eq!(
            verdict(&published),
            (
                true,
                Reason::ComputeConfigPublished,
                "Published nova-compute-config and nova-remote-compute-config".into()
            )
        );
        let names: Vec<&str> = published.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["nova-compute-config", "nova-remote-compute-config"]);
    }

    #[test]
    fn an_unrenderable_contract_is_not_written() {
        let mut nova = example();
        nova.spec.region = Some("one\ntwo".into());
        let plan = plan(&nova, &Observed::default(), &resolved());
        assert_eq!(verdict(&plan).1, Reason::ComputeConfigError);
        assert!(plan.children.is_empty());
        assert!(
            plan.status.is_empty(),
            "the published reference stays as it was"
        );
    }

    #[test]
    fn running_before_the_credentials_is_an_error() {
        let plan = plan(&example(), &Observed::default(), &Resolved::default());
        assert!(plan.error.is_some());
    }
}
