//! A typed view of a subject's log: records in, [`Stored`] records out.

use std::sync::Arc;

use varve_log::{Seq, SeqRange};

use crate::error::Result;
use crate::record::{Location, Record, Stored};
use crate::registry::{Schemas, Subject};

/// Appends and reads a subject's records in its current generation (and
/// reads any older one). Cheap to clone.
#[derive(Clone)]
pub struct TypedLog {
    schemas: Arc<Schemas>,
    subject: String,
}

impl TypedLog {
    pub(crate) fn new(schemas: Arc<Schemas>, subject: String) -> TypedLog {
        TypedLog { schemas, subject }
    }

    /// The subject.
    #[must_use]
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The registry.
    #[must_use]
    pub fn schemas(&self) -> &Arc<Schemas> {
        &self.schemas
    }

    /// The log of the current generation.
    pub fn current_log(&self) -> Result<String> {
        Ok(self.schemas.subject(&self.subject)?.current().log.clone())
    }

    /// An empty record of the write version.
    pub fn record(&self) -> Result<Record> {
        self.schemas.record(&self.subject)
    }

    /// Append a record (of the write version, or of an older version of the
    /// same generation, which is upgraded first). Returns its seq.
    pub fn append(&self, record: &Record) -> Result<Seq> {
        Ok(self.append_encoded(|| Ok(vec![self.schemas.encode(record)?]))?[0])
    }

    /// Append a record given as a JSON object of fields.
    pub fn append_json(&self, json: &serde_json::Value) -> Result<Seq> {
        let encode = || Ok(vec![self.schemas.encode(&self.schemas.record_from_json(&self.subject, json)?)?]);
        Ok(self.append_encoded(encode)?[0])
    }

    /// Append records in one all-or-nothing batch.
    pub fn append_batch(&self, records: &[Record]) -> Result<Vec<Seq>> {
        self.append_encoded(|| records.iter().map(|r| self.schemas.encode(r)).collect())
    }

    /// Every append: under the registry's gate (so no generation switch of
    /// this process slips between choosing the log and appending), with the
    /// newest versions picked up first, `encode` run, and its records
    /// appended to the current generation as one batch.
    fn append_encoded(&self, encode: impl FnOnce() -> Result<Vec<Vec<u8>>>) -> Result<Vec<Seq>> {
        let _shared = self.schemas.gate_shared();
        self.pick_up_new_versions()?;
        let log = self.current_log()?;
        let encoded = encode()?;
        let batch: Vec<(&str, &[u8])> = encoded.iter().map(|b| (log.as_str(), b.as_slice())).collect();
        Ok(self.schemas.namespace().append_batch(&batch)?)
    }

    /// Another process may have registered a version or switched a
    /// generation: writing with a stale view would use an old version.
    fn pick_up_new_versions(&self) -> Result<()> {
        if self.schemas.namespace().latest(crate::SCHEMA_LOG)? != self.schemas.folded() {
            self.schemas.refresh()?;
        }
        Ok(())
    }

    /// The record at `seq` of the current generation, in the newest shape.
    pub fn get(&self, seq: Seq) -> Result<Stored> {
        self.get_in(self.schemas.subject(&self.subject)?.current().generation, seq)
    }

    /// The record at `seq` of generation `generation`.
    pub fn get_in(&self, generation: u32, seq: Seq) -> Result<Stored> {
        let log = Subject::log_of(&self.subject, generation);
        let bytes = self.schemas.namespace().get(&log, seq)?;
        self.schemas.decode(&bytes, Location::Record { log: log.into(), seq })
    }

    /// The newest seq of the current generation (0 when empty).
    pub fn latest(&self) -> Result<Seq> {
        Ok(self.schemas.namespace().latest(&self.current_log()?)?)
    }

    /// The records of the current generation in `range`.
    pub fn scan(&self, range: impl Into<SeqRange>) -> Result<Vec<(Seq, Stored)>> {
        self.scan_in(self.schemas.subject(&self.subject)?.current().generation, range)
    }

    /// The records of generation `generation` in `range`.
    pub fn scan_in(&self, generation: u32, range: impl Into<SeqRange>) -> Result<Vec<(Seq, Stored)>> {
        let log = Subject::log_of(&self.subject, generation);
        let ns = self.schemas.namespace();
        let mut out = Vec::new();
        let name: Arc<str> = log.as_str().into();
        for record in ns.scan(&log, range.into())? {
            let record = record?;
            let location = Location::Record { log: name.clone(), seq: record.seq };
            out.push((record.seq, self.schemas.decode(&record.value, location)?));
        }
        Ok(out)
    }
}
