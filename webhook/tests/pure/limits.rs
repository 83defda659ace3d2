//! The limits that keep the admission server inside its memory under a flood, on the real
//! server over TLS: the connection cap, the HTTP/2 stream cap, the body budget, the request head
//! cap and the idle timeout; and an ordinary review still answered while a flood holds them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nova_webhook::budget::MEMORY_PER_BODY_BYTE;
use nova_webhook::limits::Limits;
use nova_webhook::review::Offline;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use nova_testkit::wait::Wait;

use super::https::{
    RELOAD_WAIT, Running, client_config, connect, get, install_provider, review_body, series,
    serving, start,
};

const VALIDATE: &str = "/validate-nova-openstack-c5c3-io-v1alpha1-nova";
const KIB: usize = 1024;

/// Small limits, so that a handful of connections and streams reach each of them.
fn small_limits() -> Limits {
    Limits {
        max_connections: 4,
        max_concurrent_streams: 4,
        max_body_bytes: 64 * KIB,
        // One body at the cap, and no more.
        review_budget_bytes: 64 * KIB * MEMORY_PER_BODY_BYTE,
        review_budget_wait: Duration::from_millis(300),
        ..Limits::default()
    }
}

/// A TLS connection offering only HTTP/2.
async fn connect_h2(
    addr: SocketAddr,
    ca_pem: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut config = client_config(ca_pem);
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap().to_owned(), tcp)
        .await
}

/// An HTTP/2 client the way the API server is one: one connection, requests multiplexed.
async fn h2_client(running: &Running) -> http2::SendRequest<Full<hyper::body::Bytes>> {
    let tls = connect_h2(running.addr, &running.ca_pem).await.unwrap();
    let (client, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// POSTs `body` to the validating webhook; the status, the `Retry-After` header and the body.
async fn post(
    client: &mut http2::SendRequest<Full<hyper::body::Bytes>>,
    body: Vec<u8>,
) -> (u16, Option<String>, String) {
    let req = hyper::Request::post(format!("https://127.0.0.1{VALIDATE}"))
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(Full::from(body))
        .unwrap();
    client.ready().await.unwrap();
    let resp = client.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        retry_after,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const END_HEADERS: u8 = 4;
const ACK: u8 = 1;

/// A header field in HPACK without indexing or Huffman coding, its name the static table's
/// entry `index` (RFC 7541 6.2.2, appendix A).
fn literal(block: &mut Vec<u8>, index: u8, value: &str) {
    if index < 15 {
        block.push(index);
    } else {
        block.extend([15, index - 15]);
    }
    block.push(u8::try_from(value.len()).unwrap());
    block.extend(value.as_bytes());
}

/// The head of a POST to the validating webhook declaring `content_length` body bytes, the
/// stream left open for a body that is never sent.
fn open_stream(stream: u32, content_length: usize) -> Vec<u8> {
    // :method POST and :scheme https, indexed whole (static entries 3 and 7).
    let mut block = vec![0x83, 0x87];
    literal(&mut block, 4, VALIDATE); // :path
    literal(&mut block, 1, "127.0.0.1"); // :authority
    literal(&mut block, 28, &content_length.to_string()); // content-length
    literal(&mut block, 31, "application/json"); // content-type
    frame(HEADERS, END_HEADERS, stream, &block)
}

/// A client writing HTTP/2 frames itself, so it can open more streams than the server allows
/// (a conforming client, hyper's included, queues them instead). It acknowledges settings and
/// nothing else: the server's pings go unanswered.
struct RawH2 {
    tls: tokio_rustls::client::TlsStream<TcpStream>,
    buf: Vec<u8>,
}

impl RawH2 {
    async fn open(running: &Running) -> Self {
        let mut tls = connect_h2(running.addr, &running.ca_pem).await.unwrap();
        let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        preface.extend(frame(SETTINGS, 0, 0, &[]));
        tls.write_all(&preface).await.unwrap();
        Self {
            tls,
            buf: Vec::new(),
        }
    }

    /// The next frame from the server (kind, flags, stream, payload); `None` once the
    /// connection is closed. Acknowledges the server's settings on the way.
    async fn next_frame(&mut self) -> Option<(u8, u8, u32, Vec<u8>)> {
        loop {
            if self.buf.len() >= 9 {
                let len = usize::from(self.buf[0]) << 16
                    | usize::from(self.buf[1]) << 8
                    | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let (kind, flags) = (self.buf[3], self.buf[4]);
                    let stream =
                        u32::from_be_bytes(self.buf[5..9].try_into().unwrap()) & 0x7fff_ffff;
                    let payload = self.buf[9..9 + len].to_vec();
                    self.buf.drain(..9 + len);
                    if kind == SETTINGS && flags & ACK == 0 {
                        let ack = frame(SETTINGS, ACK, 0, &[]);
                        self.tls.write_all(&ack).await.ok()?;
                    }
                    return Some((kind, flags, stream, payload));
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.tls.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend(&chunk[..n]),
            }
        }
    }

    /// The `RST_STREAM` codes by stream, read until `done` says so of them.
    async fn resets_until(
        &mut self,
        done: impl Fn(&BTreeMap<u32, u32>) -> bool,
    ) -> BTreeMap<u32, u32> {
        let mut resets = BTreeMap::new();
        while !done(&resets) {
            let (kind, _, stream, payload) = self
                .next_frame()
                .await
                .unwrap_or_else(|| panic!("the server closed the connection; resets {resets:?}"));
            assert_ne!(kind, GOAWAY, "the server sent GOAWAY; resets {resets:?}");
            if kind == RST_STREAM {
                resets.insert(stream, u32::from_be_bytes(payload[..4].try_into().unwrap()));
            }
        }
        resets
    }
}

/// `REFUSED_STREAM` (RFC 9113 7).
const REFUSED_STREAM: u32 = 7;

async fn metrics(running: &Running) -> String {
    get(running.admin, "/metrics").await.1
}

#[tokio::test]
async fn a_flood_meets_the_limits_and_ordinary_reviews_pass() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let limits = small_limits();
    let running = start(store, Offline, limits, ca.cert_pem()).await;
    let budget_taken = |m: &str| series(m, "nova_webhook_review_budget_used_bytes");
    let refused_by = |m: &str, limit: &str| {
        series(
            m,
            &format!("nova_webhook_rejected_total{{limit=\"{limit}\"}}"),
        )
    };

    // The API server's connection, open before the flood.
    let mut api = h2_client(&running).await;

    // The flood: one connection opens six streams on the stream cap of four, each declaring a
    // 30 KiB body it never sends. The HTTP/2 layer refuses the fifth and sixth (streams 9 and
    // 11); of the four served, two take 60 of the budget's 64 KiB of body and wait for their
    // bodies, and the other two find too little left and are answered 503 after their wait.
    let mut flood = RawH2::open(&running).await;
    let heads: Vec<u8> = (0..6)
        .flat_map(|i| open_stream(1 + 2 * i, 30 * KIB))
        .collect();
    flood.tls.write_all(&heads).await.unwrap();
    let resets = tokio::time::timeout(
        RELOAD_WAIT,
        flood.resets_until(|r| r.contains_key(&9) && r.contains_key(&11)),
    )
    .await
    .expect("the streams over the cap are reset");
    assert_eq!(resets.get(&9), Some(&REFUSED_STREAM), "{resets:?}");
    assert_eq!(resets.get(&11), Some(&REFUSED_STREAM), "{resets:?}");
    assert!(
        (1..=7)
            .step_by(2)
            .all(|s| resets.get(&s) != Some(&REFUSED_STREAM)),
        "the streams within the cap are served: {resets:?}"
    );
    Wait::new("two bodies holding the budget, two refused", RELOAD_WAIT)
        .until(|| async {
            let m = metrics(&running).await;
            budget_taken(&m) == Some((60 * KIB * MEMORY_PER_BODY_BYTE) as f64)
                && refused_by(&m, "review_budget") == Some(2.0)
        })
        .await
        .expect("two bodies holding the budget, two refused");

    // An ordinary review (1.7 KiB) fits in the 4 KiB left and is answered as usual.
    let (status, _, body) = post(&mut api, review_body("CREATE")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":true"), "{body}");
    // A review whose body does not fit waits for its share, then is told to come back.
    let (status, retry_after, body) = post(&mut api, vec![b' '; 8 * KIB]).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(body.contains("retry"), "{body}");
    // A declared body over the cap is refused without a wait or a read.
    let (status, _, _) = post(&mut api, vec![b' '; 64 * KIB + 1]).await;
    assert_eq!(status, 413);

    // Connections: the API server's and the flood's are two of the four; two more fill the
    // cap, and the next is reset on accept, before any handshake.
    let third = connect(running.addr, &running.ca_pem).await;
    let fourth = connect(running.addr, &running.ca_pem).await;
    assert!(
        connect_h2(running.addr, &running.ca_pem).await.is_err(),
        "a fifth connection is refused"
    );
    let m = metrics(&running).await;
    assert_eq!(refused_by(&m, "connections"), Some(1.0), "{m}");
    assert_eq!(
        series(&m, "nova_webhook_limit{limit=\"connections\"}"),
        Some(4.0)
    );
    // The open connections keep working.
    let (status, _, body) = post(&mut api, review_body("CREATE")).await;
    assert_eq!(status, 200, "{body}");

    // The flood gone, its share of the budget and its connection slot come back.
    drop(flood);
    drop(third);
    Wait::new("the budget given back", RELOAD_WAIT)
        .until(|| async { budget_taken(&metrics(&running).await) == Some(0.0) })
        .await
        .expect("the budget given back");
    // A refused connection is reset before the server's first handshake flight, so a
    // handshake that completes is a connection served.
    Wait::new("a new connection accepted", RELOAD_WAIT)
        .until(|| async { connect_h2(running.addr, &running.ca_pem).await.is_ok() })
        .await
        .expect("a new connection accepted");
    drop(fourth);
}

/// The Example's review with `n` empty tolerations on the API Deployment: a few bytes each,
/// and a struct each once decoded.
fn many_empty_tolerations(n: usize) -> Vec<u8> {
    let mut review: serde_json::Value = serde_json::from_slice(&review_body("CREATE")).unwrap();
    review["request"]["object"]["spec"]["api"]["deployment"]["tolerations"] =
        serde_json::Value::Array(vec![serde_json::json!({}); n]);
    serde_json::to_vec(&review).unwrap()
}

/// A body is charged for what its structure can cost decoded, not only for its length: one
/// whose values could not be decoded within the whole budget is refused before decoding
/// (413, naming the count), one that fits is answered (here denied, one violation a
/// toleration, the first hundred listed) and its whole charge given back.
#[tokio::test]
async fn a_body_of_many_tiny_values_is_charged_for_its_structure() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let running = start(store, Offline, small_limits(), ca.cert_pem()).await;
    let mut client = h2_client(&running).await;
    // 20,000 tolerations: 60 KiB, under the 64 KiB cap, and 40,000 units, over the 8,192 the
    // budget of small_limits holds.
    let flood = many_empty_tolerations(20_000);
    assert!(flood.len() < 64 * KIB, "{}", flood.len());
    let (status, _, body) = post(&mut client, flood).await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body.contains("JSON values, more than the webhook decodes at once (8192)"),
        "{body}"
    );
    // 2,000: 6 KiB charged 120 KiB by its length, 640 KiB by its structure, which fits.
    let (status, _, body) = post(&mut client, many_empty_tolerations(2_000)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("and 1900 more not listed"), "{body}");
    let taken = series(
        &metrics(&running).await,
        "nova_webhook_review_budget_used_bytes",
    );
    assert_eq!(taken, Some(0.0), "the whole charge given back");
}

/// One review as the API server sends it after the idle timeout closed its connection: a new
/// HTTP/2 connection (from 127.0.0.1), one POST; its status and how long it took, or what
/// failed.
async fn review_on_a_new_connection(running: &Running) -> Result<(u16, Duration), String> {
    let started = std::time::Instant::now();
    let tls = connect_h2(running.addr, &running.ca_pem)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut client, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(conn);
    let body = review_body("CREATE");
    let req = hyper::Request::post(format!("https://127.0.0.1{VALIDATE}"))
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(Full::<hyper::body::Bytes>::from(body))
        .map_err(|e| e.to_string())?;
    let resp = client
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status().as_u16();
    resp.into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?;
    Ok((status, started.elapsed()))
}

/// How long the idle flood below lasts.
const FLOOD: Duration = Duration::from_secs(3);

/// Thousands of idle connections from one address (127.0.0.2, opened as fast as the machine
/// allows, none sending a byte) against the cap of four, while the API server (127.0.0.1)
/// opens a new connection for a review every 100 ms: every review is answered, because a
/// newcomer from an address holding fewer connections takes the slot of a quiet one of the
/// crowding address (`slots`). Prints the reviews' p50 and p99.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_flood_from_one_address_leaves_room_for_the_api_server() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let running = start(store, Offline, small_limits(), ca.cert_pem()).await;
    let addr = running.addr;
    let flood = tokio::spawn(async move {
        // The newest 500 held open (under the test process's descriptor limit).
        let mut held = std::collections::VecDeque::new();
        let mut opened = 0usize;
        let until = std::time::Instant::now() + FLOOD;
        while std::time::Instant::now() < until {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket.bind("127.0.0.2:0".parse().unwrap()).expect("bind");
            if let Ok(stream) = socket.connect(addr).await {
                opened += 1;
                held.push_back(stream);
                if held.len() > 500 {
                    held.pop_front();
                }
            }
        }
        opened
    });
    let (mut answered, mut failed) = (Vec::new(), Vec::new());
    let until = std::time::Instant::now() + FLOOD;
    while std::time::Instant::now() < until {
        match review_on_a_new_connection(&running).await {
            Ok((200, took)) => answered.push(took),
            other => failed.push(other),
        }
        // The API server's pace of writes, not a wait for state.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let opened = flood.await.expect("the flood");
    assert!(failed.is_empty(), "reviews failed: {failed:?}");
    assert!(opened >= 1000, "the flood opened only {opened} connections");
    let m = metrics(&running).await;
    let evicted = series(&m, "nova_webhook_connections_evicted_total").unwrap_or_default();
    assert!(evicted >= 1.0, "{m}");
    answered.sort();
    let at = |q: f64| answered[((answered.len() - 1) as f64 * q) as usize];
    println!(
        "idle flood: {opened} connections from one address in {FLOOD:?}, {evicted} evicted; {} reviews answered on new connections, p50 {:?}, p99 {:?}",
        answered.len(),
        at(0.5),
        at(0.99)
    );
}

#[tokio::test]
async fn a_head_over_the_cap_is_refused() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let running = start(store, Offline, small_limits(), ca.cert_pem()).await;
    let mut tls = connect(running.addr, &running.ca_pem).await;
    let head = format!(
        "POST {VALIDATE} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: {}\r\nContent-Length: 0\r\n\r\n",
        "x".repeat(20 * KIB)
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
}

#[tokio::test]
async fn an_idle_connection_is_closed() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let limits = Limits {
        idle_timeout: Duration::from_millis(300),
        drain_timeout: Duration::from_millis(300),
        ..small_limits()
    };
    let running = start(store, Offline, limits, ca.cert_pem()).await;
    // Two connections idle: a client that answers the server's pings (hyper's) after one
    // review, and one that never does (the raw one), which HTTP/2's graceful close waits for.
    // Each is told with a GOAWAY and closed.
    let mut flood = RawH2::open(&running).await;
    let mut api = h2_client(&running).await;
    let (status, _, _) = post(&mut api, review_body("CREATE")).await;
    assert_eq!(status, 200);
    let frames = tokio::time::timeout(RELOAD_WAIT, async {
        let mut kinds = Vec::new();
        while let Some((kind, ..)) = flood.next_frame().await {
            kinds.push(kind);
        }
        kinds
    })
    .await
    .expect("the idle connection is closed");
    assert!(
        frames.contains(&GOAWAY),
        "a GOAWAY before the close: {frames:?}"
    );
    Wait::new("the idle closes counted", RELOAD_WAIT)
        .until(|| async {
            series(&metrics(&running).await, "nova_webhook_idle_closed_total") == Some(2.0)
        })
        .await
        .expect("the idle closes counted");
    Wait::new("the client sees its connection closed", RELOAD_WAIT)
        .until(|| async { api.is_closed() })
        .await
        .expect("the client sees its connection closed");
}
