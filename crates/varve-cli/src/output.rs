//! Printing: human-readable text by default, JSON with `--json`.
//!
//! Answers go to stdout; errors, warnings and progress bars to stderr, so a
//! script reading `--json` output only ever sees JSON.
//!
//! JSON shapes (the stable interface for scripts):
//! - a record (`get`, and each line of `scan` and `tail`):
//!   `{"seq":N,"value":"…"}` when the value is UTF-8 text, else
//!   `{"seq":N,"value_base64":"…"}` (standard alphabet, padded);
//! - every other answer is one JSON object on one line.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};

use base64::Engine as _;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// Bytes of a binary value shown in its human-readable notice.
const BINARY_PREVIEW_BYTES_MAX: usize = 16;

/// Where and how answers are printed.
pub struct Output {
    json: bool,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output { json }
    }

    /// Print one answer: `value` as a JSON object with `--json`, else the
    /// text `human` builds (one or more lines, without the final newline).
    pub fn answer<T: Serialize>(&self, value: &T, human: impl FnOnce() -> String) -> io::Result<()> {
        let line = if self.json { serde_json::to_string(value).map_err(io::Error::from)? } else { human() };
        let mut stdout = io::stdout().lock();
        writeln!(stdout, "{line}")?;
        stdout.flush()
    }

    /// A writer for a stream of records on stdout.
    pub fn records(&self) -> RecordWriter<'_> {
        RecordWriter { output: self, stdout: io::BufWriter::new(io::stdout().lock()) }
    }

    /// Whether `--json` was given.
    pub fn json(&self) -> bool {
        self.json
    }
}

impl LineWriter {
    /// A writer for a stream of lines the caller has already formatted.
    pub fn stdout() -> LineWriter {
        LineWriter { stdout: io::BufWriter::new(io::stdout().lock()) }
    }
}

/// Buffered lines on stdout, flushed when dropped.
pub struct LineWriter {
    stdout: io::BufWriter<io::StdoutLock<'static>>,
}

impl LineWriter {
    pub fn line(&mut self, line: &str) -> io::Result<()> {
        writeln!(self.stdout, "{line}")
    }

    /// Push what was written to stdout now (a follower does after each line).
    pub fn flush(&mut self) -> io::Result<()> {
        self.stdout.flush()
    }
}

/// A warning: one line on stderr, in both modes (stdout stays parseable).
pub fn warn(message: &str) {
    // Not `eprintln!`, which panics when stderr is gone (a handler command
    // whose `varve run` exited): a lost diagnostic is better than a panic.
    let _ = writeln!(io::stderr(), "warning: {}", one_line(message));
}

/// An error: one line on stderr, `error: <message>`.
pub fn error(error: &anyhow::Error) {
    let _ = writeln!(io::stderr(), "error: {}", error_message(error)); // see `warning`
}

/// Prints records one per line: `SEQ<TAB>VALUE` for people, a JSON object for scripts.
pub struct RecordWriter<'a> {
    output: &'a Output,
    stdout: io::BufWriter<io::StdoutLock<'static>>,
}

impl RecordWriter<'_> {
    pub fn write(&mut self, seq: u64, value: &[u8]) -> io::Result<()> {
        if self.output.json {
            serde_json::to_writer(&mut self.stdout, &JsonRecord::new(seq, value)).map_err(io::Error::from)?;
            writeln!(self.stdout)
        } else {
            writeln!(self.stdout, "{seq}\t{}", human_value(value))
        }
    }

    /// Push what was written to stdout now (a follower does after each record).
    pub fn flush(&mut self) -> io::Result<()> {
        self.stdout.flush()
    }
}

/// The JSON form of one record.
#[derive(Serialize)]
pub struct JsonRecord<'a> {
    seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_base64: Option<String>,
}

impl JsonRecord<'_> {
    pub fn new(seq: u64, value: &[u8]) -> JsonRecord<'_> {
        if let Ok(text) = std::str::from_utf8(value) {
            JsonRecord { seq, value: Some(text), value_base64: None }
        } else {
            JsonRecord { seq, value: None, value_base64: Some(base64::engine::general_purpose::STANDARD.encode(value)) }
        }
    }
}

/// A value for people: UTF-8 text as it is (less one final newline, which
/// the printer adds back), anything else as a short notice with a hex preview.
pub fn human_value(value: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(value) {
        return Cow::Borrowed(text.strip_suffix('\n').unwrap_or(text));
    }
    let mut notice = format!("<binary value, {} bytes:", value.len());
    for byte in value.iter().take(BINARY_PREVIEW_BYTES_MAX) {
        let _ = write!(notice, " {byte:02x}");
    }
    if value.len() > BINARY_PREVIEW_BYTES_MAX {
        notice.push_str(" …");
    }
    notice.push_str("; use --json for base64>");
    Cow::Owned(notice)
}

/// Did printing fail because the reader of stdout went away (`| head`)?
/// Then the right thing is to stop quietly, as other Unix tools do.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// What a progress bar counts.
#[derive(Clone, Copy)]
pub enum Unit {
    Bytes,
    Records,
    /// Units of work, named by the bar's message.
    Steps,
}

/// A progress bar on stderr, or a hidden one unless stderr is a terminal.
///
/// Callers that print to stdout while the bar runs pass `stdout_busy`: if
/// stdout is the same terminal, its lines would tear through the bar, and
/// they show the progress anyway, so the bar stays hidden.
pub fn progress_bar(len: u64, unit: Unit, message: &str, stdout_busy: bool) -> ProgressBar {
    if !io::stderr().is_terminal() || (stdout_busy && io::stdout().is_terminal()) {
        return ProgressBar::hidden();
    }
    let template = match unit {
        Unit::Bytes => "{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})",
        Unit::Records => "{msg} [{bar:40}] {human_pos}/{human_len} records ({eta})",
        Unit::Steps => "[{bar:40}] {human_pos}/{human_len} {msg} ({eta})",
    };
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(len).with_style(style.progress_chars("=> ")).with_message(message.to_owned())
}

/// The message of each cause that adds something, on one line. (Library
/// errors already include their source's text, so it is not repeated.)
fn error_message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    one_line(&message).into_owned()
}

/// Messages are printed on one line; a stray newline inside one would break
/// tools that read stderr line by line.
fn one_line(message: &str) -> Cow<'_, str> {
    let message = message.trim_end();
    if message.contains('\n') {
        Cow::Owned(message.split('\n').map(str::trim_end).collect::<Vec<_>>().join(" "))
    } else {
        Cow::Borrowed(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_record_is_text_when_utf8_else_base64() {
        let text = serde_json::to_string(&JsonRecord::new(3, b"hi")).expect("serializes");
        assert_eq!(text, r#"{"seq":3,"value":"hi"}"#);
        let binary = serde_json::to_string(&JsonRecord::new(4, &[0xff, 0x00])).expect("serializes");
        assert_eq!(binary, r#"{"seq":4,"value_base64":"/wA="}"#);
    }

    #[test]
    fn human_value_previews_binary() {
        assert_eq!(human_value(b"line\n"), "line");
        let notice = human_value(&[0xff; 20]);
        assert!(notice.starts_with("<binary value, 20 bytes: ff ff"), "{notice}");
        assert!(notice.contains('…'));
    }

    #[test]
    fn errors_print_each_new_cause_once() {
        let io = io::Error::new(io::ErrorKind::NotFound, "gone");
        let error = anyhow::Error::new(io).context("reading x");
        assert_eq!(error_message(&error), "reading x: gone");
        let library = varve_log::LogError::Io {
            context: "reading y".into(),
            source: io::Error::new(io::ErrorKind::NotFound, "gone"),
        };
        assert_eq!(error_message(&library.into()), "I/O error while reading y: gone");
        assert_eq!(one_line("a\nb\n"), "a b");
    }
}
