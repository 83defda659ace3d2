//! The serving certificate and its hot reload.
//!
//! One [`CertStore`] resolves the certificate of every handshake. A poller re-reads both files
//! every few seconds and swaps the pair when their contents change: Kubernetes Secret volumes
//! replace a `..data` symlink, so comparing contents sees a rotation where a file-notify on the
//! path would not. A broken new pair keeps the old one serving and is logged once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate pair cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The certificate file holds no usable certificate.
    #[error("{path}: no PEM certificate found")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The certificate PEM is malformed.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// The key or the pair is unusable.
    #[error("the certificate and key cannot be served: {0}")]
    Key(String),
}

/// The current serving pair, and what the files held at the last reload attempt.
pub struct CertStore {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Option<Arc<CertifiedKey>>>,
    /// The served leaf, parsed (validity, for the expiry metric and the renewal decisions).
    served: RwLock<Option<nova_certs::PemCert>>,
    last_seen: Mutex<Option<(Vec<u8>, Vec<u8>)>>,
    /// Whether the API server is known to trust the served certificate: always in file mode,
    /// once its CA is injected in self-signed mode (`require_trust`).
    trusted: AtomicBool,
}

impl std::fmt::Debug for CertStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertStore")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish()
    }
}

/// The outcome of one reload.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    /// A new pair is now served.
    Swapped,
    /// The files did not change since the last attempt.
    Unchanged,
}

/// Builds a serving pair from PEM bytes.
pub fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert_path.to_owned(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: key_path.to_owned(),
        message: e.to_string(),
    })?;
    let ck =
        CertifiedKey::from_der(certs, key, provider).map_err(|e| TlsError::Key(e.to_string()))?;
    // The leaf must parse as a certificate; from_der checks the key matches it.
    Ok(ck)
}

impl CertStore {
    /// A store for the pair at these paths; nothing is loaded yet.
    pub fn new(cert_path: impl Into<PathBuf>, key_path: impl Into<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            cert_path: cert_path.into(),
            key_path: key_path.into(),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            current: RwLock::new(None),
            served: RwLock::new(None),
            last_seen: Mutex::new(None),
            trusted: AtomicBool::new(true),
        })
    }

    /// From now on ready only once `set_trusted(true)`.
    pub fn require_trust(&self) {
        self.trusted.store(false, Ordering::SeqCst);
    }

    /// Whether the API server trusts the served certificate (its CA is in the injected bundle).
    pub fn set_trusted(&self, trusted: bool) {
        self.trusted.store(trusted, Ordering::SeqCst);
    }

    /// Why the store is not ready to serve admission, if it is not.
    pub fn not_ready(&self) -> Option<&'static str> {
        if !self.is_loaded() {
            Some("no serving certificate loaded")
        } else if !self.trusted.load(Ordering::SeqCst) {
            Some("the served certificate's CA is not yet in the webhook configurations' caBundle")
        } else {
            None
        }
    }

    /// The served leaf certificate.
    pub fn served(&self) -> Option<nova_certs::PemCert> {
        self.served.read().ok().and_then(|s| s.clone())
    }

    /// Whether a pair is being served.
    pub fn is_loaded(&self) -> bool {
        self.current.read().map(|c| c.is_some()).unwrap_or(false)
    }

    /// The served pair.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().and_then(|c| c.clone())
    }

    fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    }

    /// Re-reads both files and swaps the pair when they changed and parse. On error the pair
    /// served so far stays.
    pub fn reload(&self) -> Result<Reload, TlsError> {
        let cert = Self::read(&self.cert_path)?;
        let key = Self::read(&self.key_path)?;
        self.set_pem(&cert, &key)
    }

    /// Serves this pair when it differs from the last one given and parses. On error the pair
    /// served so far stays.
    pub fn set_pem(&self, cert: &[u8], key: &[u8]) -> Result<Reload, TlsError> {
        {
            let last = self
                .last_seen
                .lock()
                .map_err(|_| TlsError::Key("lock poisoned".into()))?;
            if last.as_ref().is_some_and(|(c, k)| c == cert && k == key) {
                return Ok(Reload::Unchanged);
            }
        }
        let result = certified_key(cert, key, &self.cert_path, &self.key_path, &self.provider)
            .and_then(|ck| {
                let leaf = std::str::from_utf8(cert)
                    .ok()
                    .and_then(|c| nova_certs::parse_certificates(c).ok())
                    .map(|mut certs| certs.remove(0))
                    .ok_or_else(|| TlsError::NoCertificate {
                        path: self.cert_path.clone(),
                    })?;
                Ok((ck, leaf))
            });
        if let Ok(mut last) = self.last_seen.lock() {
            *last = Some((cert.to_vec(), key.to_vec()));
        }
        let (ck, leaf) = result?;
        if let Ok(mut current) = self.current.write() {
            *current = Some(Arc::new(ck));
        }
        if let Ok(mut served) = self.served.write() {
            *served = Some(leaf);
        }
        Ok(Reload::Swapped)
    }

    /// Reloads every `interval` until `stop` resolves, logging each swap and each broken pair
    /// once.
    pub async fn watch(
        self: Arc<Self>,
        interval: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = ticker.tick() => {}
            }
            let store = self.clone();
            let result = tokio::task::spawn_blocking(move || store.reload()).await;
            match result {
                Ok(Ok(Reload::Swapped)) => {
                    tracing::info!(cert = %self.cert_path.display(), "serving certificate reloaded")
                }
                Ok(Ok(Reload::Unchanged)) => {}
                Ok(Err(e)) => {
                    if self.is_loaded() {
                        tracing::warn!(error = %e, "the new serving certificate is unusable; the previous one keeps serving");
                    } else {
                        tracing::warn!(error = %e, "no usable serving certificate yet; not ready");
                    }
                }
                Err(e) => tracing::error!(error = %e, "certificate reload task failed"),
            }
        }
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// A TLS 1.2/1.3 server configuration over the ring provider, resolving through `store`.
pub fn server_config(store: Arc<CertStore>) -> Result<rustls::ServerConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
