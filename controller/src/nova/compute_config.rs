//! The ComputeConfig step (`nova-crd.txt`, "Compute contract" and "The remote contract"):
//! `{name}-compute-config` under a stable name, updated in place, and while spec.remoteCompute
//! is set, `{name}-remote-compute-config` for a compute on another cluster.

use std::collections::BTreeMap;

use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective::{self, secret_keys};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{LocalSecretRef, NovaSpec};

use super::broker_url::{self, UrlProblem};
use super::pass::{NovaPass, Resolved, secret_value};
use crate::derived_secret::{self, Desired};
use crate::pipeline::{Flow, StepError, StepFuture, delete_if_present};
use crate::render::{self, ContractVariant, RenderError, contract_keys};
use crate::sensitive::Sensitive;

const CONDITION: NovaConditionType = NovaConditionType::ComputeConfigReady;
const REMOTE_REF: &str = "spec.remoteCompute.transportURLSecretRef";

/// The Secret-sourced values a contract carries.
pub struct ContractSecrets {
    /// The transport URL the contract's computes dial.
    pub transport_url: Sensitive,
    /// The service-user password.
    pub password: Sensitive,
    /// The metadata proxy shared secret.
    pub metadata_shared_secret: Sensitive,
    /// The broker CA bundle, on a TLS bus.
    pub ca: Option<Sensitive>,
}

/// The whole data of one contract Secret: the rendered keys plus the Secret-sourced ones.
pub fn contract_data(
    name: &str,
    namespace: &str,
    spec: &NovaSpec,
    variant: ContractVariant,
    secrets: &ContractSecrets,
) -> Result<BTreeMap<String, Sensitive>, RenderError> {
    let mut data: BTreeMap<String, Sensitive> =
        render::contract_static_keys(name, namespace, spec, variant)?
            .into_iter()
            .map(|(k, v)| (k, Sensitive::new(v)))
            .collect();
    data.insert(
        contract_keys::TRANSPORT_URL.to_owned(),
        secrets.transport_url.clone(),
    );
    data.insert(contract_keys::PASSWORD.to_owned(), secrets.password.clone());
    data.insert(
        contract_keys::METADATA_PROXY_SHARED_SECRET.to_owned(),
        secrets.metadata_shared_secret.clone(),
    );
    if spec.messaging.tls.is_some()
        && let Some(ca) = &secrets.ca
    {
        data.insert(contract_keys::CA_CRT.to_owned(), ca.clone());
    }
    Ok(data)
}

/// The values the Secrets and TransportURLSecret steps resolved for the in-cluster contract.
fn in_cluster_secrets(resolved: &Resolved) -> Result<ContractSecrets, StepError> {
    let missing = || {
        StepError::Refused(
            "the compute contract ran before its credentials were resolved".to_owned(),
        )
    };
    Ok(ContractSecrets {
        transport_url: resolved.transport_url.clone().ok_or_else(missing)?,
        password: resolved.service_password.clone().ok_or_else(missing)?,
        metadata_shared_secret: resolved
            .metadata_shared_secret
            .clone()
            .ok_or_else(missing)?,
        ca: resolved.messaging_ca.clone(),
    })
}

/// The ComputeConfig step.
pub fn run(pass: &mut NovaPass) -> StepFuture<'_> {
    Box::pin(async move {
        let name = pass.name();
        let names = NovaNames::new(&name);
        let secrets = in_cluster_secrets(&pass.resolved)?;
        let local = names.compute_config();
        match contract_data(
            &name,
            &pass.namespace(),
            &pass.nova.spec,
            ContractVariant::InCluster,
            &secrets,
        ) {
            Ok(data) => publish(pass, &local, data).await?,
            Err(error) => {
                // Not written: the published contract stays as it was.
                not_rendered(pass, &error);
                return Ok(Flow::Continue);
            }
        }
        pass.status.compute_config_secret_ref = Some(LocalSecretRef {
            name: local.clone(),
        });

        let published = if pass.nova.spec.remote_compute.is_some() {
            match publish_remote(pass, secrets).await? {
                Some(remote) => format!("{local} and {remote}"),
                // Waiting for the external URL: the condition says so; later steps still run.
                None => return Ok(Flow::Continue),
            }
        } else {
            withdraw_remote(pass).await?;
            local
        };
        pass.set_condition(
            CONDITION,
            true,
            Reason::ComputeConfigPublished,
            format!("Published {published}"),
        );
        Ok(Flow::Continue)
    })
}

/// A contract the renderers refuse is not written; the condition names the field.
fn not_rendered(pass: &mut NovaPass, error: &RenderError) {
    pass.set_condition(
        CONDITION,
        false,
        Reason::ComputeConfigError,
        error.to_string(),
    );
}

async fn publish(
    pass: &NovaPass,
    name: &str,
    data: BTreeMap<String, Sensitive>,
) -> Result<(), StepError> {
    derived_secret::ensure(
        &pass.secrets(),
        Desired {
            name,
            data,
            owner: pass.owner_reference()?,
            labels: pass.common_labels(),
        },
    )
    .await?;
    Ok(())
}

/// Publishes the remote contract; Some(its name) once written, None while it waits for the
/// external transport URL (a wait that does not halt the pipeline). A URL with another scheme
/// halts the steps behind this one until the Secret is fixed.
async fn publish_remote(
    pass: &mut NovaPass,
    mut secrets: ContractSecrets,
) -> Result<Option<String>, StepError> {
    let ns = pass.namespace();
    let reference = match &pass.nova.spec.remote_compute {
        Some(remote) => remote.transport_url_secret_ref.clone(),
        None => return Ok(None),
    };
    let key = effective::secret_key(&reference, secret_keys::TRANSPORT_URL).to_owned();
    let secret = pass.read_secret(&reference.name).await?;
    let url = secret
        .as_ref()
        .and_then(|s| secret_value(s, &key))
        .filter(|v| !v.is_empty());
    let Some(url) = url else {
        let what = match secret {
            None => format!("Secret {ns}/{} not found", reference.name),
            Some(_) => format!(
                "Secret {ns}/{} has no non-empty \"{key}\" key",
                reference.name
            ),
        };
        pass.set_condition(
            CONDITION,
            false,
            Reason::WaitingForRemoteTransportURL,
            format!("{REMOTE_REF}: {what}"),
        );
        return Ok(None);
    };
    if let Err(problem @ UrlProblem::Scheme(_)) = broker_url::check_brownfield(url.expose()) {
        let message = format!("{REMOTE_REF}: {}", problem.describe());
        pass.set_condition(
            CONDITION,
            false,
            Reason::ComputeConfigError,
            message.clone(),
        );
        return Err(StepError::Refused(message));
    }
    secrets.transport_url = url;
    let name = pass.name();
    let remote = NovaNames::new(&name).remote_compute_config();
    match contract_data(
        &name,
        &ns,
        &pass.nova.spec,
        ContractVariant::Remote,
        &secrets,
    ) {
        Ok(data) => publish(pass, &remote, data).await?,
        Err(error) => {
            not_rendered(pass, &error);
            return Ok(None);
        }
    }
    pass.status.remote_compute_config_secret_ref = Some(LocalSecretRef {
        name: remote.clone(),
    });
    Ok(Some(remote))
}

/// Without spec.remoteCompute: deletes a remote contract this Nova controls (never a
/// same-named Secret it does not) and clears the reference.
async fn withdraw_remote(pass: &mut NovaPass) -> Result<(), StepError> {
    let ns = pass.namespace();
    let name = pass.name();
    let remote = NovaNames::new(&name).remote_compute_config();
    if let Some(secret) = pass.read_secret(&remote).await? {
        let uid = pass.nova.uid().unwrap_or_default();
        let ours = secret
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == uid);
        if ours {
            delete_if_present(&pass.secrets(), &remote, &format!("Secret {ns}/{remote}")).await?;
        }
    }
    pass.status.remote_compute_config_secret_ref = None;
    Ok(())
}
