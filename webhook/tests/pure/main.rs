//! The webhook's pure tier, one binary: the HTTPS server (TLS, limits, certificate reload) on a
//! loopback socket of the test process, and its limits under a flood; the reviews under
//! malformed input, the two review paths against each other, and the defaulting patch against
//! the controller's defaulting. No cluster.

mod damage;
mod defaulting;
mod https;
mod limits;
mod oracle;
mod paths;
mod robustness;
