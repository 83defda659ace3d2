//! `nova-control-plane up|down|status|serve|pinned`: a control plane a person can keep running.
//!
//! `up` starts the same control plane the tests use, detached from this process, records the
//! PIDs in the state directory and prints `export KUBECONFIG=...` on stdout (everything else
//! goes to stderr, so `eval "$(nova-control-plane up)"` works). `down` kills exactly the
//! recorded PIDs, after checking each still runs the binary that was started. `status` and
//! `down` look in the state directory and in its `light/` subdirectory, where
//! `scripts/run.sh --no-openstack` keeps its control plane, so both find either without
//! `NOVA_DEV_STATE` set by hand.
//!
//! `serve` runs in the foreground instead, for the main job: the control plane with the real
//! node (which cannot outlive the process holding its lock), optionally the real OpenStack and
//! the simulated operators, until SIGINT or SIGTERM, when everything is torn down. It prints
//! `export KUBECONFIG=...` and then `ready` on stdout once all of it is up.
//!
//! `pinned` prints the digest-pinned reference of a locally built image.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use nova_test_harness::{ControlPlane, Lifetime, Options, testbin_dir};

#[derive(Parser)]
#[command(about = "Run the test control plane in the background for manual use")]
struct Cli {
    /// State directory (certificates, etcd data, logs, PIDs).
    #[arg(long, env = "NOVA_DEV_STATE", global = true)]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the control plane (fresh state) and leave it running.
    Up,
    /// Stop the processes recorded by `up`.
    Down,
    /// Show whether the recorded processes run and the API server is ready.
    Status,
    /// Run the control plane with the real node in the foreground until SIGINT/SIGTERM.
    Serve {
        /// Also deploy the real OpenStack of this release (MariaDB, RabbitMQ, memcached,
        /// Keystone, Placement) and run the simulated MariaDB, RabbitMQ and External Secrets
        /// operators against it.
        #[arg(long)]
        openstack: Option<String>,
        /// With --openstack: write the Keystone `nova` user's password (generated per
        /// deployment, kept only in Secrets) into this Secret, NAMESPACE/NAME, for a Nova's
        /// spec.serviceUser.secretRef.
        #[arg(long, requires = "openstack")]
        service_user_secret: Option<String>,
        /// Install only the other operators' CRDs, leaving the Nova and NovaCompute CRDs to
        /// the chart, as on a cluster the operator was never installed on.
        #[arg(long)]
        without_operator_crds: bool,
    },
    /// Print the digest-pinned reference (`repository@sha256:…`) of a locally built image
    /// known by its tag: the reference a CR names so its pods run with `IfNotPresent`.
    Pinned {
        /// The image's tag reference, e.g. ghcr.io/c5c3/nova:2026.1.
        reference: String,
    },
}

const PIDS_FILE: &str = "pids";
/// The subdirectory of the state directory where `scripts/run.sh --no-openstack` keeps its
/// control plane (`up` there, beside `run/` and the full mode's `serve/`).
const LIGHT_SUBDIR: &str = "light";

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let dir = cli.state_dir.unwrap_or_else(default_state_dir);
    let result = match cli.command {
        Command::Up => up(&dir).await,
        Command::Down => down_all(&dir),
        Command::Status => status_all(&dir).await,
        Command::Serve {
            openstack,
            service_user_secret,
            without_operator_crds,
        } => {
            let crd_dirs = match without_operator_crds {
                true => vec![nova_test_harness::third_party_dir()],
                false => nova_test_harness::default_crd_dirs(),
            };
            serve(
                &dir,
                openstack.as_deref(),
                service_user_secret.as_deref(),
                crd_dirs,
            )
            .await
        }
        Command::Pinned { reference } => nova_test_harness::images::pinned(&reference)
            .map(|pinned| {
                println!("{pinned}");
                ExitCode::SUCCESS
            })
            .map_err(|e| e.to_string()),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("nova-control-plane: {message}");
            ExitCode::FAILURE
        }
    }
}

fn default_state_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/nova-operator-dev")
}

/// Where `status` and `down` look: the state directory, then the light mode's under it.
fn searched_dirs(dir: &Path) -> [PathBuf; 2] {
    [dir.to_path_buf(), dir.join(LIGHT_SUBDIR)]
}

/// The command that stops the control plane of `dir`: plain `down` finds the default state
/// directory and the light mode's under it; any other needs its `NOVA_DEV_STATE`.
fn down_command(dir: &Path) -> String {
    if searched_dirs(&default_state_dir()).iter().any(|d| d == dir) {
        "tests/control-plane.sh down".to_owned()
    } else {
        format!(
            "NOVA_DEV_STATE={} tests/control-plane.sh down",
            dir.display()
        )
    }
}

/// A process recorded by `up`.
struct Recorded {
    name: String,
    pid: u32,
    exe: PathBuf,
}

impl Recorded {
    /// Running, and still the binary we started (a reused PID is someone else's process).
    fn running(&self) -> bool {
        std::fs::read_link(format!("/proc/{}/exe", self.pid)).is_ok_and(|exe| exe == self.exe)
            && !zombie(self.pid)
    }
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

fn read_pids(dir: &Path) -> Result<Vec<Recorded>, String> {
    let path = dir.join(PIDS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut parts = line.splitn(3, ' ');
            match (parts.next(), parts.next().map(str::parse), parts.next()) {
                (Some(name), Some(Ok(pid)), Some(exe)) => Ok(Recorded {
                    name: name.to_owned(),
                    pid,
                    exe: PathBuf::from(exe),
                }),
                _ => Err(format!("malformed line in {}: {line:?}", path.display())),
            }
        })
        .collect()
}

async fn up(dir: &Path) -> Result<ExitCode, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let recorded = read_pids(dir)?;
    if recorded.iter().any(Recorded::running) {
        eprintln!(
            "nova-control-plane: already running (state in {}); `down` first for a fresh one",
            dir.display()
        );
        println!(
            "export KUBECONFIG={}",
            dir.join("admin.kubeconfig").display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    wipe_state_dir(dir)?;
    let options = Options {
        state_dir: Some(dir.to_path_buf()),
        lifetime: Lifetime::Detached,
        ..Options::default()
    };
    let testbin = options.testbin.clone();
    let cp = ControlPlane::start_with(options)
        .await
        .map_err(|e| e.to_string())?;
    let kubeconfig = cp.kubeconfig_path().to_path_buf();
    let server = cp.server_url().to_owned();
    let pids = cp.detach();
    let lines: String = pids
        .iter()
        .map(|(name, pid)| {
            let exe = std::fs::canonicalize(testbin.join(name)).unwrap_or(testbin.join(name));
            format!("{name} {pid} {}\n", exe.display())
        })
        .collect();
    let pids_path = dir.join(PIDS_FILE);
    std::fs::write(&pids_path, lines)
        .map_err(|e| format!("writing {}: {e}", pids_path.display()))?;
    eprintln!("nova-control-plane: API server {server}");
    eprintln!(
        "nova-control-plane: state in {}, component logs in {}",
        dir.display(),
        dir.join("logs").display()
    );
    eprintln!("nova-control-plane: stop it with `{}`", down_command(dir));
    println!("export KUBECONFIG={}", kubeconfig.display());
    Ok(ExitCode::SUCCESS)
}

async fn serve(
    dir: &Path,
    openstack: Option<&str>,
    service_user_secret: Option<&str>,
    crd_dirs: Vec<PathBuf>,
) -> Result<ExitCode, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if read_pids(dir)?.iter().any(Recorded::running) {
        return Err(format!(
            "a control plane from `up` runs with state in {}; `down` it first",
            dir.display()
        ));
    }
    wipe_state_dir(dir)?;
    let cp = ControlPlane::start_with(Options {
        state_dir: Some(dir.to_path_buf()),
        real_node: true,
        crd_dirs,
        ..Options::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    eprintln!(
        "nova-control-plane: API server {}, real node up; component logs in {}",
        cp.server_url(),
        dir.join("logs").display()
    );
    let mut simulated = None;
    if let Some(release) = openstack {
        eprintln!(
            "nova-control-plane: deploying OpenStack {release} on the real node (about 2 minutes)"
        );
        let os = nova_test_harness::openstack::OpenStack::deploy(&cp, release)
            .await
            .map_err(|e| e.to_string())?;
        eprintln!(
            "nova-control-plane: OpenStack {release} answered in {:.0?}; starting the SIMULATED MariaDB, RabbitMQ and External Secrets operators",
            os.deployed_in
        );
        simulated = Some(nova_test_harness::simulated::start(&os).map_err(|e| e.to_string())?);
        if let Some(target) = service_user_secret {
            let (namespace, name) = target
                .split_once('/')
                .ok_or_else(|| format!("--service-user-secret {target:?} is not NAMESPACE/NAME"))?;
            let client = cp.client().map_err(|e| e.to_string())?;
            os.write_service_user_secret(&client, namespace, name)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    println!("export KUBECONFIG={}", cp.kubeconfig_path().display());
    println!("ready");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("listening for SIGTERM: {e}"))?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    eprintln!("nova-control-plane: stopping (simulated operators, OpenStack, node, control plane)");
    drop(simulated);
    drop(cp);
    Ok(ExitCode::SUCCESS)
}

/// What `scripts/run.sh` keeps under the default state directory (its files, the light mode's
/// control plane, the full mode's): not part of a control plane's own state there, so `up`
/// neither counts nor wipes them (a user who ran the main job first can still `up`).
const RUN_SH_SUBDIRS: [&str; 3] = ["run", LIGHT_SUBDIR, "serve"];

/// Removes a previous run's state, but only from a directory that is ours (or empty apart from
/// [`RUN_SH_SUBDIRS`]).
fn wipe_state_dir(dir: &Path) -> Result<(), String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let entries: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !RUN_SH_SUBDIRS.iter().any(|keep| e.file_name() == *keep))
        .map(|e| e.path())
        .collect();
    let ours = dir.join(".nova-control-plane").exists() || entries.is_empty();
    if !ours {
        return Err(format!(
            "{} exists and is not a control-plane state directory; choose another --state-dir",
            dir.display()
        ));
    }
    for path in entries {
        let removed = if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| format!("removing old state {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Stops every control plane recorded in the searched directories.
fn down_all(dir: &Path) -> Result<ExitCode, String> {
    let mut found = false;
    for dir in searched_dirs(dir) {
        if dir.join(PIDS_FILE).exists() {
            found = true;
            down(&dir)?;
        }
    }
    if !found {
        let [base, light] = searched_dirs(dir);
        eprintln!(
            "nova-control-plane: nothing to stop (no PIDs in {} or {})",
            base.display(),
            light.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn down(dir: &Path) -> Result<ExitCode, String> {
    let recorded = read_pids(dir)?;
    let running: Vec<&Recorded> = recorded.iter().filter(|r| r.running()).collect();
    for r in &recorded {
        if !r.running() {
            eprintln!(
                "nova-control-plane: {} (pid {}) was not running",
                r.name, r.pid
            );
        }
    }
    // Reverse start order: clients (kwok, scheduler, controller-manager) before the API server
    // and etcd, so nothing logs connection errors on the way down.
    for r in running.iter().rev() {
        stop(r);
    }
    let pids_path = dir.join(PIDS_FILE);
    if pids_path.exists() {
        std::fs::remove_file(&pids_path)
            .map_err(|e| format!("removing {}: {e}", pids_path.display()))?;
    }
    eprintln!(
        "nova-control-plane: stopped {} processes; logs stay in {}",
        running.len(),
        dir.join("logs").display()
    );
    Ok(ExitCode::SUCCESS)
}

fn stop(r: &Recorded) {
    let Ok(pid) = libc::pid_t::try_from(r.pid) else {
        return;
    };
    // SAFETY: kill on a PID verified to run the binary we started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    for _ in 0..100 {
        if !r.running() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if r.running() {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Reports every control plane recorded in the searched directories; fails when none is
/// recorded or one is not healthy.
async fn status_all(dir: &Path) -> Result<ExitCode, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut healthy = None;
    for dir in searched_dirs(dir) {
        if read_pids(&dir)?.is_empty() {
            continue;
        }
        let this = status(&dir).await?;
        healthy = Some(healthy.unwrap_or(true) && this);
    }
    if healthy.is_none() {
        let [base, light] = searched_dirs(dir);
        eprintln!(
            "nova-control-plane: not running (no PIDs in {} or {})",
            base.display(),
            light.display()
        );
    }
    Ok(if healthy == Some(true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Reports the control plane recorded in `dir`: true when every process runs and the API
/// server is ready.
async fn status(dir: &Path) -> Result<bool, String> {
    let recorded = read_pids(dir)?;
    eprintln!("control plane with state in {}", dir.display());
    let mut all_running = true;
    for r in &recorded {
        let running = r.running();
        all_running &= running;
        eprintln!(
            "{:<24} pid {:<8} {}",
            r.name,
            r.pid,
            if running { "running" } else { "NOT RUNNING" }
        );
    }
    let kubeconfig = dir.join("admin.kubeconfig");
    let ready = api_ready(&kubeconfig).await;
    eprintln!(
        "{:<24} {}",
        "kube-apiserver /readyz",
        if ready { "ok" } else { "NOT READY" }
    );
    eprintln!(
        "logs in {} (testbin {})",
        dir.join("logs").display(),
        testbin_dir().display()
    );
    println!("export KUBECONFIG={}", kubeconfig.display());
    Ok(all_running && ready)
}

async fn api_ready(kubeconfig: &Path) -> bool {
    let Ok(kc) = kube::config::Kubeconfig::read_from(kubeconfig) else {
        return false;
    };
    let Ok(mut config) =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await
    else {
        return false;
    };
    config.proxy_url = None;
    config.connect_timeout = Some(Duration::from_secs(2));
    let Ok(client) = kube::Client::try_from(config) else {
        return false;
    };
    let Ok(req) = hyper::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    client
        .request_text(req)
        .await
        .is_ok_and(|body| body.trim() == "ok")
}
