//! Values resolved at reconcile time and never written back into the CR, so a field left
//! unset keeps following the operator default across operator upgrades.

use crate::v1alpha1::{
    DBArchiveSpec, ImageSpec, NovaSpec, SecretRefSpec, SecretStoreKind, SecretStoreRefSpec,
};

/// The archive CronJob's schedule when spec.dbArchive.schedule is unset.
pub const DEFAULT_DB_ARCHIVE_SCHEDULE: &str = "@daily";
/// Rows one archive batch moves per table when spec.dbArchive.maxRows is unset.
pub const DEFAULT_DB_ARCHIVE_MAX_ROWS: i32 = 1000;
/// Seconds between archive batches when spec.dbArchive.sleep is unset.
pub const DEFAULT_DB_ARCHIVE_SLEEP: i32 = 1;

/// The External Secrets store used when spec.secretStoreRef is omitted.
pub const DEFAULT_SECRET_STORE: &str = "openbao-cluster-store";

/// The repository of the nova-compute image when a NovaCompute names none.
pub const DEFAULT_COMPUTE_IMAGE_REPOSITORY: &str = "ghcr.io/c5c3/nova-compute";

/// Default Secret keys of each use site (`common-types.md`, SecretRefSpec).
pub mod secret_keys {
    /// The service-user password.
    pub const SERVICE_USER_PASSWORD: &str = "password";
    /// The metadata shared secret.
    pub const METADATA_SHARED_SECRET: &str = "shared_secret";
    /// A brownfield or remote transport URL.
    pub const TRANSPORT_URL: &str = "transport_url";
    /// The messaging CA bundle.
    pub const MESSAGING_CA: &str = "ca.crt";
    /// The endpoint CA bundle of spec.tls.
    pub const ENDPOINT_CA: &str = "ca.crt";
}

/// The key a reference is read with: its own, or the use site's default when empty.
pub fn secret_key<'a>(secret: &'a SecretRefSpec, default: &'a str) -> &'a str {
    secret
        .key
        .as_deref()
        .filter(|k| !k.is_empty())
        .unwrap_or(default)
}

/// spec.dbArchive with every unset field resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectiveDBArchive {
    /// The cron schedule.
    pub schedule: String,
    /// The --max_rows bound.
    pub max_rows: i32,
    /// Seconds between batches.
    pub sleep: i32,
    /// The --before window in days, when one is configured.
    pub retention_days: Option<i32>,
    /// Whether the CronJob is paused.
    pub suspend: bool,
}

/// Resolves spec.dbArchive; a nil block resolves like an empty one.
pub fn db_archive(spec: Option<&DBArchiveSpec>) -> EffectiveDBArchive {
    let spec = spec.cloned().unwrap_or_default();
    EffectiveDBArchive {
        schedule: spec
            .schedule
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_DB_ARCHIVE_SCHEDULE.to_owned()),
        max_rows: spec.max_rows.unwrap_or(DEFAULT_DB_ARCHIVE_MAX_ROWS),
        sleep: spec.sleep.unwrap_or(DEFAULT_DB_ARCHIVE_SLEEP),
        retention_days: spec.retention_days,
        suspend: spec.suspend.unwrap_or(false),
    }
}

/// The browser-facing Keystone URL: spec.keystonePublicEndpoint, or spec.keystoneEndpoint when
/// it is empty (correct only when the internal and public URLs coincide).
pub fn keystone_public_endpoint(spec: &NovaSpec) -> &str {
    spec.keystone_public_endpoint
        .as_deref()
        .filter(|e| !e.is_empty())
        .unwrap_or(&spec.keystone_endpoint)
}

/// The External Secrets store the secret gate checks.
pub fn secret_store(spec: &NovaSpec) -> (SecretStoreKind, String) {
    match &spec.secret_store_ref {
        Some(SecretStoreRefSpec { kind, name }) => (kind.unwrap_or_default(), name.clone()),
        None => (
            SecretStoreKind::ClusterSecretStore,
            DEFAULT_SECRET_STORE.to_owned(),
        ),
    }
}

/// The nova-compute image of a pool: its own, or the default repository at the Nova's
/// installed release, so a pool upgrades only after the control plane migrated. None while
/// the Nova has installed no release yet and the pool names no image.
pub fn compute_image(
    spec_image: Option<&ImageSpec>,
    installed_release: Option<&str>,
) -> Option<ImageSpec> {
    if let Some(image) = spec_image {
        return Some(image.clone());
    }
    let release = installed_release.filter(|r| !r.is_empty())?;
    Some(ImageSpec {
        repository: DEFAULT_COMPUTE_IMAGE_REPOSITORY.to_owned(),
        tag: Some(release.to_owned()),
        digest: None,
    })
}

impl ImageSpec {
    /// The reference a container runs: `repository@digest` when pinned by digest, else `repository:tag`.
    pub fn reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => format!("{}@{digest}", self.repository),
            (None, Some(tag)) => format!("{}:{tag}", self.repository),
            (None, None) => self.repository.clone(),
        }
    }

    /// `Always` for a tag-pinned image (a moved tag is pulled), `IfNotPresent` for a digest.
    pub fn pull_policy(&self) -> &'static str {
        if self.digest.is_some() {
            "IfNotPresent"
        } else {
            "Always"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nil_archive_block_resolves_like_an_empty_one() {
        let want = EffectiveDBArchive {
            schedule: "@daily".into(),
            max_rows: 1000,
            sleep: 1,
            retention_days: None,
            suspend: false,
        };
        assert_eq!(db_archive(None), want);
        assert_eq!(db_archive(Some(&DBArchiveSpec::default())), want);
    }

    #[test]
    fn set_archive_fields_are_kept() {
        let spec = DBArchiveSpec {
            schedule: Some("0 3 * * *".into()),
            max_rows: Some(50),
            sleep: Some(0),
            retention_days: Some(30),
            suspend: Some(true),
        };
        let got = db_archive(Some(&spec));
        assert_eq!(got.schedule, "0 3 * * *");
        assert_eq!(
            (got.max_rows, got.sleep, got.retention_days, got.suspend),
            (50, 0, Some(30), true)
        );
    }

    #[test]
    fn the_compute_image_follows_the_installed_release() {
        let image = compute_image(None, Some("2026.1")).expect("resolved");
        assert_eq!(image.reference(), "ghcr.io/c5c3/nova-compute:2026.1");
        assert_eq!(image.pull_policy(), "Always");
        assert_eq!(compute_image(None, None), None);
        assert_eq!(compute_image(None, Some("")), None);
        let pinned = ImageSpec {
            repository: "registry.local/nova-compute".into(),
            tag: None,
            digest: Some(format!("sha256:{}", "a".repeat(64))),
        };
        let got = compute_image(Some(&pinned), Some("2026.1")).expect("own image");
        assert_eq!(
            got.reference(),
            format!("registry.local/nova-compute@sha256:{}", "a".repeat(64))
        );
        assert_eq!(got.pull_policy(), "IfNotPresent");
    }

    #[test]
    fn secret_keys_fall_back_per_use_site() {
        let mut secret = SecretRefSpec {
            name: "nova-keystone".into(),
            key: None,
        };
        assert_eq!(
            secret_key(&secret, secret_keys::SERVICE_USER_PASSWORD),
            "password"
        );
        secret.key = Some(String::new());
        assert_eq!(
            secret_key(&secret, secret_keys::SERVICE_USER_PASSWORD),
            "password"
        );
        secret.key = Some("pw".into());
        assert_eq!(
            secret_key(&secret, secret_keys::SERVICE_USER_PASSWORD),
            "pw"
        );
    }
}
