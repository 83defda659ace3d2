//! Installing CRDs from YAML files and waiting until the API server serves them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::try_join_all;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};

use crate::{Error, Result, io_err, kube_err};

/// The directories the harness installs by default: the project's generated CRDs
/// (`<repo>/crds`) and the committed third-party CRDs (`tests/crds/third-party`).
pub fn default_crd_dirs() -> Vec<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![here.join("..").join("crds"), third_party_dir()]
}

/// The CRDs of the operators Nova talks to (`tests/crds/third-party`), without the project's.
pub fn third_party_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crds")
        .join("third-party")
}

/// Every `*.yaml`/`*.yml` file directly in `dirs`, sorted per directory. Missing directories
/// are skipped (the project's CRDs may not be generated yet).
pub fn crd_files(dirs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            continue;
        }
        let mut here: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io_err(format!("listing {}", dir.display())))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension()
                        .is_some_and(|ext| ext == "yaml" || ext == "yml")
            })
            .collect();
        here.sort();
        files.extend(here);
    }
    Ok(files)
}

/// Parses every CustomResourceDefinition document in `path` (multi-document YAML; empty
/// documents are skipped, any other kind is an error so nothing is silently ignored).
pub fn read_crds(path: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let text =
        std::fs::read_to_string(path).map_err(io_err(format!("reading {}", path.display())))?;
    let invalid = |message: String| Error::Invalid {
        context: path.display().to_string(),
        message,
    };
    let mut crds = Vec::new();
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| invalid(e.to_string()))?;
    for value in docs {
        if value.is_null() {
            continue;
        }
        let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        if kind != "CustomResourceDefinition" {
            return Err(invalid(format!(
                "expected only CustomResourceDefinitions, found kind {kind:?}"
            )));
        }
        crds.push(serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?);
    }
    Ok(crds)
}

/// Creates (or, if present, server-side applies) every CRD in `files` and waits until each is Established. Returns the
/// CRD names in file order.
pub async fn install_crds(
    client: &kube::Client,
    files: &[PathBuf],
    timeout: Duration,
) -> Result<Vec<String>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("nova-test-harness").force();
    let mut crds = Vec::new();
    for file in files {
        crds.extend(read_crds(file)?);
    }
    // Applying in parallel keeps start-up short; the API server handles each independently.
    let names = try_join_all(crds.iter().map(|crd| {
        let api = api.clone();
        let params = params.clone();
        async move {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let mut crd = crd.clone();
            crd.metadata.managed_fields = None;
            crd.metadata.resource_version = None;
            crd.status = None;
            // A plain create is much cheaper than server-side apply for large CRDs (no
            // managed-fields computation); apply only replaces one that already exists.
            match api.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    api.patch(&name, &params, &Patch::Apply(&crd))
                        .await
                        .map_err(kube_err(format!("applying CRD {name}")))?;
                }
                Err(e) => return Err(kube_err(format!("creating CRD {name}"))(e)),
            }
            Ok::<_, Error>(name)
        }
    }))
    .await?;
    try_join_all(names.iter().map(|name| {
        let api = api.clone();
        async move {
            let established = await_condition(api.clone(), name, conditions::is_crd_established());
            match tokio::time::timeout(timeout, established).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(Error::Invalid {
                    context: format!("watching CRD {name}"),
                    message: e.to_string(),
                }),
                Err(_) => {
                    let detail = api
                        .get(name)
                        .await
                        .ok()
                        .and_then(|c| c.status)
                        .and_then(|s| s.conditions)
                        .map(|c| format!("; conditions: {c:?}"))
                        .unwrap_or_default();
                    Err(Error::Timeout {
                        what: format!("CRD {name} to be Established"),
                        after: timeout,
                        detail,
                    })
                }
            }
        }
    }))
    .await?;
    Ok(names)
}
