//! A target cluster's registration (`common-types.md` §3.17 "Registration"): a kubeconfig
//! Secret in `--clusters-namespace`, read into what engaging the cluster needs, or refused
//! with a reason that names the offending part and never a value.
//!
//! Pure, so every refusal is a table test; the fleet only watches the Secrets and engages.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::config::Kubeconfig;
use sha2::{Digest, Sha256};

/// The label a registration Secret carries, with exactly the value `"true"`.
pub const LABEL: &str = "sigs.k8s.io/multicluster-runtime-kubeconfig";
/// The key holding the kubeconfig.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// The optional key restricting the engaged cluster's caches to some namespaces.
pub const NAMESPACES_KEY: &str = "namespaces";

/// A registration that may be engaged.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The cluster name CRs reference (the Secret's name).
    pub name: String,
    /// The parsed kubeconfig (bearer token or client certificate, inline only).
    pub kubeconfig: Kubeconfig,
    /// The namespaces the engaged cluster's caches are restricted to; None = cluster-wide.
    pub namespaces: Option<Vec<String>>,
    /// What a re-engagement compares: SHA-256 of the kubeconfig (+ NUL + the namespaces
    /// value when that key is present), hex.
    pub hash: String,
}

/// Why a registration Secret is refused; the cluster stays unresolvable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The label is missing or its value is not exactly `"true"`.
    #[error("the label {LABEL} is not \"true\"")]
    NotLabelled,
    /// No `kubeconfig` key, or it is not UTF-8.
    #[error("the Secret has no UTF-8 \"kubeconfig\" key")]
    NoKubeconfig,
    /// The kubeconfig does not parse (the parser's message may quote the file, so it is not
    /// repeated).
    #[error("the kubeconfig does not parse")]
    Unparseable,
    /// A user authenticates through a plugin this process would have to run.
    #[error(
        "user {user} uses {form}, which is refused: only a bearer token or a client certificate is accepted"
    )]
    PluginCredentials {
        /// The kubeconfig user's name.
        user: String,
        /// `exec` or `auth-provider`.
        form: &'static str,
    },
    /// A credential or CA is a path on this process's file system.
    #[error("{owner} names {field}, a file path, which is refused: credentials must be inline")]
    FileBacked {
        /// `user <name>` or `cluster <name>`.
        owner: String,
        /// The kubeconfig field.
        field: &'static str,
    },
    /// The `namespaces` value is empty.
    #[error("the \"namespaces\" key is empty")]
    EmptyNamespaces,
    /// A `namespaces` entry is not a DNS-1123 label.
    #[error("the \"namespaces\" entry {0:?} is not a DNS-1123 label")]
    BadNamespace(String),
}

/// Reads a registration Secret, or says why it is refused.
pub fn parse(secret: &Secret) -> Result<Registration, Refusal> {
    if secret.labels().get(LABEL).map(String::as_str) != Some("true") {
        return Err(Refusal::NotLabelled);
    }
    let text = value(secret, KUBECONFIG_KEY)
        .ok_or(Refusal::NoKubeconfig)?
        .map_err(|()| Refusal::NoKubeconfig)?;
    let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|_| Refusal::Unparseable)?;
    check_credentials(&kubeconfig)?;
    let raw_namespaces = match value(secret, NAMESPACES_KEY) {
        None => None,
        Some(Ok(raw)) => Some(raw),
        Some(Err(())) => return Err(Refusal::BadNamespace("<not UTF-8>".to_owned())),
    };
    let namespaces = raw_namespaces.as_deref().map(namespaces).transpose()?;
    let mut digest = Sha256::new();
    digest.update(text.as_bytes());
    if let Some(raw) = &raw_namespaces {
        digest.update([0u8]);
        digest.update(raw.as_bytes());
    }
    Ok(Registration {
        name: secret.name_any(),
        kubeconfig,
        namespaces,
        hash: hex::encode(digest.finalize()),
    })
}

/// A key's value as UTF-8: None when absent, `Err` when not UTF-8.
fn value(secret: &Secret, key: &str) -> Option<Result<String, ()>> {
    if let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) {
        return Some(String::from_utf8(bytes.0.clone()).map_err(drop));
    }
    secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| Ok(v.clone()))
}

/// Refuses plugin and file-backed credentials and file-backed CAs, in every user and cluster
/// of the file.
fn check_credentials(kubeconfig: &Kubeconfig) -> Result<(), Refusal> {
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        let plugin = |form| Refusal::PluginCredentials {
            user: named.name.clone(),
            form,
        };
        if user.exec.is_some() {
            return Err(plugin("exec"));
        }
        if user.auth_provider.is_some() {
            return Err(plugin("auth-provider"));
        }
        let files = [
            ("tokenFile", user.token_file.is_some()),
            ("client-certificate", user.client_certificate.is_some()),
            ("client-key", user.client_key.is_some()),
        ];
        if let Some((field, _)) = files.into_iter().find(|(_, set)| *set) {
            return Err(Refusal::FileBacked {
                owner: format!("user {}", named.name),
                field,
            });
        }
    }
    for named in &kubeconfig.clusters {
        if named
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return Err(Refusal::FileBacked {
                owner: format!("cluster {}", named.name),
                field: "certificate-authority",
            });
        }
    }
    Ok(())
}

/// The comma-separated namespaces, each a DNS-1123 label.
fn namespaces(raw: &str) -> Result<Vec<String>, Refusal> {
    if raw.trim().is_empty() {
        return Err(Refusal::EmptyNamespaces);
    }
    raw.split(',')
        .map(str::trim)
        .map(|ns| {
            if dns1123_label(ns) {
                Ok(ns.to_owned())
            } else {
                Err(Refusal::BadNamespace(ns.to_owned()))
            }
        })
        .collect()
}

/// `IsDNS1123Label`: at most 63 lower-case alphanumerics or `-`, alphanumeric at both ends.
fn dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const TOKEN: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: target
  cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: "Y2E="}
users:
- name: operator
  user: {token: "s3cret-token"}
contexts:
- name: target
  context: {cluster: target, user: operator}
current-context: target
"#;

    fn secret(kubeconfig: &str, namespaces: Option<&str>) -> Secret {
        let mut data = BTreeMap::from([(KUBECONFIG_KEY.to_owned(), kubeconfig.to_owned())]);
        if let Some(ns) = namespaces {
            data.insert(NAMESPACES_KEY.to_owned(), ns.to_owned());
        }
        let mut secret = Secret {
            string_data: Some(data),
            ..Default::default()
        };
        secret.metadata.name = Some("target".into());
        secret.metadata.labels = Some(BTreeMap::from([(LABEL.to_owned(), "true".to_owned())]));
        secret
    }

    fn with_user(user: &str) -> String {
        TOKEN.replace(r#"{token: "s3cret-token"}"#, user)
    }

    #[test]
    fn a_token_or_client_certificate_registration_is_accepted() {
        let registration = parse(&secret(TOKEN, None)).expect("accepted");
        assert_eq!(registration.name, "target");
        assert_eq!(registration.namespaces, None);
        let cert = with_user(r#"{client-certificate-data: "Y2VydA==", client-key-data: "a2V5"}"#);
        assert!(parse(&secret(&cert, None)).is_ok());
    }

    #[test]
    fn refused_forms_name_their_reason() {
        let cases = [
            (secret("{{not yaml", None), Refusal::Unparseable),
            (
                secret(
                    &with_user(
                        "{exec: {apiVersion: client.authentication.k8s.io/v1, command: sh}}",
                    ),
                    None,
                ),
                Refusal::PluginCredentials {
                    user: "operator".into(),
                    form: "exec",
                },
            ),
            (
                secret(
                    &with_user("{auth-provider: {name: oidc, config: {}}}"),
                    None,
                ),
                Refusal::PluginCredentials {
                    user: "operator".into(),
                    form: "auth-provider",
                },
            ),
            (
                secret(&with_user("{tokenFile: /var/run/token}"), None),
                Refusal::FileBacked {
                    owner: "user operator".into(),
                    field: "tokenFile",
                },
            ),
            (
                secret(
                    &with_user("{client-certificate: /c.pem, client-key-data: a2V5}"),
                    None,
                ),
                Refusal::FileBacked {
                    owner: "user operator".into(),
                    field: "client-certificate",
                },
            ),
            (
                secret(
                    &with_user("{client-certificate-data: Y2VydA==, client-key: /k.pem}"),
                    None,
                ),
                Refusal::FileBacked {
                    owner: "user operator".into(),
                    field: "client-key",
                },
            ),
            (
                secret(
                    &TOKEN.replace(
                        r#"certificate-authority-data: "Y2E=""#,
                        "certificate-authority: /ca.pem",
                    ),
                    None,
                ),
                Refusal::FileBacked {
                    owner: "cluster target".into(),
                    field: "certificate-authority",
                },
            ),
            (secret(TOKEN, Some("")), Refusal::EmptyNamespaces),
            (
                secret(TOKEN, Some("openstack,Bad_NS")),
                Refusal::BadNamespace("Bad_NS".into()),
            ),
        ];
        for (secret, refusal) in cases {
            let got = parse(&secret).expect_err("refused");
            assert_eq!(got, refusal);
            assert!(
                !got.to_string().contains("s3cret-token"),
                "a refusal never carries a credential: {got}"
            );
        }
    }

    #[test]
    fn the_label_must_be_exactly_true() {
        let mut unlabelled = secret(TOKEN, None);
        unlabelled
            .metadata
            .labels
            .as_mut()
            .expect("labels")
            .insert(LABEL.into(), "True".into());
        assert_eq!(
            parse(&unlabelled).expect_err("refused"),
            Refusal::NotLabelled
        );
        let mut empty = secret(TOKEN, None);
        empty.string_data = None;
        assert_eq!(parse(&empty).expect_err("refused"), Refusal::NoKubeconfig);
    }

    #[test]
    fn namespaces_restrict_and_enter_the_hash() {
        let open = parse(&secret(TOKEN, None)).expect("accepted");
        let restricted = parse(&secret(TOKEN, Some("openstack, compute"))).expect("accepted");
        assert_eq!(
            restricted.namespaces,
            Some(vec!["openstack".to_owned(), "compute".to_owned()])
        );
        assert_ne!(open.hash, restricted.hash);
        let other = parse(&secret(TOKEN, Some("openstack"))).expect("accepted");
        assert_ne!(restricted.hash, other.hash);
        assert_eq!(
            open.hash,
            parse(&secret(TOKEN, None)).expect("accepted").hash
        );
        let rotated = parse(&secret(&TOKEN.replace("s3cret-token", "new"), None)).expect("ok");
        assert_ne!(open.hash, rotated.hash, "a rotated token re-engages");
    }
}
