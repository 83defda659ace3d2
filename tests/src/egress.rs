//! The API server's egress guard: an HTTP CONNECT proxy on a Unix socket that the API server's
//! `cluster` egress (service and pod proxy, kubelet logs and exec, Service-referenced webhooks)
//! goes through, which opens a tunnel only to loopback and, with the real node, its pod subnet
//! and the Service range its kube-proxy maps onto that subnet.
//!
//! kwok gives its pods addresses from a fake pod CIDR that no interface here holds, so an API
//! server asked to proxy to a kwok-played Service (a placed Nova's health probe through a
//! target cluster's `services/proxy`) would otherwise dial them through the default route, off
//! this machine. Refused, the API server answers the proxy request with an error instead, and
//! the guard logs the refusal.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Duration;

use crate::{Result, io_err};

/// How long a tunnel's connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most a CONNECT request's head may hold.
const HEAD_LIMIT: u64 = 8 * 1024;

/// Starts a guard on `dir/egress.sock` (a thread of this process, as long as it lives),
/// tunnelling to loopback and the IPv4 `subnets` (CIDR) only, and
/// writes the API server's egress selector configuration beside it, pointing the `cluster`
/// egress at the guard; returns the flag that loads it. A Unix socket, because the API
/// server's TCP transport to a CONNECT proxy requires TLS.
pub(crate) fn apiserver_flag(dir: &Path, subnets: &'static [&'static str]) -> Result<String> {
    let socket = dir.join("egress.sock");
    let _ = std::fs::remove_file(&socket);
    let listener =
        UnixListener::bind(&socket).map_err(io_err(format!("binding {}", socket.display())))?;
    std::thread::Builder::new()
        .name("egress-guard".into())
        .spawn(move || {
            for client in listener.incoming().flatten() {
                let _ = std::thread::Builder::new()
                    .name("egress-tunnel".into())
                    .spawn(move || tunnel(client, subnets));
            }
        })
        .map_err(io_err("starting the egress guard"))?;
    let config_path = dir.join("egress-selector.yaml");
    let config = format!(
        "apiVersion: apiserver.k8s.io/v1beta1\n\
         kind: EgressSelectorConfiguration\n\
         egressSelections:\n\
         - name: cluster\n  \
           connection:\n    \
             proxyProtocol: HTTPConnect\n    \
             transport:\n      \
               uds:\n        \
                 udsName: {}\n",
        socket.display()
    );
    std::fs::write(&config_path, config)
        .map_err(io_err(format!("writing {}", config_path.display())))?;
    Ok(format!(
        "--egress-selector-config-file={}",
        config_path.display()
    ))
}

/// Serves one CONNECT: a tunnel to an allowed destination, 403 to any other.
fn tunnel(client: UnixStream, subnets: &[&str]) {
    let Ok(reader) = client.try_clone() else {
        return;
    };
    let mut head = BufReader::new(std::io::Read::take(reader, HEAD_LIMIT));
    let mut request_line = String::new();
    if head.read_line(&mut request_line).is_err() {
        return;
    }
    // The rest of the head (the Host header); the API server sends nothing after it before
    // the answer, so nothing is left in the reader's buffer.
    let mut line = String::new();
    while head.read_line(&mut line).is_ok_and(|n| n > 0) && line.trim_end() != "" {
        line.clear();
    }
    let mut client = client;
    let Some(target) = connect_target(&request_line) else {
        let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let Some(destination) = allowed(&target, subnets) else {
        eprintln!(
            "[egress guard] refused the API server's connection to {target}: \
             neither loopback nor in {subnets:?}"
        );
        let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let Ok(upstream) = TcpStream::connect_timeout(&destination, CONNECT_TIMEOUT) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let (Ok(mut client_in), Ok(mut upstream_out)) = (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let forward = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_in, &mut upstream_out);
        let _ = upstream_out.shutdown(std::net::Shutdown::Write);
    });
    let (mut upstream_in, mut client_out) = (upstream, client);
    let _ = std::io::copy(&mut upstream_in, &mut client_out);
    let _ = client_out.shutdown(std::net::Shutdown::Write);
    let _ = forward.join();
}

/// `host:port` of a `CONNECT host:port HTTP/1.1` request line.
fn connect_target(request_line: &str) -> Option<String> {
    let mut words = request_line.split_whitespace();
    match (words.next(), words.next()) {
        (Some("CONNECT"), Some(target)) => Some(target.to_owned()),
        _ => None,
    }
}

/// The address to dial for `target` when every address it names is allowed.
fn allowed(target: &str, subnets: &[&str]) -> Option<SocketAddr> {
    let addresses: Vec<SocketAddr> = target.to_socket_addrs().ok()?.collect();
    let all_allowed =
        !addresses.is_empty() && addresses.iter().all(|a| is_allowed(a.ip(), subnets));
    all_allowed.then(|| addresses[0])
}

fn is_allowed(ip: IpAddr, subnets: &[&str]) -> bool {
    ip.is_loopback()
        || matches!(ip, IpAddr::V4(v4) if subnets.iter().any(|subnet| in_subnet(v4, subnet)))
}

fn in_subnet(ip: Ipv4Addr, subnet: &str) -> bool {
    let Some((network, bits)) = subnet.split_once('/') else {
        return false;
    };
    let (Ok(network), Ok(bits)) = (network.parse::<Ipv4Addr>(), bits.parse::<u32>()) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(network) & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_the_given_subnets_are_allowed() {
        const REAL_NODE: &[&str] = &["10.88.0.0/24", "10.96.0.0/24"];
        for (target, want) in [
            ("127.0.0.1:6443", true),
            ("127.3.2.1:80", true),
            ("[::1]:10250", true),
            ("10.88.0.1:10250", true),
            ("10.88.0.57:8774", true),
            ("10.88.1.5:8774", false),
            ("10.96.0.188:443", true),
            ("10.244.0.5:8774", false),
            ("192.168.1.1:443", false),
            ("8.8.8.8:53", false),
        ] {
            assert_eq!(allowed(target, REAL_NODE).is_some(), want, "{target}");
        }
        assert!(
            allowed("10.88.0.1:10250", &[]).is_none(),
            "kwok only: loopback only"
        );
        assert!(allowed("127.0.0.1:6443", &[]).is_some());
    }

    #[test]
    fn the_request_line_names_the_target() {
        assert_eq!(
            connect_target("CONNECT 10.244.0.5:8774 HTTP/1.1\r\n").as_deref(),
            Some("10.244.0.5:8774")
        );
        assert_eq!(connect_target("GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn a_refused_connect_gets_403_and_an_allowed_one_a_tunnel() {
        let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let echo_address = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = echo.accept() {
                let mut reader = stream.try_clone().unwrap();
                let _ = std::io::copy(&mut reader, &mut stream);
            }
        });
        let dir = std::env::temp_dir().join(format!("nova-egress-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let flag = apiserver_flag(&dir, &[]).unwrap();
        assert!(flag.ends_with("egress-selector.yaml"), "{flag}");
        let config = std::fs::read_to_string(dir.join("egress-selector.yaml")).unwrap();
        assert!(config.contains("udsName: "), "{config}");
        let ask = |target: &str| {
            let mut stream = UnixStream::connect(dir.join("egress.sock")).unwrap();
            write!(
                stream,
                "CONNECT {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            )
            .unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut status = String::new();
            reader.read_line(&mut status).unwrap();
            (status, stream, reader)
        };
        let (status, _, _) = ask("10.244.0.5:8774");
        assert!(status.starts_with("HTTP/1.1 403"), "{status}");

        let (status, mut stream, mut reader) = ask(&echo_address.to_string());
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut blank = String::new();
        reader.read_line(&mut blank).unwrap();
        stream.write_all(b"ping\n").unwrap();
        let mut echoed = String::new();
        reader.read_line(&mut echoed).unwrap();
        assert_eq!(echoed, "ping\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
