//! Faults the real-tier drills inject on the node, undone by the drill and, if it crashed, by
//! [`super::teardown`]: a black hole in an nftables table of the harness's own, and a pod's
//! processes stopped with SIGSTOP.

use super::{CGROUP_ROOT, DRILL_TABLE, host};
use crate::Result;

/// Drops every forwarded packet of a connection opened to `ip` (both directions), as a dead
/// link does: no refusal, no reset, the peer only times out. Meant for a Service's cluster IP:
/// a pod reaches it through the host (the pods' route to the Service range goes through the
/// bridge's address), where the forward hook sees the connection's original destination
/// after kube-proxy rewrote it, so only the clients of that Service lose it.
pub fn black_hole(ip: std::net::Ipv4Addr) -> Result<()> {
    host::nft_load(&format!(
        "table inet {DRILL_TABLE} {{\n  chain forward {{\n    \
         type filter hook forward priority -20; policy accept;\n    \
         ct original ip daddr {ip} drop\n  }}\n}}\n"
    ))
}

/// Removes every [`black_hole`].
pub fn restore_links() -> Result<()> {
    host::nft_delete_table("inet", DRILL_TABLE)
}

/// The PIDs of every process of the pod with uid `uid` on the node (its sandbox and its
/// containers), found by its cgroup (`pod<uid>` below the node's cgroup root).
pub fn pod_pids(uid: &str) -> Vec<u32> {
    host::cgroup_pids_where(CGROUP_ROOT, |dir| {
        dir.components()
            .any(|c| c.as_os_str().to_string_lossy() == format!("pod{uid}"))
    })
}

/// Freezes the processes (SIGSTOP): their sockets stay open and nothing answers.
pub fn stop(pids: &[u32]) {
    pids.iter().for_each(|&pid| host::kill(pid, libc::SIGSTOP));
}

/// Lets [`stop`]ped processes run again (SIGCONT).
pub fn resume(pids: &[u32]) {
    pids.iter().for_each(|&pid| host::kill(pid, libc::SIGCONT));
}
