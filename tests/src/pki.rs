//! The control plane's certificates and the admin kubeconfig.
//!
//! One CA signs the API server's serving certificate and the admin client certificate, and
//! doubles as the controller-manager's cluster signer; a separate key pair signs
//! service-account tokens (the layout of the test-control-plane facts, §3.2).

use std::path::{Path, PathBuf};

use base64::Engine;
use nova_certs::{CertificateAuthority, signing_key_pair, write_file};

use crate::{Error, Result, io_err};

/// Paths of the generated files.
#[derive(Clone, Debug)]
pub(crate) struct Pki {
    pub ca_crt: PathBuf,
    pub ca_key: PathBuf,
    pub apiserver_crt: PathBuf,
    pub apiserver_key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
    /// The CA certificate, for kubeconfigs and webhook clients.
    pub ca_pem: String,
    pub admin_crt_pem: String,
    pub admin_key_pem: String,
}

/// Generates every certificate and key into `dir`; returns the CA too, so components started
/// later (the real node's kubelet) can be issued certificates of their own.
pub(crate) fn generate(dir: &Path) -> Result<(Pki, CertificateAuthority)> {
    std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    let ca = CertificateAuthority::new("nova-test-ca")?;
    let apiserver = ca.issue_serving(
        "kube-apiserver",
        &[
            "127.0.0.1",
            crate::node::BRIDGE_IP,
            "10.96.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )?;
    let admin = ca.issue_client("nova-test-admin", &["system:masters"])?;
    let sa = signing_key_pair()?;

    let pki = Pki {
        ca_crt: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        apiserver_crt: dir.join("apiserver.crt"),
        apiserver_key: dir.join("apiserver.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
        ca_pem: ca.cert_pem().to_owned(),
        admin_crt_pem: admin.cert_pem.clone(),
        admin_key_pem: admin.key_pem.clone(),
    };
    write_file(&pki.ca_crt, ca.cert_pem(), false)?;
    write_file(&pki.ca_key, ca.key_pem(), true)?;
    write_file(&pki.apiserver_crt, &apiserver.cert_pem, false)?;
    write_file(&pki.apiserver_key, &apiserver.key_pem, true)?;
    write_file(&dir.join("admin.crt"), &admin.cert_pem, false)?;
    write_file(&dir.join("admin.key"), &admin.key_pem, true)?;
    write_file(&pki.sa_key, &sa.private_pem, true)?;
    write_file(&pki.sa_pub, &sa.public_pem, false)?;
    Ok((pki, ca))
}

/// Writes a self-contained admin kubeconfig (certificates embedded) for `server`.
pub(crate) fn write_kubeconfig(path: &Path, server: &str, pki: &Pki) -> Result<()> {
    write_kubeconfig_for(
        path,
        server,
        &pki.ca_pem,
        &pki.admin_crt_pem,
        &pki.admin_key_pem,
    )
}

/// Writes a self-contained kubeconfig for one client certificate.
pub(crate) fn write_kubeconfig_for(
    path: &Path,
    server: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<()> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "nova-test",
            "cluster": { "server": server, "certificate-authority-data": b64(ca_pem) }
        }],
        "users": [{
            "name": "nova-test-admin",
            "user": {
                "client-certificate-data": b64(cert_pem),
                "client-key-data": b64(key_pem)
            }
        }],
        "contexts": [{
            "name": "nova-test",
            "context": { "cluster": "nova-test", "user": "nova-test-admin", "namespace": "default" }
        }],
        "current-context": "nova-test"
    });
    let text = serde_saphyr::to_string(&config).map_err(|e| Error::Invalid {
        context: "serializing the kubeconfig".into(),
        message: e.to_string(),
    })?;
    write_file(path, &text, true)?;
    Ok(())
}
