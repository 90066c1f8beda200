//! TLS for `https://` endpoints: rustls with the ring provider (feature `tls`, on in the
//! command's default build).
//!
//! **Whom a push trusts.** By default, Mozilla's roots as `webpki-roots` compiles them in and
//! the system's store (`rustls-native-certs`: `SSL_CERT_FILE`, `SSL_CERT_DIR`, else the
//! distribution's bundle); with [`Trust::CaFile`] (`--cacert FILE`), only the certificates in
//! that PEM file, as curl's `--cacert` replaces its bundle: a private CA's endpoint is then
//! trusted for that CA alone. TLS 1.2 and 1.3 only; the server's name (or IP address) must be
//! in its certificate.
//!
//! **Refusals say why**: an unknown certificate authority, a certificate for
//! another name, an expired or not yet valid one, a server that does not speak TLS (a plain
//! `http://` server behind an `https://` URL). None of these is retried: the next attempt
//! would meet the same certificate.

use std::io;
use std::net::TcpStream;
use std::path::PathBuf;

/// Which certificate authorities a push trusts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Trust {
    /// Mozilla's roots (compiled in) and the system's store.
    #[default]
    Default,
    /// Only the certificates in this PEM file.
    CaFile(PathBuf),
}

#[cfg(feature = "tls")]
mod rustls_client {
    use super::*;
    use std::path::Path;
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use rustls::{CertificateError, ClientConfig, ClientConnection, RootCertStore, StreamOwned};

    /// A TLS client configuration, made once per push and shared by its connections.
    #[derive(Debug, Clone)]
    pub struct TlsClient {
        config: Arc<ClientConfig>,
    }

    /// A connection whose handshake has completed.
    pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

    impl TlsClient {
        /// The configuration trusting `trust`'s authorities; errors name the CA file, never
        /// its content.
        pub fn new(trust: &Trust) -> Result<TlsClient, String> {
            let mut roots = RootCertStore::empty();
            match trust {
                Trust::Default => {
                    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                    // A store that cannot be read (no bundle in a container) leaves Mozilla's.
                    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                }
                Trust::CaFile(path) => {
                    let (added, _ignored) = roots.add_parsable_certificates(ca_file(path)?);
                    if added == 0 {
                        return Err(format!("{}: no certificate in it could be used", path.display()));
                    }
                }
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(TlsClient { config: Arc::new(config) })
        }

        /// Completes a handshake with `host` over `tcp` (its time-outs bound each step).
        pub fn connect(&self, host: &str, mut tcp: TcpStream) -> Result<TlsStream, Refusal> {
            let name = ServerName::try_from(host.to_owned())
                .map_err(|_| Refusal::Final(format!("{host}: not a name or address TLS can check")))?;
            let mut conn = ClientConnection::new(self.config.clone(), name)
                .map_err(|e| Refusal::Final(format!("TLS with {host}: {e}")))?;
            while conn.is_handshaking() {
                conn.complete_io(&mut tcp).map_err(|e| explain(host, e))?;
            }
            Ok(StreamOwned::new(conn, tcp))
        }
    }

    /// The certificates of a PEM file.
    fn ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("{}: not a PEM file of certificates ({e})", path.display()))?;
        if certs.is_empty() {
            return Err(format!("{}: no certificate in it", path.display()));
        }
        Ok(certs)
    }

    /// Why a handshake failed, in the user's terms: final when TLS itself refused (the same
    /// certificate would be met again), otherwise the connection's error (retried).
    pub(crate) fn explain(host: &str, e: io::Error) -> Refusal {
        let Some(tls) = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) else {
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Refusal::Retry(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{host} did not complete a TLS handshake in time (a plain http:// server?)"),
                )),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => Refusal::Retry(io::Error::new(
                    e.kind(),
                    format!("{host} closed the connection during the TLS handshake (a plain http:// server?): {e}"),
                )),
                _ => Refusal::Retry(e),
            };
        };
        Refusal::Final(match tls {
            rustls::Error::InvalidCertificate(c) => match c {
                CertificateError::UnknownIssuer => format!(
                    "{host}'s certificate is not signed by an authority this push trusts (for a private CA: --cacert FILE)"
                ),
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                    format!("{host}'s certificate is for another name than {host}")
                }
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    format!("{host}'s certificate has expired")
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    format!("{host}'s certificate is not valid yet")
                }
                other => format!("{host}'s certificate is refused: {other:?}"),
            },
            rustls::Error::InvalidMessage(_) => {
                format!("{host} does not speak TLS there (a plain http:// server behind an https:// URL?)")
            }
            other => format!("TLS with {host} failed: {other}"),
        })
    }
}

#[cfg(feature = "tls")]
pub use rustls_client::{TlsClient, TlsStream};

/// A build without the `tls` feature: `https://` endpoints are refused.
#[cfg(not(feature = "tls"))]
mod without_tls {
    use super::*;

    /// A TLS client configuration; this build has none ([`TlsClient::new`] refuses).
    #[derive(Debug, Clone)]
    pub struct TlsClient {
        never: std::convert::Infallible,
    }

    /// A connection whose handshake has completed (none in this build).
    pub type TlsStream = TcpStream;

    impl TlsClient {
        /// Refuses: this build has no TLS.
        pub fn new(_trust: &Trust) -> Result<TlsClient, String> {
            Err("https:// needs TLS, which this build of the tachyon library leaves out (the `tls` feature)".into())
        }

        /// Never called: no value of this type exists.
        pub fn connect(&self, _host: &str, _tcp: TcpStream) -> Result<TlsStream, Refusal> {
            match self.never {}
        }
    }
}

#[cfg(not(feature = "tls"))]
pub use without_tls::{TlsClient, TlsStream};

/// Why a TLS connection was not made.
#[derive(Debug)]
pub enum Refusal {
    /// TLS refused the server (its certificate, or it does not speak TLS): not worth retrying.
    Final(String),
    /// The connection failed (reset, time-out): retried as any lost connection.
    Retry(io::Error),
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::*;
    use rustls::CertificateError;

    #[test]
    fn a_ca_file_must_hold_certificates() {
        let dir = std::env::temp_dir().join(format!("tachyon-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = TlsClient::new(&Trust::CaFile(empty.clone())).unwrap_err();
        assert!(e.contains("no certificate"), "{e}");
        let e = TlsClient::new(&Trust::CaFile(dir.join("missing.pem"))).unwrap_err();
        assert!(e.contains("missing.pem"), "{e}");
        assert!(TlsClient::new(&Trust::Default).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refusals_name_the_cause() {
        let wrap = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let text = |r: Refusal| match r {
            Refusal::Final(t) => t,
            Refusal::Retry(e) => panic!("retried: {e}"),
        };
        let cert = |c| wrap(rustls::Error::InvalidCertificate(c));
        assert!(text(rustls_client::explain("h", cert(CertificateError::UnknownIssuer))).contains("--cacert"));
        assert!(text(rustls_client::explain("h", cert(CertificateError::NotValidForName))).contains("another name"));
        assert!(text(rustls_client::explain("h", cert(CertificateError::Expired))).contains("expired"));
        let plain = wrap(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType));
        assert!(text(rustls_client::explain("h", plain)).contains("does not speak TLS"));
        assert!(matches!(
            rustls_client::explain("h", io::Error::from(io::ErrorKind::ConnectionReset)),
            Refusal::Retry(_)
        ));
    }
}
