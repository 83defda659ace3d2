//! The self-signed mode: the webhook keeps its own CA and serving certificate in one Secret,
//! renews them, and injects the CA bundle into its webhook configurations.
//!
//! The decisions are pure (`plan.rs`: [`plan`], [`Servable`]): given what the Secret holds, the CAs the
//! configurations already trust and the time, what to write and what to serve. The shell
//! (`manager.rs`: [`Manager`]) reads the Secret and both configurations on every sync (each request bounded
//! by a timeout), writes only what the plan says (create, or replace under the resourceVersion
//! it read, so replicas converge on one Secret: the loser of a race gets a conflict, re-reads
//! and keeps the winner's certificates), patches a `caBundle` only where it differs, and hands
//! the pair to the [`CertStore`] the TLS acceptor resolves through.
//!
//! The Secret (`kubernetes.io/tls`): `ca.crt` the CA bundle, the signing CA first and then
//! every earlier CA still valid (a serving certificate they signed may still be served
//! somewhere); `ca.key` the signing CA's key; `tls.crt`, `tls.key` the serving pair. The names
//! the serving certificate was issued for are in an annotation, so a change of names reissues.
//!
//! Never a private key in a log line or an error: [`Material`]'s `Debug` leaves the keys out,
//! and the errors of `nova_certs` never quote key material.

mod manager;
mod plan;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use manager::*;
pub use plan::*;

/// The CA bundle: the signing CA first, then the earlier CAs still valid.
pub const CA_BUNDLE_KEY: &str = "ca.crt";
/// The signing CA's private key.
pub const CA_KEY_KEY: &str = "ca.key";
/// The serving certificate.
pub const CERT_KEY: &str = "tls.crt";
/// The serving certificate's private key.
pub const KEY_KEY: &str = "tls.key";
/// The names the serving certificate was issued for, comma-separated.
pub const NAMES_ANNOTATION: &str = "nova.openstack.c5c3.io/serving-names";
/// The share of its life after which a certificate is renewed.
pub const RENEW_AFTER: f64 = 2.0 / 3.0;
/// The longest a new certificate is back-dated, for an API server whose clock is behind.
const MAX_BACKDATE: Duration = Duration::from_secs(60);
