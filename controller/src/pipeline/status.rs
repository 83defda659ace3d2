//! The status write that ends every pass: server-side apply on `/status`, only when something
//! changed.

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Writes `after` through server-side apply on `/status` under `manager` unless it equals
/// `before`, so a pass that changed nothing causes no write, no watch event and no
/// resourceVersion churn. Returns the written object's resourceVersion, None when no write
/// was issued.
///
/// The write carries `resource_version`, the version of the copy the pass computed `after`
/// from, as a precondition: the whole status is applied, so a pass that ran on a cached copy
/// not yet showing an earlier pass's write would otherwise put that write's fields back (a
/// pool's `createdTraits` emptied, its traits then never deleted). The API server refuses such
/// a write with 409 Conflict instead ([`is_stale`]).
pub async fn persist<K, S>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<&str>,
    before: &S,
    after: &S,
    manager: &str,
) -> Result<Option<String>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if before == after {
        return Ok(None);
    }
    let mut body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": after,
    });
    if let Some(version) = resource_version {
        body["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    let written = api
        .patch_status(
            name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(body),
        )
        .await?;
    Ok(Some(
        written.meta().resource_version.clone().unwrap_or_default(),
    ))
}

/// Whether a status write was refused because the pass's copy was stale: the fresher
/// object's watch event brings the next pass, which recomputes the status from it.
pub fn is_stale(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}
