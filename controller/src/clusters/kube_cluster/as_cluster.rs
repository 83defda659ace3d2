//! The handle as a [`Cluster`]: the trait the steps and the engine call, served from the
//! caches where it can and from the API server where it must.

use std::sync::{Arc, PoisonError};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::ApiResource;

use super::cache::{Fields, meta_of, strip};
use super::job_report::{JOB_UID_LABEL, report_of};
use super::watch::reprobe;
use super::{KubeCluster, describe, values_of};
use crate::clusters::{
    Applied, ClusterError, ClusterReads, ClusterWrites, FIELD_MANAGER, JobReport, Meta,
    SecretValues,
};
use crate::objects::{Child, Invalid, Labels, Owner, selector_string, selects};
use crate::openstack::Transport;

/// How long [`Cluster::reachable`] waits for the API server's answer.
pub(super) const REACHABLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl ClusterReads for KubeCluster {
    fn namespace_scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    fn served<'a>(&'a self, kind: &'a ApiResource) -> BoxFuture<'a, Result<bool, ClusterError>> {
        Box::pin(async move {
            let latched = self.cache(kind)?.served;
            match &self.target {
                Some(target) if !latched => reprobe(&target.proxy, kind).await,
                _ => Ok(latched),
            }
        })
    }

    fn probe<'a>(&'a self, url: &'a str) -> BoxFuture<'a, crate::clusters::probe::Probe> {
        match &self.target {
            None => Box::pin(crate::clusters::probe::get(url, self.probe_address)),
            Some(target) => Box::pin(crate::clusters::probe::through_proxy(&target.proxy, url)),
        }
    }

    fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    fn get_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<DynamicObject>, ClusterError>> {
        Box::pin(async move {
            match self.api(kind, namespace).get(name).await {
                Ok(object) => Ok(Some(object)),
                // A missing object names itself in the status details; a 404 without them
                // is the API server not knowing the resource at all.
                Err(kube::Error::Api(status))
                    if status.code == 404
                        && status.details.as_ref().is_some_and(|d| d.name == name) =>
                {
                    Ok(None)
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    Err(ClusterError::NotServed {
                        kind: kind.kind.clone(),
                    })
                }
                Err(e) => Err(ClusterError::kube(
                    format!("reading {} {name}", kind.kind),
                    e,
                )),
            }
        })
    }

    fn list_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: &'a str,
        selector: &'a Labels,
        fields: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<DynamicObject>, ClusterError>> {
        Box::pin(async move {
            let mut params = ListParams::default().labels(&selector_string(selector));
            if let Some(fields) = fields {
                params = params.fields(fields);
            }
            self.api(kind, Some(namespace))
                .list(&params)
                .await
                .map(|list| list.items)
                .map_err(|e| ClusterError::kube(format!("listing {} in {namespace}", kind.kind), e))
        })
    }

    fn get<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<DynamicObject>>, ClusterError>> {
        Box::pin(self.get_object(kind, namespace, name))
    }

    fn list_metadata_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        selector: &'a Labels,
    ) -> BoxFuture<'a, Result<Vec<Meta>, ClusterError>> {
        Box::pin(async move {
            let params = ListParams::default().labels(&selector_string(selector));
            let listed = self
                .api(kind, namespace)
                .list_metadata(&params)
                .await
                .map_err(|e| {
                    ClusterError::kube(
                        format!("listing {} by {}", kind.plural, selector_string(selector)),
                        e,
                    )
                })?;
            Ok(listed
                .items
                .into_iter()
                .map(|mut m| {
                    strip(&mut m.metadata, Fields::None);
                    Arc::new(m)
                })
                .collect())
        })
    }

    fn metadata_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Meta>, ClusterError>> {
        Box::pin(async move {
            let read = self
                .api(kind, namespace)
                .get_metadata_opt(name)
                .await
                .map_err(|e| {
                    ClusterError::kube(
                        format!("reading {} {}", kind.kind, describe(namespace, name)),
                        e,
                    )
                })?;
            Ok(read.map(|mut m| {
                strip(&mut m.metadata, Fields::None);
                Arc::new(m)
            }))
        })
    }

    fn metadata(
        &self,
        kind: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Meta>, ClusterError> {
        let cache = self.cache(kind)?;
        Ok(cache
            .served
            .then(|| cache.cached_meta(Some(namespace), name))
            .flatten())
    }

    fn list_metadata(
        &self,
        kind: &ApiResource,
        namespace: &str,
        selector: &Labels,
    ) -> Result<Vec<Meta>, ClusterError> {
        let cache = self.cache(kind)?;
        let wanted = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            m.namespace.as_deref() == Some(namespace) && selects(selector, m.labels.as_ref())
        };
        if let Some(full) = &cache.full {
            return Ok(full
                .state()
                .iter()
                .filter(|o| wanted(&o.metadata))
                .map(|o| meta_of(o))
                .collect());
        }
        Ok(cache
            .meta
            .as_ref()
            .map(|s| s.state_filter(|m| wanted(&m.metadata)))
            .unwrap_or_default())
    }

    fn secret<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        keys: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<SecretValues>, ClusterError>> {
        Box::pin(async move {
            let kind = ApiResource::erase::<Secret>(&());
            let Some(object) = self.get_object(&kind, Some(namespace), name).await? else {
                return Ok(None);
            };
            let secret: Secret = (*object).clone().try_parse().map_err(|e| {
                ClusterError::from(Invalid {
                    what: format!("cached Secret {namespace}/{name}"),
                    message: e.to_string(),
                })
            })?;
            Ok(Some(values_of(&secret, keys)))
        })
    }

    fn job_report<'a>(
        &'a self,
        namespace: &'a str,
        job_uid: &'a str,
    ) -> BoxFuture<'a, Result<JobReport, ClusterError>> {
        Box::pin(async move {
            let remembered = self
                .reports
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(job_uid)
                .cloned();
            if let Some(message) = remembered {
                return Ok(JobReport {
                    message,
                    fresh: false,
                });
            }
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
            let listed = pods
                .list(&ListParams::default().labels(&format!("{JOB_UID_LABEL}={job_uid}")))
                .await
                .map_err(|e| {
                    ClusterError::kube(format!("listing the pods of Job {namespace}/{job_uid}"), e)
                })?;
            let message = report_of(&listed.items, job_uid);
            self.reports
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(job_uid.to_owned(), message.clone());
            Ok(JobReport {
                message,
                fresh: true,
            })
        })
    }

    fn reachable(&self) -> BoxFuture<'_, bool> {
        Box::pin(async {
            let answer = tokio::time::timeout(REACHABLE_TIMEOUT, self.client.apiserver_version());
            matches!(answer.await, Ok(Ok(_)))
        })
    }
}

impl ClusterWrites for KubeCluster {
    fn merge_patch<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
        patch: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(async move {
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            self.api(kind, namespace)
                .patch(name, &params, &Patch::Merge(patch))
                .await
                .map(drop)
                .map_err(|e| ClusterError::kube(format!("patching {} {name}", kind.kind), e))
        })
    }

    fn apply<'a>(
        &'a self,
        owner: &'a Owner,
        child: &'a Child,
    ) -> BoxFuture<'a, Result<Applied, ClusterError>> {
        Box::pin(self.apply_child(owner, child))
    }

    fn delete<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
        name: &'a str,
        seen: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(self.delete_object(owner, kind, name, seen))
    }

    fn sweep<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
    ) -> BoxFuture<'a, Result<usize, ClusterError>> {
        Box::pin(self.sweep_kind(owner, kind))
    }

    fn prune<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
        selector: &'a Labels,
        keep: &'a [String],
    ) -> BoxFuture<'a, Result<usize, ClusterError>> {
        Box::pin(async move {
            let stale: Vec<String> = self
                .list_metadata(kind, &owner.namespace, selector)?
                .iter()
                .filter(|m| owner.controls(&m.metadata))
                .map(|m| m.name_any())
                .filter(|name| !keep.contains(name))
                .collect();
            for name in &stale {
                self.delete_object(owner, kind, name, None).await?;
            }
            Ok(stale.len())
        })
    }
}
