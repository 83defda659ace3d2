//! The TransportURLSecret step (`common-types.md` §3.8): the rabbit:// URL into
//! `{name}-transport-url`, its digest, and the broker port later steps open and probe.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::effective::{self, secret_keys};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;

use crate::clusters::SecretValues;
use crate::clusters::{Caching, KindSpec};
use crate::nova::resolved::{Digests, Resolved};
use crate::nova::{NovaPass, NovaPlan};
use crate::objects::kinds;
use crate::pipeline::uses::{Uses, names, owns};
use crate::pipeline::{
    Gate, Plan, REQUEUE_SECRET_POLLING, StepError, StepFuture, Waiting, observe_then_plan,
};
use crate::render::broker_url::{self, UrlProblem};
use crate::render::children::derived_secret;
use crate::sensitive::Sensitive;

/// The one key of the derived transport URL Secret.
pub const TRANSPORT_URL_KEY: &str = "transport_url";

const CONDITION: NovaConditionType = NovaConditionType::SecretsReady;
const DEFAULT_USER_KEYS: [&str; 4] = ["username", "password", "host", "port"];

/// What the step reads, by messaging mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// spec.messaging.clusterRef.
    Managed {
        /// Whether the RabbitmqCluster exists.
        cluster: bool,
        /// Its `status.defaultUser.secretReference` (namespace, name), once set.
        default_user: Option<(String, String)>,
        /// That Secret's keys; None when it does not exist.
        secret: Option<SecretValues>,
    },
    /// spec.messaging.secretRef: the Secret's URL key; None when the Secret does not exist.
    Brownfield {
        /// The Secret's key.
        secret: Option<SecretValues>,
    },
}

/// The broker's Secrets and RabbitmqCluster, by name, and the derived transport URL Secret.
pub const KINDS: &[Uses] = &[
    names(|| KindSpec::of::<Secret>(Caching::OnDemand)),
    names(|| KindSpec::external(kinds::rabbitmq_cluster(), Caching::Full)),
    owns(|| KindSpec::of::<Secret>(Caching::OnDemand)),
];

/// The TransportURLSecret step.
pub fn run(pass: &NovaPass) -> StepFuture<'_, Nova> {
    observe_then_plan(pass, observe, plan)
}

async fn observe(pass: &NovaPass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let messaging = &pass.cr.spec.messaging;
    let Some(cluster) = &messaging.cluster_ref else {
        let reference = messaging.secret_ref.clone().unwrap_or_default();
        let key = effective::secret_key(&reference, secret_keys::TRANSPORT_URL);
        return Ok(Observed::Brownfield {
            secret: pass.cluster.secret(ns, &reference.name, &[key]).await?,
        });
    };
    let Some(rabbit) = pass
        .cluster
        .get(&kinds::rabbitmq_cluster(), Some(ns), &cluster.name)
        .await?
    else {
        return Ok(Observed::Managed {
            cluster: false,
            default_user: None,
            secret: None,
        });
    };
    let reference = &rabbit.data["status"]["defaultUser"]["secretReference"];
    let default_user = reference["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(|name| {
            let secret_ns = reference["namespace"].as_str().filter(|n| !n.is_empty());
            (secret_ns.unwrap_or(ns).to_owned(), name.to_owned())
        });
    let secret = match &default_user {
        Some((secret_ns, name)) => {
            pass.cluster
                .secret(secret_ns, name, &DEFAULT_USER_KEYS)
                .await?
        }
        None => None,
    };
    Ok(Observed::Managed {
        cluster: true,
        default_user,
        secret,
    })
}

/// The TransportURLSecret step's plan.
pub fn plan(nova: &Nova, observed: &Observed, _: &Resolved) -> NovaPlan {
    let (url, port) = match url(nova, observed) {
        Ok(Gate::Ready(found)) => found,
        Ok(Gate::Wait { reason, message }) => {
            return Plan::wait(
                CONDITION,
                Waiting { reason, message },
                REQUEUE_SECRET_POLLING,
            );
        }
        // A URL of another scheme: no condition, no derived Secret, the pass ends on the error.
        Err(error) => return Plan::fail(error),
    };
    let name = nova.name_any();
    let data = BTreeMap::from([(TRANSPORT_URL_KEY.to_owned(), url.clone())]);
    Plan::proceed()
        .apply(derived_secret(
            &NovaNames::new(&name).transport_url(),
            &data,
        ))
        .resolve(Resolved {
            digests: Digests {
                transport_url: url.digest(),
                ..Default::default()
            },
            transport_url: Some(url),
            broker_port: Some(port),
            ..Default::default()
        })
}

fn waiting(message: String) -> Gate<(Sensitive, u16)> {
    Gate::wait(Reason::WaitingForMessagingCredentials, message)
}

/// The URL and its broker port, a wait, or the scheme error.
fn url(nova: &Nova, observed: &Observed) -> Result<Gate<(Sensitive, u16)>, StepError> {
    let ns = nova.namespace().unwrap_or_default();
    let messaging = &nova.spec.messaging;
    match observed {
        Observed::Managed {
            cluster,
            default_user,
            secret,
        } => {
            let name = messaging.cluster_ref.clone().unwrap_or_default().name;
            if !cluster {
                return Ok(waiting(format!("RabbitmqCluster {ns}/{name} not found")));
            }
            let Some((secret_ns, secret_name)) = default_user else {
                return Ok(waiting(format!(
                    "RabbitmqCluster {ns}/{name} has no status.defaultUser.secretReference.name yet"
                )));
            };
            let Some(secret) = secret else {
                return Ok(waiting(format!(
                    "default-user Secret {secret_ns}/{secret_name} not found"
                )));
            };
            let mut values = Vec::new();
            for key in DEFAULT_USER_KEYS {
                match secret.get(key).filter(|v| !v.is_empty()) {
                    Some(v) => values.push(v.clone()),
                    None => {
                        return Ok(waiting(format!(
                            "default-user Secret {secret_ns}/{secret_name} missing key \"{key}\""
                        )));
                    }
                }
            }
            // The host and port are addresses, not credentials: printed as they are.
            let host = Sensitive::plain(values[2].expose());
            let port = Sensitive::plain(values[3].expose());
            let url = Sensitive::derive([&values[0], &values[1], &host, &port], |[u, p, h, n]| {
                broker_url::managed(u, p, h, n)
            });
            let port = broker_url::egress_port(url.expose());
            Ok(Gate::Ready((url, port)))
        }
        Observed::Brownfield { secret } => {
            let reference = messaging.secret_ref.clone().unwrap_or_default();
            let name = &reference.name;
            let key = effective::secret_key(&reference, secret_keys::TRANSPORT_URL);
            let Some(secret) = secret else {
                return Ok(waiting(format!(
                    "brownfield transport-URL Secret {ns}/{name} not found"
                )));
            };
            let Some(url) = secret.get(key).filter(|v| !v.is_empty()) else {
                return Ok(waiting(format!(
                    "brownfield transport-URL Secret {ns}/{name} missing key \"{key}\""
                )));
            };
            let context = format!("brownfield transport URL in Secret {ns}/{name} key \"{key}\"");
            match broker_url::check_brownfield(url.expose()) {
                Ok(port) => Ok(Gate::Ready((url.clone(), port))),
                Err(problem @ UrlProblem::Scheme(_)) => Err(StepError::Refused(format!(
                    "{context}: {}",
                    problem.describe()
                ))),
                // Refused before the derived Secret is written, so a restarting pod keeps the
                // last accepted URL.
                Err(problem) => Ok(Gate::wait(
                    Reason::TransportURLRejected,
                    format!("{context}: {}", problem.describe()),
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nova::fixtures::{example, values};
    use crate::pipeline::Flow;
    use nova_api::v1alpha1::SecretRefSpec;

    fn default_user() -> SecretValues {
        values(&[
            ("username", "default_user".into()),
            ("password", "planted-pw".into()),
            ("host", "rmq.openstack.svc".into()),
            ("port", "5671".into()),
        ])
    }

    fn managed(secret: Option<SecretValues>) -> Observed {
        Observed::Managed {
            cluster: true,
            default_user: Some(("openstack".into(), "rmq-default-user".into())),
            secret,
        }
    }

    fn brownfield() -> Nova {
        let mut nova = example();
        nova.spec.messaging.cluster_ref = None;
        nova.spec.messaging.secret_ref = Some(SecretRefSpec {
            name: "bus".into(),
            key: None,
        });
        nova
    }

    fn brownfield_url(url: &str) -> Observed {
        Observed::Brownfield {
            secret: Some(values(&[("transport_url", url.into())])),
        }
    }

    #[test]
    fn a_managed_url_is_derived_with_its_port() {
        let plan = plan(
            &example(),
            &managed(Some(default_user())),
            &Resolved::default(),
        );
        assert_eq!(plan.flow, Flow::Continue);
        assert_eq!(plan.children.len(), 1);
        assert_eq!(plan.children[0].name, "nova-transport-url");
        let url = plan.resolved.transport_url.as_ref().expect("url");
        assert_eq!(
            url.expose(),
            "rabbit://default_user:planted-pw@rmq.openstack.svc:5671/"
        );
        assert_eq!(
            url.shown(),
            "rabbit://REDACTED:REDACTED@rmq.openstack.svc:5671/"
        );
        assert_eq!(plan.resolved.broker_port, Some(5671));
        assert_eq!(plan.resolved.digests.transport_url, url.digest());
    }

    #[test]
    fn every_wait_and_refusal() {
        let ns = "openstack";
        let cases: Vec<(&str, Nova, Observed, Reason, String)> = vec![
            (
                "no cluster",
                example(),
                Observed::Managed {
                    cluster: false,
                    default_user: None,
                    secret: None,
                },
                Reason::WaitingForMessagingCredentials,
                format!("RabbitmqCluster {ns}/openstack-rabbitmq not found"),
            ),
            (
                "no default user yet",
                example(),
                Observed::Managed {
                    cluster: true,
                    default_user: None,
                    secret: None,
                },
                Reason::WaitingForMessagingCredentials,
                format!(
                    "RabbitmqCluster {ns}/openstack-rabbitmq has no status.defaultUser.secretReference.name yet"
                ),
            ),
            (
                "no default-user Secret",
                example(),
                managed(None),
                Reason::WaitingForMessagingCredentials,
                format!("default-user Secret {ns}/rmq-default-user not found"),
            ),
            (
                "an empty key",
                example(),
                managed(Some(values(&[
                    ("username", "u".into()),
                    ("password", String::new()),
                ]))),
                Reason::WaitingForMessagingCredentials,
                format!("default-user Secret {ns}/rmq-default-user missing key \"password\""),
            ),
            (
                "no brownfield Secret",
                brownfield(),
                Observed::Brownfield { secret: None },
                Reason::WaitingForMessagingCredentials,
                format!("brownfield transport-URL Secret {ns}/bus not found"),
            ),
            (
                "no brownfield key",
                brownfield(),
                Observed::Brownfield {
                    secret: Some(values(&[])),
                },
                Reason::WaitingForMessagingCredentials,
                format!("brownfield transport-URL Secret {ns}/bus missing key \"transport_url\""),
            ),
            (
                "no explicit port",
                brownfield(),
                brownfield_url("rabbit://u:planted-pw@rmq.example.com/"),
                Reason::TransportURLRejected,
                format!(
                    "brownfield transport URL in Secret {ns}/bus key \"transport_url\": {}",
                    UrlProblem::NoExplicitPort.describe()
                ),
            ),
            (
                "an IPv6 literal",
                brownfield(),
                brownfield_url("rabbit://u:planted-pw@[fd00::1]:5672/"),
                Reason::TransportURLRejected,
                format!(
                    "brownfield transport URL in Secret {ns}/bus key \"transport_url\": {}",
                    UrlProblem::Ipv6Literal.describe()
                ),
            ),
        ];
        for (what, nova, observed, reason, message) in cases {
            let plan = plan(&nova, &observed, &Resolved::default());
            let v = plan.verdict(CONDITION).expect("verdict");
            assert_eq!(
                (v.ok, v.reason, v.message.clone()),
                (false, reason, message),
                "{what}"
            );
            assert!(
                plan.children.is_empty(),
                "{what}: the derived Secret is left untouched"
            );
            assert_eq!(
                plan.flow,
                Flow::RequeueAfter(REQUEUE_SECRET_POLLING),
                "{what}"
            );
            assert!(!v.message.contains("planted-pw"), "{what}");
        }
    }

    #[test]
    fn another_scheme_fails_the_pass_without_quoting_the_url() {
        for (url, expected) in [
            (
                "amqp://u:planted-pw@h:5672/",
                "scheme must be rabbit, got \"amqp\"",
            ),
            (
                "amqp//user:planted-pw@h/?x=a://",
                "scheme must be rabbit, but the URL has no valid scheme",
            ),
        ] {
            let plan = plan(&brownfield(), &brownfield_url(url), &Resolved::default());
            assert!(
                plan.verdicts.is_empty(),
                "the flow sets no condition for it"
            );
            assert!(plan.children.is_empty());
            let error = plan.error.expect("an error").to_string();
            assert_eq!(
                error,
                format!(
                    "brownfield transport URL in Secret openstack/bus key \"transport_url\": {expected}"
                )
            );
            assert!(!error.contains("planted-pw"));
        }
    }

    #[test]
    fn a_brownfield_url_is_used_verbatim() {
        let url = "rabbit://u:planted-pw@h1:5672,u:planted-pw@h2:5673/nova?ssl=1";
        let plan = plan(&brownfield(), &brownfield_url(url), &Resolved::default());
        assert_eq!(
            plan.resolved.transport_url.as_ref().map(Sensitive::expose),
            Some(url)
        );
        assert_eq!(plan.resolved.broker_port, Some(5673));
    }
}
