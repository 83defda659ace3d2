//! The development commands work the first time (issue 26, item 4).
//!
//! - `scripts/run.sh --no-openstack` brings the sample Nova to Ready (the other operators
//!   SIMULATED, statuses only), prints the KUBECONFIG export and the kubectl path plainly, and
//!   leaves no process behind when it ends.
//! - Ctrl-C while its output goes through a pipe the Ctrl-C closed (`| tee`) still tears
//!   everything down: the teardown's writes meet a closed pipe, which used to kill the script by
//!   SIGPIPE and leave etcd, the API server, the controller manager, the scheduler and kwok.
//! - `status` and `down` find the light mode's control plane without `NOVA_DEV_STATE`.
//!
//! "No process behind" is checked by environment: every process the script starts (and the
//! control plane `up` detaches into its own session) inherits the `NOVA_DEV_STATE` the script
//! exports, which names this test's own temporary directory.
//!
//! The two run.sh tests run the script as a user does, its `cargo build` included: seconds on
//! a warm target directory, minutes on a cold one (bounded by [`BUILD_AND_START`]). They take
//! turns ([`ONE_RUN`]): each runs a control plane and both binaries on a 2-core machine.

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nova_test_harness::local_webhook::ADMISSION_MATCH_CONDITION;

/// The script's build (cold: several minutes) and start, until its components run.
const BUILD_AND_START: Duration = Duration::from_secs(1800);
/// The run.sh tests take turns.
static ONE_RUN: Mutex<()> = Mutex::new(());
/// How long `run.sh`'s teardown may take: its processes get 120 s to stop before it kills
/// them, then the control plane's `down` runs.
const TEARDOWN: Duration = Duration::from_secs(180);
/// What the light mode logs once the control plane, the webhook and the controller run.
const ALL_STARTED: &str = "applying the sample Nova and its inputs";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// A state root laid out like a user's: `<home>/.cache/nova-operator-dev`, so a command given
/// only `HOME=<home>` finds it the way it finds a user's default one.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().to_path_buf();
        std::fs::create_dir_all(home.join(".cache")).expect("mkdir");
        Home { _dir: dir, home }
    }

    fn state(&self) -> PathBuf {
        self.home.join(".cache/nova-operator-dev")
    }

    /// The light mode's control-plane directory, the `NOVA_DEV_STATE` its processes carry.
    fn light(&self) -> PathBuf {
        self.state().join("light")
    }
}

/// PIDs (with command lines) of live processes whose environment carries
/// `NOVA_DEV_STATE=<light>`: what a run of the light mode in this state left behind.
fn processes_of(light: &Path) -> Vec<(i32, String)> {
    let needle = format!("NOVA_DEV_STATE={}", light.display()).into_bytes();
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if u32::try_from(pid).is_ok_and(|p| p == me) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_slice())
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push((pid, cmdline.trim().to_owned()));
        }
    }
    found
}

/// Fails naming the processes a run left behind, after killing them (by their PIDs) so a failed
/// test leaves nothing running either.
fn assert_nothing_left(light: &Path, output: &str) {
    // The script has exited: a process of it still alive now was left behind.
    let left = processes_of(light);
    for (pid, _) in &left {
        // SAFETY: kill on a PID found above, carrying this test's own state directory.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(
        left.is_empty(),
        "the run left {} processes behind (killed now): {left:#?}\nits output:\n{output}",
        left.len()
    );
}

/// `scripts/run.sh --no-openstack` as a user starts it, in its own process group (as a shell
/// puts a foreground job), without a terminal, its state in `home`.
fn light_mode(home: &Home) -> Command {
    let mut command = Command::new("bash");
    command
        .arg("scripts/run.sh")
        .arg("--no-openstack")
        .current_dir(repo())
        .env("NOVA_DEV_STATE", home.state())
        .env("NOVA_RUN_TIMEOUT", "420")
        .stdin(Stdio::null())
        .process_group(0);
    command
}

/// Waits (bounded) for the script to end; on timeout SIGKILLs its process group and whatever
/// of the run in `light` is left, and fails.
fn wait_bounded(child: &mut Child, timeout: Duration, what: &str, light: &Path) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let group = i32::try_from(child.id()).expect("pid");
            // SAFETY: the process group of the script this test started.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            let _ = child.wait();
            assert_nothing_left(light, "");
            panic!("{what}: the script did not end within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `nova-control-plane` as a user runs it: `HOME` (this test's), no `NOVA_DEV_STATE`; the
/// binaries where the harness finds them for every test.
fn control_plane_command(home: &Home, subcommand: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nova-control-plane"))
        .arg(subcommand)
        .env("HOME", &home.home)
        .env("NOVA_TESTBIN", nova_test_harness::testbin_dir())
        .env_remove("NOVA_DEV_STATE")
        .output()
        .expect("nova-control-plane runs")
}

/// Ctrl-C with the output through `| tee`: the terminal's SIGINT reaches the whole job, tee
/// dies with it and the script's teardown writes into a pipe nobody reads.
#[test]
fn ctrl_c_with_the_output_through_a_closed_pipe_leaves_no_process() {
    let _turn = ONE_RUN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let home = Home::new();
    let (reader, writer) = std::io::pipe().expect("pipe");
    let mut command = light_mode(&home);
    command
        .stdout(writer.try_clone().expect("pipe"))
        .stderr(writer);
    let mut child = command.spawn().expect("run.sh starts");
    // The write end now lives only in the script: the pipe closes when the reader goes.
    drop(command);

    // The reader plays tee: it reads until every component runs, then dies (closing the pipe).
    let (lines, seen) = mpsc::channel::<String>();
    let tee = std::thread::spawn(move || {
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { return };
            let last = line.contains(ALL_STARTED);
            let _ = lines.send(line);
            if last {
                return;
            }
        }
    });
    let mut output = String::new();
    let deadline = Instant::now() + BUILD_AND_START;
    loop {
        match seen.recv_timeout(Duration::from_millis(500)) {
            Ok(line) => {
                output.push_str(&line);
                output.push('\n');
                if line.contains(ALL_STARTED) {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().expect("wait");
                assert_nothing_left(&home.light(), &output);
                panic!("run.sh ended ({status}) before its components ran:\n{output}");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() >= deadline {
            wait_bounded(&mut child, Duration::ZERO, "starting", &home.light());
        }
    }
    tee.join().expect("the reader thread");
    let recorded = std::fs::read_to_string(home.light().join("pids")).unwrap_or_default();
    assert_eq!(
        recorded.lines().count(),
        5,
        "the light mode's control plane records etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok: {recorded:?}"
    );
    assert!(
        processes_of(&home.light()).len() >= 7,
        "the control plane, the webhook and the controller run: {:#?}",
        processes_of(&home.light())
    );

    // Ctrl-C: SIGINT to the foreground job's process group.
    let group = i32::try_from(child.id()).expect("pid");
    // SAFETY: the process group of the script this test started.
    unsafe { libc::kill(-group, libc::SIGINT) };
    // 90 s, shorter than the script's own bound, once ran out with the real tier beside it.
    let status = wait_bounded(&mut child, TEARDOWN, "the teardown", &home.light());
    assert_nothing_left(&home.light(), &output);
    assert_eq!(
        status.signal(),
        None,
        "the script was killed by signal {:?} instead of exiting through its teardown",
        status.signal()
    );
    assert!(
        matches!(status.code(), Some(130 | 141)),
        "Ctrl-C ends the run with 130 (or 141 when a closed pipe came first): {status}"
    );
}

/// Without a terminal the light mode exits 0 once the sample Nova is Ready; on the way it says
/// how to use the cluster, and `status` finds its control plane with nothing but `HOME`.
#[test]
fn the_light_mode_brings_the_sample_nova_to_ready_and_leaves_no_process() {
    let _turn = ONE_RUN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let home = Home::new();
    let log_path = home.home.join("run.out");
    let log = std::fs::File::create(&log_path).expect("log");
    let mut child = light_mode(&home)
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("run.sh starts");
    let read = || std::fs::read_to_string(&log_path).unwrap_or_default();

    // Once everything runs, `status` finds the control plane in <state>/light by itself.
    let deadline = Instant::now() + BUILD_AND_START;
    while !read().contains(ALL_STARTED) {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if Instant::now() >= deadline {
            wait_bounded(&mut child, Duration::ZERO, "starting", &home.light());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    if read().contains(ALL_STARTED) {
        let status = control_plane_command(&home, "status");
        let stdout = String::from_utf8_lossy(&status.stdout);
        assert!(
            status.status.success()
                && stdout.contains(&format!(
                    "export KUBECONFIG={}",
                    home.light().join("admin.kubeconfig").display()
                )),
            "`status` without NOVA_DEV_STATE finds the light mode's control plane: {}\n{stdout}{}",
            status.status,
            String::from_utf8_lossy(&status.stderr)
        );
        registers_the_charts_match_condition(&home);
    }

    let status = wait_bounded(
        &mut child,
        Duration::from_secs(600),
        "the light mode",
        &home.light(),
    );
    let output = read();
    assert_nothing_left(&home.light(), &output);
    assert!(
        status.success(),
        "the light mode ends 0 once the sample Nova is Ready: {status}\n{output}"
    );
    let kubeconfig = format!(
        "export KUBECONFIG={}",
        home.light().join("admin.kubeconfig").display()
    );
    let lines: Vec<&str> = output.lines().collect();
    for (what, present) in [
        (
            "the sample Nova Ready",
            output.contains("the sample Nova is Ready"),
        ),
        (
            "the statuses SIMULATED",
            output.contains(
                "SIMULATED mariadb-operator (status only, no MariaDB runs): database openstack/",
            ) && output.contains("SIMULATED nova-api on 127.0.0.1:"),
        ),
        (
            "the export line plainly, a line of its own",
            lines.contains(&kubeconfig.as_str()),
        ),
        (
            "the kubectl path plainly",
            lines
                .iter()
                .any(|l| l.ends_with("/kubectl get novas,novacomputes -A") && !l.starts_with('[')),
        ),
        ("the build timed", output.contains("cargo took ")),
        ("the teardown", output.contains("] stopped")),
    ] {
        assert!(present, "the output shows {what}:\n{output}");
    }
}

/// The webhook configurations the light mode registered call the webhook only when the chart's
/// do ([`ADMISSION_MATCH_CONDITION`]), so a finalizer's removal does not depend on it here either.
fn registers_the_charts_match_condition(home: &Home) {
    let got = Command::new(nova_test_harness::testbin_dir().join("kubectl"))
        .args([
            "get",
            "mutatingwebhookconfiguration/nova-operator",
            "validatingwebhookconfiguration/nova-operator",
            "-o",
            "json",
        ])
        .env("KUBECONFIG", home.light().join("admin.kubeconfig"))
        .output()
        .expect("kubectl runs");
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&got.stdout).expect("JSON");
    let (name, expression) = ADMISSION_MATCH_CONDITION;
    let want = serde_json::json!([{"name": name, "expression": expression}]);
    let hooks: Vec<&serde_json::Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["webhooks"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(hooks.len(), 4, "four webhooks: {list}");
    for hook in hooks {
        assert_eq!(hook["matchConditions"], want, "{}", hook["name"]);
    }
}

/// `status` and `down` find a control plane in `<state>/light` with only `HOME`, `up` names the
/// command that stops it, and a plain `up` beside it works although the main job's directories
/// (`run/`, `light/`) are in the default state directory, and keeps them.
#[test]
fn status_and_down_find_the_light_modes_control_plane_without_nova_dev_state() {
    let home = Home::new();
    let _stop = StopOnDrop(&home);
    let up = Command::new(env!("CARGO_BIN_EXE_nova-control-plane"))
        .arg("up")
        .env("HOME", &home.home)
        .env("NOVA_TESTBIN", nova_test_harness::testbin_dir())
        .env("NOVA_DEV_STATE", home.light())
        .output()
        .expect("up runs");
    let stderr = String::from_utf8_lossy(&up.stderr);
    assert!(up.status.success(), "up: {stderr}");
    assert!(
        stderr.contains("stop it with `tests/control-plane.sh down`"),
        "up names plain `down`, which finds it: {stderr}"
    );
    // The main job's own files beside it, as scripts/run.sh leaves them.
    let kept = home.state().join("run/conditions");
    std::fs::create_dir_all(kept.parent().expect("run/")).expect("mkdir");
    std::fs::write(&kept, "SecretsReady\n").expect("write");
    let plain_up = control_plane_command(&home, "up");
    assert!(
        plain_up.status.success(),
        "a plain up beside the main job's directories: {}",
        String::from_utf8_lossy(&plain_up.stderr)
    );
    assert!(kept.exists(), "up kept the main job's run/");

    let status = control_plane_command(&home, "status");
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "status finds both: {stderr}");
    for dir in [home.state(), home.light()] {
        assert!(
            stderr.contains(&format!("control plane with state in {}\n", dir.display())),
            "status reports {}: {stderr}",
            dir.display()
        );
    }
    let recorded: Vec<(i32, PathBuf)> = [home.state(), home.light()]
        .iter()
        .flat_map(|dir| {
            std::fs::read_to_string(dir.join("pids"))
                .expect("pids")
                .lines()
                .filter_map(|l| {
                    let mut parts = l.splitn(3, ' ');
                    let (_, pid, exe) = (parts.next()?, parts.next()?, parts.next()?);
                    Some((pid.parse().ok()?, PathBuf::from(exe)))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(recorded.len(), 10, "five components each: {recorded:?}");

    let down = control_plane_command(&home, "down");
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert!(
        down.status.success() && stderr.matches("stopped 5 processes").count() == 2,
        "down finds and stops both: {stderr}"
    );
    let left: Vec<&(i32, PathBuf)> = recorded
        .iter()
        .filter(|(pid, exe)| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == *exe)
        })
        .collect();
    assert!(left.is_empty(), "down left {left:?}");
    let status = control_plane_command(&home, "status");
    assert!(!status.status.success(), "status after down reports none");
    assert!(kept.exists(), "down kept the main job's run/");
}

/// Stops the control planes of a `Home` however the test ends (a failed assertion included).
struct StopOnDrop<'a>(&'a Home);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = control_plane_command(self.0, "down");
    }
}
