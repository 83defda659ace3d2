//! The controller at scale, against the test control plane: N Novas with their inputs ready
//! and N/10 NovaCompute pools of 10 kwok nodes each (their OpenStack SIMULATED in-process), all
//! created before the release `nova-controller` starts as a child process; measured: the time
//! until every Nova and pool is Ready, the controller's CPU seconds and peak RSS from /proc,
//! the API requests per Nova while converging and over a steady window, the reconcile
//! histogram and errors from the controller's /metrics; then, in the same run, the same owned
//! objects created by a plain client at the controller's parallelism (the API server's raw
//! time for them), and bursts of Nova creates with and without the real `nova-webhook`.
//!
//! `cargo bench -p nova-controller --bench scale`; environment: `NOVA_SCALE_N` (comma-separated,
//! default `100,500,1000`; `0` runs the webhook bursts alone, on a control plane without Novas,
//! in minutes), `NOVA_SCALE_STEADY_SECONDS` (default 600), `NOVA_SCALE_TIMEOUT_SECONDS` (the
//! convergence wait, default 3600), `NOVA_SCALE_BURST` (creates per burst, default 1000, 0
//! skips the bursts), `NOVA_SCALE_BURST_IN_FLIGHT` (comma-separated creates in flight, default
//! `1,50`: 1 is `kubectl apply -f dir/`, the per-request cost; 50 adds queueing),
//! `NOVA_SCALE_BURST_ROUNDS` (bursts per level and admission, default 2, for the spread),
//! `NOVA_SCALE_RESULTS` (default `controller/bench/results.md`), `NOVA_SCALE_CONTROLLER_WRAPPER`
//! (a command prefix the controller runs under in its own process, e.g. `env
//! LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=<file>` for a
//! heap profile). Each N runs on a control plane of its own. The controller child inherits the
//! environment, so its own variables apply (`NOVA_CONTROLLER_CLIENT_QPS=0` lifts the client
//! limit; the results name the limit used).

mod scale_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use scale_support::api_requests;
use scale_support::controller_process::ControllerProcess;
use scale_support::events;
use scale_support::openstack_double::OpenStackDouble;
use scale_support::prometheus;
use scale_support::raw_capacity;
use scale_support::results::{self, Run};
use scale_support::webhook_burst;
use scale_support::world::{self, Progress};

/// The controller's default `--max-concurrent-reconciles`, the raw client's parallelism too.
const PARALLELISM: usize = 2;
/// Time left after convergence for the last status writes before the steady window opens.
const SETTLE: Duration = Duration::from_secs(10);

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The bursts `NOVA_SCALE_BURST`, `NOVA_SCALE_BURST_IN_FLIGHT` and `NOVA_SCALE_BURST_ROUNDS`
/// ask for; None when there are none.
fn burst_settings() -> Option<webhook_burst::Settings> {
    let in_flight = std::env::var("NOVA_SCALE_BURST_IN_FLIGHT")
        .unwrap_or_else(|_| "1,50".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    let settings = webhook_burst::Settings {
        creates: env_or("NOVA_SCALE_BURST", 1000),
        in_flight,
        rounds: env_or("NOVA_SCALE_BURST_ROUNDS", 2),
    };
    (settings.creates > 0 && settings.rounds > 0 && !settings.in_flight.is_empty())
        .then_some(settings)
}

fn load() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_gib = memory
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    format!("{cores} cores ({model}), {memory_gib:.1} GiB, shared with other builds and tests")
}

/// (sub-reconciler, runs, mean ms, p50 ms, p99 ms) from the controller's histogram.
fn reconciles(text: &str) -> Vec<(String, u64, f64, f64, f64)> {
    const NAME: &str = "nova_operator_reconcile_duration_seconds";
    let mut out = Vec::new();
    for count in prometheus::samples(text, &format!("{NAME}_count")) {
        let sub = count.label("sub_reconciler").to_owned();
        let sum = prometheus::samples(text, &format!("{NAME}_sum"))
            .into_iter()
            .find(|s| s.label("sub_reconciler") == sub)
            .map_or(0.0, |s| s.value);
        let buckets = prometheus::buckets(text, NAME, |s| s.label("sub_reconciler") == sub);
        let ms = |q| prometheus::quantile(&buckets, q).unwrap_or(0.0) * 1000.0;
        let mean = 1000.0 * sum / count.value.max(1.0);
        out.push((sub, count.value as u64, mean, ms(0.5), ms(0.99)));
    }
    out
}

fn errors(text: &str) -> Vec<(String, String, u64)> {
    prometheus::samples(text, "nova_operator_reconcile_errors_total")
        .into_iter()
        .filter(|s| s.value > 0.0)
        .map(|s| {
            let (sub, condition) = (s.label("sub_reconciler"), s.label("condition_type"));
            (sub.to_owned(), condition.to_owned(), s.value as u64)
        })
        .collect()
}

/// The first distinct ERROR lines of the log (their timestamps cut), the ERROR and WARN counts.
fn log_lines(log: &std::path::Path) -> (Vec<String>, usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut distinct: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| l.contains("ERROR")) {
        let body: String = line
            .split_once("ERROR")
            .map_or(line, |(_, b)| b)
            .chars()
            .take(240)
            .collect();
        if distinct.len() < 8 && !distinct.contains(&body) {
            distinct.push(body);
        }
    }
    let count = |level: &str| text.lines().filter(|l| l.contains(level)).count();
    (distinct, count("ERROR"), count("WARN"))
}

async fn run(n: usize) -> Run {
    let steady_seconds: u64 = env_or("NOVA_SCALE_STEADY_SECONDS", 600);
    let timeout_seconds: u64 = env_or("NOVA_SCALE_TIMEOUT_SECONDS", 3600);
    let started = chrono_now();
    let mut loads = vec![("start".to_owned(), load())];
    let cp = nova_test_harness::ControlPlane::start()
        .await
        .expect("control plane");
    let client = cp.client().expect("client");
    let ns = cp.namespace("scale").await.expect("namespace");

    let setup = Instant::now();
    let double = OpenStackDouble::start(world::hosts(n)).await;
    world::create(&client, &ns, n).await;
    let progress = Progress::follow(&client, &ns).await;
    let setup_seconds = setup.elapsed().as_secs_f64();
    println!("N={n}: set up in {setup_seconds:.1}s, load {}", load());

    let before = api_requests::snapshot(&client).await;
    let log = cp.dir().join("nova-controller-scale.log");
    let routes = world::routes(&ns, n, double.address);
    let mut controller =
        ControllerProcess::start(cp.kubeconfig_path(), double.address, &routes, log.clone());
    let t0 = Instant::now();
    let (mut novas_ready, mut pools_ready) = (None, None);
    let deadline = t0 + Duration::from_secs(timeout_seconds);
    let mut reported = Instant::now();
    while (novas_ready.is_none() || pools_ready.is_none()) && Instant::now() < deadline {
        controller.check_alive().expect("nova-controller");
        let (novas, pools) = progress.ready();
        if novas == n && novas_ready.is_none() {
            novas_ready = Some(t0.elapsed().as_secs_f64());
        }
        if pools == n / 10 && pools_ready.is_none() {
            pools_ready = Some(t0.elapsed().as_secs_f64());
        }
        if reported.elapsed() > Duration::from_secs(30) {
            reported = Instant::now();
            let usage = controller.usage();
            println!(
                "  {:.0}s: {novas}/{n} Novas, {pools}/{} pools Ready; controller {:.1} CPU s, {:.1} MiB; load {}",
                t0.elapsed().as_secs_f64(),
                n / 10,
                usage.cpu_seconds,
                usage.rss_kib as f64 / 1024.0,
                load()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let at_convergence = controller.usage();
    let converged = api_requests::snapshot(&client).await;
    let events = events::count(&client, &ns).await;
    loads.push(("converged".into(), load()));
    let waiting: Vec<(String, usize)> = progress.waiting().into_iter().collect();
    println!(
        "N={n}: Novas Ready after {novas_ready:?} s, pools after {pools_ready:?} s; waiting: {waiting:?}"
    );

    tokio::time::sleep(SETTLE).await;
    let window_start = api_requests::snapshot(&client).await;
    let window_usage = controller.usage();
    tokio::time::sleep(Duration::from_secs(steady_seconds)).await;
    let window_end = api_requests::snapshot(&client).await;
    let at_end = controller.usage();
    let steady_cpu_seconds = at_end.cpu_seconds - window_usage.cpu_seconds;
    loads.push(("steady window end".into(), load()));
    let metrics = controller.metrics().await;
    drop(controller);

    let raw_ns = cp.namespace("scale-raw").await.expect("namespace");
    let raw = raw_capacity::replay(&client, &ns, &raw_ns, PARALLELISM).await;
    loads.push(("raw".into(), load()));
    println!(
        "N={n}: raw: {} objects in {:.1}s",
        raw.objects,
        raw.elapsed.as_secs_f64()
    );
    let bursts = match burst_settings() {
        None => Vec::new(),
        Some(settings) => webhook_burst::compare(&client, &cp, &settings).await,
    };
    loads.push(("webhook bursts".into(), load()));
    let (log_errors, log_error_count, log_warnings) = log_lines(&log);
    Run {
        n,
        pools: n / 10,
        nodes: n / 10 * world::NODES_PER_POOL,
        started,
        machine: machine(),
        loads,
        setup_seconds,
        novas_ready,
        pools_ready,
        timeout_seconds,
        waiting,
        at_convergence,
        at_end,
        steady_cpu_seconds,
        steady_seconds,
        converging: api_requests::delta(&converged, &before),
        events,
        steady: api_requests::delta(&window_end, &window_start),
        reconciles: reconciles(&metrics),
        errors: errors(&metrics),
        log_errors,
        log_error_count,
        log_warnings,
        raw,
        parallelism: PARALLELISM,
        bursts,
        double_calls: double.calls(),
    }
}

/// The webhook bursts alone, on a control plane of their own without Novas: the section of N=0.
async fn bursts_only() -> String {
    let started = chrono_now();
    let start_load = load();
    let cp = nova_test_harness::ControlPlane::start()
        .await
        .expect("control plane");
    let client = cp.client().expect("client");
    let bursts = match burst_settings() {
        None => Vec::new(),
        Some(settings) => webhook_burst::compare(&client, &cp, &settings).await,
    };
    results::render_bursts_only(&started, &machine(), &start_load, &bursts)
}

/// The current UTC time, as `date -u` prints it.
fn chrono_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ns: Vec<usize> = std::env::var("NOVA_SCALE_N")
        .unwrap_or_else(|_| "100,500,1000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let path: PathBuf = std::env::var("NOVA_SCALE_RESULTS").map_or_else(
        |_| concat!(env!("CARGO_MANIFEST_DIR"), "/bench/results.md").into(),
        PathBuf::from,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for n in ns {
        let section = match n {
            0 => runtime.block_on(bursts_only()),
            n => results::render(&runtime.block_on(run(n))),
        };
        println!("{section}");
        results::rewrite(&path, n, &section);
        println!("rewrote the N={n} section of {}", path.display());
    }
}
