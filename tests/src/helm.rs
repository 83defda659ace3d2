//! The helm binary `tests/build-helm.sh` builds from its pinned module, and the chart's path,
//! for the chart's tests (lint, template, install) and the main job.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::{Error, Result, io_err};

/// The helm version `tests/build-helm.sh` builds (`HELM_VERSION` in `tests/versions.env`).
pub const HELM_VERSION: &str = "v4.3.2";

/// `$NOVA_HELM` if set, else `$HOME/.cache/nova-operator-helm/<version>/helm`, the build
/// script's output; an error naming the script when it is not there (tests never skip).
pub fn binary() -> Result<PathBuf> {
    let path = std::env::var_os("NOVA_HELM")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || {
                let home =
                    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
                home.join(".cache/nova-operator-helm")
                    .join(HELM_VERSION)
                    .join("helm")
            },
            PathBuf::from,
        );
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingBinaries {
            dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            missing: "helm".into(),
            script: "tests/build-helm.sh",
        })
    }
}

/// The chart's directory in this checkout.
pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/nova-operator")
}

/// The chart's Nova CRD template, as `crdgen` writes it.
const NOVA_CRD_TEMPLATE: &str = "templates/crds/nova.openstack.c5c3.io_novas.yaml";

/// A copy of the chart under `dir` whose Nova CRD carries `marker` at the end of its top-level
/// schema description: the chart of a release whose CRD changed, for an upgrade to apply.
/// Returns the copy's directory.
pub fn chart_with_changed_crd(dir: &Path, marker: &str) -> Result<PathBuf> {
    let copy = dir.join("nova-operator");
    copy_dir(&chart_dir(), &copy)?;
    let path = copy.join(NOVA_CRD_TEMPLATE);
    let text =
        std::fs::read_to_string(&path).map_err(io_err(format!("reading {}", path.display())))?;
    let schema = "      openAPIV3Schema:\n        description: \"";
    let Some(at) = text.find(schema).map(|at| at + schema.len()) else {
        return Err(Error::Invalid {
            context: path.display().to_string(),
            message: "no top-level schema description".into(),
        });
    };
    let end = at + text[at..].find('"').unwrap_or_default();
    let changed = format!("{} {marker}{}", &text[..end], &text[end..]);
    std::fs::write(&path, changed).map_err(io_err(format!("writing {}", path.display())))?;
    Ok(copy)
}

/// The top-level schema description of `crd`, where [`chart_with_changed_crd`] puts its
/// marker: how a test tells which chart's CRD the API server serves.
pub fn schema_description(crd: &CustomResourceDefinition) -> String {
    crd.spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.description.clone())
        .unwrap_or_default()
}

/// Copies the directory `from` to `to`, recursively.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(io_err(format!("creating {}", to.display())))?;
    for entry in std::fs::read_dir(from).map_err(io_err(format!("reading {}", from.display())))? {
        let entry = entry.map_err(io_err(format!("reading {}", from.display())))?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .map_err(io_err(format!("copying {}", entry.path().display())))?;
        }
    }
    Ok(())
}

/// What one helm run printed.
#[derive(Debug)]
pub struct Output {
    /// Whether helm exited 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs helm with `args`, with its caches and config under `home` (never the user's own).
pub fn run(home: &Path, args: &[&str]) -> Result<Output> {
    let helm = binary()?;
    let out = Command::new(&helm)
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .map_err(|e| Error::Io {
            context: format!("running {} {}", helm.display(), args.join(" ")),
            source: e,
        })?;
    Ok(Output {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// `helm template` of the chart with `--set` pairs and value files, or helm's error.
pub fn template(home: &Path, namespace: &str, extra: &[&str]) -> Result<String> {
    let chart = chart_dir().display().to_string();
    let mut args = vec![
        "template",
        "nova-operator",
        &chart,
        "--namespace",
        namespace,
    ];
    args.extend_from_slice(extra);
    let out = run(home, &args)?;
    if out.success {
        Ok(out.stdout)
    } else {
        Err(Error::Invalid {
            context: format!("helm {}", args.join(" ")),
            message: out.stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_helm_version_is_the_one_versions_env_pins() {
        let env = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/versions.env"))
            .expect("versions.env");
        assert!(
            env.lines()
                .any(|l| l == format!("HELM_VERSION={}", super::HELM_VERSION)),
            "tests/versions.env pins another HELM_VERSION than nova_test_harness::helm"
        );
        let gomod =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/helm-bins/go.mod"))
                .expect("go.mod");
        assert!(gomod.contains(&format!("helm.sh/helm/v4 {} ", super::HELM_VERSION)));
    }
}
