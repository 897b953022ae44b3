//! What a handler is: a Rust function or an external command, registered
//! under a name with its retry policy. Running one is the worker's job
//! (`worker.rs`); what a Rust handler may call is [`HandlerContext`].

use std::sync::Arc;

use crate::context::HandlerContext;
use crate::retry::RetryPolicy;

/// What a handler function returns: `Err` is recorded as FAILED with its message.
pub type HandlerResult = std::result::Result<(), Box<dyn std::error::Error + Send + Sync>>;
/// A Rust handler.
pub type HandlerFn = Arc<dyn Fn(&mut HandlerContext<'_>) -> HandlerResult + Send + Sync>;

/// How a handler runs.
#[derive(Clone)]
pub enum HandlerKind {
    /// A Rust function in this process.
    Rust(HandlerFn),
    /// An external command, spawned per trigger (argv; argv\[0\] resolved on `PATH`).
    Command(Vec<String>),
}

impl std::fmt::Debug for HandlerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandlerKind::Rust(_) => f.write_str("Rust(fn)"),
            HandlerKind::Command(argv) => f.debug_tuple("Command").field(argv).finish(),
        }
    }
}

/// A registered handler.
#[derive(Clone, Debug)]
pub struct HandlerSpec {
    /// The handler's name, unique per runtime; TRIGGER events and subscriptions name it.
    pub name: String,
    /// What runs: a Rust function or an external command.
    pub kind: HandlerKind,
    /// Attempts, backoff and timeout for its failed runs.
    pub retry: RetryPolicy,
}
