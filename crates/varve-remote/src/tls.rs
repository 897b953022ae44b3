//! TLS for `varves://` stores: which certificates a client trusts, and what
//! a failed handshake means for the caller.
//!
//! A client trusts Mozilla's roots (`webpki-root-certs`) and, when
//! [`RemoteOptions::tls_ca`](crate::RemoteOptions::tls_ca) names one, a
//! PEM file of further CA certificates: a private CA, or a self-signed
//! server certificate. The handshake runs with rustls and the ring provider.
//!
//! A handshake fails before any request is sent, so its failure says
//! "nothing was done" (`Unavailable`), and it is not sent again: a
//! certificate that is not trusted, or a server that does not speak TLS,
//! stays so.

use std::path::Path;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
use varve_log::{LogError, Result};

use crate::client::Failure;

/// Most bytes read from a CA file: a bundle of a few hundred certificates.
const CA_FILE_BYTES_MAX: u64 = 4 << 20;

/// The TLS settings of a client: Mozilla's roots, plus the certificates of
/// the PEM file `ca` when given.
pub(crate) fn config(ca: Option<&Path>) -> Result<TlsConfig> {
    let Some(ca) = ca else {
        // ureq's default: Mozilla's roots (webpki-roots), and the ring provider.
        return Ok(TlsConfig::default());
    };
    let mut roots: Vec<Certificate<'static>> =
        webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|cert| Certificate::from_der(cert.as_ref())).collect();
    let extra = read_ca_file(ca)?;
    roots.extend(extra);
    Ok(TlsConfig::builder().root_certs(RootCerts::new_with_certs(&roots)).build())
}

/// The certificates of a PEM file; other PEM items (a key) are skipped.
fn read_ca_file(path: &Path) -> Result<Vec<Certificate<'static>>> {
    let context = || format!("reading the CA certificate file {} (--tls-ca)", path.display());
    let pem = std::fs::read(path).map_err(|source| LogError::Io { context: context(), source })?;
    if pem.len() as u64 > CA_FILE_BYTES_MAX {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "the CA certificate file {} holds {} bytes, more than the {CA_FILE_BYTES_MAX} a bundle of CAs needs",
                path.display(),
                pem.len()
            ),
        });
    }
    let mut certificates = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(certificate)) => certificates.push(certificate),
            Ok(_) => {}
            Err(e) => {
                return Err(LogError::InvalidArgument {
                    reason: format!("the CA certificate file {} is not valid PEM: {e}", path.display()),
                })
            }
        }
    }
    if certificates.is_empty() {
        return Err(LogError::InvalidArgument {
            reason: format!(
                "the CA certificate file {} holds no PEM certificate (a -----BEGIN CERTIFICATE----- block)",
                path.display()
            ),
        });
    }
    Ok(certificates)
}

/// The failure a TLS error stands for, if `error` is one that a resend
/// cannot mend: a server certificate this client does not trust, or a
/// server that answered a TLS handshake with something that is not TLS.
pub(crate) fn handshake_failure(error: &ureq::Error) -> Option<Failure> {
    let tls_error = match error {
        ureq::Error::Rustls(e) => e,
        ureq::Error::Io(e) => e.get_ref()?.downcast_ref::<rustls::Error>()?,
        _ => return None,
    };
    match tls_error {
        rustls::Error::InvalidCertificate(_) => Some(Failure::Rejected(format!(
            "the server's TLS certificate was not trusted ({tls_error}); if a private CA signed it, or it is \
             self-signed, pass that CA's certificate with --tls-ca FILE (RemoteOptions::tls_ca, \
             OpenOptions::tls_ca)"
        ))),
        // Record types are checked before anything else: a plain-HTTP
        // answer to the ClientHello fails here, at the first byte.
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => Some(Failure::Rejected(format!(
            "the server does not speak TLS ({tls_error}); if it runs without --tls-cert, use varve://HOST:PORT"
        ))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_files_are_checked_when_the_client_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = config(Some(&missing)).unwrap_err();
        assert!(matches!(&err, LogError::Io { context, .. } if context.contains("missing.pem")), "{err}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let err = config(Some(&empty)).unwrap_err();
        assert!(matches!(&err, LogError::InvalidArgument { reason } if reason.contains("empty.pem")), "{err}");
        let bad = dir.path().join("bad.pem");
        std::fs::write(&bad, "-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----\n").unwrap();
        let err = config(Some(&bad)).unwrap_err();
        assert!(matches!(&err, LogError::InvalidArgument { reason } if reason.contains("bad.pem")), "{err}");
    }

    #[test]
    fn certificate_and_plain_text_failures_are_final_and_say_what_to_do() {
        let untrusted = ureq::Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        let Some(Failure::Rejected(reason)) = handshake_failure(&untrusted) else { panic!("not rejected") };
        assert!(reason.contains("not trusted") && reason.contains("--tls-ca"), "{reason}");
        let plain = ureq::Error::Rustls(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType));
        let Some(Failure::Rejected(reason)) = handshake_failure(&plain) else { panic!("not rejected") };
        assert!(reason.contains("varve://"), "{reason}");
        let reset = ureq::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(handshake_failure(&reset).is_none());
    }
}
