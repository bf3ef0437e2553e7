//! Server-Sent Events as the HTTP proxy relays them: split into whole events as bytes arrive,
//! each event's `data` read only when it may be the response acted on, and an event rebuilt only
//! when its message was replaced.
//!
//! An event ends at a blank line (`\n\n`, `\r\n\r\n` or `\r\r`, per the SSE specification);
//! comments (`: ping`) and fields the proxy does not use (`event`, `id`, `retry`) are kept as
//! they came. Events are handed on whole, as soon as their blank line arrives: a client acts on
//! nothing before that. Bytes that do not yet make an event are held, at most the maximum message
//! size (default [`MAX_EVENT_BYTES`]);
//! past that the held bytes are handed on as they are and the rest of that event passes
//! through unread. Pure and panic-free.

/// Most bytes held for one event by default (`--max-message-bytes`).
pub(crate) const MAX_EVENT_BYTES: usize = super::DEFAULT_MAX_MESSAGE_BYTES;

/// What the splitter hands on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A whole event, blank line included.
    Event(Vec<u8>),
    /// Bytes of an event too large to hold, relayed unread.
    Raw(Vec<u8>),
}

/// Splits a byte stream into events.
#[derive(Debug)]
pub(crate) struct Splitter {
    /// Most bytes held for one event.
    max: usize,
    buf: Vec<u8>,
    /// Where the scan for the blank line resumes.
    scanned: usize,
    /// Passing an oversized event through until its end.
    passing: bool,
    /// Whether what is held starts a line (false after a cut in the middle of one).
    mid_line: bool,
}

/// The length of the line terminator at `i`, if one starts there; `None` when `i` is a `\r` at
/// the end of the buffer (it may be the first half of `\r\n`) and more may come.
fn terminator(buf: &[u8], i: usize, more: bool) -> Option<usize> {
    match buf[i] {
        b'\n' => Some(1),
        b'\r' => match buf.get(i + 1) {
            Some(b'\n') => Some(2),
            Some(_) => Some(1),
            None if more => None,
            None => Some(1),
        },
        _ => Some(0),
    }
}

impl Default for Splitter {
    fn default() -> Self {
        Self::new(MAX_EVENT_BYTES)
    }
}

impl Splitter {
    /// A splitter holding at most `max` bytes of one event.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            buf: Vec::new(),
            scanned: 0,
            passing: false,
            mid_line: false,
        }
    }

    /// Adds `chunk`; returns the pieces it completes. `more` is false on the last call (the
    /// stream ended), which flushes what is held.
    pub(crate) fn push(&mut self, chunk: &[u8], more: bool) -> Vec<Piece> {
        let mut out = Vec::new();
        self.buf.extend_from_slice(chunk);
        while let Some(end) = self.find_end(more) {
            let event: Vec<u8> = self.buf.drain(..end).collect();
            self.scanned = 0;
            self.mid_line = false;
            if self.passing {
                self.passing = false;
                out.push(Piece::Raw(event));
            } else {
                out.push(Piece::Event(event));
            }
        }
        if (self.buf.len() > self.max || self.passing) && !self.buf.is_empty() {
            // Too large to hold: hand on what there is; the event ends unread.
            self.passing = true;
            // A last `\r` may be the first half of `\r\n`: kept.
            let keep = usize::from(self.buf.last() == Some(&b'\r'));
            let cut = self.buf.len() - keep;
            let raw: Vec<u8> = self.buf.drain(..cut).collect();
            self.mid_line = !matches!(raw.last(), Some(b'\n' | b'\r'));
            out.push(Piece::Raw(raw));
            self.scanned = 0;
        }
        if !more && !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            out.push(if self.passing {
                Piece::Raw(rest)
            } else {
                Piece::Event(rest)
            });
            self.passing = false;
            self.mid_line = false;
            self.scanned = 0;
        }
        out
    }

    /// The end (exclusive) of the first whole event held, after its blank line.
    fn find_end(&mut self, more: bool) -> Option<usize> {
        let buf = &self.buf;
        let mut i = self.scanned;
        // Whether the line just ended was empty: at the start of the buffer a blank line ends
        // an (empty) event too.
        let mut line_start = if i == 0 {
            !self.mid_line
        } else {
            matches!(buf[i - 1], b'\n' | b'\r')
        };
        while i < buf.len() {
            match terminator(buf, i, more) {
                None => break,
                Some(0) => {
                    line_start = false;
                    i += 1;
                }
                Some(n) => {
                    if line_start {
                        return Some(i + n);
                    }
                    line_start = true;
                    i += n;
                }
            }
        }
        // Resume at the start of the current line (a `\r` may await its `\n`).
        self.scanned = i.min(buf.len());
        while self.scanned > 0 && !matches!(buf[self.scanned - 1], b'\n' | b'\r') {
            self.scanned -= 1;
        }
        None
    }
}

/// Splits an event into lines, terminators removed.
fn lines(event: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < event.len() {
        match terminator(event, i, false) {
            Some(0) | None => i += 1,
            Some(n) => {
                out.push(&event[start..i]);
                i += n;
                start = i;
            }
        }
    }
    if start < event.len() {
        out.push(&event[start..]);
    }
    out
}

/// The event's data: its `data` lines joined with `\n`, or `None` when it has none.
pub(crate) fn data(event: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    for line in lines(event) {
        let Some(rest) = line.strip_prefix(b"data") else {
            continue;
        };
        let value = match rest.first() {
            None => &rest[..0],
            Some(b':') => rest[1..].strip_prefix(b" ").unwrap_or(&rest[1..]),
            Some(_) => continue,
        };
        match &mut out {
            Some(d) => {
                d.push(b'\n');
                d.extend_from_slice(value);
            }
            None => out = Some(value.to_vec()),
        }
    }
    out
}

/// The event with its data replaced by `new_data` (one `data:` line, where the first one was);
/// every other line kept, in order, with the event's own line terminator.
pub(crate) fn with_data(event: &[u8], new_data: &[u8]) -> Vec<u8> {
    let eol: &[u8] = match event.iter().position(|b| *b == b'\n' || *b == b'\r') {
        Some(i) if event[i] == b'\r' && event.get(i + 1) == Some(&b'\n') => b"\r\n",
        Some(i) if event[i] == b'\r' => b"\r",
        _ => b"\n",
    };
    let mut out = Vec::with_capacity(new_data.len() + 64);
    let mut placed = false;
    for line in lines(event) {
        if line.is_empty() {
            continue;
        }
        let is_data = line
            .strip_prefix(b"data")
            .is_some_and(|r| r.is_empty() || r[0] == b':');
        if is_data {
            if !placed {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(new_data);
                out.extend_from_slice(eol);
                placed = true;
            }
            continue;
        }
        out.extend_from_slice(line);
        out.extend_from_slice(eol);
    }
    if !placed {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(new_data);
        out.extend_from_slice(eol);
    }
    out.extend_from_slice(eol);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(pieces: Vec<Piece>) -> Vec<Vec<u8>> {
        pieces
            .into_iter()
            .map(|p| match p {
                Piece::Event(e) | Piece::Raw(e) => e,
            })
            .collect()
    }

    #[test]
    fn events_split_at_blank_lines_whatever_the_chunks() {
        let stream =
            b"event: message\r\nid: 1\r\ndata: {\"a\":1}\r\n\r\n: ping\n\ndata: x\rdata: y\r\r";
        for size in 1..stream.len() {
            let mut s = Splitter::default();
            let mut got = Vec::new();
            for chunk in stream.chunks(size) {
                got.extend(events(s.push(chunk, true)));
            }
            got.extend(events(s.push(b"", false)));
            assert_eq!(
                got,
                vec![
                    b"event: message\r\nid: 1\r\ndata: {\"a\":1}\r\n\r\n".to_vec(),
                    b": ping\n\n".to_vec(),
                    b"data: x\rdata: y\r\r".to_vec()
                ],
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn data_is_read_and_replaced_keeping_the_other_fields() {
        let e = b"event: message\r\nid: 7\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n";
        assert_eq!(data(e).unwrap(), b"{\"a\":\n1}");
        assert_eq!(
            with_data(e, b"{\"b\":2}"),
            b"event: message\r\nid: 7\r\ndata: {\"b\":2}\r\n\r\n".to_vec()
        );
        assert_eq!(data(b": ping\n\n"), None);
        assert_eq!(data(b"datum: x\n\n"), None);
    }

    #[test]
    fn an_event_too_large_passes_through_unread() {
        let mut s = Splitter::default();
        let big = vec![b'x'; MAX_EVENT_BYTES + 10];
        let mut got = s.push(b"data: ", true);
        got.extend(s.push(&big, true));
        assert!(matches!(got.last(), Some(Piece::Raw(_))));
        let tail = s.push(b"\n\ndata: next\n\n", true);
        assert_eq!(
            tail,
            vec![
                Piece::Raw(b"\n\n".to_vec()),
                Piece::Event(b"data: next\n\n".to_vec())
            ]
        );
    }
}
