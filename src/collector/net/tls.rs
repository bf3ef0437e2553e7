//! TLS on the daemon's listeners (feature `tls`): rustls with the ring provider, configured by
//! `tls.cert_file` and `tls.key_file` (PEM; the certificate file may hold the chain).
//!
//! One certificate serves the three listeners. The gRPC listener offers ALPN `h2` (gRPC clients
//! require it), the HTTP listeners `http/1.1`. A handshake must finish within
//! `listeners.header_read_timeout`; one that fails or is late closes the connection and is
//! counted (`toolsize_connections_closed_total{reason="tls_handshake"}`). The files are read
//! once at start; a bad file stops the start with an error naming it.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

/// The acceptors of the HTTP/1.1 listeners and of the gRPC listener.
#[derive(Clone)]
pub(crate) struct Acceptors {
    /// OTLP/HTTP and admin (ALPN `http/1.1`).
    pub(crate) http: TlsAcceptor,
    /// OTLP/gRPC (ALPN `h2`).
    pub(crate) grpc: TlsAcceptor,
}

impl std::fmt::Debug for Acceptors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Acceptors")
    }
}

/// Reads the certificate chain and key and builds the acceptors.
pub(crate) fn acceptors(cert_file: &Path, key_file: &Path) -> Result<Acceptors, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", cert_file.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key_file)
        .map_err(|e| format!("cannot read a private key from {}: {e}", key_file.display()))?;
    let config = |alpn: &[u8]| -> Result<TlsAcceptor, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut c = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| format!("{} and {}: {e}", cert_file.display(), key_file.display()))?;
        c.alpn_protocols = vec![alpn.to_vec()];
        Ok(TlsAcceptor::from(Arc::new(c)))
    };
    Ok(Acceptors {
        http: config(b"http/1.1")?,
        grpc: config(b"h2")?,
    })
}
