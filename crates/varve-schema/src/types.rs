//! Field types and values.
//!
//! The types are the scalars every schema language has, with Avro's
//! promotions: a field may widen (`i32` → `i64` → `f64`, `u32` → `u64`,
//! `f32` → `f64`, `string` ↔ `bytes`) under the same field number, and old
//! records are read in the wider type.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The type of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)] // the names say it
pub enum FieldType {
    Bool,
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
    String,
    Bytes,
}

/// Every type, for parsers and tests.
pub const FIELD_TYPES: [FieldType; 9] = [
    FieldType::Bool,
    FieldType::I32,
    FieldType::I64,
    FieldType::U32,
    FieldType::U64,
    FieldType::F32,
    FieldType::F64,
    FieldType::String,
    FieldType::Bytes,
];

impl FieldType {
    /// The name used in schema files and JSON (`i32`, `string`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Bool => "bool",
            FieldType::I32 => "i32",
            FieldType::I64 => "i64",
            FieldType::U32 => "u32",
            FieldType::U64 => "u64",
            FieldType::F32 => "f32",
            FieldType::F64 => "f64",
            FieldType::String => "string",
            FieldType::Bytes => "bytes",
        }
    }

    /// The type named `name`, if any.
    #[must_use]
    pub fn parse(name: &str) -> Option<FieldType> {
        FIELD_TYPES.into_iter().find(|t| t.name() == name)
    }

    /// Whether a value written as `self` can be read as `to` without loss of
    /// meaning (Avro's promotion rules). Equal types promote.
    #[must_use]
    pub fn promotes_to(self, to: FieldType) -> bool {
        use FieldType::{Bytes, String, F32, F64, I32, I64, U32, U64};
        self == to
            || matches!(
                (self, to),
                (I32 | I64 | U64 | F32, F64) | (I32, I64) | (U32, U64 | I64 | F64) | (String, Bytes) | (Bytes, String)
            )
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field's value. Integers of every width are held as `Int` (signed) or
/// `UInt` (unsigned); the schema says the width.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // the names say it
pub enum Value {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Value {
    /// This value as a value of `ty`, if it fits (range-checked for narrow
    /// integers; integers become floats; text and bytes interconvert when
    /// the bytes are UTF-8). `None` when it does not fit.
    #[must_use]
    pub fn coerce(&self, ty: FieldType) -> Option<Value> {
        use FieldType as T;
        #[allow(clippy::cast_precision_loss)]
        match (self, ty) {
            (Value::Bool(b), T::Bool) => Some(Value::Bool(*b)),
            (Value::Int(i), T::I32) => i32::try_from(*i).ok().map(|v| Value::Int(v.into())),
            (Value::Int(i), T::I64) => Some(Value::Int(*i)),
            (Value::Int(i), T::U32) => u32::try_from(*i).ok().map(|v| Value::UInt(v.into())),
            (Value::Int(i), T::U64) => u64::try_from(*i).ok().map(Value::UInt),
            (Value::UInt(u), T::I32) => i32::try_from(*u).ok().map(|v| Value::Int(v.into())),
            (Value::UInt(u), T::I64) => i64::try_from(*u).ok().map(Value::Int),
            (Value::UInt(u), T::U32) => u32::try_from(*u).ok().map(|v| Value::UInt(v.into())),
            (Value::UInt(u), T::U64) => Some(Value::UInt(*u)),
            (Value::Int(i), T::F32 | T::F64) => Some(Value::Float(*i as f64)),
            (Value::UInt(u), T::F32 | T::F64) => Some(Value::Float(*u as f64)),
            (Value::Float(x), T::F64) => Some(Value::Float(*x)),
            #[allow(clippy::cast_possible_truncation)]
            (Value::Float(x), T::F32) => Some(Value::Float(f64::from(*x as f32))),
            (Value::Text(s), T::String) => Some(Value::Text(s.clone())),
            (Value::Text(s), T::Bytes) => Some(Value::Bytes(s.clone().into_bytes())),
            (Value::Bytes(b), T::Bytes) => Some(Value::Bytes(b.clone())),
            (Value::Bytes(b), T::String) => String::from_utf8(b.clone()).ok().map(Value::Text),
            _ => None,
        }
    }

    /// This value as JSON (bytes as an array of numbers is unreadable, so
    /// they become a `{"base64": …}`-free hex string prefixed `0x`).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::UInt(u) => serde_json::Value::from(*u),
            Value::Float(x) => {
                serde_json::Number::from_f64(*x).map_or(serde_json::Value::Null, serde_json::Value::Number)
            }
            Value::Text(s) => serde_json::Value::String(s.clone()),
            Value::Bytes(b) => serde_json::Value::String(format!("0x{}", hex(b))),
        }
    }

    /// The value of type `ty` that `json` denotes, if it denotes one.
    #[must_use]
    pub fn from_json(json: &serde_json::Value, ty: FieldType) -> Option<Value> {
        let raw = match json {
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    Value::UInt(u)
                } else if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else {
                    Value::Float(n.as_f64()?)
                }
            }
            serde_json::Value::String(s) if ty == FieldType::Bytes => Value::Bytes(unhex(s)?),
            serde_json::Value::String(s) => Value::Text(s.clone()),
            _ => return None,
        };
        raw.coerce(ty)
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let digits = text.strip_prefix("0x")?;
    if digits.len() % 2 != 0 {
        return None;
    }
    (0..digits.len()).step_by(2).map(|i| u8::from_str_radix(digits.get(i..i + 2)?, 16).ok()).collect()
}

/// One field of a schema version: identity is the number, never reused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Field {
    /// Identity: never reused for another field.
    pub number: u32,
    /// May move to a new number when the type changes.
    pub name: String,
    /// The field's type.
    #[serde(rename = "type")]
    pub ty: FieldType,
    /// The value old records get when they lack this field (stored once, in
    /// the schema, as Postgres stores an `ADD COLUMN … DEFAULT`). JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
}

impl Field {
    /// A field without a default.
    #[must_use]
    pub fn new(number: u32, name: &str, ty: FieldType) -> Field {
        Field { number, name: name.to_owned(), ty, default: None }
    }

    /// This field with a constant default for records written before it.
    #[must_use]
    pub fn with_default(mut self, default: serde_json::Value) -> Field {
        self.default = Some(default);
        self
    }

    /// The default as a value of the field's type.
    #[must_use]
    pub fn default_value(&self) -> Option<Value> {
        self.default.as_ref().and_then(|d| Value::from_json(d, self.ty))
    }
}
