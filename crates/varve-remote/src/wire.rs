//! The JSON shapes of `docs/http.md`, as this client writes and reads them:
//! LOGINFO, RETENTION, CONFIG, BATCH and the answers to appends. The server's
//! side is `crates/varve-server/src/wire.rs`; the two must agree.
//!
//! Reading is lenient where the contract allows it (unknown fields are
//! ignored, so a newer server may add some) and strict where a wrong guess
//! would change data (a seq or a value that does not parse is `Protocol`).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, LogError, LogInfo, OnFull, Result, Retention, Seq};

/// What a full `keep` log does: `"refuse"` or `"overwrite"`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnFullJson {
    Refuse,
    Overwrite,
}

/// RETENTION: `{"keep": null}` or `{"keep": K, "on_full": …}`.
#[derive(Debug, Deserialize)]
pub(crate) struct RetentionJson {
    #[serde(default)]
    keep: Option<u64>,
    /// Absent with `keep` reads as `refuse`, as a create without it does.
    #[serde(default)]
    on_full: Option<OnFullJson>,
}

impl RetentionJson {
    fn retention(&self) -> Retention {
        match self.keep {
            None => Retention::Unbounded,
            Some(k) => Retention::Keep {
                k,
                on_full: match self.on_full {
                    Some(OnFullJson::Overwrite) => OnFull::Overwrite,
                    Some(OnFullJson::Refuse) | None => OnFull::Refuse,
                },
            },
        }
    }
}

/// CONFIG, the body of a create: a RETENTION plus `system` for Varve's own logs.
#[derive(Debug, Serialize)]
pub(crate) struct CreateJson {
    keep: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_full: Option<OnFullJson>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    system: bool,
}

impl From<LogConfig> for CreateJson {
    fn from(config: LogConfig) -> Self {
        let (keep, on_full) = match config.retention {
            Retention::Unbounded => (None, None),
            Retention::Keep { k, on_full: OnFull::Refuse } => (Some(k), Some(OnFullJson::Refuse)),
            Retention::Keep { k, on_full: OnFull::Overwrite } => (Some(k), Some(OnFullJson::Overwrite)),
        };
        CreateJson { keep, on_full, system: config.system }
    }
}

/// LOGINFO: `{"name", "retention", "system", "earliest", "latest"}`.
#[derive(Debug, Deserialize)]
pub(crate) struct LogInfoJson {
    name: String,
    retention: RetentionJson,
    #[serde(default)]
    system: bool,
    earliest: Seq,
    latest: Seq,
}

impl From<LogInfoJson> for LogInfo {
    fn from(json: LogInfoJson) -> Self {
        LogInfo {
            name: json.name,
            config: LogConfig { retention: json.retention.retention(), system: json.system },
            earliest: json.earliest,
            latest: json.latest,
        }
    }
}

/// The answer to `GET /v1/namespaces`.
#[derive(Debug, Deserialize)]
pub(crate) struct NamespacesJson {
    pub(crate) namespaces: Vec<String>,
}

/// The answer to `GET …/logs`.
#[derive(Debug, Deserialize)]
pub(crate) struct LogsJson {
    pub(crate) logs: Vec<LogInfoJson>,
}

/// BATCH: `{"records": [{"log", "value": BASE64}, …]}`.
#[derive(Debug, Serialize)]
pub(crate) struct BatchJson<'a> {
    records: Vec<BatchRecordJson<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    expected: Vec<ExpectedJson<'a>>,
}

/// Where a log must end for a conditional batch to land.
#[derive(Debug, Serialize)]
struct ExpectedJson<'a> {
    log: &'a str,
    latest: u64,
}

#[derive(Debug, Serialize)]
struct BatchRecordJson<'a> {
    log: &'a str,
    value: String,
}

impl<'a> BatchJson<'a> {
    pub(crate) fn new(batch: &[(&'a str, &[u8])]) -> Self {
        let records = batch.iter().map(|&(log, value)| BatchRecordJson { log, value: BASE64.encode(value) }).collect();
        BatchJson { records, expected: Vec::new() }
    }

    /// A conditional batch (`append_batch_if`): it lands only while each
    /// log of `expected` ends at its seq.
    pub(crate) fn expecting(mut self, expected: &[(&'a str, u64)]) -> Self {
        self.expected = expected.iter().map(|&(log, latest)| ExpectedJson { log, latest }).collect();
        self
    }
}

/// TRIM: `{"before": N}`.
#[derive(Debug, Serialize)]
pub(crate) struct TrimJson {
    pub(crate) before: u64,
}

/// The answer to a trim: `{"earliest": N}`.
#[derive(Debug, Deserialize)]
pub(crate) struct TrimmedJson {
    pub(crate) earliest: u64,
}

/// RENAMES: `{"renames": [{"from": "a", "to": "b"}, …]}`.
#[derive(Debug, Serialize)]
pub(crate) struct RenameJson<'a> {
    renames: Vec<RenamePairJson<'a>>,
}

#[derive(Debug, Serialize)]
struct RenamePairJson<'a> {
    from: &'a str,
    to: &'a str,
}

impl<'a> RenameJson<'a> {
    pub(crate) fn new(renames: &[(&'a str, &'a str)]) -> Self {
        RenameJson { renames: renames.iter().map(|&(from, to)| RenamePairJson { from, to }).collect() }
    }
}

/// The answer to an append: `{"seq": N}`, plus `"repeated": true` for a
/// request id the server had already seen.
#[derive(Debug, Deserialize)]
pub(crate) struct AppendedJson {
    pub(crate) seq: Seq,
}

/// The answer to a batch: `{"seqs": [N, …]}`, plus `"repeated": true` as above.
#[derive(Debug, Deserialize)]
pub(crate) struct BatchAppendedJson {
    pub(crate) seqs: Vec<Seq>,
    #[serde(default)]
    pub(crate) repeated: bool,
}

/// One record as scans and watches carry it: its seq and its bytes in base64.
#[derive(Debug, Deserialize)]
pub(crate) struct RecordJson {
    pub(crate) seq: Seq,
    pub(crate) value: String,
}

/// JSON of an answer or a line, or `Protocol` saying what did not parse.
pub(crate) fn parse_json<T: DeserializeOwned>(target: &str, what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| LogError::Protocol {
        target: target.to_owned(),
        reason: format!("{what} is not the JSON expected: {e}"),
    })
}

/// A record's bytes from their base64, or `Protocol`.
pub(crate) fn decode_value(target: &str, what: &str, base64: &str) -> Result<Bytes> {
    BASE64.decode(base64.as_bytes()).map(Bytes::from).map_err(|e| LogError::Protocol {
        target: target.to_owned(),
        reason: format!("{what} carries a value that is not standard base64: {e}"),
    })
}

/// An SSE `id:` or similar decimal seq, or `Protocol`.
pub(crate) fn parse_seq(target: &str, what: &str, text: &str) -> Result<Seq> {
    text.trim().parse().map_err(|_| LogError::Protocol {
        target: target.to_owned(),
        reason: format!("{what} has {text:?} where a seq (a decimal number) belongs"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_written_as_the_server_reads_them() {
        let json = |config| serde_json::to_string(&CreateJson::from(config)).unwrap();
        assert_eq!(json(LogConfig::unbounded()), r#"{"keep":null}"#);
        assert_eq!(json(LogConfig::keep(5, OnFull::Refuse)), r#"{"keep":5,"on_full":"refuse"}"#);
        assert_eq!(
            json(LogConfig::keep(5, OnFull::Overwrite).system()),
            r#"{"keep":5,"on_full":"overwrite","system":true}"#
        );
    }

    #[test]
    fn log_infos_read_back() {
        let read = |text: &str| LogInfo::from(parse_json::<LogInfoJson>("t", "LOGINFO", text.as_bytes()).unwrap());
        let info = read(r#"{"name": "t", "retention": {"keep": null}, "system": false, "earliest": 1, "latest": 7}"#);
        assert_eq!(info, LogInfo { name: "t".into(), config: LogConfig::unbounded(), earliest: 1, latest: 7 });
        let info = read(
            r#"{"name": "_e", "retention": {"keep": 3, "on_full": "overwrite"}, "system": true, "earliest": 5, "latest": 7, "new": 1}"#,
        );
        assert_eq!(info.config, LogConfig::keep(3, OnFull::Overwrite).system());
        assert!(parse_json::<LogInfoJson>("t", "LOGINFO", br#"{"name": "t"}"#).is_err());
    }

    #[test]
    fn batches_carry_base64() {
        let batch = BatchJson::new(&[("a", b"21.5"), ("b", b"")]);
        assert_eq!(
            serde_json::to_string(&batch).unwrap(),
            r#"{"records":[{"log":"a","value":"MjEuNQ=="},{"log":"b","value":""}]}"#
        );
        assert_eq!(decode_value("t", "x", "MjEuNQ==").unwrap(), Bytes::from_static(b"21.5"));
        assert!(matches!(decode_value("t", "x", "not base64!"), Err(LogError::Protocol { .. })));
        assert_eq!(parse_seq("t", "x", "8").unwrap(), 8);
        assert!(matches!(parse_seq("t", "x", "-1"), Err(LogError::Protocol { .. })));
    }
}
