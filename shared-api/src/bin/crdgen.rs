//! Writes the generated CRDs: the plain manifests into `crd::DIR` (`crds/`) and the chart's
//! templates into `crd::CHART_DIR`, or plain manifests into the directories given as arguments.

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use nova_api::crd;

type Render = fn(&CustomResourceDefinition) -> Result<String, serde_saphyr::ser_error::Error>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let given: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let targets: Vec<(PathBuf, Render)> = match given.is_empty() {
        true => vec![
            (root.join(crd::DIR), crd::to_yaml as Render),
            (root.join(crd::CHART_DIR), crd::to_chart_template as Render),
        ],
        false => given
            .into_iter()
            .map(|dir| (dir, crd::to_yaml as Render))
            .collect(),
    };
    for (dir, render) in targets {
        write(&dir, render)?;
    }
    Ok(())
}

fn write(dir: &Path, render: Render) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    for (file, crd) in crd::all() {
        let path = dir.join(file);
        std::fs::write(&path, render(&crd)?)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
