//! Accepting connections: HTTP/1.1 and HTTP/2 on one port, plain or over
//! TLS (`crate::tls`), a bound on open connections, a deadline for a
//! request's head (a client that trickles its headers is cut off) and for a
//! TLS handshake, and graceful shutdown: stop accepting, let in-flight
//! requests finish (appends are never cut mid-way), end watches, then close
//! the namespaces, which releases their writer locks.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use varve_log::{JournalOptions, LogError, SyncPolicy};
use varve_runtime::manifest::{Builtins, Manifest};

use crate::app::{self, AppState};
use crate::metrics::Metrics;
use crate::namespaces::Namespaces;
use crate::tls::{self, TlsFiles};
use crate::tokens::Tokens;

/// How a server runs.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on (port 0: any free port; see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// The data directory: one journal per namespace, as for the embedded store.
    pub data: PathBuf,
    /// How namespaces are opened (sync policy, segment size, limits).
    /// Default `SyncPolicy::Always`: an acknowledged append survives power loss.
    pub journal: JournalOptions,
    /// The tokens accepted; empty: every request is allowed.
    pub tokens: Tokens,
    /// Listen on a non-loopback address without tokens.
    pub insecure: bool,
    /// Serve HTTPS with this certificate and key; `None`: plain HTTP.
    pub tls: Option<TlsFiles>,
    /// Most client connections open at once; more are closed as they arrive.
    pub connections_max: usize,
    /// How long a client may take to send a request's head, and to complete
    /// a TLS handshake.
    pub header_timeout: Duration,
    /// How long shutdown waits for in-flight requests before it closes them.
    pub shutdown_grace: Duration,
    /// Apps whose runtimes the server hosts: appends to their namespaces
    /// (over the network too) fire their handlers here.
    pub manifests: Vec<Manifest>,
    /// The Rust functions those manifests may name as `builtin`.
    pub builtins: Builtins,
}

impl ServeOptions {
    /// Defaults for `listen` and `data`: durable appends, no tokens.
    #[must_use]
    pub fn new(listen: SocketAddr, data: PathBuf) -> ServeOptions {
        ServeOptions {
            listen,
            data,
            journal: JournalOptions { sync: SyncPolicy::Always, ..JournalOptions::default() },
            tokens: Tokens::default(),
            insecure: false,
            tls: None,
            connections_max: 10_000,
            header_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            manifests: Vec::new(),
            builtins: Builtins::new(),
        }
    }
}

/// Why a server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Tokens are needed to listen beyond loopback.
    #[error("refusing to listen on {addr} without tokens: anyone who reaches it could read and write every namespace; give --token-file, listen on 127.0.0.1, or pass --insecure if a firewall guards it")]
    Insecure {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A TLS certificate or key file could not be read or used.
    #[error("TLS: {}: {reason}", path.display())]
    Tls {
        /// The file at fault (the certificate when the pair does not match).
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The data directory could not be opened.
    #[error(transparent)]
    Store(#[from] LogError),
    /// A namespace or a hosted runtime could not be opened or started.
    #[error("{0}")]
    Start(String),
}

/// A bound server, ready to [`Server::run`].
pub struct Server {
    listener: TcpListener,
    state: Arc<AppState>,
    options: ServeOptions,
    tls: Option<TlsAcceptor>,
}

impl Server {
    /// Check the options, open the data directory and bind the address.
    pub async fn bind(options: ServeOptions) -> Result<Server, ServeError> {
        if !options.listen.ip().is_loopback() && options.tokens.is_empty() && !options.insecure {
            return Err(ServeError::Insecure { addr: options.listen });
        }
        // Certificates first: a bad file is reported before anything is opened.
        let tls = options.tls.as_ref().map(tls::acceptor).transpose()?;
        let namespaces = Namespaces::new(options.data.clone(), options.journal, &options.manifests, &options.builtins)
            .map_err(|e| ServeError::Start(e.to_string()))?;
        // Tokio (mio) sets SO_REUSEADDR: a server restarted after a crash
        // binds its port at once, though the last one's connections linger
        // in TIME_WAIT (crates/varve-cli/tests/serve_kill.rs relies on it).
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(|source| ServeError::Bind { addr: options.listen, source })?;
        let local = listener.local_addr().map_err(|source| ServeError::Bind { addr: options.listen, source })?;
        let state = Arc::new(AppState {
            namespaces,
            objects: crate::objects::ObjectStores::default(),
            limits: options.journal.limits,
            tokens: options.tokens.clone(),
            metrics: Metrics::new(),
            feeds: crate::feed::Feeds::default(),
            stopping: AtomicBool::new(false),
            uri: format!("{}://{local}", if tls.is_some() { "varves" } else { "varve" }),
            body_stall_timeout: options.header_timeout,
        });
        Ok(Server { listener, state, options, tls })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The store URI clients use: `varve://HOST:PORT`, or `varves://HOST:PORT` with TLS.
    #[must_use]
    pub fn uri(&self) -> &str {
        &self.state.uri
    }

    /// Serve until `shutdown` completes, then stop gracefully.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let Server { listener, state, options, tls } = self;
        let router = app::router(Arc::clone(&state));
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).header_read_timeout(options.header_timeout);
        builder.http2().timer(TokioTimer::new()).keep_alive_interval(Some(Duration::from_secs(30)));
        let builder = Arc::new(builder);
        let graceful = GracefulShutdown::new();
        let open = Arc::new(AtomicUsize::new(0));
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: pause, then go on serving.
                        tracing::warn!(%error, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            if open.load(Ordering::Relaxed) >= options.connections_max {
                tracing::warn!(%peer, max = options.connections_max, "too many connections: closing a new one");
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            // Subscribed now, so that a shutdown that begins during a TLS
            // handshake still reaches the connection, and waits for it.
            let watcher = graceful.watcher();
            let (open, state, builder, router) =
                (Arc::clone(&open), Arc::clone(&state), Arc::clone(&builder), router.clone());
            let tls = tls.clone();
            let handshake_timeout = options.header_timeout;
            open.fetch_add(1, Ordering::Relaxed);
            state.metrics.open_connections.inc();
            tokio::spawn(async move {
                match tls {
                    None => serve_connection(&builder, router, stream, watcher, peer, handshake_timeout).await,
                    Some(acceptor) => match tls::handshake(acceptor, stream, handshake_timeout).await {
                        Ok(stream) => {
                            serve_connection(&builder, router, stream, watcher, peer, handshake_timeout).await;
                        }
                        Err(error @ tls::HandshakeError::ClosedSilently) => tracing::debug!(%peer, %error),
                        Err(error) => tracing::warn!(%peer, %error, "TLS handshake failed"),
                    },
                }
                open.fetch_sub(1, Ordering::Relaxed);
                state.metrics.open_connections.dec();
            });
        }
        drop(listener);
        state.stopping.store(true, Ordering::Release);
        tracing::info!("stopping: no new connections; finishing requests in flight");
        if tokio::time::timeout(options.shutdown_grace, graceful.shutdown()).await.is_err() {
            tracing::warn!(grace = ?options.shutdown_grace, "requests still running after the grace period: closing them");
        }
        // Appends run on blocking threads that hold their namespace; closing
        // here drops the server's hold, and the last one releases the lock.
        // The object stores hold their namespaces: forget them first.
        state.objects.close_all();
        state.namespaces.close_all();
        Ok(())
    }
}

/// Serve HTTP/1.1 or HTTP/2 (told apart by the HTTP/2 preface) on one
/// connection until it ends, or until a graceful shutdown ends it.
///
/// A connection must send its first request within `first_request_timeout`
/// (the header timeout), or it is closed. hyper's own header timeout
/// covers HTTP/1 request heads, but not the wait for the bytes that tell
/// HTTP/1 from HTTP/2: a connection that sent nothing, or the start of the
/// HTTP/2 preface, would stay open for good and count against
/// `connections_max`.
async fn serve_connection<I>(
    builder: &auto::Builder<TokioExecutor>,
    router: axum::Router,
    io: I,
    watcher: Watcher,
    peer: SocketAddr,
    first_request_timeout: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let requested = Arc::new(AtomicBool::new(false));
    let service = {
        let (requested, router) = (Arc::clone(&requested), TowerToHyperService::new(router));
        hyper::service::service_fn(move |request| {
            requested.store(true, Ordering::Relaxed);
            hyper::service::Service::call(&router, request)
        })
    };
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service).into_owned();
    let served = watcher.watch(connection);
    tokio::pin!(served);
    let ended = tokio::select! {
        ended = &mut served => ended,
        () = tokio::time::sleep(first_request_timeout) => {
            if !requested.load(Ordering::Relaxed) {
                tracing::debug!(%peer, "no request within the header timeout: closing the connection");
                return;
            }
            served.await
        }
    };
    if let Err(error) = ended {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}
