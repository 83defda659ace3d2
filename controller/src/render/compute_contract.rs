//! The compute contract (`nova-crd.txt`, "Compute contract" and "The remote contract"): the
//! `nova-compute.conf` fragment of `{name}-compute-config` and `{name}-remote-compute-config`,
//! and the contract's non-secret keys.
//!
//! The fragment is built by the same section helpers as nova.conf ([`super::nova_conf`]), so
//! both documents name one service the same way. It leaves out what a compute must not read:
//! no `[database]`, `[api_database]`, `[api]`, `[cache]`, `[scheduler]`, `[conductor]`,
//! `[oslo_concurrency]` or `[filter_scheduler]`; no memcached_servers; no
//! service_metadata_proxy or metadata_proxy_shared_secret; no state_path, log_config_append or
//! default_log_levels; no `[placement] timeout`; and no spec.extraConfig.
//!
//! The remote variant differs in exactly four places: every auth_url and `[barbican]
//! auth_endpoint` is spec.remoteCompute.keystoneEndpoint; valid_interfaces, catalog_info and
//! barbican_endpoint_type name the public catalog rows; the endpoint_override,
//! endpoint_template and barbican_endpoint pins are left out; and its transport_url (added by
//! the ComputeConfig step) is the remote broker URL.

use std::collections::BTreeMap;

use nova_api::names::CELL1;
use nova_api::v1alpha1::NovaSpec;

use super::error::RenderError;
use super::inputs::{SharedInputs, verbatim};
use super::nova_conf::{Addressing, CaFiles, Interface, shared_document};

/// The keys of a compute contract Secret.
pub mod contract_keys {
    /// The nova.conf fragment a nova-compute reads (rendered here).
    pub const NOVA_COMPUTE_CONF: &str = "nova-compute.conf";
    /// The single real cell, `cell1` (rendered here).
    pub const CELL_NAME: &str = "cell_name";
    /// The rabbit:// URL (added by the ComputeConfig step).
    pub const TRANSPORT_URL: &str = "transport_url";
    /// The service-user password (added by the ComputeConfig step).
    pub const PASSWORD: &str = "password";
    /// The metadata proxy shared secret (added by the ComputeConfig step).
    pub const METADATA_PROXY_SHARED_SECRET: &str = "metadata_proxy_shared_secret";
    /// The broker CA bundle, only while spec.messaging.tls is set (added by the ComputeConfig step).
    pub const CA_CRT: &str = "ca.crt";
    /// Beyond the spec (issue 30): spec.tls's CA bundle, only while it is set (added by the
    /// ComputeConfig step); the fragment's `cafile` names it.
    pub const ENDPOINT_CA_CRT: &str = "endpoint-ca.crt";
}

/// Which of the two contracts to render.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContractVariant {
    /// `{name}-compute-config`: in-cluster addresses, for a compute beside this Nova.
    InCluster,
    /// `{name}-remote-compute-config`: addresses that leave the cluster, while
    /// spec.remoteCompute is set.
    Remote,
}

/// The `nova-compute.conf` fragment of one contract. The remote variant requires
/// spec.remoteCompute ([`RenderError::RemoteComputeUnset`] otherwise).
pub fn render_compute_fragment(
    name: &str,
    namespace: &str,
    spec: &NovaSpec,
    variant: ContractVariant,
) -> Result<String, RenderError> {
    let inputs = SharedInputs::resolve(name, namespace, spec)?;
    let addressing = match variant {
        ContractVariant::InCluster => Addressing::in_cluster(&inputs),
        ContractVariant::Remote => {
            let remote = spec
                .remote_compute
                .as_ref()
                .ok_or(RenderError::RemoteComputeUnset)?;
            Addressing {
                auth_url: verbatim(
                    "spec.remoteCompute.keystoneEndpoint",
                    &remote.keystone_endpoint,
                )?,
                interface: Interface::Public,
                overrides: false,
            }
        }
    };
    shared_document(&inputs, &addressing, CaFiles::COMPUTE)
        .render()
        .map_err(|e| RenderError::Section {
            document: contract_keys::NOVA_COMPUTE_CONF,
            section: e.section,
        })
}

/// The contract keys the renderer owns: `nova-compute.conf` and `cell_name` = `cell1`. The
/// ComputeConfig step adds [`secret_contract_keys`] itself.
pub fn contract_static_keys(
    name: &str,
    namespace: &str,
    spec: &NovaSpec,
    variant: ContractVariant,
) -> Result<BTreeMap<String, String>, RenderError> {
    let fragment = render_compute_fragment(name, namespace, spec, variant)?;
    Ok(BTreeMap::from([
        (contract_keys::NOVA_COMPUTE_CONF.to_owned(), fragment),
        (contract_keys::CELL_NAME.to_owned(), CELL1.to_owned()),
    ]))
}

/// The contract keys whose values come from Secrets, which the ComputeConfig step adds:
/// `transport_url`, `password`, `metadata_proxy_shared_secret`, `ca.crt` while
/// spec.messaging.tls is set, and `endpoint-ca.crt` while spec.tls is. The same for both
/// variants.
pub fn secret_contract_keys(spec: &NovaSpec) -> Vec<&'static str> {
    let mut keys = vec![
        contract_keys::TRANSPORT_URL,
        contract_keys::PASSWORD,
        contract_keys::METADATA_PROXY_SHARED_SECRET,
    ];
    if spec.messaging.tls.is_some() {
        keys.push(contract_keys::CA_CRT);
    }
    if spec.tls.is_some() {
        keys.push(contract_keys::ENDPOINT_CA_CRT);
    }
    keys
}
