//! The cluster handle (`DESIGN.md` principle 6): every read and write a step makes goes through
//! the [`Cluster`] its CR resolves to.
//!
//! A CR without `targetClusterRef` resolves to the [`LocalCluster`] of the management cluster
//! this process runs against; one that names a registered target cluster resolves to that
//! cluster's handle, engaged by the [`Fleet`] from its registration Secret: the same type with
//! its own watch caches, which stamps ownership labels instead of an owner reference and
//! probes Services through the target API server's proxy. The `render` command has a
//! file-backed handle of its own (`offline`), which is how it runs the very same plans without
//! a cluster.
//!
//! Reads are served from watch caches registered once at start-up ([`KindSpec`]), so a pass
//! over an unchanged CR issues no GET or LIST. Writes are server-side applies under the one
//! field manager, skipped when the cache shows the object already carries exactly what the
//! apply would write.

pub mod carries;
mod fleet;
pub mod kinds;
mod local;
pub mod probe;
pub mod registration;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::core::ApiResource;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde_json::Value;

pub use fleet::Fleet;
pub use local::{LocalCluster, Registry, values_of};

use crate::sensitive::Sensitive;
use nova_api::labels::ownership;

/// The one field manager every write of this operator uses.
pub const FIELD_MANAGER: &str = "cobaltcore-operator";

/// How the handle caches one kind. Each mode is a watch; they differ in what they hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Caching {
    /// Metadata only (names, labels, owners, timestamps): for kinds whose existence or owner is
    /// all a step needs, and for owned kinds that only wake their owner.
    Metadata,
    /// Metadata of every object, content only of the objects a step actually reads, fetched
    /// once and kept while the watched resourceVersion stays the same. For kinds that are
    /// numerous and mostly not ours (Secrets, ConfigMaps): the process never holds the content
    /// of every Secret of the cluster, only of those a CR references or owns.
    OnDemand,
    /// Whole objects: for the few, small objects of other operators whose status a step reads.
    Full,
}

/// One kind a pipeline reads, registered once with the handle.
#[derive(Clone, Debug)]
pub struct KindSpec {
    /// The kind.
    pub resource: ApiResource,
    /// What the cache holds.
    pub caching: Caching,
    /// Cluster-scoped kinds are watched cluster-wide (and never under `--namespace`).
    pub cluster_scoped: bool,
    /// Another operator's kind: probed at start-up, and read as absent when not served.
    pub optional: bool,
}

impl KindSpec {
    /// A built-in namespaced kind.
    pub fn of<K: Resource<DynamicType = ()>>(caching: Caching) -> Self {
        Self {
            resource: ApiResource::erase::<K>(&()),
            caching,
            cluster_scoped: false,
            optional: false,
        }
    }

    /// Another operator's namespaced kind.
    pub fn external(resource: ApiResource, caching: Caching) -> Self {
        Self {
            resource,
            caching,
            cluster_scoped: false,
            optional: true,
        }
    }

    /// Marks the kind cluster-scoped.
    pub fn cluster_scoped(mut self) -> Self {
        self.cluster_scoped = true;
        self
    }
}

/// A failed read or write of the handle. Its text reaches a log line and possibly a
/// condition, so it names objects and fields, never a value.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// An API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What the handle was doing, naming the object.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The object exists and another owner controls it.
    #[error(
        "refusing to adopt pre-existing {kind} {namespace}/{name}: it was not created by this {owner_kind}, so adopting it would overwrite its spec and delete it at teardown"
    )]
    ForeignOwner {
        /// The child's kind.
        kind: String,
        /// The child's namespace.
        namespace: String,
        /// The child's name.
        name: String,
        /// The kind of the CR that wanted it.
        owner_kind: String,
    },
    /// A step asked for a kind nobody registered (a programming error, named so it is found).
    #[error("{kind} is not registered with the cluster handle{detail}")]
    NotRegistered {
        /// The kind.
        kind: String,
        /// What registration is missing.
        detail: &'static str,
    },
    /// The cluster does not serve the kind (another operator's CRD is not installed).
    #[error("the cluster does not serve {kind}")]
    NotServed {
        /// The kind.
        kind: String,
    },
    /// A desired object could not be serialized, or a cached one not parsed.
    #[error("{what}: {message}")]
    Invalid {
        /// The object.
        what: String,
        /// The serializer's complaint.
        message: String,
    },
}

impl ClusterError {
    /// A failed API call while doing `action` (naming the object, never a value).
    pub fn kube(action: String, source: kube::Error) -> Self {
        ClusterError::Kube { action, source }
    }

    /// Whether the API server refused the call for lack of rights (HTTP 403).
    pub fn is_forbidden(&self) -> bool {
        matches!(self, ClusterError::Kube { source: kube::Error::Api(status), .. } if status.code == 403)
    }
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
    pub fn remote(&self) -> Result<Owner, ClusterError> {
        let Some(owned) = self.ownership_labels() else {
            return Ok(self.clone());
        };
        let name = &owned[ownership::NAME];
        if name.len() > LABEL_VALUE_MAX {
            return Err(ClusterError::Invalid {
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
    pub fn stamped(&self, owner: &Owner) -> Result<Value, ClusterError> {
        self.stamp(self.body.clone(), owner)
    }

    /// The printable form (credentials masked), stamped like [`Child::stamped`].
    pub fn printable(&self, owner: &Owner) -> Result<Value, ClusterError> {
        self.stamp(
            self.review.clone().unwrap_or_else(|| self.body.clone()),
            owner,
        )
    }

    fn stamp(&self, mut body: Value, owner: &Owner) -> Result<Value, ClusterError> {
        if let Some(message) = &self.invalid {
            return Err(ClusterError::Invalid {
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

/// What an apply did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The cached object already carried the desired fields: no request was made.
    Unchanged,
    /// A server-side apply was sent.
    Written,
}

/// The values of the requested keys of one Secret that exist and are UTF-8.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretValues(pub BTreeMap<String, Sensitive>);

impl SecretValues {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Sensitive> {
        self.0.get(key)
    }
}

/// What the pods of one Job wrote to `/dev/termination-log`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobReport {
    /// The message of the Job's succeeded pod (else of its newest pod); None when no pod of
    /// the Job is left or it wrote nothing.
    pub message: Option<String>,
    /// Whether this call read the API server (the first for this Job); a later call answers
    /// from memory.
    pub fresh: bool,
}

/// The cached metadata of one object.
pub type Meta = Arc<PartialObjectMeta<DynamicObject>>;

/// A label selector of equality terms.
pub type Labels = BTreeMap<String, String>;

/// Every read and write a step makes. Object-safe, so a pass holds `Arc<dyn Cluster>` and
/// the same plan runs against the management cluster, a target cluster or `render`'s files.
pub trait Cluster: Send + Sync {
    /// The one namespace this handle may read, when it is namespace-scoped.
    fn namespace_scope(&self) -> Option<&str>;

    /// An object, from the cache; None when it does not exist (or its kind is not served).
    fn get<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<DynamicObject>>, ClusterError>>;

    /// The metadata of an object, from the cache.
    fn metadata(
        &self,
        kind: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Meta>, ClusterError>;

    /// The metadata of every object of a kind in `namespace` carrying every label of `selector`.
    fn list_metadata(
        &self,
        kind: &ApiResource,
        namespace: &str,
        selector: &Labels,
    ) -> Result<Vec<Meta>, ClusterError>;

    /// The metadata of every object of `kind` carrying every label of `selector`, read from
    /// the API server, never from a cache (`namespace` None for a cluster-scoped kind): for
    /// kinds no watch may hold, such as Nodes, whose informer cannot sync on a
    /// namespace-scoped install. Needs no registration.
    fn list_metadata_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        selector: &'a Labels,
    ) -> BoxFuture<'a, Result<Vec<Meta>, ClusterError>>;

    /// The metadata of one object, read from the API server; None when it does not exist.
    fn metadata_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Meta>, ClusterError>>;

    /// Whether the cluster serves a registered kind (`common-types.md` §3.17 "Capability
    /// probes"): for the management cluster a latch probed once at start-up; a target asks its
    /// API server again on every call while the kind was not served at engagement (a kind
    /// served then is answered from that answer, as a RESTMapper's cache would).
    fn served<'a>(&'a self, kind: &'a ApiResource) -> BoxFuture<'a, Result<bool, ClusterError>>;

    /// One GET of a plain-http Service URL on this cluster (the API health probe).
    fn probe<'a>(&'a self, url: &'a str) -> BoxFuture<'a, probe::Probe>;

    /// How requests reach this cluster's Service URLs: the Keystone, Nova and Placement calls
    /// of a NovaCompute pass.
    fn transport(&self) -> Arc<dyn crate::openstack::Transport>;

    /// One object read from the API server, never from a cache (a kind nothing watches, such
    /// as the hypervisor operator's Hypervisors); None when it does not exist,
    /// [`ClusterError::NotServed`] when the cluster does not serve the kind. Needs no
    /// registration.
    fn get_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<DynamicObject>, ClusterError>>;

    /// A JSON merge patch of an object under [`FIELD_MANAGER`], without optimistic lock.
    fn merge_patch<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
        patch: &'a Value,
    ) -> BoxFuture<'a, Result<(), ClusterError>>;

    /// The objects of `kind` in `namespace` carrying every label of `selector` (and matching
    /// the field selector `fields`), read from the API server: for pods, which no watch holds.
    fn list_live<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: &'a str,
        selector: &'a Labels,
        fields: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<DynamicObject>, ClusterError>>;

    /// The requested keys of a Secret; None when the Secret does not exist.
    fn secret<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        keys: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<SecretValues>, ClusterError>>;

    /// The termination message of the Job whose UID is `job_uid`, read off its pods once per
    /// Job through an uncached list (the operator never watches pods, which would cache every
    /// pod of the cluster): only pods that Job controls count, the succeeded one first.
    fn job_report<'a>(
        &'a self,
        namespace: &'a str,
        job_uid: &'a str,
    ) -> BoxFuture<'a, Result<JobReport, ClusterError>>;

    /// Server-side applies `child` for `owner`, unless the cache shows it already carries
    /// exactly that; refuses an object another owner controls, adopts one nobody controls.
    fn apply<'a>(
        &'a self,
        owner: &'a Owner,
        child: &'a Child,
    ) -> BoxFuture<'a, Result<Applied, ClusterError>>;

    /// Deletes an object by name (in the background); an object already gone is not an error.
    fn delete<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), ClusterError>>;

    /// Whether the cluster's API server answers now (one uncached request, bounded): how the
    /// deletion path tells a stopped target from an engaged one.
    fn reachable(&self) -> BoxFuture<'_, bool>;

    /// Deletes (in the background) every object of `kind` in the owner's namespace that
    /// `owner` controls, listed metadata-only from the API server, never from a cache, 500 at
    /// a time (`common-types.md` §3.17 "Remote sweep"); a kind the cluster does not serve is
    /// skipped. Returns how many deletes it issued; it does not wait for the objects to go.
    fn sweep<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
    ) -> BoxFuture<'a, Result<usize, ClusterError>>;

    /// Deletes every object of `kind` matching `selector` that `owner` controls, except those
    /// named in `keep`; returns how many it deleted.
    fn prune<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
        selector: &'a Labels,
        keep: &'a [String],
    ) -> BoxFuture<'a, Result<usize, ClusterError>>;
}

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

/// Typed reads on top of the object-safe trait.
pub trait ClusterExt: Cluster {
    /// A typed object of a built-in kind in `namespace`.
    fn get_typed<'a, K>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<K>, ClusterError>>
    where
        K: Resource<DynamicType = ()> + serde::de::DeserializeOwned + Send + 'a,
    {
        Box::pin(async move {
            let kind = ApiResource::erase::<K>(&());
            let Some(object) = self.get(&kind, Some(namespace), name).await? else {
                return Ok(None);
            };
            let parsed = (*object)
                .clone()
                .try_parse::<K>()
                .map_err(|e| ClusterError::Invalid {
                    what: format!("cached {} {namespace}/{name}", kind.kind),
                    message: e.to_string(),
                })?;
            Ok(Some(parsed))
        })
    }
}

impl<C: Cluster + ?Sized> ClusterExt for C {}

/// Whether a deleting CR abandons its remote children: only when both this process has failed
/// to resolve the target for the whole window and the deletion is that old (a restart or a
/// fresh deletion restarts the wait).
fn abandons(failing: Duration, since_deletion: Duration, window: Duration) -> bool {
    failing >= window && since_deletion >= window
}

/// What an unregistered (or not yet engaged) target cluster resolves to.
pub const CLUSTER_NOT_FOUND: &str = "cluster not found";

/// How long a deleting CR waits for its target cluster before its remote children are
/// abandoned (`common-types.md` §3.17 `AbandonAfter`).
pub const ABANDON_AFTER: Duration = Duration::from_secs(300);

/// How a deleting CR reaches its children (`common-types.md` §3.17 "Deletion and the
/// abandon window").
pub enum Teardown {
    /// Clean up through this handle.
    Through(Arc<dyn Cluster>),
    /// The target does not resolve yet: keep the finalizers and look again (the message is
    /// the condition's).
    Wait(String),
    /// The target has not resolved for the whole window: release the finalizers without
    /// deleting anything (the message is the Warning event's).
    Abandon(String),
}

/// Resolves the cluster a CR's children live on (`common-types.md` §3.17 "Resolution").
pub struct Clusters {
    local: Arc<dyn Cluster>,
    targets: Option<Arc<Fleet>>,
    /// When this process first failed to resolve each target name (since its last success).
    failures: Mutex<HashMap<String, Instant>>,
}

impl Clusters {
    /// A nil ref resolves to `local`, a named one to the engaged cluster of `targets` (None
    /// when target clusters are disabled: no name resolves).
    pub fn new(local: Arc<dyn Cluster>, targets: Option<Arc<Fleet>>) -> Self {
        Self {
            local,
            targets,
            failures: Mutex::default(),
        }
    }

    /// The management cluster, where every CR, its status and its finalizers live.
    pub fn local(&self) -> Arc<dyn Cluster> {
        self.local.clone()
    }

    /// The handle of `target` (None = the management cluster) for a CR in `namespace`, or
    /// the resolver's error text, which goes unwrapped into the TargetClusterUnavailable
    /// condition.
    pub fn resolve(
        &self,
        target: Option<&str>,
        namespace: &str,
    ) -> Result<Arc<dyn Cluster>, String> {
        let Some(name) = target else {
            return Ok(self.local.clone());
        };
        let resolved = self.lookup(name, namespace);
        self.remember(name, resolved.is_ok());
        resolved
    }

    fn lookup(&self, name: &str, namespace: &str) -> Result<Arc<dyn Cluster>, String> {
        match &self.targets {
            Some(fleet) => fleet.resolve(name, namespace),
            None => Err(CLUSTER_NOT_FOUND.to_owned()),
        }
    }

    /// The deletion variant of [`Clusters::resolve`] for a CR deleted `since_deletion` ago. A
    /// target must also answer now (one request, deletion passes only): a stopped API server
    /// counts as not resolving. Abandon only when both this process has failed to resolve
    /// the target for the whole window and the deletion is that old.
    pub async fn resolve_for_deletion(
        &self,
        target: Option<&str>,
        namespace: &str,
        since_deletion: Duration,
    ) -> Teardown {
        let Some(name) = target else {
            return Teardown::Through(self.local.clone());
        };
        let error = match self.lookup(name, namespace) {
            Ok(cluster) if cluster.reachable().await => {
                self.remember(name, true);
                return Teardown::Through(cluster);
            }
            Ok(_) => format!("the API server of cluster {name} does not answer"),
            Err(error) => error,
        };
        self.remember(name, false);
        let window = self.abandon_after();
        let failing = self
            .failures()
            .get(name)
            .map(Instant::elapsed)
            .unwrap_or_default();
        if abandons(failing, since_deletion, window) {
            return Teardown::Abandon(format!(
                "Target cluster {name} has not resolved for {}s ({error}): the objects labelled as owned by this object stay behind on it; releasing the finalizers",
                window.as_secs()
            ));
        }
        Teardown::Wait(format!(
            "Target cluster {name} does not resolve ({error}); its remote children are abandoned once it has not resolved for {}s",
            window.as_secs()
        ))
    }

    /// Keeps the first failure of this process to resolve `name`, forgotten once it resolves.
    fn remember(&self, name: &str, resolved: bool) {
        let mut failures = self.failures();
        if resolved {
            failures.remove(name);
        } else {
            failures.entry(name.to_owned()).or_insert_with(Instant::now);
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.failures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The abandon window: the fleet's, or [`ABANDON_AFTER`] when target clusters are off.
    fn abandon_after(&self) -> Duration {
        self.targets
            .as_ref()
            .map_or(ABANDON_AFTER, |fleet| fleet.abandon_after())
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
    fn the_abandon_window_needs_both_clocks() {
        let (window, s) = (ABANDON_AFTER, Duration::from_secs);
        assert!(abandons(s(300), s(300), window));
        assert!(abandons(s(900), s(301), window));
        assert!(
            !abandons(s(299), s(900), window),
            "this process failed too recently"
        );
        assert!(!abandons(s(900), s(299), window), "deleted too recently");
        assert!(!abandons(Duration::ZERO, Duration::ZERO, window));
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
