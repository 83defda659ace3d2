//! The handle's records of one kind: its reflector store, the content of the objects a step
//! read, and the [`Carried`] records of the children it applied (what is kept, and why, is in
//! the handle's module header).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::channel::mpsc;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::core::ApiResource;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::clusters::{FIELD_MANAGER, KindSpec, Meta};

/// The annotation `kubectl apply` keeps the whole last-applied object in (for a Secret, its
/// data): never cached.
pub(super) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

pub(super) fn key(resource: &ApiResource) -> (String, String) {
    (resource.group.clone(), resource.kind.clone())
}

/// The caches of one kind.
pub(super) struct KindCache {
    pub(super) spec: KindSpec,
    pub(super) served: bool,
    pub(super) full: Option<Store<DynamicObject>>,
    pub(super) meta: Option<Store<PartialObjectMeta<DynamicObject>>>,
    /// OnDemand content of the objects a step read, by (namespace, name).
    pub(super) content: Mutex<HashMap<(String, String), Content>>,
    /// What each applied child was last seen to carry, by (namespace, name).
    pub(super) carried: Mutex<HashMap<(String, String), Carried>>,
    pub(super) subscribers: Mutex<Vec<mpsc::UnboundedSender<Meta>>>,
}

impl KindCache {
    pub(super) fn reference<K: kube::Resource<DynamicType = ApiResource>>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> ObjectRef<K> {
        let reference = ObjectRef::new_with(name, self.spec.resource.clone());
        match namespace {
            Some(ns) if !self.spec.cluster_scoped => reference.within(ns),
            _ => reference,
        }
    }

    pub(super) fn cached_meta(&self, namespace: Option<&str>, name: &str) -> Option<Meta> {
        if let Some(full) = &self.full {
            return full
                .get(&self.reference(namespace, name))
                .map(|o| meta_of(&o));
        }
        self.meta.as_ref()?.get(&self.reference(namespace, name))
    }

    pub(super) fn content(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Content>> {
        self.content.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn carried(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Carried>> {
        self.carried.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the content and the record of an object that went.
    pub(super) fn evict(&self, slot: &(String, String)) {
        self.content().remove(slot);
        self.carried().remove(slot);
    }

    pub(super) fn notify(&self, meta: &Meta) {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|tx| tx.unbounded_send(meta.clone()).is_ok());
    }
}

pub(super) fn meta_of(object: &DynamicObject) -> Meta {
    Arc::new(PartialObjectMeta {
        types: object.types.clone(),
        metadata: object.metadata.clone(),
        _phantom: Default::default(),
    })
}

/// Which `metadata.managedFields` entries a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fields {
    /// None: metadata caches, which no apply compares against.
    None,
    /// This operator's own `Apply` entry on the main resource, the one [`carries`] reads;
    /// the other managers' entries (status writers, kubectl, the kube controllers) go.
    Own,
}

/// Drops what no cache needs to hold: the last-applied annotation always, and the
/// managedFields entries `fields` does not keep.
pub(super) fn strip(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    fields: Fields,
) {
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED);
    }
    match fields {
        Fields::None => meta.managed_fields = None,
        Fields::Own => {
            if let Some(entries) = &mut meta.managed_fields {
                entries.retain(|entry| {
                    entry.manager.as_deref() == Some(FIELD_MANAGER)
                        && entry.operation.as_deref() == Some("Apply")
                        && entry.subresource.as_deref().unwrap_or_default().is_empty()
                });
            }
        }
    }
}

/// The content of one object a step read, kept as its JSON text and parsed on each read: a
/// serde_json tree costs several times its text (every non-empty JSON object is a B-tree node
/// of eleven slots), and content is held far longer than it is read.
pub(super) struct Content {
    pub(super) resource_version: Option<String>,
    pub(super) json: Box<str>,
}

impl Content {
    /// The content of `object`; None if it does not serialize (it is then read live again).
    pub(super) fn of(object: &DynamicObject) -> Option<Content> {
        Some(Content {
            resource_version: object.metadata.resource_version.clone(),
            json: serde_json::to_string(object).ok()?.into_boxed_str(),
        })
    }

    /// The object, when the content is as new as the watched resourceVersion `watched`.
    pub(super) fn object_at(&self, watched: Option<&str>) -> Option<DynamicObject> {
        if !fresh(self.resource_version.as_deref(), watched) {
            return None;
        }
        serde_json::from_str(&self.json).ok()
    }
}

/// An applied child as last seen: the object at `resource_version` carried (in the sense of
/// [`carries`]) the apply body whose [`fingerprint`] is `fingerprint`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Carried {
    pub(super) resource_version: String,
    pub(super) fingerprint: u64,
}

impl Carried {
    /// Whether this record settles an apply of the body `fingerprint` against the watched
    /// resourceVersion `watched`: the same body, and nothing changed the object since.
    pub(super) fn settles(&self, fingerprint: u64, watched: Option<&str>) -> bool {
        self.fingerprint == fingerprint && fresh(Some(&self.resource_version), watched)
    }
}

/// A fingerprint of an apply body (its JSON text, whose object keys serde_json keeps sorted).
pub(super) fn fingerprint(body: &serde_json::Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    body.to_string().hash(&mut hasher);
    hasher.finish()
}

/// Whether cached content at `content` is as new as the watched `watched` resourceVersion:
/// equal, or (an apply response cached before its own watch event arrived) numerically newer.
pub(super) fn fresh(content: Option<&str>, watched: Option<&str>) -> bool {
    match (content, watched) {
        (Some(c), Some(w)) if c == w => true,
        (Some(c), Some(w)) => {
            matches!((c.parse::<u64>(), w.parse::<u64>()), (Ok(c), Ok(w)) if c > w)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn freshness_of_cached_content() {
        assert!(fresh(Some("7"), Some("7")));
        assert!(
            fresh(Some("9"), Some("7")),
            "an apply response ahead of its watch event"
        );
        assert!(!fresh(Some("7"), Some("9")));
        assert!(!fresh(Some("a"), Some("b")));
        assert!(!fresh(None, Some("7")));
    }

    #[test]
    fn cached_content_keeps_only_our_own_apply_entry() {
        let entry = |manager: &str, operation: &str, subresource: Option<&str>| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                manager: Some(manager.into()),
                operation: Some(operation.into()),
                subresource: subresource.map(Into::into),
                fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                    serde_json::json!({"f:spec": {"f:replicas": {}}}),
                )),
                ..Default::default()
            }
        };
        let meta = || k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: Some(BTreeMap::from([(LAST_APPLIED.to_owned(), "{}".to_owned())])),
            managed_fields: Some(vec![
                entry("kube-controller-manager", "Update", Some("status")),
                entry(FIELD_MANAGER, "Apply", Some("status")),
                entry(FIELD_MANAGER, "Apply", None),
                entry("kubectl", "Update", None),
            ]),
            ..Default::default()
        };
        let mut content = meta();
        strip(&mut content, Fields::Own);
        assert_eq!(
            content.managed_fields,
            Some(vec![entry(FIELD_MANAGER, "Apply", None)])
        );
        assert_eq!(content.annotations, Some(BTreeMap::new()));
        let mut metadata = meta();
        strip(&mut metadata, Fields::None);
        assert_eq!(metadata.managed_fields, None);
    }

    #[test]
    fn content_is_the_object_while_fresh() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"replicas": 2}, "status": {"readyReplicas": 1},
        }))
        .expect("object");
        let content = Content::of(&object).expect("serializes");
        assert_eq!(content.object_at(Some("7")), Some(object));
        assert_eq!(content.object_at(Some("8")), None, "changed since");
    }

    #[test]
    fn a_record_settles_only_the_same_body_on_an_unchanged_object() {
        let body = serde_json::json!({"kind": "ConfigMap", "data": {"a": "1"}});
        let record = Carried {
            resource_version: "7".into(),
            fingerprint: fingerprint(&body),
        };
        assert!(record.settles(fingerprint(&body.clone()), Some("7")));
        assert!(
            record.settles(fingerprint(&body), Some("6")),
            "an apply response ahead of its watch event"
        );
        assert!(
            !record.settles(fingerprint(&body), Some("8")),
            "changed since"
        );
        assert!(!record.settles(fingerprint(&body), None), "gone");
        let other = serde_json::json!({"kind": "ConfigMap", "data": {"a": "2"}});
        assert!(
            !record.settles(fingerprint(&other), Some("7")),
            "another body"
        );
    }
}
