//! # varve-remote — the Log contract as a client of `varve serve`
//!
//! [`RemoteStore`] and [`RemoteNamespace`] implement `varve_log`'s
//! [`Store`](varve_log::Store) and [`Namespace`](varve_log::Namespace) by
//! sending each operation to a `varve serve` over HTTP/1.1 (over TLS for
//! `varves://`), as `docs/http.md` specifies, so a layer written against the contract works
//! unchanged on a server's namespaces. The client is blocking (`ureq`), keeps
//! one pool of keep-alive connections per store, streams scans line by line,
//! and reads watches (Server-Sent Events) on a thread of their own that
//! reconnects by itself. A store URI is `varve://HOST:PORT`, or
//! `varves://HOST:PORT` for a server started with `--tls-cert` (trusting
//! Mozilla's roots and [`RemoteOptions::tls_ca`]). The Log contract is
//! `varve_log::contract`; the wire, `docs/http.md`.
//!
//! ```no_run
//! use varve_log::{LogConfig, Namespace, SeqRange, Store};
//! use varve_remote::{RemoteOptions, RemoteStore};
//!
//! let store = RemoteStore::connect(RemoteOptions::from_uri("varve://127.0.0.1:7070", None)?)?;
//! let ns = store.namespace("sensors")?;
//! ns.create_log("temperature", LogConfig::unbounded())?;
//! let seq = ns.append("temperature", b"21.5")?;
//! for record in ns.scan("temperature", SeqRange::from_bounds(1..=seq))? {
//!     let record = record?;
//!     println!("{}: {}", record.seq, String::from_utf8_lossy(&record.value));
//! }
//! // An append that is safe to send again: the server lands an id once.
//! let sensors = store.remote_namespace("sensors")?;
//! let (seqs, repeated) = sensors.append_batch_once(&[("temperature", b"21.7")], "sensor-7:1042")?;
//! # let _ = (seqs, repeated);
//! # Ok::<(), varve_log::LogError>(())
//! ```
//!
//! ## Errors
//!
//! The server's errors come back as the [`LogError`](varve_log::LogError)
//! variants the embedded store would return, with their fields (`docs/http.md`,
//! "Errors"). Four variants are the network's own, each naming the store's
//! URI as its `target`:
//!
//! - `Unavailable`: the server could not be reached, said it is stopping,
//!   or (`varves://`) its certificate is not trusted or it does not speak
//!   TLS. Nothing was done.
//! - `OutcomeUnknown`: a write was sent, and its answer was lost (the
//!   connection broke, the server was killed, the timeout passed). It may or
//!   may not have landed.
//! - `Denied`: the token is missing, unknown, read-only, or for another namespace.
//! - `Protocol`: the answer is not what `varve serve` sends (another program
//!   on that port, an incompatible version, a stream cut short), or the
//!   server serves TLS and the URI says `varve://` (`tls_required`).
//!
//! ## What is sent again
//!
//! Failed requests are sent again only where that cannot change the
//! outcome, and only for failures of the connection: never for an error
//! the server answered, nor for a request that timed out (the timeout is
//! the caller's bound on waiting; it is `Unavailable` for a read and
//! `OutcomeUnknown` for a write):
//!
//! | Calls | After a connection failure | If it remains |
//! |---|---|---|
//! | reads (`list_*`, `log_info`, `latest`, `earliest`, `get`, the start of `scan` and `watch`) and `sync` | sent again, up to 3 times, waiting 50, 100, 200 ms | `Unavailable` |
//! | `create_log` (idempotent for the same config) | sent again, the same way | `OutcomeUnknown` if an attempt may have reached the server, else `Unavailable` |
//! | `append`, `append_if`, `append_batch`, `delete_log` | never sent again | `Unavailable` if the request could not be sent at all (connection refused, address not resolved, connect timeout); `OutcomeUnknown` if it may have reached the server |
//! | [`RemoteNamespace::append_batch_once`] | sent again with its request id, up to 8 attempts, waiting 50 ms doubling to 2 s | as the row above |
//!
//! Appends are never sent again because the server would append them
//! again: a lost answer does not say whether the first one landed, and a
//! resend would duplicate the records if it did. So that outcome is reported,
//! as `OutcomeUnknown`, for the caller to settle (read the log's latest
//! records), or avoided with `append_batch_once`, whose request id the
//! server answers once. When the HTTP client's error does not tell whether
//! a request left this machine, it counts as sent: `Unavailable` ("nothing
//! was done") is said only when that is true. A scan whose stream breaks
//! ends with an `Unavailable` item (after the records that did arrive); one
//! that ends without its end line ends with a `Protocol` item. A watch is
//! never cut: it reconnects and resumes after the last record it passed on.
//!
//! ## Timeouts
//!
//! [`RemoteOptions::timeout`] (default 30 s) bounds each request from
//! connecting to the last byte of its answer; connecting alone is bounded by
//! 10 s or half of it, whichever is less. Scans bound connecting, the wait
//! for the answer, and each wait for more bytes instead of the whole. A
//! watch waits as long as it is asked to (`Watch::next_timeout`), and takes
//! 45 s of silence (three missed keep-alives) as a broken connection.

mod client;
mod errors;
mod lines;
mod namespace;
mod scan;
mod sse;
mod store;
mod tls;
mod uri;
mod watch;
mod wire;

pub use namespace::{RemoteNamespace, ONCE_ATTEMPTS_MAX, REQUEST_ID_BYTES_MAX};
pub use store::RemoteStore;
pub use uri::RemoteOptions;
