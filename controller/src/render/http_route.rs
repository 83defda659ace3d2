//! The three HTTPRoutes (`common-types.md` §3.19): `{name}` → Service `{name}` on 8774,
//! `{name}-metadata` → `{name}-metadata` on 8775, `{name}-console` → `{name}-novncproxy` on
//! 6080. Written as dynamic objects: the Gateway API is another project's kind.

use nova_api::v1alpha1::GatewaySpec;
use serde_json::{Map, Value, json};

use crate::objects::{Child, kinds};

/// The route's path prefix: spec's path with a leading `/`, or `/`.
pub fn path_prefix(gateway: &GatewaySpec) -> String {
    match gateway.path.as_deref().filter(|p| !p.is_empty()) {
        Some(p) if p.starts_with('/') => p.to_owned(),
        Some(p) => format!("/{p}"),
        None => "/".to_owned(),
    }
}

/// The HTTPRoute `route` exposing Service `service` on `port` through `gateway`.
pub fn http_route(route: &str, gateway: &GatewaySpec, service: &str, port: u16) -> Child {
    let mut parent = Map::new();
    parent.insert("name".into(), json!(gateway.parent_ref.name));
    if let Some(ns) = gateway
        .parent_ref
        .namespace
        .as_ref()
        .filter(|n| !n.is_empty())
    {
        parent.insert("namespace".into(), json!(ns));
    }
    if let Some(section) = gateway
        .parent_ref
        .section_name
        .as_ref()
        .filter(|s| !s.is_empty())
    {
        parent.insert("sectionName".into(), json!(section));
    }
    let mut metadata = json!({ "name": route });
    if let Some(annotations) = gateway.annotations.as_ref().filter(|a| !a.is_empty()) {
        metadata["annotations"] = json!(annotations);
    }
    let kind = kinds::http_route();
    let body = json!({
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": metadata,
        "spec": {
            "parentRefs": [Value::Object(parent)],
            "hostnames": [gateway.hostname],
            "rules": [{
                "matches": [{ "path": { "type": "PathPrefix", "value": path_prefix(gateway) } }],
                "backendRefs": [{ "kind": "Service", "name": service, "port": port }]
            }]
        }
    });
    Child::dynamic(kind, route, body)
}

/// Whether a route's status reports `Accepted=True` from any parent.
pub fn accepted(route: &Value) -> bool {
    route["status"]["parents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["conditions"].as_array().into_iter().flatten())
        .any(|c| c["type"] == "Accepted" && c["status"] == "True")
}
