//! # varve-server — the Log contract over HTTP (`varve serve`)
//!
//! A server holds a data directory and is the single writer of every
//! namespace in it; any number of clients read and append through it over
//! HTTP/1.1 or HTTP/2, plain or over TLS (`docs/http.md` is the API). The
//! remote backend (`varve-remote`) is its Rust client, so every layer above
//! the Log runs unchanged against a server.
//!
//! Layers, outermost first: [`listener`] (accepting connections, timeouts,
//! graceful shutdown) and [`tls`] (HTTPS) → [`app`] (routes, metrics,
//! tokens) → [`routes`], [`stream`] and [`objects`] (the operations; watches share a
//! reader per log, [`feed`]) →
//! [`namespaces`] (the open journals) → `varve_log` (and `varve_object` for
//! the object routes, which enforce the owners' read grants for the
//! principal a token names).
//!
//! ```no_run
//! use varve_server::{ServeOptions, Server};
//!
//! let options = ServeOptions::new("127.0.0.1:7070".parse()?, "./varve-data".into());
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(async {
//!     let server = Server::bind(options).await?;
//!     println!("listening on {}", server.uri());
//!     server.run(async { tokio::signal::ctrl_c().await.ok(); }).await
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod app;
pub mod error;
pub mod feed;
pub mod listener;
pub mod metrics;
pub mod namespaces;
pub mod objects;
pub mod routes;
pub mod stream;
pub mod tls;
pub mod tokens;
pub mod wire;

pub use listener::{ServeError, ServeOptions, Server};
pub use tls::TlsFiles;
pub use tokens::{Access, Tokens};
