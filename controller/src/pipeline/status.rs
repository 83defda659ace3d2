//! The status write that ends every pass: server-side apply on `/status`, only when something
//! changed.

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Writes `after` through server-side apply on `/status` under `manager` unless it equals
/// `before`, so a pass that changed nothing causes no write, no watch event and no
/// resourceVersion churn. Returns whether a write was issued.
pub async fn persist<K, S>(
    api: &Api<K>,
    name: &str,
    before: &S,
    after: &S,
    manager: &str,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if before == after {
        return Ok(false);
    }
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": after,
    });
    api.patch_status(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(true)
}
