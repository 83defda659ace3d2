//! The cluster handle (`DESIGN.md` principle 6): every read and write a step makes goes through
//! the [`Cluster`] its CR resolves to. Steps hold its read side ([`Handle`] derefs to
//! [`ClusterReads`]); the write side ([`ClusterWrites`]) is the engine's, carrying out plans.
//!
//! A CR without `targetClusterRef` resolves to the [`KubeCluster`] of the management cluster
//! this process runs against; one that names a registered target cluster resolves to that
//! cluster's handle, engaged by the [`Fleet`] from its registration Secret: the same type with
//! its own watch caches, which stamps ownership labels instead of an owner reference and
//! probes Services through the target API server's proxy. The `render` command and the plan
//! tests run the very same plans against an in-memory handle ([`MemoryCluster`]).
//!
//! Reads are served from watch caches registered once at start-up ([`KindSpec`]), so a pass
//! over an unchanged CR issues no GET or LIST. Writes are server-side applies under the one
//! field manager, skipped when the cache shows the object already carries exactly what the
//! apply would write.

pub mod availability;
pub mod carries;
mod fleet;
mod kube_cluster;
mod memory;
pub mod probe;
pub mod registration;
mod resolver;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Resource;
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::core::ApiResource;
use serde_json::Value;

pub use fleet::Fleet;
pub use kube_cluster::{KubeCluster, Registry, report_of, values_of};
pub use memory::{MemoryCluster, SecretSource};
pub use resolver::{ABANDON_AFTER, CLUSTER_NOT_FOUND, Clusters, Teardown};

use crate::objects::{Child, Invalid, Labels, Owner};
use crate::sensitive::Sensitive;

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
    #[error(transparent)]
    Invalid(#[from] Invalid),
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

/// Every read a step makes: the side of the handle steps hold ([`Handle`]). Object-safe, so
/// the same plan runs against the management cluster, a target cluster or `render`'s memory.
pub trait ClusterReads: Send + Sync {
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

    /// Whether the cluster's API server answers now (one uncached request, bounded): how the
    /// deletion path tells a stopped target from an engaged one.
    fn reachable(&self) -> BoxFuture<'_, bool>;
}

/// Every write the controller makes: the side only the engine and the skeleton call, carrying
/// out a plan's children and effects (a step hands them over as data).
pub trait ClusterWrites: Send + Sync {
    /// A JSON merge patch of an object under [`FIELD_MANAGER`], without optimistic lock.
    fn merge_patch<'a>(
        &'a self,
        kind: &'a ApiResource,
        namespace: Option<&'a str>,
        name: &'a str,
        patch: &'a Value,
    ) -> BoxFuture<'a, Result<(), ClusterError>>;

    /// Server-side applies `child` for `owner`, unless the cache shows it already carries
    /// exactly that; refuses an object another owner controls, adopts one nobody controls.
    fn apply<'a>(
        &'a self,
        owner: &'a Owner,
        child: &'a Child,
    ) -> BoxFuture<'a, Result<Applied, ClusterError>>;

    /// Deletes an object by name in the owner's namespace (in the background): with `seen`,
    /// exactly the object of that UID (one the caller observed and vouches for); without, only
    /// when the owner controls it, on the UID the handle sees. An object already gone, replaced
    /// or controlled by someone else is not an error, and is left alone.
    fn delete<'a>(
        &'a self,
        owner: &'a Owner,
        kind: &'a ApiResource,
        name: &'a str,
        seen: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ClusterError>>;

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

/// A whole cluster handle: both sides.
pub trait Cluster: ClusterReads + ClusterWrites {}

impl<C: ClusterReads + ClusterWrites + ?Sized> Cluster for C {}

/// A cluster handle as steps hold it: reads through `Deref` to [`ClusterReads`], writes only
/// through [`Handle::writes`], which the engine calls to carry out a plan (a pure-tier test
/// keeps it out of the step files). A plan's effects name their cluster by its `Handle`.
#[derive(Clone)]
pub struct Handle(Arc<dyn Cluster>);

impl Handle {
    /// The handle of `cluster`.
    pub fn new(cluster: Arc<dyn Cluster>) -> Self {
        Self(cluster)
    }

    /// The write side: for the engine and the skeleton only.
    pub fn writes(&self) -> &dyn ClusterWrites {
        &*self.0
    }

    /// Both sides, for a resolver over this handle alone (a pass built without a controller).
    pub(crate) fn whole(&self) -> Arc<dyn Cluster> {
        self.0.clone()
    }
}

impl std::ops::Deref for Handle {
    type Target = dyn ClusterReads;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

/// Typed reads on top of the object-safe trait.
pub trait ClusterExt: ClusterReads {
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
            let parsed = (*object).clone().try_parse::<K>().map_err(|e| {
                ClusterError::from(Invalid {
                    what: format!("cached {} {namespace}/{name}", kind.kind),
                    message: e.to_string(),
                })
            })?;
            Ok(Some(parsed))
        })
    }
}

impl<C: ClusterReads + ?Sized> ClusterExt for C {}
