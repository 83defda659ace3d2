//! The real node's configuration files, rendered from its [`Layout`] without touching the
//! machine. Every value follows `spec/real-node.md` ("Settings that are required here",
//! "Kubelet configuration that worked", "Networking that worked"); the reasons are noted where
//! the value is not the component's default.

use std::path::Path;

use serde_json::json;

use super::Layout;
use crate::{Error, Result};

/// containerd's TOML (config version 3): only what differs from `containerd config default`,
/// which containerd merges the file over.
pub(crate) fn containerd_toml(layout: &Layout) -> String {
    let q = |p: &Path| toml_string(&p.display().to_string());
    format!(
        "version = 3\n\
         root = {root}\n\
         state = {state}\n\
         \n\
         [grpc]\n  address = {socket}\n\
         \n\
         [plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = {pause}\n\
         \n\
         # No AppArmor on these machines; no CAP_SYS_RESOURCE, so the OOM score may only rise.\n\
         [plugins.'io.containerd.cri.v1.runtime']\n  enable_selinux = false\n  disable_apparmor = true\n  restrict_oom_score_adj = true\n\
         \n\
         [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  BinaryName = {runc}\n  SystemdCgroup = false\n\
         \n\
         [plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dirs = [{cni_bin}]\n  conf_dir = {cni_conf}\n\
         \n\
         [plugins.'io.containerd.nri.v1.nri']\n  disable = true\n\
         \n\
         [plugins.'io.containerd.internal.v1.opt']\n  path = {opt}\n\
         \n\
         [plugins.'io.containerd.image-verifier.v1.bindir']\n  bin_dir = {verifier}\n",
        root = q(&layout.containerd_root()),
        state = q(Path::new(super::CONTAINERD_STATE)),
        socket = q(Path::new(super::CONTAINERD_SOCKET)),
        pause = toml_string(super::PAUSE_IMAGE),
        runc = q(Path::new(super::RUNC)),
        cni_bin = q(Path::new(super::CNI_BIN_DIR)),
        cni_conf = q(&layout.cni_conf_dir()),
        opt = q(&layout.run().join("containerd-opt")),
        verifier = q(&layout.run().join("image-verifier")),
    )
}

/// A TOML basic string (paths and image names hold no control characters).
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The CNI network: one bridge on the harness's bridge (the plugin reuses it), no masquerade,
/// hairpin on, and only the pod subnet (on-link) and the service CIDR routed, so a pod has no
/// default route and nothing it sends can be routed off the machine.
pub(crate) fn cni_conflist(layout: &Layout) -> serde_json::Value {
    json!({
        "cniVersion": "1.0.0",
        "name": "nova-test",
        "plugins": [{
            "type": "bridge",
            "bridge": super::BRIDGE,
            "isGateway": true,
            "isDefaultGateway": false,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{ "subnet": super::POD_SUBNET, "gateway": super::BRIDGE_IP }]],
                "routes": [{ "dst": crate::control_plane::SERVICE_CIDR }],
                "dataDir": layout.run().join("cni-ipam").display().to_string(),
            }
        }, {
            "type": "loopback"
        }]
    })
}

/// The KubeletConfiguration. Pod logs go to `pod_logs` (the control plane's log directory, so
/// they stay with the component logs when a failing test keeps them).
pub(crate) fn kubelet_config(layout: &Layout, pod_logs: &Path) -> serde_json::Value {
    let pki = layout.pki();
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // The API server dials the kubelet on the node's InternalIP; only clients with a
        // certificate of the control plane's CA (the API server's) are let in.
        "address": super::BRIDGE_IP,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": { "enabled": false },
            "webhook": { "enabled": false },
            "x509": { "clientCAFile": pki.join("ca.crt").display().to_string() }
        },
        "authorization": { "mode": "AlwaysAllow" },
        // The host mounts the v1 controllers; kubelet >= 1.35 refuses v1 unless told.
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": super::CGROUP_ROOT,
        "failCgroupV1": false,
        "failSwapOn": false,
        // Only check the kernel sysctls (bind-mounted in the kubelet's own mount namespace),
        // never change the host's.
        "protectKernelDefaults": true,
        "containerRuntimeEndpoint": format!("unix://{}", super::CONTAINERD_SOCKET),
        "podLogsDir": pod_logs.display().to_string(),
        // Pods never get the host's resolver.
        "resolvConf": layout.config().join("resolv.conf").display().to_string(),
        "clusterDomain": "cluster.local",
        "clusterDNS": [super::CLUSTER_DNS_IP],
        "maxPods": 50,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
            "imagefs.inodesFree": "1%"
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusReportFrequency": "10s",
        "serializeImagePulls": false,
        "staticPodPath": ""
    })
}

/// The KubeProxyConfiguration: nftables mode, everything bound to loopback or the bridge,
/// conntrack settings zero so it changes no sysctl.
pub(crate) fn kube_proxy_config(
    layout: &Layout,
    healthz_port: u16,
    metrics_port: u16,
) -> serde_json::Value {
    json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": { "kubeconfig": layout.config().join("kube-proxy.kubeconfig").display().to_string() },
        "hostnameOverride": super::NODE_NAME,
        "mode": "nftables",
        "clusterCIDR": super::POD_SUBNET,
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": format!("127.0.0.1:{healthz_port}"),
        "metricsBindAddress": format!("127.0.0.1:{metrics_port}"),
        "nodePortAddresses": [format!("{}/32", super::BRIDGE_IP)],
        "iptables": { "localhostNodePorts": false },
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s"
        }
    })
}

/// CoreDNS's Corefile: the `kubernetes` plugin on the bridge address, health and readiness on
/// loopback, and no `forward` plugin, so no name is ever resolved outside the cluster.
pub(crate) fn corefile(layout: &Layout, health_port: u16, ready_port: u16) -> String {
    format!(
        ".:53 {{\n    bind {ip}\n    errors\n    health 127.0.0.1:{health_port}\n    ready 127.0.0.1:{ready_port}\n    \
         kubernetes cluster.local in-addr.arpa ip6.arpa {{\n        kubeconfig {kubeconfig}\n        pods insecure\n        \
         fallthrough in-addr.arpa ip6.arpa\n        ttl 5\n    }}\n    cache 5\n}}\n",
        ip = super::BRIDGE_IP,
        kubeconfig = layout.config().join("coredns.kubeconfig").display(),
    )
}

/// The nftables table that keeps the pod bridge on the machine: the CNI bridge plugin turns on
/// `ip_forward`, and without this a connection to a Service without endpoints (or any address
/// outside the cluster) would be routed off the machine. Forwarded traffic may only go from the
/// bridge to a pod on the bridge; IPv6 from the bridge is dropped outright.
pub(crate) fn forward_guard() -> String {
    let br = super::BRIDGE;
    format!(
        "table inet {table} {{\n  chain forward {{\n    type filter hook forward priority -10; policy accept;\n    \
         iifname \"{br}\" meta nfproto ipv6 drop\n    \
         iifname \"{br}\" ip daddr != {subnet} drop\n    \
         iifname \"{br}\" oifname != \"{br}\" drop\n    \
         oifname \"{br}\" iifname != \"{br}\" drop\n  }}\n}}\n",
        table = super::GUARD_TABLE,
        subnet = super::POD_SUBNET,
    )
}

/// Serializes one of the JSON documents above as YAML (what the kubelet and kube-proxy read).
pub(crate) fn yaml(value: &serde_json::Value) -> Result<String> {
    serde_saphyr::to_string(value).map_err(|e| Error::Invalid {
        context: "serializing a node configuration file".into(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::new("/cache/node".into())
    }

    #[test]
    fn containerd_keeps_oom_restriction_private_paths_and_local_pause() {
        let toml = containerd_toml(&layout());
        for needle in [
            "root = \"/cache/node/containerd\"",
            "restrict_oom_score_adj = true",
            "disable_apparmor = true",
            "bin_dirs = [\"/usr/lib/cni\"]",
            "conf_dir = \"/cache/node/run/config/cni\"",
            "[plugins.'io.containerd.nri.v1.nri']\n  disable = true",
            "path = \"/cache/node/run/containerd-opt\"",
            "sandbox = \"localhost/nova-test/pause:v1.36.3\"",
        ] {
            assert!(toml.contains(needle), "{needle} missing from\n{toml}");
        }
    }

    #[test]
    fn pods_get_no_default_route_and_no_masquerade() {
        let cni = cni_conflist(&layout());
        let bridge = &cni["plugins"][0];
        assert_eq!(bridge["ipMasq"], false);
        assert_eq!(bridge["isDefaultGateway"], false);
        assert_eq!(bridge["ipam"]["routes"], json!([{ "dst": "10.96.0.0/24" }]));
    }

    #[test]
    fn kubelet_only_checks_sysctls_and_never_uses_the_host_resolver() {
        let k = kubelet_config(&layout(), Path::new("/cp/logs/pods"));
        assert_eq!(k["podLogsDir"], "/cp/logs/pods");
        assert_eq!(k["protectKernelDefaults"], true);
        assert_eq!(k["failCgroupV1"], false);
        assert_eq!(k["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(k["resolvConf"], "/cache/node/run/config/resolv.conf");
        assert_eq!(k["clusterDNS"], json!(["10.96.0.10"]));
    }

    #[test]
    fn coredns_has_no_forward_plugin() {
        let c = corefile(&layout(), 1, 2);
        assert!(!c.contains("forward"), "{c}");
        assert!(c.contains("bind 10.88.0.1"), "{c}");
    }

    #[test]
    fn the_guard_drops_everything_leaving_the_bridge_for_elsewhere() {
        let g = forward_guard();
        assert!(g.contains("hook forward priority -10"), "{g}");
        assert!(
            g.contains("iifname \"novatest0\" ip daddr != 10.88.0.0/24 drop"),
            "{g}"
        );
        assert!(
            g.contains("iifname \"novatest0\" oifname != \"novatest0\" drop"),
            "{g}"
        );
    }

    #[test]
    fn kube_proxy_changes_no_conntrack_sysctl_and_binds_loopback() {
        let p = kube_proxy_config(&layout(), 3, 4);
        assert_eq!(p["conntrack"]["maxPerCore"], 0);
        assert_eq!(p["bindAddress"], "127.0.0.1");
        assert_eq!(p["nodePortAddresses"], json!(["10.88.0.1/32"]));
        assert_eq!(p["mode"], "nftables");
    }
}
