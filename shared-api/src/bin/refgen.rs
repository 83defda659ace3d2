//! Writes the generated reference documents (`docs/reference/`).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for (relative, markdown) in nova_api::reference::all() {
        let path = root.join(relative);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, markdown)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
