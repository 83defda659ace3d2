//! The admission server's deadlines and bounds, and what the defaults add up to against the
//! chart's memory limit. Plain data: the server applies them and the metrics show them.

use std::time::Duration;

use crate::budget;

/// The largest admission body read (the API server's own object limit).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Deadlines and bounds of the admission server.
///
/// What the defaults add up to, against the chart's 128 Mi memory limit: the reviews in
/// progress take at most the review budget (64 MiB, one body at the cap and what decoding it can
/// cost, with room beside it for about a hundred ordinary reviews); each of at most 64
/// connections holds its TLS and HTTP state (about 16 KiB idle, measured) and at most one
/// connection window (256 KiB) of body data sent that nobody reads yet; the server itself
/// idles at about 12 MiB. That is under 100 MiB at worst: `benches/exhaust.rs` measured
/// 94 MiB with every connection slot taken by 16 streams of 3 MiB bodies, 75 MiB under 4
/// connections of 200 such streams (`bench/README.md`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The longest a client may take to send the request head.
    pub header_read_timeout: Duration,
    /// The longest a client may take to send the body.
    pub body_read_timeout: Duration,
    /// The longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// The longest in-flight requests may run after shutdown starts, or a connection after it
    /// is closed for being idle.
    pub drain_timeout: Duration,
    /// The body cap.
    pub max_body_bytes: usize,
    /// Connections open at once, those still in their TLS handshake included. One accepted
    /// over it is reset at once: its client learns right away instead of at its own timeout,
    /// and it costs nothing (no handshake, no buffers). The API server keeps a few long-lived
    /// HTTP/2 connections, far under it.
    pub max_connections: usize,
    /// A connection with no request in flight this long is closed (HTTP/2: GOAWAY, so a client
    /// knows to open another).
    pub idle_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once; the HTTP/2 layer refuses more
    /// (`REFUSED_STREAM`). A Go client (the API server) that needs more opens another
    /// connection.
    pub max_concurrent_streams: u32,
    /// The HTTP/2 receive window of one stream: the body bytes a stream may send ahead of the
    /// server's reads. The connection's window is this times the stream cap
    /// (`connection_window_bytes`).
    pub stream_window_bytes: u32,
    /// The largest request head: the HTTP/2 header list, and the HTTP/1 read buffer a head
    /// must fit in (hyper's default lets that buffer grow to about 400 KiB per connection; it
    /// is at least 8 KiB). The API server's heads are a few hundred bytes.
    pub max_header_bytes: u32,
    /// Memory the reviews in progress may use together, across all connections and streams:
    /// each takes its body's length times `budget::MEMORY_PER_BODY_BYTE` before the body is
    /// read (`budget`).
    pub review_budget_bytes: usize,
    /// The longest a review waits for its share of the budget before it is answered 503.
    pub review_budget_wait: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(25),
            max_body_bytes: MAX_BODY_BYTES,
            max_connections: 64,
            idle_timeout: Duration::from_secs(60),
            max_concurrent_streams: 16,
            stream_window_bytes: 16 * 1024,
            max_header_bytes: 16 * 1024,
            review_budget_bytes: 64 * 1024 * 1024,
            review_budget_wait: Duration::from_secs(2),
        }
    }
}

/// The largest HTTP/2 window (RFC 9113 6.9.1).
const HTTP2_MAX_WINDOW: u64 = (1 << 31) - 1;

/// The HTTP/2 connection window before any update (RFC 9113 6.9.2); a connection's window
/// cannot be made smaller.
const HTTP2_INITIAL_WINDOW: u64 = 65_535;

impl Limits {
    /// The HTTP/2 receive window of one connection: every stream's window, so that streams
    /// waiting for the review budget (which read nothing) cannot take the whole connection's
    /// window from a stream being read, as a smaller one let them (a connection of 20 streams
    /// of 3 MiB stalled its one admitted review until the others gave up). With the connection
    /// cap it bounds the data sent that the server holds unread. At least HTTP/2's initial
    /// 65,535 bytes.
    pub fn connection_window_bytes(&self) -> u32 {
        let window = self.stream_windows_bytes();
        u32::try_from(window.clamp(HTTP2_INITIAL_WINDOW, HTTP2_MAX_WINDOW)).unwrap_or(u32::MAX >> 1)
    }

    /// Every stream's window of one connection, added up.
    fn stream_windows_bytes(&self) -> u64 {
        u64::from(self.max_concurrent_streams) * u64::from(self.stream_window_bytes)
    }

    /// What does not work together: a budget under what a body at the cap takes would refuse
    /// every such body, no stream could send a byte through a window of 0, and HTTP/2 caps a
    /// window at 2^31-1 bytes.
    pub fn check(&self) -> Result<(), String> {
        if self.max_connections == 0 || self.max_concurrent_streams == 0 {
            return Err("the connection and stream caps must be at least 1".into());
        }
        let largest = self
            .max_body_bytes
            .saturating_mul(budget::MEMORY_PER_BODY_BYTE);
        if self.review_budget_bytes < largest {
            return Err(format!(
                "the review budget ({} bytes) is under the {largest} bytes a body at the cap \
                 ({} bytes) takes",
                self.review_budget_bytes, self.max_body_bytes
            ));
        }
        if self.stream_window_bytes == 0 || self.stream_windows_bytes() > HTTP2_MAX_WINDOW {
            return Err(format!(
                "the HTTP/2 stream window ({} bytes) times the stream cap ({}) must be from 1 \
                 to 2^31-1 bytes",
                self.stream_window_bytes, self.max_concurrent_streams
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limits_work_together() {
        assert_eq!(Limits::default().check(), Ok(()));
    }

    #[test]
    fn limits_that_do_not_work_together_are_refused() {
        let refused = |limits: Limits| limits.check().unwrap_err();
        let d = Limits::default();
        assert!(
            refused(Limits {
                max_connections: 0,
                ..d
            })
            .contains("at least 1")
        );
        assert!(
            refused(Limits {
                max_concurrent_streams: 0,
                ..d
            })
            .contains("at least 1")
        );
        assert!(
            refused(Limits {
                review_budget_bytes: MAX_BODY_BYTES * budget::MEMORY_PER_BODY_BYTE - 1,
                ..d
            })
            .contains("a body at the cap")
        );
        for stream_window_bytes in [0, 1 << 30] {
            assert!(
                refused(Limits {
                    stream_window_bytes,
                    ..d
                })
                .contains("must be from 1 to 2^31-1")
            );
        }
    }

    #[test]
    fn the_connection_window_holds_every_stream_window() {
        let d = Limits::default();
        assert_eq!(d.connection_window_bytes(), 16 * 16 * 1024);
        let one = Limits {
            max_concurrent_streams: 1,
            stream_window_bytes: 1024,
            ..d
        };
        assert_eq!(
            one.connection_window_bytes(),
            65_535,
            "HTTP/2's initial window at least"
        );
    }
}
