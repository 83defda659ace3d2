//! The OpenStack calls a NovaCompute step decides on, as data ([`Action`]), and the one
//! executor that carries each out through the pass's [`Client`] ([`execute`]). A step's pure
//! `decide` lists its actions; the engine carries them out in order and hands the step's
//! `settle` what each did ([`Done`]) or why it failed (a message naming the action).

use super::nova::{Aggregate, ServiceDeletion};
use super::placement::{TraitDeletion, TraitEnsured};
use super::{Client, OpenStackError};

/// One OpenStack call a step decided on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create a host aggregate (in `zone` when given) and mark it `marker_key=marker`; an
    /// aggregate the mark could not be set on is deleted again, so no unmarked one is left.
    CreateAggregate {
        /// The name.
        name: String,
        /// The availability zone.
        zone: Option<String>,
        /// The marker's metadata key.
        marker_key: String,
        /// The marker's value.
        marker: String,
    },
    /// Delete a host aggregate.
    DeleteAggregate {
        /// Its id.
        id: i64,
        /// Its name, for messages.
        name: String,
    },
    /// Disable a compute service with a reason.
    DisableService {
        /// The service id.
        id: String,
        /// Its host, for messages.
        host: String,
        /// The disabled reason.
        reason: String,
    },
    /// Count the servers on a host. A read, but one that must follow the disable of the same
    /// host in the same batch: only a disabled host's count can release it.
    CountServers {
        /// The host.
        host: String,
    },
    /// Delete a compute service.
    DeleteService {
        /// The service id.
        id: String,
        /// Its host, for messages.
        host: String,
    },
    /// Create a custom trait in Placement unless it exists.
    EnsureTrait {
        /// The trait.
        name: String,
    },
    /// Delete a custom trait from Placement.
    DeleteTrait {
        /// The trait.
        name: String,
    },
}

/// What a carried-out action did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// The call succeeded and has nothing more to say.
    Ok,
    /// The aggregate was created and marked.
    AggregateCreated(Aggregate),
    /// The aggregate's name was taken meanwhile (409): the cloud changed under the batch.
    AggregateConcurrent,
    /// The servers on the host.
    Servers(usize),
    /// How deleting the service ended.
    Service(ServiceDeletion),
    /// How ensuring the trait ended.
    Trait(TraitEnsured),
    /// How deleting the trait ended.
    TraitDeletion(TraitDeletion),
}

impl Done {
    /// Whether the batch stops here although the call succeeded: the cloud changed under it,
    /// so the rest was decided on a stale view.
    pub fn ends_batch(&self) -> bool {
        matches!(self, Done::AggregateConcurrent)
    }
}

impl Action {
    /// The metric label of the action.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::CreateAggregate { .. } => "create_aggregate",
            Action::DeleteAggregate { .. } => "delete_aggregate",
            Action::DisableService { .. } => "disable_service",
            Action::CountServers { .. } => "count_servers",
            Action::DeleteService { .. } => "delete_service",
            Action::EnsureTrait { .. } => "ensure_trait",
            Action::DeleteTrait { .. } => "delete_trait",
        }
    }

    /// What the action does, as a failure message starts (`creating aggregate az1`).
    pub fn doing(&self) -> String {
        match self {
            Action::CreateAggregate { name, .. } => format!("creating aggregate {name}"),
            Action::DeleteAggregate { name, .. } => format!("deleting aggregate {name}"),
            Action::DisableService { host, .. } => {
                format!("disabling the compute service of {host}")
            }
            Action::CountServers { host } => format!("counting the servers on {host}"),
            Action::DeleteService { host, .. } => {
                format!("deleting the compute service of {host}")
            }
            Action::EnsureTrait { name } => format!("creating trait {name}"),
            Action::DeleteTrait { name } => format!("deleting trait {name}"),
        }
    }
}

/// The failing action prefixed to the client's error; a failed login is `authenticating`.
pub fn failed(action: &str, error: &OpenStackError) -> String {
    match error {
        OpenStackError::Unauthenticated(inner) => format!("authenticating: {inner}"),
        other => format!("{action}: {other}"),
    }
}

/// Carries out one action through `client`: what it did, or the failure message naming it.
pub async fn execute(client: &Client, action: &Action) -> Result<Done, String> {
    let fail = |e: OpenStackError| failed(&action.doing(), &e);
    match action {
        Action::CreateAggregate {
            name,
            zone,
            marker_key,
            marker,
        } => create_marked(client, name, zone.as_deref(), marker_key, marker).await,
        Action::DeleteAggregate { id, .. } => {
            client.delete_aggregate(*id).await.map_err(fail)?;
            Ok(Done::Ok)
        }
        Action::DisableService { id, reason, .. } => {
            client.disable_service(id, reason).await.map_err(fail)?;
            Ok(Done::Ok)
        }
        Action::CountServers { host } => client
            .count_servers(host)
            .await
            .map(Done::Servers)
            .map_err(fail),
        Action::DeleteService { id, .. } => client
            .delete_service(id)
            .await
            .map(Done::Service)
            .map_err(fail),
        Action::EnsureTrait { name } => client
            .ensure_trait(name)
            .await
            .map(Done::Trait)
            .map_err(fail),
        Action::DeleteTrait { name } => client
            .delete_trait(name)
            .await
            .map(Done::TraitDeletion)
            .map_err(fail),
    }
}

/// Creates and marks an aggregate, deleting it again when the mark cannot be set.
async fn create_marked(
    client: &Client,
    name: &str,
    zone: Option<&str>,
    marker_key: &str,
    marker: &str,
) -> Result<Done, String> {
    let created = match client.create_aggregate(name, zone).await {
        Ok(Some(created)) => created,
        Ok(None) => return Ok(Done::AggregateConcurrent),
        Err(e) => return Err(failed(&format!("creating aggregate {name}"), &e)),
    };
    if let Err(e) = client
        .set_aggregate_metadata(created.id, marker_key, marker)
        .await
    {
        let mut message = failed(&format!("marking aggregate {name}"), &e);
        if let Err(cleanup) = client.delete_aggregate(created.id).await {
            message.push_str("; ");
            message.push_str(&failed(
                &format!("deleting the unmarked aggregate {name}"),
                &cleanup,
            ));
        }
        return Err(message);
    }
    Ok(Done::AggregateCreated(created))
}
