//! The cluster `render` plays, held in memory: the Secrets it was given (placeholders for the
//! rest), the other operators' objects a step reads played existing and Ready, and every apply
//! recorded instead of sent. The `render` command runs the pipelines against it, and so do the
//! plan tests of the engine and the steps.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::ApiResource;
use serde_json::{Value, json};

use super::probe::Probe;
use super::{
    Applied, ClusterError, ClusterReads, ClusterWrites, JobReport, Meta, SecretValues, values_of,
};
use crate::objects::{Child, Invalid, Labels, Owner, kinds};
use crate::openstack::{EmptyCloud, Transport};
use crate::sensitive::Sensitive;

/// The Secrets a render may read, by name.
#[derive(Default)]
pub struct SecretSource(BTreeMap<String, Secret>);

impl SecretSource {
    /// A source holding `secrets`, by name.
    pub fn new(secrets: impl IntoIterator<Item = Secret>) -> Self {
        Self(secrets.into_iter().map(|s| (s.name_any(), s)).collect())
    }

    /// The Secret `name`, when the source holds it.
    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.0.get(name)
    }

    /// The requested keys of Secret `name`: from its manifest when `--secrets-dir` has it (a
    /// key it lacks stays missing, so the gates report it), else a marked placeholder each.
    pub fn values(&self, name: &str, keys: &[&str]) -> SecretValues {
        match self.0.get(name) {
            Some(secret) => values_of(secret, keys),
            None => SecretValues(
                keys.iter()
                    .map(|key| {
                        let placeholder = format!(
                            "<placeholder: key \"{key}\" of Secret {name}, not in --secrets-dir>"
                        );
                        ((*key).to_owned(), Sensitive::new(placeholder))
                    })
                    .collect(),
            ),
        }
    }
}

/// The cluster `render` plays: Secrets from `--secrets-dir` (placeholders otherwise), the other
/// operators' objects a step reads existing and Ready (a RabbitmqCluster with its default-user
/// Secret, which then reads as placeholders, an HTTPRoute accepted by its Gateway), nothing
/// else; applies are recorded, not sent.
#[derive(Default)]
pub struct MemoryCluster {
    secrets: SecretSource,
    applied: Mutex<Vec<Child>>,
    /// Every merge patch sent, by object name, in order.
    patched: Mutex<Vec<(String, Value)>>,
    /// Objects the render was given (a pool's Nova, its contract), by kind and name.
    given: Vec<(ApiResource, DynamicObject)>,
}

impl MemoryCluster {
    /// A file-backed cluster over `secrets`.
    pub fn new(secrets: SecretSource) -> Self {
        Self {
            secrets,
            applied: Mutex::default(),
            patched: Mutex::default(),
            given: Vec::new(),
        }
    }

    /// The cluster with `object` of `kind` in it.
    pub fn with<K: kube::Resource<DynamicType = ()> + serde::Serialize>(
        mut self,
        object: &K,
    ) -> Result<Self, Invalid> {
        let kind = ApiResource::erase::<K>(&());
        let invalid = |e: serde_json::Error| Invalid {
            what: format!("given {} {}", kind.kind, object.name_any()),
            message: e.to_string(),
        };
        let value = serde_json::to_value(object).map_err(invalid)?;
        let mut object: DynamicObject = serde_json::from_value(value).map_err(invalid)?;
        object.types = Some(kube::api::TypeMeta {
            api_version: kind.api_version.clone(),
            kind: kind.kind.clone(),
        });
        self.given.push((kind, object));
        Ok(self)
    }

    fn given(&self, kind: &ApiResource, name: &str) -> Option<DynamicObject> {
        self.given
            .iter()
            .find(|(k, o)| k == kind && o.metadata.name.as_deref() == Some(name))
            .map(|(_, o)| o.clone())
    }

    /// How many Jobs were applied so far.
    pub fn applied_jobs(&self) -> usize {
        let job = ApiResource::erase::<Job>(&());
        self.applied().iter().filter(|c| c.kind == job).count()
    }

    /// Every child applied so far, in order.
    pub fn applied(&self) -> Vec<Child> {
        self.applied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every merge patch sent so far, by object name, in order.
    pub fn patched(&self) -> Vec<(String, Value)> {
        self.patched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A Job applied by an earlier pass of this render, as it would look once it completed,
    /// so the pass after it goes on past the step that waits for it.
    fn completed_job(
        &self,
        kind: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<DynamicObject> {
        if *kind != ApiResource::erase::<Job>(&()) {
            return None;
        }
        let owner = Owner {
            kind: "Nova".to_owned(),
            namespace: namespace.unwrap_or_default().to_owned(),
            reference: None,
            labels: Default::default(),
        };
        let applied = self.applied();
        let child = applied.iter().find(|c| c.kind == *kind && c.name == name)?;
        let mut body = child.stamped(&owner).ok()?;
        body["metadata"]["uid"] = format!("offline-{name}").into();
        body["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        serde_json::from_value(body).ok()
    }

    /// Another operator's object as a healthy one would look, for the kinds a step reads.
    fn played(kind: &ApiResource, namespace: Option<&str>, name: &str) -> Option<DynamicObject> {
        let ready = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        let status = if *kind == kinds::http_route() {
            json!({"parents": [{"conditions": [{"type": "Accepted", "status": "True"}]}]})
        } else if *kind == kinds::rabbitmq_cluster() {
            json!({"defaultUser": {"secretReference": {"name": format!("{name}-default-user")}}})
        } else if [
            kinds::secret_store(),
            kinds::cluster_secret_store(),
            kinds::external_secret(),
            kinds::mariadb(),
        ]
        .contains(kind)
            || kinds::mariadb_children().contains(kind)
        {
            ready
        } else {
            return None;
        };
        let mut object = DynamicObject::new(name, kind).data(json!({ "status": status }));
        object.metadata.namespace = namespace.map(str::to_owned);
        Some(object)
    }
}

impl ClusterReads for MemoryCluster {
    fn namespace_scope(&self) -> Option<&str> {
        None
    }

    /// Every optional kind is served, so `render` shows the routes and autoscalers a cluster
    /// with Gateway API and the VPA would get.
    fn served<'a>(&'a self, _: &'a ApiResource) -> BoxFuture<'a, Result<bool, ClusterError>> {
        Box::pin(async { Ok(true) })
    }

    /// A healthy API answers, as the other operators' objects are played healthy.
    fn probe<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Probe> {
        Box::pin(async { Probe::Answered(200, String::new()) })
    }

    /// Offline, an empty cloud answers: the OpenStack steps decide what a new cloud needs.
    fn transport(&self) -> Arc<dyn Transport> {
        Arc::new(EmptyCloud)
    }

    fn get_live<'a>(
        &'a self,
        _: &'a ApiResource,
        _: Option<&'a str>,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<DynamicObject>, ClusterError>> {
        Box::pin(async { Ok(None) })
    }

    fn list_live<'a>(
        &'a self,
        _: &'a ApiResource,
        _: &'a str,
        _: &'a Labels,
        _: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<DynamicObject>, ClusterError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn get<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<DynamicObject>>, ClusterError>> {
        Box::pin(async move {
            let object = self
                .given(kind, name)
                .or_else(|| self.completed_job(kind, namespace, name))
                .or_else(|| Self::played(kind, namespace, name));
            Ok(object.map(Arc::new))
        })
    }

    fn metadata(&self, _: &ApiResource, _: &str, _: &str) -> Result<Option<Meta>, ClusterError> {
        Ok(None)
    }

    /// No Node exists offline: a pool renders selecting none.
    fn list_metadata_live<'a>(
        &'a self,
        _: &'a ApiResource,
        _: Option<&'a str>,
        _: &'a Labels,
    ) -> BoxFuture<'a, Result<Vec<Meta>, ClusterError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn metadata_live<'a>(
        &'a self,
        _: &'a ApiResource,
        _: Option<&'a str>,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Option<Meta>, ClusterError>> {
        Box::pin(async { Ok(None) })
    }

    fn list_metadata(
        &self,
        _: &ApiResource,
        _: &str,
        _: &Labels,
    ) -> Result<Vec<Meta>, ClusterError> {
        Ok(Vec::new())
    }

    fn secret<'a>(
        &'a self,
        _: &'a str,
        name: &'a str,
        keys: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<SecretValues>, ClusterError>> {
        Box::pin(async move { Ok(Some(self.secrets.values(name, keys))) })
    }

    fn job_report<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<JobReport, ClusterError>> {
        Box::pin(async { Ok(JobReport::default()) })
    }

    /// Files are always there.
    fn reachable(&self) -> BoxFuture<'_, bool> {
        Box::pin(async { true })
    }
}

impl ClusterWrites for MemoryCluster {
    /// Recorded, not sent.
    fn merge_patch<'a>(
        &'a self,
        _: &'a ApiResource,
        _: Option<&'a str>,
        name: &'a str,
        patch: &'a Value,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        self.patched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.to_owned(), patch.clone()));
        Box::pin(async { Ok(()) })
    }

    fn apply<'a>(
        &'a self,
        _: &'a Owner,
        child: &'a Child,
    ) -> BoxFuture<'a, Result<Applied, ClusterError>> {
        Box::pin(async move {
            let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
            match applied
                .iter_mut()
                .find(|c| c.kind == child.kind && c.name == child.name)
            {
                Some(earlier) => *earlier = child.clone(),
                None => applied.push(child.clone()),
            }
            Ok(Applied::Written)
        })
    }

    fn delete<'a>(
        &'a self,
        _: &'a Owner,
        _: &'a ApiResource,
        _: &'a str,
        _: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(async { Ok(()) })
    }

    fn prune<'a>(
        &'a self,
        _: &'a Owner,
        _: &'a ApiResource,
        _: &'a Labels,
        _: &'a [String],
    ) -> BoxFuture<'a, Result<usize, ClusterError>> {
        Box::pin(async { Ok(0) })
    }

    /// A render never deletes: nothing it reads is a child to sweep.
    fn sweep<'a>(
        &'a self,
        _: &'a Owner,
        _: &'a ApiResource,
    ) -> BoxFuture<'a, Result<usize, ClusterError>> {
        Box::pin(async { Ok(0) })
    }
}
