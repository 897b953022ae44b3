//! A scan's streamed NDJSON answer read as an iterator of records, one line
//! at a time, so that a scan is never held whole in memory (here or on the
//! server).
//!
//! The lines (`docs/http.md`, "Scans"): `{"seq", "value"}` for a record;
//! `{"error": "lost", …}` for a run of lost records, after which the scan
//! goes on; `{"end": true, "records": N}` last. A scan that the server ends
//! early ends with an error line of another kind instead, which is then the
//! scan's last item. A body that ends with neither was cut short, and says
//! so as its last item: a reader can always tell a complete scan from a cut
//! one.

use std::io::{BufReader, Read};

use serde_json::Value;
use varve_log::{LogError, Record, Result, Seq};

use crate::errors::error_from_json;
use crate::lines::{read_line, Line, LINE_BYTES_MAX};
use crate::wire::{decode_value, RecordJson};

/// The records of one scan, read from its answer `R` (the HTTP body) as
/// they are asked for.
pub(crate) struct RemoteScan<R> {
    body: BufReader<R>,
    line: Vec<u8>,
    target: String,
    log: String,
    /// Records yielded so far, to check against the end line's count.
    records: u64,
    /// The seq of the last record yielded (0 before the first).
    last_seq: Seq,
    /// Set once the end line, an error that ends the scan, or the end of
    /// the body has been read.
    done: bool,
}

impl<R: Read> RemoteScan<R> {
    pub(crate) fn new(body: R, target: &str, log: &str) -> RemoteScan<R> {
        RemoteScan {
            body: BufReader::new(body),
            line: Vec::new(),
            target: target.to_owned(),
            log: log.to_owned(),
            records: 0,
            last_seq: 0,
            done: false,
        }
    }

    fn protocol(&self, reason: String) -> LogError {
        LogError::Protocol { target: self.target.clone(), reason }
    }

    /// Where the scan got to, for the error that ends it early.
    fn progress(&self) -> String {
        match self.last_seq {
            0 => format!("a scan of log {:?} ended before its first record", self.log),
            seq => format!("a scan of log {:?} ended after seq {seq}", self.log),
        }
    }

    /// The item for one line; `None` for the end line.
    fn item(&mut self) -> Option<Result<Record>> {
        // Records are nearly every line: read them without building a map.
        if let Ok(record) = serde_json::from_slice::<RecordJson>(&self.line) {
            let value = decode_value(&self.target, "a scan line", &record.value);
            return Some(value.map(|value| {
                self.records += 1;
                self.last_seq = record.seq;
                Record { seq: record.seq, value }
            }));
        }
        let json: Value = match serde_json::from_slice(&self.line) {
            Ok(json) => json,
            Err(e) => return Some(Err(self.protocol(format!("a scan line is not JSON: {e}")))),
        };
        if json.get("error").is_some() {
            let error = error_from_json(&self.target, None, &json);
            // Only lost records are passed over; any other error ends the scan.
            self.done = !matches!(error, LogError::Lost { .. });
            return Some(Err(error));
        }
        if json.get("end").and_then(Value::as_bool) == Some(true) {
            self.done = true;
            return match json.get("records").and_then(Value::as_u64) {
                Some(records) if records != self.records => Some(Err(self.protocol(format!(
                    "a scan of log {:?} ended saying it sent {records} records, but {} arrived",
                    self.log, self.records
                )))),
                _ => None,
            };
        }
        Some(Err(self.protocol(format!("a scan line is neither a record, an error nor the end: {json}"))))
    }
}

impl<R: Read> Iterator for RemoteScan<R> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        while !self.done {
            match read_line(&mut self.body, &mut self.line, LINE_BYTES_MAX) {
                Ok(Line::Complete) if self.line.is_empty() => {}
                Ok(Line::Complete) => return self.item(),
                Ok(Line::TooLong) => {
                    self.done = true;
                    let reason = format!("{}: a line is longer than {LINE_BYTES_MAX} bytes", self.progress());
                    return Some(Err(self.protocol(reason)));
                }
                Ok(Line::End) => {
                    self.done = true;
                    return Some(Err(
                        self.protocol(format!("{} without its end line: it was cut short", self.progress()))
                    ));
                }
                Err(e) => {
                    self.done = true;
                    let reason = format!("the connection broke: {}: {e}", self.progress());
                    return Some(Err(LogError::Unavailable { target: self.target.clone(), reason }));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    fn scan(body: &'static [u8]) -> Vec<Result<Record>> {
        RemoteScan::new(body, "varve://h:1", "t").collect()
    }

    fn seq(item: &Result<Record>) -> Seq {
        item.as_ref().map_or(0, |record| record.seq)
    }

    #[test]
    fn records_then_the_end() {
        let items =
            scan(b"{\"seq\":1,\"value\":\"MjEuNQ==\"}\n{\"seq\":2,\"value\":\"\"}\n{\"end\":true,\"records\":2}\n");
        assert_eq!(items.len(), 2);
        let record = items[0].as_ref().unwrap();
        assert_eq!((record.seq, &record.value[..]), (1, &b"21.5"[..]));
        assert_eq!((seq(&items[1]), items[1].as_ref().unwrap().value.len()), (2, 0));
        assert!(scan(b"{\"end\": true, \"records\": 0}\n").is_empty());
    }

    #[test]
    fn an_error_line_is_an_item_and_the_scan_goes_on() {
        let items = scan(
            b"{\"seq\":1,\"value\":\"\"}\n\
              {\"error\":\"lost\",\"message\":\"m\",\"log\":\"t\",\"first\":2,\"last\":3,\"segment\":\"s\",\"offset\":null,\"reason\":\"r\"}\n\
              {\"seq\":4,\"value\":\"\"}\n{\"end\":true,\"records\":2}\n",
        );
        assert_eq!(items.len(), 3);
        assert!(matches!(items[1], Err(LogError::Lost { first: 2, last: 3, .. })));
        assert_eq!(seq(&items[2]), 4);
    }

    #[test]
    fn an_error_of_another_kind_ends_the_scan() {
        let items = scan(
            b"{\"seq\":1,\"value\":\"\"}\n\
              {\"error\":\"io\",\"message\":\"I/O error while reading s: gone\",\"context\":\"reading s\"}\n",
        );
        assert_eq!(items.len(), 2);
        assert!(matches!(&items[1], Err(LogError::Io { context, .. }) if context == "reading s"), "{:?}", items[1]);
    }

    #[test]
    fn a_cut_scan_says_so_last() {
        for body in [&b"{\"seq\":1,\"value\":\"\"}\n"[..], b"{\"seq\":1,\"value\":\"\"}\n{\"seq\":2,\"va"] {
            let items: Vec<_> = RemoteScan::new(body, "varve://h:1", "t").collect();
            assert_eq!(items.len(), 2);
            assert!(
                matches!(&items[1], Err(LogError::Protocol { reason, .. }) if reason.contains("after seq 1") && reason.contains("cut short")),
                "{:?}",
                items[1]
            );
        }
        let items = scan(b"");
        assert!(
            matches!(&items[..], [Err(LogError::Protocol { reason, .. })] if reason.contains("before its first record"))
        );
    }

    #[test]
    fn a_broken_connection_is_unavailable() {
        struct Breaks(&'static [u8]);
        impl Read for Breaks {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0.is_empty() {
                    return Err(io::Error::from(io::ErrorKind::ConnectionReset));
                }
                let n = self.0.read(buf)?;
                Ok(n)
            }
        }
        let items: Vec<_> = RemoteScan::new(Breaks(b"{\"seq\":1,\"value\":\"\"}\n"), "varve://h:1", "t").collect();
        assert_eq!(items.len(), 2);
        assert!(matches!(&items[1], Err(LogError::Unavailable { reason, .. }) if reason.contains("after seq 1")));
    }

    #[test]
    fn what_is_not_a_scan_is_a_protocol_error() {
        let items = scan(b"{\"seq\":1,\"value\":\"\"}\n{\"end\":true,\"records\":5}\n");
        assert!(matches!(&items[1], Err(LogError::Protocol { reason, .. }) if reason.contains("5 records")));
        let items = scan(b"<html>\n{\"what\":1}\n{\"seq\":1,\"value\":\"%%\"}\n{\"end\":true,\"records\":0}\n");
        assert_eq!(items.len(), 3);
        assert!(items.iter().all(|item| matches!(item, Err(LogError::Protocol { .. }))));
    }
}
