//! Where a remote store is: [`RemoteOptions`], the `varve://HOST:PORT` store
//! URI it is usually made from (`varves://HOST:PORT` for TLS, as `rediss://`
//! and `wss://` are), and the [`Endpoint`] both are checked into.
//!
//! A store's URI is also the `target` that every remote error names
//! (`LogError::Unavailable { target, .. }` and its siblings), and
//! `varve://HOST:PORT/NAMESPACE/LOG` names one log in messages.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use varve_log::{LogError, Result};

/// How to reach a `varve serve`: its address, the token to send, the
/// certificates to trust, and how long one request may take.
#[derive(Clone)]
pub struct RemoteOptions {
    /// The server's address, `http://HOST:PORT` (e.g. `http://127.0.0.1:7070`)
    /// or, for a server started with `--tls-cert`, `https://HOST:PORT`; with
    /// or without a trailing `/`.
    pub base: String,
    /// Sent as `Authorization: Bearer TOKEN` on every request when set; needed
    /// when the server runs with `--token-file`.
    pub token: Option<String>,
    /// The longest one request may take, from connecting to the last byte of
    /// its answer. Scans and watches stream: for them it bounds connecting and
    /// each wait for more bytes instead. Default
    /// [`RemoteOptions::TIMEOUT_DEFAULT`].
    pub timeout: Duration,
    /// A PEM file of CA certificates to trust for `https://`, besides
    /// Mozilla's roots (which every TLS connection trusts): the CA that
    /// signed the server's certificate when it is a private one, or the
    /// certificate itself when it is self-signed. Read when the client is
    /// made; unused for `http://`.
    pub tls_ca: Option<PathBuf>,
}

impl RemoteOptions {
    /// The default per-request timeout: 30 s.
    pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

    /// Options for the server at `base` (`http://HOST:PORT` or
    /// `https://HOST:PORT`), without a token or an extra CA, with the
    /// default timeout.
    #[must_use]
    pub fn new(base: impl Into<String>) -> RemoteOptions {
        RemoteOptions { base: base.into(), token: None, timeout: Self::TIMEOUT_DEFAULT, tls_ca: None }
    }

    /// Options for the store URI `varve://HOST:PORT`, or `varves://HOST:PORT`
    /// for TLS (a trailing `/` is allowed), with `token` and the default
    /// timeout.
    ///
    /// Any other scheme, a missing port, or a path is `InvalidArgument`
    /// saying the expected form.
    pub fn from_uri(uri: &str, token: Option<String>) -> Result<RemoteOptions> {
        let invalid = || LogError::InvalidArgument {
            reason: format!(
                "{uri:?} is not a store URI of the form varve://HOST:PORT, or varves://HOST:PORT for TLS \
                 (e.g. varve://127.0.0.1:7070)"
            ),
        };
        let (tls, rest) = match uri.strip_prefix(TLS_STORE_SCHEME) {
            Some(rest) => (true, rest),
            None => (false, uri.strip_prefix(STORE_SCHEME).ok_or_else(invalid)?),
        };
        let authority = parse_authority(rest).ok_or_else(invalid)?;
        let endpoint = Endpoint { tls, authority: authority.to_owned() };
        Ok(RemoteOptions { token, ..RemoteOptions::new(endpoint.base_url()) })
    }
}

/// The token is a secret: it is never printed.
impl fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("tls_ca", &self.tls_ca)
            .finish()
    }
}

const STORE_SCHEME: &str = "varve://";
const TLS_STORE_SCHEME: &str = "varves://";
const HTTP_SCHEME: &str = "http://";
const HTTPS_SCHEME: &str = "https://";

/// A checked server address: `HOST:PORT` and whether it is reached over
/// TLS, the same for the HTTP base (`http://` or `https://`) and the store
/// URI (`varve://` or `varves://`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    tls: bool,
    authority: String,
}

impl Endpoint {
    /// Check an HTTP base, `http://HOST:PORT` or `https://HOST:PORT`, with
    /// an optional trailing `/`.
    pub(crate) fn from_base(base: &str) -> Result<Endpoint> {
        let invalid = || LogError::InvalidArgument {
            reason: format!(
                "{base:?} is not a server address of the form http://HOST:PORT or https://HOST:PORT \
                 (e.g. http://127.0.0.1:7070)"
            ),
        };
        let (tls, rest) = match base.strip_prefix(HTTPS_SCHEME) {
            Some(rest) => (true, rest),
            None => (false, base.strip_prefix(HTTP_SCHEME).ok_or_else(invalid)?),
        };
        let authority = parse_authority(rest).ok_or_else(invalid)?;
        Ok(Endpoint { tls, authority: authority.to_owned() })
    }

    /// Whether the server is reached over TLS.
    pub(crate) fn tls(&self) -> bool {
        self.tls
    }

    /// `http://HOST:PORT` or `https://HOST:PORT`, without a trailing `/`:
    /// request paths start with one.
    pub(crate) fn base_url(&self) -> String {
        let scheme = if self.tls { HTTPS_SCHEME } else { HTTP_SCHEME };
        format!("{scheme}{}", self.authority)
    }

    /// `varve://HOST:PORT` or `varves://HOST:PORT`: the `target` of every
    /// error about this store.
    pub(crate) fn target(&self) -> String {
        let scheme = if self.tls { TLS_STORE_SCHEME } else { STORE_SCHEME };
        format!("{scheme}{}", self.authority)
    }
}

/// `HOST:PORT` with an optional trailing `/`, and nothing else: no user, no
/// path, no query. HOST is a DNS name or IPv4 address (`A-Z a-z 0-9 . - _`)
/// or a bracketed IPv6 address; PORT is 1..=65535.
fn parse_authority(rest: &str) -> Option<&str> {
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = authority.rsplit_once(':')?;
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ipv6) => !ipv6.is_empty() && ipv6.bytes().all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.')),
        None => !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')),
    };
    let port_ok =
        !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p != 0);
    (host_ok && port_ok).then_some(authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_uris_become_http_bases() {
        let options = RemoteOptions::from_uri("varve://127.0.0.1:7070", None).unwrap();
        assert_eq!(options.base, "http://127.0.0.1:7070");
        assert_eq!(options.timeout, RemoteOptions::TIMEOUT_DEFAULT);
        assert!(options.token.is_none());
        let options = RemoteOptions::from_uri("varve://db.example-1.net:80/", Some("s3cr3t".into())).unwrap();
        assert_eq!(options.base, "http://db.example-1.net:80");
        assert_eq!(options.token.as_deref(), Some("s3cr3t"));
        assert_eq!(RemoteOptions::from_uri("varve://[::1]:7070", None).unwrap().base, "http://[::1]:7070");
        let options = RemoteOptions::from_uri("varves://db.example.net:7443/", None).unwrap();
        assert_eq!(options.base, "https://db.example.net:7443");
        assert!(options.tls_ca.is_none());
    }

    #[test]
    fn other_uris_are_refused_with_the_expected_form() {
        for bad in [
            "",
            "varve://",
            "varve://host",
            "varve://host:",
            "varve://:7070",
            "varve://host:0",
            "varve://host:70700",
            "varve://host:7070/ns",
            "varve://host:7070//",
            "varve://host:7070?x=1",
            "varve://user@host:7070",
            "varve://[]:7070",
            "varve://[::1:7070",
            "varves://",
            "varves://host",
            "varves://host:7070/ns",
            "varvess://host:7070",
            "http://127.0.0.1:7070",
            "https://127.0.0.1:7070",
            "VARVE://host:7070",
            "./varve-data",
        ] {
            let err = RemoteOptions::from_uri(bad, None).unwrap_err();
            let LogError::InvalidArgument { reason } = &err else { panic!("{bad:?}: {err}") };
            assert!(reason.contains("varve://HOST:PORT") && reason.contains("varves://"), "{bad:?}: {reason}");
        }
    }

    #[test]
    fn bases_name_the_same_endpoint_as_their_uri() {
        let endpoint = Endpoint::from_base("http://127.0.0.1:7070/").unwrap();
        assert_eq!(endpoint.base_url(), "http://127.0.0.1:7070");
        assert_eq!(endpoint.target(), "varve://127.0.0.1:7070");
        assert!(!endpoint.tls());
        let endpoint = Endpoint::from_base("https://localhost:7443").unwrap();
        assert_eq!(endpoint.base_url(), "https://localhost:7443");
        assert_eq!(endpoint.target(), "varves://localhost:7443");
        assert!(endpoint.tls());
        for bad in ["127.0.0.1:7070", "varves://127.0.0.1:7070", "http://127.0.0.1", "http://h:1/v1", "https://h"] {
            assert!(matches!(Endpoint::from_base(bad), Err(LogError::InvalidArgument { .. })), "{bad:?}");
        }
    }

    #[test]
    fn debug_never_prints_the_token() {
        let options = RemoteOptions { token: Some("s3cr3t".into()), ..RemoteOptions::new("http://h:1") };
        assert!(!format!("{options:?}").contains("s3cr3t"));
    }
}
