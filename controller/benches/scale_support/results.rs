//! The results file: one section per N, rewritten by each run of that N (the other sections
//! stay, each with the date and load of its own run).

use std::fmt::Write as _;
use std::path::Path;

use super::api_requests::{Counts, is_write};
use super::controller_process::Usage;
use super::events::{self, ByReporter};
use super::raw_capacity::Raw;
use super::webhook_burst::{Burst, ENDPOINTS};

/// Everything one run measured.
pub struct Run {
    pub n: usize,
    pub pools: usize,
    pub nodes: usize,
    pub started: String,
    pub machine: String,
    /// (phase, /proc/loadavg's three averages then).
    pub loads: Vec<(String, String)>,
    pub setup_seconds: f64,
    /// Seconds from the controller's start until every Nova, then every pool, was Ready; None
    /// when that did not happen within the time allowed.
    pub novas_ready: Option<f64>,
    pub pools_ready: Option<f64>,
    pub timeout_seconds: u64,
    /// What the not-yet-True conditions were waiting for when the wait ended.
    pub waiting: Vec<(String, usize)>,
    pub at_convergence: Usage,
    pub at_end: Usage,
    pub steady_cpu_seconds: f64,
    pub steady_seconds: u64,
    pub converging: Counts,
    /// The Event objects of the namespace at convergence, by reporter, kind and reason.
    pub events: ByReporter,
    pub steady: Counts,
    /// (sub-reconciler, runs, mean ms, p50 ms, p99 ms) at the end of the steady window.
    pub reconciles: Vec<(String, u64, f64, f64, f64)>,
    /// (sub-reconciler, condition, errors).
    pub errors: Vec<(String, String, u64)>,
    pub log_errors: Vec<String>,
    pub log_error_count: usize,
    pub log_warnings: usize,
    pub raw: Raw,
    pub parallelism: usize,
    pub bursts: Vec<Burst>,
    pub double_calls: u64,
}

fn per(value: f64, n: usize) -> f64 {
    value / n as f64
}

/// Writes and reads, in total and per Nova (`+ 0.0`: an empty float sum is -0).
fn totals(counts: &Counts, n: usize) -> String {
    let writes = counts
        .iter()
        .filter(|((v, _, _), _)| is_write(v))
        .map(|(_, c)| c)
        .sum::<f64>()
        + 0.0;
    let reads = counts
        .iter()
        .filter(|((v, _, _), _)| !is_write(v))
        .map(|(_, c)| c)
        .sum::<f64>()
        + 0.0;
    format!(
        "{writes:.0} writes ({:.2}/Nova), {reads:.0} GET/LIST reads ({:.2}/Nova)",
        per(writes, n),
        per(reads, n)
    )
}

/// The writes of the operator while converging: every write of its resources but the events
/// other components recorded (the API server counts every component's events in one row).
fn own_writes(counts: &Counts, events: &ByReporter) -> f64 {
    let all: f64 = counts
        .iter()
        .filter(|((v, _, _), _)| is_write(v))
        .map(|(_, c)| c)
        .sum();
    let event_writes: f64 = counts
        .iter()
        .filter(|((v, r, _), _)| is_write(v) && r == "events")
        .map(|(_, c)| c)
        .sum();
    let ours: u64 = events
        .iter()
        .filter(|((reporter, _, _), _)| events::OURS.contains(&reporter.as_str()))
        .map(|(_, (_, occurrences))| occurrences)
        .sum();
    all - event_writes + ours as f64
}

fn events_table(out: &mut String, events: &ByReporter, n: usize) {
    let _ = writeln!(
        out,
        "\n| reporter | on | reason | events | occurrences | events per Nova |\n| --- | --- | --- | ---: | ---: | ---: |"
    );
    for ((reporter, kind, reason), (objects, occurrences)) in events {
        let _ = writeln!(
            out,
            "| {reporter} | {kind} | {reason} | {objects} | {occurrences} | {:.2} |",
            per(*objects as f64, n)
        );
    }
}

fn table(out: &mut String, counts: &Counts, n: usize) {
    let _ = writeln!(
        out,
        "\n| verb | resource | total | per Nova |\n| --- | --- | ---: | ---: |"
    );
    for ((verb, resource, subresource), count) in counts {
        let resource = match subresource.as_str() {
            "" => resource.clone(),
            sub => format!("{resource}/{sub}"),
        };
        let _ = writeln!(
            out,
            "| {verb} | {resource} | {count:.0} | {:.2} |",
            per(*count, n)
        );
    }
}

fn ms(seconds: Option<f64>) -> String {
    seconds.map_or("n/a".into(), |s| format!("{:.1} ms", s * 1000.0))
}

fn share(share: Option<f64>) -> String {
    share.map_or("n/a".into(), |s| format!("{:.1} %", s * 100.0))
}

/// The webhook bursts: each burst, what the webhook adds per level and round, and the per-call
/// figures of both sides.
pub fn render_bursts(out: &mut String, bursts: &[Burst]) {
    let Some(first) = bursts.first() else {
        return;
    };
    let rounds = bursts.iter().map(|b| b.round).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "\nWebhook at bursts of {} Nova creates (controller stopped), {rounds} rounds per in-flight level, one burst without nova-webhook then one with it (mutate + validate), the Novas deleted after each:\n",
        first.creates
    );
    let _ = writeln!(
        out,
        "| in flight | round | admission | burst | client p50 | client p99 | API server p99 (POST novas, bucket-interpolated) | API server CPU per create | nova-webhook CPU per review | connections opened / open after | load after |\n| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    );
    for b in bursts {
        let connections = b.connections.as_ref().map_or("-".into(), |(opened, open)| {
            let opened: Vec<String> = opened.iter().map(|(a, c)| format!("{a} {c:.0}")).collect();
            format!("{} / {open:.0}", opened.join(", "))
        });
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} s | {:.1} ms | {:.1} ms | {} | {:.2} ms | {} | {connections} | {} |",
            b.in_flight,
            b.round,
            if b.webhook { "nova-webhook" } else { "none" },
            b.elapsed.as_secs_f64(),
            b.client_p50 * 1000.0,
            b.client_p99 * 1000.0,
            ms(b.server_p99),
            b.apiserver_cpu * 1000.0 / b.creates as f64,
            b.webhook_cpu.map_or("-".into(), |cpu| format!(
                "{:.0} us",
                cpu * 1e6 / (b.creates * ENDPOINTS.len()) as f64
            )),
            b.load
        );
    }
    let _ = writeln!(
        out,
        "\nWhat the webhook adds (with minus without, same level and round; target < 5 ms at p99), round by round:\n\n| in flight | client p50 | client p99 | API server p99 |\n| ---: | --- | --- | --- |"
    );
    let mut levels: Vec<usize> = bursts.iter().map(|b| b.in_flight).collect();
    levels.sort_unstable();
    levels.dedup();
    for level in levels {
        let pairs: Vec<(&Burst, &Burst)> = (1..=rounds)
            .filter_map(|round| {
                let find = |webhook| {
                    bursts
                        .iter()
                        .find(|b| b.in_flight == level && b.round == round && b.webhook == webhook)
                };
                find(false).zip(find(true))
            })
            .collect();
        let added = |figure: &dyn Fn(&Burst) -> Option<f64>| {
            pairs
                .iter()
                .map(|(without, with)| match (figure(with), figure(without)) {
                    (Some(a), Some(b)) => format!("{:+.1}", (a - b) * 1000.0),
                    _ => "n/a".into(),
                })
                .collect::<Vec<_>>()
                .join(" / ")
                + " ms"
        };
        let _ = writeln!(
            out,
            "| {level} | {} | {} | {} |",
            added(&|b| Some(b.client_p50)),
            added(&|b| Some(b.client_p99)),
            added(&|b| b.server_p99)
        );
    }
    let _ = writeln!(
        out,
        "\nEach webhook call: the API server's time for it, round trip included (`apiserver_admission_webhook_admission_duration_seconds`; its first buckets end at 5 and 25 ms, so a p50 or p99 inside the first is interpolated, while the mean and the share within 5 ms are exact), beside nova-webhook's handler time (`nova_webhook_request_duration_seconds`):\n\n| in flight | round | webhook | calls | API server mean | p50 | p99 | within 5 ms | handler mean | handler p99 |\n| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for b in bursts {
        for a in &b.admissions {
            let _ = writeln!(
                out,
                "| {} | {} | {} ({}) | {:.0} | {:.2} ms | {} | {} | {} | {:.2} ms | {} |",
                b.in_flight,
                b.round,
                a.name,
                a.kind,
                a.apiserver.count,
                a.apiserver.mean * 1000.0,
                ms(a.apiserver.p50),
                ms(a.apiserver.p99),
                share(a.apiserver.within_5ms),
                a.handler.mean * 1000.0,
                ms(a.handler.p99)
            );
        }
    }
}

/// The section of a run of the webhook bursts alone (N = 0).
pub fn render_bursts_only(started: &str, machine: &str, load: &str, bursts: &[Burst]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Webhook bursts alone (N = 0)\n");
    let _ = writeln!(
        out,
        "Run {started} on {machine}; no Novas converged, no controller; load average (1, 5, 15 min) at the start {load}, after each burst in its row."
    );
    render_bursts(&mut out, bursts);
    out
}

/// The controller's client limit: its defaults, or what the bench's environment set for the
/// child through the controller's own variables.
fn client_limit() -> String {
    let qps = std::env::var("NOVA_CONTROLLER_CLIENT_QPS").ok();
    let burst = std::env::var("NOVA_CONTROLLER_CLIENT_BURST").ok();
    if qps.is_none() && burst.is_none() {
        return "client QPS and burst at their defaults (0: no client-side limit, the API server's Priority and Fairness decides)".into();
    }
    let qps = match qps.as_deref() {
        Some("0") | None => "0 (no limit)".to_owned(),
        Some(qps) => qps.to_owned(),
    };
    let burst = burst.unwrap_or_else(|| "100 (default)".into());
    format!(
        "client QPS {qps} and burst {burst}, set through NOVA_CONTROLLER_CLIENT_QPS / NOVA_CONTROLLER_CLIENT_BURST"
    )
}

/// The section of one run.
pub fn render(run: &Run) -> String {
    let mut out = String::new();
    let n = run.n;
    let converged = run.novas_ready.zip(run.pools_ready).map(|(a, b)| a.max(b));
    let _ = writeln!(out, "## N = {n}\n");
    let _ = writeln!(
        out,
        "Run {} on {}; {n} Novas, {} pools of 10 kwok nodes ({} nodes); controller concurrency {}, {}.\n",
        run.started,
        run.machine,
        run.pools,
        run.nodes,
        run.parallelism,
        client_limit()
    );
    let _ = writeln!(
        out,
        "Load average (1, 5, 15 min) by phase: {}.\n",
        run.loads
            .iter()
            .map(|(p, l)| format!("{p} {l}"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let _ = writeln!(out, "| figure | value |\n| --- | --- |");
    let _ = writeln!(
        out,
        "| set-up (inputs, nodes, Novas, pools created before the controller starts) | {:.1} s |",
        run.setup_seconds
    );
    let show = |t: Option<f64>| {
        t.map_or(format!("not within {} s", run.timeout_seconds), |t| {
            format!("{t:.1} s")
        })
    };
    let _ = writeln!(
        out,
        "| every Nova Ready (from the controller's start) | {} |",
        show(run.novas_ready)
    );
    let _ = writeln!(out, "| every pool Ready | {} |", show(run.pools_ready));
    let _ = writeln!(
        out,
        "| raw: {} owned objects created by a plain client, {} at once | {:.1} s |",
        run.raw.objects,
        run.parallelism,
        run.raw.elapsed.as_secs_f64()
    );
    if let Some(c) = converged {
        let _ = writeln!(
            out,
            "| convergence / raw (target < 1.5) | {:.1} |",
            c / run.raw.elapsed.as_secs_f64()
        );
    }
    let _ = writeln!(
        out,
        "| controller CPU while converging | {:.1} s |",
        run.at_convergence.cpu_seconds
    );
    let _ = writeln!(
        out,
        "| controller CPU in the steady window ({} s) | {:.1} s |",
        run.steady_seconds, run.steady_cpu_seconds
    );
    let _ = writeln!(
        out,
        "| controller peak RSS (VmHWM; target < 128 MiB at 1000) | {:.1} MiB |",
        run.at_end.peak_rss_kib as f64 / 1024.0
    );
    let _ = writeln!(
        out,
        "| controller RSS at the end | {:.1} MiB |",
        run.at_end.rss_kib as f64 / 1024.0
    );
    let _ = writeln!(out, "| converging | {} |", totals(&run.converging, n));
    let own = own_writes(&run.converging, &run.events);
    let ours = events::ours(&run.events);
    let _ = writeln!(
        out,
        "| converging, the operator's own writes (other components' events left out) | {own:.0} ({:.2}/Nova), of which {ours} Events ({:.2}/Nova) |",
        per(own, n),
        per(ours as f64, n)
    );
    let _ = writeln!(
        out,
        "| steady window, {} s (target: 0 writes, 0 reads) | {} |",
        run.steady_seconds,
        totals(&run.steady, n)
    );
    let errors: u64 = run.errors.iter().map(|e| e.2).sum();
    let _ = writeln!(
        out,
        "| reconcile errors (nova_operator_reconcile_errors_total) | {errors} |"
    );
    let _ = writeln!(
        out,
        "| controller log: ERROR / WARN lines | {} / {} |",
        run.log_error_count, run.log_warnings
    );
    let _ = writeln!(
        out,
        "| SIMULATED OpenStack requests answered | {} |",
        run.double_calls
    );
    if !run.waiting.is_empty() {
        let _ = writeln!(
            out,
            "\nStill waiting when the wait ended: {}.",
            run.waiting
                .iter()
                .map(|(r, c)| format!("{r} x{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    render_bursts(&mut out, &run.bursts);
    let _ = writeln!(out, "\nRequests while converging (per Nova = total / {n}):");
    table(&mut out, &run.converging, n);
    let _ = writeln!(
        out,
        "\nEvents in the namespace at convergence, by reporter (an event's repeats within six minutes are occurrences of one event, a PATCH each):"
    );
    events_table(&mut out, &run.events, n);
    let _ = writeln!(out, "\nRequests in the steady window:");
    table(&mut out, &run.steady, n);
    let _ = writeln!(
        out,
        "\nReconcile durations (nova_operator_reconcile_duration_seconds, whole run):\n\n| sub-reconciler | runs | mean | p50 | p99 |\n| --- | ---: | ---: | ---: | ---: |"
    );
    for (sub, runs, mean, p50, p99) in &run.reconciles {
        let _ = writeln!(
            out,
            "| {sub} | {runs} | {mean:.1} ms | {p50:.1} ms | {p99:.1} ms |"
        );
    }
    if !run.errors.is_empty() {
        let _ = writeln!(
            out,
            "\nReconcile errors:\n\n| sub-reconciler | condition | errors |\n| --- | --- | ---: |"
        );
        for (sub, condition, count) in &run.errors {
            let _ = writeln!(out, "| {sub} | {condition} | {count} |");
        }
    }
    if !run.log_errors.is_empty() {
        let _ = writeln!(out, "\nFirst distinct ERROR lines of the controller log:\n");
        for line in &run.log_errors {
            let _ = writeln!(out, "    {line}");
        }
    }
    let _ = writeln!(
        out,
        "\nObjects the raw client created, by kind: {}.",
        run.raw
            .kinds
            .iter()
            .map(|(k, c)| format!("{k} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}

const HEADER: &str = "# Controller scale results\n\nWritten by `cargo bench -p nova-controller --bench scale` (`controller/benches/scale.rs`); each run rewrites the sections of the N it ran (`NOVA_SCALE_N`, a comma-separated list; N = 0 is the webhook bursts alone, in minutes). The control plane is the test harness's (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok playing every node and pod); the controller is the release `nova-controller` binary in a child process, cluster-wide, with its defaults. The MariaDB operator, the Gateway and OpenStack (Keystone and the Nova API of every pool, answering from memory) are SIMULATED by the bench. Request counts are the API server's `apiserver_request_total` for the resources the operator reads and writes, WATCH left out, status subresources only for Nova and NovaCompute (the other status writes are the kube controllers', kwok's and the simulated operators'); the events row counts every component's events, so each section also counts the namespace's Event objects by reporter and gives the operator's own writes without the other components' events. Convergence is measured from the controller's start, with every Nova and pool already created.\n";

fn marker(n: usize, end: bool) -> String {
    format!("<!-- scale N={n}{} -->", if end { " end" } else { "" })
}

/// Replaces the section of `n` in `path` (creating the file), keeping the others.
pub fn rewrite(path: &Path, n: usize, section: &str) {
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut sections: std::collections::BTreeMap<usize, String> = Default::default();
    let mut rest = old.as_str();
    while let Some(start) = rest.find("<!-- scale N=") {
        let after = &rest[start + "<!-- scale N=".len()..];
        let Some(number) = after.split(' ').next().and_then(|t| t.parse().ok()) else {
            break;
        };
        let end = marker(number, true);
        let Some(stop) = rest.find(&end) else { break };
        sections.insert(number, rest[start..stop + end.len()].to_owned());
        rest = &rest[stop + end.len()..];
    }
    sections.insert(
        n,
        format!("{}\n{section}{}", marker(n, false), marker(n, true)),
    );
    let body: Vec<String> = sections.into_values().collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("results directory");
    }
    std::fs::write(path, format!("{HEADER}\n{}\n", body.join("\n\n"))).expect("write results");
}
