//! The TransportURLSecret step (`common-types.md` §3.8): the rabbit:// URL into
//! `{name}-transport-url`, its digest, and the broker port later steps open and probe.

use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective::{self, secret_keys};
use nova_api::names::NovaNames;

use super::broker_url::{self, UrlProblem};
use super::pass::{NovaPass, secret_value};
use crate::derived_secret::{self, Desired};
use crate::external;
use crate::pipeline::{Flow, REQUEUE_SECRET_POLLING, StepError, StepFuture};
use crate::sensitive::Sensitive;

/// The one key of the derived transport URL Secret.
pub const TRANSPORT_URL_KEY: &str = "transport_url";

/// Where the URL comes from, or why the step waits.
enum Resolution {
    Url(Sensitive, u16),
    Wait(Reason, String),
}

/// The TransportURLSecret step.
pub fn run(pass: &mut NovaPass) -> StepFuture<'_> {
    Box::pin(async move {
        let resolution = if pass.nova.spec.messaging.cluster_ref.is_some() {
            managed(pass).await?
        } else {
            brownfield(pass).await?
        };
        let (url, port) = match resolution {
            Resolution::Url(url, port) => (url, port),
            Resolution::Wait(reason, message) => {
                pass.set_condition(NovaConditionType::SecretsReady, false, reason, message);
                return Ok(Flow::RequeueAfter(REQUEUE_SECRET_POLLING));
            }
        };
        let name = pass.name();
        derived_secret::ensure(
            &pass.secrets(),
            Desired {
                name: &NovaNames::new(&name).transport_url(),
                data: derived_secret::one_key(TRANSPORT_URL_KEY, &url),
                owner: pass.owner_reference()?,
                labels: pass.common_labels(),
            },
        )
        .await?;
        pass.resolved.digests.transport_url = url.digest();
        pass.resolved.transport_url = Some(url);
        pass.resolved.broker_port = Some(port);
        Ok(Flow::Continue)
    })
}

fn waiting(message: String) -> Resolution {
    Resolution::Wait(Reason::WaitingForMessagingCredentials, message)
}

/// Managed: the RabbitmqCluster's default-user Secret.
async fn managed(pass: &NovaPass) -> Result<Resolution, StepError> {
    let ns = pass.namespace();
    let cluster = pass
        .nova
        .spec
        .messaging
        .cluster_ref
        .clone()
        .unwrap_or_default()
        .name;
    let rabbit = pass
        .dynamic(&external::rabbitmq_cluster())
        .get_opt(&cluster)
        .await
        .map_err(|e| StepError::kube(format!("reading RabbitmqCluster {ns}/{cluster}"), e))?;
    let Some(rabbit) = rabbit else {
        return Ok(waiting(format!("RabbitmqCluster {ns}/{cluster} not found")));
    };
    let reference = &rabbit.data["status"]["defaultUser"]["secretReference"];
    let Some(secret_name) = reference["name"].as_str().filter(|n| !n.is_empty()) else {
        return Ok(waiting(format!(
            "RabbitmqCluster {ns}/{cluster} has no status.defaultUser.secretReference.name yet"
        )));
    };
    let secret_ns = reference["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or(&ns)
        .to_owned();
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(pass.ctx.client.clone(), &secret_ns);
    let secret = secrets
        .get_opt(secret_name)
        .await
        .map_err(|e| StepError::kube(format!("reading Secret {secret_ns}/{secret_name}"), e))?;
    let Some(secret) = secret else {
        return Ok(waiting(format!(
            "default-user Secret {secret_ns}/{secret_name} not found"
        )));
    };
    let mut values = Vec::new();
    for key in ["username", "password", "host", "port"] {
        match secret_value(&secret, key).filter(|v| !v.is_empty()) {
            Some(v) => values.push(v),
            None => {
                return Ok(waiting(format!(
                    "default-user Secret {secret_ns}/{secret_name} missing key \"{key}\""
                )));
            }
        }
    }
    let [user, password, host, port] =
        [&values[0], &values[1], &values[2], &values[3]].map(Sensitive::expose);
    let url = broker_url::managed(user, password, host, port);
    Ok(Resolution::Url(
        Sensitive::new(url.clone()),
        broker_url::egress_port(&url),
    ))
}

/// Brownfield: a complete URL in a Secret, checked for its scheme, an explicit port and no IPv6
/// literal host before anything is written, so a restarting pod keeps the last accepted URL.
async fn brownfield(pass: &NovaPass) -> Result<Resolution, StepError> {
    let ns = pass.namespace();
    let reference = pass
        .nova
        .spec
        .messaging
        .secret_ref
        .clone()
        .unwrap_or_default();
    let name = &reference.name;
    let key = effective::secret_key(&reference, secret_keys::TRANSPORT_URL);
    let Some(secret) = pass.read_secret(name).await? else {
        return Ok(waiting(format!(
            "brownfield transport-URL Secret {ns}/{name} not found"
        )));
    };
    let Some(url) = secret_value(&secret, key).filter(|v| !v.is_empty()) else {
        return Ok(waiting(format!(
            "brownfield transport-URL Secret {ns}/{name} missing key \"{key}\""
        )));
    };
    let context = format!("brownfield transport URL in Secret {ns}/{name} key \"{key}\"");
    match broker_url::check_brownfield(url.expose()) {
        Ok(port) => Ok(Resolution::Url(url, port)),
        Err(problem @ UrlProblem::Scheme(_)) => Err(StepError::Refused(format!(
            "{context}: {}",
            problem.describe()
        ))),
        Err(problem) => Ok(Resolution::Wait(
            Reason::TransportURLRejected,
            format!("{context}: {}", problem.describe()),
        )),
    }
}
