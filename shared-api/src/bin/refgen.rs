//! Writes the generated reference documents (`docs/reference/`).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = root.join(nova_api::reference::CONDITIONS_REFERENCE);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, nova_api::reference::conditions_markdown())?;
    println!("wrote {}", path.display());
    Ok(())
}
