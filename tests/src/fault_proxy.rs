//! A fault proxy on loopback: a TCP listener in front of one HTTP/1.1 service (Keystone,
//! Placement) that passes traffic through until told to inject a fault, the way a brownout
//! looks to a client:
//! - [`Fault::Unavailable`]: every request answered `503 Service Unavailable` at once;
//! - [`Fault::Delay`]: every request held for the delay, then passed through;
//! - [`Fault::DropAfterHeaders`]: every request passed through, its answer's status line and
//!   headers sent back, and the connection closed before the body.
//!
//! A change of fault closes every open connection (as a failing network path would), so a
//! client's pooled keep-alive connection meets the new fault on its next request. Under a
//! fault each connection carries one request (the request is rewritten to `Connection: close`,
//! so the upstream ends the answer by closing). It dials only the upstream it was given.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to the requests it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Traffic passes through.
    None,
    /// Every request answered 503.
    Unavailable,
    /// Every request held this long, then passed through.
    Delay(Duration),
    /// Every answer cut after its headers.
    DropAfterHeaders,
}

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;
/// How long a connection may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A running fault proxy; it stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    accepted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
        // Every connection task follows the fault channel and ends with it.
        self.fault.send_replace(Fault::None);
    }
}

impl FaultProxy {
    /// Listens on a free loopback port in front of `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (fault, _) = watch::channel(Fault::None);
        let accepted = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(accept(listener, upstream, fault.clone(), accepted.clone()));
        Ok(Self {
            addr,
            fault,
            accepted,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Injects `fault` from now on, closing every open connection.
    pub fn inject(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }

    /// How many connections it accepted.
    pub fn connections(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    fault: watch::Sender<Fault>,
    accepted: Arc<AtomicU64>,
) {
    while let Ok((client, _)) = listener.accept().await {
        accepted.fetch_add(1, Ordering::Relaxed);
        let mut changed = fault.subscribe();
        let now = *changed.borrow_and_update();
        tokio::spawn(async move {
            tokio::select! {
                _ = carry(client, upstream, now) => {}
                _ = changed.changed() => {}
            }
        });
    }
}

/// Carries one connection under `fault`.
async fn carry(mut client: TcpStream, upstream: SocketAddr, fault: Fault) {
    if fault == Fault::None {
        if let Ok(mut server) = TcpStream::connect(upstream).await {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
        return;
    }
    let Ok(Ok(request)) = tokio::time::timeout(HEAD_TIMEOUT, read_request(&mut client)).await
    else {
        return;
    };
    match fault {
        Fault::Unavailable => {
            let answer = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 24\r\nconnection: close\r\n\r\nfault proxy: unavailable";
            let _ = client.write_all(answer.as_bytes()).await;
        }
        Fault::Delay(delay) => {
            tokio::time::sleep(delay).await;
            let _ = pass_one(&mut client, upstream, &request, false).await;
        }
        Fault::DropAfterHeaders => {
            let _ = pass_one(&mut client, upstream, &request, true).await;
        }
        Fault::None => {}
    }
    let _ = client.shutdown().await;
}

/// Sends `request` upstream and its answer back, whole or (with `headers_only`) up to the end
/// of its headers.
async fn pass_one(
    client: &mut TcpStream,
    upstream: SocketAddr,
    request: &[u8],
    headers_only: bool,
) -> std::io::Result<()> {
    let mut server = TcpStream::connect(upstream).await?;
    server.write_all(request).await?;
    if !headers_only {
        tokio::io::copy(&mut server, client).await?;
        return Ok(());
    }
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = server.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if let Some(end) = head_end(&seen) {
            client.write_all(&seen[..end]).await?;
            break;
        }
    }
    Ok(())
}

/// Where a head ends (the index after its blank line).
fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// Reads one request (its head, and a body of the length it declares), its `Connection`
/// header replaced by `close`.
async fn read_request(client: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(end) = head_end(&seen) {
            break end;
        }
        if seen.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
        let n = client.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        seen.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&seen[..end]).into_owned();
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = seen[end..].to_vec();
    while body.len() < length {
        let n = client.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        body.extend_from_slice(&buf[..n]);
    }
    let mut request: Vec<u8> = head
        .trim_end()
        .lines()
        .filter(|l| {
            !l.split_once(':')
                .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("connection"))
        })
        .flat_map(|l| format!("{l}\r\n").into_bytes())
        .collect();
    request.extend_from_slice(b"connection: close\r\n\r\n");
    request.extend_from_slice(&body);
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream answering every request with `200` and a 5-byte body, then closing.
    async fn upstream() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = read_request(&mut conn).await;
                    let _ = conn
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
                        .await;
                });
            }
        });
        addr
    }

    async fn ask(addr: SocketAddr) -> String {
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        conn.write_all(b"POST /v3/auth/tokens HTTP/1.1\r\nhost: x\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\n{}")
            .await
            .expect("write");
        let mut answer = String::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), conn.read_to_string(&mut answer)).await;
        answer
    }

    #[tokio::test]
    async fn each_fault_shapes_the_answer_and_none_passes_it() {
        let proxy = FaultProxy::start(upstream().await).await.expect("proxy");
        assert!(ask(proxy.addr()).await.ends_with("hello"), "passed through");
        proxy.inject(Fault::Unavailable);
        assert!(ask(proxy.addr()).await.starts_with("HTTP/1.1 503"));
        proxy.inject(Fault::DropAfterHeaders);
        let cut = ask(proxy.addr()).await;
        assert!(
            cut.starts_with("HTTP/1.1 200 OK") && cut.ends_with("\r\n\r\n"),
            "{cut:?}"
        );
        proxy.inject(Fault::Delay(Duration::from_millis(50)));
        assert!(
            ask(proxy.addr()).await.ends_with("hello"),
            "delayed, then passed"
        );
        assert_eq!(proxy.connections(), 4);
    }

    #[tokio::test]
    async fn a_request_is_read_whole_and_rewritten_to_close_its_connection() {
        let mut sent: &[u8] =
            b"POST /x HTTP/1.1\r\nHost: p\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}";
        let request = read_request(&mut sent).await.expect("a request");
        assert_eq!(
            String::from_utf8(request).expect("text"),
            "POST /x HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nconnection: close\r\n\r\n{}"
        );
    }
}
