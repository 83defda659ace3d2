//! Builders of the desired child objects, pure functions of the CR and what earlier steps
//! resolved. Owner references and common labels are not set here: the cluster handle stamps
//! them on every apply.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::NovaSpec;

use super::{ContractVariant, RenderError, RenderedConfig, contract_keys, contract_static_keys};
use crate::objects::Child;
use crate::sensitive::Sensitive;

/// The label that selects every config ConfigMap of one CR, for pruning.
pub const CONFIG_BASE_LABEL: &str = "cobaltcore.c5c3.io/config-base";

/// The selector of every config ConfigMap of the Nova `nova`.
pub fn config_selector(nova: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(
        CONFIG_BASE_LABEL.to_owned(),
        NovaNames::new(nova).config_base(),
    )])
}

/// The immutable, content-addressed ConfigMap one render produces.
pub fn config_map(nova: &str, rendered: &RenderedConfig) -> Child {
    content_addressed(
        rendered.config_map_name(nova),
        config_selector(nova),
        &rendered.documents,
    )
}

/// An immutable ConfigMap `name` holding `data`, labelled with its history's `selector`.
pub fn content_addressed(
    name: String,
    selector: BTreeMap<String, String>,
    data: &BTreeMap<String, String>,
) -> Child {
    Child::new(&ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(selector),
            ..Default::default()
        },
        data: Some(data.clone()),
        immutable: Some(true),
        ..Default::default()
    })
}

/// A derived Secret (type Opaque) holding exactly `data`. It is applied with the values and
/// printed by `render` with each value's masked form, so a credential is never printed.
pub fn derived_secret(name: &str, data: &BTreeMap<String, Sensitive>) -> Child {
    let metadata = ObjectMeta {
        name: Some(name.to_owned()),
        ..Default::default()
    };
    let applied = Secret {
        metadata: metadata.clone(),
        type_: Some("Opaque".to_owned()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), ByteString(v.expose().as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    let printed = Secret {
        metadata,
        type_: Some("Opaque".to_owned()),
        string_data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), v.shown().to_owned()))
                .collect(),
        ),
        ..Default::default()
    };
    Child::new(&applied).with_review(&printed)
}

/// The Secret-sourced values a compute contract carries.
#[derive(Clone, Debug)]
pub struct ContractSecrets {
    /// The transport URL the contract's computes dial.
    pub transport_url: Sensitive,
    /// The service-user password.
    pub password: Sensitive,
    /// The metadata proxy shared secret.
    pub metadata_shared_secret: Sensitive,
    /// The broker CA bundle, on a TLS bus.
    pub ca: Option<Sensitive>,
    /// spec.tls's CA bundle, while it is set.
    pub endpoint_ca: Option<Sensitive>,
}

/// The whole data of one contract Secret: the rendered keys plus the Secret-sourced ones.
pub fn contract_data(
    name: &str,
    namespace: &str,
    spec: &NovaSpec,
    variant: ContractVariant,
    secrets: &ContractSecrets,
) -> Result<BTreeMap<String, Sensitive>, RenderError> {
    let mut data: BTreeMap<String, Sensitive> =
        contract_static_keys(name, namespace, spec, variant)?
            .into_iter()
            .map(|(k, v)| (k, Sensitive::plain(v)))
            .collect();
    data.insert(
        contract_keys::TRANSPORT_URL.to_owned(),
        secrets.transport_url.clone(),
    );
    data.insert(contract_keys::PASSWORD.to_owned(), secrets.password.clone());
    data.insert(
        contract_keys::METADATA_PROXY_SHARED_SECRET.to_owned(),
        secrets.metadata_shared_secret.clone(),
    );
    if spec.messaging.tls.is_some()
        && let Some(ca) = &secrets.ca
    {
        data.insert(contract_keys::CA_CRT.to_owned(), ca.clone());
    }
    if spec.tls.is_some()
        && let Some(ca) = &secrets.endpoint_ca
    {
        data.insert(contract_keys::ENDPOINT_CA_CRT.to_owned(), ca.clone());
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Owner;

    #[test]
    fn a_derived_secret_is_applied_with_values_and_printed_masked() {
        let data = BTreeMap::from([
            (
                "connection".to_owned(),
                Sensitive::new("mysql+pymysql://u:hunter2@h/db"),
            ),
            ("cell_name".to_owned(), Sensitive::plain("cell1")),
        ]);
        let child = derived_secret("nova-db-connection", &data);
        let owner = Owner {
            kind: "Nova".into(),
            namespace: "ns".into(),
            reference: None,
            labels: BTreeMap::new(),
        };
        let applied = child.stamped(&owner).expect("stamps");
        assert_eq!(applied["type"], "Opaque");
        assert!(applied["data"]["connection"].is_string());
        let printed =
            serde_json::to_string(&child.printable(&owner).expect("stamps")).expect("json");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("\"connection\":\"REDACTED\""), "{printed}");
        assert!(printed.contains("\"cell_name\":\"cell1\""), "{printed}");
    }
}
