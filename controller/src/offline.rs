//! `nova-controller render`: everything the Nova pipeline would create for one CR, without a
//! cluster, so a user can review and diff it before applying the CR.
//!
//! It runs the controller's own pipeline table, plan for plan, against a file-backed cluster
//! handle, so it prints every child a step applies (the derived Secrets included) and grows
//! with every step added to the table. The admission defaults are applied first, as the
//! webhook would. The Secrets the gates read come from `--secrets-dir` (Secret manifests); a
//! missing one reads as marked placeholders. No credential is ever printed: a Secret's values
//! print masked (`REDACTED`), a DSN or URL with its credentials masked.

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use nova_api::defaults::{default_nova, default_novacompute};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{LocalSecretRef, Nova, NovaCompute};
use serde_json::Value;

use crate::clusters::{MemoryCluster, SecretSource};
use crate::metrics::Metrics;
use crate::nova::PIPELINE;
use crate::objects::Invalid;
use crate::pipeline::{ConditionType, Engine, Flow, Pass, PipelineError, Reconciled};

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
    Render(#[from] crate::render::RenderError),
    /// Serializing the output failed.
    #[error("serializing the output: {0}")]
    Output(String),
}

/// Every Secret manifest (`*.yaml`, `*.yml`, `*.json`, multi-document allowed) in `dir`.
pub fn secrets_from_dir(dir: &Path) -> Result<SecretSource, OfflineError> {
    let read_err = |source| OfflineError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut secrets = Vec::new();
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
            secrets.push(secret);
        }
    }
    Ok(SecretSource::new(secrets))
}

/// Parses a Nova manifest.
pub fn read_nova(path: &Path) -> Result<Nova, OfflineError> {
    read_manifest(path)
}

fn read_manifest<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, OfflineError> {
    let text = std::fs::read_to_string(path).map_err(|source| OfflineError::Read {
        path: path.display().to_string(),
        source,
    })?;
    serde_saphyr::from_str(&text).map_err(|e| OfflineError::Parse {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// The most passes one render runs: one per Job a pass may wait on, and the last.
const RENDER_PASSES: usize = 3;

/// What an offline run of the pipeline produced.
pub struct Rendered {
    /// Every child the pipeline would apply, in pipeline order, printable (credentials masked).
    pub objects: Vec<Value>,
    /// The effects beyond its children (a pool's OpenStack actions against an empty cloud), one
    /// line each naming the step.
    pub effects: Vec<String>,
    /// Why the pipeline stopped before its end, when it did (a wait or an error).
    pub stopped: Option<String>,
}

/// Runs the Nova pipeline for `nova` against the files: the same plans the controller runs,
/// so every child a later step adds is rendered too.
pub async fn render(mut nova: Nova, secrets: SecretSource) -> Result<Rendered, OfflineError> {
    default_nova(&mut nova.spec);
    if nova.namespace().is_none() {
        nova.metadata.namespace = Some("default".to_owned());
    }
    let cluster = Arc::new(MemoryCluster::new(secrets));
    let nova = Arc::new(nova);
    let metrics = Metrics::new().map_err(|e| OfflineError::Output(e.to_string()))?;
    let engine = Engine::new(metrics);
    // A pass that created a Job waits for it; the next pass sees it completed, so the steps
    // behind the migrations are rendered too.
    let mut pass = Pass::new(nova.clone(), cluster.clone());
    let mut outcome = engine.run(&PIPELINE, &mut pass).await;
    for _ in 1..RENDER_PASSES {
        let jobs = cluster.applied_jobs();
        if !matches!(outcome, Ok(Flow::RequeueAfter(_))) || jobs == 0 {
            break;
        }
        pass = Pass::new(nova.clone(), cluster.clone());
        outcome = engine.run(&PIPELINE, &mut pass).await;
        if cluster.applied_jobs() == jobs && matches!(outcome, Ok(Flow::RequeueAfter(_))) {
            break;
        }
    }
    rendered(&pass, outcome, &cluster)
}

/// What one render produced: the applied children, printable, and why the pipeline stopped.
fn rendered<K: Reconciled>(
    pass: &Pass<K>,
    outcome: Result<Flow, PipelineError>,
    cluster: &MemoryCluster,
) -> Result<Rendered, OfflineError> {
    let stopped = match outcome {
        Ok(Flow::Continue) => None,
        Ok(Flow::RequeueAfter(_)) => Some(match pass.verdicts().iter().rev().find(|v| !v.ok) {
            Some(v) => format!(
                "the pipeline waits: {}=False {}: {}",
                v.condition.as_str(),
                v.reason,
                v.message
            ),
            None => "the pipeline waits".to_owned(),
        }),
        Err(e) => Some(format!("the pipeline failed at {e}")),
    };
    let objects = cluster
        .applied()
        .iter()
        .map(|child| child.printable(&pass.owner))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| OfflineError::Output(e.to_string()))?;
    Ok(Rendered {
        objects,
        effects: Vec::new(),
        stopped,
    })
}

/// Parses a NovaCompute manifest.
pub fn read_pool(path: &Path) -> Result<NovaCompute, OfflineError> {
    read_manifest(path)
}

/// Runs the NovaCompute pipeline for `pool` joined to `nova`, as if the Nova had installed its
/// release and published its contract: the ConfigMap and the DaemonSet a pool selecting no node
/// yet would get (and its VPA when it opts in), and the OpenStack actions its steps would take
/// against an empty cloud (recorded, never sent). The contract Secret comes from
/// `--secrets-dir` when it is there, else it reads as marked placeholders.
pub async fn render_pool(
    mut pool: NovaCompute,
    mut nova: Nova,
    secrets: SecretSource,
) -> Result<Rendered, OfflineError> {
    default_novacompute(&mut pool.spec);
    default_nova(&mut nova.spec);
    let ns = pool.namespace().unwrap_or_else(|| "default".to_owned());
    pool.metadata.namespace = Some(ns.clone());
    nova.metadata.namespace = Some(ns);
    let contract = NovaNames::new(&nova.name_any()).compute_config();
    let status = nova.status.get_or_insert_with(Default::default);
    status
        .installed_release
        .get_or_insert_with(|| nova.spec.open_stack_release.clone());
    status
        .compute_config_secret_ref
        .get_or_insert_with(|| LocalSecretRef {
            name: contract.clone(),
        });
    let keys = crate::novacompute::steps::pool_config::REQUIRED;
    let secret = match secrets.get(&contract) {
        Some(secret) => secret.clone(),
        None => Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(contract.clone()),
                ..Default::default()
            },
            data: Some(
                secrets
                    .values(&contract, &keys)
                    .0
                    .into_iter()
                    .map(|(k, v)| (k, k8s_openapi::ByteString(v.expose().as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        },
    };
    let given = |e: Invalid| OfflineError::Output(e.to_string());
    let cluster = Arc::new(
        MemoryCluster::new(secrets)
            .with(&nova)
            .map_err(given)?
            .with(&secret)
            .map_err(given)?,
    );
    let metrics = Metrics::new().map_err(|e| OfflineError::Output(e.to_string()))?;
    let mut pass = Pass::new(Arc::new(pool), cluster.clone());
    let engine = Engine::recording(metrics);
    let outcome = engine.run(crate::novacompute::PIPELINE, &mut pass).await;
    let mut rendered = rendered(&pass, outcome, &cluster)?;
    rendered.effects = engine
        .recorded()
        .into_iter()
        .map(|r| format!("{}: {}", r.step, r.effect))
        .collect();
    Ok(rendered)
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

    fn kinds_and_names(objects: &[Value]) -> Vec<(String, String)> {
        objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap_or_default().to_owned(),
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn the_example_renders_every_child_of_the_pipeline_with_credentials_masked() {
        let rendered = render(example(), SecretSource::default())
            .await
            .expect("renders");
        assert_eq!(rendered.stopped, None);
        let objects = rendered.objects;
        let names = kinds_and_names(&objects);
        assert_eq!(names[0], ("Secret".into(), "nova-api-db-connection".into()));
        assert_eq!(names[1], ("Secret".into(), "nova-db-connection".into()));
        assert_eq!(names[2], ("Secret".into(), "nova-transport-url".into()));
        assert_eq!(names[3].0, "ConfigMap");
        assert!(names[3].1.starts_with("nova-config-"));
        assert_eq!(names[4], ("Secret".into(), "nova-compute-config".into()));
        let rest: Vec<String> = names[5..]
            .iter()
            .map(|(kind, name)| format!("{kind}/{name}"))
            .collect();
        assert_eq!(
            rest,
            [
                "Database/nova-api",
                "User/nova-api",
                "Grant/nova-api",
                "Database/nova",
                "Database/nova-nova-cell0",
                "User/nova",
                "Grant/nova",
                "Grant/nova-nova-cell0",
                "Job/nova-db-sync",
                "Deployment/nova-conductor",
                "Deployment/nova-scheduler",
                "Deployment/nova-metadata",
                "Service/nova-metadata",
                "Deployment/nova-novncproxy",
                "Service/nova-novncproxy",
                "Deployment/nova",
                "Service/nova",
                "PodDisruptionBudget/nova",
                "CronJob/nova-db-archive",
                "HTTPRoute/nova-console"
            ],
            "no remote contract without spec.remoteCompute; the MariaDB objects and the db-sync Job, the five workloads, the archive CronJob, the console route"
        );
        let api = &objects[20]["spec"]["template"];
        assert_eq!(
            api["spec"]["volumes"][0]["configMap"]["name"], objects[3]["metadata"]["name"],
            "the workloads mount the rendered ConfigMap"
        );
        assert_eq!(
            objects[0]["stringData"]["connection"],
            "mysql+pymysql://nova-api:REDACTED@openstack-mariadb.openstack.svc:3306/nova_api?charset=utf8"
        );
        assert!(
            objects[2]["stringData"]["transport_url"]
                .as_str()
                .unwrap_or_default()
                .starts_with("rabbit://REDACTED:REDACTED@<placeholder: key \"host\" of Secret openstack-rabbitmq-default-user")
        );
        let contract = &objects[4]["stringData"];
        assert_eq!(contract["cell_name"], "cell1");
        assert_eq!(contract["password"], "REDACTED");
        assert!(
            objects[3]["data"]["nova.conf"]
                .as_str()
                .unwrap_or_default()
                .contains("[keystone_authtoken]")
        );
        assert_eq!(objects[3]["immutable"], true);
        assert_eq!(
            objects[0]["metadata"]["labels"]["app.kubernetes.io/instance"],
            "nova"
        );
        assert!(objects[0]["metadata"].get("ownerReferences").is_none());
    }

    #[tokio::test]
    async fn secrets_dir_values_feed_the_gates_but_are_never_printed() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("secrets.yaml"),
            "apiVersion: v1\nkind: Secret\nmetadata: {name: nova-keystone}\nstringData: {password: from-dir-planted}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: nova-db}\nstringData: {username: u, password: cell-planted}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ignored}\n",
        )
        .expect("write");
        let source = || secrets_from_dir(dir.path()).expect("reads");
        let rendered = render(example(), source()).await.expect("renders");
        let yaml = to_yaml(&rendered.objects).expect("yaml");
        assert!(
            !yaml.contains("from-dir-planted") && !yaml.contains("cell-planted"),
            "{yaml}"
        );
        assert_eq!(yaml.matches("---\n").count(), 25);
        let again = render(example(), source()).await.expect("renders");
        assert_eq!(yaml, to_yaml(&again.objects).expect("yaml"), "stable");
        let json: Value =
            serde_json::from_str(&to_json(rendered.objects).expect("json")).expect("parses");
        assert_eq!(
            (json["apiVersion"].as_str(), json["kind"].as_str()),
            (Some("v1"), Some("List"))
        );

        // A Secret in the directory that lacks a key stops the pipeline where the cluster would.
        std::fs::write(
            dir.path().join("secrets.yaml"),
            "apiVersion: v1\nkind: Secret\nmetadata: {name: nova-keystone}\nstringData: {other: x}\n",
        )
        .expect("write");
        let stopped = render(example(), source()).await.expect("renders");
        assert_eq!(
            stopped.stopped.as_deref(),
            Some(
                "the pipeline waits: SecretsReady=False WaitingForServiceUserCredentials: Service user credentials Secret exists but is missing expected keys"
            )
        );
        assert!(stopped.objects.is_empty());
    }
}
