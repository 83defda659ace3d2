//! The pymysql DSN of one schema (`common-types.md`, DatabaseSpec "DSN" and "TLS parameters").

use nova_api::v1alpha1::{CredentialsMode, DatabaseSpec, DatabaseTLSMode};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// RFC 3986 userinfo: everything but the unreserved characters is percent-encoded.
const USERINFO: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The MariaDB port when a block names none.
pub const DEFAULT_PORT: i32 = 3306;

/// Percent-encodes one userinfo component.
pub fn encode_userinfo(value: &str) -> String {
    utf8_percent_encode(value, USERINFO).to_string()
}

/// `host:port` of the block: the managed MariaDB's Service, or the brownfield host (an IPv6
/// literal in brackets).
pub fn address(block: &DatabaseSpec, namespace: &str) -> String {
    let port = block.port.unwrap_or(DEFAULT_PORT);
    match (&block.cluster_ref, &block.host) {
        (Some(cluster), _) => format!("{}.{namespace}.svc:{port}", cluster.name),
        (None, Some(host)) if host.contains(':') => format!("[{host}]:{port}"),
        (None, Some(host)) => format!("{host}:{port}"),
        (None, None) => format!(":{port}"),
    }
}

/// Whether the SQL user is the operator-provisioned one (named after the instance) rather than
/// the `username` key of the credentials Secret: Static credentials in managed mode.
pub fn uses_instance_user(block: &DatabaseSpec) -> bool {
    block.cluster_ref.is_some()
        && block.credentials_mode.unwrap_or(CredentialsMode::Static) == CredentialsMode::Static
}

/// Whether TLS is on: a block is present and its mode is neither empty nor disabled.
pub fn tls_enabled(block: &DatabaseSpec) -> Option<DatabaseTLSMode> {
    block
        .tls
        .as_ref()
        .and_then(|tls| tls.mode)
        .filter(|mode| *mode != DatabaseTLSMode::Disabled)
}

/// `mysql+pymysql://<user>:<password>@<host:port>/<database>?charset=utf8[&ssl_…]`, with the
/// query keys sorted and `/` inside the TLS file paths kept literal (a `%2F` would break
/// alembic's ConfigParser interpolation). `tls_mount` is where the block's certificates live.
pub fn pymysql(
    block: &DatabaseSpec,
    namespace: &str,
    user: &str,
    password: &str,
    tls_mount: &str,
) -> String {
    let mut query = vec![("charset", "utf8".to_owned())];
    if let Some(mode) = tls_enabled(block) {
        let mount = tls_mount.trim_end_matches('/');
        query.push(("ssl_ca", format!("{mount}/ca.crt")));
        query.push(("ssl_cert", format!("{mount}/tls.crt")));
        query.push(("ssl_key", format!("{mount}/tls.key")));
        if matches!(
            mode,
            DatabaseTLSMode::VerifyCa | DatabaseTLSMode::VerifyFull
        ) {
            query.push(("ssl_verify_cert", "true".to_owned()));
        }
        if mode == DatabaseTLSMode::VerifyFull {
            query.push(("ssl_verify_identity", "true".to_owned()));
        }
    }
    query.sort();
    let query: Vec<String> = query.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "mysql+pymysql://{}:{}@{}/{}?{}",
        encode_userinfo(user),
        encode_userinfo(password),
        address(block, namespace),
        block.database,
        query.join("&")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nova_api::v1alpha1::{ClusterRef, DatabaseTLSSpec, SecretRefSpec};

    fn managed() -> DatabaseSpec {
        DatabaseSpec {
            cluster_ref: Some(ClusterRef {
                name: "openstack-mariadb".into(),
            }),
            database: "nova_api".into(),
            secret_ref: SecretRefSpec {
                name: "nova-api-db".into(),
                key: None,
            },
            ..Default::default()
        }
    }

    fn with_tls(mode: Option<DatabaseTLSMode>) -> DatabaseSpec {
        DatabaseSpec {
            tls: Some(DatabaseTLSSpec {
                mode,
                ca_bundle_secret_ref: SecretRefSpec {
                    name: "ca".into(),
                    key: None,
                },
                client_cert_secret_ref: SecretRefSpec {
                    name: "cert".into(),
                    key: None,
                },
            }),
            ..managed()
        }
    }

    #[test]
    fn a_managed_plaintext_dsn() {
        assert_eq!(
            pymysql(
                &managed(),
                "openstack",
                "nova-api",
                "s3cret",
                "/etc/nova-db-tls/api/"
            ),
            "mysql+pymysql://nova-api:s3cret@openstack-mariadb.openstack.svc:3306/nova_api?charset=utf8"
        );
        assert!(uses_instance_user(&managed()));
    }

    #[test]
    fn userinfo_is_percent_encoded_and_unreserved_characters_are_kept() {
        let dsn = pymysql(&managed(), "ns", "us@er:x", "p@ss/w:rd?#%~._-", "/m");
        assert!(
            dsn.starts_with("mysql+pymysql://us%40er%3Ax:p%40ss%2Fw%3Ard%3F%23%25~._-@"),
            "{dsn}"
        );
    }

    #[test]
    fn tls_parameters_are_sorted_and_paths_stay_literal() {
        let full = pymysql(
            &with_tls(Some(DatabaseTLSMode::VerifyFull)),
            "ns",
            "u",
            "p",
            "/etc/nova-db-tls/cell/",
        );
        assert!(full.ends_with(
            "?charset=utf8&ssl_ca=/etc/nova-db-tls/cell/ca.crt&ssl_cert=/etc/nova-db-tls/cell/tls.crt&ssl_key=/etc/nova-db-tls/cell/tls.key&ssl_verify_cert=true&ssl_verify_identity=true"
        ), "{full}");
        let ca = pymysql(
            &with_tls(Some(DatabaseTLSMode::VerifyCa)),
            "ns",
            "u",
            "p",
            "/m",
        );
        assert!(
            ca.ends_with("&ssl_key=/m/tls.key&ssl_verify_cert=true"),
            "{ca}"
        );
        for encrypt_only in [DatabaseTLSMode::Prefer, DatabaseTLSMode::Require] {
            let dsn = pymysql(&with_tls(Some(encrypt_only)), "ns", "u", "p", "/m");
            assert!(dsn.ends_with("&ssl_key=/m/tls.key"), "{dsn}");
        }
        for off in [None, Some(DatabaseTLSMode::Disabled)] {
            let dsn = pymysql(&with_tls(off), "ns", "u", "p", "/m");
            assert!(dsn.ends_with("?charset=utf8"), "{dsn}");
        }
    }

    #[test]
    fn brownfield_addresses_and_users() {
        let mut block = managed();
        block.cluster_ref = None;
        block.host = Some("db.example.com".into());
        block.port = Some(3307);
        assert_eq!(address(&block, "ns"), "db.example.com:3307");
        assert!(!uses_instance_user(&block));
        block.host = Some("fd00::10".into());
        assert_eq!(address(&block, "ns"), "[fd00::10]:3307");
        let mut dynamic = managed();
        dynamic.credentials_mode = Some(CredentialsMode::Dynamic);
        assert!(!uses_instance_user(&dynamic));
    }
}
