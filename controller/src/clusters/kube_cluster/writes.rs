//! The handle's writes: server-side apply (skipped when the cache shows the object already
//! carries the body), the adopt-or-refuse check, deletes and the remote sweep.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::core::ApiResource;

use crate::clusters::carries::carries;
use crate::clusters::{Applied, Caching, ClusterError, ClusterReads, FIELD_MANAGER};
use crate::objects::{Child, Invalid, Owner, controller_of};

impl KubeCluster {
    pub(super) async fn apply_child(
        &self,
        owner: &Owner,
        child: &Child,
    ) -> Result<Applied, ClusterError> {
        let cache = self.cache(&child.kind)?;
        if cache.spec.caching == Caching::Metadata {
            return Err(ClusterError::NotRegistered {
                kind: child.kind.kind.clone(),
                detail: " with content, which applying needs to skip unchanged objects",
            });
        }
        let body = match &self.target {
            None => child.stamped(owner)?,
            Some(_) => child.stamped(&owner.remote()?)?,
        };
        let ns = owner.namespace.as_str();
        let slot = (ns.to_owned(), child.name.clone());
        let fingerprint = fingerprint(&body);
        let watched = cache
            .cached_meta(Some(ns), &child.name)
            .and_then(|m| m.metadata.resource_version.clone());
        let settled = self.in_scope(Some(ns))
            && cache
                .carried()
                .get(&slot)
                .is_some_and(|c| c.settles(fingerprint, watched.as_deref()));
        if settled {
            return Ok(Applied::Unchanged);
        }
        if let Some(live) = self
            .lookup(&child.kind, Some(ns), &child.name, false)
            .await?
        {
            if !self.may_claim(owner, &live.metadata) {
                return Err(ClusterError::ForeignOwner {
                    kind: child.kind.kind.clone(),
                    namespace: ns.to_owned(),
                    name: child.name.clone(),
                    owner_kind: owner.kind.clone(),
                });
            }
            let live = serde_json::to_value(&*live).map_err(|e| {
                ClusterError::from(Invalid {
                    what: format!("cached {} {ns}/{}", child.kind.kind, child.name),
                    message: e.to_string(),
                })
            })?;
            if carries(&live, &body, FIELD_MANAGER) {
                self.remember(cache, slot, &live, fingerprint);
                return Ok(Applied::Unchanged);
            }
        }
        let mut applied = self
            .api(&child.kind, Some(ns))
            .patch(
                &child.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(|e| {
                ClusterError::kube(
                    format!("applying {} {ns}/{}", child.kind.kind, child.name),
                    e,
                )
            })?;
        strip(&mut applied.metadata, Fields::Own);
        let response = serde_json::to_value(&applied).map_err(|e| {
            ClusterError::from(Invalid {
                what: format!("applied {} {ns}/{}", child.kind.kind, child.name),
                message: e.to_string(),
            })
        })?;
        if carries(&response, &body, FIELD_MANAGER) {
            self.remember(cache, slot.clone(), &response, fingerprint);
        } else {
            cache.carried().remove(&slot);
        }
        // Content a step reads is refreshed with the response, saving its next read.
        if let Some(kept) = cache.content().get_mut(&slot)
            && let Some(content) = Content::of(&applied)
        {
            *kept = content;
        }
        Ok(Applied::Written)
    }

    /// Records that the object `live` (in scope) carries the body of `fingerprint`.
    pub(super) fn remember(
        &self,
        cache: &KindCache,
        slot: (String, String),
        live: &serde_json::Value,
        fingerprint: u64,
    ) {
        if !self.in_scope(Some(&slot.0)) {
            return;
        }
        if let Some(version) = live["metadata"]["resourceVersion"].as_str() {
            cache.carried().insert(
                slot,
                Carried {
                    resource_version: version.to_owned(),
                    fingerprint,
                },
            );
        }
    }

    /// Whether `owner` may write over the live object: locally one no other controller
    /// controls (an uncontrolled object is adopted); on a target cluster only one it
    /// controls, since nothing there tells a stranger's object from an orphan.
    pub(super) fn may_claim(
        &self,
        owner: &Owner,
        live: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> bool {
        match &self.target {
            None => {
                let ours = owner.reference.as_ref().map(|r| r.uid.as_str());
                controller_of(live).is_none_or(|c| Some(c.uid.as_str()) == ours)
            }
            Some(_) => owner.controls(live),
        }
    }

    /// The paged, metadata-only, uncached sweep of one kind (restarted once from the start
    /// when the continue token expired).
    pub(super) async fn sweep_kind(
        &self,
        owner: &Owner,
        kind: &ApiResource,
    ) -> Result<usize, ClusterError> {
        let ns = owner.namespace.as_str();
        let api = self.api(kind, Some(ns));
        let mut params = ListParams::default().limit(SWEEP_PAGE);
        let mut restarted = false;
        let mut deleted = 0;
        loop {
            let page = match api.list_metadata(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(status)) if status.code == 410 && !restarted => {
                    restarted = true;
                    params.continue_token = None;
                    continue;
                }
                // The cluster does not serve the kind: nothing of it to sweep.
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(deleted),
                Err(source) => {
                    return Err(ClusterError::kube(
                        format!("listing {} in {ns}", kind.plural),
                        source,
                    ));
                }
            };
            let owned = page
                .items
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none() && owner.controls(&m.metadata));
            for item in owned {
                let uid = item.metadata.uid.as_deref().unwrap_or_default();
                if delete_in_background(&api, kind, ns, &item.name_any(), uid).await? {
                    deleted += 1;
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params.continue_token = Some(token),
                _ => return Ok(deleted),
            }
        }
    }

    /// Deletes `name`: with `seen`, the object of that UID; otherwise only when `owner`
    /// controls it, on the UID it was seen with. An object of that name someone else controls
    /// is left alone, and one replaced since it was seen (a precondition conflict) is no longer
    /// ours to delete.
    pub(super) async fn delete_object(
        &self,
        owner: &Owner,
        kind: &ApiResource,
        name: &str,
        seen: Option<&str>,
    ) -> Result<(), ClusterError> {
        let namespace = owner.namespace.as_str();
        let cache = self.cache(kind)?;
        if !cache.served {
            return Ok(());
        }
        let api = self.api(kind, Some(namespace));
        if let Some(uid) = seen {
            return delete_in_background(&api, kind, namespace, name, uid)
                .await
                .map(drop);
        }
        // In scope the synced cache says what is there: no request (a stale cache is caught
        // next pass); out of scope one metadata read does.
        let seen = if self.in_scope(Some(namespace)) {
            cache.cached_meta(Some(namespace), name)
        } else {
            self.metadata_live(kind, Some(namespace), name).await?
        };
        let Some(seen) = seen else {
            return Ok(());
        };
        if !owner.controls(&seen.metadata) {
            tracing::debug!(kind = %kind.kind, namespace, name, "not deleting an object this owner does not control");
            return Ok(());
        }
        let Some(uid) = seen.metadata.uid.as_deref() else {
            return Ok(());
        };
        delete_in_background(&api, kind, namespace, name, uid)
            .await
            .map(drop)
    }
}
use super::KubeCluster;
use super::cache::{Carried, Content, Fields, KindCache, fingerprint, strip};

/// Deletes one object in the background, on the precondition that it still has `uid`; false
/// when it was already gone or replaced (a 409 on the precondition: never retried by name).
pub(super) async fn delete_in_background(
    api: &Api<DynamicObject>,
    kind: &ApiResource,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<bool, ClusterError> {
    match api.delete(name, &on_uid(uid)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(e) => Err(ClusterError::kube(
            format!("deleting {} {namespace}/{name}", kind.kind),
            e,
        )),
    }
}

/// A background delete of the object with `uid` only.
fn on_uid(uid: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    }
}

/// How many objects one page of a remote sweep lists.
pub(super) const SWEEP_PAGE: u32 = 500;
