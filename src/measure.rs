//! Measures of a serialized tool result in every unit a truncating layer counts by.
//!
//! Layers between a tool and the model cut by bytes, characters, UTF-16 units, tokens, lines or
//! JSON depth. [`Measurer`] takes the result's bytes once, in as many chunks as the caller likes
//! (it is an [`std::io::Write`], so `serde_json::to_writer` can stream into it without building
//! the string), and yields a [`Measurement`] with each enabled unit:
//!
//! | measure | definition |
//! |---|---|
//! | `bytes` | UTF-8 bytes; always measured |
//! | `chars` | Unicode code points (Python `len(str)`, Rust `str::chars().count()`) |
//! | `utf16_units` | UTF-16 code units (JavaScript `String.length`): code points plus one per astral character |
//! | `lines` | lines as `str::lines()` counts them: newlines, plus one for a last line without one |
//! | `json_depth` | deepest nesting of objects and arrays; present only when the result is a JSON document |
//! | `max_string_chars` | the longest JSON string (keys included), decoded, in code points; for a result that is not JSON, the whole text is one string |
//! | `tokens_estimate` | `ceil(bytes / 4)`: a rough estimate, not a tokenizer's count |
//!
//! The JSON measures come from a structural scan, not a validation: a result counts as a JSON
//! document when, after leading white space, it opens with `{`, `[` or `"`, its brackets balance
//! outside strings, and only white space follows the end. Escapes are decoded for string lengths
//! (`\u00e9` is one code point, a surrogate pair one astral code point).
//!
//! Cost: `bytes` and `tokens_estimate` cost nothing per byte; every other measure is one more
//! pass over the result (each count runs sixteen or thirty-two bytes a step, the string scan jumps
//! between quotes and backslashes with `memchr`), and only the passes an enabled measure needs are
//! run. `cargo bench --features export --bench instrument` prints the cost of each measure alone
//! (group `measure_unit`) on a 4 KiB JSON result and on 64 KiB of text; that is why
//! [`Measures::CHEAP`], the default, holds only the two free ones. Bytes that are not valid UTF-8
//! are counted as they come (a stray continuation byte is not a code point); nothing here
//! allocates, panics or fails.

use std::io;

/// Bytes of the compact JSON serialization of `v` (what `serde_json::to_string` would give),
/// counted as it is written, never built.
pub fn json_len(v: &serde_json::Value) -> u64 {
    struct Count(u64);
    impl io::Write for Count {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a `Value` to a sink that cannot fail cannot fail.
    serde_json::to_writer(&mut c, v).map_or(u64::MAX, |()| c.0)
}

/// Bytes of `s` between the quotes of its JSON string, escaped as `serde_json` escapes it (`"`,
/// `\\` and the C0 controls; all else as it is), counted without writing them. Text that needs
/// no escape (most text) costs two vectorized passes: `memchr` looks for a backslash (with the
/// widest vectors the CPU has), and a pass of three instructions per sixteen bytes looks for a
/// quote or a control, a block at a time. From the first block that holds an escape on, each
/// byte's escape is counted by a third vectorized pass.
pub fn json_str_len(s: &str) -> u64 {
    let b = s.as_bytes();
    let backslash = memchr::memchr(b'\\', b).unwrap_or(b.len());
    let mut plain = 0;
    while plain < b.len() {
        let end = (plain + ESCAPE_SCAN_BLOCK).min(b.len());
        if backslash < end || has_quote_or_control(&b[plain..end]) {
            // Counted from the first block that holds an escape.
            return b.len() as u64 + escapes_added(&b[plain..]);
        }
        plain = end;
    }
    b.len() as u64
}

/// Bytes [`json_str_len`] scans between two branches: long enough that the loop runs as wide
/// vector operations with one branch per block, short enough that text with an escape early on
/// is not scanned far past it before its escapes are counted.
const ESCAPE_SCAN_BLOCK: usize = 1024;

/// Whether `chunk` holds a C0 control or `"`. `c ^ 0x02` maps `"` (0x22) to 0x20 and the
/// controls onto themselves, and no other byte to 0x20 or below, so both are one running
/// minimum (`memchr` for the quote as well, two needles, costs more than this exclusive-or).
/// The minimums are kept per lane of [`ESCAPE_SCAN_STEP`] bytes across the chunk, without
/// branches, and folded once at its end: what the compiler turns into a load, a vector
/// exclusive-or and a vector minimum per sixteen bytes. The last bytes short of a step are
/// scanned as a step padded with spaces, not one by one.
fn has_quote_or_control(chunk: &[u8]) -> bool {
    let mut low = [u8::MAX; ESCAPE_SCAN_STEP];
    let mut fold = |step: &[u8; ESCAPE_SCAN_STEP]| {
        for (l, &c) in low.iter_mut().zip(step) {
            *l = (*l).min(c ^ 0x02);
        }
    };
    let mut steps = chunk.chunks_exact(ESCAPE_SCAN_STEP);
    for step in &mut steps {
        if let Ok(step) = step.try_into() {
            fold(step);
        }
    }
    let tail = steps.remainder();
    if !tail.is_empty() {
        let mut padded = [b' '; ESCAPE_SCAN_STEP];
        padded[..tail.len()].copy_from_slice(tail);
        fold(&padded);
    }
    low.iter().fold(u8::MAX, |m, &l| m.min(l)) <= 0x20
}

/// Bytes [`has_quote_or_control`] takes a step: four vectors of sixteen.
const ESCAPE_SCAN_STEP: usize = 64;

/// Bytes the escapes of `b` add to it: one for `"`, `\\` and the controls written as two
/// characters (`\b`, `\t`, `\n`, `\f`, `\r`), five for the other controls (`\u00XX`).
/// Summed per block of [`ESCAPES_BLOCK`] bytes in a `u8` (at most 5 a byte), which the compiler
/// turns into vector compares and adds.
fn escapes_added(b: &[u8]) -> u64 {
    b.chunks(ESCAPES_BLOCK)
        .map(|block| {
            u64::from(block.iter().fold(0u8, |n, &c| {
                let control = u8::from(c < 0x20);
                // 0x08, 0x09, 0x0a, 0x0c, 0x0d: a two-character escape.
                let short = u8::from((c.wrapping_sub(0x08) < 6) & (c != 0x0b));
                let quote = u8::from((c == b'"') | (c == b'\\'));
                n.wrapping_add(control * 5 - short * 4 + quote)
            }))
        })
        .sum()
}

/// Bytes [`escapes_added`] sums in one `u8`: three vectors of sixteen, at most 48 × 5 = 240.
const ESCAPES_BLOCK: usize = 48;

/// Which measures a [`Measurer`] takes. Bytes are always measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Measures {
    /// Unicode code points.
    pub chars: bool,
    /// UTF-16 code units.
    pub utf16_units: bool,
    /// Lines.
    pub lines: bool,
    /// JSON nesting depth.
    pub json_depth: bool,
    /// Longest string, in code points.
    pub max_string_chars: bool,
    /// `ceil(bytes / 4)`.
    pub tokens_estimate: bool,
}

impl Measures {
    /// Every measure.
    pub const ALL: Measures = Measures {
        chars: true,
        utf16_units: true,
        lines: true,
        json_depth: true,
        max_string_chars: true,
        tokens_estimate: true,
    };

    /// Bytes only: the cheapest setting.
    pub const BYTES_ONLY: Measures = Measures {
        chars: false,
        utf16_units: false,
        lines: false,
        json_depth: false,
        max_string_chars: false,
        tokens_estimate: false,
    };

    /// The measures that cost nothing per byte of the result: bytes and `tokens_estimate`
    /// (arithmetic on bytes). The default ([`Measures::default`]); the others are taken when a
    /// layer that counts by them is configured ([`crate::layers::Stack::measures`]) or when they
    /// are asked for.
    pub const CHEAP: Measures = Measures {
        tokens_estimate: true,
        ..Measures::BYTES_ONLY
    };

    /// The measures enabled in `self` or in `other`.
    #[must_use]
    pub const fn union(self, other: Measures) -> Measures {
        Measures {
            chars: self.chars || other.chars,
            utf16_units: self.utf16_units || other.utf16_units,
            lines: self.lines || other.lines,
            json_depth: self.json_depth || other.json_depth,
            max_string_chars: self.max_string_chars || other.max_string_chars,
            tokens_estimate: self.tokens_estimate || other.tokens_estimate,
        }
    }

    /// The enabled measures' names, as the span attributes end (`bytes` first: always taken).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        [
            (true, "bytes"),
            (self.chars, "chars"),
            (self.utf16_units, "utf16_units"),
            (self.lines, "lines"),
            (self.json_depth, "json_depth"),
            (self.max_string_chars, "max_string_chars"),
            (self.tokens_estimate, "tokens_estimate"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
    }

    /// Code points are counted for `chars`, for `utf16_units` (code points plus astral ones) and
    /// for `max_string_chars` (a result that is not JSON is one string).
    fn needs_code_points(self) -> bool {
        self.chars || self.utf16_units || self.max_string_chars
    }

    fn needs_scan(self) -> bool {
        self.json_depth || self.max_string_chars
    }

    /// Whether the byte count alone gives every enabled measure (none needs a pass over the
    /// result).
    pub const fn from_bytes_alone(self) -> bool {
        !(self.chars || self.utf16_units || self.lines || self.json_depth || self.max_string_chars)
    }
}

impl Default for Measures {
    /// [`Measures::CHEAP`].
    fn default() -> Self {
        Measures::CHEAP
    }
}

impl std::fmt::Display for Measures {
    /// The enabled measures' names, comma-separated: `bytes,tokens_estimate`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// The measures of one result: the one measures type of the library, the layer verdicts
/// ([`crate::layers`]) and the collector's recognition. A measure that was not enabled (or that
/// the span did not carry) is `None`; so is `json_depth` for a result that is not a JSON document.
///
/// 120 bytes (`bytes` plus seven `Option<u64>`, measured in a test). The collector's record
/// carries it too, with `bytes` left to the record's size (read with
/// [`Measurement::with_bytes`]) and `items` unused: 24 bytes more per record than a copy without
/// them, a price paid for one type whose measures cannot drift from the span contract's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Measurement {
    /// UTF-8 bytes.
    pub bytes: u64,
    /// Unicode code points.
    pub chars: Option<u64>,
    /// UTF-16 code units.
    pub utf16_units: Option<u64>,
    /// Lines.
    pub lines: Option<u64>,
    /// Deepest nesting of objects and arrays (0 for a top-level JSON string).
    pub json_depth: Option<u64>,
    /// The longest string, decoded, in code points.
    pub max_string_chars: Option<u64>,
    /// `ceil(bytes / 4)`.
    pub tokens_estimate: Option<u64>,
    /// Items (attributes, entries) when the carrier counts them; never measured from text.
    pub items: Option<u64>,
}

impl Measurement {
    /// The measurement of a result of `bytes` bytes, when `measures` need nothing else
    /// ([`Measures::from_bytes_alone`]); `None` otherwise.
    pub fn of_byte_count(bytes: u64, measures: Measures) -> Option<Measurement> {
        measures.from_bytes_alone().then(|| Measurement {
            bytes,
            tokens_estimate: measures.tokens_estimate.then(|| bytes.div_ceil(4)),
            ..Measurement::default()
        })
    }

    /// Measures of a result whose size in bytes is all that is known.
    pub fn from_bytes(bytes: u64) -> Measurement {
        Measurement {
            bytes,
            ..Measurement::default()
        }
    }

    /// These measures with `bytes` replaced: how the collector joins a record's size to the
    /// measures its span carried.
    pub fn with_bytes(self, bytes: u64) -> Measurement {
        Measurement { bytes, ..self }
    }
}

/// Measures `bytes` in one call (no gathering buffer: the whole result is one chunk).
pub fn measure(bytes: &[u8], measures: Measures) -> Measurement {
    let mut state = State::new(measures);
    state.process(bytes);
    state.finish()
}

/// Where the structural scan stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Doc {
    /// Only white space so far.
    Start,
    /// Inside the top-level value.
    Open,
    /// The top-level value has ended; only white space may follow.
    Done,
    /// Not a JSON document: the scan has stopped.
    NotJson,
}

/// Escape decoding inside a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Esc {
    None,
    /// Just after a backslash.
    Backslash,
    /// Inside `\uXXXX`: how many hex digits are still to come, and the value so far.
    Hex(u8, u16),
}

/// A streaming measurer: feed it chunks with [`Measurer::update`] (or write to it), then call
/// [`Measurer::finish`].
#[derive(Clone, Debug)]
pub struct Measurer {
    state: State,
    /// Small writes (serde_json writes token by token) are gathered here and measured together.
    pending: [u8; PENDING],
    pending_len: usize,
}

/// The running counts and the structural scan.
#[derive(Clone, Debug)]
struct State {
    measures: Measures,
    bytes: u64,
    /// Continuation bytes (`10xxxxxx`): code points are `bytes - continuation`.
    continuation: u64,
    /// Four-byte leaders (`11110xxx`): each adds a second UTF-16 unit.
    astral: u64,
    newlines: u64,
    last_byte: Option<u8>,
    // Structural scan.
    doc: Doc,
    depth: u64,
    max_depth: u64,
    in_string: bool,
    esc: Esc,
    prev_high_surrogate: bool,
    cur_string: u64,
    /// The current string opened in this chunk and has had no escape so far.
    cur_simple: bool,
    max_string: u64,
}

/// Size of the gathering buffer for small writes.
const PENDING: usize = 512;

impl Measurer {
    /// A measurer taking `measures`.
    pub fn new(measures: Measures) -> Self {
        Measurer {
            state: State::new(measures),
            pending: [0; PENDING],
            pending_len: 0,
        }
    }

    /// Bytes seen so far.
    pub fn bytes(&self) -> u64 {
        self.state.bytes + self.pending_len as u64
    }

    /// Takes the next chunk of the result.
    pub fn update(&mut self, chunk: &[u8]) {
        self.flush_pending();
        self.state.process(chunk);
    }

    /// Takes a chunk that may be tiny: gathered with its neighbours before it is measured.
    fn gather(&mut self, chunk: &[u8]) {
        if self.pending_len + chunk.len() > PENDING {
            self.flush_pending();
        }
        if chunk.len() >= PENDING {
            self.state.process(chunk);
        } else {
            self.pending[self.pending_len..self.pending_len + chunk.len()].copy_from_slice(chunk);
            self.pending_len += chunk.len();
        }
    }

    fn flush_pending(&mut self) {
        let len = std::mem::take(&mut self.pending_len);
        self.state.process(&self.pending[..len]);
    }

    /// The measurement of everything taken so far.
    pub fn finish(mut self) -> Measurement {
        self.flush_pending();
        self.state.finish()
    }
}

impl State {
    fn new(measures: Measures) -> Self {
        State {
            measures,
            bytes: 0,
            continuation: 0,
            astral: 0,
            newlines: 0,
            last_byte: None,
            doc: if measures.needs_scan() {
                Doc::Start
            } else {
                Doc::NotJson
            },
            depth: 0,
            max_depth: 0,
            in_string: false,
            esc: Esc::None,
            prev_high_surrogate: false,
            cur_string: 0,
            cur_simple: false,
            max_string: 0,
        }
    }

    fn process(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.bytes += chunk.len() as u64;
        let ms = self.measures;
        let (cont, astral, lines) = (ms.needs_code_points(), ms.utf16_units, ms.lines);
        if cont || astral || lines {
            // One walk over the chunk, each block (in L1) counted once per enabled measure: a
            // measure that is off costs nothing, several cost no second walk over a large result.
            for block in chunk.chunks(255) {
                if cont {
                    self.continuation += count_block(block, is_continuation);
                }
                if astral {
                    self.astral += count_block(block, |b| b >= 0xF0);
                }
                if lines {
                    self.newlines += count_block(block, |b| b == b'\n');
                }
            }
            self.last_byte = chunk.last().copied();
        }
        if self.doc != Doc::NotJson {
            self.scan(chunk);
        }
    }

    fn finish(self) -> Measurement {
        let ms = self.measures;
        let chars = self.bytes - self.continuation;
        let is_json = self.doc == Doc::Done;
        let lines = match self.last_byte {
            None => 0,
            Some(b'\n') => self.newlines,
            Some(_) => self.newlines + 1,
        };
        Measurement {
            bytes: self.bytes,
            chars: ms.chars.then_some(chars),
            utf16_units: ms.utf16_units.then_some(chars + self.astral),
            lines: ms.lines.then_some(lines),
            json_depth: (ms.json_depth && is_json).then_some(self.max_depth),
            max_string_chars: ms.max_string_chars.then_some(if is_json {
                self.max_string
            } else {
                chars
            }),
            tokens_estimate: ms.tokens_estimate.then_some(self.bytes.div_ceil(4)),
            items: None,
        }
    }

    fn scan(&mut self, mut s: &[u8]) {
        while !s.is_empty() {
            if self.in_string {
                if self.esc != Esc::None {
                    self.escape_byte(s[0]);
                    s = &s[1..];
                    continue;
                }
                let Some(i) = memchr::memchr2(b'"', b'\\', s) else {
                    self.cur_string += code_points(s);
                    self.cur_simple = false;
                    return;
                };
                let seg = &s[..i];
                if i > 0 {
                    self.prev_high_surrogate = false;
                }
                if s[i] == b'"' {
                    // A string seen whole, with no escape, no longer in bytes than the longest so
                    // far cannot be longer in code points: skip counting it.
                    if !(self.cur_simple && seg.len() as u64 <= self.max_string) {
                        self.cur_string += code_points(seg);
                        self.max_string = self.max_string.max(self.cur_string);
                    }
                    self.in_string = false;
                    if self.depth == 0 {
                        self.doc = Doc::Done;
                    }
                } else {
                    // The escape sequence decodes to one code point.
                    self.cur_string += code_points(seg) + 1;
                    self.cur_simple = false;
                    self.esc = Esc::Backslash;
                }
                s = &s[i + 1..];
                continue;
            }
            // Outside strings: walk to the next quote, adjusting the depth on the way.
            let mut i = 0;
            while i < s.len() {
                if self.doc == Doc::Open {
                    // Numbers, literals, commas, colons and white space change nothing.
                    i += s[i..]
                        .iter()
                        .position(|&b| CLASS[b as usize] > C_SPACE)
                        .unwrap_or(s.len() - i);
                    if i == s.len() {
                        break;
                    }
                }
                let b = s[i];
                i += 1;
                match CLASS[b as usize] {
                    C_SPACE => {}
                    C_OTHER if self.doc == Doc::Open => {}
                    C_OTHER => {
                        self.doc = Doc::NotJson;
                        return;
                    }
                    C_QUOTE => {
                        if self.doc == Doc::Done {
                            self.doc = Doc::NotJson;
                            return;
                        }
                        self.doc = Doc::Open;
                        self.in_string = true;
                        self.cur_simple = true;
                        self.cur_string = 0;
                        break;
                    }
                    C_OPEN => {
                        if self.doc == Doc::Done {
                            self.doc = Doc::NotJson;
                            return;
                        }
                        self.doc = Doc::Open;
                        self.depth += 1;
                        self.max_depth = self.max_depth.max(self.depth);
                    }
                    _ => {
                        // C_CLOSE
                        if self.depth == 0 {
                            self.doc = Doc::NotJson;
                            return;
                        }
                        self.depth -= 1;
                        if self.depth == 0 {
                            self.doc = Doc::Done;
                        }
                    }
                }
            }
            s = &s[i..];
        }
    }

    fn escape_byte(&mut self, b: u8) {
        self.esc = match self.esc {
            Esc::Backslash if b == b'u' => Esc::Hex(4, 0),
            Esc::Hex(left, value) => {
                let digit = match b {
                    b'0'..=b'9' => b - b'0',
                    b'a'..=b'f' => b - b'a' + 10,
                    b'A'..=b'F' => b - b'A' + 10,
                    _ => 0,
                };
                let value = (value << 4) | u16::from(digit);
                if left > 1 {
                    Esc::Hex(left - 1, value)
                } else {
                    // A low surrogate right after a high one completes one astral code point,
                    // already counted with the high surrogate.
                    if (0xDC00..=0xDFFF).contains(&value) && self.prev_high_surrogate {
                        self.cur_string -= 1;
                        self.prev_high_surrogate = false;
                    } else {
                        self.prev_high_surrogate = (0xD800..=0xDBFF).contains(&value);
                    }
                    Esc::None
                }
            }
            _ => {
                self.prev_high_surrogate = false;
                Esc::None
            }
        };
    }
}

impl io::Write for Measurer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.gather(buf);
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.gather(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const C_OTHER: u8 = 0;
const C_SPACE: u8 = 1;
const C_QUOTE: u8 = 2;
const C_OPEN: u8 = 3;
const C_CLOSE: u8 = 4;

/// Byte classes outside strings.
static CLASS: [u8; 256] = {
    let mut t = [C_OTHER; 256];
    t[b' ' as usize] = C_SPACE;
    t[b'\t' as usize] = C_SPACE;
    t[b'\n' as usize] = C_SPACE;
    t[b'\r' as usize] = C_SPACE;
    t[b'"' as usize] = C_QUOTE;
    t[b'[' as usize] = C_OPEN;
    t[b'{' as usize] = C_OPEN;
    t[b']' as usize] = C_CLOSE;
    t[b'}' as usize] = C_CLOSE;
    t
};

/// Counts `pred` over `block` (at most 255 bytes) in a `u8` accumulator: written so the compiler
/// turns it into vector compares and subtracts, sixteen or thirty-two bytes a step.
#[inline(always)]
fn count_block(block: &[u8], pred: impl Fn(u8) -> bool) -> u64 {
    u64::from(
        block
            .iter()
            .fold(0u8, |n, &b| n.wrapping_add(u8::from(pred(b)))),
    )
}

fn is_continuation(b: u8) -> bool {
    (b as i8) < -64
}

/// Code points in `s` (bytes that are not continuation bytes).
fn code_points(s: &[u8]) -> u64 {
    let cont: u64 = s.chunks(255).map(|b| count_block(b, is_continuation)).sum();
    s.len() as u64 - cont
}

#[cfg(test)]
mod tests {
    /// The escaped length is serde_json's, byte for byte, for every ASCII character (each
    /// control escaped its way), multi-byte text and text without escapes.
    #[test]
    fn json_str_len_is_serde_jsons() {
        let all_ascii: String = (0u8..0x80).map(char::from).collect();
        for s in [
            all_ascii.as_str(),
            "plain text, nothing to escape",
            "é, 漢字, 🦀 and \u{7f}",
            "\"quoted\"\n\ttab\\slash\u{1}",
            "",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain(
            // An escape in the first block, at its end, in a later block, in the remainder.
            [
                (0, 300),
                (255, 300),
                (256, 300),
                (700, 300),
                (700, 0),
                (1023, 1),
            ]
            .into_iter()
            .flat_map(|(at, tail)| {
                ["\"", "\\", "\u{1f}"].map(|e| format!("{}{e}{}", "a".repeat(at), "b".repeat(tail)))
            }),
        ) {
            let serde = serde_json::to_vec(&s).unwrap().len() as u64 - 2;
            assert_eq!(super::json_str_len(&s), serde, "{s:?}");
        }
    }

    /// Every length from 0 to 140 (past two of the scan's steps), at every start within a word
    /// (the scan's vectors and blocks meet the text unaligned), of ASCII, Latin-1, CJK and emoji text, each C0 control, `"`,
    /// `\\` and DEL, alone and mixed: the escaped length is serde_json's. Also each of those
    /// characters once in a text of two scan blocks and more, around each block's end.
    #[test]
    fn json_str_len_is_serde_jsons_at_every_length_and_start() {
        let serde = |s: &str| serde_json::to_string(s).unwrap().len() as u64 - 2;
        let controls: String = (0u8..0x20).map(char::from).collect();
        let pieces = [
            "plain ascii text with nothing to escape in it at all, on and on".to_owned(),
            "Latin-1: é à ü ß ø ñ ¿ © ± µ ÿ".to_owned(),
            "漢字とかなの混じった文。".to_owned(),
            "🦀🎉👍🏽 emoji".to_owned(),
            controls.clone(),
            "\"quoted\" \\ back\\slash \u{7f}".to_owned(),
            format!("a\"b\\c{controls}é漢🦀\u{7f}d"),
        ];
        for piece in &pieces {
            let long = piece.repeat(50);
            for start in 0..8 {
                for len in 0..=140 {
                    let Some(s) = long.get(start..).and_then(|t| {
                        let end = (start..=start + len)
                            .rev()
                            .find(|&e| long.is_char_boundary(e))?;
                        t.get(..end - start)
                    }) else {
                        continue;
                    };
                    assert_eq!(super::json_str_len(s), serde(s), "{s:?}");
                }
            }
        }
        // Two scan blocks and a remainder: each character at the start, on each side of each
        // block's end, and at the end.
        let plain = "x".repeat(2 * ESCAPE_SCAN_BLOCK + 50);
        let places = (0..40)
            .chain(ESCAPE_SCAN_BLOCK - 20..ESCAPE_SCAN_BLOCK + 20)
            .chain(2 * ESCAPE_SCAN_BLOCK - 20..=plain.len());
        for c in (0u8..0x20)
            .map(char::from)
            .chain(['"', '\\', '\u{7f}', 'é', '🦀'])
        {
            for at in places.clone() {
                let mut s = plain.clone();
                s.insert(at, c);
                assert_eq!(super::json_str_len(&s), serde(&s), "{c:?} at {at}");
            }
        }
    }

    use super::*;

    #[test]
    fn json_len_is_the_compact_serialization_length() {
        let v = serde_json::json!({"a": [1, 2.5, null, true], "é\n": "x\"y\u{1}", "n": {}});
        assert_eq!(
            json_len(&v),
            serde_json::to_string(&v).unwrap().len() as u64
        );
    }

    fn all(s: &str) -> Measurement {
        measure(s.as_bytes(), Measures::ALL)
    }

    /// The reference definitions, computed the slow, obvious way.
    fn reference(s: &str) -> (u64, u64, u64, u64) {
        (
            s.len() as u64,
            s.chars().count() as u64,
            s.encode_utf16().count() as u64,
            s.lines().count() as u64,
        )
    }

    #[test]
    fn counts_agree_with_std_on_mixed_text() {
        for s in [
            "",
            "a",
            "\n",
            "a\nb",
            "a\nb\n",
            "héllo wörld\r\nzweite Zeile\n",
            "日本語のテキスト\n二行目",
            "emoji 😀🎉 and 𝄞 clef",
            "שלום עולם\u{200f} mixed\tRTL",
            "e\u{301} combining",
            &"x".repeat(1000),
            &"ü😀\n".repeat(333),
        ] {
            let m = all(s);
            let (bytes, chars, utf16, lines) = reference(s);
            assert_eq!(m.bytes, bytes, "{s:?}");
            assert_eq!(m.chars, Some(chars), "{s:?}");
            assert_eq!(m.utf16_units, Some(utf16), "{s:?}");
            assert_eq!(m.lines, Some(lines), "{s:?}");
            assert_eq!(m.tokens_estimate, Some(bytes.div_ceil(4)), "{s:?}");
        }
    }

    #[test]
    fn chunking_does_not_change_the_measurement() {
        let s = r#"{"a": ["ü😀\n", {"b\"c": "\ud83d\ude00 x"}], "d": "\\"}"#.repeat(3);
        let s = format!("[{}]", s.replace("}{", "},{"));
        let whole = all(&s);
        for size in 1..9 {
            let mut m = Measurer::new(Measures::ALL);
            for chunk in s.as_bytes().chunks(size) {
                m.update(chunk);
            }
            assert_eq!(m.finish(), whole, "chunk size {size}");
        }
    }

    #[test]
    fn json_depth_and_longest_string() {
        let m = all(r#"{"items": [{"body": "abcdef"}, [[1]]], "k": "xy"}"#);
        assert_eq!(m.json_depth, Some(4));
        assert_eq!(m.max_string_chars, Some(6));
        assert_eq!(all("[]").json_depth, Some(1));
        assert_eq!(all("  {\"a\":1}\n").json_depth, Some(1));
        assert_eq!(all("\"top-level string\"").json_depth, Some(0));
        assert_eq!(all("\"top-level string\"").max_string_chars, Some(16));
    }

    #[test]
    fn escapes_decode_to_one_code_point_each() {
        // "é" escaped, a surrogate pair (one astral code point), "\n" escaped, a quote escaped.
        let m = all(r#"["\u00e9\ud83d\ude00\n\"x"]"#);
        assert_eq!(m.max_string_chars, Some(5));
        let decoded: String = serde_json::from_str::<Vec<String>>(r#"["\u00e9\ud83d\ude00\n\"x"]"#)
            .unwrap()
            .remove(0);
        assert_eq!(decoded.chars().count(), 5);
    }

    #[test]
    fn keys_count_as_strings() {
        let m = all(r#"{"a_rather_long_key": 1}"#);
        assert_eq!(m.max_string_chars, Some("a_rather_long_key".len() as u64));
    }

    #[test]
    fn text_that_is_not_json_has_no_depth_and_one_string() {
        for s in [
            "plain text",
            "[INFO] started] more",
            "{\"a\": 1} trailing",
            "}{",
            "[1, 2",
            "\"open string",
            "42",
        ] {
            let m = all(s);
            assert_eq!(m.json_depth, None, "{s:?}");
            assert_eq!(m.max_string_chars, m.chars, "{s:?}");
        }
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let m = all(r#"{"a": "[[[{{{", "b": "}}]]"}"#);
        assert_eq!(m.json_depth, Some(1));
    }

    #[test]
    fn one_measures_type_is_120_bytes() {
        // The collector's record carries it: a change of size is a change of record size.
        assert_eq!(std::mem::size_of::<Measurement>(), 120);
        let m = all("héllo");
        assert_eq!(m.with_bytes(3).bytes, 3);
        assert_eq!(m.with_bytes(3).chars, m.chars);
    }

    #[test]
    fn disabled_measures_are_absent() {
        let m = measure(b"{\"a\": [1]}", Measures::BYTES_ONLY);
        assert_eq!(
            m,
            Measurement {
                bytes: 10,
                ..Measurement::default()
            }
        );
        let only_depth = Measures {
            json_depth: true,
            ..Measures::BYTES_ONLY
        };
        let m = measure(b"{\"a\": [1]}", only_depth);
        assert_eq!(m.json_depth, Some(2));
        assert_eq!(m.chars, None);
    }

    #[test]
    fn serde_json_streaming_matches_the_string() {
        let value = serde_json::json!({
            "results": [{"title": "Ünïcödé 😀", "lines": "a\nb\nc"}, {"n": 1.5e300, "deep": [[[[]]]]}],
            "cursor": null,
        });
        let mut m = Measurer::new(Measures::ALL);
        serde_json::to_writer(&mut m, &value).unwrap();
        let text = serde_json::to_string(&value).unwrap();
        assert_eq!(m.finish(), all(&text));
    }

    /// A deterministic random JSON value with strings of mixed scripts, escapes and lengths.
    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    fn random_string(seed: &mut u64, n: u64) -> String {
        const PIECES: [&str; 9] = ["a", "é", "😀", "\"", "\\", "\n", "日本", "\u{1}", "xyz"];
        (0..n).map(|_| PIECES[(next(seed) % 9) as usize]).collect()
    }

    /// A deterministic random JSON value with strings of mixed scripts, escapes and lengths.
    fn random_value(seed: &mut u64, depth: u32) -> serde_json::Value {
        match (next(seed) % 6, depth) {
            (0, d) if d < 6 => {
                let n = next(seed) % 5;
                serde_json::Value::Array((0..n).map(|_| random_value(seed, d + 1)).collect())
            }
            (1, d) if d < 6 => {
                let n = next(seed) % 5;
                let mut map = serde_json::Map::new();
                for _ in 0..n {
                    let len = next(seed) % 12;
                    map.insert(random_string(seed, len), random_value(seed, d + 1));
                }
                serde_json::Value::Object(map)
            }
            (2, _) => serde_json::json!(next(seed) % 1000),
            _ => {
                let len = next(seed) % 80;
                serde_json::Value::String(random_string(seed, len))
            }
        }
    }

    fn reference_json(v: &serde_json::Value) -> (u64, u64) {
        // (depth, longest string in code points, keys included)
        match v {
            serde_json::Value::Array(a) => a
                .iter()
                .map(reference_json)
                .fold((1, 0), |(d, m), (cd, cm)| (d.max(cd + 1), m.max(cm))),
            serde_json::Value::Object(o) => o.iter().fold((1, 0), |(d, m), (k, v)| {
                let (cd, cm) = reference_json(v);
                (d.max(cd + 1), m.max(cm).max(k.chars().count() as u64))
            }),
            serde_json::Value::String(s) => (0, s.chars().count() as u64),
            _ => (0, 0),
        }
    }

    #[test]
    fn json_measures_agree_with_a_parsed_reference() {
        let mut seed = 0x5EED_u64;
        for _ in 0..500 {
            let value = random_value(&mut seed, 0);
            if !(value.is_array() || value.is_object() || value.is_string()) {
                continue;
            }
            let (depth, longest) = reference_json(&value);
            for text in [
                serde_json::to_string(&value).unwrap(),
                serde_json::to_string_pretty(&value).unwrap(),
            ] {
                let whole = all(&text);
                assert_eq!(whole.json_depth, Some(depth), "{text}");
                assert_eq!(whole.max_string_chars, Some(longest), "{text}");
                let mut streamed = Measurer::new(Measures::ALL);
                for chunk in text.as_bytes().chunks(7) {
                    std::io::Write::write_all(&mut streamed, chunk).unwrap();
                }
                assert_eq!(streamed.finish(), whole, "{text}");
                let mut chunked = Measurer::new(Measures::ALL);
                for chunk in text.as_bytes().chunks(3) {
                    chunked.update(chunk);
                }
                assert_eq!(chunked.finish(), whole, "{text}");
            }
        }
    }

    /// `m` with only the measures in `on` kept.
    fn masked(m: Measurement, on: Measures) -> Measurement {
        Measurement {
            bytes: m.bytes,
            chars: m.chars.filter(|_| on.chars),
            utf16_units: m.utf16_units.filter(|_| on.utf16_units),
            lines: m.lines.filter(|_| on.lines),
            json_depth: m.json_depth.filter(|_| on.json_depth),
            max_string_chars: m.max_string_chars.filter(|_| on.max_string_chars),
            tokens_estimate: m.tokens_estimate.filter(|_| on.tokens_estimate),
            items: None,
        }
    }

    #[test]
    fn each_measure_alone_gives_what_it_gives_among_all() {
        let singles = [
            Measures {
                chars: true,
                ..Measures::BYTES_ONLY
            },
            Measures {
                utf16_units: true,
                ..Measures::BYTES_ONLY
            },
            Measures {
                lines: true,
                ..Measures::BYTES_ONLY
            },
            Measures {
                json_depth: true,
                ..Measures::BYTES_ONLY
            },
            Measures {
                max_string_chars: true,
                ..Measures::BYTES_ONLY
            },
            Measures::CHEAP,
        ];
        for s in [
            "ü😀\nline two\n",
            r#"{"a": ["ü😀\n", {"b": "\ud83d\ude00 x"}], "d": [[1]]}"#,
            "plain text, no newline",
        ] {
            let whole = all(s);
            for one in singles {
                let m = measure(s.as_bytes(), one);
                assert_eq!(m, masked(whole, one), "{s:?} {one}");
                // Exactly the enabled measures are present (json_depth only for JSON).
                assert_eq!(m.chars.is_some(), one.chars, "{s:?} {one}");
                assert_eq!(m.lines.is_some(), one.lines, "{s:?} {one}");
            }
        }
    }

    #[test]
    fn the_default_is_the_cheap_measures() {
        assert_eq!(Measures::default(), Measures::CHEAP);
        let m = measure("ü\n".as_bytes(), Measures::default());
        assert_eq!(
            m,
            Measurement {
                bytes: 3,
                tokens_estimate: Some(1),
                ..Measurement::default()
            }
        );
        assert_eq!(Measures::CHEAP.to_string(), "bytes,tokens_estimate");
        assert_eq!(Measures::BYTES_ONLY.to_string(), "bytes");
        assert_eq!(
            Measures::CHEAP.union(Measures {
                lines: true,
                ..Measures::BYTES_ONLY
            }),
            Measures {
                lines: true,
                tokens_estimate: true,
                ..Measures::BYTES_ONLY
            }
        );
        assert_eq!(Measures::BYTES_ONLY.union(Measures::ALL), Measures::ALL);
    }

    #[test]
    fn invalid_utf8_never_panics() {
        let m = measure(&[0xFF, 0x80, 0x80, b'\n', 0xF0, 0x9F], Measures::ALL);
        assert_eq!(m.bytes, 6);
        assert_eq!(m.lines, Some(2));
    }
}
