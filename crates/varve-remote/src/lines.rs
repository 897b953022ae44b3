//! Reading a streamed answer line by line with a bound on each line, for
//! the NDJSON of scans and the event stream of watches: one record at a time
//! is in memory, never the whole answer, and a server that never ends a line
//! cannot make this client grow without limit.

use std::io::{self, BufRead};

/// Longest record this client takes from a server, in bytes: far above the
/// journal's default record limit (16 MiB), so that a server configured for
/// larger records still works, and low enough that one answer cannot take all
/// of a small machine's memory.
pub(crate) const RECORD_BYTES_MAX: usize = 1 << 30;

/// Longest line of a scan or watch: a record in base64 (4 bytes for every 3)
/// plus its JSON or SSE framing.
pub(crate) const LINE_BYTES_MAX: usize = RECORD_BYTES_MAX.div_ceil(3) * 4 + LINE_FRAMING_BYTES_MAX;

/// Room for a line's framing: `{"seq":N,"value":""}`, `id: N`, an error
/// object with its message.
const LINE_FRAMING_BYTES_MAX: usize = 64 << 10;

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line is in the buffer, without its `\n` or `\r\n`.
    Complete,
    /// The stream ended; the buffer holds what came after the last `\n`
    /// (empty when the stream ended with a line).
    End,
    /// The line is longer than the bound; the buffer holds its start.
    TooLong,
}

/// Read one line into `line` (cleared first). A line ends with `\n`, and a
/// `\r` before it is dropped; a lone `\r` is not a line end (neither
/// `varve serve` nor NDJSON sends one). A line longer than `bytes_max` is
/// [`Line::TooLong`], and the stream is then unusable (the rest of the line
/// has not been read).
pub(crate) fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>, bytes_max: usize) -> io::Result<Line> {
    line.clear();
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(Line::End);
        }
        let (taken, complete) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (available.len(), false),
        };
        let content = if complete { &available[..taken - 1] } else { available };
        if line.len() + content.len() > bytes_max {
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(content);
        reader.consume(taken);
        if complete {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Line::Complete);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;

    fn lines(bytes: &[u8], capacity: usize) -> (Vec<String>, String) {
        let mut reader = BufReader::with_capacity(capacity, bytes);
        let mut line = Vec::new();
        let mut complete = Vec::new();
        while read_line(&mut reader, &mut line, 100).unwrap() == Line::Complete {
            complete.push(String::from_utf8(line.clone()).unwrap());
        }
        (complete, String::from_utf8(line).unwrap())
    }

    #[test]
    fn lines_end_with_lf_or_crlf_across_buffer_boundaries() {
        for capacity in [1, 2, 3, 64] {
            let (complete, rest) = lines(b"one\ntwo\r\n\nthree\r\r\nfour", capacity);
            assert_eq!(complete, ["one", "two", "", "three\r"], "capacity {capacity}");
            assert_eq!(rest, "four");
        }
        assert_eq!(lines(b"", 8), (vec![], String::new()));
        assert_eq!(lines(b"last\n", 8), (vec!["last".to_owned()], String::new()));
    }

    #[test]
    fn long_lines_are_refused() {
        let long = [b'x'; 101];
        let mut reader = BufReader::with_capacity(7, &long[..]);
        assert_eq!(read_line(&mut reader, &mut Vec::new(), 100).unwrap(), Line::TooLong);
        let mut exact = vec![b'x'; 100];
        exact.push(b'\n');
        let mut reader = BufReader::with_capacity(7, &exact[..]);
        assert_eq!(read_line(&mut reader, &mut Vec::new(), 100).unwrap(), Line::Complete);
    }
}
