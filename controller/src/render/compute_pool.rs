//! A pool's `compute-pool.conf` (`novacompute.md` §5.3, §5.4): the operator's `[libvirt]` and
//! host-mount settings rendered from the spec alone, `spec.extraConfig` merged over them (user
//! wins), into the immutable `{name}-config-<hash>` ConfigMap; and the digest of the compute
//! contract the pod template carries (§5.5), so a rotated credential rolls the pods.

use std::collections::BTreeMap;

use nova_api::names::NovaComputeNames;
use nova_api::owned_keys;
use nova_api::v1alpha1::{CpuMode, ImagesType, NovaComputeSpec, VirtType};
use sha2::{Digest, Sha256};

use super::children::{CONFIG_BASE_LABEL, content_addressed};
use super::config_map::RenderedConfig;
use super::extra_config::merge_over;
use super::ini::IniDocument;
use super::{RenderError, data_hash8};
use crate::objects::Child;

/// The one document of a pool ConfigMap.
pub const COMPUTE_POOL_CONF: &str = "compute-pool.conf";

fn virt_type(virt: Option<VirtType>) -> &'static str {
    match virt.unwrap_or_default() {
        VirtType::Kvm => "kvm",
        VirtType::Qemu => "qemu",
    }
}

fn cpu_mode(mode: CpuMode) -> &'static str {
    match mode {
        CpuMode::HostModel => "host-model",
        CpuMode::HostPassthrough => "host-passthrough",
        CpuMode::Custom => "custom",
        CpuMode::None => "none",
    }
}

fn images_type(images: ImagesType) -> &'static str {
    match images {
        ImagesType::Default => "default",
        ImagesType::Qcow2 => "qcow2",
        ImagesType::Raw => "raw",
        ImagesType::Flat => "flat",
    }
}

/// The operator's settings, before extraConfig.
fn operator_document(spec: &NovaComputeSpec) -> IniDocument {
    let libvirt = spec.libvirt.clone().unwrap_or_default();
    let mut doc = IniDocument::new();
    doc.set("DEFAULT", "compute_driver", "libvirt.LibvirtDriver");
    doc.set("DEFAULT", "state_path", super::paths::STATE_PATH);
    doc.set("libvirt", "connection_uri", "qemu:///system");
    doc.set("libvirt", "virt_type", virt_type(libvirt.virt_type));
    doc.set_opt("libvirt", "cpu_mode", libvirt.cpu_mode.map(cpu_mode));
    if libvirt.cpu_mode == Some(CpuMode::Custom) {
        let models = libvirt.cpu_models.unwrap_or_default().join(",");
        doc.set("libvirt", "cpu_models", models);
    }
    doc.set_opt(
        "libvirt",
        "images_type",
        libvirt.images_type.map(images_type),
    );
    doc.set("libvirt", "live_migration_scheme", "tls");
    doc.set("libvirt", "live_migration_with_native_tls", "true");
    doc.set(
        "os_vif_ovs",
        "ovsdb_connection",
        "unix:/run/openvswitch/db.sock",
    );
    doc.set("oslo_concurrency", "lock_path", super::paths::LOCK_PATH);
    // Never a wildcard: the pod shares the node's network and consoles carry no password.
    doc.set("vnc", "server_listen", "$my_ip");
    doc
}

/// Renders a pool's ConfigMap data: `compute-pool.conf` with extraConfig merged, its hash and
/// the NovaCompute-owned keys extraConfig overrides.
pub fn render_compute_pool(spec: &NovaComputeSpec) -> Result<RenderedConfig, RenderError> {
    let mut doc = operator_document(spec);
    let overridden_owned_keys = merge_over(
        &mut doc,
        spec.extra_config.as_ref(),
        owned_keys::novacompute,
    )?;
    let conf = doc.render().map_err(|e| RenderError::Section {
        document: COMPUTE_POOL_CONF,
        section: e.section,
    })?;
    let documents = BTreeMap::from([(COMPUTE_POOL_CONF.to_owned(), conf)]);
    Ok(RenderedConfig {
        hash8: data_hash8(&documents),
        documents,
        overridden_owned_keys,
    })
}

/// The selector of every ConfigMap of the pool `name`, for pruning.
pub fn pool_config_selector(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(
        CONFIG_BASE_LABEL.to_owned(),
        NovaComputeNames::new(name).config_base(),
    )])
}

/// The name of the pool ConfigMap one render produces.
pub fn pool_config_map_name(name: &str, rendered: &RenderedConfig) -> String {
    NovaComputeNames::new(name).config(&rendered.hash8)
}

/// The immutable ConfigMap of the pool `name`.
pub fn pool_config_map(name: &str, rendered: &RenderedConfig) -> Child {
    content_addressed(
        pool_config_map_name(name, rendered),
        pool_config_selector(name),
        &rendered.documents,
    )
}

/// Lowercase hex SHA-256 over a contract Secret's data: keys in sorted order, each entry
/// `<key>=<value>` and a newline, raw bytes.
pub fn contract_hash(data: &BTreeMap<String, Vec<u8>>) -> String {
    let mut hasher = Sha256::new();
    for (key, value) in data {
        hasher.update(key.as_bytes());
        hasher.update(b"=");
        hasher.update(value);
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nova_api::v1alpha1::NovaComputeLibvirtSpec;

    fn example() -> NovaComputeSpec {
        let pool: nova_api::v1alpha1::NovaCompute =
            serde_saphyr::from_str(include_str!("../../../examples/novacompute.yaml"))
                .unwrap_or_else(|e| panic!("the example parses: {e}"));
        pool.spec
    }

    #[test]
    fn the_example_renders_its_name_and_no_owned_key() {
        let rendered = render_compute_pool(&example()).expect("renders");
        assert!(
            rendered.overridden_owned_keys.is_empty(),
            "compute_driver is not owned"
        );
        assert_eq!(
            pool_config_map_name("pool-a", &rendered),
            format!("pool-a-config-{}", rendered.hash8)
        );
    }

    #[test]
    fn libvirt_settings_render_only_when_set_and_reported_when_overridden() {
        let mut spec = example();
        spec.extra_config = None;
        let bare = render_compute_pool(&spec).expect("renders");
        let conf = &bare.documents[COMPUTE_POOL_CONF];
        assert!(conf.contains("virt_type = kvm"));
        assert!(!conf.contains("cpu_mode") && !conf.contains("images_type"));
        spec.libvirt = Some(NovaComputeLibvirtSpec {
            virt_type: Some(VirtType::Qemu),
            cpu_mode: Some(CpuMode::Custom),
            cpu_models: Some(vec!["Haswell".into(), "Skylake".into()]),
            images_type: Some(ImagesType::Qcow2),
        });
        spec.extra_config = Some(BTreeMap::from([(
            "libvirt".to_owned(),
            BTreeMap::from([("virt_type".to_owned(), "kvm".to_owned())]),
        )]));
        let tuned = render_compute_pool(&spec).expect("renders");
        let conf = &tuned.documents[COMPUTE_POOL_CONF];
        for line in [
            "cpu_mode = custom",
            "cpu_models = Haswell,Skylake",
            "images_type = qcow2",
            "virt_type = kvm",
            "live_migration_scheme = tls",
        ] {
            assert!(conf.contains(line), "{line} in {conf}");
        }
        assert_eq!(tuned.override_entries(), ["[libvirt] virt_type"]);
        assert_ne!(tuned.hash8, bare.hash8, "a change renders a new name");
    }

    #[test]
    fn the_contract_hash_covers_every_key_and_value() {
        let data = |password: &str| {
            BTreeMap::from([
                ("password".to_owned(), password.as_bytes().to_vec()),
                ("transport_url".to_owned(), b"rabbit://x".to_vec()),
            ])
        };
        let mut hasher = Sha256::new();
        hasher.update(b"password=a\ntransport_url=rabbit://x\n");
        assert_eq!(contract_hash(&data("a")), hex::encode(hasher.finalize()));
        assert_ne!(contract_hash(&data("a")), contract_hash(&data("b")));
    }
}
