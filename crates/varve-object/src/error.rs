//! What can go wrong with versioned objects, each case saying what to do.

use varve_log::LogError;

/// A result of this crate.
pub type Result<T, E = ObjectError> = std::result::Result<T, E>;

/// An error of an object store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// The log below failed.
    #[error(transparent)]
    Log(#[from] LogError),

    /// No version with this id (or id prefix) exists under the key.
    #[error("object store {store:?}: key {key:?} has no version {version}: list them with `heads` or `history`")]
    VersionNotFound {
        /// The object store.
        store: String,
        /// The key.
        key: String,
        /// The id or prefix asked for.
        version: String,
    },

    /// A version id prefix matches more than one version.
    #[error("object store {store:?}: version prefix {prefix:?} of key {key:?} matches {count} versions: give more characters")]
    AmbiguousVersion {
        /// The object store.
        store: String,
        /// The key.
        key: String,
        /// The prefix given.
        prefix: String,
        /// How many versions it matches.
        count: usize,
    },

    /// The principal may not read this version.
    #[error("{principal:?} may not read version {version} of key {key:?}: ask its owner ({owner:?}) for a grant")]
    Forbidden {
        /// Who asked.
        principal: String,
        /// The key.
        key: String,
        /// The version asked for.
        version: String,
        /// The key's owner, who can grant access.
        owner: String,
    },

    /// Only the key's owner may change its grants.
    #[error("{principal:?} may not change the grants of key {key:?}: only its owner {owner:?} may")]
    NotOwner {
        /// Who asked.
        principal: String,
        /// The key.
        key: String,
        /// The key's owner.
        owner: String,
    },

    /// Stored bytes do not hash to the version that names them.
    #[error("version {version} of key {key:?} does not verify: {reason} (log {log:?} seq {seq})")]
    Tampered {
        /// The key.
        key: String,
        /// The version whose stored bytes disagree with its id.
        version: String,
        /// What disagrees.
        reason: String,
        /// The log holding the version.
        log: String,
        /// Its record's seq.
        seq: u64,
    },

    /// A stored record cannot be decoded.
    #[error("object store record {log:?} seq {seq} is unreadable: {reason}; run `varve object verify` and restore from a replica")]
    Corrupt {
        /// The log.
        log: String,
        /// The record's seq.
        seq: u64,
        /// What is wrong.
        reason: String,
    },

    /// A named ref was moved by someone else first.
    #[error("ref {name:?} of key {key:?} is at {actual}, not {expected}: re-read it and retry")]
    RefMoved {
        /// The key.
        key: String,
        /// The ref.
        name: String,
        /// What the caller expected (`none` for a new ref).
        expected: String,
        /// Where the ref is (`none` if absent).
        actual: String,
    },

    /// A three-way merge found changes it cannot combine.
    #[error("merge conflict in {}: resolve them and merge with an explicit value", .fields.join(", "))]
    MergeConflict {
        /// The fields (or elements, or lines) both sides changed differently.
        fields: Vec<String>,
    },

    /// A value is not in the form a merge or diff function needs.
    #[error("value of version {version} is not {expected}: {reason}")]
    ValueType {
        /// The version.
        version: String,
        /// The form needed (e.g. "a JSON object").
        expected: &'static str,
        /// What the parser said.
        reason: String,
    },

    /// A bad argument.
    #[error("{reason}")]
    InvalidArgument {
        /// What was wrong and what to do.
        reason: String,
    },

    /// An ancestry proof does not check.
    #[error("the ancestry proof does not check: {reason}")]
    ProofInvalid {
        /// The first element that failed.
        reason: String,
    },

    /// The writer given in `ObjectOptions::writer` (e.g. a runtime) failed.
    #[error("appending through the store's writer failed: {0}")]
    Writer(#[source] Box<dyn std::error::Error + Send + Sync>),

    /// A merge function of the application failed.
    #[error("merge function failed: {reason}")]
    MergeFunction {
        /// Its message.
        reason: String,
    },
}

impl ObjectError {
    /// Wrap an error of a custom writer ([`crate::Appender`]).
    pub fn writer(error: impl std::error::Error + Send + Sync + 'static) -> ObjectError {
        ObjectError::Writer(Box::new(error))
    }
}
