//! The volumes and mount paths the operator owns in a Nova's pods. `spec.extraVolumes` and
//! `spec.extraVolumeMounts` (issue 30, beyond the spec) cannot take them: the webhook refuses
//! a colliding name or path, and the controller's tests hold its rendered volumes and the
//! image paths its processes name to these lists, so a new one cannot slip past the webhook.

/// The names of the operator's volumes (config, the role's overlay, scratch, the database and
/// broker TLS files, spec.tls's CA bundle).
pub const OPERATOR_VOLUMES: [&str; 8] = [
    "config",
    "overlay",
    "state",
    "tmp",
    "db-tls-api",
    "db-tls-cell",
    "rabbitmq-ca",
    "endpoint-ca",
];

/// The directories the operator mounts at or below (the config directories, the state path,
/// the scratch directory, the TLS directories) and the image's own that the rendered
/// processes run from (the virtualenv holding api-paste.ini, the noVNC client the proxy serves).
pub const OPERATOR_PATHS: [&str; 8] = [
    "/etc/nova",
    "/var/lib/nova",
    "/tmp",
    "/etc/nova-db-tls",
    "/etc/rabbitmq-ca",
    "/etc/openstack-ca",
    "/var/lib/openstack",
    "/usr/share/novnc",
];

/// The operator's directory `path` equals or lies below, if any. Empty and `.` segments are
/// skipped, so `/etc//nova/./x` is below `/etc/nova`.
pub fn operator_path(path: &str) -> Option<&'static str> {
    let within: Vec<&str> = segments(path).collect();
    OPERATOR_PATHS
        .into_iter()
        .find(|owned| within.starts_with(&segments(owned).collect::<Vec<_>>()))
}

/// The segments of a path, empty and `.` ones skipped: two paths with the same segments name
/// the same directory.
pub fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty() && *s != ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_at_or_below_an_owned_directory_is_owned() {
        for (path, owned) in [
            ("/etc/nova", Some("/etc/nova")),
            ("/etc/nova/", Some("/etc/nova")),
            ("/etc//nova/./policy.yaml", Some("/etc/nova")),
            ("/tmp/x", Some("/tmp")),
            ("/etc/nova-db-tls/api", Some("/etc/nova-db-tls")),
            ("/etc/nova-policy", None),
            ("/etc", None),
            ("/var/lib/novae", None),
            ("/var/lib/openstack/etc/nova", Some("/var/lib/openstack")),
            ("/etc/ssl/certs/ca.pem", None),
        ] {
            assert_eq!(operator_path(path), owned, "{path}");
        }
    }
}
