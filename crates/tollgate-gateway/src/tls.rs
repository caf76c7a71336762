//! TLS for the gateway's listener ([`TlsConfig`]): a certificate chain and its private
//! key read from PEM files once, at start, with rustls on the aws-lc-rs provider that
//! reqwest already brings; ALPN offers `h2` and `http/1.1`. A file that cannot be used
//! is a [`TlsError`] naming it and what is wrong, never a panic.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::ServerConfig;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Why a certificate or key file cannot serve TLS. Never holds key material.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The file could not be read (missing, unreadable).
    #[error("cannot read the TLS {what} file {}: {source}", path.display())]
    Read {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: io::Error,
    },
    /// The file is not well-formed PEM.
    #[error("the TLS {what} file {} is not valid PEM: {reason}", path.display())]
    Pem {
        /// `certificate` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is malformed (never the file's contents).
        reason: &'static str,
    },
    /// The certificate file holds no `CERTIFICATE` section.
    #[error(
        "the TLS certificate file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        path.display()
    )]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file holds no private key section (PKCS#8, PKCS#1 or SEC1).
    #[error(
        "the TLS private key file {} holds no PEM private key (PKCS#8 `PRIVATE KEY`, \
         `RSA PRIVATE KEY` or `EC PRIVATE KEY`)",
        path.display()
    )]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the pair: a key it cannot use, a certificate it cannot parse, or a
    /// key that is not the certificate's.
    #[error(
        "the TLS certificate {} and private key {} cannot be used together: {source}",
        cert.display(),
        key.display()
    )]
    Rejected {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
}

/// A listener's TLS settings: the certificate chain and key, ALPN `h2` then `http/1.1`.
/// Cheap to clone (shared).
#[derive(Clone)]
pub struct TlsConfig {
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("alpn", &["h2", "http/1.1"])
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Reads the certificate chain (leaf first) from `cert` and the private key from
    /// `key`, both PEM, and checks that they belong together.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<TlsConfig, TlsError> {
        let cert_pem = read(cert, "certificate")?;
        let key_pem = read(key, "private key")?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_error(e, "certificate", cert))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_path_buf(),
            });
        }
        let private = match PrivateKeyDer::from_pem_slice(&key_pem) {
            Ok(private) => private,
            Err(pem::Error::NoItemsFound) => {
                return Err(TlsError::NoKey {
                    path: key.to_path_buf(),
                });
            }
            Err(e) => return Err(pem_error(e, "private key", key)),
        };
        let rejected = |source| TlsError::Rejected {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            source,
        };
        // This provider explicitly: with another one also compiled in, rustls has no
        // process default to pick.
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(rejected)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(rejected)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsConfig {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// The TLS handshake on an accepted connection.
    pub(crate) async fn accept(&self, stream: TcpStream) -> io::Result<Io> {
        Ok(Io::Tls(Box::new(self.acceptor.accept(stream).await?)))
    }
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// `e` as a [`TlsError`], its reason in words of ours (pem's own messages quote lines of
/// the file).
fn pem_error(e: pem::Error, what: &'static str, path: &Path) -> TlsError {
    let reason = match e {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line",
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a section is not valid base64",
        pem::Error::SectionTooLarge => "a section is too large",
        _ => "it cannot be parsed",
    };
    TlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason,
    }
}

/// An accepted connection's transport: the TCP stream itself, or TLS over it.
#[derive(Debug)]
pub(crate) enum Io {
    /// Plain TCP (HTTP/1.1, or h2c with prior knowledge).
    Plain(TcpStream),
    /// TLS (HTTP/1.1 or h2 by ALPN).
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
