//! The state one Nova pass threads through its steps: the CR as read, the working status, and
//! the values earlier steps resolved for later ones.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use nova_api::conditions::{NovaConditionType, Reason};
use nova_api::v1alpha1::{Nova, NovaStatus};

use crate::context::Context;
use crate::pipeline::{self, StepError, conditions};
use crate::sensitive::Sensitive;

/// Values a step resolved for the steps after it. Digests stay empty on every wait path, so
/// the pod annotation they feed is left alone instead of being cleared.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// The service-user password.
    pub service_password: Option<Sensitive>,
    /// The metadata shared secret.
    pub metadata_shared_secret: Option<Sensitive>,
    /// The broker CA bundle, on a TLS bus.
    pub messaging_ca: Option<Sensitive>,
    /// The transport URL the control-plane pods use.
    pub transport_url: Option<Sensitive>,
    /// The broker port the NetworkPolicy opens and the bus workloads probe.
    pub broker_port: Option<u16>,
    /// The pod-template digests, by annotation.
    pub digests: Digests,
    /// The config ConfigMap the workloads mount.
    pub config_map: Option<String>,
}

/// The credential digests stamped on pod templates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Digests {
    /// `nova.c5c3.io/api-db-connection-hash`.
    pub api_db_connection: String,
    /// `nova.c5c3.io/db-connection-hash`.
    pub db_connection: String,
    /// `nova.c5c3.io/authtoken-hash`.
    pub authtoken: String,
    /// `nova.c5c3.io/transport-url-hash`.
    pub transport_url: String,
    /// `nova.c5c3.io/metadata-secret-hash`.
    pub metadata_secret: String,
}

/// One reconcile pass of one Nova.
#[derive(Clone)]
pub struct NovaPass {
    /// The controller's shared context.
    pub ctx: Arc<Context>,
    /// The CR as this pass read it.
    pub nova: Arc<Nova>,
    /// The working status the pass ends by persisting.
    pub status: NovaStatus,
    /// What the steps resolved so far.
    pub resolved: Resolved,
}

impl pipeline::Pass for NovaPass {
    fn conditions(&self) -> &[Condition] {
        &self.status.conditions
    }

    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.status.conditions
    }
}

impl NovaPass {
    /// A pass over `nova`, starting from its stored status.
    pub fn new(ctx: Arc<Context>, nova: Arc<Nova>) -> Self {
        let status = nova.status.clone().unwrap_or_default();
        Self {
            ctx,
            nova,
            status,
            resolved: Resolved::default(),
        }
    }

    /// The CR's name.
    pub fn name(&self) -> String {
        self.nova.name_any()
    }

    /// The CR's namespace.
    pub fn namespace(&self) -> String {
        self.nova.namespace().unwrap_or_default()
    }

    /// Sets one condition, stamped with the CR's generation.
    pub fn set_condition(
        &mut self,
        type_: NovaConditionType,
        ok: bool,
        reason: Reason,
        message: impl Into<String>,
    ) {
        let generation = self.nova.meta().generation;
        conditions::set(
            &mut self.status.conditions,
            type_.as_str(),
            ok,
            reason,
            message,
            generation,
        );
    }

    /// Secrets in the CR's namespace.
    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.ctx.client.clone(), &self.namespace())
    }

    /// Objects of another operator's kind in the CR's namespace.
    pub fn dynamic(&self, resource: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.ctx.client.clone(), &self.namespace(), resource)
    }

    /// The controller owner reference every same-cluster child carries.
    pub fn owner_reference(&self) -> Result<OwnerReference, StepError> {
        self.nova
            .controller_owner_ref(&())
            .ok_or_else(|| StepError::Refused("the Nova carries no uid yet".to_owned()))
    }

    /// The common labels of every child (`common-types.md` Part 2).
    pub fn common_labels(&self) -> BTreeMap<String, String> {
        nova_api::labels::common(&self.name())
    }

    /// Publishes an event on the Nova; a failed publish is logged, never fatal.
    pub async fn publish(&self, type_: EventType, reason: &str, note: &str) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note.to_owned()),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(e) = self
            .ctx
            .recorder
            .publish(&event, &self.nova.object_ref(&()))
            .await
        {
            tracing::warn!(error = %e, reason, "publishing an event failed");
        }
    }

    /// Reads a Secret of the CR's namespace; None when it does not exist.
    pub async fn read_secret(&self, name: &str) -> Result<Option<Secret>, StepError> {
        let ns = self.namespace();
        self.secrets()
            .get_opt(name)
            .await
            .map_err(|e| StepError::kube(format!("reading Secret {ns}/{name}"), e))
    }
}

/// The value of `key` in a Secret's data, when present and UTF-8.
pub fn secret_value(secret: &Secret, key: &str) -> Option<Sensitive> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok().map(Sensitive::new)
}
