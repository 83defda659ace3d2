//! The file names and paths the rendered documents name, and that the pod templates mount
//! them at (`nova-crd.txt`, "Config directories and mounts"; "Compute contract").

/// The shared document every process reads.
pub const NOVA_CONF: &str = "nova.conf";
/// The metadata API's overlay.
pub const METADATA_CONF: &str = "metadata.conf";
/// The scheduler's overlay.
pub const SCHEDULER_CONF: &str = "scheduler.conf";
/// The conductor's overlay.
pub const CONDUCTOR_CONF: &str = "conductor.conf";
/// The console proxy's overlay.
pub const NOVNCPROXY_CONF: &str = "novncproxy.conf";
/// The Python logging file config, rendered while spec.logging.format is json.
pub const LOGGING_INI: &str = "logging.ini";

/// The shared config directory: nova.conf, logging.ini, metadata.conf (metadata API only).
pub const CONFIG_DIR: &str = "/etc/nova/nova.conf.d";
/// The scheduler's overlay directory.
pub const SCHEDULER_CONFIG_DIR: &str = "/etc/nova/scheduler.conf.d";
/// The conductor's overlay directory.
pub const CONDUCTOR_CONFIG_DIR: &str = "/etc/nova/conductor.conf.d";
/// The console proxy's overlay directory.
pub const NOVNCPROXY_CONFIG_DIR: &str = "/etc/nova/novncproxy.conf.d";
/// `[DEFAULT] state_path`, an emptyDir.
pub const STATE_PATH: &str = "/var/lib/nova";
/// `[oslo_concurrency] lock_path`, below the state path.
pub const LOCK_PATH: &str = "/var/lib/nova/tmp";
/// `[DEFAULT] log_config_append` while the format is json: logging.ini in the shared directory.
pub const LOG_CONFIG_APPEND: &str = "/etc/nova/nova.conf.d/logging.ini";
/// The messaging CA mount of the control-plane pods.
pub const RABBITMQ_CA_DIR: &str = "/etc/rabbitmq-ca";
/// `[oslo_messaging_rabbit] ssl_ca_file` of the control plane.
pub const RABBITMQ_CA_FILE: &str = "/etc/rabbitmq-ca/ca.crt";
/// The endpoint CA mount of the control-plane pods, while spec.tls is set (beyond the spec).
pub const ENDPOINT_CA_DIR: &str = "/etc/openstack-ca";
/// The client sections' `cafile` of the control plane.
pub const ENDPOINT_CA_FILE: &str = "/etc/openstack-ca/ca.crt";
/// Where a NovaCompute pool mounts the contract Secret; part of the contract.
pub const COMPUTE_CONFIG_DIR: &str = "/etc/nova/compute-config";
/// `[oslo_messaging_rabbit] ssl_ca_file` of the compute fragment.
pub const COMPUTE_CA_FILE: &str = "/etc/nova/compute-config/ca.crt";
/// The client sections' `cafile` of the compute fragment, while spec.tls is set.
pub const COMPUTE_ENDPOINT_CA_FILE: &str = "/etc/nova/compute-config/endpoint-ca.crt";
/// The noVNC client directory the image ships and the proxy serves (`[DEFAULT] web`).
pub const NOVNC_WEB: &str = "/usr/share/novnc";
/// The console proxy's listen port, the port of its Service.
pub const NOVNCPROXY_PORT: u16 = 6080;

/// Where the nova_api block's TLS files are mounted.
pub const API_TLS_MOUNT: &str = "/etc/nova-db-tls/api/";
/// Where the cell block's TLS files are mounted.
pub const CELL_TLS_MOUNT: &str = "/etc/nova-db-tls/cell/";
/// The one key of a derived DSN Secret.
pub const CONNECTION_KEY: &str = "connection";
