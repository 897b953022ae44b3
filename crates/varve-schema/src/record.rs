//! Records: values in the shape of one schema version, and the lazily
//! upgraded view a reader gets ([`Stored`]).
//!
//! LEDS (`seeds/003_…` §3.4, §4.3.2) upgrades an object on the first access
//! to a field of an extension, not on every access. [`Stored::get`] does the
//! same: a field the record was written with is read directly (widened if
//! its type was promoted); only a field some later version added runs the
//! INIT chain, once per record, and never writes anything back.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

use crate::error::{Result, SchemaError};
use crate::schema::SchemaVersion;
use crate::types::Value;
use crate::wire;

/// An INIT: computes the fields an extension adds from the record in the
/// previous version's shape. Returns `(field name, value)` pairs, or a
/// reason it cannot.
pub type InitFn = Arc<dyn Fn(&Record) -> Result<Fields, String> + Send + Sync>;

/// What an INIT or a migration returns: `(field name, value)` pairs. Names
/// are `Cow` so a Rust function's literal names cost no allocation.
pub type Fields = Vec<(Cow<'static, str>, Value)>;

/// The INITs and migrations a program has defined, by name.
pub(crate) type FunctionTable = RwLock<HashMap<String, InitFn>>;

/// One automatic step of an upgrade chain: the version, and its INIT as
/// the program defined it when the chain was resolved (`None`: none, or
/// not defined yet — looked up again when it runs).
#[derive(Clone)]
pub(crate) struct Step {
    pub(crate) version: Arc<SchemaVersion>,
    pub(crate) init: Option<InitFn>,
}

/// A version and the automatic versions after it, up to its upgrade
/// target, resolved once per version id (the registry caches it).
pub(crate) struct Chain {
    pub(crate) written: Arc<SchemaVersion>,
    pub(crate) steps: Box<[Step]>,
    pub(crate) functions: Arc<FunctionTable>,
}

/// Where a record lives, for error messages; cheap to make, formatted only
/// when an error is.
#[derive(Clone, Debug)]
pub enum Location {
    /// A fixed description.
    Named(&'static str),
    /// A record of a log.
    Record {
        /// The log.
        log: Arc<str>,
        /// Its seq.
        seq: u64,
    },
    /// Any description.
    Text(String),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Named(text) => f.write_str(text),
            Location::Record { log, seq } => write!(f, "{log}@{seq}"),
            Location::Text(text) => f.write_str(text),
        }
    }
}

impl From<&'static str> for Location {
    fn from(text: &'static str) -> Location {
        Location::Named(text)
    }
}

impl From<String> for Location {
    fn from(text: String) -> Location {
        Location::Text(text)
    }
}

/// A record in the shape of one schema version.
///
/// Invariant: `values[i]` is `None` or a value of `version.fields[i].ty`;
/// `unknown` is a sequence of whole wire fields whose numbers `version`
/// does not have (kept from the writer and written back).
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    version: Arc<SchemaVersion>,
    values: Vec<Option<Value>>,
    unknown: Vec<u8>,
}

impl Record {
    /// An empty record of `version`: set its fields, then write it.
    #[must_use]
    pub fn new(version: Arc<SchemaVersion>) -> Record {
        let values = vec![None; version.fields.len()];
        Record { version, values, unknown: Vec::new() }
    }

    /// The version whose shape this record has.
    #[must_use]
    pub fn version(&self) -> &Arc<SchemaVersion> {
        &self.version
    }

    /// Set a field by name; the value must fit its type.
    pub fn set(&mut self, name: &str, value: impl Into<Value>) -> Result<&mut Record> {
        let value = value.into();
        let Some((i, field)) = self.version.field_by_name(name) else {
            return Err(self.bad(format!("it has no field '{name}'")));
        };
        let Some(typed) = value.coerce(field.ty) else {
            return Err(self.bad(format!("{value:?} is not a {} (field '{name}')", field.ty)));
        };
        self.values[i] = Some(typed);
        Ok(self)
    }

    /// This record with `name` set.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Result<Record> {
        self.set(name, value)?;
        Ok(self)
    }

    /// A field's value, or its default when the record lacks it.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Value> {
        let (i, field) = self.version.field_by_name(name)?;
        self.values[i].clone().or_else(|| field.default_value())
    }

    /// The value of field number `number`, or its default.
    #[must_use]
    pub fn get_number(&self, number: u32) -> Option<Value> {
        let (i, field) = self.version.field_by_number(number)?;
        self.values[i].clone().or_else(|| field.default_value())
    }

    /// The wire bytes of fields this record's version does not know (written
    /// by a newer program), kept so that writing the record back keeps them.
    #[must_use]
    pub fn unknown_fields(&self) -> &[u8] {
        &self.unknown
    }

    /// A record of `version` from a JSON object of field names to values.
    pub fn from_json(version: Arc<SchemaVersion>, json: &serde_json::Value) -> Result<Record> {
        let mut record = Record::new(version);
        let Some(object) = json.as_object() else {
            return Err(record.bad(format!("expected a JSON object of fields, got {json}")));
        };
        for (name, value) in object {
            let Some((i, field)) = record.version.field_by_name(name) else {
                return Err(record.bad(format!("it has no field '{name}'")));
            };
            if value.is_null() {
                continue;
            }
            let Some(typed) = Value::from_json(value, field.ty) else {
                return Err(record.bad(format!("{value} is not a {} (field '{name}')", field.ty)));
            };
            record.values[i] = Some(typed);
        }
        Ok(record)
    }

    /// The record as a JSON object (defaults filled in; absent fields
    /// without a default left out).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        for (field, value) in self.version.fields.iter().zip(&self.values) {
            if let Some(value) = value.clone().or_else(|| field.default_value()) {
                object.insert(field.name.clone(), value.to_json());
            }
        }
        serde_json::Value::Object(object)
    }

    fn bad(&self, reason: String) -> SchemaError {
        SchemaError::BadValue { subject: self.version.subject.clone(), version: self.version.version, reason }
    }

    /// The stored form: the version's id, then the fields (see [`wire`]).
    /// Every field without a default must be set.
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(16 + self.unknown.len());
        wire::put_varint(&mut out, self.version.id);
        for (field, value) in self.version.fields.iter().zip(&self.values) {
            match value {
                Some(value) => {
                    wire::put_field(&mut out, field.number, field.ty, value);
                }
                None if field.default.is_some() => {}
                None => return Err(self.bad(format!("field '{}' is not set and has no default", field.name))),
            }
        }
        out.extend_from_slice(&self.unknown);
        Ok(out)
    }

    /// Decode the fields after the id, in the shape of the writer's version.
    pub(crate) fn decode(version: Arc<SchemaVersion>, body: &[u8], location: &dyn Fn() -> String) -> Result<Record> {
        let mut record = Record::new(version);
        let mut pos = 0;
        while pos < body.len() {
            let field = wire::next_field(body, &mut pos, |n| record.version.field_by_number(n).map(|(_, f)| f.ty))
                .map_err(|reason| SchemaError::Corrupt {
                    location: location(),
                    subject: record.version.subject.clone(),
                    version: record.version.version,
                    reason,
                })?;
            match field {
                wire::WireField::Known { number, value } => {
                    if let Some((i, _)) = record.version.field_by_number(number) {
                        record.values[i] = Some(value);
                    }
                }
                wire::WireField::Unknown { raw } => record.unknown.extend_from_slice(raw),
            }
        }
        Ok(record)
    }

    /// This record in the shape of `next`, the version after its own:
    /// kept fields widened, added ones from defaults and `next`'s INIT.
    pub(crate) fn step(&self, step: &Step, inits: &FunctionTable, location: &dyn Fn() -> String) -> Result<Record> {
        let next = &step.version;
        let mut values: Vec<Option<Value>> = next
            .fields
            .iter()
            .map(|f| match self.version.field_by_number(f.number) {
                Some((i, _)) => self.values[i].as_ref().and_then(|v| v.coerce(f.ty)),
                None => None,
            })
            .collect();
        // Fields kept raw from a newer writer (see `project`) that `next`
        // knows come back as values; an INIT does not overwrite them.
        let (carried, unknown) = split_unknown(&self.unknown, next);
        for (number, value) in carried {
            if let Some((i, _)) = next.field_by_number(number) {
                values[i] = Some(value);
            }
        }
        let failed = |init: &str, reason: String| SchemaError::InitFailed {
            subject: next.subject.clone(),
            version: next.version,
            init: init.to_owned(),
            location: location(),
            reason,
        };
        let lacking = next
            .fields
            .iter()
            .zip(&values)
            .any(|(f, v)| v.is_none() && self.version.field_by_number(f.number).is_none());
        if let Some(init) = next.init.as_ref().filter(|_| lacking) {
            let function = match &step.init {
                Some(function) => function.clone(),
                None => {
                    inits.read().ok().and_then(|t| t.get(init).cloned()).ok_or_else(|| SchemaError::MissingInit {
                        subject: next.subject.clone(),
                        version: next.version,
                        init: init.clone(),
                    })?
                }
            };
            let computed = match catch_unwind(AssertUnwindSafe(|| function(self))) {
                Ok(Ok(computed)) => computed,
                Ok(Err(reason)) => return Err(failed(init, reason)),
                Err(panic) => return Err(failed(init, format!("it panicked: {}", panic_text(&*panic)))),
            };
            for (name, value) in computed {
                let Some((i, field)) = next.field_by_name(&name) else {
                    return Err(failed(init, format!("it set '{name}', which v{} does not have", next.version)));
                };
                if self.version.field_by_number(field.number).is_some() {
                    return Err(failed(init, format!("it set '{name}', which is not a field v{} adds", next.version)));
                }
                let value = value
                    .coerce(field.ty)
                    .ok_or_else(|| failed(init, format!("{value:?} is not a {} (field '{name}')", field.ty)))?;
                values[i].get_or_insert(value);
            }
        }
        for (field, value) in next.fields.iter().zip(&values) {
            let added = self.version.field_by_number(field.number).is_none();
            if added && value.is_none() && field.default.is_none() {
                let init = next.init.as_deref().unwrap_or("(none)");
                return Err(failed(init, format!("field '{}' was left unset and has no default", field.name)));
            }
        }
        Ok(Record { version: next.clone(), values, unknown })
    }

    /// This record as a reader of `version` sees it: the fields `version`
    /// has (widened or narrowed when the value fits), every other field
    /// kept as raw wire bytes so that writing the record back keeps it —
    /// what an older program does with a newer record (FORWARD).
    #[must_use]
    pub fn project(&self, version: Arc<SchemaVersion>) -> Record {
        let mut unknown = Vec::new();
        let mut values = vec![None; version.fields.len()];
        for (field, value) in self.version.fields.iter().zip(&self.values) {
            let Some(value) = value else { continue };
            match version.field_by_number(field.number) {
                Some((i, target)) if value.coerce(target.ty).is_some() => values[i] = value.coerce(target.ty),
                _ => {
                    wire::put_field(&mut unknown, field.number, field.ty, value);
                }
            }
        }
        let (carried, rest) = split_unknown(&self.unknown, &version);
        for (number, value) in carried {
            if let Some((i, _)) = version.field_by_number(number) {
                values[i] = Some(value);
            }
        }
        unknown.extend_from_slice(&rest);
        Record { version, values, unknown }
    }
}

/// Split raw wire fields into the ones `version` knows (decoded with its
/// types) and the rest (still raw). A field whose wire type does not match
/// `version`'s type for its number stays raw.
fn split_unknown(raw: &[u8], version: &SchemaVersion) -> (Vec<(u32, Value)>, Vec<u8>) {
    if raw.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let mut known = Vec::new();
    let mut rest = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        let start = pos;
        match wire::next_field(raw, &mut pos, |n| version.field_by_number(n).map(|(_, f)| f.ty)) {
            Ok(wire::WireField::Known { number, value }) => known.push((number, value)),
            Ok(wire::WireField::Unknown { raw: field }) => rest.extend_from_slice(field),
            Err(_) => {
                // Not decodable with this version's types: keep the rest as it is.
                rest.extend_from_slice(&raw[start..]);
                break;
            }
        }
    }
    (known, rest)
}

/// What a caught panic said, for an error message.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".to_owned())
}

/// A record as read: the record as written, seen in the shape of the newest
/// version its generation reaches by automatic upgrades, upgraded lazily.
/// Used by one thread at a time (`Send`, not `Sync`: the upgrade is cached
/// in a `OnceCell`, which costs less than a lock on the first access).
pub struct Stored {
    original: Record,
    chain: Arc<Chain>,
    location: Location,
    upgraded: OnceCell<Record>,
}

impl Stored {
    pub(crate) fn new(original: Record, chain: Arc<Chain>, location: Location) -> Stored {
        Stored { original, chain, location, upgraded: OnceCell::new() }
    }

    /// The version readers see this record in.
    #[must_use]
    pub fn target(&self) -> &Arc<SchemaVersion> {
        self.chain.steps.last().map_or(&self.original.version, |s| &s.version)
    }

    /// The record exactly as written.
    #[must_use]
    pub fn original(&self) -> &Record {
        &self.original
    }

    /// Where the record lives (`log@seq`), for messages.
    #[must_use]
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Whether the record was written with the target version (no upgrade).
    #[must_use]
    pub fn is_current(&self) -> bool {
        self.chain.steps.is_empty()
    }

    /// A field of the target version. A field the record was written with
    /// is read as stored; a field added later runs the INIT chain (once).
    pub fn get(&self, name: &str) -> Result<Option<Value>> {
        let target = self.target();
        let Some((_, field)) = target.field_by_name(name) else {
            return Err(SchemaError::BadValue {
                subject: target.subject.clone(),
                version: target.version,
                reason: format!("it has no field '{name}'"),
            });
        };
        if let Some((i, written)) = self.original.version.field_by_number(field.number) {
            return Ok(match &self.original.values[i] {
                Some(value) if written.ty == field.ty => Some(value.clone()),
                Some(value) => value.coerce(field.ty),
                None => field.default_value(),
            });
        }
        Ok(self.record()?.get_number(field.number))
    }

    /// The whole record in the target's shape (runs the INIT chain once).
    pub fn record(&self) -> Result<&Record> {
        if self.chain.steps.is_empty() {
            return Ok(&self.original);
        }
        if let Some(done) = self.upgraded.get() {
            return Ok(done);
        }
        let location = || self.location.to_string();
        let functions = &self.chain.functions;
        let mut record = self.original.step(&self.chain.steps[0], functions, &location)?;
        for next in &self.chain.steps[1..] {
            record = record.step(next, functions, &location)?;
        }
        Ok(self.upgraded.get_or_init(|| record))
    }

    /// The record in the target's shape, owned (to modify and write back:
    /// writing it materialises the upgrade).
    pub fn into_record(self) -> Result<Record> {
        self.record()?;
        Ok(match self.upgraded.into_inner() {
            Some(record) => record,
            None => self.original,
        })
    }

    /// The upgraded record as JSON.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        Ok(self.record()?.to_json())
    }
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("location", &self.location)
            .field("original", &self.original)
            .finish_non_exhaustive()
    }
}

macro_rules! value_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::$variant(v.into())
            }
        })*
    };
}

value_from!(bool => Bool, i32 => Int, i64 => Int, u32 => UInt, u64 => UInt, f32 => Float, f64 => Float, String => Text, &str => Text, Vec<u8> => Bytes);
