//! The admission server over real TLS: certificate rotation the way a Secret volume does it,
//! a broken pair that keeps the old one serving, the limits, and the graceful drain.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use nova_certs::{CertificateAuthority, IssuedCert};
use nova_webhook::limits::Limits;
use nova_webhook::lookups::{Lookups, Needs, NovaRelease, PriorityClassLookup};
use nova_webhook::metrics::Metrics;
use nova_webhook::review::{Offline, Resolver};
use nova_webhook::server::{self, AppState};
use nova_webhook::tls::{self, CertStore};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use nova_testkit::fixtures::EXAMPLE_NOVA_YAML as EXAMPLE_NOVA;
use nova_testkit::wait::Wait;

/// How long a reload or a counter may take to show (the certificate store polls every 100 ms).
pub(super) const RELOAD_WAIT: Duration = Duration::from_secs(10);

pub(super) fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A Secret-volume-like directory: `tls.crt` and `tls.key` are symlinks through `..data`,
/// which a rotation re-points atomically.
struct SecretDir {
    root: PathBuf,
    generation: usize,
}

impl SecretDir {
    fn new(root: &Path, pair: &IssuedCert) -> Self {
        let mut dir = Self {
            root: root.to_owned(),
            generation: 0,
        };
        dir.swap(&pair.cert_pem, &pair.key_pem);
        std::os::unix::fs::symlink("..data/tls.crt", root.join("tls.crt")).unwrap();
        std::os::unix::fs::symlink("..data/tls.key", root.join("tls.key")).unwrap();
        dir
    }

    fn swap(&mut self, cert: &str, key: &str) {
        self.generation += 1;
        let version = format!("..v{}", self.generation);
        let dir = self.root.join(&version);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tls.crt"), cert).unwrap();
        std::fs::write(dir.join("tls.key"), key).unwrap();
        let tmp = self.root.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&version, &tmp).unwrap();
        std::fs::rename(&tmp, self.root.join("..data")).unwrap();
    }

    fn cert(&self) -> PathBuf {
        self.root.join("tls.crt")
    }

    fn key(&self) -> PathBuf {
        self.root.join("tls.key")
    }
}

/// A CA and a store serving a leaf it issued, from a Secret-volume-like directory (kept while
/// the returned directory lives).
pub(super) fn serving() -> (CertificateAuthority, Arc<CertStore>, tempfile::TempDir) {
    let ca = CertificateAuthority::new("webhook test CA").unwrap();
    let leaf = ca.issue_serving("nova-webhook", &["127.0.0.1"]).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = SecretDir::new(tmp.path(), &leaf);
    let store = CertStore::new(dir.cert(), dir.key());
    store.reload().unwrap();
    (ca, store, tmp)
}

pub(super) struct Running {
    pub(super) addr: SocketAddr,
    pub(super) admin: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
    pub(super) ca_pem: String,
}

pub(super) async fn start<R: Resolver + Send + Sync + 'static>(
    store: Arc<CertStore>,
    resolver: R,
    limits: Limits,
    ca_pem: &str,
) -> Running {
    let metrics = Arc::new(Metrics::new().unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = admin_listener.local_addr().unwrap();
    tokio::spawn(server::serve_plain(
        admin_listener,
        server::admin_router(metrics.clone(), store.clone()),
        std::future::pending(),
    ));
    tokio::spawn(
        store
            .clone()
            .watch(Duration::from_millis(100), std::future::pending()),
    );
    let state = Arc::new(AppState::new(resolver, metrics.clone(), limits));
    let config = tls::server_config(store).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server::serve_tls(
        listener,
        config,
        server::admission_router(state),
        limits,
        metrics,
        async move {
            let _ = stopped.await;
        },
    ));
    Running {
        addr,
        admin,
        stop: Some(stop),
        done,
        ca_pem: ca_pem.to_owned(),
    }
}

pub(super) fn client_config(ca_pem: &str) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

pub(super) async fn connect(
    addr: SocketAddr,
    ca_pem: &str,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(ca_pem)));
    let tcp = TcpStream::connect(addr).await.unwrap();
    connector
        .connect(ServerName::try_from("127.0.0.1").unwrap().to_owned(), tcp)
        .await
        .unwrap()
}

async fn served_leaf(addr: SocketAddr, ca_pem: &str) -> Vec<u8> {
    let tls = connect(addr, ca_pem).await;
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .as_ref()
        .to_vec()
}

fn leaf_der(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .as_ref()
        .to_vec()
}

async fn http<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The server may answer (413) and close before an oversized body is written.
    let _ = stream.write_all(body).await;
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

pub(super) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (
        code,
        text.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default(),
    )
}

pub(super) fn review_body(operation: &str) -> Vec<u8> {
    let object: serde_json::Value = serde_saphyr::from_str(EXAMPLE_NOVA).unwrap();
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "kind": "Nova"},
            "operation": operation,
            "name": "nova",
            "namespace": "openstack",
            "object": object,
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn rotation_broken_pairs_and_readiness() {
    install_provider();
    let ca = CertificateAuthority::new("webhook test CA").unwrap();
    let first = ca.issue_serving("nova-webhook", &["127.0.0.1"]).unwrap();
    let second = ca.issue_serving("nova-webhook", &["127.0.0.1"]).unwrap();
    let third = ca.issue_serving("nova-webhook", &["127.0.0.1"]).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    std::fs::create_dir_all(&missing).unwrap();

    // Not ready while no pair can be loaded; ready once one appears.
    let store = CertStore::new(missing.join("tls.crt"), missing.join("tls.key"));
    assert!(store.reload().is_err());
    let pending = start(store.clone(), Offline, Limits::default(), ca.cert_pem()).await;
    assert_eq!(get(pending.admin, "/readyz").await.0, 503);
    assert_eq!(get(pending.admin, "/healthz").await.0, 200);
    std::fs::write(missing.join("tls.crt"), &first.cert_pem).unwrap();
    std::fs::write(missing.join("tls.key"), &first.key_pem).unwrap();
    Wait::new("readiness", RELOAD_WAIT)
        .until(|| async { get(pending.admin, "/readyz").await.0 == 200 })
        .await
        .expect("readiness");

    let mut dir = SecretDir::new(&tmp.path().join("secret"), &first);
    let store = CertStore::new(dir.cert(), dir.key());
    store.reload().unwrap();
    let running = start(store, Offline, Limits::default(), ca.cert_pem()).await;
    assert_eq!(
        served_leaf(running.addr, &running.ca_pem).await,
        leaf_der(&first.cert_pem)
    );

    // A kept-alive connection survives the rotation; a new handshake sees the new pair.
    let mut old_conn = connect(running.addr, &running.ca_pem).await;
    dir.swap(&second.cert_pem, &second.key_pem);
    Wait::new("the rotated certificate", RELOAD_WAIT)
        .until(|| async {
            served_leaf(running.addr, &running.ca_pem).await == leaf_der(&second.cert_pem)
        })
        .await
        .expect("the rotated certificate");
    let (code, body) = http(
        &mut old_conn,
        "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
        &review_body("CREATE"),
    )
    .await;
    assert_eq!(code, 200, "{body}");

    // A broken pair (garbage key; a key of another certificate) keeps the last good one.
    dir.swap(
        &third.cert_pem,
        "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n",
    );
    // A negative over time: a few of the store's 100 ms polls pass and the old leaf stays.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        served_leaf(running.addr, &running.ca_pem).await,
        leaf_der(&second.cert_pem)
    );
    dir.swap(&third.cert_pem, &first.key_pem);
    // A negative over time, as above.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        served_leaf(running.addr, &running.ca_pem).await,
        leaf_der(&second.cert_pem)
    );
    dir.swap(&third.cert_pem, &third.key_pem);
    Wait::new("the repaired pair", RELOAD_WAIT)
        .until(|| async {
            served_leaf(running.addr, &running.ca_pem).await == leaf_der(&third.cert_pem)
        })
        .await
        .expect("the repaired pair");
}

#[tokio::test]
async fn admission_over_tls_and_the_limits() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let limits = Limits {
        header_read_timeout: Duration::from_millis(500),
        body_read_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let running = start(store, Offline, limits, ca.cert_pem()).await;

    // Validation and defaulting of the Example.
    let (code, body) = http(
        &mut connect(running.addr, &running.ca_pem).await,
        "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
        &review_body("CREATE"),
    )
    .await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["response"]["allowed"], true, "{body}");
    let (_, body) = http(
        &mut connect(running.addr, &running.ca_pem).await,
        "/mutate-nova-openstack-c5c3-io-v1alpha1-nova",
        &review_body("CREATE"),
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["response"]["patchType"], "JSONPatch");
    assert!(v["response"]["patch"].is_string());

    // Not JSON: 400 with a message. Unknown path: 404.
    let (code, body) = http(
        &mut connect(running.addr, &running.ca_pem).await,
        "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
        b"{nope",
    )
    .await;
    assert_eq!(code, 400);
    assert!(body.contains("not an AdmissionReview"), "{body}");
    let (code, _) = http(
        &mut connect(running.addr, &running.ca_pem).await,
        "/validate-something-else",
        b"{}",
    )
    .await;
    assert_eq!(code, 404);

    // Oversized body.
    let big = vec![b' '; 4 * 1024 * 1024];
    let mut conn = connect(running.addr, &running.ca_pem).await;
    let (code, _) = http(
        &mut conn,
        "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
        &big,
    )
    .await;
    assert_eq!(code, 413);

    // Plain HTTP on the TLS port.
    let mut tcp = TcpStream::connect(running.addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).await.unwrap();
    assert!(
        String::from_utf8_lossy(&out).starts_with("HTTP/1.0 400 Bad Request"),
        "{}",
        String::from_utf8_lossy(&out)
    );

    // A slow client: a head that never completes, and a body that never arrives.
    let started = Instant::now();
    let mut slow = connect(running.addr, &running.ca_pem).await;
    slow.write_all(b"POST /validate-nova-openstack-c5c3-io-v1alpha1-nova HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut out))
        .await
        .expect("the server closes a slow head");
    assert!(started.elapsed() < Duration::from_secs(4));
    let mut slow = connect(running.addr, &running.ca_pem).await;
    slow.write_all(b"POST /validate-nova-openstack-c5c3-io-v1alpha1-nova HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{").await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut out))
        .await
        .expect("the server answers a slow body");
    assert!(
        String::from_utf8_lossy(&out).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&out)
    );

    // A TLS 1.1-only client is refused (rustls offers nothing below 1.2 anyway); a handshake
    // that never starts is dropped.
    let (code, metrics) = get(running.admin, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("nova_webhook_requests_total{operation=\"CREATE\",outcome=\"allowed\",webhook=\"/validate-nova-openstack-c5c3-io-v1alpha1-nova\"}"), "{metrics}");
    assert!(metrics.contains("nova_webhook_request_duration_seconds_bucket"));
    assert!(!metrics.contains("\"nova\""), "no object names as labels");
}

/// The value of the unlabelled or fully labelled series `series` in `metrics`.
pub(super) fn series(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn connections_are_counted_by_alpn_while_open() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let running = start(store, Offline, Limits::default(), ca.cert_pem()).await;

    let mut config = client_config(&running.ca_pem);
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(running.addr).await.unwrap();
    let h2 = connector
        .connect(ServerName::try_from("127.0.0.1").unwrap().to_owned(), tcp)
        .await
        .unwrap();
    let http1 = connect(running.addr, &running.ca_pem).await;
    Wait::new(
        "one h2 and one ALPN-less connection counted, both open",
        RELOAD_WAIT,
    )
    .until(|| async {
        let metrics = get(running.admin, "/metrics").await.1;
        series(&metrics, "nova_webhook_connections_total{alpn=\"h2\"}") == Some(1.0)
            && series(&metrics, "nova_webhook_connections_total{alpn=\"none\"}") == Some(1.0)
            && series(&metrics, "nova_webhook_open_connections") == Some(2.0)
    })
    .await
    .expect("one h2 and one ALPN-less connection counted, both open");
    drop((h2, http1));
    Wait::new("no connection open once both closed", RELOAD_WAIT)
        .until(|| async {
            series(
                &get(running.admin, "/metrics").await.1,
                "nova_webhook_open_connections",
            ) == Some(0.0)
        })
        .await
        .expect("no connection open once both closed");
}

/// A resolver whose PriorityClass lookups take a while, to hold a review in flight.
struct Slow;

impl Resolver for Slow {
    fn resolve<'a>(&'a self, needs: &'a Needs) -> BoxFuture<'a, Result<Lookups, String>> {
        Box::pin(async move {
            // The slowness is the point: the review stays in flight through the shutdown.
            tokio::time::sleep(Duration::from_millis(700)).await;
            Ok(Lookups {
                priority_classes: Some(
                    needs
                        .priority_classes
                        .iter()
                        .map(|n| (n.clone(), PriorityClassLookup::Exists))
                        .collect(),
                ),
                nova: needs.nova.as_ref().map(|_| NovaRelease::NotFound),
                novas: None,
            })
        })
    }
}

#[tokio::test]
async fn shutdown_finishes_in_flight_reviews() {
    install_provider();
    let (ca, store, _tmp) = serving();
    let mut running = start(store, Slow, Limits::default(), ca.cert_pem()).await;

    let mut object: serde_json::Value = serde_saphyr::from_str(EXAMPLE_NOVA).unwrap();
    object["spec"]["scheduler"] = serde_json::json!({"deployment": {"priorityClassName": "high"}});
    let body = serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-2", "kind": {"group": "nova.openstack.c5c3.io", "version": "v1alpha1", "kind": "Nova"}, "operation": "CREATE", "object": object},
    }))
    .unwrap();
    let mut conn = connect(running.addr, &running.ca_pem).await;
    let in_flight = tokio::spawn(async move {
        http(
            &mut conn,
            "/validate-nova-openstack-c5c3-io-v1alpha1-nova",
            &body,
        )
        .await
    });
    // Into the slow lookup's 700 ms, so the shutdown meets the review in flight.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = running.stop.take().unwrap().send(());
    let (code, body) = in_flight.await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"allowed\":true"), "{body}");
    tokio::time::timeout(Duration::from_secs(5), &mut running.done)
        .await
        .expect("the server stops")
        .unwrap();
    assert!(
        TcpStream::connect(running.addr).await.is_err(),
        "the listener is closed"
    );
}
