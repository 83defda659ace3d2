//! The two NetworkPolicies (`nova-crd.txt`, "Network policy"; `common-types.md` §3.21): the
//! main policy over every pod of the CR, with ingress on the three front-end ports and the
//! auto-derived egress, and `{name}-novncproxy`, the proxy's VNC egress.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec as K8sNetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nova_api::labels;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{DatabaseSpec, GatewaySpec, NetworkPolicySpec, NovaSpec};

use super::nova_conf::MEMCACHED_PORT;
use super::paths::NOVNCPROXY_PORT;
use super::workloads::{API_PORT, METADATA_PORT};

/// The label every namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// The first port libvirt hands a VNC console.
pub const VNC_FIRST_PORT: i32 = 5900;
/// The last port.
pub const VNC_LAST_PORT: i32 = 65535;

fn port(protocol: &str, port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some(protocol.to_owned()),
        port: Some(IntOrString::Int(i32::from(port))),
        end_port: None,
    }
}

fn tcp_rule(ports: &[u16]) -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        ports: Some(ports.iter().map(|p| port("TCP", *p)).collect()),
        to: None,
    }
}

fn namespace_peer(namespace: &str) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_owned(),
                namespace.to_owned(),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The port of a URL: its explicit port, else 443 for https and 80 for http.
pub fn url_port(url: &str) -> Option<u16> {
    url::Url::parse(url).ok()?.port_or_known_default()
}

fn database_port(block: &DatabaseSpec) -> u16 {
    block
        .port
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(3306)
}

/// The cache ports: the managed Service's, or each brownfield server's, in order, deduplicated.
fn cache_ports(spec: &NovaSpec) -> Vec<u16> {
    if spec.cache.cluster_ref.is_some() {
        return vec![MEMCACHED_PORT];
    }
    let mut ports = Vec::new();
    for server in spec.cache.servers.iter().flatten() {
        if let Some(p) = server
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            && !ports.contains(&p)
        {
            ports.push(p);
        }
    }
    ports
}

/// The siblings Nova calls as a client: each override's port, else the conventional one.
fn sibling_ports(spec: &NovaSpec) -> Vec<u16> {
    let endpoints = spec.endpoints.clone().unwrap_or_default();
    let pinned = |url: Option<&String>, default: u16| {
        url.filter(|u| !u.is_empty())
            .and_then(|u| url_port(u))
            .unwrap_or(default)
    };
    let mut ports = vec![
        pinned(
            endpoints
                .placement
                .as_ref()
                .and_then(|e| e.override_url.as_ref()),
            8778,
        ),
        pinned(
            endpoints
                .neutron
                .as_ref()
                .and_then(|e| e.override_url.as_ref()),
            9696,
        ),
        pinned(
            endpoints
                .glance
                .as_ref()
                .and_then(|e| e.override_url.as_ref()),
            9292,
        ),
    ];
    for (block, default) in [(&endpoints.cinder, 8776), (&endpoints.barbican, 9311)] {
        if let Some(b) = block.as_ref().filter(|b| b.enabled.unwrap_or(false)) {
            ports.push(pinned(b.override_url.as_ref(), default));
        }
    }
    let mut unique = Vec::new();
    for p in ports {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique
}

/// The namespaces a Gateway fronts one of the front ends from, deduplicated, without the
/// console's while the proxy is disabled.
pub fn gateway_namespaces(namespace: &str, spec: &NovaSpec, proxy_enabled: bool) -> Vec<String> {
    let console = spec
        .console_proxy
        .as_ref()
        .and_then(|c| c.gateway.as_ref())
        .filter(|_| proxy_enabled);
    let blocks: [Option<&GatewaySpec>; 3] = [
        spec.gateway.as_ref(),
        spec.metadata.gateway.as_ref(),
        console,
    ];
    let mut namespaces: Vec<String> = Vec::new();
    for gateway in blocks.into_iter().flatten() {
        let ns = gateway
            .parent_ref
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| namespace.to_owned());
        if !namespaces.contains(&ns) {
            namespaces.push(ns);
        }
    }
    namespaces
}

/// The inputs of the main policy beyond the spec.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInputs<'a> {
    /// The Nova's name.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// The resolved broker port, once the transport URL is materialised.
    pub broker_port: Option<u16>,
    /// The operator's own namespace, when known.
    pub operator_namespace: Option<&'a str>,
    /// Whether the console proxy is enabled.
    pub proxy_enabled: bool,
}

/// The main NetworkPolicy: every pod of the CR, ingress over 8774, 8775 and 6080 from the
/// declared sources, the gateway namespaces and the operator's namespace, and egress in the
/// fixed order: DNS, both databases, the cache, Keystone, the siblings, the broker, then
/// spec.networkPolicy.additionalEgress.
pub fn main_policy(
    inputs: &PolicyInputs<'_>,
    spec: &NovaSpec,
    block: &NetworkPolicySpec,
) -> NetworkPolicy {
    let mut from: Vec<NetworkPolicyPeer> = block
        .ingress
        .iter()
        .map(|source| NetworkPolicyPeer {
            namespace_selector: Some(source.namespace_selector.clone()),
            pod_selector: source.pod_selector.clone(),
            ..Default::default()
        })
        .collect();
    from.extend(
        gateway_namespaces(inputs.namespace, spec, inputs.proxy_enabled)
            .iter()
            .map(|ns| namespace_peer(ns)),
    );
    if let Some(ns) = inputs.operator_namespace {
        from.push(namespace_peer(ns));
    }
    let mut egress = vec![NetworkPolicyEgressRule {
        ports: Some(vec![port("UDP", 53), port("TCP", 53)]),
        to: None,
    }];
    egress.push(tcp_rule(&[database_port(&spec.api_database)]));
    egress.push(tcp_rule(&[database_port(&spec.database)]));
    let cache = cache_ports(spec);
    if !cache.is_empty() {
        egress.push(tcp_rule(&cache));
    }
    if let Some(p) = url_port(&spec.keystone_endpoint) {
        egress.push(tcp_rule(&[p]));
    }
    egress.push(tcp_rule(&sibling_ports(spec)));
    if let Some(p) = inputs.broker_port {
        egress.push(tcp_rule(&[p]));
    }
    egress.extend(block.additional_egress.clone().unwrap_or_default());
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(NovaNames::new(inputs.name).api()),
            ..Default::default()
        },
        spec: Some(K8sNetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(pod_selector(inputs.name)),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                ports: Some(
                    [API_PORT, METADATA_PORT, NOVNCPROXY_PORT]
                        .into_iter()
                        .map(|p| port("TCP", p))
                        .collect(),
                ),
                from: Some(from),
            }]),
            egress: Some(egress),
        }),
    }
}

/// The selector of every pod of the CR (Jobs included): name and instance, no component.
fn pod_selector(name: &str) -> BTreeMap<String, String> {
    let mut selector = labels::common(name);
    selector.remove(labels::MANAGED_BY);
    selector
}

/// `{name}-novncproxy`: the proxy pods' egress to the hypervisors' VNC ports, 5900-65535,
/// port-only. No ingress policy type, so the proxy's ingress stays the main policy's.
pub fn proxy_policy(name: &str) -> NetworkPolicy {
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(NovaNames::new(name).novncproxy()),
            ..Default::default()
        },
        spec: Some(K8sNetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(labels::selector(name, labels::component::NOVNCPROXY)),
                ..Default::default()
            }),
            policy_types: Some(vec!["Egress".to_owned()]),
            egress: Some(vec![NetworkPolicyEgressRule {
                ports: Some(vec![NetworkPolicyPort {
                    protocol: Some("TCP".to_owned()),
                    port: Some(IntOrString::Int(VNC_FIRST_PORT)),
                    end_port: Some(VNC_LAST_PORT),
                }]),
                to: None,
            }]),
            ingress: None,
        }),
    }
}
