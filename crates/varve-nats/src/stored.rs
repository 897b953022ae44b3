//! What one stored `JetStream` message holds for Varve: a record of a log
//! (its seq and the append that wrote it in headers) or a log's
//! configuration (JSON), as a direct get returns it.

use async_nats::header::HeaderMap;
use async_nats::Message;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use varve_log::{LogConfig, OnFull, Retention, Seq};

use crate::conn::{ApiError, Failure};

/// The header that carries a record's seq in its log.
pub(crate) const SEQ_HEADER: &str = "Varve-Seq";
/// The header that names the append (one id per `append_batch` call, kept
/// across its retries) that wrote a record: how a retry after a lost answer
/// finds out whether the first attempt landed.
pub(crate) const APPEND_ID_HEADER: &str = "Varve-Append";

/// One message as read back by a direct get.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    /// Its stream sequence.
    pub(crate) sseq: u64,
    pub(crate) subject: String,
    /// Its log seq (`Varve-Seq`), 0 when it has none.
    pub(crate) seq: Seq,
    /// The append that wrote it (`Varve-Append`).
    pub(crate) append_id: Option<String>,
    pub(crate) value: Bytes,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(AsRef::as_ref)
}

impl Stored {
    /// Read a direct get's answer message (headers `Nats-Sequence`,
    /// `Nats-Subject`, then the message's own).
    pub(crate) fn from_direct(message: Message) -> Result<Stored, Failure> {
        let bad = |what: &str| {
            Failure::Api(ApiError { code: 0, err_code: 0, description: format!("a direct get answer without {what}") })
        };
        let headers = message.headers.as_ref().ok_or_else(|| bad("headers"))?;
        let stream_seq =
            header(headers, "Nats-Sequence").and_then(|s| s.parse().ok()).ok_or_else(|| bad("Nats-Sequence"))?;
        let subject = header(headers, "Nats-Subject").ok_or_else(|| bad("Nats-Subject"))?.to_owned();
        let seq = header(headers, SEQ_HEADER).and_then(|s| s.parse().ok()).unwrap_or(0);
        let append_id = header(headers, APPEND_ID_HEADER).map(str::to_owned);
        Ok(Stored { sseq: stream_seq, subject, seq, append_id, value: message.payload })
    }
}

/// The answer of `STREAM.MSG.GET` (a read from the stream's leader): the
/// message with its headers and payload in base64.
#[derive(Debug, Deserialize)]
pub(crate) struct MessageGetJson {
    message: StoredMessageJson,
}

#[derive(Debug, Deserialize)]
struct StoredMessageJson {
    subject: String,
    seq: u64,
    /// The header block (`NATS/1.0\r\nName: value\r\n…`), base64.
    #[serde(default)]
    hdrs: Option<String>,
    #[serde(default)]
    data: Option<String>,
}

impl Stored {
    /// Read a leader's `STREAM.MSG.GET` answer.
    pub(crate) fn from_leader(answer: MessageGetJson) -> Result<Stored, Failure> {
        use base64::Engine as _;
        let bad = |what: String| Failure::Api(ApiError { code: 0, err_code: 0, description: what });
        let decode = |field: Option<String>, what: &str| -> Result<Vec<u8>, Failure> {
            field.map_or(Ok(Vec::new()), |text| {
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|e| bad(format!("a stored message's {what} is not base64 ({e})")))
            })
        };
        let message = answer.message;
        let headers = decode(message.hdrs, "headers")?;
        let headers = String::from_utf8_lossy(&headers);
        // The first line is the version (`NATS/1.0`); then `Name: value` lines.
        let field = |name: &str| {
            headers.lines().skip(1).find_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
            })
        };
        Ok(Stored {
            sseq: message.seq,
            subject: message.subject,
            seq: field(SEQ_HEADER).and_then(|s| s.parse().ok()).unwrap_or(0),
            append_id: field(APPEND_ID_HEADER),
            value: Bytes::from(decode(message.data, "payload")?),
        })
    }
}

/// A log's configuration as stored in its configuration subject.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct ConfigJson {
    /// 0 for unbounded.
    keep: u64,
    /// `refuse` or `overwrite` when `keep > 0`.
    on_full: Option<OnFullJson>,
    system: bool,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum OnFullJson {
    Refuse,
    Overwrite,
}

impl From<LogConfig> for ConfigJson {
    fn from(config: LogConfig) -> Self {
        match config.retention {
            Retention::Unbounded => ConfigJson { keep: 0, on_full: None, system: config.system },
            Retention::Keep { k, on_full } => ConfigJson {
                keep: k,
                on_full: Some(match on_full {
                    OnFull::Refuse => OnFullJson::Refuse,
                    OnFull::Overwrite => OnFullJson::Overwrite,
                }),
                system: config.system,
            },
        }
    }
}

impl ConfigJson {
    pub(crate) fn config(self) -> LogConfig {
        let retention = match (self.keep, self.on_full) {
            (0, _) => Retention::Unbounded,
            (k, Some(OnFullJson::Overwrite)) => Retention::Keep { k, on_full: OnFull::Overwrite },
            (k, _) => Retention::Keep { k, on_full: OnFull::Refuse },
        };
        LogConfig { retention, system: self.system }
    }
}

/// A publish's acknowledgement.
#[derive(Debug, Deserialize)]
pub(crate) struct PubAck {
    /// The stream sequence of the (last) message stored.
    pub(crate) seq: u64,
}
