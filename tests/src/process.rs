//! Child processes of the control plane, and the guarantee that none outlives a test binary.
//!
//! Rust test binaries never run destructors of statics, so a shared control plane cannot rely on
//! `Drop`. Three layers make sure every component dies with the test process, each killing only
//! the PIDs this process spawned:
//!
//! 1. `PR_SET_PDEATHSIG(SIGKILL)`, set in the child between `fork` and `exec`: the kernel kills
//!    the child when its parent *thread* exits. Test threads come and go, so all children are
//!    forked from one dedicated spawner thread that lives as long as the process; the signal
//!    then fires exactly when the process ends, however it ends (even `SIGKILL`).
//! 2. An exit handler (glibc `on_exit`, which sees the exit status) that kills and reaps the
//!    recorded PIDs and removes the state directory, unless the process exits non-zero (a
//!    test failed) or `NOVA_KEEP_CONTROL_PLANE=1` is set.
//! 3. `ControlPlane`'s `Drop`, for control planes that are owned rather than shared; it hands
//!    the state directory to the exit handler, which alone knows whether a test failed.
//!
//! Detached children (the `nova-control-plane up` command) skip layer 1 and start their own
//! session instead, so they survive the command that started them; `down` kills their PIDs.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// How a child relates to the process that starts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Killed by the kernel when this process exits (tests).
    TiedToParent,
    /// Own session, survives this process (the developer command).
    Detached,
}

/// What to run.
#[derive(Clone, Debug)]
pub(crate) struct ChildSpec {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub log: PathBuf,
    pub lifetime: Lifetime,
    /// Extra environment (after the loopback `NO_PROXY` defaults).
    pub env: Vec<(String, String)>,
    /// When non-empty, the child runs in a mount namespace of its own in which each
    /// `(source, target)` file is bind-mounted over `target` (the kubelet's view of the three
    /// kernel sysctls it insists on). `/proc` is made private there first, so nothing
    /// propagates back to the host.
    pub private_binds: Vec<(PathBuf, PathBuf)>,
}

impl ChildSpec {
    /// A plain child: no extra environment, the host's mount namespace.
    pub fn new(
        name: &str,
        program: PathBuf,
        args: Vec<String>,
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Self {
        Self {
            name: name.to_owned(),
            program,
            args,
            log,
            lifetime,
            env: Vec::new(),
            private_binds: Vec::new(),
        }
    }
}

/// A started component.
#[derive(Debug)]
pub(crate) struct Component {
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
    /// How it was started, so a fault drill can start it again the same way.
    pub spec: ChildSpec,
    child: Child,
}

impl Component {
    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.try_wait().ok().flatten();
        if status.is_some() {
            forget(&[self.pid]);
        }
        status
    }

    /// SIGKILLs the process (no chance to drain: what a crash or an OOM kill looks like)
    /// and reaps it.
    pub fn kill(&mut self) -> io::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        forget(&[self.pid]);
        Ok(())
    }
}

type SpawnRequest = (ChildSpec, mpsc::Sender<io::Result<Child>>);

/// Forks every child from one thread that never exits (see the module docs for why).
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let spawned = thread::Builder::new()
            .name("nova-test-harness-spawner".into())
            .spawn(move || {
                for (spec, reply) in rx {
                    // The caller may have given up waiting; nothing to do then.
                    let _ = reply.send(spawn_here(&spec));
                }
            });
        if let Err(err) = spawned {
            // Without the thread every spawn request fails with a clear error below.
            eprintln!("nova-test-harness: cannot start the spawner thread: {err}");
        }
        Mutex::new(tx)
    })
}

fn spawn_here(spec: &ChildSpec) -> io::Result<Child> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.log)?;
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Go honours proxies only for non-loopback hosts, but be explicit: nothing here may
        // leave 127.0.0.1.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("KUBECONFIG")
        .envs(spec.env.iter().map(|(k, v)| (k, v)));
    if !spec.private_binds.is_empty() {
        let binds = spec
            .private_binds
            .iter()
            .map(|(src, dst)| Ok((c_path(src)?, c_path(dst)?)))
            .collect::<io::Result<Vec<_>>>()?;
        // SAFETY (pre_exec): unshare and mount are plain system calls; the CStrings were
        // allocated before the fork.
        unsafe {
            cmd.pre_exec(move || private_mount_namespace(&binds));
        }
    }
    // SAFETY (pre_exec): the closure runs between fork and exec and only calls the
    // async-signal-safe functions prctl, getppid and setsid.
    let parent = std::process::id();
    match spec.lifetime {
        Lifetime::TiedToParent => unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() as u32 != parent {
                    return Err(io::Error::other("parent exited during spawn"));
                }
                Ok(())
            });
        },
        Lifetime::Detached => unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        },
    }
    cmd.spawn()
}

fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other(format!("{} contains a NUL byte", path.display())))
}

/// Runs in the forked child: a new mount namespace, `/proc` private in it, then the binds.
fn private_mount_namespace(binds: &[(std::ffi::CString, std::ffi::CString)]) -> io::Result<()> {
    let check = |r: libc::c_int| {
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    // SAFETY: system calls on NUL-terminated paths that outlive the calls.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        check(libc::mount(
            std::ptr::null(),
            c"/proc".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        for (src, dst) in binds {
            check(libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ))?;
        }
    }
    Ok(())
}

/// Cleanup that must run at exit after the children are killed and before the state
/// directories are removed (the real node unmounts and deletes what it set up).
pub(crate) type ExitHook = Box<dyn FnOnce() + Send>;

/// Registry of tied children for the `atexit` reaper: PIDs, exit hooks and the state dirs to
/// clean.
struct Reaper {
    pids: Vec<u32>,
    hooks: Vec<(u64, ExitHook)>,
    state_dirs: Vec<PathBuf>,
}

static REAPER: OnceLock<Mutex<Reaper>> = OnceLock::new();

fn reaper() -> &'static Mutex<Reaper> {
    REAPER.get_or_init(|| {
        register_exit_handler();
        Mutex::new(Reaper {
            pids: Vec::new(),
            hooks: Vec::new(),
            state_dirs: Vec::new(),
        })
    })
}

/// Set when the process exits with a non-zero status (libtest exits 101 when a test failed,
/// whether it panicked or returned `Err`).
static EXIT_FAILED: AtomicBool = AtomicBool::new(false);

#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe extern "C" {
    /// glibc's `atexit` variant that passes the exit status (not bound by the libc crate).
    fn on_exit(
        function: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn register_exit_handler() {
    extern "C" fn handler(status: libc::c_int, _arg: *mut libc::c_void) {
        if status != 0 {
            EXIT_FAILED.store(true, Ordering::SeqCst);
        }
        reap_at_exit();
    }
    // SAFETY: registering a plain extern "C" fn with a null argument.
    unsafe {
        on_exit(handler, std::ptr::null_mut());
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn register_exit_handler() {
    extern "C" fn handler() {
        reap_at_exit();
    }
    // SAFETY: registering a plain extern "C" fn with atexit.
    unsafe {
        libc::atexit(handler);
    }
}

/// Whether a state directory should survive: asked for, or the process is failing.
pub(crate) fn keep_state() -> bool {
    let asked = std::env::var("NOVA_KEEP_CONTROL_PLANE").is_ok_and(|v| !v.is_empty() && v != "0");
    asked || EXIT_FAILED.load(Ordering::SeqCst)
}

/// Registers a state directory that the exit handler removes unless it is to be kept.
pub(crate) fn clean_at_exit(dir: &Path) {
    if let Ok(mut r) = reaper().lock() {
        r.state_dirs.push(dir.to_path_buf());
    }
}

/// Registers a hook the exit handler runs (once) after killing the children; returns a key
/// for [`take_exit_hook`], which an owner that cleans up earlier calls to run it itself.
pub(crate) fn at_exit(hook: ExitHook) -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut r) = reaper().lock() {
        r.hooks.push((key, hook));
    }
    key
}

/// Removes a registered hook and returns it (so it runs exactly once).
pub(crate) fn take_exit_hook(key: u64) -> Option<ExitHook> {
    let mut r = REAPER.get()?.lock().ok()?;
    let i = r.hooks.iter().position(|(k, _)| *k == key)?;
    Some(r.hooks.remove(i).1)
}

/// Forgets PIDs that were already reaped: a reaped PID may be reused by an unrelated process
/// and must never be signalled again.
pub(crate) fn forget(pids: &[u32]) {
    if let Some(Ok(mut r)) = REAPER.get().map(Mutex::lock) {
        r.pids.retain(|p| !pids.contains(p));
    }
}

fn reap_at_exit() {
    // Another thread may hold the lock while the process exits; PDEATHSIG still covers that.
    let Some(mut reaper) = REAPER.get().and_then(|m| m.try_lock().ok()) else {
        return;
    };
    kill_and_reap(&reaper.pids, Duration::from_secs(2));
    for (_, hook) in reaper.hooks.drain(..) {
        hook();
    }
    for dir in &reaper.state_dirs {
        remove_or_keep(dir);
    }
}

/// Removes a state directory, or says where it was kept.
fn remove_or_keep(dir: &Path) {
    if keep_state() {
        eprintln!(
            "nova-test-harness: control plane state and component logs kept in {}",
            dir.display()
        );
    } else {
        let _ = fs::remove_dir_all(dir);
    }
}

/// Starts a component. Tied children are recorded for the exit handler.
pub(crate) fn spawn(spec: ChildSpec) -> io::Result<Component> {
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .map_err(|_| io::Error::other("spawner lock poisoned"))?
        .send((spec.clone(), tx))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    let child = rx
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))??;
    let pid = child.id();
    if spec.lifetime == Lifetime::TiedToParent
        && let Ok(mut r) = reaper().lock()
    {
        r.pids.push(pid);
    }
    Ok(Component {
        name: spec.name.clone(),
        pid,
        log: spec.log.clone(),
        spec,
        child,
    })
}

/// Sends SIGTERM to each PID, waits up to `grace` for them to go, then SIGKILLs the rest, and
/// reaps those that are our children. Only the given PIDs are ever signalled.
pub(crate) fn kill_and_reap(pids: &[u32], grace: Duration) {
    for &pid in pids {
        signal(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|&p| !gone(p)).collect();
        if alive.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for pid in alive {
                signal(pid, libc::SIGKILL);
                reap(pid, true);
            }
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` to one PID this process spawned.
pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill on a PID we spawned (or recorded) ourselves.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Reaps `pid` if it is our child; returns true once it no longer runs.
fn reap(pid: u32, block: bool) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    let flags = if block { 0 } else { libc::WNOHANG };
    let mut status = 0;
    // SAFETY: waitpid on a single PID.
    let r = unsafe { libc::waitpid(pid, &mut status, flags) };
    r == pid
}

/// True once `pid` has exited: reaped if it was our child, or no longer signalable.
pub(crate) fn gone(pid: u32) -> bool {
    if reap(pid, false) {
        return true;
    }
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 only checks for existence.
    let exists = unsafe { libc::kill(p, 0) } == 0;
    if !exists {
        return true;
    }
    // A zombie that is not our child (detached mode) counts as gone.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// The last `lines` lines of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
