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
    Corrupt {
        /// The log holding the entry.
        log: String,
        /// The entry's seq in `log`.
        seq: Seq,
        /// What does not decode, or which rule the entry breaks.
        reason: String,
    },

    /// A read named version 0 or a version that has not been committed.
    #[error("structure {structure:?} has no version {version} (versions are 1..={latest}; 0 names no version)")]
    NoSuchVersion {
        /// The structure's name.
        structure: String,
        /// The version asked for.
        version: Version,
        /// The latest committed version (0: none yet).
        latest: Version,
    },

    /// The structure already holds the `keep` versions it was created with.
    #[error("structure {structure:?} is full: it keeps {keep} versions and refuses more updates (reads still work; create a new structure to go on)")]
    RetentionFull {
        /// The structure's name.
        structure: String,
        /// Versions it keeps: its [`Options::keep`](crate::Options::keep).
        keep: u64,
    },

    /// The structure exists with another kind or configuration.
    #[error("structure {structure:?} already exists as {existing}, not {requested}: open it with its own configuration or pick another name")]
    ConfigMismatch {
        /// The structure's name.
        structure: String,
        /// The stored kind and configuration, as text.
        existing: String,
        /// The kind and configuration asked for, as text.
        requested: String,
    },

    /// Other writers kept committing first: the update was planned again
    /// `attempts` times and never logged (nothing of it was written).
    #[error("structure {structure:?}: other writers committed first {attempts} times in a row; nothing was written, try the update again")]
    Contended {
        /// The structure's name.
        structure: String,
        /// Times the update was planned ([`crate::UPDATE_ATTEMPTS_MAX`]).
        attempts: u32,
    },

    /// A position past the end of a list.
    #[error("position {position} is out of range: the list has {len} items")]
    PositionOutOfRange {
        /// The position asked for, from 0 (the head).
        position: usize,
        /// The list's length, in items.
        len: usize,
    },

    /// A key or value does not decode as the requested type.
    #[error("cannot decode a {ty}: {reason}")]
    Decode {
        /// What was being decoded: a key or value type, or a part of an op (`"list position"`).
        ty: &'static str,
        /// Why it does not decode.
        reason: String,
    },

    /// An append kept failing with a transient error.
    #[error("append to log {log:?} failed {attempts} times; last error: {last}")]
    RetriesExhausted {
        /// The log appended to (or created).
        log: String,
        /// Attempts made: [`APPEND_ATTEMPTS_MAX`](crate::APPEND_ATTEMPTS_MAX).
        attempts: u32,
        /// The error of the last attempt.
        last: LogError,
    },

    /// Bad arguments (empty names, extra = 0, keep = 0, …).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What is wrong with the arguments.
        reason: String,
    },

    /// A workload file does not parse.
    #[error("workload line {line}: {reason}")]
    WorkloadParse {
        /// The line, from 1 (also 1 for problems of the whole file, such as a wrong count).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },

    /// `--verify` found a version whose contents differ from the model.
    #[error("verification failed at version {version}: expected {expected:?}, found {found:?}")]
    VerifyFailed {
        /// The first version that differs.
        version: Version,
        /// The model's contents of that version, in the structure's order.
        expected: Vec<u64>,
        /// The structure's contents of that version, in the same order.
        found: Vec<u64>,
    },
}
