//! The status skeleton: written on every exit path, and only when something changed.

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The one field manager every write of this operator uses.
pub const FIELD_MANAGER: &str = "cobaltcore-operator";

/// Writes `after` through server-side apply on `/status` unless it equals `before`, so a pass
/// that changed nothing causes no write, no watch event and no resourceVersion churn.
/// Returns whether a write was issued.
pub async fn persist<K, S>(
    api: &Api<K>,
    name: &str,
    before: &S,
    after: &S,
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
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(true)
}
