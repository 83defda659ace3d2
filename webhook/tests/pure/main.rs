//! The webhook's pure tier, one binary: the HTTPS server (TLS, limits, certificate reload) on a
//! loopback socket of the test process, the reviews under malformed input, and the two review
//! paths against each other. No cluster.

mod damage;
mod https;
mod paths;
mod robustness;
