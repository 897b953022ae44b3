//! Errors of typed records: each says what was wrong and what to do.

use thiserror::Error;

/// A result with a [`SchemaError`].
pub type Result<T, E = SchemaError> = std::result::Result<T, E>;

/// What went wrong with a schema, a record or a migration.
#[derive(Debug, Error)]
#[non_exhaustive]
#[allow(missing_docs)] // the fields are named in each message
pub enum SchemaError {
    /// The log below failed.
    #[error(transparent)]
    Log(#[from] varve_log::LogError),

    /// A schema definition is malformed (duplicate names or numbers, a
    /// default of the wrong type, …).
    #[error("invalid schema for '{subject}': {reason}")]
    Invalid { subject: String, reason: String },

    /// A new version breaks a compatibility rule against an earlier one.
    #[error("{}", incompatible_message(subject, *version, *against, field, rule, reason))]
    Incompatible { subject: String, version: u32, against: u32, field: String, rule: &'static str, reason: String },

    /// No schema is registered for this subject.
    #[error("no schema is registered for '{0}': register one first (`varve schema register`)")]
    UnknownSubject(String),

    /// A stored record names a schema id this namespace does not have.
    #[error("{location} was written with schema id {id}, which this namespace's _schema log does not hold: the record came from elsewhere or _schema was deleted")]
    UnknownSchemaId { location: String, id: u64 },

    /// A stored record cannot be decoded with the schema it names.
    #[error("{location} is not a valid record of '{subject}' v{version}: {reason}")]
    Corrupt { location: String, subject: String, version: u32, reason: String },

    /// A value given to write does not fit the schema.
    #[error("value for '{subject}' v{version} rejected: {reason}")]
    BadValue { subject: String, version: u32, reason: String },

    /// An INIT named by an extension was not defined by this program.
    #[error("'{subject}' v{version} upgrades records with INIT '{init}', which this program has not defined: define it (Schemas::define_init) before reading old records")]
    MissingInit { subject: String, version: u32, init: String },

    /// An INIT failed (returned an error or panicked) on one record.
    #[error("INIT '{init}' of '{subject}' v{version} failed on {location}: {reason} (nothing stored was changed)")]
    InitFailed { subject: String, version: u32, init: String, location: String, reason: String },

    /// A migration function failed on one record.
    #[error("migration '{migration}' of '{subject}' failed on {location}: {reason} (records migrated so far stay in the new generation; fix and run the migration again to resume)")]
    MigrationFailed { subject: String, migration: String, location: String, reason: String },

    /// A migration is pending or none is.
    #[error("{0}")]
    Migration(String),
}

fn incompatible_message(subject: &str, version: u32, against: u32, field: &str, rule: &str, reason: &str) -> String {
    if rule == "FIELD_NUMBER" {
        format!("schema '{subject}' v{version} breaks the FIELD_NUMBER rule (checked against v{against}): field '{field}' {reason}")
    } else {
        format!("schema '{subject}' v{version} is not {rule} compatible with v{against}: field '{field}' {reason}")
    }
}
