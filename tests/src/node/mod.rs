//! One real Kubernetes node beside the kwok nodes: containerd with Debian's runc, the CNI bridge
//! plugin on a bridge the harness creates, a kubelet, kube-proxy (nftables) and CoreDNS, all
//! from `tests/build-node.sh` and the settings of `spec/real-node.md`.
//!
//! Only one real node can exist on a machine (containerd's `/run/containerd`, the kubelet's
//! port 10250 and device-plugin socket are fixed), so the node holds a machine-wide `flock` on
//! [`LOCK_PATH`] for its whole life: test binaries of any worktree that want it queue up instead
//! of colliding. The lock dies with its process, and whoever takes it next first undoes whatever
//! a crashed holder left behind ([`teardown`]), so the machine is always cleaned by the same code
//! that cleans it at the end of a run.

mod config;
mod faults;
mod host;
mod run;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use faults::{black_hole, pod_pids, restore_links, resume, stop};
pub(crate) use host::output as host_output;
pub use run::NodeTimings;
pub(crate) use run::Session;

use crate::{Error, Result, io_err};

/// The node's name (and its kubelet's `--hostname-override`).
pub const NODE_NAME: &str = "nova-test-node";
/// The label every pod that must run for real can select the node with.
pub const NODE_LABEL: (&str, &str) = ("nova.c5c3.io/test-node", "real");
/// The pod bridge the harness creates; its address is the node IP.
pub const BRIDGE: &str = "novatest0";
/// The bridge's address: node IP, pods' gateway, and where the API server and CoreDNS listen.
pub const BRIDGE_IP: &str = "10.88.0.1";
/// The pod subnet (host-local IPAM on the bridge).
pub const POD_SUBNET: &str = "10.88.0.0/24";
/// The `kube-dns` Service address the kubelet gives pods.
pub const CLUSTER_DNS_IP: &str = "10.96.0.10";
/// The machine-wide lock serializing every real node on this machine.
pub const LOCK_PATH: &str = "/run/lock/nova-operator-node.lock";
/// The local pause image containerd uses as the sandbox image.
pub const PAUSE_IMAGE: &str = "localhost/nova-test/pause:v1.36.3";

pub(crate) const CGROUP_ROOT: &str = "/nova-test-node";
pub(crate) const GUARD_TABLE: &str = "nova_test_node_guard";
/// The nftables table of the drills' black holes ([`black_hole`]).
pub(crate) const DRILL_TABLE: &str = "nova_test_node_drill";
pub(crate) const CONTAINERD_STATE: &str = "/run/containerd";
pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
pub(crate) const RUNC: &str = "/usr/sbin/runc";
pub(crate) const CNI_BIN_DIR: &str = "/usr/lib/cni";
const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
/// Paths the components use whatever their flags say; removed at teardown if the node created
/// them.
pub const FIXED_PATHS: [&str; 6] = [
    "/run/containerd",
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/cni",
    "/run/netns",
];
/// The host paths a compute pool's DaemonSet mounts (`novacompute.md` §5.6) that a compute host
/// has and this machine does not: the kubelet creates the missing ones (`DirectoryOrCreate`,
/// `FileOrCreate`), containerd those without a type (`/lib/modules`); teardown removes those the
/// run found absent.
pub const COMPUTE_HOST_PATHS: [&str; 8] = [
    COMPUTE_STATE_PATH,
    "/lib/modules",
    "/run/libvirt",
    "/run/openvswitch",
    "/etc/iscsi",
    "/etc/nvme",
    "/etc/multipath",
    "/etc/multipath.conf",
];
/// nova-compute's state path, mounted `Bidirectional` into the pool's pods: a mount point with
/// shared propagation, as on a compute host whose init system shares every mount.
pub const COMPUTE_STATE_PATH: &str = "/var/lib/nova";
/// The binaries of a node, whose leftover processes teardown kills by executable path.
pub const BINARIES: [&str; 6] = [
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "coredns",
    "ctr",
];
/// The three kernel settings the kubelet insists on, as it sees them in its mount namespace.
const KUBELET_SYSCTLS: [(&str, &str, &str); 3] = [
    ("kernel-panic", "/proc/sys/kernel/panic", "10"),
    (
        "kernel-panic-on-oops",
        "/proc/sys/kernel/panic_on_oops",
        "1",
    ),
    (
        "vm-overcommit-memory",
        "/proc/sys/vm/overcommit_memory",
        "1",
    ),
];

/// Where a node keeps its files: `$NOVA_NODE_DIR`, else `$HOME/.cache/nova-operator-node`.
/// `containerd/` (the image store) survives runs, so an imported image is imported once;
/// `run/` is the current run's and is removed by teardown.
#[derive(Clone, Debug)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The default layout.
    pub fn default_dir() -> Self {
        let root = std::env::var_os("NOVA_NODE_DIR")
            .filter(|v| !v.is_empty())
            .map_or_else(
                || {
                    let home = std::env::var_os("HOME")
                        .map_or_else(|| PathBuf::from("/root"), PathBuf::from);
                    home.join(".cache/nova-operator-node")
                },
                PathBuf::from,
            );
        Self::new(root)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub(crate) fn containerd_root(&self) -> PathBuf {
        self.root.join("containerd")
    }
    pub(crate) fn run(&self) -> PathBuf {
        self.root.join("run")
    }
    pub(crate) fn config(&self) -> PathBuf {
        self.run().join("config")
    }
    pub(crate) fn pki(&self) -> PathBuf {
        self.run().join("pki")
    }
    pub(crate) fn cni_conf_dir(&self) -> PathBuf {
        self.config().join("cni")
    }
    pub(crate) fn kubelet_root(&self) -> PathBuf {
        self.run().join("kubelet")
    }
    /// The binary directory a run used (recorded so a later teardown finds its processes).
    fn testbin_record(&self) -> PathBuf {
        self.root.join("testbin")
    }
    fn created_record(&self) -> PathBuf {
        self.root.join("created-paths")
    }
    fn ip_forward_record(&self) -> PathBuf {
        self.root.join("ip_forward.orig")
    }
    fn nft_tables_record(&self) -> PathBuf {
        self.root.join("nft-tables.orig")
    }
}

/// The machine-wide lock, held while a node may exist. Released when dropped or when the
/// process dies.
#[derive(Debug)]
pub struct NodeLock {
    _file: File,
}

impl NodeLock {
    /// Waits up to `timeout` for the lock, saying once on stderr who holds it.
    pub fn acquire(timeout: Duration) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(LOCK_PATH)
            .map_err(io_err(format!("opening {LOCK_PATH}")))?;
        let deadline = Instant::now() + timeout;
        let mut said = false;
        loop {
            // SAFETY: flock on a file descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                break;
            }
            if !said {
                let holder = fs::read_to_string(LOCK_PATH).unwrap_or_default();
                eprintln!(
                    "nova-test-harness: waiting for the real node lock {LOCK_PATH} (held by {})",
                    holder.trim()
                );
                said = true;
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("the real node lock {LOCK_PATH}"),
                    after: timeout,
                    detail: "; another test binary holds the machine's only real node".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let mut f = &file;
        let _ = f.set_len(0);
        let _ = writeln!(
            f,
            "pid {} ({})",
            std::process::id(),
            std::env::args().next().unwrap_or_default()
        );
        Ok(Self { _file: file })
    }
}

/// The lock's default patience: a whole suite on the node may take this long.
pub(crate) fn lock_timeout() -> Duration {
    std::env::var("NOVA_NODE_LOCK_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(3600), Duration::from_secs)
}

/// Undoes everything a node run changed on the machine, whether that run ended cleanly or
/// crashed: leftover processes (the node's binaries, the pods' containers), mounts, network
/// namespaces, the kube-proxy, guard and drill tables, the bridge, `ip_forward`, the cgroup root, the
/// run directory and the fixed paths the run created. Call only while holding [`NodeLock`].
pub fn teardown(layout: &Layout) -> Result<()> {
    let mut errors = Vec::new();
    let mut note = |r: Result<()>| {
        if let Err(e) = r {
            errors.push(e.to_string());
        }
    };
    // The pods' host-side veths, read while the bridge still holds them: deleted below with
    // the bridge, not left to the kernel's asynchronous release of their namespaces, which can
    // outlive the teardown by seconds (a veth seen after it once failed the teardown proof).
    let ports = host::bridge_ports(BRIDGE);
    if let Ok(testbin) = fs::read_to_string(layout.testbin_record()) {
        let exes: Vec<PathBuf> = BINARIES
            .iter()
            .map(|b| Path::new(testbin.trim()).join(b))
            .collect();
        host::kill_by_executable(&exes, Duration::from_secs(10));
    }
    note(
        host::remove_cgroup_root(CGROUP_ROOT, Duration::from_secs(10)).or_else(|e| {
            // Kill first, remove after: a second pass catches tasks that raced the first.
            host::remove_cgroup_root(CGROUP_ROOT, Duration::from_secs(5)).map_err(|_| e)
        }),
    );
    let mut mount_roots: Vec<PathBuf> = FIXED_PATHS.iter().map(PathBuf::from).collect();
    mount_roots.push(COMPUTE_STATE_PATH.into());
    mount_roots.push(layout.run());
    mount_roots.push(layout.containerd_root());
    note(host::unmount_below(&mount_roots));
    if let Ok(entries) = fs::read_dir("/run/netns") {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("cni-") {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    note(host::nft_delete_table("ip", "kube-proxy"));
    note(host::nft_delete_table("ip6", "kube-proxy"));
    note(host::nft_delete_table("inet", GUARD_TABLE));
    note(host::nft_delete_table("inet", DRILL_TABLE));
    if let Ok(before) = fs::read_to_string(layout.nft_tables_record()) {
        let before: Vec<String> = before.lines().map(str::to_owned).collect();
        note(host::remove_kube_chains(&before));
        let _ = fs::remove_file(layout.nft_tables_record());
    }
    for port in &ports {
        note(host::delete_link(port));
    }
    note(host::delete_link(BRIDGE));
    if let Ok(original) = fs::read_to_string(layout.ip_forward_record()) {
        note(host::write_sysctl(IP_FORWARD, original.trim()));
        let _ = fs::remove_file(layout.ip_forward_record());
    }
    if layout.run().exists() {
        note(
            fs::remove_dir_all(layout.run())
                .map_err(io_err(format!("removing {}", layout.run().display()))),
        );
    }
    if let Ok(created) = fs::read_to_string(layout.created_record()) {
        for path in created.lines().filter(|l| !l.is_empty()) {
            let path = Path::new(path);
            let removed = if path.is_dir() {
                fs::remove_dir_all(path)
            } else if path.exists() {
                fs::remove_file(path)
            } else {
                Ok(())
            };
            note(removed.map_err(io_err(format!("removing {}", path.display()))));
        }
        let _ = fs::remove_file(layout.created_record());
    }
    let _ = fs::remove_file(layout.testbin_record());
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid {
            context: "tearing down the real node".into(),
            message: errors.join("; "),
        })
    }
}

/// Prepares the host for a node, after [`teardown`] cleaned any leftovers: records what it is
/// about to change, creates the fixed paths, the cgroup root, the bridge with its forward guard,
/// and the run directory with the kubelet's shared root.
pub(crate) fn prepare_host(layout: &Layout, testbin: &Path) -> Result<()> {
    let mkdir =
        |p: &Path| fs::create_dir_all(p).map_err(io_err(format!("creating {}", p.display())));
    mkdir(layout.root())?;
    fs::write(layout.testbin_record(), testbin.display().to_string())
        .map_err(io_err("recording the node's binary directory"))?;
    let created: Vec<&str> = FIXED_PATHS
        .iter()
        .chain(COMPUTE_HOST_PATHS.iter())
        .copied()
        .filter(|p| !Path::new(p).exists())
        .collect();
    fs::write(layout.created_record(), created.join("\n"))
        .map_err(io_err("recording the node's fixed paths"))?;
    fs::write(layout.ip_forward_record(), host::read_sysctl(IP_FORWARD)?)
        .map_err(io_err("recording ip_forward"))?;
    fs::write(layout.nft_tables_record(), host::nft_tables()?.join("\n"))
        .map_err(io_err("recording the nftables tables"))?;
    for path in FIXED_PATHS {
        mkdir(Path::new(path))?;
    }
    for dir in [
        layout.config(),
        layout.cni_conf_dir(),
        layout.pki(),
        layout.kubelet_root(),
        layout.containerd_root(),
    ] {
        mkdir(&dir)?;
    }
    host::make_shared_mount(&layout.kubelet_root())?;
    mkdir(Path::new(COMPUTE_STATE_PATH))?;
    host::make_shared_mount(Path::new(COMPUTE_STATE_PATH))?;
    host::create_cgroup_root(CGROUP_ROOT)?;
    host::create_bridge(BRIDGE, &format!("{BRIDGE_IP}/24"))?;
    host::nft_load(&config::forward_guard())
}

/// Writes every configuration file of the node into the run directory; returns the kubelet's
/// sysctl binds (file, `/proc/sys` target).
pub(crate) fn write_configs(
    layout: &Layout,
    ports: &NodePorts,
    pod_logs: &Path,
) -> Result<Vec<(PathBuf, PathBuf)>> {
    let write = |path: PathBuf, text: &str| {
        fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))
    };
    let cfg = layout.config();
    write(
        cfg.join("containerd.toml"),
        &config::containerd_toml(layout),
    )?;
    write(
        layout.cni_conf_dir().join("10-nova-test.conflist"),
        &serde_json::to_string_pretty(&config::cni_conflist(layout)).map_err(|e| {
            Error::Invalid {
                context: "serializing the CNI configuration".into(),
                message: e.to_string(),
            }
        })?,
    )?;
    write(
        cfg.join("kubelet.yaml"),
        &config::yaml(&config::kubelet_config(layout, pod_logs))?,
    )?;
    write(
        cfg.join("kube-proxy.yaml"),
        &config::yaml(&config::kube_proxy_config(
            layout,
            ports.proxy_healthz,
            ports.proxy_metrics,
        ))?,
    )?;
    write(
        cfg.join("Corefile"),
        &config::corefile(layout, ports.dns_health, ports.dns_ready),
    )?;
    write(cfg.join("resolv.conf"), "nameserver 127.0.0.1\n")?;
    let mut binds = Vec::new();
    for (name, target, value) in KUBELET_SYSCTLS {
        let file = cfg.join(format!("sysctl-{name}"));
        write(file.clone(), &format!("{value}\n"))?;
        binds.push((file, PathBuf::from(target)));
    }
    Ok(binds)
}

/// Loopback ports of the node's own health and metrics endpoints.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodePorts {
    pub proxy_healthz: u16,
    pub proxy_metrics: u16,
    pub dns_health: u16,
    pub dns_ready: u16,
}
