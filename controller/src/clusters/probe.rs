//! The HTTP probe of a Service's root document the HealthCheck step reads through the cluster
//! handle: one plain-http HTTP/1.1 GET, bounded, classified the way the step's reasons need.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::service_proxy::proxy_path;

/// The bound of one probe.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a response the probe reads.
const RESPONSE_LIMIT: u64 = 64 * 1024;

/// How one probe ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// An HTTP answer: its status code and the start of its body.
    Answered(u16, String),
    /// The name did not resolve.
    Unresolvable,
    /// The connection was refused.
    Refused(String),
    /// No answer within the timeout.
    TimedOut,
    /// Any other failure.
    Failed(String),
}

/// One HTTP/1.1 GET of a plain-http URL, bounded by [`PROBE_TIMEOUT`]. With `connect_to`
/// the connection goes to that address instead of the URL's resolved host (a controller
/// outside the cluster, which cannot resolve Service names); the Host header stays the URL's.
pub async fn get(url: &str, connect_to: Option<SocketAddr>) -> Probe {
    match tokio::time::timeout(PROBE_TIMEOUT, fetch(url, connect_to)).await {
        Ok(probe) => probe,
        Err(_) => Probe::TimedOut,
    }
}

async fn fetch(url: &str, connect_to: Option<SocketAddr>) -> Probe {
    let Ok(parsed) = url::Url::parse(url) else {
        return Probe::Failed("the probe URL does not parse".to_owned());
    };
    let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
        return Probe::Failed("the probe URL names no host".to_owned());
    };
    let address = match connect_to {
        Some(address) => address,
        None => {
            let Ok(mut addresses) = tokio::net::lookup_host((host, port)).await else {
                return Probe::Unresolvable;
            };
            let Some(address) = addresses.next() else {
                return Probe::Unresolvable;
            };
            address
        }
    };
    let mut stream = match tokio::net::TcpStream::connect(address).await {
        Ok(stream) => stream,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Probe::Refused(e.to_string());
        }
        Err(e) => return Probe::Failed(e.to_string()),
    };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
        parsed.path()
    );
    if let Err(e) = stream.write_all(request.as_bytes()).await {
        return Probe::Failed(e.to_string());
    }
    let mut response = Vec::new();
    if let Err(e) = stream.take(RESPONSE_LIMIT).read_to_end(&mut response).await {
        return Probe::Failed(e.to_string());
    }
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .lines()
        .next()
        .and_then(|status| status.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok());
    match code {
        Some(code) => Probe::Answered(code, body.to_owned()),
        None => Probe::Failed("the answer is not HTTP".to_owned()),
    }
}

/// One GET of a cluster-local Service URL on a target cluster, through its API server's
/// `services/proxy` subresource with the registration credentials (`common-types.md` §3.17
/// "API health probe of a placed CR"): the controller cannot dial the target's Service
/// network. Bounded by [`PROBE_TIMEOUT`].
pub async fn through_proxy(client: &kube::Client, url: &str) -> Probe {
    let Some(path) = proxy_path(url) else {
        return Probe::Failed("the probe URL is not a cluster-local Service URL".to_owned());
    };
    let request = match http::Request::get(path).body(Vec::new()) {
        Ok(request) => request,
        Err(e) => return Probe::Failed(e.to_string()),
    };
    match tokio::time::timeout(PROBE_TIMEOUT, client.request_text(request)).await {
        Err(_) => Probe::TimedOut,
        Ok(Ok(body)) => Probe::Answered(200, truncated(body)),
        Ok(Err(kube::Error::Api(status))) => proxy_answer(status.code, &status.message),
        Ok(Err(e)) => Probe::Failed(e.to_string()),
    }
}

/// The API server's wording when its proxy could not dial the Service's endpoint
/// (apimachinery's proxy transport); the error after it names the endpoint it picked.
const PROXY_DIAL_FAILED: &str = "error trying to reach service:";

/// A non-2xx answer through the proxy: the Service's own answer, or the API server's failure
/// to reach it. The latter is a failed connection, and its text names whichever endpoint the
/// API server picked this time, so it is not carried into the condition: a message changing
/// with the endpoint would write status on every pass.
fn proxy_answer(code: u16, message: &str) -> Probe {
    if message.starts_with(PROXY_DIAL_FAILED) {
        Probe::Refused("the target cluster's API server could not reach the Service".to_owned())
    } else {
        Probe::Answered(code, message.to_owned())
    }
}

fn truncated(mut body: String) -> String {
    let limit = usize::try_from(RESPONSE_LIMIT).unwrap_or(usize::MAX);
    if body.len() > limit {
        let mut end = limit;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_failing_to_reach_an_endpoint_is_a_failed_connection_naming_no_endpoint() {
        for endpoint in ["10.244.0.12:8774", "10.244.0.13:8774"] {
            let message = format!(
                "error trying to reach service: dial tcp {endpoint}: connect: connection refused"
            );
            assert_eq!(
                proxy_answer(503, &message),
                Probe::Refused(
                    "the target cluster's API server could not reach the Service".to_owned()
                )
            );
        }
        assert_eq!(
            proxy_answer(503, "service unavailable"),
            Probe::Answered(503, "service unavailable".to_owned())
        );
    }

    #[tokio::test]
    async fn the_probe_reads_a_real_answer_and_dials_the_given_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut request = [0u8; 1024];
            let n = socket.read(&mut request).await.expect("read");
            let answer = if String::from_utf8_lossy(&request[..n]).starts_with("GET / HTTP/1.1\r\n")
            {
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"versions\": []}"
            } else {
                "HTTP/1.1 400 Bad Request\r\n\r\n"
            };
            socket.write_all(answer.as_bytes()).await.expect("write");
        });
        assert_eq!(
            get(&format!("http://127.0.0.1:{port}/"), None).await,
            Probe::Answered(200, "{\"versions\": []}".into())
        );
        server.await.expect("server");
        assert!(matches!(
            get(&format!("http://127.0.0.1:{port}/"), None).await,
            Probe::Refused(_)
        ));
        let redirected = get(
            "http://nova.openstack.svc.cluster.local:8774/",
            Some(([127, 0, 0, 1], port).into()),
        )
        .await;
        assert!(
            matches!(redirected, Probe::Refused(_)),
            "dialled the given address, resolved nothing"
        );
    }
}
