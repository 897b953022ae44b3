//! The JSON shapes of the HTTP API (`docs/http.md`): what a log looks like,
//! how a create and a batch are written. Record bytes travel raw in appends
//! and gets, and as standard base64 inside JSON.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, LogError, LogInfo, OnFull, Retention, Seq};

/// A log's retention: `{"keep": null}` (unbounded) or `{"keep": K, "on_full": …}`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RetentionJson {
    /// Most records kept; `None` for unbounded.
    #[serde(default)]
    pub keep: Option<u64>,
    /// `"refuse"` or `"overwrite"`; only with `keep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_full: Option<OnFullJson>,
}

/// What a full `keep` log does, as JSON.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnFullJson {
    /// Appends fail with `full`.
    Refuse,
    /// The oldest records are trimmed.
    Overwrite,
}

impl From<Retention> for RetentionJson {
    fn from(retention: Retention) -> Self {
        match retention {
            Retention::Unbounded => RetentionJson { keep: None, on_full: None },
            Retention::Keep { k, on_full } => RetentionJson {
                keep: Some(k),
                on_full: Some(match on_full {
                    OnFull::Refuse => OnFullJson::Refuse,
                    OnFull::Overwrite => OnFullJson::Overwrite,
                }),
            },
        }
    }
}

/// The body of a rename: `{"renames": [{"from": "a", "to": "b"}, …]}`, all
/// at once or none (`Namespace::rename_logs`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RenameJson {
    /// The renames, in the order their errors are reported.
    pub renames: Vec<RenamePairJson>,
}

/// TRIM: `{"before": N}` — the records of the log below seq N go.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TrimJson {
    /// The first seq kept.
    pub before: u64,
}

/// One rename of a [`RenameJson`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RenamePairJson {
    /// The log's name now.
    pub from: String,
    /// Its new name.
    pub to: String,
}

/// The body of a create: a retention, and `system` for Varve's own `_` logs.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateJson {
    /// Most records kept; absent or `null` for unbounded.
    #[serde(default)]
    pub keep: Option<u64>,
    /// What a full log does; defaults to `refuse`; only with `keep`.
    #[serde(default)]
    pub on_full: Option<OnFullJson>,
    /// A system log (`_`-prefixed name), as the runtime creates.
    #[serde(default)]
    pub system: bool,
}

impl CreateJson {
    /// The log configuration asked for; `on_full` without `keep` is refused.
    pub fn config(&self) -> Result<LogConfig, LogError> {
        let config = match (self.keep, self.on_full) {
            (None, None) => LogConfig::unbounded(),
            (None, Some(_)) => {
                return Err(LogError::InvalidArgument {
                    reason: "\"on_full\" needs \"keep\": give the number of records to keep".into(),
                })
            }
            (Some(k), on_full) => LogConfig::keep(
                k,
                match on_full.unwrap_or(OnFullJson::Refuse) {
                    OnFullJson::Refuse => OnFull::Refuse,
                    OnFullJson::Overwrite => OnFull::Overwrite,
                },
            ),
        };
        Ok(if self.system { config.system() } else { config })
    }
}

/// What the API says about a log.
#[derive(Debug, Serialize)]
pub struct LogInfoJson {
    /// The log's name.
    pub name: String,
    /// Its retention.
    pub retention: RetentionJson,
    /// Whether it is one of Varve's own logs.
    pub system: bool,
    /// Oldest readable seq; 0 when empty.
    pub earliest: Seq,
    /// Newest seq; 0 when nothing was appended.
    pub latest: Seq,
}

impl From<LogInfo> for LogInfoJson {
    fn from(info: LogInfo) -> Self {
        LogInfoJson {
            name: info.name,
            retention: info.config.retention.into(),
            system: info.config.system,
            earliest: info.earliest,
            latest: info.latest,
        }
    }
}

/// The body of a batch append.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchJson {
    /// The records, in order; all land or none.
    pub records: Vec<BatchRecordJson>,
    /// `append_batch_if`: the batch lands only while each of these logs
    /// (each one the batch writes) ends at its seq.
    #[serde(default)]
    pub expected: Vec<ExpectedJson>,
}

/// A batch's records (log, bytes) and its expectations (log, latest seq).
pub type DecodedBatch = (Vec<(String, Vec<u8>)>, Vec<(String, Seq)>);

/// Where a log must end for a conditional batch to land.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedJson {
    /// The log.
    pub log: String,
    /// Its latest seq (0: empty).
    pub latest: Seq,
}

/// One record of a batch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRecordJson {
    /// The log it goes to.
    pub log: String,
    /// Its bytes, base64.
    pub value: String,
}

impl BatchJson {
    /// The records with their bytes decoded, and the expectations; a bad
    /// base64 value is named by its index.
    pub fn decode(self) -> Result<DecodedBatch, LogError> {
        let records = self
            .records
            .into_iter()
            .enumerate()
            .map(|(i, record)| {
                let value = BASE64.decode(record.value.as_bytes()).map_err(|e| LogError::InvalidArgument {
                    reason: format!("records[{i}].value is not standard base64: {e}"),
                })?;
                Ok((record.log, value))
            })
            .collect::<Result<_, LogError>>()?;
        Ok((records, self.expected.into_iter().map(|e| (e.log, e.latest)).collect()))
    }
}

/// The answer to an append.
#[derive(Debug, Serialize)]
pub struct AppendedJson {
    /// The record's seq.
    pub seq: Seq,
    /// A request id had landed before: nothing was appended now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repeated: bool,
}

/// The answer to a batch.
#[derive(Debug, Serialize)]
pub struct BatchAppendedJson {
    /// Each record's seq, in input order.
    pub seqs: Vec<Seq>,
    /// A request id had landed before: nothing was appended now.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repeated: bool,
}

/// One scanned record, one NDJSON line.
#[derive(Debug, Serialize)]
pub struct RecordJson<'a> {
    /// The record's seq.
    pub seq: Seq,
    /// Its bytes, base64.
    pub value: &'a str,
}

/// Base64 of a record's bytes, as JSON and SSE carry them.
#[must_use]
pub fn encode_value(value: &[u8]) -> String {
    BASE64.encode(value)
}
