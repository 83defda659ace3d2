//! `nova-controller render`: everything the Nova pipeline would create for one CR, rendered
//! without a cluster, so a user can review and diff it before applying the CR.
//!
//! The admission defaults are applied first, as the webhook would. Values that only Secrets
//! hold come from `--secrets-dir` (Secret manifests); a missing one is replaced by a clearly
//! marked placeholder, never by a real-looking value.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use nova_api::defaults::default_nova;
use nova_api::effective::{self, secret_keys};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{Nova, SecretRefSpec};
use serde_json::Value;

use crate::nova::compute_config::{ContractSecrets, contract_data};
use crate::nova::config::desired_config_map;
use crate::render::{self, ContractVariant};
use crate::sensitive::Sensitive;

/// Why an offline render failed.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The CR or a Secret manifest could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not the manifest it should be.
    #[error("parsing {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// The renderers refused the CR.
    #[error(transparent)]
    Render(#[from] render::RenderError),
    /// Serializing the output failed.
    #[error("serializing the output: {0}")]
    Output(String),
}

/// The Secrets a render may read, by name.
#[derive(Default)]
pub struct SecretSource(BTreeMap<String, Secret>);

impl SecretSource {
    /// Every Secret manifest (`*.yaml`, `*.yml`, `*.json`, multi-document allowed) in `dir`.
    pub fn from_dir(dir: &Path) -> Result<Self, OfflineError> {
        let read_err = |source| OfflineError::Read {
            path: dir.display().to_string(),
            source,
        };
        let mut secrets = BTreeMap::new();
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            let is_manifest = path
                .extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
            if !is_manifest {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|source| OfflineError::Read {
                path: path.display().to_string(),
                source,
            })?;
            let documents: Vec<Value> =
                serde_saphyr::from_multiple(&text).map_err(|e| OfflineError::Parse {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
            for document in documents.into_iter().filter(|d| d["kind"] == "Secret") {
                let secret: Secret =
                    serde_json::from_value(document).map_err(|e| OfflineError::Parse {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    })?;
                secrets.insert(secret.name_any(), secret);
            }
        }
        Ok(Self(secrets))
    }

    /// The value of `key` in Secret `name` (data or stringData), or a placeholder naming both.
    fn value(&self, name: &str, key: &str) -> Sensitive {
        let secret = self.0.get(name);
        let from_data = secret
            .and_then(|s| s.data.as_ref()?.get(key))
            .and_then(|b| String::from_utf8(b.0.clone()).ok());
        let from_string_data = secret.and_then(|s| s.string_data.as_ref()?.get(key).cloned());
        Sensitive::new(from_data.or(from_string_data).unwrap_or_else(|| {
            format!("<placeholder: key \"{key}\" of Secret {name}, not in --secrets-dir>")
        }))
    }

    fn reference(&self, reference: &SecretRefSpec, default_key: &str) -> Sensitive {
        self.value(
            &reference.name,
            effective::secret_key(reference, default_key),
        )
    }
}

/// Parses a Nova manifest.
pub fn read_nova(path: &Path) -> Result<Nova, OfflineError> {
    let text = std::fs::read_to_string(path).map_err(|source| OfflineError::Read {
        path: path.display().to_string(),
        source,
    })?;
    serde_saphyr::from_str(&text).map_err(|e| OfflineError::Parse {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Every child the pipeline would create for `nova`, in a stable order, as JSON objects.
pub fn children(mut nova: Nova, secrets: &SecretSource) -> Result<Vec<Value>, OfflineError> {
    default_nova(&mut nova.spec);
    let name = nova.name_any();
    let namespace = nova.namespace().unwrap_or_else(|| "default".to_owned());
    let names = NovaNames::new(&name);
    let labels = nova_api::labels::common(&name);
    let spec = &nova.spec;

    let rendered = render::render_config(&name, &namespace, spec)?;
    let mut config_map = desired_config_map(&name, &rendered, labels.clone(), None);
    config_map.metadata.namespace = Some(namespace.clone());
    let mut objects = vec![to_object("v1", "ConfigMap", &config_map)?];

    let transport_url = match &spec.messaging.secret_ref {
        Some(reference) => secrets.reference(reference, secret_keys::TRANSPORT_URL),
        None => Sensitive::new(format!(
            "<placeholder: the rabbit:// URL of the default-user Secret of RabbitmqCluster {}, resolved in the cluster>",
            spec.messaging.cluster_ref.clone().unwrap_or_default().name
        )),
    };
    let mut contract = ContractSecrets {
        transport_url,
        password: secrets.reference(
            &spec.service_user.secret_ref,
            secret_keys::SERVICE_USER_PASSWORD,
        ),
        metadata_shared_secret: secrets.reference(
            &spec.metadata.shared_secret_ref,
            secret_keys::METADATA_SHARED_SECRET,
        ),
        ca: spec
            .messaging
            .tls
            .as_ref()
            .map(|tls| secrets.reference(&tls.ca_bundle_secret_ref, secret_keys::MESSAGING_CA)),
    };
    let local = contract_data(
        &name,
        &namespace,
        spec,
        ContractVariant::InCluster,
        &contract,
    )?;
    objects.push(secret_object(
        &names.compute_config(),
        &namespace,
        &labels,
        local,
    )?);
    if let Some(remote) = &spec.remote_compute {
        contract.transport_url =
            secrets.reference(&remote.transport_url_secret_ref, secret_keys::TRANSPORT_URL);
        let data = contract_data(&name, &namespace, spec, ContractVariant::Remote, &contract)?;
        objects.push(secret_object(
            &names.remote_compute_config(),
            &namespace,
            &labels,
            data,
        )?);
    }
    Ok(objects)
}

fn secret_object(
    name: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    data: BTreeMap<String, Sensitive>,
) -> Result<Value, OfflineError> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        string_data: Some(
            data.into_iter()
                .map(|(k, v)| (k, v.expose().to_owned()))
                .collect(),
        ),
        ..Default::default()
    };
    to_object("v1", "Secret", &secret)
}

fn to_object<T: serde::Serialize>(
    api_version: &str,
    kind: &str,
    object: &T,
) -> Result<Value, OfflineError> {
    let mut value =
        serde_json::to_value(object).map_err(|e| OfflineError::Output(e.to_string()))?;
    value["apiVersion"] = api_version.into();
    value["kind"] = kind.into();
    Ok(value)
}

/// A multi-document YAML stream.
pub fn to_yaml(objects: &[Value]) -> Result<String, OfflineError> {
    let documents: Result<Vec<String>, _> = objects.iter().map(serde_saphyr::to_string).collect();
    let documents = documents.map_err(|e| OfflineError::Output(e.to_string()))?;
    Ok(documents.iter().map(|d| format!("---\n{d}")).collect())
}

/// One `v1` `List`.
pub fn to_json(objects: Vec<Value>) -> Result<String, OfflineError> {
    let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": objects });
    serde_json::to_string_pretty(&list)
        .map(|s| s + "\n")
        .map_err(|e| OfflineError::Output(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Nova {
        read_nova(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/nova.yaml"
        )))
        .expect("sample")
    }

    #[test]
    fn the_example_renders_its_config_map_and_contract_with_placeholders() {
        let objects = children(example(), &SecretSource::default()).expect("renders");
        let kinds: Vec<_> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(kinds[0].0, "ConfigMap");
        assert!(kinds[0].1.starts_with("nova-config-"));
        assert_eq!(kinds[1], ("Secret", "nova-compute-config"));
        assert_eq!(
            kinds.len(),
            2,
            "no remote contract without spec.remoteCompute"
        );
        let contract = &objects[1]["stringData"];
        assert_eq!(contract["cell_name"], "cell1");
        assert!(
            contract["password"]
                .as_str()
                .unwrap_or_default()
                .starts_with("<placeholder: key \"password\" of Secret nova-keystone")
        );
        assert!(
            contract["transport_url"]
                .as_str()
                .unwrap_or_default()
                .starts_with("<placeholder: the rabbit:// URL")
        );
        assert!(
            objects[0]["data"]["nova.conf"]
                .as_str()
                .unwrap_or_default()
                .contains("[keystone_authtoken]")
        );
        assert_eq!(objects[0]["immutable"], true);
    }

    #[test]
    fn secrets_dir_values_are_used_and_output_is_stable() {
        let dir = std::env::temp_dir().join(format!("nova-render-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(
            dir.join("secrets.yaml"),
            "apiVersion: v1\nkind: Secret\nmetadata: {name: nova-keystone}\nstringData: {password: from-dir}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ignored}\n",
        )
        .expect("write");
        let source = SecretSource::from_dir(&dir).expect("reads");
        let objects = children(example(), &source).expect("renders");
        assert_eq!(objects[1]["stringData"]["password"], "from-dir");
        let yaml = to_yaml(&objects).expect("yaml");
        assert_eq!(yaml.matches("---\n").count(), 2);
        assert_eq!(
            yaml,
            to_yaml(&children(example(), &source).expect("renders")).expect("yaml"),
            "stable"
        );
        let json: Value = serde_json::from_str(&to_json(objects).expect("json")).expect("parses");
        assert_eq!(
            (json["apiVersion"].as_str(), json["kind"].as_str()),
            (Some("v1"), Some("List"))
        );
        std::fs::remove_dir_all(dir).expect("cleanup");
    }
}
