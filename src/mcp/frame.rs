//! Messages read under a byte cap: newline-delimited lines on stdio ([`LineReader`]), and the
//! scan that finds a JSON-RPC message's top-level `id` and `method` in bytes that are never held
//! whole ([`Scan`]).
//!
//! # Under load and failure
//!
//! A line is held only while it is at most the cap. Past the cap, what was held is fed to a
//! [`Scan`], let go, and the rest of the line is read in the reader's fixed-size chunks, each
//! scanned and discarded, up to its newline: memory stays at the cap plus one chunk whatever
//! the line's length, and a line with no newline at all is read to the end of the stream the
//! same way. The scan is a byte-by-byte state machine over the JSON text (depth, strings,
//! escapes) that keeps only the top-level `id` value (at most [`MAX_ID_BYTES`](super::MAX_ID_BYTES)
//! bytes) and whether a top-level `method` member was seen: so the id of an oversized response
//! is known wherever it stands in the message, before or after the `result`. Malformed JSON
//! gives no id, never a panic.

use std::io::{self, BufRead};

use serde_json::Value;

use super::MAX_ID_BYTES;

/// Capacity above which the line buffer is given back after a line, so that one large message
/// does not keep its memory for the life of the proxy.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// One message read by [`LineReader::next_line`].
#[derive(Debug)]
pub(crate) enum Line<'a> {
    /// A whole line, its newline included, at most the cap.
    Whole(&'a [u8]),
    /// A line over the cap: `bytes` long (the newline included), read and discarded; `scan`
    /// says what its top level held.
    Oversized {
        /// Bytes the line had.
        bytes: u64,
        /// Its top-level `id` and `method`.
        scan: Scan,
    },
    /// The last bytes of the stream, with no newline after them (a writer that stopped in the
    /// middle of a message, or wrote its last one without a newline).
    Torn(&'a [u8]),
}

/// Reads newline-delimited messages, each held only while at most `cap` bytes.
pub(crate) struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    cap: usize,
}

impl<R: BufRead> LineReader<R> {
    /// A reader of `inner` holding at most `cap` bytes of a line.
    pub(crate) fn new(inner: R, cap: usize) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            cap,
        }
    }

    /// The next line; `None` at the end of the stream.
    ///
    /// # Errors
    ///
    /// A read error of the underlying stream.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf.shrink_to(KEEP_CAPACITY);
        }
        let mut over: Option<(Scan, u64)> = None;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(match over {
                    Some((scan, bytes)) => Some(Line::Oversized { bytes, scan }),
                    None if self.buf.is_empty() => None,
                    None => Some(Line::Torn(&self.buf)),
                });
            }
            let (take, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let piece = &chunk[..take];
            match &mut over {
                Some((scan, bytes)) => {
                    scan.feed(piece);
                    *bytes += take as u64;
                }
                None => {
                    let len = self.buf.len() + take - usize::from(done);
                    if len <= self.cap {
                        if self.buf.len() + take > self.buf.capacity().max(KEEP_CAPACITY) {
                            // Grown once to the cap: doubling would hold the old and the new
                            // buffer at once (1.5× the cap) while it copies.
                            self.buf.reserve_exact(self.cap + 1 - self.buf.len());
                        }
                        self.buf.extend_from_slice(piece);
                    } else {
                        let mut scan = Scan::default();
                        scan.feed(&self.buf);
                        scan.feed(piece);
                        over = Some((scan, (self.buf.len() + take) as u64));
                        self.buf = Vec::new();
                    }
                }
            }
            self.inner.consume(take);
            if done {
                return Ok(Some(match over {
                    Some((scan, bytes)) => Line::Oversized { bytes, scan },
                    None => Line::Whole(&self.buf),
                }));
            }
        }
    }
}

/// Where the scan stands at the top level of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum At {
    /// Before the opening `{`.
    #[default]
    Start,
    /// Where a member's name is expected.
    Name,
    /// Inside a member's name.
    InName,
    /// After a name, before its `:`.
    Colon,
    /// Inside a member's value.
    Value,
    /// After the closing `}`.
    End,
}

/// Longest member name kept by the scan (`method` is the longest it looks for).
const MAX_NAME: usize = 8;

/// What the top level of a JSON-RPC message holds, found in one pass over its bytes, which may
/// be fed in pieces and are never kept.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    depth: u32,
    in_str: bool,
    escaped: bool,
    at: At,
    name: Vec<u8>,
    name_long: bool,
    /// Capturing the value of `id`.
    capturing: bool,
    id: Vec<u8>,
    id_long: bool,
    id_done: bool,
    method: bool,
}

impl Scan {
    /// Feeds the next bytes of the message.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            if self.in_str && !self.escaped && !self.capturing && self.at != At::InName {
                // Inside a string nothing is kept: skip to its next quote or backslash.
                match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                    Some(n) => i += n,
                    None => return,
                }
            }
            self.byte(bytes[i]);
            i += 1;
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_str {
            if self.capturing {
                self.push_id(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_str = false;
                if self.depth == 1 && self.at == At::InName {
                    self.at = At::Colon;
                }
                return;
            }
            if self.depth == 1 && self.at == At::InName {
                if self.name.len() < MAX_NAME {
                    self.name.push(b);
                } else {
                    self.name_long = true;
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_str = true;
                if self.depth == 1 && self.at == At::Name {
                    self.at = At::InName;
                    self.name.clear();
                    self.name_long = false;
                } else if self.capturing {
                    self.push_id(b);
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 {
                    self.at = if b == b'{' { At::Name } else { At::End };
                } else if self.capturing {
                    self.push_id(b);
                }
                self.depth += 1;
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    self.end_value();
                    self.at = At::End;
                } else if self.capturing {
                    self.push_id(b);
                }
            }
            b':' if self.depth == 1 && self.at == At::Colon => {
                self.at = At::Value;
                if !self.name_long {
                    match self.name.as_slice() {
                        b"id" => {
                            self.capturing = true;
                            self.id.clear();
                            self.id_long = false;
                        }
                        b"method" => self.method = true,
                        _ => {}
                    }
                }
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.at = At::Name;
            }
            _ => {
                if self.capturing {
                    self.push_id(b);
                }
            }
        }
    }

    fn push_id(&mut self, b: u8) {
        if self.id.len() < MAX_ID_BYTES {
            self.id.push(b);
        } else {
            self.id_long = true;
        }
    }

    fn end_value(&mut self) {
        if self.capturing {
            self.capturing = false;
            self.id_done = true;
        }
    }

    /// The top-level `id`, when the message had one that is a string or a number of at most
    /// [`MAX_ID_BYTES`] bytes.
    pub(crate) fn id(&self) -> Option<Value> {
        if !self.id_done || self.id_long {
            return None;
        }
        match serde_json::from_slice::<Value>(self.id.trim_ascii()).ok()? {
            v @ (Value::String(_) | Value::Number(_)) => Some(v),
            _ => None,
        }
    }

    /// Whether the message has a top-level `method` (a request or a notification, not a
    /// response).
    pub(crate) fn has_method(&self) -> bool {
        self.method
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scan(text: &str) -> Scan {
        let mut s = Scan::default();
        // Fed in pieces of every size, the result is the same.
        for piece in text.as_bytes().chunks(3) {
            s.feed(piece);
        }
        s
    }

    #[test]
    fn the_id_is_found_before_or_after_a_large_result() {
        let big = "x".repeat(10_000);
        let before = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"text":"{big}"}}}}"#);
        assert_eq!(scan(&before).id(), Some(json!(7)));
        let after = format!(
            r#"{{"jsonrpc":"2.0","result":{{"id":99,"text":"{big}","a":[1,{{"id":3}}]}},"id":"k\"1"}}"#
        );
        let s = scan(&after);
        assert_eq!(s.id(), Some(json!("k\"1")));
        assert!(!s.has_method());
        let request = r#"{"jsonrpc":"2.0","method":"tools/call","params":{"id":1},"id":12}"#;
        let s = scan(request);
        assert_eq!(s.id(), Some(json!(12)));
        assert!(s.has_method());
    }

    #[test]
    fn no_id_when_absent_too_long_malformed_or_not_a_scalar() {
        assert_eq!(scan(r#"{"jsonrpc":"2.0","method":"n"}"#).id(), None);
        let long = format!(r#"{{"id":"{}"}}"#, "a".repeat(MAX_ID_BYTES + 1));
        assert_eq!(scan(&long).id(), None);
        assert_eq!(scan(r#"{"id":{"a":1}}"#).id(), None);
        assert_eq!(scan(r#"{"id":tru"#).id(), None);
        assert_eq!(scan("not json at all").id(), None);
        assert_eq!(scan(r#"[{"id":1}]"#).id(), None);
        // A member whose name starts like `id` is not `id`.
        assert_eq!(scan(r#"{"idx":1}"#).id(), None);
    }

    #[test]
    fn lines_over_the_cap_are_counted_not_held() {
        let big = format!("{{\"id\":5,\"result\":\"{}\"}}\n", "y".repeat(1000));
        let input = format!("{{\"id\":1}}\n{big}{{\"id\":2}}\nhalf");
        let mut r = LineReader::new(io::BufReader::with_capacity(16, input.as_bytes()), 100);
        assert!(matches!(
            r.next_line().unwrap(),
            Some(Line::Whole(b"{\"id\":1}\n"))
        ));
        match r.next_line().unwrap() {
            Some(Line::Oversized { bytes, scan }) => {
                assert_eq!(bytes, big.len() as u64);
                assert_eq!(scan.id(), Some(json!(5)));
            }
            other => panic!("{other:?}"),
        }
        assert!(r.buf.capacity() <= 200, "{}", r.buf.capacity());
        assert!(matches!(
            r.next_line().unwrap(),
            Some(Line::Whole(b"{\"id\":2}\n"))
        ));
        assert!(matches!(r.next_line().unwrap(), Some(Line::Torn(b"half"))));
        assert!(r.next_line().unwrap().is_none());
        // Exactly the cap, newline aside, is whole.
        let exact = format!("{}\n", "z".repeat(100));
        let mut r = LineReader::new(exact.as_bytes(), 100);
        assert!(matches!(r.next_line().unwrap(), Some(Line::Whole(_))));
    }
}
