//! The NovaRef step (`novacompute.md` §5.1): the Nova `spec.novaRef` names, in the pool's
//! namespace on the management cluster, and what the later steps take from it. In order it
//! waits for the Nova, its installed release, its published contract, its cluster, its
//! service-user password and, while the Nova sets spec.tls, its CA bundle (beyond the spec,
//! issue 30: the pool's Keystone, compute and Placement calls verify https against it), each
//! requeued after 15 s.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use nova_api::conditions::{NovaComputeConditionType, Reason};
use nova_api::defaults::{DEFAULT_DOMAIN, DEFAULT_SERVICE_PROJECT, DEFAULT_SERVICE_USERNAME};
use nova_api::effective::{self, secret_key, secret_keys};
use nova_api::v1alpha1::{Nova, NovaCompute};

use crate::clusters::{Caching, KindSpec};
use crate::clusters::{ClusterError, ClusterExt, SecretValues};
use crate::novacompute::resolved::{NovaCluster, NovaInputs, Resolved, ServiceCredentials};
use crate::novacompute::{NovaComputePass, NovaComputePlan};
use crate::openstack::trust::CaBundle;
use crate::pipeline::uses::{Uses, reads};
use crate::pipeline::{
    Plan, REQUEUE_SECRET_POLLING, StepError, StepFuture, Waiting, observe_then_plan,
};
use crate::render::workloads::api_service_url;

const CONDITION: NovaComputeConditionType = NovaComputeConditionType::NovaReady;

/// What the step reads.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The Nova, when it exists.
    pub nova: Option<Arc<Nova>>,
    /// The cluster the Nova is placed on, once it published its contract; or the resolver's
    /// error text.
    pub cluster: Option<Result<NovaCluster, String>>,
    /// The requested key of its service-user Secret on that cluster; None when the Secret
    /// does not exist.
    pub password: Option<SecretValues>,
    /// The requested key of the Nova's spec.tls CA Secret on that cluster, while spec.tls is
    /// set; None when it does not exist or is not named.
    pub endpoint_ca: Option<SecretValues>,
    /// Why a read failed (names the object, never a value).
    pub failure: Option<String>,
}

/// The Nova, read whole from the management cluster's cache, and its service user's Secret.
pub const KINDS: &[Uses] = &[
    reads(|| KindSpec::of::<Nova>(Caching::Full)),
    reads(|| KindSpec::of::<Secret>(Caching::OnDemand)),
];

/// The NovaRef step.
pub fn run(pass: &NovaComputePass) -> StepFuture<'_, NovaCompute> {
    observe_then_plan(pass, observe, plan)
}

/// Reads the Nova on the management cluster (where every CR lives, whatever cluster the pool
/// is placed on), resolves the Nova's own cluster and reads the password there.
async fn observe(pass: &NovaComputePass) -> Result<Observed, StepError> {
    let ns = pass.owner.namespace.as_str();
    let failed = |e: ClusterError| Observed {
        failure: Some(e.to_string()),
        ..Default::default()
    };
    let home = pass.clusters.local();
    let nova: Option<Nova> = match home.get_typed(ns, &pass.cr.spec.nova_ref.name).await {
        Ok(nova) => nova,
        Err(e) => return Ok(failed(e)),
    };
    let Some(nova) = nova.map(Arc::new) else {
        return Ok(Observed::default());
    };
    if published(&nova).is_none() {
        return Ok(Observed {
            nova: Some(nova),
            ..Default::default()
        });
    }
    let name = nova
        .spec
        .target_cluster_ref
        .as_ref()
        .map(|t| t.name.clone());
    let cluster = match pass.clusters.resolve(name.as_deref(), ns) {
        Ok(handle) => NovaCluster { name, handle },
        Err(error) => {
            return Ok(Observed {
                nova: Some(nova),
                cluster: Some(Err(error)),
                ..Default::default()
            });
        }
    };
    let user = &nova.spec.service_user.secret_ref;
    let key = secret_key(user, secret_keys::SERVICE_USER_PASSWORD);
    let password = match cluster.handle.secret(ns, &user.name, &[key]).await {
        Ok(values) => values,
        Err(e) => return Ok(failed(e)),
    };
    let endpoint_ca = match &nova.spec.tls {
        Some(tls) => {
            let key = secret_key(&tls.ca_bundle_secret_ref, secret_keys::ENDPOINT_CA);
            match (cluster.handle)
                .secret(ns, &tls.ca_bundle_secret_ref.name, &[key])
                .await
            {
                Ok(values) => values,
                Err(e) => return Ok(failed(e)),
            }
        }
        None => None,
    };
    Ok(Observed {
        nova: Some(nova),
        cluster: Some(Ok(cluster)),
        password,
        endpoint_ca,
        failure: None,
    })
}

/// The installed release and the contract Secret, once the Nova published both.
fn published(nova: &Nova) -> Option<(&str, &str)> {
    let status = nova.status.as_ref()?;
    let release = status
        .installed_release
        .as_deref()
        .filter(|r| !r.is_empty())?;
    let contract = status.compute_config_secret_ref.as_ref()?;
    Some((release, contract.name.as_str()))
}

fn or_default(value: Option<&String>, default: &str) -> String {
    value
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

/// Every gate in order, to the Nova's inputs.
fn gates(pool: &NovaCompute, observed: &Observed) -> Result<NovaInputs, Waiting> {
    let ns = pool.namespace().unwrap_or_default();
    let name = &pool.spec.nova_ref.name;
    let Some(nova) = &observed.nova else {
        return Err(waiting(
            Reason::NovaNotFound,
            format!("Nova {ns}/{name} not found"),
        ));
    };
    let Some(release) = nova
        .status
        .as_ref()
        .and_then(|s| s.installed_release.as_deref())
        .filter(|r| !r.is_empty())
    else {
        return Err(waiting(
            Reason::WaitingForInstalledRelease,
            format!("Nova {ns}/{name} has not installed a release yet"),
        ));
    };
    let Some((_, contract)) = published(nova) else {
        return Err(waiting(
            Reason::ComputeConfigNotPublished,
            format!("Nova {ns}/{name} has not published its compute contract yet"),
        ));
    };
    let cluster = match &observed.cluster {
        Some(Ok(cluster)) => cluster.clone(),
        unresolved => {
            let target = nova
                .spec
                .target_cluster_ref
                .as_ref()
                .map_or("", |t| t.name.as_str());
            let why = match unresolved {
                Some(Err(error)) => format!(": {error}"),
                _ => String::new(),
            };
            return Err(waiting(
                Reason::TargetClusterUnavailable,
                format!(
                    "Nova {ns}/{name} is placed on target cluster {target}, which does not resolve{why}"
                ),
            ));
        }
    };
    let user = &nova.spec.service_user;
    let key = secret_key(&user.secret_ref, secret_keys::SERVICE_USER_PASSWORD);
    let secret = format!("{ns}/{}", user.secret_ref.name);
    let password = match &observed.password {
        None => {
            return Err(waiting(
                Reason::WaitingForServiceUserSecret,
                format!("service-user Secret {secret} of Nova {ns}/{name} not found"),
            ));
        }
        Some(values) => match values.get(key).filter(|p| !p.expose().is_empty()) {
            Some(password) => password.clone(),
            None => {
                return Err(waiting(
                    Reason::WaitingForServiceUserSecret,
                    format!("service-user Secret {secret} carries no \"{key}\" key"),
                ));
            }
        },
    };
    let endpoint_ca = endpoint_ca(nova, observed)?;
    let Some(image) = effective::compute_image(pool.spec.image.as_ref(), Some(release)) else {
        return Err(waiting(
            Reason::WaitingForInstalledRelease,
            format!("Nova {ns}/{name} has not installed a release yet"),
        ));
    };
    Ok(NovaInputs {
        nova: nova.clone(),
        image,
        contract_secret: contract.to_owned(),
        keystone_url: nova.spec.keystone_endpoint.clone(),
        compute_url: api_service_url(name, &ns),
        credentials: ServiceCredentials {
            username: or_default(user.username.as_ref(), DEFAULT_SERVICE_USERNAME),
            project_name: or_default(user.project_name.as_ref(), DEFAULT_SERVICE_PROJECT),
            user_domain_name: or_default(user.user_domain_name.as_ref(), DEFAULT_DOMAIN),
            project_domain_name: or_default(user.project_domain_name.as_ref(), DEFAULT_DOMAIN),
            password,
        },
        endpoint_ca,
        cluster,
    })
}

/// The Nova's spec.tls bundle, while it names one: waits while its Secret or key is missing;
/// a key that holds no certificate stops the pool's calls too, named, never quoted.
fn endpoint_ca(nova: &Nova, observed: &Observed) -> Result<Option<CaBundle>, Waiting> {
    let Some(tls) = &nova.spec.tls else {
        return Ok(None);
    };
    let ns = nova.namespace().unwrap_or_default();
    let reference = &tls.ca_bundle_secret_ref;
    let key = secret_key(reference, secret_keys::ENDPOINT_CA);
    let secret = format!("{ns}/{}", reference.name);
    let Some(values) = &observed.endpoint_ca else {
        return Err(waiting(
            Reason::WaitingForEndpointCA,
            format!(
                "endpoint CA Secret {secret} of Nova {ns}/{} not found",
                nova.name_any()
            ),
        ));
    };
    let Some(pem) = values.get(key) else {
        return Err(waiting(
            Reason::WaitingForEndpointCA,
            format!("endpoint CA Secret {secret} carries no \"{key}\" key"),
        ));
    };
    CaBundle::from_pem(
        &format!("endpoint CA Secret {secret} key \"{key}\""),
        pem.expose().as_bytes(),
    )
    .map(Some)
    .map_err(|message| waiting(Reason::WaitingForEndpointCA, message))
}

fn waiting(reason: Reason, message: String) -> Waiting {
    Waiting { reason, message }
}

/// The NovaRef step's plan. A deleting pool whose Nova is gone goes on without it: the
/// teardown then skips the Nova side (services, aggregates and traits stay behind).
pub fn plan(pool: &NovaCompute, observed: &Observed, _: &Resolved) -> NovaComputePlan {
    if let Some(failure) = &observed.failure {
        return Plan::proceed()
            .report(CONDITION, false, Reason::NovaError, failure.clone())
            .failing(StepError::Refused(failure.clone()));
    }
    if observed.nova.is_none() && pool.metadata.deletion_timestamp.is_some() {
        return Plan::proceed();
    }
    match gates(pool, observed) {
        Ok(inputs) => {
            let ns = pool.namespace().unwrap_or_default();
            let release = inputs
                .nova
                .status
                .as_ref()
                .and_then(|s| s.installed_release.clone())
                .unwrap_or_default();
            Plan::proceed()
                .ready(
                    CONDITION,
                    Reason::NovaResolved,
                    format!(
                        "Nova {ns}/{} runs release {release}",
                        pool.spec.nova_ref.name
                    ),
                )
                .resolve(Resolved {
                    nova: Some(inputs),
                    ..Default::default()
                })
        }
        Err(waiting) => Plan::wait(CONDITION, waiting, REQUEUE_SECRET_POLLING),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::{home, nova, pool};
    use crate::pipeline::Flow;
    use crate::sensitive::Sensitive;

    fn password(value: &str) -> Option<SecretValues> {
        Some(SecretValues(
            [("password".to_owned(), Sensitive::new(value))].into(),
        ))
    }

    fn reason(observed: &Observed) -> (bool, Reason, String, Flow) {
        let plan = plan(&pool(), observed, &Resolved::default());
        let v = plan.verdict(CONDITION).expect("verdict");
        (v.ok, v.reason, v.message.clone(), plan.flow)
    }

    #[test]
    fn the_gates_wait_in_order_then_hand_on_the_nova() {
        let wait = Flow::RequeueAfter(REQUEUE_SECRET_POLLING);
        assert_eq!(
            reason(&Observed::default()),
            (
                false,
                Reason::NovaNotFound,
                "Nova openstack/nova not found".into(),
                wait
            )
        );
        let mut fresh = nova();
        fresh.status = None;
        let (_, r, m, _) = reason(&Observed {
            nova: Some(Arc::new(fresh)),
            ..Default::default()
        });
        assert_eq!(
            (r, m.as_str()),
            (
                Reason::WaitingForInstalledRelease,
                "Nova openstack/nova has not installed a release yet"
            )
        );
        let mut unpublished = nova();
        if let Some(s) = unpublished.status.as_mut() {
            s.compute_config_secret_ref = None;
        }
        let (_, r, _, _) = reason(&Observed {
            nova: Some(Arc::new(unpublished)),
            ..Default::default()
        });
        assert_eq!(r, Reason::ComputeConfigNotPublished);
        let mut placed = nova();
        placed.spec.target_cluster_ref = Some(nova_api::v1alpha1::TargetClusterRefSpec {
            name: "east".into(),
        });
        let (_, r, m, _) = reason(&Observed {
            nova: Some(Arc::new(placed)),
            cluster: Some(Err("cluster not found".into())),
            ..Default::default()
        });
        assert_eq!(
            (r, m.as_str()),
            (
                Reason::TargetClusterUnavailable,
                "Nova openstack/nova is placed on target cluster east, which does not resolve: cluster not found"
            )
        );
        let (_, r, m, _) = reason(&Observed {
            nova: Some(Arc::new(nova())),
            cluster: Some(Ok(home())),
            ..Default::default()
        });
        assert_eq!(
            (r, m.as_str()),
            (
                Reason::WaitingForServiceUserSecret,
                "service-user Secret openstack/nova-keystone of Nova openstack/nova not found"
            )
        );
        let (_, r, m, _) = reason(&Observed {
            nova: Some(Arc::new(nova())),
            cluster: Some(Ok(home())),
            password: password(""),
            ..Default::default()
        });
        assert_eq!(
            (r, m.as_str()),
            (
                Reason::WaitingForServiceUserSecret,
                "service-user Secret openstack/nova-keystone carries no \"password\" key"
            )
        );

        let observed = Observed {
            nova: Some(Arc::new(nova())),
            cluster: Some(Ok(home())),
            password: password("s3cret"),
            ..Default::default()
        };
        let ready = plan(&pool(), &observed, &Resolved::default());
        let v = ready.verdict(CONDITION).expect("verdict");
        assert_eq!(
            (v.ok, v.reason, v.message.as_str()),
            (
                true,
                Reason::NovaResolved,
                "Nova openstack/nova runs release 2026.1"
            )
        );
        assert_eq!(ready.flow, Flow::Continue);
        let inputs = ready.resolved.nova.expect("resolved");
        assert_eq!(inputs.image.reference(), "ghcr.io/c5c3/nova-compute:2026.1");
        assert_eq!(inputs.contract_secret, "nova-compute-config");
        assert_eq!(
            inputs.compute_url,
            "http://nova.openstack.svc.cluster.local:8774"
        );
        assert_eq!(inputs.credentials.username, "nova");
        assert_eq!(inputs.credentials.password.expose(), "s3cret");
    }

    #[test]
    fn a_deleting_pool_whose_nova_is_gone_goes_on_without_it() {
        let mut deleting = pool();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        let plan = plan(&deleting, &Observed::default(), &Resolved::default());
        assert_eq!(plan.flow, Flow::Continue);
        assert!(plan.verdicts.is_empty() && plan.resolved.nova.is_none());
    }
}
