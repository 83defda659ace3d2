//! The locally built images (`tests/build-images.sh`) and their import into the real node's
//! containerd.
//!
//! The build script writes `manifest.tsv` in the image cache: one line per image, the OCI
//! archive's file name (which carries the recipe's content hash) and the references the image
//! is tagged with, separated by a tab, e.g. `nova-2026.1-<hash>.oci.tar` and
//! `ghcr.io/c5c3/nova:2026.1,ghcr.io/c5c3/nova-compute:2026.1`.
//! containerd's image store survives node runs, and a record beside it lists the archives
//! already imported, so an image is imported once per recipe change.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::node::Layout;
use crate::{Error, Result, io_err};

/// The releases the nova images are built for (the `spec.openStackRelease` values the operator
/// supports); `tests/versions.env` lists the same.
pub const RELEASES: [&str; 2] = ["2026.1", "2026.2"];

/// The nova image the sample CR derives for a release (`spec.image` repository and tag).
pub fn nova_image(release: &str) -> String {
    format!("ghcr.io/c5c3/nova:{release}")
}

/// The digest-pinned reference (`repository@sha256:…`) of a locally built image known by its tag
/// `reference`: the manifest digest its OCI archive records, under which the node's containerd
/// also knows it (see [`import_all`]). A digest-pinned image is what a CR names when its pods
/// must run with `imagePullPolicy: IfNotPresent` (a tag-pinned one renders `Always`, which the
/// node, having no registry, cannot satisfy).
pub fn pinned(reference: &str) -> Result<String> {
    let text = std::fs::read_to_string(manifest_path()).map_err(io_err(format!(
        "reading {}; build the images with `tests/build-images.sh`",
        manifest_path().display()
    )))?;
    let image = parse_manifest(&text)?
        .into_iter()
        .find(|i| i.refs.iter().any(|r| r == reference))
        .ok_or_else(|| Error::Invalid {
            context: "pinning an image by digest".into(),
            message: format!("no built image is tagged {reference}"),
        })?;
    let digest = archive_digest(&images_dir().join("archives").join(&image.archive))?;
    Ok(format!("{}@{digest}", repository(reference)))
}

/// The repository of a tag reference (everything before the tag's colon, a registry port
/// left alone).
fn repository(reference: &str) -> &str {
    match reference.rfind(':') {
        Some(i) if !reference[i..].contains('/') => &reference[..i],
        _ => reference,
    }
}

/// The manifest digest an OCI archive's `index.json` names (its only manifest).
fn archive_digest(archive: &Path) -> Result<String> {
    let context = format!("reading the index of {}", archive.display());
    let out = std::process::Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg("index.json")
        .output()
        .map_err(io_err(context.clone()))?;
    if !out.status.success() {
        return Err(Error::Invalid {
            context,
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    index_digest(&out.stdout).ok_or_else(|| Error::Invalid {
        context,
        message: "index.json names no sha256 manifest".into(),
    })
}

fn index_digest(index: &[u8]) -> Option<String> {
    let index: serde_json::Value = serde_json::from_slice(index).ok()?;
    let digest = index["manifests"][0]["digest"].as_str()?;
    (digest.len() == 71 && digest.starts_with("sha256:")).then(|| digest.to_owned())
}

/// The default compute image of a pool for a release.
pub fn nova_compute_image(release: &str) -> String {
    format!("ghcr.io/c5c3/nova-compute:{release}")
}

/// The harness's own test image: a shell, curl and nc on the Debian base, and h2load.
pub const TOOLS_IMAGE: &str = "localhost/nova-test/tools:1";

/// The spec of a pod (or a Job's pod template) running `command` once in the [`TOOLS_IMAGE`]
/// in a container named `main`, never restarted, stopped within a second.
pub fn tools_pod_spec(command: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "main",
            "image": TOOLS_IMAGE,
            "imagePullPolicy": "Never",
            "command": command
        }]
    })
}
/// The infrastructure images, built from Debian's packages.
pub const MARIADB_IMAGE: &str = "localhost/nova-test/mariadb:10.11";
/// RabbitMQ from Debian.
pub const RABBITMQ_IMAGE: &str = "localhost/nova-test/rabbitmq:3.10";
/// memcached from Debian.
pub const MEMCACHED_IMAGE: &str = "localhost/nova-test/memcached:1.6";

/// `$NOVA_IMAGES_DIR`, else `$HOME/.cache/nova-operator-images`.
pub fn images_dir() -> PathBuf {
    std::env::var_os("NOVA_IMAGES_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || {
                let home =
                    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
                home.join(".cache/nova-operator-images")
            },
            PathBuf::from,
        )
}

/// The build script's manifest.
pub fn manifest_path() -> PathBuf {
    images_dir().join("manifest.tsv")
}

/// The manifest of the operator's own images (`images/build.sh`), imported beside the test
/// images when it exists: only the chart's install tests and the main job need them.
pub fn operator_manifest_path() -> PathBuf {
    images_dir().join(OPERATOR_MANIFEST)
}

const OPERATOR_MANIFEST: &str = "operator-manifest.tsv";

/// One built image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltImage {
    /// The OCI archive, relative to the image cache.
    pub archive: String,
    /// Every reference it is tagged with; the first is the one stored in the archive.
    pub refs: Vec<String>,
}

/// Parses `manifest.tsv`.
pub fn parse_manifest(text: &str) -> Result<Vec<BuiltImage>> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (archive, refs) = line.split_once('\t').ok_or_else(|| Error::Invalid {
                context: "reading the image manifest".into(),
                message: format!("line {line:?} has no tab between archive and references"),
            })?;
            let refs: Vec<String> = refs
                .split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect();
            if refs.is_empty() {
                return Err(Error::Invalid {
                    context: "reading the image manifest".into(),
                    message: format!("archive {archive} has no references"),
                });
            }
            Ok(BuiltImage {
                archive: archive.trim().to_owned(),
                refs,
            })
        })
        .collect()
}

fn imported_record(layout: &Layout) -> PathBuf {
    layout.root().join("containerd-imported")
}

/// Imports every image of the manifest (and of the operator manifest beside it, when there)
/// containerd does not have yet (by archive name) into its `k8s.io` namespace and tags it
/// with all its references, and with the digest-pinned reference of each ([`pinned`]), so a
/// pod naming `repository@sha256:…` finds it too (tagged on every start: an image imported
/// before the digest tags existed gets them as well).
/// (Blocking: it runs while the node starts, when nothing else needs the runtime.)
pub(crate) fn import_all(ctr: &Path, manifest: &Path, layout: &Layout) -> Result<()> {
    let text = std::fs::read_to_string(manifest).map_err(|e| Error::Invalid {
        context: format!("reading {}", manifest.display()),
        message: format!("{e}; build the images with `tests/build-images.sh`"),
    })?;
    let mut images = parse_manifest(&text)?;
    if let Ok(text) = std::fs::read_to_string(manifest.with_file_name(OPERATOR_MANIFEST)) {
        images.extend(parse_manifest(&text)?);
    }
    let record = imported_record(layout);
    let mut done: BTreeSet<String> = std::fs::read_to_string(&record)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let dir = images_dir();
    for image in images {
        let archive = dir.join("archives").join(&image.archive);
        if done.contains(&image.archive) {
            tag_digests(ctr, &image, &archive)?;
            continue;
        }
        ctr_run(
            ctr,
            &[
                "images",
                "import",
                "--platform",
                "linux/amd64",
                &archive.display().to_string(),
            ],
        )?;
        for extra in &image.refs[1..] {
            ctr_run(ctr, &["images", "tag", "--force", &image.refs[0], extra])?;
        }
        tag_digests(ctr, &image, &archive)?;
        done.insert(image.archive.clone());
        let text: String = done.iter().map(|a| format!("{a}\n")).collect();
        std::fs::write(&record, text).map_err(io_err(format!("writing {}", record.display())))?;
    }
    Ok(())
}

fn tag_digests(ctr: &Path, image: &BuiltImage, archive: &Path) -> Result<()> {
    let digest = archive_digest(archive)?;
    for reference in &image.refs {
        let pinned = format!("{}@{digest}", repository(reference));
        // `--local`: the transfer service's tagging is for tag references.
        ctr_run(
            ctr,
            &[
                "images",
                "tag",
                "--local",
                "--force",
                &image.refs[0],
                &pinned,
            ],
        )?;
    }
    Ok(())
}

fn ctr_run(ctr: &Path, args: &[&str]) -> Result<()> {
    let ctr = ctr.display().to_string();
    let mut all = vec![
        "--address",
        crate::node::CONTAINERD_SOCKET,
        "--namespace",
        "k8s.io",
    ];
    all.extend_from_slice(args);
    crate::node::host_output(&ctr, &all).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_reference_is_the_repository_at_the_index_manifest_digest() {
        assert_eq!(repository("ghcr.io/c5c3/nova:2026.1"), "ghcr.io/c5c3/nova");
        assert_eq!(
            repository("localhost:5000/nova-test/tools:1"),
            "localhost:5000/nova-test/tools"
        );
        assert_eq!(repository("localhost:5000/nova"), "localhost:5000/nova");
        let digest = format!("sha256:{}", "ab".repeat(32));
        let index = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{digest}","size":1}}]}}"#
        );
        assert_eq!(index_digest(index.as_bytes()), Some(digest));
        assert_eq!(index_digest(br#"{"manifests":[]}"#), None);
        assert_eq!(
            index_digest(br#"{"manifests":[{"digest":"md5:00"}]}"#),
            None
        );
    }

    #[test]
    fn manifest_lines_name_an_archive_and_its_tags() {
        let m = parse_manifest("# comment\nnova-2026.1-ab.oci.tar\tghcr.io/c5c3/nova:2026.1, ghcr.io/c5c3/nova-compute:2026.1\n\n")
            .expect("parses");
        assert_eq!(
            m,
            vec![BuiltImage {
                archive: "nova-2026.1-ab.oci.tar".into(),
                refs: vec![nova_image("2026.1"), nova_compute_image("2026.1")],
            }]
        );
        assert!(parse_manifest("no-tab-here").is_err());
        assert!(parse_manifest("a.tar\t ,").is_err());
    }
}
