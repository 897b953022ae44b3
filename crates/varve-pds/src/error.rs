//! The error type of every `varve-pds` operation.
//!
//! Operating errors are values and carry their context (which structure,
//! which log, which seq); bugs panic.

use varve_log::{LogError, Seq};

use crate::Version;

/// Shorthand for results of `varve-pds` operations.
pub type Result<T, E = PdsError> = std::result::Result<T, E>;

/// Everything a versioned structure operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PdsError {
    /// The log underneath failed (and retrying did not help, or could not).
    #[error(transparent)]
    Log(#[from] LogError),

    /// A stored entry does not decode or contradicts the structure's rules.
    #[error("corrupt entry in log {log:?} at seq {seq}: {reason}")]
    Corrupt { log: String, seq: Seq, reason: String },

    /// A read named version 0 or a version that has not been committed.
    #[error("structure {structure:?} has no version {version} (versions are 1..={latest}; 0 names no version)")]
    NoSuchVersion { structure: String, version: Version, latest: Version },

    /// The structure already holds the `keep` versions it was created with.
    #[error("structure {structure:?} is full: it keeps {keep} versions and refuses more updates (reads still work; create a new structure to go on)")]
    RetentionFull { structure: String, keep: u64 },

    /// The structure exists with another kind or configuration.
    #[error("structure {structure:?} already exists as {existing}, not {requested}: open it with its own configuration or pick another name")]
    ConfigMismatch { structure: String, existing: String, requested: String },

    /// A position past the end of a list.
    #[error("position {position} is out of range: the list has {len} items")]
    PositionOutOfRange { position: usize, len: usize },

    /// A key or value does not decode as the requested type.
    #[error("cannot decode a {ty}: {reason}")]
    Decode { ty: &'static str, reason: String },

    /// An append kept failing with a transient error.
    #[error("append to log {log:?} failed {attempts} times; last error: {last}")]
    RetriesExhausted { log: String, attempts: u32, last: LogError },

    /// Bad arguments (empty names, extra = 0, keep = 0, …).
    #[error("invalid argument: {reason}")]
    InvalidArgument { reason: String },

    /// A workload file does not parse.
    #[error("workload line {line}: {reason}")]
    WorkloadParse { line: usize, reason: String },

    /// `--verify` found a version whose contents differ from the model.
    #[error("verification failed at version {version}: expected {expected:?}, found {found:?}")]
    VerifyFailed { version: Version, expected: Vec<u64>, found: Vec<u64> },
}
