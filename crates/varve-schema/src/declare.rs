//! Declaring a record type's versions, INITs and migrations in one place.
//!
//! ```
//! use varve_log::{MemoryStore, Store};
//! use varve_schema::{Field, FieldType, Schemas, TypeDef, Value};
//!
//! let schemas = Schemas::open(MemoryStore::new().namespace("app")?)?;
//! let reading = TypeDef::new("readings")
//!     .version(vec![Field::new(1, "sensor", FieldType::String), Field::new(2, "celsius", FieldType::I32)])
//!     .extend(
//!         vec![Field::new(3, "fahrenheit", FieldType::F64)],
//!         "celsius_to_fahrenheit",
//!         |old| {
//!             let Some(Value::Int(c)) = old.get("celsius") else { return Err("no celsius".into()) };
//!             Ok(vec![("fahrenheit".into(), Value::Float(c as f64 * 1.8 + 32.0))])
//!         },
//!     );
//! schemas.declare(&reading)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Result, SchemaError};
use crate::record::{Fields, InitFn, Record, Stored};
use crate::registry::{Registered, Schemas};
use crate::schema::{Compat, Model, Spec};
use crate::typed_log::TypedLog;
use crate::types::Field;

/// A subject's versions as a program declares them: each version lists
/// only what it changes, as the paper's nested `EXTENSION` blocks do.
#[derive(Clone)]
pub struct TypeDef {
    subject: String,
    versions: Vec<(Spec, Option<(String, InitFn)>)>,
}

impl TypeDef {
    /// A type for `subject` (a log name) with no versions yet.
    #[must_use]
    pub fn new(subject: &str) -> TypeDef {
        TypeDef { subject: subject.to_owned(), versions: Vec::new() }
    }

    /// The subject.
    #[must_use]
    pub fn subject(&self) -> &str {
        &self.subject
    }

    fn fields(&self) -> Vec<Field> {
        self.versions.last().map(|(spec, _)| spec.fields.clone()).unwrap_or_default()
    }

    /// The first version (or a version adding fields with defaults only).
    #[must_use]
    pub fn version(mut self, added: Vec<Field>) -> TypeDef {
        let mut fields = self.fields();
        fields.extend(added);
        self.versions.push((Spec::new(fields), None));
        self
    }

    /// An automatic version adding `added`, computed by the INIT `init`
    /// from the record in the previous version's shape.
    #[must_use]
    pub fn extend<F>(mut self, added: Vec<Field>, name: &str, init: F) -> TypeDef
    where
        F: Fn(&Record) -> std::result::Result<Fields, String> + Send + Sync + 'static,
    {
        let mut fields = self.fields();
        fields.extend(added);
        self.versions.push((Spec::new(fields).init(name), Some((name.to_owned(), Arc::new(init) as InitFn))));
        self
    }

    /// An automatic version that replaces fields: `dropped` (by name) are
    /// retired, `added` computed by `init` — a field's type changed, as the
    /// paper's 32 → 64-bit key.
    #[must_use]
    pub fn replace<F>(mut self, dropped: &[&str], added: Vec<Field>, name: &str, init: F) -> TypeDef
    where
        F: Fn(&Record) -> std::result::Result<Fields, String> + Send + Sync + 'static,
    {
        let mut fields: Vec<Field> =
            self.fields().into_iter().filter(|f| !dropped.contains(&f.name.as_str())).collect();
        fields.extend(added);
        self.versions.push((Spec::new(fields).init(name), Some((name.to_owned(), Arc::new(init) as InitFn))));
        self
    }

    /// A manual version with exactly `fields`, migrated by `migrate`.
    #[must_use]
    pub fn manual<F>(mut self, fields: Vec<Field>, name: &str, migrate: F) -> TypeDef
    where
        F: Fn(&Record) -> std::result::Result<Fields, String> + Send + Sync + 'static,
    {
        self.versions.push((Spec::new(fields).migration(name), Some((name.to_owned(), Arc::new(migrate) as InitFn))));
        self
    }

    /// A reset version with exactly `fields`: the data starts over.
    #[must_use]
    pub fn reset(mut self, fields: Vec<Field>) -> TypeDef {
        self.versions.push((Spec::new(fields).model(Model::Reset), None));
        self
    }

    /// The last declared version checked in `compat` mode.
    #[must_use]
    pub fn compat(mut self, compat: Compat) -> TypeDef {
        if let Some((spec, _)) = self.versions.last_mut() {
            spec.compat = compat;
        }
        self
    }

    /// The specs, oldest first.
    #[must_use]
    pub fn specs(&self) -> Vec<&Spec> {
        self.versions.iter().map(|(spec, _)| spec).collect()
    }
}

impl Schemas {
    /// Define `def`'s functions and register the versions the registry
    /// lacks. A declared version that differs from the one registered
    /// under its number is an error (versions are append-only). Stops
    /// after a manual version: run [`Schemas::migrate`], then declare again.
    pub fn declare(&self, def: &TypeDef) -> Result<Vec<Registered>> {
        for (_, function) in &def.versions {
            if let Some((name, function)) = function {
                self.define_function(name, function.clone());
            }
        }
        self.refresh()?;
        let registered = self.subject(def.subject()).map(|s| s.versions).unwrap_or_default();
        let mut out = Vec::new();
        for (i, (spec, _)) in def.versions.iter().enumerate() {
            if let Some(existing) = registered.get(i) {
                let model_matches = existing.model == spec.model
                    || (i == 0 && existing.model == Model::Initial && spec.model == Model::Automatic);
                if existing.fields != spec.fields || !model_matches || existing.init != spec.init {
                    return Err(SchemaError::Invalid {
                        subject: def.subject().to_owned(),
                        reason: format!(
                            "declared v{} differs from the registered v{}: registered versions never change; declare the change as a new version",
                            i + 1,
                            i + 1
                        ),
                    });
                }
                continue;
            }
            let result = self.register(def.subject(), spec)?;
            let pending = result.version.model == Model::Manual;
            out.push(result);
            if pending {
                break;
            }
        }
        Ok(out)
    }
}

impl TypedLog {
    /// Append a serde value (a struct whose fields are the schema's).
    pub fn append_value<T: Serialize>(&self, value: &T) -> Result<varve_log::Seq> {
        let json = serde_json::to_value(value).map_err(|e| SchemaError::BadValue {
            subject: self.subject().to_owned(),
            version: 0,
            reason: e.to_string(),
        })?;
        self.append_json(&json)
    }
}

impl Stored {
    /// The record, upgraded, as a serde value (a struct of the newest shape).
    pub fn decode_as<T: DeserializeOwned>(&self) -> Result<T> {
        let json = self.to_json()?;
        serde_json::from_value(json).map_err(|e| SchemaError::BadValue {
            subject: self.target().subject.clone(),
            version: self.target().version,
            reason: format!("{} does not fit the Rust type: {e}", self.location()),
        })
    }
}
