//! The release `nova-controller` binary as a child process, so its CPU time and peak RSS come
//! from /proc/PID of that process alone (the bench's own work is never counted).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The controller process with its metrics port and its log file.
pub struct ControllerProcess {
    child: Child,
    metrics: u16,
    pub log: PathBuf,
}

/// CPU seconds (user + system) and memory (KiB) of a process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
}

impl ControllerProcess {
    /// Starts the controller cluster-wide (no leader election) on `kubeconfig`, its API probes
    /// dialling `probe` and its OpenStack calls to the Services of `routes` routed; under the
    /// command prefix of `NOVA_SCALE_CONTROLLER_WRAPPER` when set (see [`command`]).
    pub fn start(
        kubeconfig: &Path,
        probe: SocketAddr,
        routes: &[(String, SocketAddr)],
        log: PathBuf,
    ) -> Self {
        let metrics = free_port();
        let file = std::fs::File::create(&log).expect("controller log");
        let routes: Vec<String> = routes.iter().map(|(s, a)| format!("{s}={a}")).collect();
        let wrapper = std::env::var("NOVA_SCALE_CONTROLLER_WRAPPER").ok();
        let child = command(wrapper.as_deref())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--leader-elect", "false"])
            .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
            .args([
                "--health-probe-bind-address",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .args(["--health-check-address", &probe.to_string()])
            .env("NOVA_CONTROLLER_SERVICE_ROUTES", routes.join(","))
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(file.try_clone().expect("controller log")))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("start nova-controller");
        Self {
            child,
            metrics,
            log,
        }
    }

    /// Fails once the process exited, naming its log.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!(
                "nova-controller exited ({status}); see {}",
                self.log.display()
            )),
            _ => Ok(()),
        }
    }

    /// CPU time and memory so far.
    pub fn usage(&self) -> Usage {
        usage_of(self.child.id())
    }

    /// The text of the controller's /metrics.
    pub async fn metrics(&self) -> String {
        super::prometheus::scrape(self.metrics).await
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The controller's command: the release binary, or the binary behind `wrapper`, a
/// whitespace-separated command prefix that must run it in its own process (`env
/// LD_PRELOAD=... DUMP_HEAPTRACK_OUTPUT=...` for heaptrack, `valgrind ...`), so /proc and the
/// kill at the end still reach the controller itself.
fn command(wrapper: Option<&str>) -> Command {
    let binary = env!("CARGO_BIN_EXE_nova-controller");
    let mut words = wrapper.unwrap_or_default().split_whitespace();
    match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(binary);
            command
        }
        None => Command::new(binary),
    }
}

/// CPU time and memory of process `pid` so far, from /proc/PID/stat (utime + stime) and /proc/PID/status
/// (VmRSS, VmHWM).
pub fn usage_of(pid: u32) -> Usage {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Usage {
        cpu_seconds: (ticks(11) + ticks(12)) as f64 / clock_ticks(),
        rss_kib: kib("VmRSS:"),
        peak_rss_kib: kib("VmHWM:"),
    }
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when it cannot be asked).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}
