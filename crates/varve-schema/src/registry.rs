//! The registry of a namespace's record types: the `_schema` log, folded
//! into memory, and the functions (INITs, migrations) the program defines.
//!
//! `_schema` holds two kinds of JSON records (`docs/design.md`, "Schema
//! records"): a **version** of a subject's type, whose seq is its id, and a
//! **generation** switch, which moves a subject's writers to a new log
//! (after a reset, or when a manual migration has copied every record).
//! Generation 1 of subject `S` is the log `S`; generation g ≥ 2 is
//! `S.gen<g>`. The registry is append-only like everything else: nothing in
//! `_schema` is ever changed, and old generations stay readable.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, LogError, Namespace, Seq, SeqRange};

use crate::compat;
use crate::error::{Result, SchemaError};
use crate::record::{Chain, Fields, FunctionTable, InitFn, Location, Record, Step, Stored};
use crate::schema::{validate, Model, SchemaVersion, Spec};
use crate::typed_log::TypedLog;
use crate::wire;

/// The log that holds a namespace's schema versions and generations.
pub const SCHEMA_LOG: &str = "_schema";

/// The built-in migration of `upgrade --eager`: every field of the record
/// upgraded by the INIT chain, copied as it is.
pub const EAGER_MIGRATION: &str = "varve.eager";

const FORMAT: u32 = 1;
const REGISTER_ATTEMPTS: usize = 32;

/// A switch of a subject's writers to a generation of its log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    /// The subject switched.
    pub subject: String,
    /// 1, 2, …
    pub generation: u32,
    /// The log its records are in.
    pub log: String,
    /// The version writers use from the switch on.
    pub version: u32,
    /// Manual: the last seq of the previous generation the migration copied;
    /// records appended there after it are not in this generation.
    #[serde(default)]
    pub source_through: Seq,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Entry {
    Version(SchemaVersion),
    Generation(Generation),
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    format: u32,
    #[serde(flatten)]
    entry: Entry,
}

/// What the registry knows of one subject.
#[derive(Clone, Debug, Default)]
pub struct Subject {
    /// Every version, oldest first.
    pub versions: Vec<Arc<SchemaVersion>>,
    /// Every generation switched to, oldest first (generation 1 first).
    pub generations: Vec<Generation>,
}

impl Subject {
    /// The generation writers use.
    #[must_use]
    pub fn current(&self) -> &Generation {
        self.generations.last().unwrap_or_else(|| unreachable!("a subject exists once its first version is folded"))
    }

    /// The version writers use: the newest of the current generation.
    #[must_use]
    pub fn write_version(&self) -> &Arc<SchemaVersion> {
        let generation = self.current().generation;
        self.versions.iter().rev().find(|v| v.generation <= generation).unwrap_or(&self.versions[0])
    }

    /// A manual version whose migration has not switched writers yet.
    #[must_use]
    pub fn pending(&self) -> Option<&Arc<SchemaVersion>> {
        let generation = self.current().generation;
        self.versions.last().filter(|v| v.generation > generation)
    }

    /// The log of generation `g`.
    #[must_use]
    pub fn log_of(subject: &str, generation: u32) -> String {
        if generation <= 1 {
            subject.to_owned()
        } else {
            format!("{subject}.gen{generation}")
        }
    }
}

#[derive(Default)]
struct State {
    /// The `_schema` seqs folded in.
    folded: Seq,
    subjects: BTreeMap<String, Subject>,
    /// Version id → (subject, index into its versions).
    by_id: HashMap<u64, (String, usize)>,
    /// Version id → its resolved upgrade chain (a vector: ids are
    /// `_schema` seqs, small and dense). Cleared whenever a version is
    /// folded or a function defined.
    chains: Vec<Option<Arc<Chain>>>,
}

impl State {
    fn fold(&mut self, seq: Seq, bytes: &[u8]) -> Result<()> {
        let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| SchemaError::Invalid {
            subject: SCHEMA_LOG.to_owned(),
            reason: format!("record {seq} of {SCHEMA_LOG} is not a schema record ({e}); was the log written by hand?"),
        })?;
        if envelope.format != FORMAT {
            return Err(SchemaError::Invalid {
                subject: SCHEMA_LOG.to_owned(),
                reason: format!(
                    "record {seq} of {SCHEMA_LOG} has format {}, and this build reads format {FORMAT}: upgrade Varve",
                    envelope.format
                ),
            });
        }
        match envelope.entry {
            Entry::Version(mut version) => {
                version.id = seq;
                let subject = self.subjects.entry(version.subject.clone()).or_default();
                if subject.generations.is_empty() {
                    subject.generations.push(Generation {
                        subject: version.subject.clone(),
                        generation: 1,
                        log: version.subject.clone(),
                        version: version.version,
                        source_through: 0,
                    });
                }
                self.by_id.insert(seq, (version.subject.clone(), subject.versions.len()));
                subject.versions.push(Arc::new(version));
                self.chains.clear();
            }
            Entry::Generation(generation) => {
                if let Some(subject) = self.subjects.get_mut(&generation.subject) {
                    subject.generations.push(generation);
                    self.chains.clear();
                }
            }
        }
        self.folded = seq;
        Ok(())
    }

    fn chain(&mut self, id: u64, functions: &Arc<FunctionTable>) -> Option<Arc<Chain>> {
        let slot = usize::try_from(id).ok()?;
        if let Some(Some(chain)) = self.chains.get(slot) {
            return Some(chain.clone());
        }
        let (name, index) = self.by_id.get(&id)?;
        let versions = &self.subjects.get(name)?.versions;
        let written = versions[*index].clone();
        let defined = functions.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let steps: Box<[Step]> = versions[index + 1..]
            .iter()
            .take_while(|v| v.model == Model::Automatic && v.generation == written.generation)
            .map(|v| Step { version: v.clone(), init: v.init.as_ref().and_then(|name| defined.get(name).cloned()) })
            .collect();
        drop(defined);
        let chain = Arc::new(Chain { written, steps, functions: functions.clone() });
        if self.chains.len() <= slot {
            self.chains.resize(slot + 1, None);
        }
        self.chains[slot] = Some(chain.clone());
        Some(chain)
    }
}

/// What registering a version gives back.
#[derive(Clone, Debug)]
pub struct Registered {
    /// The version, as registered (with its id).
    pub version: Arc<SchemaVersion>,
    /// False when an identical version was already the newest (nothing
    /// was appended).
    pub created: bool,
    /// What the program should know (a reset's cleared data, a pending
    /// migration).
    pub warnings: Vec<String>,
}

/// The record types of one namespace.
pub struct Schemas {
    ns: Arc<dyn Namespace>,
    state: RwLock<State>,
    functions: Arc<FunctionTable>,
    /// Typed appends hold it shared; a generation switch holds it alone, so
    /// no append of this process lands in a generation after it is sealed.
    gate: RwLock<()>,
}

impl Schemas {
    /// The registry of `ns`, read from its `_schema` log (absent: empty).
    pub fn open(ns: Arc<dyn Namespace>) -> Result<Arc<Schemas>> {
        let schemas = Schemas {
            ns,
            state: RwLock::new(State::default()),
            functions: Arc::new(RwLock::new(HashMap::new())),
            gate: RwLock::new(()),
        };
        schemas.define_function(EAGER_MIGRATION, Arc::new(eager_copy));
        schemas.refresh()?;
        Ok(Arc::new(schemas))
    }

    /// The namespace below.
    #[must_use]
    pub fn namespace(&self) -> &Arc<dyn Namespace> {
        &self.ns
    }

    /// Fold records other writers added to `_schema` since the last look.
    pub fn refresh(&self) -> Result<()> {
        let latest = match self.ns.latest(SCHEMA_LOG) {
            Ok(latest) => latest,
            Err(LogError::LogNotFound { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let folded = self.read_state().folded;
        if latest <= folded {
            return Ok(());
        }
        let records: Vec<_> = self.ns.scan(SCHEMA_LOG, SeqRange::from_bounds(folded + 1..=latest))?.collect();
        let mut state = self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        for record in records {
            let record = record?;
            if record.seq > state.folded {
                state.fold(record.seq, &record.value)?;
            }
        }
        Ok(())
    }

    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Define (or replace) the INIT or migration function called `name`.
    pub fn define_function(&self, name: &str, function: InitFn) {
        self.functions.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name.to_owned(), function);
        self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner).chains.clear();
    }

    /// Define an INIT: `init(old)` returns the added fields' values.
    pub fn define_init<F>(&self, name: &str, init: F)
    where
        F: Fn(&Record) -> std::result::Result<Fields, String> + Send + Sync + 'static,
    {
        self.define_function(name, Arc::new(init));
    }

    /// Define a migration: `migrate(old)` returns every field of the new
    /// version (by name).
    pub fn define_migration<F>(&self, name: &str, migrate: F)
    where
        F: Fn(&Record) -> std::result::Result<Fields, String> + Send + Sync + 'static,
    {
        self.define_function(name, Arc::new(migrate));
    }

    /// Every subject with a registered type, in name order.
    #[must_use]
    pub fn subjects(&self) -> Vec<String> {
        self.read_state().subjects.keys().cloned().collect()
    }

    /// What the registry knows of `subject`.
    pub fn subject(&self, subject: &str) -> Result<Subject> {
        self.read_state().subjects.get(subject).cloned().ok_or_else(|| SchemaError::UnknownSubject(subject.to_owned()))
    }

    /// The version registered with id `id`.
    pub fn version_by_id(&self, id: u64) -> Option<Arc<SchemaVersion>> {
        let state = self.read_state();
        let (name, index) = state.by_id.get(&id)?;
        state.subjects.get(name).map(|s| s.versions[*index].clone())
    }

    /// The version writers of `subject` use.
    pub fn write_version(&self, subject: &str) -> Result<Arc<SchemaVersion>> {
        let state = self.read_state();
        let found = state.subjects.get(subject).ok_or_else(|| SchemaError::UnknownSubject(subject.to_owned()))?;
        Ok(found.write_version().clone())
    }

    /// An empty record of `subject`'s write version.
    pub fn record(&self, subject: &str) -> Result<Record> {
        Ok(Record::new(self.write_version(subject)?))
    }

    /// A record of `subject`'s write version from a JSON object.
    pub fn record_from_json(&self, subject: &str, json: &serde_json::Value) -> Result<Record> {
        Record::from_json(self.write_version(subject)?, json)
    }

    /// Check `spec` as `subject`'s next version without registering it.
    pub fn check(&self, subject: &str, spec: &Spec) -> Result<SchemaVersion> {
        self.refresh()?;
        let state = self.read_state();
        self.next_version(&state, subject, spec)
    }

    fn next_version(&self, state: &State, subject: &str, spec: &Spec) -> Result<SchemaVersion> {
        varve_log::validate_name(subject, false)?;
        let found = state.subjects.get(subject);
        validate(subject, spec, found.is_none())?;
        let Some(found) = found else {
            return Ok(SchemaVersion {
                subject: subject.to_owned(),
                version: 1,
                id: 0,
                fields: spec.fields.clone(),
                model: Model::Initial,
                init: None,
                migration: None,
                compat: spec.compat,
                generation: 1,
                source_first: None,
            });
        };
        if let Some(pending) = found.pending() {
            return Err(SchemaError::Migration(format!(
                "'{subject}' v{} is waiting for its migration to generation {}: run it (`varve schema upgrade {subject}`) before registering another version",
                pending.version, pending.generation
            )));
        }
        let last = found.versions.last().unwrap_or_else(|| unreachable!("a subject has a version"));
        let current = found.current();
        let (generation, source_first) = match spec.model {
            Model::Initial | Model::Automatic => (current.generation, None),
            Model::Reset => (current.generation + 1, None),
            Model::Manual => {
                let earliest = self.ns.earliest(&current.log)?;
                (current.generation + 1, Some(earliest.max(1)))
            }
        };
        let version = SchemaVersion {
            subject: subject.to_owned(),
            version: last.version + 1,
            id: 0,
            fields: spec.fields.clone(),
            model: if spec.model == Model::Initial { Model::Automatic } else { spec.model },
            init: spec.init.clone(),
            migration: spec.migration.clone(),
            compat: spec.compat,
            generation,
            source_first,
        };
        compat::check(&found.versions, &version)?;
        Ok(version)
    }

    /// Register `spec` as `subject`'s next version (the subject's log is
    /// created if missing). Registering a spec equal to a registered version
    /// returns that version and appends nothing.
    /// A reset switches writers to a new, empty generation at once; a
    /// manual version waits for [`Schemas::migrate`].
    pub fn register(&self, subject: &str, spec: &Spec) -> Result<Registered> {
        self.ns.create_log(SCHEMA_LOG, LogConfig::default().system())?;
        for _ in 0..REGISTER_ATTEMPTS {
            self.refresh()?;
            // A spec equal to a registered version is that version (as a
            // schema registry answers): programs register on every start.
            let (folded, existing) = {
                let state = self.read_state();
                let existing = state
                    .subjects
                    .get(subject)
                    .and_then(|s| s.versions.iter().rev().find(|v| same_spec(v, spec)).cloned());
                (state.folded, existing)
            };
            if let Some(version) = existing {
                return Ok(Registered { version, created: false, warnings: Vec::new() });
            }
            let version = self.next_version(&self.read_state(), subject, spec)?;
            let mut warnings = Vec::new();
            if version.version == 1 {
                self.prepare_first_log(subject)?;
            }
            let entry = serde_json::to_vec(&Envelope { format: FORMAT, entry: Entry::Version(version.clone()) })
                .map_err(|e| SchemaError::Invalid { subject: subject.to_owned(), reason: e.to_string() })?;
            let mut batch = vec![entry];
            if matches!(version.model, Model::Reset | Model::Manual) {
                let log = Subject::log_of(subject, version.generation);
                let config = self.ns.log_info(&Subject::log_of(subject, version.generation - 1)).map(|i| i.config);
                self.ns.create_log(&log, config.unwrap_or_default())?;
                let previous = Subject::log_of(subject, version.generation - 1);
                let kept = self.ns.log_info(&previous).map_or(0, |i| i.len());
                if version.model == Model::Reset {
                    batch.push(generation_entry(&version, &log, 0)?);
                    warnings.push(format!(
                        "reset: '{subject}' starts over empty in generation {} (log '{log}'); its {kept} earlier records stay readable in log '{previous}' until you delete it",
                        version.generation
                    ));
                } else {
                    warnings.push(format!(
                        "manual: writers keep v{} until the migration of {kept} records to generation {} (log '{log}') finishes: run `varve schema upgrade {subject}` or Schemas::migrate",
                        version.version - 1,
                        version.generation
                    ));
                }
            }
            let refs: Vec<(&str, &[u8])> = batch.iter().map(|b| (SCHEMA_LOG, b.as_slice())).collect();
            match self.ns.append_batch_if(&refs, &[(SCHEMA_LOG, folded)]) {
                Ok(_) => {}
                Err(LogError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
            self.refresh()?;
            let version = self.subject(subject)?.versions.last().cloned().unwrap_or_else(|| Arc::new(version));
            return Ok(Registered { version, created: true, warnings });
        }
        Err(SchemaError::Migration(format!(
            "registering '{subject}' lost {REGISTER_ATTEMPTS} races with other writers of {SCHEMA_LOG}: try again"
        )))
    }

    fn prepare_first_log(&self, subject: &str) -> Result<()> {
        match self.ns.log_info(subject) {
            Ok(info) if info.latest > 0 => Err(SchemaError::Invalid {
                subject: subject.to_owned(),
                reason: format!(
                    "log '{subject}' already holds {} untyped records, which typed readers could not decode: register the type on a new log and copy the records into it",
                    info.len()
                ),
            }),
            Ok(_) => Ok(()),
            Err(LogError::LogNotFound { .. }) => Ok(self.ns.create_log(subject, LogConfig::default())?),
            Err(e) => Err(e.into()),
        }
    }

    /// Register a manual version with the same fields as the write version,
    /// migrated by [`EAGER_MIGRATION`]: [`Schemas::migrate`] then writes
    /// every record, upgraded, into a new generation (`--eager`).
    pub fn upgrade_eager(&self, subject: &str) -> Result<Registered> {
        let current = self.write_version(subject)?;
        let spec = Spec::new(current.fields.clone()).migration(EAGER_MIGRATION).compat(current.compat);
        self.register(subject, &spec)
    }

    /// A typed view of `subject`'s log.
    pub fn log(self: &Arc<Self>, subject: &str) -> Result<TypedLog> {
        self.subject(subject).or_else(|_| {
            self.refresh()?;
            self.subject(subject)
        })?;
        Ok(TypedLog::new(self.clone(), subject.to_owned()))
    }

    /// Encode `record` for storage under its subject's write version. A
    /// record of an older version of the same generation is upgraded first
    /// (writing it back materialises the upgrade).
    pub fn encode(&self, record: &Record) -> Result<Vec<u8>> {
        let subject = &record.version().subject;
        let write = self.write_version(subject)?;
        if record.version().id == write.id {
            return record.encode();
        }
        let chain = self.chain(record.version().id)?;
        let Some(position) = chain.steps.iter().position(|s| s.version.id == write.id) else {
            return Err(SchemaError::BadValue {
                subject: subject.clone(),
                version: record.version().version,
                reason: format!(
                    "its generation ({}) is not the one writers use ({}, v{}): records cross generations only by migration",
                    record.version().generation,
                    write.generation,
                    write.version
                ),
            });
        };
        let location = || format!("a record of '{subject}' being written");
        let mut upgraded = record.step(&chain.steps[0], &self.functions, &location)?;
        for next in &chain.steps[1..=position] {
            upgraded = upgraded.step(next, &self.functions, &location)?;
        }
        upgraded.encode()
    }

    /// Decode a stored record (`location` names it in errors: a
    /// [`Location`], a `&'static str` or a `String`). The result upgrades
    /// lazily on access.
    pub fn decode(&self, bytes: &[u8], location: impl Into<Location>) -> Result<Stored> {
        let location = location.into();
        let mut pos = 0;
        let id = wire::get_varint(bytes, &mut pos).ok_or_else(|| SchemaError::Corrupt {
            location: location.to_string(),
            subject: "?".into(),
            version: 0,
            reason: "it is empty or its schema id is truncated".into(),
        })?;
        let chain = match self.chain(id) {
            Ok(found) => found,
            Err(SchemaError::UnknownSchemaId { .. }) => {
                self.refresh()?;
                self.chain(id).map_err(|_| SchemaError::UnknownSchemaId { location: location.to_string(), id })?
            }
            Err(e) => return Err(e),
        };
        let original = Record::decode(chain.written.clone(), &bytes[pos..], &|| location.to_string())?;
        Ok(Stored::new(original, chain, location))
    }

    fn chain(&self, id: u64) -> Result<Arc<Chain>> {
        {
            let state = self.read_state();
            if let Some(Some(chain)) = usize::try_from(id).ok().and_then(|slot| state.chains.get(slot)) {
                return Ok(chain.clone());
            }
        }
        let mut state = self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.chain(id, &self.functions).ok_or(SchemaError::UnknownSchemaId { location: String::new(), id })
    }

    pub(crate) fn functions(&self) -> &Arc<FunctionTable> {
        &self.functions
    }

    pub(crate) fn gate_shared(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn gate_exclusive(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.gate.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The `_schema` seq the registry has folded up to.
    #[must_use]
    pub fn folded(&self) -> Seq {
        self.read_state().folded
    }

    /// Append a generation switch for `version` if `_schema` is still at
    /// `folded` (false on a race: refresh and look again).
    pub(crate) fn switch_generation(&self, version: &SchemaVersion, source_through: Seq, folded: Seq) -> Result<bool> {
        let log = Subject::log_of(&version.subject, version.generation);
        let entry = generation_entry(version, &log, source_through)?;
        match self.ns.append_batch_if(&[(SCHEMA_LOG, &entry)], &[(SCHEMA_LOG, folded)]) {
            Ok(_) => {
                self.refresh()?;
                Ok(true)
            }
            Err(LogError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

fn generation_entry(version: &SchemaVersion, log: &str, source_through: Seq) -> Result<Vec<u8>> {
    let generation = Generation {
        subject: version.subject.clone(),
        generation: version.generation,
        log: log.to_owned(),
        version: version.version,
        source_through,
    };
    serde_json::to_vec(&Envelope { format: FORMAT, entry: Entry::Generation(generation) })
        .map_err(|e| SchemaError::Invalid { subject: version.subject.clone(), reason: e.to_string() })
}

fn same_spec(version: &SchemaVersion, spec: &Spec) -> bool {
    // A first version is registered as `initial` whatever its spec said;
    // a reset or manual spec with the same fields is still a new version.
    let model_matches = spec.model == version.model
        || (version.model == Model::Initial && matches!(spec.model, Model::Automatic | Model::Initial));
    version.fields == spec.fields && model_matches && version.init == spec.init && version.migration == spec.migration
}

#[allow(clippy::unnecessary_wraps)]
fn eager_copy(record: &Record) -> std::result::Result<Fields, String> {
    Ok(record.version().fields.iter().filter_map(|f| record.get(&f.name).map(|v| (f.name.clone().into(), v))).collect())
}
