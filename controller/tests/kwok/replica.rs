//! nova-controller as the real binary, one process per replica with leader election, and
//! its own metrics read over HTTP.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

/// A free loopback port (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A controller process with its metrics port and its log file.
pub struct Replica {
    pub identity: String,
    pub child: Child,
    pub metrics: u16,
    pub log: PathBuf,
}

impl Replica {
    /// Starts a replica competing for the Lease `lease` in `lease_namespace`, watching `scope`
    /// (every namespace when empty), logging at debug level into `<dir>/<identity>.log` (a
    /// pipe nobody drains would block it); `extra` flags go last.
    pub fn start(
        identity: &str,
        kubeconfig: &Path,
        scope: &str,
        lease: (&str, &str),
        dir: &Path,
        extra: &[String],
    ) -> Self {
        Self::start_with_env(identity, kubeconfig, scope, lease, dir, extra, &[])
    }

    /// Like [`start`](Self::start), with `env` added to the process's environment.
    pub fn start_with_env(
        identity: &str,
        kubeconfig: &Path,
        scope: &str,
        (lease_namespace, lease): (&str, &str),
        dir: &Path,
        extra: &[String],
        env: &[(&str, &str)],
    ) -> Self {
        let metrics = free_port();
        let log = dir.join(format!("{identity}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_nova-controller"))
            .args(["--kubeconfig", &kubeconfig.display().to_string()])
            .arg(format!("--namespace={scope}"))
            .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
            .args([
                "--health-probe-bind-address",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .args([
                "--leader-election-namespace",
                lease_namespace,
                "--leader-election-id",
                lease,
            ])
            .args(extra)
            .env("POD_NAME", identity)
            .envs(env.iter().copied())
            .env("RUST_LOG", "debug")
            .stdout(Stdio::from(file.try_clone().expect("log file")))
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .expect("start nova-controller");
        Self {
            identity: identity.to_owned(),
            child,
            metrics,
            log,
        }
    }

    /// The value of one un-labelled or summed metric of this replica, 0 when absent.
    pub async fn metric(&self, name: &str) -> f64 {
        metric(self.metrics, name).await
    }

    /// Sends `signal` (`kill`'s name for it: `STOP`, `CONT`, `TERM`) to the replica.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("the replica runs");
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid}: {status}");
    }

    /// Waits up to `timeout` for the replica to exit by itself; returns how it exited and
    /// everything it logged.
    pub async fn exit(
        mut self,
        timeout: std::time::Duration,
    ) -> (std::process::ExitStatus, String) {
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} still runs after {timeout:?}", self.identity))
            .expect("wait for the replica");
        (status, std::fs::read_to_string(&self.log).expect("log"))
    }

    /// SIGKILLs the replica (it cannot release its lease) and returns everything it logged.
    pub async fn kill(mut self) -> String {
        let _ = self.child.kill().await;
        std::fs::read_to_string(&self.log).expect("log")
    }
}

/// The value of one un-labelled or summed metric served on `port`, 0 when absent.
pub async fn metric(port: u16, name: &str) -> f64 {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0.0;
    };
    let request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .is_err()
    {
        return 0.0;
    }
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body).await;
    body.lines()
        .filter(|l| {
            l.starts_with(name)
                && (l[name.len()..].starts_with(' ') || l[name.len()..].starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
