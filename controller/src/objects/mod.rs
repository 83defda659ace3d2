//! What every layer of the controller shares about the objects it writes: the desired
//! [`Child`] a renderer builds, the [`Owner`] the handle stamps on it, the label selectors
//! children are found by, and the kinds of the other operators' objects ([`kinds`]). Plain
//! data: this module depends on nothing of the crate, so the renderers, the steps and the
//! handle can all import it.

mod event_note;
pub mod kinds;

pub use event_note::EventNote;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::ApiResource;
use kube::{Resource, ResourceExt};
use nova_api::labels::ownership;
use serde::Serialize;
use serde_json::Value;

/// A desired object that could not be serialized or stamped, or a cached one not parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct Invalid {
    /// The object.
    pub what: String,
    /// The complaint.
    pub message: String,
}

/// A label selector of equality terms.
pub type Labels = BTreeMap<String, String>;

/// A selector as the API's `labelSelector` parameter (`k=v,k2=v2`).
pub fn selector_string(selector: &Labels) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `labels` carries every term of `selector`.
pub fn selects(selector: &Labels, labels: Option<&BTreeMap<String, String>>) -> bool {
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The CR a child belongs to: what the handle stamps on every child it applies.
#[derive(Clone, Debug)]
pub struct Owner {
    /// The CR's kind, as an owner reference and in messages.
    pub kind: String,
    /// The CR's namespace, where its children live.
    pub namespace: String,
    /// The controller owner reference every same-cluster child carries; None for a CR that
    /// has no uid (an offline render).
    pub reference: Option<OwnerReference>,
    /// The common labels of every child.
    pub labels: BTreeMap<String, String>,
}

impl Owner {
    /// The owner of `cr`'s children.
    pub fn of<K: Resource<DynamicType = ()>>(cr: &K, labels: BTreeMap<String, String>) -> Self {
        Self {
            kind: K::kind(&()).into_owned(),
            namespace: cr.namespace().unwrap_or_default(),
            reference: cr.controller_owner_ref(&()),
            labels,
        }
    }

    /// Whether this owner controls an object (`common-types.md` Part 2, "Controls"): it holds
    /// a controller reference to the owner, or (on a target cluster) all three ownership
    /// labels with the owner's values. The one test behind every adopt, overwrite, prune and
    /// delete.
    pub fn controls(&self, meta: &ObjectMeta) -> bool {
        let Some(owner) = &self.reference else {
            return false;
        };
        controller_of(meta).is_some_and(|c| c.uid == owner.uid)
            || self
                .ownership_labels()
                .is_some_and(|labels| selects(&labels, meta.labels.as_ref()))
    }

    /// The three ownership labels a child of this owner carries on a target cluster; None for
    /// an owner without a reference (an offline render).
    pub fn ownership_labels(&self) -> Option<Labels> {
        let reference = self.reference.as_ref()?;
        Some(BTreeMap::from([
            (ownership::KIND.to_owned(), self.kind.clone()),
            (ownership::NAME.to_owned(), reference.name.clone()),
            (ownership::NAMESPACE.to_owned(), self.namespace.clone()),
        ]))
    }

    /// This owner as a child on a target cluster is stamped (`common-types.md` §3.17
    /// "Claiming"): no owner reference, which does not cross a cluster boundary, and the
    /// ownership labels on top of the common ones. Refuses an owner whose name does not fit a
    /// label value.
    pub fn remote(&self) -> Result<Owner, Invalid> {
        let Some(owned) = self.ownership_labels() else {
            return Ok(self.clone());
        };
        let name = &owned[ownership::NAME];
        if name.len() > LABEL_VALUE_MAX {
            return Err(Invalid {
                what: format!("{} {}/{name}", self.kind, self.namespace),
                message: format!(
                    "a name longer than {LABEL_VALUE_MAX} characters cannot be an ownership label on a target cluster"
                ),
            });
        }
        let mut labels = self.labels.clone();
        labels.extend(owned);
        Ok(Owner {
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            reference: None,
            labels,
        })
    }
}

/// The longest label value the API server accepts.
const LABEL_VALUE_MAX: usize = 63;

/// The controller reference of an object, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// A desired child: what an apply sends, before the handle stamps owner and labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Child {
    /// Its kind.
    pub kind: ApiResource,
    /// Its name.
    pub name: String,
    body: Value,
    /// What `render` prints instead of the body, for a child that carries credentials.
    review: Option<Value>,
    /// Why the desired object could not be serialized; applying it is refused.
    invalid: Option<String>,
}

impl Child {
    /// A typed desired object (its name is taken from its metadata).
    pub fn new<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> Self {
        let kind = ApiResource::erase::<K>(&());
        let name = object.meta().name.clone().unwrap_or_default();
        let (body, invalid) = match serde_json::to_value(object) {
            Ok(body) => (body, None),
            Err(e) => (Value::Null, Some(e.to_string())),
        };
        Self {
            kind,
            name,
            body,
            review: None,
            invalid,
        }
    }

    /// A desired object of another operator's kind.
    pub fn dynamic(kind: ApiResource, name: &str, body: Value) -> Self {
        Self {
            kind,
            name: name.to_owned(),
            body,
            review: None,
            invalid: None,
        }
    }

    /// The form `render` prints, when it must differ from what is applied (credentials masked).
    pub fn with_review<K: Serialize>(mut self, review: &K) -> Self {
        self.review = serde_json::to_value(review).ok();
        self
    }

    /// The body an apply sends for `owner`: apiVersion, kind, name, namespace, the owner's
    /// common labels on top of the child's own, and the controller reference.
    pub fn stamped(&self, owner: &Owner) -> Result<Value, Invalid> {
        self.stamp(self.body.clone(), owner)
    }

    /// The printable form (credentials masked), stamped like [`Child::stamped`].
    pub fn printable(&self, owner: &Owner) -> Result<Value, Invalid> {
        self.stamp(
            self.review.clone().unwrap_or_else(|| self.body.clone()),
            owner,
        )
    }

    fn stamp(&self, mut body: Value, owner: &Owner) -> Result<Value, Invalid> {
        if let Some(message) = &self.invalid {
            return Err(Invalid {
                what: format!("desired {} {}", self.kind.kind, self.name),
                message: message.clone(),
            });
        }
        body["apiVersion"] = self.kind.api_version.clone().into();
        body["kind"] = self.kind.kind.clone().into();
        let meta = &mut body["metadata"];
        meta["name"] = self.name.clone().into();
        meta["namespace"] = owner.namespace.clone().into();
        let mut labels: BTreeMap<String, String> =
            serde_json::from_value(meta["labels"].take()).unwrap_or_default();
        labels.extend(owner.labels.clone());
        meta["labels"] = serde_json::to_value(labels).unwrap_or_default();
        match &owner.reference {
            Some(reference) => {
                meta["ownerReferences"] = serde_json::to_value([reference]).unwrap_or_default();
            }
            None => {
                if let Some(meta) = meta.as_object_mut() {
                    meta.remove("ownerReferences");
                }
            }
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn owner() -> Owner {
        Owner {
            kind: "Nova".into(),
            namespace: "ns".into(),
            reference: Some(OwnerReference {
                api_version: "nova.openstack.c5c3.io/v1alpha1".into(),
                kind: "Nova".into(),
                name: "nova".into(),
                uid: "u1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }),
            labels: BTreeMap::from([("app.kubernetes.io/instance".to_owned(), "nova".to_owned())]),
        }
    }

    #[test]
    fn a_child_is_stamped_with_identity_labels_and_the_controller_reference() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("c".into());
        cm.metadata.labels = Some(BTreeMap::from([("own".to_owned(), "1".to_owned())]));
        let body = Child::new(&cm).stamped(&owner()).expect("stamps");
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["kind"], "ConfigMap");
        assert_eq!(body["metadata"]["namespace"], "ns");
        assert_eq!(
            body["metadata"]["labels"],
            json!({"app.kubernetes.io/instance": "nova", "own": "1"})
        );
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "u1");
        let offline = Owner {
            reference: None,
            ..owner()
        };
        let body = Child::new(&cm).stamped(&offline).expect("stamps");
        assert!(body["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn control_is_a_controller_reference_to_the_owner() {
        let reference = |uid: &str, controller| OwnerReference {
            uid: uid.into(),
            controller,
            ..Default::default()
        };
        let meta = |refs| ObjectMeta {
            owner_references: Some(refs),
            ..Default::default()
        };
        let o = owner();
        assert!(o.controls(&meta(vec![reference("u1", Some(true))])));
        assert!(!o.controls(&meta(vec![reference("u1", None)])));
        assert!(!o.controls(&meta(vec![reference("u2", Some(true))])));
        assert!(!o.controls(&ObjectMeta::default()));
    }

    #[test]
    fn a_remote_child_carries_the_ownership_labels_and_no_owner_reference() {
        let o = owner();
        let remote = o.remote().expect("fits");
        assert!(remote.reference.is_none());
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("c".into());
        let body = Child::new(&cm).stamped(&remote).expect("stamps");
        assert!(body["metadata"].get("ownerReferences").is_none());
        assert_eq!(
            body["metadata"]["labels"],
            json!({
                "app.kubernetes.io/instance": "nova",
                "openstack.c5c3.io/owner-kind": "Nova",
                "openstack.c5c3.io/owner-name": "nova",
                "openstack.c5c3.io/owner-namespace": "ns",
            })
        );
        let stamped: ObjectMeta =
            serde_json::from_value(body["metadata"].clone()).expect("metadata");
        assert!(o.controls(&stamped), "the labels alone make it controlled");
        for (label, value) in [
            ("openstack.c5c3.io/owner-name", "other"),
            ("openstack.c5c3.io/owner-namespace", "elsewhere"),
            ("openstack.c5c3.io/owner-kind", "NovaCompute"),
        ] {
            let mut foreign = stamped.clone();
            foreign
                .labels
                .as_mut()
                .expect("labels")
                .insert(label.into(), value.into());
            assert!(!o.controls(&foreign), "{label}={value} is another owner's");
        }
        let mut long = owner();
        if let Some(reference) = &mut long.reference {
            reference.name = "n".repeat(64);
        }
        assert!(
            long.remote().is_err(),
            "a name that is no label value is refused"
        );
    }
}
