//! The Nova pipeline's rows, one file each: observe through the cluster handle, then a pure plan
//! (the table is `nova/mod.rs`; the flows and helpers the rows share sit beside this folder).

pub mod compute_config;
pub mod conductor;
pub mod config;
pub mod console_http_route;
pub mod console_proxy;
pub mod database;
pub mod db_archive;
pub mod db_connection;
pub mod deployment;
pub mod endpoint_warnings;
pub mod finalize;
pub mod health_check;
pub mod hpa;
pub mod http_route;
pub mod metadata;
pub mod metadata_http_route;
pub mod network_policy;
pub mod scheduler;
pub mod secrets;
pub mod transport_url;
pub mod vpa;
