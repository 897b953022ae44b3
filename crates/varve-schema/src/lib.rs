//! # varve-schema — typed records and what happens to them when types change
//!
//! Every value in a Varve log is opaque bytes. This crate gives a log (or a
//! structure's values) a **record type** with numbered fields and
//! **versions**, stored in the namespace's `_schema` log; every record
//! carries the id of the version it was written with. When a program
//! changes the type, it picks one of the three retention models of
//! `seeds/003_…` per version:
//!
//! - **Automatic** — lazily extendible records (LEDS, §3.4): the version
//!   adds fields with constant defaults (stored once, in the schema) or an
//!   **INIT** that computes them from the old fields; a field's type may
//!   widen or be replaced by a new field with a converting INIT. Old
//!   records are never rewritten: readers see them in the newest shape,
//!   and the INIT chain runs on the first access to a field added after
//!   the record was written ([`Stored::get`]).
//! - **Manual** — a migration function rewrites every record into a new
//!   generation of the log, as a resumable, exactly-once batch job
//!   ([`Schemas::migrate`]); writers switch when it has caught up.
//! - **Reset** — the type starts over in a new, empty generation.
//!
//! Old generations stay readable: nothing is changed in place.
//!
//! ```
//! use varve_log::{MemoryStore, Store};
//! use varve_schema::{Field, FieldType, Schemas, Spec, Value};
//!
//! let schemas = Schemas::open(MemoryStore::new().namespace("app")?)?;
//! schemas.register("readings", &Spec::new(vec![Field::new(1, "celsius", FieldType::I32)]))?;
//! let log = schemas.log("readings")?;
//! let seq = log.append(&log.record()?.with("celsius", 20)?)?;
//!
//! // v2 adds a field computed from the old ones, lazily.
//! schemas.define_init("c_to_f", |old| match old.get("celsius") {
//!     Some(Value::Int(c)) => Ok(vec![("fahrenheit".into(), Value::Float(c as f64 * 1.8 + 32.0))]),
//!     _ => Err("no celsius".into()),
//! });
//! let v2 = vec![Field::new(1, "celsius", FieldType::I32), Field::new(2, "fahrenheit", FieldType::F64)];
//! schemas.register("readings", &Spec::new(v2).init("c_to_f"))?;
//! let old = log.get(seq)?;
//! assert_eq!(old.get("fahrenheit")?, Some(Value::Float(68.0)));
//! assert_eq!(old.original().version().version, 1); // nothing was rewritten
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! See `docs/schema.md` for the user guide and the compatibility rules, and
//! `docs/design.md` ("Typed records") for the wire format.

mod compat;
pub mod declare;
pub mod error;
pub mod migrate;
pub mod record;
pub mod registry;
pub mod schema;
pub mod typed_log;
pub mod types;
pub mod wire;

pub use declare::TypeDef;
pub use error::{Result, SchemaError};
pub use migrate::MigrationReport;
pub use record::{Fields, InitFn, Location, Record, Stored};
pub use registry::{Generation, Registered, Schemas, Subject, EAGER_MIGRATION, SCHEMA_LOG};
pub use schema::{Compat, Model, SchemaVersion, Spec};
pub use typed_log::TypedLog;
pub use types::{Field, FieldType, Value, FIELD_TYPES};
