//! The server's errors read back into [`LogError`]s: an answer's
//! `{"error": KIND, "message": TEXT, …fields}` (and the same object on a scan
//! line or a watch's `error` event) becomes the variant with its fields, as
//! the table in `docs/http.md` lists them. The server writes them in
//! `crates/varve-server/src/error.rs`; the two must agree.
//!
//! Anything that is not such an object, or whose kind this build does not
//! know, is `Protocol` with the status and the server's text, so that nothing
//! the server said is dropped.

use std::path::PathBuf;

use serde_json::{Map, Value};
use varve_log::{LogError, LossCause};

/// Most bytes of a non-JSON body quoted in a `Protocol` error.
const QUOTE_BYTES_MAX: usize = 200;

/// The error an answer with a non-2xx `status` and this `body` stands for.
pub(crate) fn error_from_answer(target: &str, status: u16, body: &[u8]) -> LogError {
    match serde_json::from_slice::<Value>(body) {
        Ok(json @ Value::Object(_)) => error_from_json(target, Some(status), &json),
        _ => LogError::Protocol {
            target: target.to_owned(),
            reason: format!("status {status} with a body that is not a Varve error: {:?}", quote(body)),
        },
    }
}

/// The error a JSON error object stands for; `status` is `None` for one met
/// inside a stream (a scan line, a watch event).
pub(crate) fn error_from_json(target: &str, status: Option<u16>, json: &Value) -> LogError {
    let at = status.map_or_else(|| "a streamed error".to_owned(), |status| format!("status {status}"));
    let protocol = |reason: String| LogError::Protocol { target: target.to_owned(), reason };
    let Some(object) = json.as_object() else {
        return protocol(format!("{at}: the error is not a JSON object: {json}"));
    };
    let Some(kind) = object.get("error").and_then(Value::as_str) else {
        return protocol(format!("{at}: the error object has no \"error\" kind: {json}"));
    };
    let fields = Fields { object, kind, at: &at };
    typed_error(target, &fields).unwrap_or_else(protocol)
}

/// The fields of one error object, read with the kind and status named in
/// what a missing or mistyped field says.
struct Fields<'a> {
    object: &'a Map<String, Value>,
    kind: &'a str,
    at: &'a str,
}

impl Fields<'_> {
    fn message(&self) -> String {
        self.object.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_owned()
    }

    fn missing(&self, field: &str, expected: &str) -> String {
        format!("{}: error {:?} lacks {field:?} ({expected}): {}", self.at, self.kind, self.message())
    }

    fn text(&self, field: &str) -> Result<String, String> {
        self.object.get(field).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| self.missing(field, "a string"))
    }

    fn number(&self, field: &str) -> Result<u64, String> {
        self.object.get(field).and_then(Value::as_u64).ok_or_else(|| self.missing(field, "a number"))
    }

    /// A number that may be `null` (or absent).
    fn optional_number(&self, field: &str) -> Result<Option<u64>, String> {
        match self.object.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| self.missing(field, "a number or null")),
        }
    }
}

/// The typed error, or what is wrong with the object (for `Protocol`).
fn typed_error(target: &str, fields: &Fields<'_>) -> Result<LogError, String> {
    let f = fields;
    Ok(match f.kind {
        "namespace_not_found" => LogError::NamespaceNotFound { namespace: f.text("namespace")? },
        "log_not_found" => LogError::LogNotFound { namespace: f.text("namespace")?, log: f.text("log")? },
        "seq_not_found" => {
            LogError::SeqNotFound { log: f.text("log")?, seq: f.number("seq")?, latest: f.number("latest")? }
        }
        "trimmed" => LogError::Trimmed { log: f.text("log")?, seq: f.number("seq")?, earliest: f.number("earliest")? },
        "lost" => LogError::Lost {
            log: f.text("log")?,
            first: f.number("first")?,
            last: f.number("last")?,
            cause: Box::new(LossCause {
                segment: PathBuf::from(f.text("segment")?),
                offset: f.optional_number("offset")?,
                reason: f.text("reason")?,
            }),
        },
        "full" => LogError::Full { log: f.text("log")?, keep: f.number("keep")? },
        "conflict" => {
            LogError::Conflict { log: f.text("log")?, expected: f.number("expected")?, actual: f.number("actual")? }
        }
        "already_exists" => LogError::AlreadyExists {
            log: f.text("log")?,
            existing: f.text("existing")?,
            requested: f.text("requested")?,
        },
        "rename_target_exists" => {
            LogError::RenameTargetExists { namespace: f.text("namespace")?, from: f.text("from")?, to: f.text("to")? }
        }
        "unsupported" => LogError::Unsupported {
            target: f.text("target")?,
            operation: f.text("operation")?,
            reason: f.text("reason")?,
        },
        "invalid_name" => LogError::InvalidName { name: f.text("name")?, reason: name_rule(&f.text("reason")?) },
        "invalid_argument" => LogError::InvalidArgument { reason: f.text("reason")? },
        "too_large" => LogError::TooLarge {
            what: too_large_what(&f.text("what")?),
            size: f.number("size")?,
            limit: f.number("limit")?,
        },
        "unauthorized" | "forbidden" => LogError::Denied { target: target.to_owned(), reason: f.message() },
        "no_space" => LogError::NoSpace { path: PathBuf::from(f.text("path")?), bytes: f.number("bytes")? },
        "unavailable" => LogError::Unavailable { target: target.to_owned(), reason: f.message() },
        // Plain HTTP sent to a `varve serve --tls-cert` port: this client
        // speaks the wrong protocol for it; the message says to use varves://.
        "tls_required" => LogError::Protocol { target: target.to_owned(), reason: f.message() },
        // Not in the table (which answers a held writer lock with `unavailable`),
        // but a server may say it: the path is the server's.
        "locked" => LogError::Locked { path: PathBuf::from(f.text("path")?) },
        "read_only" => LogError::ReadOnly {
            namespace: f.text("namespace")?,
            operation: read_only_operation(&f.text("operation")?),
        },
        "poisoned" => LogError::Poisoned { namespace: f.text("namespace")?, cause: f.text("cause")? },
        "unsupported_format" => LogError::UnsupportedFormat {
            segment: PathBuf::from(f.text("segment")?),
            offset: f.number("offset")?,
            reason: f.text("reason")?,
        },
        "io" => io_error(target, f),
        other => return Err(format!("{}: error kind {other:?} unknown to this client: {}", f.at, f.message())),
    })
}

/// `Io` with the server's context when it sent one, and the server's
/// message as the source. The message is `"I/O error while CONTEXT: SOURCE"`
/// (`LogError`'s own text): that prefix is taken off so it is not printed twice.
fn io_error(target: &str, f: &Fields<'_>) -> LogError {
    let message = f.message();
    let context = f.text("context").unwrap_or_else(|_| format!("serving a request at {target}"));
    let source = message.strip_prefix(&format!("I/O error while {context}: ")).unwrap_or(&message).to_owned();
    LogError::Io { context, source: std::io::Error::other(source) }
}

/// `InvalidName.reason` is a `&'static str`: the rule `validate_name`
/// (`varve_log::contract`) states, found by its text.
fn name_rule(reason: &str) -> &'static str {
    const RULES: [&str; 5] = [
        "a name must not be empty",
        "a name is at most 200 bytes",
        "a name may use only the characters A-Z a-z 0-9 _ . -",
        "`.` and `..` are not names",
        "names beginning with `_` are reserved for the system; choose another first character",
    ];
    RULES.into_iter().find(|rule| *rule == reason).unwrap_or("it breaks the naming rules")
}

/// `TooLarge.what` is a `&'static str`: one of the three `LogError`
/// documents, or the part of a request `varve serve` names (`read_body`'s
/// callers: an object's value, a JSON body). A server of a later version
/// may name another: that is "request".
fn too_large_what(what: &str) -> &'static str {
    [
        "record",
        "batch",
        "batch (in records)",
        "value",
        "create body",
        "trim body",
        "rename body",
        "sync body",
        "restrict body",
        "grant",
    ]
    .into_iter()
    .find(|known| *known == what)
    .unwrap_or("request")
}

/// `ReadOnly.operation` is a `&'static str`: the phrases the journal uses.
fn read_only_operation(operation: &str) -> &'static str {
    ["append", "create a log", "delete a log", "rename logs", "trim a log", "repair", "start a runtime"]
        .into_iter()
        .find(|known| *known == operation)
        .unwrap_or("write")
}

/// The start of a body, as text, for an error message.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(QUOTE_BYTES_MAX)]);
    if body.len() > QUOTE_BYTES_MAX {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const TARGET: &str = "varve://127.0.0.1:7070";

    fn answer(status: u16, json: &Value) -> LogError {
        error_from_answer(TARGET, status, json.to_string().as_bytes())
    }

    #[test]
    fn every_kind_of_the_table_maps_to_its_variant() {
        let e = answer(404, &json!({"error": "namespace_not_found", "message": "m", "namespace": "ns"}));
        assert!(matches!(e, LogError::NamespaceNotFound { namespace } if namespace == "ns"));
        let e = answer(404, &json!({"error": "log_not_found", "message": "m", "namespace": "ns", "log": "t"}));
        assert!(matches!(e, LogError::LogNotFound { namespace, log } if namespace == "ns" && log == "t"));
        let e = answer(404, &json!({"error": "seq_not_found", "message": "m", "log": "t", "seq": 9, "latest": 7}));
        assert!(matches!(e, LogError::SeqNotFound { log, seq: 9, latest: 7 } if log == "t"));
        let e = answer(410, &json!({"error": "trimmed", "message": "m", "log": "t", "seq": 2, "earliest": 5}));
        assert!(matches!(e, LogError::Trimmed { log, seq: 2, earliest: 5 } if log == "t"));
        let e = answer(409, &json!({"error": "full", "message": "m", "log": "t", "keep": 10}));
        assert!(matches!(e, LogError::Full { log, keep: 10 } if log == "t"));
        let e = answer(409, &json!({"error": "conflict", "message": "m", "log": "t", "expected": 3, "actual": 4}));
        assert!(matches!(e, LogError::Conflict { log, expected: 3, actual: 4 } if log == "t"));
        let e = answer(
            409,
            &json!({"error": "already_exists", "message": "m", "log": "t", "existing": "unbounded retention",
                    "requested": "keep 5, refuse when full"}),
        );
        assert!(
            matches!(&e, LogError::AlreadyExists { log, existing, requested }
                if log == "t" && existing == "unbounded retention" && requested == "keep 5, refuse when full"),
            "{e:?}"
        );
        let e = answer(400, &json!({"error": "invalid_argument", "message": "m", "reason": "keep = 0"}));
        assert!(matches!(e, LogError::InvalidArgument { reason } if reason == "keep = 0"));
        let e = answer(507, &json!({"error": "no_space", "message": "m", "path": "/d/ns/seg", "bytes": 4096}));
        assert!(matches!(e, LogError::NoSpace { path, bytes: 4096 } if path.as_os_str() == "/d/ns/seg"));
        let e = answer(500, &json!({"error": "read_only", "message": "m", "namespace": "ns", "operation": "append"}));
        assert!(matches!(e, LogError::ReadOnly { namespace, operation: "append" } if namespace == "ns"));
        let e = answer(500, &json!({"error": "poisoned", "message": "m", "namespace": "ns", "cause": "fsync"}));
        assert!(matches!(e, LogError::Poisoned { namespace, cause } if namespace == "ns" && cause == "fsync"));
        let e = answer(
            500,
            &json!({"error": "unsupported_format", "message": "m", "segment": "/d/s", "offset": 0, "reason": "v9"}),
        );
        assert!(matches!(e, LogError::UnsupportedFormat { offset: 0, reason, .. } if reason == "v9"));
        let e = answer(503, &json!({"error": "locked", "message": "m", "path": "/d/ns"}));
        assert!(matches!(e, LogError::Locked { path } if path.as_os_str() == "/d/ns"));
    }

    #[test]
    fn lost_records_keep_their_cause() {
        let lost = json!({"error": "lost", "message": "m", "log": "t", "first": 3, "last": 5,
                          "segment": "/d/ns/00000001.seg", "offset": 4096, "reason": "checksum mismatch"});
        let LogError::Lost { log, first: 3, last: 5, cause } = answer(410, &lost) else { panic!() };
        assert_eq!(log, "t");
        assert_eq!(
            *cause,
            LossCause { segment: "/d/ns/00000001.seg".into(), offset: Some(4096), reason: "checksum mismatch".into() }
        );
        let missing = json!({"error": "lost", "message": "m", "log": "t", "first": 1, "last": 1,
                             "segment": "/d/ns/00000002.seg", "offset": null, "reason": "segment missing"});
        let LogError::Lost { cause, .. } = error_from_json(TARGET, None, &missing) else { panic!() };
        assert_eq!(cause.offset, None);
    }

    #[test]
    fn static_texts_are_found_by_their_words() {
        for rule in [
            "a name must not be empty",
            "a name is at most 200 bytes",
            "a name may use only the characters A-Z a-z 0-9 _ . -",
            "`.` and `..` are not names",
            "names beginning with `_` are reserved for the system; choose another first character",
        ] {
            let e = answer(400, &json!({"error": "invalid_name", "message": "m", "name": "x", "reason": rule}));
            assert!(matches!(e, LogError::InvalidName { reason, .. } if reason == rule));
        }
        // The rules are validate_name's own texts.
        let LogError::InvalidName { reason, .. } = varve_log::validate_name("_x", false).unwrap_err() else { panic!() };
        assert_eq!(name_rule(reason), reason);
        let e = answer(400, &json!({"error": "invalid_name", "message": "m", "name": "x", "reason": "new rule"}));
        assert!(matches!(e, LogError::InvalidName { reason: "it breaks the naming rules", .. }));

        for what in ["record", "batch", "batch (in records)", "value", "create body", "grant"] {
            let e = answer(413, &json!({"error": "too_large", "message": "m", "what": what, "size": 9, "limit": 8}));
            assert!(matches!(e, LogError::TooLarge { what: w, size: 9, limit: 8 } if w == what));
        }
        let e = answer(413, &json!({"error": "too_large", "message": "m", "what": "header", "size": 9, "limit": 8}));
        assert!(matches!(e, LogError::TooLarge { what: "request", .. }));
        let e = answer(500, &json!({"error": "read_only", "message": "m", "namespace": "n", "operation": "fly"}));
        assert!(matches!(e, LogError::ReadOnly { operation: "write", .. }));
    }

    #[test]
    fn access_and_availability_name_the_target() {
        for kind in ["unauthorized", "forbidden"] {
            let e = answer(401, &json!({"error": kind, "message": "a read-only token"}));
            assert!(
                matches!(&e, LogError::Denied { target, reason } if target == TARGET && reason == "a read-only token")
            );
        }
        let e = answer(503, &json!({"error": "unavailable", "message": "the server is stopping"}));
        assert!(
            matches!(e, LogError::Unavailable { target, reason } if target == TARGET && reason == "the server is stopping")
        );
        let e = answer(400, &json!({"error": "tls_required", "message": "this port serves TLS: use varves://"}));
        assert!(
            matches!(&e, LogError::Protocol { target, reason } if target == TARGET && reason.ends_with("varves://"))
        );
    }

    #[test]
    fn io_errors_carry_the_servers_text_once() {
        let e = answer(
            500,
            &json!({"error": "io", "message": "I/O error while reading seg: disk on fire", "context": "reading seg"}),
        );
        let LogError::Io { context, source } = &e else { panic!("{e:?}") };
        assert_eq!(context, "reading seg");
        assert_eq!(source.to_string(), "disk on fire");
        assert_eq!(e.to_string(), "I/O error while reading seg: disk on fire");
        let LogError::Io { context, source } = answer(500, &json!({"error": "io", "message": "boom"})) else {
            panic!()
        };
        assert_eq!(context, format!("serving a request at {TARGET}"));
        assert_eq!(source.to_string(), "boom");
    }

    #[test]
    fn anything_else_is_a_protocol_error_that_keeps_the_servers_words() {
        let e = answer(404, &json!({"error": "no_route", "message": "GET /v2 is not a route"}));
        assert!(matches!(&e, LogError::Protocol { reason, .. }
            if reason.contains("404") && reason.contains("no_route") && reason.contains("GET /v2 is not a route")));
        let e = answer(404, &json!({"error": "log_not_found", "message": "no log t", "namespace": "ns"}));
        assert!(
            matches!(&e, LogError::Protocol { reason, .. } if reason.contains("\"log\"") && reason.contains("no log t"))
        );
        let e = answer(409, &json!({"error": "full", "message": "m", "log": "t", "keep": "ten"}));
        assert!(matches!(e, LogError::Protocol { .. }));
        let e = answer(200, &json!({"message": "no kind"}));
        assert!(matches!(e, LogError::Protocol { .. }));
        let e = answer(400, &json!(["not", "an", "object"]));
        assert!(matches!(e, LogError::Protocol { .. }));
        let e = error_from_answer(TARGET, 502, b"<html>Bad Gateway</html>");
        assert!(matches!(&e, LogError::Protocol { target, reason }
            if target == TARGET && reason.contains("502") && reason.contains("Bad Gateway")));
        let e = error_from_answer(TARGET, 500, &[b'x'; 1000]);
        assert!(matches!(&e, LogError::Protocol { reason, .. } if reason.len() < 400 && reason.contains('…')));
    }
}
