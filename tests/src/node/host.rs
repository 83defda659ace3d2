//! What the real node changes on the host, and how each change is undone: the bridge and the
//! forward guard, `ip_forward`, the cgroup root, mounts, and leftover processes. Every function
//! here is idempotent, because the same teardown runs at the end of a run and, after a crash,
//! at the start of the next one.

use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Error, Result, io_err};

/// Runs a host command (ip, nft), failing with its stderr.
pub(crate) fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Result<()> {
    let context = format!("running {program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(context.clone()))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(io_err(context.clone()))?;
    }
    let out = child.wait_with_output().map_err(io_err(context.clone()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Invalid {
            context,
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// Whether a network link exists.
pub(crate) fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Creates the pod bridge with its address (the node IP) before anything binds to it.
pub(crate) fn create_bridge(name: &str, cidr: &str) -> Result<()> {
    run("ip", &["link", "add", name, "type", "bridge"], None)?;
    run("ip", &["addr", "add", cidr, "dev", name], None)?;
    run("ip", &["link", "set", name, "up"], None)
}

/// Deletes a link if it exists.
pub(crate) fn delete_link(name: &str) -> Result<()> {
    match run("ip", &["link", "del", name], None) {
        // Gone before or while it was deleted (a pod's veth goes with its namespace).
        Err(_) if !link_exists(name) => Ok(()),
        result => result,
    }
}

/// The ports of the bridge `name` (`/sys/class/net/<name>/brif`); none when there is no such
/// bridge.
pub(crate) fn bridge_ports(name: &str) -> Vec<String> {
    std::fs::read_dir(format!("/sys/class/net/{name}/brif"))
        .map(|ports| {
            ports
                .flatten()
                .map(|p| p.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Loads an nftables ruleset (`nft -f -`).
pub(crate) fn nft_load(ruleset: &str) -> Result<()> {
    run("nft", &["-f", "-"], Some(ruleset))
}

/// Deletes an nftables table if it exists.
pub(crate) fn nft_delete_table(family: &str, table: &str) -> Result<()> {
    if run("nft", &["list", "table", family, table], None).is_ok() {
        run("nft", &["delete", "table", family, table], None)?;
    }
    Ok(())
}

/// Runs a host command and returns its stdout.
pub(crate) fn output(program: &str, args: &[&str]) -> Result<String> {
    let context = format!("running {program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(io_err(context.clone()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Invalid {
            context,
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// `family table` of every nftables table (iptables-nft's tables among them).
pub(crate) fn nft_tables() -> Result<Vec<String>> {
    Ok(output("nft", &["list", "tables"])?
        .lines()
        .filter_map(|l| l.strip_prefix("table "))
        .map(str::to_owned)
        .collect())
}

/// Removes what the kubelet puts into the iptables-nft tables (`KUBE-FIREWALL`, the
/// `KUBE-KUBELET-CANARY` and `KUBE-IPTABLES-HINT` chains and the jumps to them): a table that
/// did not exist before the node (not in `before`) is deleted whole; in one that did, only the
/// rules jumping to a `KUBE-` chain and those chains go.
pub(crate) fn remove_kube_chains(before: &[String]) -> Result<()> {
    for table in nft_tables()? {
        let Some((family, name)) = table.split_once(' ') else {
            continue;
        };
        if family != "ip" && family != "ip6" || name == "kube-proxy" {
            continue;
        }
        if !before.contains(&table) {
            run("nft", &["delete", "table", family, name], None)?;
            continue;
        }
        let listing = output("nft", &["-a", "list", "table", family, name])?;
        let mut chain = String::new();
        let mut kube_chains = Vec::new();
        for line in listing.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("chain ") {
                chain = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                if chain.starts_with("KUBE-") {
                    kube_chains.push(chain.clone());
                }
            } else if (line.contains("jump KUBE-") || line.contains("goto KUBE-"))
                && let Some((_, handle)) = line.rsplit_once("# handle ")
            {
                run(
                    "nft",
                    &[
                        "delete",
                        "rule",
                        family,
                        name,
                        &chain,
                        "handle",
                        handle.trim(),
                    ],
                    None,
                )?;
            }
        }
        for chain in &kube_chains {
            run("nft", &["flush", "chain", family, name, chain], None)?;
        }
        for chain in &kube_chains {
            run("nft", &["delete", "chain", family, name, chain], None)?;
        }
    }
    Ok(())
}

/// Reads one sysctl by its `/proc/sys` path.
pub(crate) fn read_sysctl(path: &str) -> Result<String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(io_err(format!("reading {path}")))
}

/// Writes one sysctl.
pub(crate) fn write_sysctl(path: &str, value: &str) -> Result<()> {
    fs::write(path, value).map_err(io_err(format!("writing {path}")))
}

/// The mount points of every cgroup hierarchy (v1 controllers, named ones, the unified one).
pub(crate) fn cgroup_hierarchies() -> Vec<PathBuf> {
    mounts()
        .into_iter()
        .filter(|m| m.fstype == "cgroup" || m.fstype == "cgroup2")
        .map(|m| m.target)
        .collect()
}

/// Creates `root` in every hierarchy; the new cpuset gets the root's CPUs and memory nodes
/// (an empty cpuset takes no tasks).
pub(crate) fn create_cgroup_root(root: &str) -> Result<()> {
    for hierarchy in cgroup_hierarchies() {
        let dir = hierarchy.join(root.trim_start_matches('/'));
        fs::create_dir_all(&dir).map_err(io_err(format!("creating cgroup {}", dir.display())))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let parent = hierarchy.join(file);
            if parent.exists() && dir.join(file).exists() {
                let value = fs::read_to_string(&parent)
                    .map_err(io_err(format!("reading {}", parent.display())))?;
                fs::write(dir.join(file), value.trim())
                    .map_err(io_err(format!("writing {}", dir.join(file).display())))?;
            }
        }
    }
    Ok(())
}

/// Every cgroup directory below `root` in every hierarchy, deepest first.
fn cgroup_dirs(root: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for hierarchy in cgroup_hierarchies() {
        collect_dirs(&hierarchy.join(root.trim_start_matches('/')), &mut dirs);
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    dirs
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    if !dir.is_dir() {
        return;
    }
    out.push(dir.to_path_buf());
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), out);
            }
        }
    }
}

/// PIDs of every process in a cgroup below `root` (the pods' containers).
pub(crate) fn cgroup_pids(root: &str) -> Vec<u32> {
    cgroup_pids_where(root, |_| true)
}

/// PIDs of every process in the cgroups below `root` whose directory passes `keep`.
pub(crate) fn cgroup_pids_where(root: &str, keep: impl Fn(&Path) -> bool) -> Vec<u32> {
    let mut pids: Vec<u32> = cgroup_dirs(root)
        .iter()
        .filter(|d| keep(d))
        .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
        .flat_map(|s| {
            s.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Kills every process in the cgroup tree and removes the tree, waiting up to `grace`.
pub(crate) fn remove_cgroup_root(root: &str, grace: Duration) -> Result<()> {
    let deadline = Instant::now() + grace;
    loop {
        let pids = cgroup_pids(root);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            kill(pid, libc::SIGKILL);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("the processes in cgroup {root} to exit"),
                after: grace,
                detail: String::new(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for dir in cgroup_dirs(root) {
        // A cgroup whose last task just exited can be busy for a moment.
        let mut tries = 0;
        while let Err(e) = fs::remove_dir(&dir) {
            tries += 1;
            if tries > 40 || e.kind() == std::io::ErrorKind::NotFound {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(io_err(format!("removing cgroup {}", dir.display()))(e));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

pub(crate) fn kill(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill on a PID read from our own cgroup or matched by its executable.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// Kills every process whose executable is one of `exes` (the node's binaries in the cache
/// directory, so never a process of anyone else) and waits for them to go.
pub(crate) fn kill_by_executable(exes: &[PathBuf], grace: Duration) {
    let matching = || -> Vec<u32> {
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exes.contains(&exe))
            })
            .collect()
    };
    let deadline = Instant::now() + grace;
    loop {
        let pids = matching();
        if pids.is_empty() || Instant::now() >= deadline {
            return;
        }
        for pid in pids {
            kill(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone)]
pub(crate) struct Mount {
    pub target: PathBuf,
    pub fstype: String,
}

/// The mounts of this process's mount namespace.
pub(crate) fn mounts() -> Vec<Mount> {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            Some(Mount {
                target: PathBuf::from(unescape_mount_path(fields.get(4)?)),
                fstype: (*fields.get(sep + 1)?).to_owned(),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as three octal digits.
fn unescape_mount_path(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len() + 1
            && let Some(v) = s
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Detaches every mount at or below any of `prefixes`, deepest first (repeatedly, since a path
/// can be mounted over more than once).
pub(crate) fn unmount_below(prefixes: &[PathBuf]) -> Result<()> {
    for _ in 0..8 {
        let mut targets: Vec<PathBuf> = mounts()
            .into_iter()
            .map(|m| m.target)
            .filter(|t| prefixes.iter().any(|p| t.starts_with(p)))
            .collect();
        if targets.is_empty() {
            return Ok(());
        }
        targets.sort_by_key(|t| std::cmp::Reverse(t.components().count()));
        targets.dedup();
        for target in targets {
            let path = CString::new(target.as_os_str().as_bytes()).map_err(|_| Error::Invalid {
                context: "unmounting".into(),
                message: format!("{} contains a NUL byte", target.display()),
            })?;
            // SAFETY: umount2 on a NUL-terminated path.
            unsafe {
                libc::umount2(path.as_ptr(), libc::MNT_DETACH);
            }
        }
    }
    let left: Vec<String> = mounts()
        .into_iter()
        .filter(|m| prefixes.iter().any(|p| m.target.starts_with(p)))
        .map(|m| m.target.display().to_string())
        .collect();
    if left.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid {
            context: "unmounting the real node's mounts".into(),
            message: format!("still mounted: {}", left.join(", ")),
        })
    }
}

/// Makes `dir` a mount point of its own with shared propagation: so the mounts the kubelet
/// makes for volumes in its private mount namespace reach containerd in the host's, and so a
/// `Bidirectional` volume mount of `dir` is allowed.
pub(crate) fn make_shared_mount(dir: &Path) -> Result<()> {
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(|_| Error::Invalid {
        context: "sharing a mount".into(),
        message: format!("{} contains a NUL byte", dir.display()),
    })?;
    let check = |r: libc::c_int, what: &str| {
        if r == 0 {
            Ok(())
        } else {
            Err(io_err(format!("{what} {}", dir.display()))(
                std::io::Error::last_os_error(),
            ))
        }
    };
    // SAFETY: mount(2) on a NUL-terminated path that outlives the calls.
    unsafe {
        check(
            libc::mount(
                path.as_ptr(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ),
            "bind-mounting",
        )?;
        check(
            libc::mount(
                std::ptr::null(),
                path.as_ptr(),
                std::ptr::null(),
                libc::MS_SHARED | libc::MS_REC,
                std::ptr::null(),
            ),
            "making shared",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path("/tail\\"), "/tail\\");
    }
}
