//! Writes the generated CRDs into `crds/` (or the directory given as the first argument).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crds"));
    std::fs::create_dir_all(&dir)?;
    for (file, crd) in nova_api::crd::all() {
        let path = dir.join(file);
        std::fs::write(&path, nova_api::crd::to_yaml(&crd)?)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
