//! How a request reaches Keystone, Nova and Placement: a [`Transport`] sends one HTTP request
//! and returns the answer, bounded in time and size. [`Direct`] dials the URL's host itself
//! (a local Nova); [`Proxied`] goes through a target cluster's API server's service proxy (a
//! placed Nova).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::trust::{CaBundle, Trust};

/// The bound of every request, the token request included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a response body that is read.
pub const BODY_LIMIT: usize = 8 * 1024 * 1024;

/// One request. Its headers may carry a token, so it has no `Debug`.
pub struct Request {
    /// The method.
    pub method: http::Method,
    /// The absolute URL.
    pub url: String,
    /// Headers besides Host and Content-Length.
    pub headers: Vec<(&'static str, String)>,
    /// A JSON body.
    pub body: Option<Vec<u8>>,
}

/// One answer.
#[derive(Clone, Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: http::HeaderMap,
    /// The body (at most [`BODY_LIMIT`] bytes).
    pub body: Bytes,
}

impl Response {
    /// The value of a header, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Why a request got no answer. Names the host and port it dialled, never the URL's path or
/// query, a header or the body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The URL does not parse or names no host.
    #[error("the {0} URL is not an absolute http(s) URL")]
    InvalidUrl(&'static str),
    /// The host name did not resolve.
    #[error("{0} does not resolve")]
    Unresolvable(String),
    /// The connection failed.
    #[error("connecting to {address}: {message}")]
    Connect {
        /// host:port.
        address: String,
        /// The socket error.
        message: String,
    },
    /// The TLS handshake failed.
    #[error("TLS with {address}: {message}")]
    Tls {
        /// host:port.
        address: String,
        /// The handshake error.
        message: String,
    },
    /// The HTTP exchange failed.
    #[error("exchanging with {address}: {message}")]
    Http {
        /// host:port.
        address: String,
        /// The protocol error.
        message: String,
    },
    /// The body exceeded [`BODY_LIMIT`].
    #[error("the response of {0} exceeds 8 MiB")]
    TooLarge(String),
    /// No answer within [`REQUEST_TIMEOUT`].
    #[error("{0} did not answer within 10s")]
    TimedOut(String),
    /// A target cluster's service proxy reaches only cluster-local Service URLs.
    #[error(
        "{0} is not a cluster-local Service (<name>.<namespace>.svc[.cluster.local]), which is all a target cluster's service proxy reaches"
    )]
    NotAService(String),
    /// The cluster offers no way to write to its Services (an offline render).
    #[error("this cluster handle cannot write to OpenStack services")]
    Unavailable,
}

/// Sends requests to the Service URLs of one cluster.
pub trait Transport: Send + Sync {
    /// Sends one request and reads its answer, within [`REQUEST_TIMEOUT`].
    fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, TransportError>>;

    /// This transport, verifying https endpoints against `bundle` besides what it trusts
    /// already; None when it does not verify them itself (a target cluster's service proxy:
    /// its API server dials the Service).
    fn trusting(&self, _bundle: &CaBundle) -> Option<Arc<dyn Transport>> {
        None
    }
}

/// A cloud with nothing in it, for `render`: Keystone issues a token, every list is empty, and
/// every write is refused (render's engine records a step's effects instead of carrying them
/// out), so the OpenStack steps decide what they would do in a new cloud.
pub struct EmptyCloud;

/// What every GET of the empty cloud answers: each collection the client lists, empty.
const EMPTY_COLLECTIONS: &str =
    r#"{"services": [], "hypervisors": [], "aggregates": [], "servers": [], "traits": []}"#;

impl Transport for EmptyCloud {
    fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, TransportError>> {
        let answer = |status: u16, headers: http::HeaderMap, body: &'static str| Response {
            status,
            headers,
            body: Bytes::from_static(body.as_bytes()),
        };
        let result = if request.method == http::Method::GET {
            Ok(answer(200, http::HeaderMap::new(), EMPTY_COLLECTIONS))
        } else if request.method == http::Method::POST && request.url.ends_with("/auth/tokens") {
            let mut headers = http::HeaderMap::new();
            headers.insert(
                "X-Subject-Token",
                http::HeaderValue::from_static("empty-cloud"),
            );
            Ok(answer(201, headers, r#"{"token": {"catalog": []}}"#))
        } else {
            Err(TransportError::Unavailable)
        };
        Box::pin(async move { result })
    }
}

/// Plain HTTP(S) from this process: one HTTP/1.1 connection per request (a pass makes a
/// handful), TLS verified against the system's roots and the extra bundles of its [`Trust`].
pub struct Direct {
    /// `host:port` → the address dialled instead of resolving the host: for a controller
    /// outside the cluster, which cannot resolve Service names.
    routes: Arc<BTreeMap<String, SocketAddr>>,
    trust: Trust,
    /// The TLS client configuration, built on the first https request.
    tls: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
    timeout: Duration,
}

impl Direct {
    /// A transport that resolves every host itself and trusts the system's roots.
    pub fn new() -> Self {
        Self::routed(BTreeMap::new(), Trust::default())
    }

    /// A transport that dials `routes[host:port]` for those hosts, and trusts `trust`.
    pub fn routed(routes: BTreeMap<String, SocketAddr>, trust: Trust) -> Self {
        Self {
            routes: Arc::new(routes),
            trust,
            tls: std::sync::OnceLock::new(),
            timeout: REQUEST_TIMEOUT,
        }
    }

    async fn exchange(&self, request: Request) -> Result<Response, TransportError> {
        let url =
            url::Url::parse(&request.url).map_err(|_| TransportError::InvalidUrl("service"))?;
        let https = match url.scheme() {
            "http" => false,
            "https" => true,
            _ => return Err(TransportError::InvalidUrl("service")),
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(TransportError::InvalidUrl("service"));
        };
        let authority = format!("{host}:{port}");
        let dial = match self.routes.get(&authority) {
            Some(address) => *address,
            None => tokio::net::lookup_host((host, port))
                .await
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| TransportError::Unresolvable(authority.clone()))?,
        };
        let tcp =
            tokio::net::TcpStream::connect(dial)
                .await
                .map_err(|e| TransportError::Connect {
                    address: authority.clone(),
                    message: e.to_string(),
                })?;
        let mut builder = http::Request::builder()
            .method(request.method)
            .uri(&url[url::Position::BeforePath..])
            .header(http::header::HOST, &authority);
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        let body = Full::new(Bytes::from(request.body.unwrap_or_default()));
        let outgoing = builder.body(body).map_err(|e| TransportError::Http {
            address: authority.clone(),
            message: e.to_string(),
        })?;
        if https {
            let tls_failed = |message: String| TransportError::Tls {
                address: authority.clone(),
                message,
            };
            let config = self
                .tls
                .get_or_init(|| self.trust.client_config())
                .clone()
                .map_err(tls_failed)?;
            let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                .map_err(|_| TransportError::InvalidUrl("service"))?;
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| tls_failed(e.to_string()))?;
            roundtrip(stream, outgoing, &authority).await
        } else {
            roundtrip(tcp, outgoing, &authority).await
        }
    }
}

impl Default for Direct {
    fn default() -> Self {
        Self::new()
    }
}

impl Transport for Direct {
    fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, TransportError>> {
        Box::pin(async move {
            let authority = authority_of(&request.url);
            tokio::time::timeout(self.timeout, self.exchange(request))
                .await
                .unwrap_or(Err(TransportError::TimedOut(authority)))
        })
    }

    fn trusting(&self, bundle: &CaBundle) -> Option<Arc<dyn Transport>> {
        Some(Arc::new(Self {
            routes: self.routes.clone(),
            trust: self.trust.and(bundle),
            tls: std::sync::OnceLock::new(),
            timeout: self.timeout,
        }))
    }
}

/// The `host:port` of a URL, for messages (empty when it names none).
fn authority_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_default()
}

/// The Services of a target cluster, through its API server's `services/proxy` subresource
/// with the registration credentials (`novacompute.md` §7.1): the controller cannot dial the
/// target's Service network, so only cluster-local Service URLs are reached.
pub struct Proxied {
    client: kube::Client,
}

impl Proxied {
    /// Sends through the API server `client` talks to.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    async fn exchange(
        &self,
        request: Request,
        authority: &str,
    ) -> Result<Response, TransportError> {
        let path = crate::service_proxy::proxy_path(&request.url)
            .ok_or_else(|| TransportError::NotAService(authority.to_owned()))?;
        let failed = |message: String| TransportError::Http {
            address: authority.to_owned(),
            message,
        };
        let mut builder = http::Request::builder().method(request.method).uri(path);
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        let outgoing = builder
            .body(kube::client::Body::from(request.body.unwrap_or_default()))
            .map_err(|e| failed(e.to_string()))?;
        let response = self
            .client
            .send(outgoing)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let (parts, body) = response.into_parts();
        answer(parts, body, authority).await
    }
}

impl Transport for Proxied {
    fn send(&self, request: Request) -> BoxFuture<'_, Result<Response, TransportError>> {
        Box::pin(async move {
            let authority = authority_of(&request.url);
            tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(request, &authority))
                .await
                .unwrap_or(Err(TransportError::TimedOut(authority)))
        })
    }
}

async fn roundtrip<T>(
    io: T,
    request: http::Request<Full<Bytes>>,
    authority: &str,
) -> Result<Response, TransportError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |e: hyper::Error| TransportError::Http {
        address: authority.to_owned(),
        message: e.to_string(),
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(failed)?;
    let driver = tokio::spawn(connection);
    let answer = async {
        let response = sender.send_request(request).await.map_err(failed)?;
        let (parts, body) = response.into_parts();
        answer(parts, body, authority).await
    }
    .await;
    driver.abort();
    answer
}

/// An answer read whole, its body bounded by [`BODY_LIMIT`].
async fn answer<B>(
    parts: http::response::Parts,
    body: B,
    authority: &str,
) -> Result<Response, TransportError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let body = Limited::new(body, BODY_LIMIT)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                TransportError::TooLarge(authority.to_owned())
            } else {
                TransportError::Http {
                    address: authority.to_owned(),
                    message: e.to_string(),
                }
            }
        })?
        .to_bytes();
    Ok(Response {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers one request with `answer` after `delay`, and hands back what it read.
    async fn serve_once(
        answer: &'static str,
        delay: Duration,
    ) -> (SocketAddr, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut request = vec![0u8; 4096];
            let n = socket.read(&mut request).await.expect("read");
            tokio::time::sleep(delay).await;
            let _ = socket.write_all(answer.as_bytes()).await;
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        (address, server)
    }

    fn get(url: &str) -> Request {
        Request {
            method: http::Method::GET,
            url: url.to_owned(),
            headers: vec![("Accept", "application/json".to_owned())],
            body: None,
        }
    }

    #[tokio::test]
    async fn the_service_proxy_reaches_only_cluster_local_services() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
        let proxied = Proxied::new(kube::Client::try_from(config).expect("client"));
        let refused = proxied
            .send(get("http://keystone.example.com:5000/v3"))
            .await;
        assert_eq!(
            refused.err(),
            Some(TransportError::NotAService(
                "keystone.example.com:5000".into()
            )),
            "no request is made for a name the proxy cannot reach"
        );
    }

    #[tokio::test]
    async fn a_routed_host_is_dialled_at_its_address_and_keeps_its_host_header() {
        let (address, server) = serve_once(
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Thing: a\r\n\r\n{}",
            Duration::ZERO,
        )
        .await;
        let direct = Direct::routed(
            BTreeMap::from([("nova.ns.svc.cluster.local:8774".to_owned(), address)]),
            Trust::default(),
        );
        let response = direct
            .send(get(
                "http://nova.ns.svc.cluster.local:8774/v2.1/os-services?binary=nova-compute",
            ))
            .await
            .expect("answered");
        assert_eq!(response.status, 200);
        assert_eq!(&response.body[..], b"{}");
        assert_eq!(response.header("x-thing"), Some("a"));
        let seen = server.await.expect("server");
        assert!(
            seen.starts_with("GET /v2.1/os-services?binary=nova-compute HTTP/1.1\r\n"),
            "{seen}"
        );
        assert!(
            seen.to_ascii_lowercase()
                .contains("host: nova.ns.svc.cluster.local:8774\r\n"),
            "{seen}"
        );
    }

    #[tokio::test]
    async fn a_silent_server_times_out_and_a_closed_port_is_refused() {
        let (address, _server) = serve_once("", Duration::from_secs(30)).await;
        let hurried = Direct {
            timeout: Duration::from_millis(300),
            ..Direct::new()
        };
        let err = hurried
            .send(get(&format!("http://{address}/")))
            .await
            .expect_err("times out");
        assert_eq!(err, TransportError::TimedOut(address.to_string()));
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind")
            .local_addr()
            .expect("address");
        let err = Direct::new()
            .send(get(&format!("http://{closed}/")))
            .await
            .expect_err("refused");
        assert!(matches!(err, TransportError::Connect { .. }), "{err}");
        assert_eq!(
            Direct::new()
                .send(get("ftp://x/"))
                .await
                .expect_err("scheme"),
            TransportError::InvalidUrl("service")
        );
    }

    /// An https server on loopback with a certificate for `keystone.test` issued by `ca`.
    async fn serve_tls(ca: &nova_certs::CertificateAuthority) -> SocketAddr {
        let issued = ca
            .issue_serving("keystone.test", &["keystone.test"])
            .expect("a serving certificate");
        nova_test_harness::https::serve_fixed(
            &issued.cert_pem,
            &issued.key_pem,
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        )
        .await
        .expect("an https server")
    }

    #[tokio::test]
    async fn an_https_endpoint_is_verified_against_the_trusted_bundle_and_named_when_it_fails() {
        let ca = nova_certs::CertificateAuthority::new("test CA").expect("a CA");
        let address = serve_tls(&ca).await;
        let routes = BTreeMap::from([("keystone.test:5443".to_owned(), address)]);
        let untrusting = Direct::routed(routes, Trust::default());
        let err = untrusting
            .send(get("https://keystone.test:5443/v3"))
            .await
            .expect_err("an unknown issuer");
        match &err {
            TransportError::Tls { address, message } => {
                assert_eq!(address, "keystone.test:5443");
                assert!(message.contains("UnknownIssuer"), "{message}");
            }
            other => panic!("not a TLS error: {other}"),
        }
        let bundle = CaBundle::from_pem("the test CA", ca.cert_pem().as_bytes()).expect("bundle");
        let trusting = untrusting
            .trusting(&bundle)
            .expect("a direct transport verifies");
        let response = trusting
            .send(get("https://keystone.test:5443/v3"))
            .await
            .expect("verified against the bundle");
        assert_eq!(response.status, 200);
        let other = nova_certs::CertificateAuthority::new("another CA").expect("a CA");
        let wrong = CaBundle::from_pem("another CA", other.cert_pem().as_bytes()).expect("bundle");
        assert!(matches!(
            untrusting
                .trusting(&wrong)
                .expect("direct")
                .send(get("https://keystone.test:5443/v3"))
                .await,
            Err(TransportError::Tls { .. })
        ));
    }
}
