//! A minimal HTTP/1.0 client for the harness's own calls to services on the pod bridge
//! (Keystone's REST API, health checks). HTTP/1.0 with `Connection: close` keeps the server from
//! chunking, so a response is read to EOF. Only for addresses on loopback or the harness's bridge.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Error, Result, io_err};

/// A response: status, headers (names lower-cased) and body.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_slice(&self.body).map_err(|e| Error::Invalid {
            context: format!("parsing a {} response as JSON", self.status),
            message: e.to_string(),
        })
    }
}

/// Sends one request. `headers` must not include Host, Content-Length or Connection.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&serde_json::Value>,
) -> Result<Response> {
    let context = format!("{method} http://{addr}{path}");
    let body = body.map(serde_json::Value::to_string).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        Ok::<_, std::io::Error>(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .map_err(|_| Error::Timeout {
            what: context.clone(),
            after: Duration::from_secs(30),
            detail: String::new(),
        })?
        .map_err(io_err(context.clone()))?;
    parse(&raw).ok_or_else(|| Error::Invalid {
        context,
        message: "the answer is not an HTTP response".into(),
    })
}

fn parse(raw: &[u8]) -> Option<Response> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Some(Response {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_split_into_status_headers_and_body() {
        let r = parse(b"HTTP/1.1 201 Created\r\nX-Subject-Token: abc\r\n\r\n{\"a\":1}")
            .expect("parses");
        assert_eq!(r.status, 201);
        assert_eq!(r.header("x-subject-token"), Some("abc"));
        assert_eq!(r.json().expect("json")["a"], 1);
        assert!(parse(b"garbage").is_none());
    }
}
