//! The four role overlays shipped beside nova.conf (`nova-crd.txt`, "Rendered
//! configuration"). They are assembled by string formatting, not by the INI renderer, and are
//! never merged with extraConfig: an override of an overlay key lands in nova.conf, where the
//! overlay read after it wins for its own role. All four ship on every render, the console
//! proxy's included while the proxy is disabled, so a switch never rotates the ConfigMap for
//! a key no pod reads.

use nova_api::defaults::DEFAULT_WORKERS;
use nova_api::v1alpha1::NovaSpec;

use super::error::RenderError;
use super::paths::{NOVNC_WEB, NOVNCPROXY_PORT};

/// metadata.conf: the key that makes the metadata API trust the instance identity in the
/// headers of a proxied request.
pub fn metadata_conf() -> String {
    "[neutron]\nservice_metadata_proxy = true\n".to_owned()
}

fn workers(field: &'static str, value: Option<i32>) -> Result<i32, RenderError> {
    match value.unwrap_or(DEFAULT_WORKERS) {
        n if n >= 1 => Ok(n),
        _ => Err(RenderError::InvalidField {
            field,
            reason: "must be at least 1",
        }),
    }
}

/// scheduler.conf: spec.scheduler.workers, two when unset.
pub fn scheduler_conf(spec: &NovaSpec) -> Result<String, RenderError> {
    let n = workers(
        "spec.scheduler.workers",
        spec.scheduler.as_ref().and_then(|s| s.workers),
    )?;
    Ok(format!("[scheduler]\nworkers = {n}\n"))
}

/// conductor.conf: spec.conductor.workers, two when unset.
pub fn conductor_conf(spec: &NovaSpec) -> Result<String, RenderError> {
    let n = workers(
        "spec.conductor.workers",
        spec.conductor.as_ref().and_then(|s| s.workers),
    )?;
    Ok(format!("[conductor]\nworkers = {n}\n"))
}

/// novncproxy.conf: the client directory the proxy serves and the address pair its Service
/// routes to. The empty `[api_database] connection` blanks the placeholder of the shared
/// document: the proxy gets no nova_api credentials, and nova reads a non-empty value as a
/// reachable API database.
pub fn novncproxy_conf() -> String {
    format!(
        "[DEFAULT]\nweb = {NOVNC_WEB}\n\n[api_database]\nconnection =\n\n[vnc]\nnovncproxy_host = 0.0.0.0\nnovncproxy_port = {NOVNCPROXY_PORT}\n"
    )
}
