//! Server-Sent Events, as the WHATWG HTML standard's "event stream
//! interpretation" reads them, with no I/O: lines go in, whole events come
//! out at each blank line. `watch.rs` feeds it the lines of a watch.
//!
//! Handled: `id:`, `event:`, `data:` (several `data:` lines join with `\n`),
//! one optional space after the colon, a field without a colon, `:` comment
//! lines (keep-alives), an event without `data` (not dispatched, as the
//! standard says). `retry:` and unknown fields are ignored: this client
//! chooses its own reconnection delay.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The stream's last event id when the event was dispatched (an `id:`
    /// line of this event or of an earlier one), if any.
    pub(crate) id: Option<String>,
    /// The `event:` type; `message` when the event named none.
    pub(crate) event: String,
    /// The `data:` lines joined with `\n`.
    pub(crate) data: String,
}

/// The fields of the event being read, between two blank lines.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    last_event_id: Option<String>,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Take one line, without its line end; a blank line dispatches the
    /// event read so far, if it had data.
    pub(crate) fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // The standard ignores an id that holds NUL.
            "id" if !value.contains('\0') => self.last_event_id = Some(value.to_owned()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            id: self.last_event_id.clone(),
            event: if event.is_empty() { "message".to_owned() } else { event },
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;
    use crate::lines::{read_line, Line};

    /// The events of a byte stream, read as `watch.rs` reads one.
    fn events(stream: &[u8]) -> Vec<SseEvent> {
        let mut reader = BufReader::with_capacity(3, stream);
        let (mut parser, mut line, mut events) = (SseParser::default(), Vec::new(), Vec::new());
        while read_line(&mut reader, &mut line, 1000).unwrap() == Line::Complete {
            events.extend(parser.line(std::str::from_utf8(&line).unwrap()));
        }
        events
    }

    fn event(id: Option<&str>, event: &str, data: &str) -> SseEvent {
        SseEvent { id: id.map(str::to_owned), event: event.to_owned(), data: data.to_owned() }
    }

    #[test]
    fn records_and_errors_as_the_server_sends_them() {
        let stream = b"id: 8\nevent: record\ndata: MjEuOQ==\n\n: keep-alive\n\n\
                       event: error\ndata: {\"error\":\"lost\"}\n\nid: 10\nevent: record\ndata: \n\n";
        assert_eq!(
            events(stream),
            [
                event(Some("8"), "record", "MjEuOQ=="),
                event(Some("8"), "error", "{\"error\":\"lost\"}"),
                event(Some("10"), "record", ""),
            ]
        );
    }

    #[test]
    fn crlf_multi_line_data_and_comments() {
        let stream = b": hello\r\nid:1\r\nevent:record\r\ndata:first\r\n: between\r\ndata:  second\r\ndata\r\n\r\n";
        assert_eq!(events(stream), [event(Some("1"), "record", "first\n second\n")]);
    }

    #[test]
    fn what_is_not_an_event() {
        // Comments alone, an event type without data, unknown fields, retry:
        // nothing is dispatched, and the unfinished last event is dropped.
        let stream = b": keep-alive\n\nevent: record\n\nretry: 10\nfoo: bar\n\nid: 3\ndata: cut";
        assert_eq!(events(stream), []);
        // An event type does not leak into the next event.
        assert_eq!(events(b"event: record\n\ndata: x\n\n"), [event(None, "message", "x")]);
        // An id holding NUL is ignored.
        assert_eq!(events(b"id: 1\n\nid: 2\0\ndata: x\n\n"), [event(Some("1"), "message", "x")]);
    }
}
