//! TLS for `varve serve --tls-cert CERT.pem --tls-key KEY.pem`: loading the
//! certificate and key (rustls with the ring provider), and each
//! connection's handshake, which runs on the connection's own task so that a
//! slow or failing client never holds up the accept loop or another client.
//!
//! ALPN offers `h2` and `http/1.1`; the connection is then served as a
//! plain one would be (`crate::listener`), where HTTP/2 is recognised by its
//! preface, so a client that offers no ALPN gets HTTP/1.1.
//!
//! A client that speaks plain HTTP to the TLS port (`varve://` or `http://`
//! for `varves://` or `https://`) gets a plain-HTTP `400` whose JSON error,
//! `tls_required`, says to use TLS, rather than a closed connection that
//! reads as a broken server: its first byte is not a TLS handshake record.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::listener::ServeError;

/// The PEM files of a TLS server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (`-----BEGIN CERTIFICATE-----` blocks).
    pub cert: PathBuf,
    /// The leaf's private key: PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
    pub key: PathBuf,
}

/// The protocols offered by ALPN, in order of preference.
const ALPN_PROTOCOLS: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The first byte of a TLS record that carries a handshake message: every
/// TLS connection opens with one (its `ClientHello`).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Most bytes read from a plain-HTTP client after answering it, so that
/// its request is consumed and closing does not reset the connection before
/// the answer is read (a reset can discard data the client has not read).
const PLAIN_DRAIN_BYTES_MAX: usize = 64 * 1024;

/// Longest wait for a plain-HTTP client to close after its answer.
const PLAIN_DRAIN_TIME_MAX: Duration = Duration::from_secs(2);

/// The answer to plain HTTP on the TLS port: an error as every other
/// (`docs/http.md`, Errors), and the connection is closed after it.
const PLAIN_HTTP_ANSWER_BODY: &str = concat!(
    r#"{"error":"tls_required","message":"this port serves TLS (varve serve --tls-cert): "#,
    r#"reach it as varves://HOST:PORT, or https:// with curl"}"#
);

/// Read the certificate chain and key and make the acceptor for them.
pub(crate) fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, ServeError> {
    let chain = read_certificates(&files.cert)?;
    let key = read_key(&files.key)?;
    let provider = Arc::new(ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| ServeError::Tls {
            path: files.cert.clone(),
            reason: format!("this certificate and the key in {} cannot be used together: {e}", files.key.display()),
        })?;
    config.alpn_protocols = ALPN_PROTOCOLS.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_file(path: &Path, what: &str) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path)
        .map_err(|e| ServeError::Tls { path: path.to_owned(), reason: format!("cannot read the {what}: {e}") })
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    let pem = read_file(path, "certificate file")?;
    let chain = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|e| ServeError::Tls {
        path: path.to_owned(),
        reason: format!("not a valid PEM certificate file: {e}"),
    })?;
    if chain.is_empty() {
        return Err(ServeError::Tls {
            path: path.to_owned(),
            reason: "holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)".into(),
        });
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, ServeError> {
    let pem = read_file(path, "private key file")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| ServeError::Tls {
        path: path.to_owned(),
        reason: format!("holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
    })
}

/// Why a connection to the TLS port was not served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// The client sent plain HTTP; it was told to use TLS.
    #[error("the client spoke plain HTTP to the TLS port (answered 400 tls_required)")]
    PlainHttp,
    /// The client closed the connection without sending a byte (a TCP
    /// health check, a port scan): no failed client, nothing to warn about.
    #[error("the client closed the connection before its handshake")]
    ClosedSilently,
    /// The handshake took longer than the deadline.
    #[error("the TLS handshake took longer than {0:?}")]
    TimedOut(Duration),
    /// The handshake failed (a client that does not trust the certificate,
    /// offers no common protocol version, or closed the connection).
    #[error("{0}")]
    Failed(std::io::Error),
}

/// Complete the handshake of a newly accepted connection within `deadline`.
pub(crate) async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    deadline: Duration,
) -> Result<TlsStream<TcpStream>, HandshakeError> {
    let handshake = async move {
        let mut first = [0_u8; 1];
        let peeked = stream.peek(&mut first).await.map_err(HandshakeError::Failed)?;
        if peeked == 0 {
            return Err(HandshakeError::ClosedSilently);
        }
        if first[0] != TLS_HANDSHAKE_RECORD {
            answer_plain_http(stream).await;
            return Err(HandshakeError::PlainHttp);
        }
        acceptor.accept(stream).await.map_err(HandshakeError::Failed)
    };
    tokio::time::timeout(deadline, handshake).await.unwrap_or(Err(HandshakeError::TimedOut(deadline)))
}

/// Tell a plain-HTTP client to use TLS, then close once it has read that.
async fn answer_plain_http(mut stream: TcpStream) {
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        PLAIN_HTTP_ANSWER_BODY.len(),
        PLAIN_HTTP_ANSWER_BODY
    );
    if stream.write_all(answer.as_bytes()).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    // Read (and drop) what the client sent until it closes, within bounds.
    let drain = async {
        let mut buffer = [0_u8; 4096];
        let mut drained = 0;
        while drained < PLAIN_DRAIN_BYTES_MAX {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => drained += read,
            }
        }
    };
    let _ = tokio::time::timeout(PLAIN_DRAIN_TIME_MAX, drain).await;
}
