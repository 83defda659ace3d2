//! `nova-webhook`: the defaulting and validating admission webhook of the Nova and NovaCompute
//! kinds. Each kind implements one trait (`admitted`); the admission logic is pure (`review`,
//! `decode`, `validation`); the server (`server`) only moves bytes within its limits (the body
//! budget in `budget`, the idle timeout in `idle`, the connection slots in `slots`), resolves the lookups that need the API
//! server (`lookups`) and counts (`metrics`).

pub mod admitted;
pub mod budget;
pub mod catalog;
pub mod decode;
pub mod field;
pub mod grammar;
pub mod idle;
pub mod limits;
pub mod lookups;
pub mod metrics;
pub mod review;
pub mod selfsigned;
pub mod server;
pub mod slots;
pub mod tls;
pub mod validation;
