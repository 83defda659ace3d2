//! A real Kubernetes control plane for the test suites.
//!
//! An operator is only proven against a real API server: CRD structural validation and CEL,
//! admission webhooks, server-side apply, status subresources, finalizers and garbage
//! collection are all enforced there and nowhere else. This crate runs etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kwok (fake nodes, fake pod lifecycle) as local
//! processes on loopback ports, the way envtest does for Go operators, with binaries built by
//! `tests/build-control-plane.sh`.
//!
//! ```no_run
//! # async fn t() -> Result<(), nova_test_harness::Error> {
//! let cp = nova_test_harness::shared().await?;   // one per test binary
//! let ns = cp.namespace("my-test").await?;       // one per test
//! let client = cp.client()?;                     // one per test runtime
//! # Ok(()) }
//! ```

mod binaries;
mod control_plane;
mod crds;
mod egress;
pub mod fault_proxy;
pub mod helm;
pub mod http;
pub mod https;
pub mod images;
pub mod kwok;
pub mod local_webhook;
pub mod node;
pub mod openstack;
mod pki;
pub mod pods;
mod process;
pub mod simulated;
pub mod simulated_cert_manager;
pub mod webhook;

use std::path::PathBuf;
use std::time::Duration;

pub use binaries::{K8S_VERSION, default_testbin_dir, testbin_dir};
pub use control_plane::{
    ControlPlane, FrozenApiServer, Options, StartupTimings, shared, shared_real_node,
};
pub use crds::{crd_files, default_crd_dirs, install_crds, read_crds, third_party_dir};
pub use process::Lifetime;
pub use webhook::{
    Canary, CanaryExpectation, WebhookEndpoint, WebhookRegistration, register_webhooks,
    unregister_webhooks, wait_for_webhook,
};

/// Everything that can go wrong while starting or using the control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "test binaries missing in {dir}: {missing}. Build them with \
         `{script}` (or point NOVA_TESTBIN at a directory that has them)"
    )]
    MissingBinaries {
        dir: PathBuf,
        missing: String,
        script: &'static str,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Certs(#[from] nova_certs::CertError),
    #[error("{context}: {message}")]
    Invalid { context: String, message: String },
    #[error("{component} exited ({status}) during start-up; last log lines of {log}:\n{tail}")]
    ComponentExited {
        component: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("timed out after {after:?} waiting for {what}{detail}")]
    Timeout {
        what: String,
        after: Duration,
        detail: String,
    },
    #[error("the shared control plane failed to start earlier in this test binary: {0}")]
    SharedStartFailed(String),
}

/// Shorthand used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

pub(crate) fn kube_err(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let context = context.into();
    move |source| Error::Kube { context, source }
}
