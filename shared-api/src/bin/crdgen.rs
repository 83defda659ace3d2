//! Writes the generated CRDs into every directory of `crd::DIRS` (`crds/` and the chart's
//! `charts/nova-operator/crds/`), or into the directories given as arguments.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut dirs: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        dirs = nova_api::crd::DIRS
            .iter()
            .map(|dir| root.join(dir))
            .collect();
    }
    for dir in dirs {
        std::fs::create_dir_all(&dir)?;
        for (file, crd) in nova_api::crd::all() {
            let path = dir.join(file);
            std::fs::write(&path, nova_api::crd::to_yaml(&crd)?)?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}
