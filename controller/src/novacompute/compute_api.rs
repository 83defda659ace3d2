//! What the Aggregates, Services and Traits steps share in a pass: the one OpenStack client
//! (built by the first of them, its token the one every pass to that cloud shares) and one view
//! of the pool (the CR, the ledger as the steps before left it, and the other pools of the Nova).

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use nova_api::conditions::Reason;
use nova_api::v1alpha1::{NovaCompute, NovaComputeNodeStatus};

use super::resolved::NovaInputs;
use super::{NovaComputePass, NovaComputePlan, ledger};
use crate::objects::EventNote;
use crate::openstack::{Client, Credentials, Endpoints};

/// The client of this pass: the one an earlier step built, or a new one for the Nova, whose
/// Services are reached through the Nova's cluster (`novacompute.md` §7.1: directly for a
/// local Nova, through its target API server's service proxy for a placed one), its token
/// shared with every pass calling the same cloud as the same user.
fn client(pass: &NovaComputePass, nova: &NovaInputs) -> Arc<Client> {
    if let Some(client) = &pass.resolved.openstack {
        return client.clone();
    }
    let (endpoints, credentials) = addressing(nova);
    let cloud = nova.cluster.name.as_deref().unwrap_or_default();
    Arc::new(
        Client::new(nova.cluster.handle.transport(), endpoints, credentials)
            .trusting(nova.endpoint_ca.as_ref())
            .sharing(pass.shared.sessions(), cloud),
    )
}

/// Where the Nova's services are and who the pool calls them as: the Keystone and compute
/// URLs the NovaRef step resolved, the Nova's Placement override and region, its service user.
fn addressing(nova: &NovaInputs) -> (Endpoints, Credentials) {
    let spec = &nova.nova.spec;
    let c = &nova.credentials;
    (
        Endpoints {
            keystone: nova.keystone_url.clone(),
            nova: nova.compute_url.clone(),
            placement: spec
                .endpoints
                .as_ref()
                .and_then(|e| e.placement.as_ref())
                .and_then(|p| p.override_url.clone()),
            region: spec.region.clone(),
        },
        Credentials {
            username: c.username.clone(),
            password: c.password.clone(),
            project_name: c.project_name.clone(),
            user_domain_name: c.user_domain_name.clone(),
            project_domain_name: c.project_domain_name.clone(),
        },
    )
}

/// The condition an OpenStack row reports, its own poll, and an error the pass returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// True or False.
    pub ok: bool,
    /// The reason.
    pub reason: Reason,
    /// The message.
    pub message: String,
    /// End the pass and come back after this (the Traits step takes the shorter of it and the
    /// Services poll); None goes on.
    pub requeue: Option<Duration>,
    /// A failure the pass returns as its error (a Hypervisor the pool cannot write).
    pub error: Option<String>,
}

/// The pool as the three OpenStack steps see it in a pass; owned, so a step's settle can keep
/// it.
#[derive(Clone, Debug)]
pub struct PoolView {
    /// The NovaCompute as the pass read it.
    pub cr: Arc<NovaCompute>,
    /// The ledger as the steps before left it (the CR's may be older).
    pub nodes: Vec<NovaComputeNodeStatus>,
    /// The other NovaComputes of the Nova (any cluster), this one excluded.
    pub siblings: Vec<Arc<NovaCompute>>,
}

impl PoolView {
    /// The pool of `pass`.
    fn of(pass: &NovaComputePass) -> Self {
        Self {
            cr: pass.cr.clone(),
            nodes: current_ledger(pass),
            siblings: siblings(pass),
        }
    }

    /// The pool's namespace.
    pub fn namespace(&self) -> &str {
        self.cr.metadata.namespace.as_deref().unwrap_or_default()
    }

    /// The pool's name.
    pub fn name(&self) -> String {
        self.cr.name_any()
    }

    /// The name of the pool's Nova.
    pub fn nova(&self) -> &str {
        &self.cr.spec.nova_ref.name
    }

    /// Whether the pool is being deleted.
    pub fn deleting(&self) -> bool {
        self.cr.metadata.deletion_timestamp.is_some()
    }

    /// The other pools not being deleted: a deleting pool no longer needs aggregates or traits.
    pub fn live_siblings(&self) -> impl Iterator<Item = &Arc<NovaCompute>> {
        self.siblings
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
    }
}

/// What the Aggregates, Services and Traits steps start from.
pub struct Side {
    /// The client of this pass.
    pub client: Arc<Client>,
    /// The pool of this pass.
    pub pool: PoolView,
}

/// The client and the pool of this pass.
pub fn side(pass: &NovaComputePass, nova: &NovaInputs) -> Side {
    Side {
        client: client(pass, nova),
        pool: PoolView::of(pass),
    }
}

/// Adds a step's events to its plan.
pub fn with_events(
    plan: NovaComputePlan,
    events: impl IntoIterator<Item = EventNote>,
) -> NovaComputePlan {
    events
        .into_iter()
        .fold(plan, |plan, e| plan.event(e.reason, e.note))
}

/// The ledger as the steps before left it (the stored one on a pass that skipped the Nodes
/// step).
fn current_ledger(pass: &NovaComputePass) -> Vec<NovaComputeNodeStatus> {
    match &pass.resolved.nodes {
        Some(sets) => sets.ledger.clone(),
        None => ledger(&pass.cr).to_vec(),
    }
}

/// The other pools of the Nova: the Nodes step's list, or the shared index on a pass that
/// skipped it.
fn siblings(pass: &NovaComputePass) -> Vec<Arc<NovaCompute>> {
    match &pass.resolved.nodes {
        Some(sets) => sets.siblings.clone(),
        None => pass.shared.siblings(&pass.cr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::novacompute::fixtures::nova;
    use crate::novacompute::resolved::ServiceCredentials;
    use crate::sensitive::Sensitive;
    use nova_api::v1alpha1::{EndpointOverrideSpec, NovaEndpointsSpec};

    #[test]
    fn the_client_addresses_the_novas_services_as_its_service_user() {
        let mut cr = nova();
        cr.spec.region = Some("RegionTwo".into());
        cr.spec.endpoints = Some(NovaEndpointsSpec {
            placement: Some(EndpointOverrideSpec {
                override_url: Some("http://placement.ns.svc:8778".into()),
            }),
            ..Default::default()
        });
        let inputs = NovaInputs {
            nova: Arc::new(cr),
            image: nova_api::effective::compute_image(None, Some("2026.1")).expect("image"),
            contract_secret: "nova-compute-config".into(),
            keystone_url: "http://keystone.ns.svc:5000/v3".into(),
            compute_url: "http://nova.ns.svc.cluster.local:8774".into(),
            credentials: ServiceCredentials {
                username: "nova".into(),
                project_name: "service".into(),
                user_domain_name: "Users".into(),
                project_domain_name: "Projects".into(),
                password: Sensitive::new("p"),
            },
            endpoint_ca: None,
            cluster: crate::novacompute::fixtures::home(),
        };
        let (endpoints, credentials) = addressing(&inputs);
        assert_eq!(
            endpoints,
            Endpoints {
                keystone: "http://keystone.ns.svc:5000/v3".into(),
                nova: "http://nova.ns.svc.cluster.local:8774".into(),
                placement: Some("http://placement.ns.svc:8778".into()),
                region: Some("RegionTwo".into()),
            }
        );
        assert_eq!(
            (
                credentials.username.as_str(),
                credentials.project_name.as_str(),
                credentials.user_domain_name.as_str(),
                credentials.project_domain_name.as_str(),
                credentials.password.expose()
            ),
            ("nova", "service", "Users", "Projects", "p")
        );
    }
}
