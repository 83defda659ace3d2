//! The exhaustion drill (issue 33): the real `nova-webhook` binary, a child process on loopback,
//! under (a) thousands of idle TLS connections and (b) HTTP/2 connections each with hundreds of
//! concurrent streams POSTing 3 MiB bodies to the validating webhook, while (c) an API-server-
//! like HTTP/2 connection, opened before either, sends ordinary reviews and times them. Prints
//! the server's peak RSS (VmHWM from /proc, reset before each phase through `clear_refs`) and
//! its RSS after each phase, the ordinary reviews' p50/p99 and outcomes per phase, and what the
//! floods got: handshakes completed or refused, answers by status, errors.
//!
//! ```sh
//! cargo bench -p nova-webhook --bench exhaust
//! EXHAUST_BINARY=<an older nova-webhook> cargo bench -p nova-webhook --bench exhaust
//! cargo bench -p nova-webhook --bench exhaust -- --max-connections 64   # flags for the server
//! ```
//!
//! Knobs (environment): `EXHAUST_IDLE` idle connections (2000), `EXHAUST_FLOOD_CONNECTIONS` (4),
//! `EXHAUST_FLOOD_STREAMS` streams per connection (200), `EXHAUST_BODY` `zeros` (a 3 MiB Nova
//! whose managedFields hold 1.5 million zeros: the costliest decode measured, 17 times the
//! body) or `padded` (the Example Nova followed by 3 MiB of spaces: buffering only).
//!
//! The drill and the server share the machine: the floods' TLS costs the client as much as the
//! server, so the latencies are those of a busy machine. What the drill asserts is nothing; it
//! prints the figures (`webhook/bench/README.md` records them).

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nova_certs::CertificateAuthority;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const VALIDATE: &str = "/validate-nova-openstack-c5c3-io-v1alpha1-nova";
/// The AdmissionReview of the Example Nova the load benchmark posts too.
const ORDINARY: &[u8] = include_bytes!("../fuzz/seeds/admission/novas-create.json");
const MIB: f64 = 1024.0 * 1024.0;
/// The webhook's body cap.
const BODY_BYTES: usize = 3 * 1024 * 1024;
/// How long each phase's load is held, and how long the server is left to settle after it.
const HOLD: Duration = Duration::from_secs(3);
const SETTLE: Duration = Duration::from_secs(2);
/// The bound on any one connection attempt or request of the drill.
const REQUEST_BOUND: Duration = Duration::from_secs(60);
/// The ordinary reviews' pace: one every 20 ms, an API server's steady trickle.
const ORDINARY_PACE: Duration = Duration::from_millis(20);

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The server under test, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn status(&self, field: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib * 1024.0 / MIB)
    }

    /// The peak RSS since the last reset, in MiB.
    fn peak(&self) -> f64 {
        self.status("VmHWM")
    }

    fn rss(&self) -> f64 {
        self.status("VmRSS")
    }

    /// Resets the peak to the RSS now; false where the kernel does not let it.
    fn reset_peak(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").is_ok()
    }

    async fn metrics(&self) -> String {
        let Ok(mut tcp) = TcpStream::connect(self.admin).await else {
            return String::new();
        };
        let _ = tcp
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
        let mut out = Vec::new();
        let _ = tcp.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }
}

fn free_port() -> SocketAddr {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

async fn start(binary: &PathBuf, certs: &std::path::Path, flags: &[String]) -> Server {
    let (addr, admin) = (free_port(), free_port());
    let child = Command::new(binary)
        .arg(format!("--bind-address={addr}"))
        .arg(format!("--metrics-bind-address={admin}"))
        .arg(format!(
            "--tls-cert-file={}",
            certs.join("tls.crt").display()
        ))
        .arg(format!(
            "--tls-private-key-file={}",
            certs.join("tls.key").display()
        ))
        .arg("--kubeconfig=/nonexistent")
        .args(flags)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the server starts");
    let server = Server { child, addr, admin };
    let started = Instant::now();
    while !server.metrics().await.contains("nova_webhook_") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server did not come up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server
}

fn tls_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.expect("CA")).expect("CA");
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

async fn handshake(
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let connect = async {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        // As the API server's Go client: without it, Nagle's algorithm holds a request's body
        // frame behind its head until the server's delayed ACK, 40 ms.
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        tokio_rustls::TlsConnector::from(tls.clone())
            .connect(
                ServerName::try_from("127.0.0.1").expect("name").to_owned(),
                tcp,
            )
            .await
            .map_err(|e| e.to_string())
    };
    tokio::time::timeout(REQUEST_BOUND, connect)
        .await
        .map_err(|_| "timed out".to_owned())?
}

async fn h2(
    addr: SocketAddr,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<http2::SendRequest<Full<Bytes>>, String> {
    let stream = handshake(addr, tls).await?;
    let (client, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .map_err(|e| chain(&e))?;
    tokio::spawn(conn);
    Ok(client)
}

/// An error with its sources, `hyper`'s own text being only "http2 error".
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// One POST to the validating webhook: its status, or the error.
async fn post(client: &mut http2::SendRequest<Full<Bytes>>, body: Bytes) -> Result<u16, String> {
    let req = hyper::Request::post(format!("https://127.0.0.1{VALIDATE}"))
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(Full::new(body))
        .expect("request");
    let answer = async {
        client.ready().await.map_err(|e| chain(&e))?;
        let resp = client.send_request(req).await.map_err(|e| chain(&e))?;
        let status = resp.status().as_u16();
        resp.into_body().collect().await.map_err(|e| chain(&e))?;
        Ok(status)
    };
    tokio::time::timeout(REQUEST_BOUND, answer)
        .await
        .map_err(|_| "timed out".to_owned())?
}

/// Outcomes counted by name: `200`, `503`, an error's text.
#[derive(Default)]
struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn add(&mut self, outcome: &Result<u16, String>) {
        let key = match outcome {
            Ok(status) => status.to_string(),
            Err(e) => format!("error: {}", e.chars().take(120).collect::<String>()),
        };
        *self.0.entry(key).or_default() += 1;
    }

    fn render(&self) -> String {
        self.0
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The ordinary reviews, timed and tallied per phase.
#[derive(Default)]
struct Ordinary {
    phase: AtomicUsize,
    stop: AtomicBool,
    /// Per phase: the latencies of the reviews answered 200, and every outcome.
    samples: Mutex<BTreeMap<usize, (Vec<Duration>, Tally)>>,
}

impl Ordinary {
    async fn run(self: Arc<Self>, mut client: http2::SendRequest<Full<Bytes>>) {
        let body = Bytes::from_static(ORDINARY);
        while !self.stop.load(Ordering::Relaxed) {
            let phase = self.phase.load(Ordering::Relaxed);
            let started = Instant::now();
            let outcome = post(&mut client, body.clone()).await;
            let took = started.elapsed();
            {
                let mut samples = self.samples.lock().expect("samples");
                let (latencies, tally) = samples.entry(phase).or_default();
                if outcome == Ok(200) {
                    latencies.push(took);
                }
                tally.add(&outcome);
            }
            tokio::time::sleep(ORDINARY_PACE.saturating_sub(took)).await;
        }
    }

    fn report(&self, phase: usize) -> String {
        let mut samples = self.samples.lock().expect("samples");
        let Some((latencies, tally)) = samples.get_mut(&phase) else {
            return "none sent".into();
        };
        latencies.sort();
        let at = |q: f64| {
            latencies
                .get(((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1))
                .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
        };
        format!(
            "{} | p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            tally.render(),
            at(0.50),
            at(0.99),
            at(1.0)
        )
    }
}

/// A 3 MiB AdmissionReview of the Example Nova (at most the body cap).
fn big_body(kind: &str) -> Bytes {
    let mut review: serde_json::Value = serde_json::from_slice(ORDINARY).expect("the seed");
    match kind {
        "padded" => {
            let mut body = serde_json::to_vec(&review).expect("json");
            body.resize(BODY_BYTES, b' ');
            Bytes::from(body)
        }
        "zeros" => {
            const MARK: &str = "\"ZEROS\"";
            review["request"]["object"]["metadata"]["managedFields"] = serde_json::json!([{
                "manager": "drill", "operation": "Apply", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f": "ZEROS"},
            }]);
            let text = serde_json::to_string(&review).expect("json");
            let zeros = (BODY_BYTES - (text.len() - MARK.len()) - 2) / 2;
            let array = format!("[{}0]", "0,".repeat(zeros - 1));
            Bytes::from(text.replace(MARK, &array))
        }
        other => panic!("EXHAUST_BODY {other:?}: zeros or padded"),
    }
}

fn line(label: &str, value: impl std::fmt::Display) {
    println!("{label:<44} {value}");
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // `cargo bench` passes `--bench`; the rest are the server's flags.
    let flags: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let binary = std::env::var_os("EXHAUST_BINARY").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_nova-webhook")),
        PathBuf::from,
    );
    let idle = knob("EXHAUST_IDLE", 2000);
    let flood_connections = knob("EXHAUST_FLOOD_CONNECTIONS", 4);
    let flood_streams = knob("EXHAUST_FLOOD_STREAMS", 200);
    let body_kind = std::env::var("EXHAUST_BODY").unwrap_or_else(|_| "zeros".into());
    let big = big_body(&body_kind);

    let ca = CertificateAuthority::new("exhaust CA").expect("CA");
    let leaf = ca
        .issue_serving("nova-webhook", &["127.0.0.1"])
        .expect("leaf");
    let certs = tempfile::tempdir().expect("tempdir");
    std::fs::write(certs.path().join("tls.crt"), &leaf.cert_pem).expect("cert");
    std::fs::write(certs.path().join("tls.key"), &leaf.key_pem).expect("key");
    let tls = tls_config(ca.cert_pem());

    let server = start(&binary, certs.path(), &flags).await;
    line(
        "server",
        format!("{} {}", binary.display(), flags.join(" ")),
    );
    line(
        "floods",
        format!(
            "(a) {idle} idle TLS connections; (b) {flood_connections} x {flood_streams} \
             streams x {:.2} MiB ({body_kind})",
            big.len() as f64 / MIB
        ),
    );
    let resettable = server.reset_peak();
    if !resettable {
        println!("(clear_refs not writable: each peak is the peak since the server started)");
    }

    // (c) The API server's connection, open before the floods.
    let ordinary = Arc::new(Ordinary::default());
    let api = h2(server.addr, &tls)
        .await
        .expect("the API server's connection");
    let prober = tokio::spawn(ordinary.clone().run(api));

    // Baseline.
    tokio::time::sleep(HOLD).await;
    line("baseline: peak RSS", format!("{:.1} MiB", server.peak()));
    line("baseline: ordinary reviews", ordinary.report(0));

    // (a) Idle TLS connections: handshaken, then silent.
    server.reset_peak();
    ordinary.phase.store(1, Ordering::Relaxed);
    let started = Instant::now();
    let results: Vec<_> = futures::stream::iter(0..idle)
        .map(|_| handshake(server.addr, &tls))
        .buffer_unordered(64)
        .collect()
        .await;
    let opened = started.elapsed();
    // The server resets a connection over its cap before its first handshake flight, so a
    // completed handshake is a connection it accepted.
    let (held, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    tokio::time::sleep(HOLD).await;
    line(
        "(a) idle: handshakes completed / refused",
        format!(
            "{} / {} in {:.1} s",
            held.len(),
            refused.len(),
            opened.as_secs_f64()
        ),
    );
    line("(a) idle: peak RSS", format!("{:.1} MiB", server.peak()));
    line("(a) idle: ordinary reviews", ordinary.report(1));
    drop(held);
    tokio::time::sleep(SETTLE).await;
    line(
        "(a) after closing them: RSS",
        format!("{:.1} MiB", server.rss()),
    );

    // (b) The stream flood.
    server.reset_peak();
    ordinary.phase.store(2, Ordering::Relaxed);
    let started = Instant::now();
    let mut flood = Vec::new();
    let mut tally = Tally::default();
    for _ in 0..flood_connections {
        match h2(server.addr, &tls).await {
            Ok(client) => {
                for _ in 0..flood_streams {
                    let mut client = client.clone();
                    let body = big.clone();
                    flood.push(tokio::spawn(async move { post(&mut client, body).await }));
                }
            }
            Err(e) => tally.add(&Err(format!("connect: {e}"))),
        }
    }
    for request in flood {
        tally.add(&request.await.expect("flood task"));
    }
    let flooded = started.elapsed();
    line(
        "(b) streams: answers",
        format!("{} in {:.1} s", tally.render(), flooded.as_secs_f64()),
    );
    line("(b) streams: peak RSS", format!("{:.1} MiB", server.peak()));
    line("(b) streams: ordinary reviews", ordinary.report(2));
    ordinary.phase.store(3, Ordering::Relaxed);
    tokio::time::sleep(SETTLE).await;
    line("(b) after: RSS", format!("{:.1} MiB", server.rss()));

    ordinary.stop.store(true, Ordering::Relaxed);
    let _ = prober.await;
    line("after: ordinary reviews", ordinary.report(3));
    if !resettable {
        line("peak RSS since start", format!("{:.1} MiB", server.peak()));
    }
    let metrics = server.metrics().await;
    for l in metrics.lines().filter(|l| {
        l.starts_with("nova_webhook_rejected_total")
            || l.starts_with("nova_webhook_idle_closed_total")
            || l.starts_with("nova_webhook_open_connections")
            || l.starts_with("nova_webhook_connections_total")
    }) {
        println!("  {l}");
    }
}
