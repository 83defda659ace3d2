//! Derived Secrets (`common-types.md` §3.7 step 4, §3.8 step 5; the compute contracts):
//! claimed by the CR, created when absent, replaced wholesale when their data drifted,
//! untouched when equal.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use crate::pipeline::StepError;
use crate::pipeline::status::FIELD_MANAGER;
use crate::sensitive::Sensitive;

/// What a derived Secret should hold.
pub struct Desired<'a> {
    /// The Secret's name.
    pub name: &'a str,
    /// Its whole data, key by key.
    pub data: BTreeMap<String, Sensitive>,
    /// The claiming CR's controller reference.
    pub owner: OwnerReference,
    /// The CR's common labels.
    pub labels: BTreeMap<String, String>,
}

/// Whether `secret` is controlled by `owner`, by nobody, or by someone else.
fn controller_of(secret: &Secret) -> Option<&OwnerReference> {
    secret
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The single-key data of a derived DSN or URL Secret.
pub fn one_key(key: &str, value: &Sensitive) -> BTreeMap<String, Sensitive> {
    BTreeMap::from([(key.to_owned(), value.clone())])
}

/// Ensures the Secret; returns whether a write was issued. An existing Secret another
/// controller owns is refused, one nobody controls is adopted.
pub async fn ensure(api: &Api<Secret>, desired: Desired<'_>) -> Result<bool, StepError> {
    let ns = api.namespace().unwrap_or_default().to_owned();
    let name = desired.name;
    let data: BTreeMap<String, ByteString> = desired
        .data
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.expose().as_bytes().to_vec())))
        .collect();
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..Default::default()
    };
    let existing = api
        .get_opt(name)
        .await
        .map_err(|e| StepError::kube(format!("reading Secret {ns}/{name}"), e))?;
    let Some(mut secret) = existing else {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(desired.labels),
                owner_references: Some(vec![desired.owner]),
                ..Default::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(data),
            ..Default::default()
        };
        api.create(&params, &secret)
            .await
            .map_err(|e| StepError::kube(format!("creating Secret {ns}/{name}"), e))?;
        return Ok(true);
    };
    let controlled = match controller_of(&secret) {
        Some(owner) if owner.uid == desired.owner.uid => true,
        Some(owner) => {
            return Err(StepError::Refused(format!(
                "Secret {ns}/{name} exists and is controlled by {} {}; refusing to overwrite it",
                owner.kind, owner.name
            )));
        }
        None => false,
    };
    if controlled && secret.data.as_ref() == Some(&data) {
        return Ok(false);
    }
    if !controlled {
        secret.owner_references_mut().push(desired.owner);
    }
    secret.data = Some(data);
    secret.string_data = None;
    api.replace(name, &params, &secret)
        .await
        .map_err(|e| StepError::kube(format!("updating Secret {ns}/{name}"), e))?;
    Ok(true)
}
