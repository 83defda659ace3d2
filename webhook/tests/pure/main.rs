//! The webhook's pure tier, one binary: the HTTPS server (TLS, limits, certificate reload) on a
//! loopback socket of the test process and the reviews under malformed input. No cluster.

mod damage;
mod https;
mod robustness;
