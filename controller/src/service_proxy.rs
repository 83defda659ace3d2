//! How the controller reaches a Service of a target cluster, whose Service network it cannot
//! dial: through the target API server's `services/proxy` subresource. Shared by the health
//! probe (`clusters::probe`) and the OpenStack client's proxied transport.

/// The API path proxying `http://<service>.<namespace>.svc[...]:<port><path>[?<query>]`: the
/// `services/proxy` subresource of that Service; None for any other URL.
pub fn proxy_path(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let mut labels = host
        .strip_suffix(".cluster.local")
        .unwrap_or(host)
        .split('.');
    let (service, namespace) = (labels.next()?, labels.next()?);
    if labels.next() != Some("svc") || labels.next().is_some() {
        return None;
    }
    let port = parsed.port_or_known_default()?;
    let query = parsed.query().map(|q| format!("?{q}")).unwrap_or_default();
    Some(format!(
        "/api/v1/namespaces/{namespace}/services/{}:{service}:{port}/proxy{}{query}",
        parsed.scheme(),
        parsed.path()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_url_maps_onto_the_proxy_subresource() {
        assert_eq!(
            proxy_path("http://nova-api.openstack.svc.cluster.local:8774/").as_deref(),
            Some("/api/v1/namespaces/openstack/services/http:nova-api:8774/proxy/")
        );
        assert_eq!(
            proxy_path("http://nova-api.openstack.svc/healthcheck").as_deref(),
            Some("/api/v1/namespaces/openstack/services/http:nova-api:80/proxy/healthcheck")
        );
        assert_eq!(
            proxy_path("http://placement.os.svc.cluster.local:8778/traits/CUSTOM_A?x=1").as_deref(),
            Some("/api/v1/namespaces/os/services/http:placement:8778/proxy/traits/CUSTOM_A?x=1"),
            "the query travels along"
        );
        assert_eq!(proxy_path("http://127.0.0.1:8774/"), None);
        assert_eq!(proxy_path("http://a.b.svc.example.com/"), None);
        assert_eq!(proxy_path("http://nova.example.com/"), None);
    }
}
