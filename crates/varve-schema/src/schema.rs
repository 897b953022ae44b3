//! Schema versions: what each version of a subject's record type holds,
//! and how it came from the one before (the retention model).

use serde::{Deserialize, Serialize};

use crate::error::{Result, SchemaError};
use crate::types::Field;

/// How a version retains the data written under the versions before it
/// (`seeds/003_…` §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// The first version of a subject.
    Initial,
    /// Lazily extendible records (LEDS, §3.4): old records stay as written
    /// and are upgraded on access, by defaults and an optional INIT.
    Automatic,
    /// A migration function rewrites every record into a new generation of
    /// the log (§3.2), resumable; the old generation stays readable.
    Manual,
    /// The data of the type starts over in a new, empty generation (§3.1);
    /// the old generation stays readable until deleted.
    Reset,
}

impl Model {
    /// The name used in schema files (`automatic`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Model::Initial => "initial",
            Model::Automatic => "automatic",
            Model::Manual => "manual",
            Model::Reset => "reset",
        }
    }
}

/// Which earlier versions a new version must stay compatible with
/// (Confluent Schema Registry's vocabulary).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Compat {
    /// No check beyond field-number identity.
    None,
    /// The new version reads data written with the previous one (the default).
    #[default]
    Backward,
    /// Data written with the new version is readable by the previous one.
    Forward,
    /// Both.
    Full,
    /// `Backward` against every earlier version of the generation.
    BackwardTransitive,
    /// `Forward` against every earlier version of the generation.
    ForwardTransitive,
    /// `Full` against every earlier version of the generation.
    FullTransitive,
}

impl Compat {
    /// Every mode, for parsers.
    pub const ALL: [Compat; 7] = [
        Compat::None,
        Compat::Backward,
        Compat::Forward,
        Compat::Full,
        Compat::BackwardTransitive,
        Compat::ForwardTransitive,
        Compat::FullTransitive,
    ];

    /// The mode's name (`BACKWARD`, `FULL_TRANSITIVE`, …).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Compat::None => "NONE",
            Compat::Backward => "BACKWARD",
            Compat::Forward => "FORWARD",
            Compat::Full => "FULL",
            Compat::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Compat::ForwardTransitive => "FORWARD_TRANSITIVE",
            Compat::FullTransitive => "FULL_TRANSITIVE",
        }
    }

    /// The mode named `name` (case-insensitive).
    #[must_use]
    pub fn parse(name: &str) -> Option<Compat> {
        Compat::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(name))
    }

    pub(crate) fn backward(self) -> bool {
        matches!(self, Compat::Backward | Compat::Full | Compat::BackwardTransitive | Compat::FullTransitive)
    }

    pub(crate) fn forward(self) -> bool {
        matches!(self, Compat::Forward | Compat::Full | Compat::ForwardTransitive | Compat::FullTransitive)
    }

    pub(crate) fn transitive(self) -> bool {
        matches!(self, Compat::BackwardTransitive | Compat::ForwardTransitive | Compat::FullTransitive)
    }
}

/// What a program asks to register: a version's full field list and its
/// retention model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// Every field of the version (not only the added ones).
    pub fields: Vec<Field>,
    /// Defaults to `automatic` (to `initial` for a subject's first version).
    #[serde(default = "automatic")]
    pub model: Model,
    /// Automatic: the INIT computing added fields from the old record, by
    /// name (the program defines it: [`crate::Schemas::define_init`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<String>,
    /// Manual: the migration function, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<String>,
    /// The compatibility mode checked at registration.
    #[serde(default)]
    pub compat: Compat,
}

fn automatic() -> Model {
    Model::Automatic
}

impl Spec {
    /// A version with these fields, retained automatically (the first
    /// version of a subject is registered as `initial` whatever it says).
    #[must_use]
    pub fn new(fields: Vec<Field>) -> Spec {
        Spec { fields, model: Model::Automatic, init: None, migration: None, compat: Compat::Backward }
    }

    /// The same spec, retained by `model`.
    #[must_use]
    pub fn model(mut self, model: Model) -> Spec {
        self.model = model;
        self
    }

    /// The same spec, with an INIT for its added fields.
    #[must_use]
    pub fn init(mut self, name: &str) -> Spec {
        self.init = Some(name.to_owned());
        self
    }

    /// The same spec, migrated by the named function (`Model::Manual`).
    #[must_use]
    pub fn migration(mut self, name: &str) -> Spec {
        self.model = Model::Manual;
        self.migration = Some(name.to_owned());
        self
    }

    /// The same spec, checked in `compat` mode.
    #[must_use]
    pub fn compat(mut self, compat: Compat) -> Spec {
        self.compat = compat;
        self
    }
}

/// One registered version of a subject's record type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SchemaVersion {
    /// The log (or structure) the type belongs to.
    pub subject: String,
    /// 1, 2, … per subject.
    pub version: u32,
    /// Namespace-wide id, stored in front of every record written with this
    /// version: the seq of its registration in the `_schema` log.
    #[serde(default)]
    pub id: u64,
    /// Every field of this version.
    pub fields: Vec<Field>,
    /// How it retains the data of the versions before it.
    pub model: Model,
    /// Automatic: the INIT of its added fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<String>,
    /// Manual: the migration function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<String>,
    /// The mode it was checked in.
    pub compat: Compat,
    /// The generation of the subject's log its records are written to.
    pub generation: u32,
    /// Manual: the first seq of the old generation's log the migration
    /// reads (fixed at registration, so a resumed migration agrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_first: Option<u64>,
}

impl SchemaVersion {
    /// The field numbered `number`, with its position.
    #[must_use]
    pub fn field_by_number(&self, number: u32) -> Option<(usize, &Field)> {
        self.fields.iter().enumerate().find(|(_, f)| f.number == number)
    }

    /// The field named `name`, with its position.
    #[must_use]
    pub fn field_by_name(&self, name: &str) -> Option<(usize, &Field)> {
        self.fields.iter().enumerate().find(|(_, f)| f.name == name)
    }

    /// The fields this version has that `prev` does not (by number).
    pub fn added_since<'a>(&'a self, prev: &'a SchemaVersion) -> impl Iterator<Item = &'a Field> + 'a {
        self.fields.iter().filter(move |f| prev.field_by_number(f.number).is_none())
    }

    /// The version as JSON (`varve schema show --json`).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// Check a spec on its own: names and numbers unique, numbers ≥ 1, names
/// not empty, defaults of the field's type, the model's function named.
pub(crate) fn validate(subject: &str, spec: &Spec, first: bool) -> Result<()> {
    let invalid = |reason: String| SchemaError::Invalid { subject: subject.to_owned(), reason };
    if spec.fields.is_empty() {
        return Err(invalid("a schema needs at least one field".into()));
    }
    for (i, field) in spec.fields.iter().enumerate() {
        if field.number == 0 || field.number > (1 << 28) {
            return Err(invalid(format!(
                "field '{}' has number {}: numbers run from 1 to 2^28",
                field.name, field.number
            )));
        }
        if field.name.is_empty() || !field.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid(format!("field name '{}' must be letters, digits and '_'", field.name)));
        }
        if let Some(other) = spec.fields[..i].iter().find(|f| f.number == field.number || f.name == field.name) {
            return Err(invalid(format!(
                "fields '{}' and '{}' share a name or number ({})",
                other.name, field.name, field.number
            )));
        }
        if field.default.is_some() && field.default_value().is_none() {
            return Err(invalid(format!("the default of field '{}' is not a {}", field.name, field.ty)));
        }
    }
    match spec.model {
        Model::Manual if spec.migration.is_none() && !first => {
            Err(invalid("a manual version names its migration function".into()))
        }
        Model::Automatic | Model::Initial if spec.migration.is_some() => {
            Err(invalid("only a manual version has a migration".into()))
        }
        Model::Manual | Model::Reset if spec.init.is_some() => {
            Err(invalid("only an automatic version has an INIT (a manual one has a migration)".into()))
        }
        _ => Ok(()),
    }
}
