//! `tool.args_hash`: a hash of tool-call arguments identical to CPython's `json.dumps(args, sort_keys=True, default=str)` + SHA-1.
//!
//! A Python agent computes
//! `hashlib.sha1(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:12]`;
//! this module produces byte-identical canonical JSON (and therefore the same hash) from
//! any [`serde::Serialize`] value ([`canonical_json`], [`args_hash`]) or from JSON text
//! ([`canonical_json_from_text`], [`args_hash_json`], which behave like `json.loads` followed
//! by `json.dumps`). The canonical form uses the separators `", "` and `": "`, escapes every
//! non-ASCII character as `\uXXXX` (astral characters as surrogate pairs, lowercase hex),
//! prints floats as Python's `repr` does (`1.0`, `1e-07`, `1e+16`, `NaN`, `Infinity`), prints
//! integers of any size exactly, and sorts object keys at every level in Python's order:
//! strings by code point, numeric keys (`int`, `float`, `bool`) numerically, the result then
//! written as a string (`{10: 'a', 9: 'b'}` gives `{"9": "b", "10": "a"}`). Where Python
//! raises, an [`ArgsHashError`] is returned: string keys mixed with numeric keys, `None` keys
//! beside any other key, keys that are sequences, maps or bytes, and (from text) invalid JSON
//! or integers of more than 4300 digits. Departures from Python, all documented on the items:
//! `f32` values are written as the shortest decimal that round-trips the `f32` (so `0.1f32`
//! hashes like Python's `0.1`); serde byte arrays are written as arrays of integers (as
//! `serde_json` does); nesting deeper than [`MAX_DEPTH`] is an error (Python fails near 1000);
//! NaN map keys are placed after all other numeric keys, in insertion order (Python's order
//! for them depends on insertion order and on its sort algorithm); keys that compare equal
//! (only possible from a hand-written `Serialize`, e.g. `1` and `1.0`) are all written, in
//! insertion order, where a Python dict would hold one of them (from text, the last duplicate
//! wins, as in `json.loads`).

use std::cmp::Ordering;
use std::fmt;

use serde::ser::{self, Impossible, Serialize};
use sha1::{Digest, Sha1};

mod value;
pub use value::span_args_hash_of_map;

/// Maximum nesting depth of arrays and objects accepted by every function in this module.
///
/// CPython's default recursion limit makes `json.loads`/`json.dumps` fail somewhat below
/// a depth of 1000; we stop earlier so that no input can exhaust the stack.
pub const MAX_DEPTH: usize = 512;

/// Python's default `sys.get_int_max_str_digits()`: `json.loads` refuses longer integers.
const MAX_INT_DIGITS: usize = 4300;

/// Why a value or a JSON text could not be canonicalised.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgsHashError {
    /// A map key has a type Python's `json.dumps` rejects (`keys must be str, int, float,
    /// bool or None, not tuple`); `found` is the Python type name.
    UnsupportedKey {
        /// Python name of the rejected key type (`tuple`, `list`, `dict`, `bytes`).
        found: &'static str,
    },
    /// Two keys of one map cannot be ordered by Python (`'<' not supported between
    /// instances of 'str' and 'int'`): strings mixed with numbers, or `None` beside another key.
    IncomparableKeys {
        /// Python type name of one key.
        left: &'static str,
        /// Python type name of the other key.
        right: &'static str,
    },
    /// Arrays and objects are nested deeper than [`MAX_DEPTH`].
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The JSON text is not something Python's `json.loads` accepts.
    InvalidJson {
        /// What is wrong.
        message: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column, in characters, of the error.
        column: usize,
        /// 0-based byte offset of the error.
        offset: usize,
    },
    /// A `Serialize` implementation reported an error.
    Custom(String),
}

impl fmt::Display for ArgsHashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedKey { found } => {
                write!(f, "keys must be str, int, float, bool or None, not {found}")
            }
            Self::IncomparableKeys { left, right } => write!(
                f,
                "map keys cannot be sorted: '<' not supported between instances of '{left}' and '{right}'"
            ),
            Self::TooDeep { limit } => {
                write!(f, "arguments nested deeper than {limit} levels")
            }
            Self::InvalidJson {
                message,
                line,
                column,
                offset,
            } => write!(
                f,
                "invalid JSON: {message}: line {line} column {column} (byte {offset})"
            ),
            Self::Custom(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for ArgsHashError {}

impl ser::Error for ArgsHashError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::Custom(msg.to_string())
    }
}

type Result<T, E = ArgsHashError> = std::result::Result<T, E>;

// ---------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------

/// Canonical JSON of `value`, byte-identical to Python's
/// `json.dumps(v, sort_keys=True, default=str)` for the equivalent Python value.
///
/// The serde data model maps to Python as `serde_json` does: unit, `None` and unit structs
/// are `None`; sequences and tuples are lists; structs and maps are dicts; enum variants
/// other than unit variants are one-entry dicts keyed by the variant name, unit variants are
/// their name. Map keys may be strings, chars, integers (any width), floats, bools or
/// `None`/unit; see the [module documentation](self) for ordering and the few departures.
///
/// # Errors
///
/// [`ArgsHashError`] where Python would raise (unsortable or unsupported keys), when the
/// value is nested deeper than [`MAX_DEPTH`], or when the `Serialize` impl fails.
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut canon = Canon::default();
    value.serialize(&mut canon)?;
    Ok(canon.into_string())
}

/// `tool.args_hash` of `value`: the first 12 lowercase hex digits of the SHA-1 of
/// [`canonical_json`].
///
/// # Errors
///
/// As [`canonical_json`].
pub fn args_hash<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut canon = Canon::with_capacity();
    value.serialize(&mut canon)?;
    Ok(args_hash_of_canonical(&canon.out))
}

/// The first 12 lowercase hex digits of the SHA-1 of already-canonical JSON bytes.
pub fn args_hash_of_canonical(canonical: &[u8]) -> String {
    crate::hex::encode(&Sha1::digest(canonical)[..6])
}

// ---------------------------------------------------------------------------------------
// The keyed form
// ---------------------------------------------------------------------------------------

/// The environment variable holding the key of the arguments' hash: when it is set (and not
/// empty), [`span_args_hash`] (what `toolsize::tool_call(..).args(..)` and `toolsize mcp`
/// record) and `toolsize args-hash` give the keyed hash.
pub const ARGS_HASH_KEY_ENV: &str = "TOOLSIZE_ARGS_HASH_KEY";

/// A secret key for the arguments' hash: the hash becomes the first 12 hex digits of
/// HMAC-SHA1(key, canonical JSON), which Python computes as
/// `hmac.new(key, json.dumps(args, sort_keys=True, default=str).encode(), hashlib.sha1).hexdigest()[:12]`.
///
/// Why a key, and why HMAC rather than a salt: the unkeyed hash is a function of the arguments
/// alone, so anyone who reads it (in the API, an alert, a snapshot, a trace backend) can hash a
/// guessed argument (a customer id, a file path, a token with little entropy) and confirm the
/// guess offline. A salt stored beside the hash only stops precomputed tables; a key kept out of
/// what is exported stops the guessing itself. HMAC is the standard keyed hash (RFC 2104; a plain
/// `SHA-1(key ‖ data)` is open to length extension), and Python's standard library has it, so
/// Python and Rust agents sharing one key still agree. The price: hashes made with different
/// keys (or none) never match, so every agent, proxy and `toolsize args-hash` comparing hashes
/// needs the same key. The key's `Debug` never shows it.
#[derive(Clone)]
pub struct ArgsHashKey {
    /// HMAC-SHA1 keyed once: its inner and outer states, cloned for each hash.
    mac: hmac::Hmac<Sha1>,
}

impl fmt::Debug for ArgsHashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ArgsHashKey(…)")
    }
}

impl ArgsHashKey {
    /// A key of `secret`'s bytes (any length; longer than 64 bytes, its SHA-1 is used, as HMAC
    /// specifies). `None` for an empty secret: no key.
    pub fn new(secret: &[u8]) -> Option<Self> {
        use hmac::Mac as _;
        if secret.is_empty() {
            return None;
        }
        // HMAC takes a key of any length (a longer one than the block is hashed first).
        let mac = hmac::Hmac::<Sha1>::new_from_slice(secret).ok()?;
        Some(Self { mac })
    }

    /// The key in [`ARGS_HASH_KEY_ENV`] (its UTF-8 bytes), when set and not empty.
    pub fn from_env() -> Option<Self> {
        Self::new(std::env::var(ARGS_HASH_KEY_ENV).ok()?.as_bytes())
    }

    /// HMAC-SHA1 of `data` (RFC 2104).
    fn mac(&self, data: &[u8]) -> [u8; 20] {
        use hmac::Mac as _;
        let mut mac = self.mac.clone();
        mac.update(data);
        mac.finalize().into_bytes().into()
    }
}

/// The keyed `tool.args_hash` of already-canonical JSON bytes: the first 12 lowercase hex
/// digits of HMAC-SHA1(`key`, `canonical`).
pub fn keyed_args_hash_of_canonical(key: &ArgsHashKey, canonical: &[u8]) -> String {
    crate::hex::encode(&key.mac(canonical)[..6])
}

/// The keyed `tool.args_hash` of `value` ([`ArgsHashKey`]).
///
/// # Errors
///
/// As [`canonical_json`].
pub fn keyed_args_hash<T: Serialize + ?Sized>(key: &ArgsHashKey, value: &T) -> Result<String> {
    let mut canon = Canon::with_capacity();
    value.serialize(&mut canon)?;
    Ok(keyed_args_hash_of_canonical(key, &canon.out))
}

/// The key of this process: set by [`set_process_key`], else read once from
/// [`ARGS_HASH_KEY_ENV`].
fn process_key() -> &'static std::sync::RwLock<Option<ArgsHashKey>> {
    static KEY: std::sync::OnceLock<std::sync::RwLock<Option<ArgsHashKey>>> =
        std::sync::OnceLock::new();
    KEY.get_or_init(|| std::sync::RwLock::new(ArgsHashKey::from_env()))
}

/// Sets (or, with `None`, removes) the key [`span_args_hash`] uses in this process, in place of
/// the one [`ARGS_HASH_KEY_ENV`] gave: application configuration comes before the
/// environment.
pub fn set_process_key(key: Option<ArgsHashKey>) {
    let mut k = process_key()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *k = key;
}

/// The hash a span records for `value`: keyed with this process's key when it has one
/// ([`set_process_key`], [`ARGS_HASH_KEY_ENV`]), else [`args_hash`].
///
/// # Errors
///
/// As [`canonical_json`].
pub fn span_args_hash<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut canon = Canon::with_capacity();
    value.serialize(&mut canon)?;
    Ok(span_hash_of_canonical(&canon.out))
}

/// [`span_args_hash`] of a JSON text (arguments as the model sent them), canonicalized straight
/// from the text ([`canonical_json_from_text`]) without building a `serde_json::Value`.
///
/// The canonicalizer's buffers are kept on the calling thread between calls (one set a thread,
/// given back only when they hold no more than 4 KiB each, so that a huge text does not stay in
/// memory): a call allocates only the hash it returns.
///
/// # Errors
///
/// As [`canonical_json_from_text`].
pub fn span_args_hash_json(text: &str) -> Result<String> {
    with_kept_canon(|canon| {
        let mut parser = TextParser {
            src: text.as_bytes(),
            pos: 0,
            canon,
        };
        parser.parse_document()?;
        Ok(span_hash_of_canonical(&parser.canon.out))
    })
}

/// Runs `f` with the canonicalizer's buffers this thread keeps between calls, emptied after it
/// (and freed when one of them grew past [`KEPT_BUFFER_BYTES`], so that a huge value does not
/// stay in memory). Used in place: nothing is moved in or out of the thread's slot.
fn with_kept_canon<R>(f: impl FnOnce(&mut Canon) -> R) -> R {
    KEPT_CANON.with(|kept| match kept.try_borrow_mut() {
        Ok(mut canon) => {
            let result = f(&mut canon);
            canon.reset();
            result
        }
        // Only when `f` hashes again on the same thread (nothing here does): buffers of its own.
        Err(_) => f(&mut Canon::default()),
    })
}

/// The most bytes each of the canonicalizer's buffers may hold to be kept for the thread's next
/// call ([`span_args_hash_json`], [`span_args_hash_of_map`]).
const KEPT_BUFFER_BYTES: usize = 4096;

thread_local! {
    /// The canonicalizer's buffers, between two calls on this thread.
    static KEPT_CANON: std::cell::RefCell<Canon> = const {
        std::cell::RefCell::new(Canon {
            out: Vec::new(),
            entries: Vec::new(),
            arena: Vec::new(),
            depth: 0,
        })
    };
}

/// The hash of canonical JSON, keyed with this process's key when it has one.
fn span_hash_of_canonical(canonical: &[u8]) -> String {
    let key = process_key()
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match key.as_ref() {
        Some(k) => keyed_args_hash_of_canonical(k, canonical),
        None => args_hash_of_canonical(canonical),
    }
}

/// Canonical JSON of a JSON text, as Python's
/// `json.dumps(json.loads(text), sort_keys=True, default=str)`.
///
/// Integers keep every digit (up to Python's 4300-digit limit); numbers with a fraction or
/// exponent become `f64` (`1E400` is `Infinity`, `1.0e2` is `100.0`); the literals `NaN`,
/// `Infinity` and `-Infinity` are accepted; of duplicate keys the last one wins; escaped lone
/// surrogates (`"\ud800"`) are kept, as Python keeps them.
///
/// # Errors
///
/// [`ArgsHashError::InvalidJson`] (with line and column) for text `json.loads` rejects, and
/// [`ArgsHashError::TooDeep`] beyond [`MAX_DEPTH`].
pub fn canonical_json_from_text(text: &str) -> Result<String> {
    let mut canon = Canon::default();
    TextParser {
        src: text.as_bytes(),
        pos: 0,
        canon: &mut canon,
    }
    .parse_document()?;
    Ok(canon.into_string())
}

/// `tool.args_hash` of a JSON text: the hash of [`canonical_json_from_text`].
///
/// # Errors
///
/// As [`canonical_json_from_text`].
pub fn args_hash_json(text: &str) -> Result<String> {
    let mut canon = Canon::default();
    TextParser {
        src: text.as_bytes(),
        pos: 0,
        canon: &mut canon,
    }
    .parse_document()?;
    Ok(args_hash_of_canonical(&canon.out))
}

// ---------------------------------------------------------------------------------------
// Formatting primitives
// ---------------------------------------------------------------------------------------

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

fn push_u_escape(out: &mut Vec<u8>, unit: u32) {
    out.extend_from_slice(&[
        b'\\',
        b'u',
        HEX_LOWER[((unit >> 12) & 0xf) as usize],
        HEX_LOWER[((unit >> 8) & 0xf) as usize],
        HEX_LOWER[((unit >> 4) & 0xf) as usize],
        HEX_LOWER[(unit & 0xf) as usize],
    ]);
}

fn push_code_point_escaped(out: &mut Vec<u8>, cp: u32) {
    if cp >= 0x1_0000 {
        let v = cp - 0x1_0000;
        push_u_escape(out, 0xd800 | (v >> 10));
        push_u_escape(out, 0xdc00 | (v & 0x3ff));
    } else {
        push_u_escape(out, cp);
    }
}

/// Bytes of a word each set to `b`.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// The high bit of each byte of `word` that is zero, exact up to the first such byte (a borrow
/// only marks bytes above it).
const fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(splat(0x01)) & !word & splat(0x80)
}

/// The high bit of each byte of `word` that is not plain (below 0x20, 0x7f and above, `"` or
/// `\`), exact up to the first such byte.
const fn special_bytes(word: u64) -> u64 {
    let control = word.wrapping_sub(splat(0x20)) & !word & splat(0x80);
    control
        | (word & splat(0x80))
        | zero_bytes(word ^ splat(0x7f))
        | zero_bytes(word ^ splat(b'"'))
        | zero_bytes(word ^ splat(b'\\'))
}

/// How many bytes `s` starts with that are plain printable ASCII (0x20 to 0x7e, neither `"` nor
/// `\`): what Python writes as it is. Eight bytes at a time (a word's bytes tested at once), the
/// last few read into a word padded with plain bytes.
fn plain_prefix_len(s: &[u8]) -> usize {
    let mut words = s.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let special = special_bytes(u64::from_le_bytes(word));
        if special != 0 {
            return at + special.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    let tail = words.remainder();
    let mut word = [b'a'; 8];
    word[..tail.len()].copy_from_slice(tail);
    let special = special_bytes(u64::from_le_bytes(word));
    if special != 0 {
        at + special.trailing_zeros() as usize / 8
    } else {
        at + tail.len()
    }
}

/// Writes `s` as a JSON string with Python's `ensure_ascii=True` escaping.
///
/// `s` is UTF-8, or generalized UTF-8 ("WTF-8") holding lone surrogates from parsed text.
fn write_escaped_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    let mut run_start = 0;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
            i += 1;
            continue;
        }
        out.extend_from_slice(&s[run_start..i]);
        if b < 0x80 {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                _ => push_u_escape(out, u32::from(b)),
            }
            i += 1;
        } else {
            let (cp, len) = decode_wtf8(&s[i..]);
            push_code_point_escaped(out, cp);
            i += len;
        }
        run_start = i;
    }
    out.extend_from_slice(&s[run_start..]);
    out.push(b'"');
}

/// Decodes one generalized-UTF-8 sequence starting with a byte >= 0x80.
/// Malformed input (impossible from `&str` or our parser) yields U+FFFD for one byte.
fn decode_wtf8(s: &[u8]) -> (u32, usize) {
    let cont = |i: usize| -> Option<u32> {
        match s.get(i) {
            Some(&c) if c & 0xc0 == 0x80 => Some(u32::from(c & 0x3f)),
            _ => None,
        }
    };
    let b0 = u32::from(s[0]);
    let decoded = if b0 & 0xe0 == 0xc0 {
        cont(1).map(|c1| (((b0 & 0x1f) << 6) | c1, 2))
    } else if b0 & 0xf0 == 0xe0 {
        cont(1)
            .zip(cont(2))
            .map(|(c1, c2)| (((b0 & 0x0f) << 12) | (c1 << 6) | c2, 3))
    } else if b0 & 0xf8 == 0xf0 {
        match (cont(1), cont(2), cont(3)) {
            (Some(c1), Some(c2), Some(c3)) => {
                Some((((b0 & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3, 4))
            }
            _ => None,
        }
    } else {
        None
    };
    decoded.unwrap_or((0xfffd, 1))
}

/// Appends the generalized-UTF-8 encoding of `cp` (surrogates allowed).
fn push_wtf8(out: &mut Vec<u8>, cp: u32) {
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.extend_from_slice(&[0xc0 | (cp >> 6) as u8, 0x80 | (cp & 0x3f) as u8]);
    } else if cp < 0x1_0000 {
        out.extend_from_slice(&[
            0xe0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3f) as u8,
            0x80 | (cp & 0x3f) as u8,
        ]);
    } else {
        out.extend_from_slice(&[
            0xf0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3f) as u8,
            0x80 | ((cp >> 6) & 0x3f) as u8,
            0x80 | (cp & 0x3f) as u8,
        ]);
    }
}

fn write_u128(out: &mut Vec<u8>, mut v: u128) {
    let mut buf = [0u8; 40];
    let mut i = buf.len();
    if let Ok(mut small) = u64::try_from(v) {
        loop {
            i -= 1;
            buf[i] = b'0' + (small % 10) as u8;
            small /= 10;
            if small == 0 {
                break;
            }
        }
    } else {
        while v > 0 {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn write_int(out: &mut Vec<u8>, negative: bool, magnitude: u128) {
    if negative && magnitude != 0 {
        out.push(b'-');
    }
    write_u128(out, magnitude);
}

/// Writes `v` exactly as Python's `float.__repr__` (and `json.dumps`) does.
fn write_py_float(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
        return;
    }
    if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"Infinity" } else { b"-Infinity" });
        return;
    }
    if v.is_sign_negative() {
        out.push(b'-');
    }
    if v == 0.0 {
        out.extend_from_slice(b"0.0");
        return;
    }
    // Shortest round-trip digits from ryu, re-laid-out the way CPython does.
    let mut buf = ryu::Buffer::new();
    let text = buf.format_finite(v.abs()).as_bytes();
    let mut digits = [0u8; 24];
    let mut n = 0usize;
    let mut int_len: i32 = 0; // digits before '.' in ryu's mantissa (leading zeros included)
    let mut seen_dot = false;
    let mut exp: i32 = 0;
    let mut leading_zeros: i32 = 0;
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        match c {
            b'0'..=b'9' => {
                if !seen_dot {
                    int_len += 1;
                }
                if n == 0 && c == b'0' {
                    leading_zeros += 1;
                } else if n < digits.len() {
                    digits[n] = c;
                    n += 1;
                }
            }
            b'.' => seen_dot = true,
            b'e' | b'E' => {
                let mut neg = false;
                for &e in &text[i + 1..] {
                    match e {
                        b'-' => neg = true,
                        b'0'..=b'9' => exp = exp * 10 + i32::from(e - b'0'),
                        _ => {}
                    }
                }
                if neg {
                    exp = -exp;
                }
                break;
            }
            _ => {}
        }
        i += 1;
    }
    while n > 1 && digits[n - 1] == b'0' {
        n -= 1;
    }
    let digits = &digits[..n];
    // value = 0.d1d2d3... * 10^decpt
    let decpt = int_len - leading_zeros + exp;
    let nd = n as i32;
    if decpt > -4 && decpt <= 16 {
        if decpt <= 0 {
            out.extend_from_slice(b"0.");
            out.resize(out.len() + (-decpt) as usize, b'0');
            out.extend_from_slice(digits);
        } else if decpt >= nd {
            out.extend_from_slice(digits);
            out.resize(out.len() + (decpt - nd) as usize, b'0');
            out.extend_from_slice(b".0");
        } else {
            let (a, b) = digits.split_at(decpt as usize);
            out.extend_from_slice(a);
            out.push(b'.');
            out.extend_from_slice(b);
        }
    } else {
        out.extend_from_slice(&digits[..1]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        let e = decpt - 1;
        out.push(if e < 0 { b'-' } else { b'+' });
        let e = e.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        write_u128(out, u128::from(e));
    }
}

/// An `f32` as the `f64` a Python agent would hold: the shortest decimal that round-trips
/// the `f32`, read as an `f64` (so `0.1f32` becomes `0.1`, not `0.10000000149011612`).
fn f32_as_python_float(v: f32) -> f64 {
    if !v.is_finite() {
        return f64::from(v);
    }
    let mut buf = ryu::Buffer::new();
    buf.format_finite(v).parse::<f64>().unwrap_or(f64::from(v))
}

// ---------------------------------------------------------------------------------------
// Output buffer with sorted objects
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum NumKey {
    Bool(bool),
    Int { negative: bool, magnitude: u128 },
    Float(f64),
}

#[derive(Clone, Copy, Debug)]
enum SortKey {
    /// Key bytes in `Canon::arena`.
    Arena {
        start: usize,
        end: usize,
    },
    Static(&'static str),
    Num(NumKey),
    Null,
}

impl SortKey {
    fn class(&self) -> u8 {
        match self {
            Self::Arena { .. } | Self::Static(_) => 0,
            Self::Num(_) => 1,
            Self::Null => 2,
        }
    }

    fn py_type(&self) -> &'static str {
        match self {
            Self::Arena { .. } | Self::Static(_) => "str",
            Self::Num(NumKey::Bool(_)) => "bool",
            Self::Num(NumKey::Int { .. }) => "int",
            Self::Num(NumKey::Float(_)) => "float",
            Self::Null => "NoneType",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: SortKey,
    /// Range in `Canon::out` of `"key": value` (without separators).
    start: usize,
    end: usize,
}

/// Where an open object started.
#[derive(Clone, Copy, Debug)]
struct Frame {
    content_start: usize,
    entries_start: usize,
    arena_start: usize,
}

/// The canonical writer: one output buffer plus stacks shared by all nesting levels, so
/// that a whole value is written with a handful of amortised allocations.
#[derive(Default)]
struct Canon {
    out: Vec<u8>,
    entries: Vec<Entry>,
    arena: Vec<u8>,
    depth: usize,
}

fn int_cmp(an: bool, am: u128, bn: bool, bm: u128) -> Ordering {
    let an = an && am != 0;
    let bn = bn && bm != 0;
    match (an, bn) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => am.cmp(&bm),
        (true, true) => bm.cmp(&am),
    }
}

/// Exact comparison of an integer with a non-NaN float, as Python compares `int` and `float`.
fn int_float_cmp(negative: bool, magnitude: u128, f: f64) -> Ordering {
    const TWO_POW_128: f64 = 340_282_366_920_938_463_463_374_607_431_768_211_456.0;
    if f == f64::INFINITY {
        return Ordering::Less;
    }
    if f == f64::NEG_INFINITY {
        return Ordering::Greater;
    }
    let t = f.trunc();
    if t.abs() >= TWO_POW_128 {
        return if t > 0.0 {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    // Exact: `t` is integral and below 2^128 in magnitude.
    let tm = t.abs() as u128;
    let ord = int_cmp(negative, magnitude, t < 0.0, tm);
    if ord != Ordering::Equal {
        return ord;
    }
    let fract = f - t;
    if fract > 0.0 {
        Ordering::Less
    } else if fract < 0.0 {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn num_parts(k: NumKey) -> std::result::Result<(bool, u128), f64> {
    match k {
        NumKey::Bool(b) => Ok((false, u128::from(b))),
        NumKey::Int {
            negative,
            magnitude,
        } => Ok((negative, magnitude)),
        NumKey::Float(f) => Err(f),
    }
}

/// Python's numeric ordering; NaN (unordered in Python) is placed after everything.
fn num_cmp(a: NumKey, b: NumKey) -> Ordering {
    match (num_parts(a), num_parts(b)) {
        (Ok((an, am)), Ok((bn, bm))) => int_cmp(an, am, bn, bm),
        (Err(x), Err(y)) => match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        },
        (Ok((an, am)), Err(y)) => {
            if y.is_nan() {
                Ordering::Less
            } else {
                int_float_cmp(an, am, y)
            }
        }
        (Err(x), Ok((bn, bm))) => {
            if x.is_nan() {
                Ordering::Greater
            } else {
                int_float_cmp(bn, bm, x).reverse()
            }
        }
    }
}

fn key_bytes<'a>(arena: &'a [u8], k: &SortKey) -> &'a [u8] {
    match *k {
        SortKey::Arena { start, end } => &arena[start..end],
        SortKey::Static(s) => s.as_bytes(),
        _ => &[],
    }
}

/// Compares keys of one class (checked beforehand).
fn key_cmp(arena: &[u8], a: &SortKey, b: &SortKey) -> Ordering {
    match (a, b) {
        (SortKey::Num(x), SortKey::Num(y)) => num_cmp(*x, *y),
        // Generalized UTF-8 byte order is code point order, which is Python's str order.
        _ => key_bytes(arena, a).cmp(key_bytes(arena, b)),
    }
}

impl Canon {
    /// Room for typical tool arguments (a few hundred bytes of JSON, a few keys), so that
    /// writing them grows no buffer: measured in `benches/instrument.rs` (`parts/args_hash`).
    /// The arena holds keys that are not `&'static str` and is allocated when one comes: a
    /// struct's field names are static.
    fn with_capacity() -> Canon {
        Canon {
            out: Vec::with_capacity(256),
            entries: Vec::with_capacity(8),
            arena: Vec::new(),
            depth: 0,
        }
    }

    /// Empties the buffers for the next value, or frees them when one grew past
    /// [`KEPT_BUFFER_BYTES`].
    fn reset(&mut self) {
        if self.out.capacity() > KEPT_BUFFER_BYTES
            || self.arena.capacity() > KEPT_BUFFER_BYTES
            || self.entries.capacity() > KEPT_BUFFER_BYTES / std::mem::size_of::<Entry>()
        {
            *self = Canon::default();
        } else {
            self.out.clear();
            self.entries.clear();
            self.arena.clear();
            self.depth = 0;
        }
    }

    fn into_string(self) -> String {
        // The output is pure ASCII by construction.
        String::from_utf8(self.out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    fn enter(&mut self) -> Result<()> {
        if self.depth >= MAX_DEPTH {
            return Err(ArgsHashError::TooDeep { limit: MAX_DEPTH });
        }
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn begin_array(&mut self) -> Result<()> {
        self.enter()?;
        self.out.push(b'[');
        Ok(())
    }

    fn end_array(&mut self) {
        self.out.push(b']');
        self.leave();
    }

    fn begin_object(&mut self) -> Result<Frame> {
        self.enter()?;
        self.out.push(b'{');
        Ok(Frame {
            content_start: self.out.len(),
            entries_start: self.entries.len(),
            arena_start: self.arena.len(),
        })
    }

    /// Writes the separator and `"key": ` and records the entry.
    fn begin_entry(&mut self, frame: &Frame, key: SortKey) {
        if self.entries.len() > frame.entries_start {
            self.out.extend_from_slice(b", ");
        }
        let start = self.out.len();
        match key {
            SortKey::Arena { start, end } => {
                write_escaped_str(&mut self.out, &self.arena[start..end])
            }
            SortKey::Static(s) => write_escaped_str(&mut self.out, s.as_bytes()),
            SortKey::Num(n) => {
                self.out.push(b'"');
                match n {
                    NumKey::Bool(b) => {
                        self.out
                            .extend_from_slice(if b { b"true" } else { b"false" })
                    }
                    NumKey::Int {
                        negative,
                        magnitude,
                    } => write_int(&mut self.out, negative, magnitude),
                    NumKey::Float(f) => write_py_float(&mut self.out, f),
                }
                self.out.push(b'"');
            }
            SortKey::Null => self.out.extend_from_slice(b"\"null\""),
        }
        self.out.extend_from_slice(b": ");
        self.entries.push(Entry {
            key,
            start,
            end: start,
        });
    }

    /// [`begin_entry`](Self::begin_entry) for a key read from JSON text, held in
    /// `arena[start..end]`: a `plain` one (printable ASCII without `"` or `\`) is written as it
    /// is, without a second pass to escape it.
    fn begin_text_entry(&mut self, frame: &Frame, start: usize, end: usize, plain: bool) {
        let key = SortKey::Arena { start, end };
        if !plain {
            return self.begin_entry(frame, key);
        }
        if self.entries.len() > frame.entries_start {
            self.out.extend_from_slice(b", ");
        }
        let at = self.out.len();
        self.out.push(b'"');
        self.out.extend_from_slice(&self.arena[start..end]);
        self.out.push(b'"');
        self.out.push(b':');
        self.out.push(b' ');
        self.entries.push(Entry {
            key,
            start: at,
            end: at,
        });
    }

    fn end_entry(&mut self) {
        let end = self.out.len();
        if let Some(e) = self.entries.last_mut() {
            e.end = end;
        }
    }

    /// Closes an object: checks the keys are sortable, then reorders the written entries.
    /// With `last_wins`, of entries with equal keys only the last written is kept.
    ///
    /// The entries are ordered by index (a stable sort keeps equal keys in the order written),
    /// on the stack for up to [`STACK_ENTRIES`] of them, and rewritten after the object's own
    /// bytes in `out`, then moved back over them: no entry is moved while sorting and no second
    /// buffer is allocated.
    fn end_object(&mut self, frame: Frame, last_wins: bool) -> Result<()> {
        let Canon { entries, arena, .. } = self;
        let list = &entries[frame.entries_start..];
        if list.len() >= 2 {
            let class = list[0].key.class();
            if let Some(other) = list.iter().find(|e| e.key.class() != class || class == 2) {
                return Err(ArgsHashError::IncomparableKeys {
                    left: list[0].key.py_type(),
                    right: other.key.py_type(),
                });
            }
            let sorted = list
                .windows(2)
                .all(|w| key_cmp(arena, &w[0].key, &w[1].key) == Ordering::Less);
            if !sorted {
                let mut stack = [0u32; STACK_ENTRIES];
                let mut heap = Vec::new();
                let order: &mut [u32] = if list.len() <= STACK_ENTRIES {
                    &mut stack[..list.len()]
                } else {
                    heap.resize(list.len(), 0);
                    &mut heap
                };
                for (i, o) in (0u32..).zip(order.iter_mut()) {
                    *o = i;
                }
                let at = |i: u32| &list[i as usize];
                order.sort_by(|&a, &b| key_cmp(arena, &at(a).key, &at(b).key));
                self.rewrite(&frame, order, last_wins);
            }
        }
        self.close_object(&frame);
        Ok(())
    }

    /// Closes an object read from JSON text whose keys (all strings, in the arena) did not
    /// come in order: up to [`STACK_ENTRIES`] of them are ordered on the stack by insertion,
    /// comparing their bytes (code point order) straight away; more go through
    /// [`end_object`](Self::end_object). Of equal keys the last one wins, as in `json.loads`.
    fn end_text_object(&mut self, frame: Frame) -> Result<()> {
        let list = &self.entries[frame.entries_start..];
        if list.len() > STACK_ENTRIES {
            return self.end_object(frame, true);
        }
        let arena = &self.arena;
        let mut stack = [0u32; STACK_ENTRIES];
        let order = &mut stack[..list.len()];
        for (i, o) in (0u32..).zip(order.iter_mut()) {
            *o = i;
        }
        let equal = sort_by_insertion(order, |i| match list[i as usize].key {
            SortKey::Arena { start, end } => &arena[start..end],
            _ => &[],
        });
        self.rewrite(&frame, order, equal);
        self.close_object(&frame);
        Ok(())
    }

    /// Rewrites the object's entries in `order` (indices among its entries) over its content.
    /// With `last_wins`, of neighbours in `order` with equal keys only the later is kept.
    fn rewrite(&mut self, frame: &Frame, order: &[u32], last_wins: bool) {
        let Canon {
            out,
            entries,
            arena,
            ..
        } = self;
        let list = &entries[frame.entries_start..];
        let at = |i: u32| &list[i as usize];
        let (base, end) = (frame.content_start, out.len());
        let mut first = true;
        for (k, &i) in order.iter().enumerate() {
            let e = at(i);
            if last_wins {
                if let Some(&next) = order.get(k + 1) {
                    if key_cmp(arena, &e.key, &at(next).key) == Ordering::Equal {
                        continue;
                    }
                }
            }
            if !first {
                out.extend_from_slice(b", ");
            }
            first = false;
            // Always in range; clamped so a misbehaving `Serialize` impl cannot panic.
            let (from, to) = (e.start.clamp(base, end), e.end.clamp(base, end));
            out.extend_from_within(from..to.max(from));
        }
        out.copy_within(end.., base);
        out.truncate(out.len() - (end - base));
    }

    /// Closes an object whose entries are written in canonical order.
    fn close_object(&mut self, frame: &Frame) {
        self.entries.truncate(frame.entries_start);
        self.arena.truncate(frame.arena_start);
        self.out.push(b'}');
        self.leave();
    }
}

/// Entries of one object ordered on the stack; a larger object orders them in a `Vec`.
const STACK_ENTRIES: usize = 32;

/// Orders `items` by their keys' bytes (code point order for UTF-8 and WTF-8), keeping equal
/// keys in the order given: an insertion sort, for the few keys of an object (no dispatch per
/// comparison, nothing allocated). Returns whether two keys were equal (an entry can equal only
/// the one it stops behind).
fn sort_by_insertion<'k, T: Copy>(items: &mut [T], key: impl Fn(T) -> &'k [u8]) -> bool {
    let mut equal = false;
    for i in 1..items.len() {
        let item = items[i];
        let k = key(item);
        let mut j = i;
        while j > 0 {
            match key(items[j - 1]).cmp(k) {
                Ordering::Greater => {
                    items[j] = items[j - 1];
                    j -= 1;
                }
                Ordering::Equal => {
                    equal = true;
                    break;
                }
                Ordering::Less => break,
            }
        }
        items[j] = item;
    }
    equal
}

// ---------------------------------------------------------------------------------------
// serde::Serializer for values
// ---------------------------------------------------------------------------------------

impl<'a> ser::Serializer for &'a mut Canon {
    type Ok = ();
    type Error = ArgsHashError;
    type SerializeSeq = SeqWriter<'a>;
    type SerializeTuple = SeqWriter<'a>;
    type SerializeTupleStruct = SeqWriter<'a>;
    type SerializeTupleVariant = SeqWriter<'a>;
    type SerializeMap = MapWriter<'a>;
    type SerializeStruct = MapWriter<'a>;
    type SerializeStructVariant = MapWriter<'a>;

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<()> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<()> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<()> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<()> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i128(self, v: i128) -> Result<()> {
        write_int(&mut self.out, v < 0, v.unsigned_abs());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<()> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<()> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<()> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<()> {
        self.serialize_u128(u128::from(v))
    }
    fn serialize_u128(self, v: u128) -> Result<()> {
        write_u128(&mut self.out, v);
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result<()> {
        write_py_float(&mut self.out, f32_as_python_float(v));
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<()> {
        write_py_float(&mut self.out, v);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<()> {
        let mut buf = [0u8; 4];
        write_escaped_str(&mut self.out, v.encode_utf8(&mut buf).as_bytes());
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        write_escaped_str(&mut self.out, v.as_bytes());
        Ok(())
    }

    /// Bytes have no JSON counterpart in Python; written as a list of ints like `serde_json`.
    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        self.begin_array()?;
        for (i, &b) in v.iter().enumerate() {
            if i > 0 {
                self.out.extend_from_slice(b", ");
            }
            write_u128(&mut self.out, u128::from(b));
        }
        self.end_array();
        Ok(())
    }

    fn serialize_none(self) -> Result<()> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<()> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<()> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        let frame = self.begin_object()?;
        self.begin_entry(&frame, SortKey::Static(variant));
        value.serialize(&mut *self)?;
        self.end_entry();
        self.end_object(frame, false)
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<SeqWriter<'a>> {
        self.begin_array()?;
        Ok(SeqWriter {
            ser: self,
            first: true,
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqWriter<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<SeqWriter<'a>> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<SeqWriter<'a>> {
        let frame = self.begin_object()?;
        self.begin_entry(&frame, SortKey::Static(variant));
        self.begin_array()?;
        Ok(SeqWriter {
            ser: self,
            first: true,
            variant: Some(frame),
        })
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<MapWriter<'a>> {
        let frame = self.begin_object()?;
        Ok(MapWriter {
            ser: self,
            frame,
            variant: None,
        })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<MapWriter<'a>> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<MapWriter<'a>> {
        let outer = self.begin_object()?;
        self.begin_entry(&outer, SortKey::Static(variant));
        let frame = self.begin_object()?;
        Ok(MapWriter {
            ser: self,
            frame,
            variant: Some(outer),
        })
    }
}

/// Writes the elements of a sequence, tuple or tuple variant.
struct SeqWriter<'a> {
    ser: &'a mut Canon,
    first: bool,
    /// The wrapping `{"Variant": [...]}` object of a tuple variant.
    variant: Option<Frame>,
}

impl SeqWriter<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        if !self.first {
            self.ser.out.extend_from_slice(b", ");
        }
        self.first = false;
        value.serialize(&mut *self.ser)
    }

    fn finish(self) -> Result<()> {
        self.ser.end_array();
        if let Some(frame) = self.variant {
            self.ser.end_entry();
            self.ser.end_object(frame, false)?;
        }
        Ok(())
    }
}

/// The four sequence-like serializer traits, each an element then `end`, all on [`SeqWriter`].
macro_rules! seq_writer {
    ($($trait:ident :: $method:ident),+ $(,)?) => {$(
        impl ser::$trait for SeqWriter<'_> {
            type Ok = ();
            type Error = ArgsHashError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
                self.element(value)
            }
            fn end(self) -> Result<()> {
                self.finish()
            }
        }
    )+};
}

seq_writer!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

/// Writes the entries of a map, struct or struct variant, sorting them on `end`.
struct MapWriter<'a> {
    ser: &'a mut Canon,
    frame: Frame,
    /// The wrapping `{"Variant": {...}}` object of a struct variant.
    variant: Option<Frame>,
}

impl MapWriter<'_> {
    fn finish(self) -> Result<()> {
        self.ser.end_object(self.frame, false)?;
        if let Some(outer) = self.variant {
            self.ser.end_entry();
            self.ser.end_object(outer, false)?;
        }
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<()> {
        self.ser.begin_entry(&self.frame, SortKey::Static(key));
        value.serialize(&mut *self.ser)?;
        self.ser.end_entry();
        Ok(())
    }
}

impl ser::SerializeMap for MapWriter<'_> {
    type Ok = ();
    type Error = ArgsHashError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        let key = key.serialize(KeySerializer {
            arena: &mut self.ser.arena,
        })?;
        self.ser.begin_entry(&self.frame, key);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut *self.ser)?;
        self.ser.end_entry();
        Ok(())
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

/// A struct and a struct variant: named fields, each an entry of [`MapWriter`].
macro_rules! struct_writer {
    ($($trait:ident),+) => {$(
        impl ser::$trait for MapWriter<'_> {
            type Ok = ();
            type Error = ArgsHashError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<()> {
                self.field(key, value)
            }
            fn end(self) -> Result<()> {
                self.finish()
            }
        }
    )+};
}

struct_writer!(SerializeStruct, SerializeStructVariant);

/// Serializes a map key into a [`SortKey`], copying string keys into the arena.
struct KeySerializer<'a> {
    arena: &'a mut Vec<u8>,
}

impl KeySerializer<'_> {
    fn int(negative: bool, magnitude: u128) -> Result<SortKey> {
        Ok(SortKey::Num(NumKey::Int {
            negative,
            magnitude,
        }))
    }

    fn unsupported(found: &'static str) -> ArgsHashError {
        ArgsHashError::UnsupportedKey { found }
    }
}

impl ser::Serializer for KeySerializer<'_> {
    type Ok = SortKey;
    type Error = ArgsHashError;
    type SerializeSeq = Impossible<SortKey, ArgsHashError>;
    type SerializeTuple = Impossible<SortKey, ArgsHashError>;
    type SerializeTupleStruct = Impossible<SortKey, ArgsHashError>;
    type SerializeTupleVariant = Impossible<SortKey, ArgsHashError>;
    type SerializeMap = Impossible<SortKey, ArgsHashError>;
    type SerializeStruct = Impossible<SortKey, ArgsHashError>;
    type SerializeStructVariant = Impossible<SortKey, ArgsHashError>;

    fn serialize_bool(self, v: bool) -> Result<SortKey> {
        Ok(SortKey::Num(NumKey::Bool(v)))
    }
    fn serialize_i8(self, v: i8) -> Result<SortKey> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<SortKey> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<SortKey> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<SortKey> {
        self.serialize_i128(i128::from(v))
    }
    fn serialize_i128(self, v: i128) -> Result<SortKey> {
        Self::int(v < 0, v.unsigned_abs())
    }
    fn serialize_u8(self, v: u8) -> Result<SortKey> {
        Self::int(false, u128::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<SortKey> {
        Self::int(false, u128::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<SortKey> {
        Self::int(false, u128::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<SortKey> {
        Self::int(false, u128::from(v))
    }
    fn serialize_u128(self, v: u128) -> Result<SortKey> {
        Self::int(false, v)
    }
    fn serialize_f32(self, v: f32) -> Result<SortKey> {
        Ok(SortKey::Num(NumKey::Float(f32_as_python_float(v))))
    }
    fn serialize_f64(self, v: f64) -> Result<SortKey> {
        Ok(SortKey::Num(NumKey::Float(v)))
    }
    fn serialize_char(self, v: char) -> Result<SortKey> {
        let mut buf = [0u8; 4];
        self.serialize_str(v.encode_utf8(&mut buf))
    }
    fn serialize_str(self, v: &str) -> Result<SortKey> {
        let start = self.arena.len();
        self.arena.extend_from_slice(v.as_bytes());
        Ok(SortKey::Arena {
            start,
            end: self.arena.len(),
        })
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<SortKey> {
        Err(Self::unsupported("bytes"))
    }
    fn serialize_none(self) -> Result<SortKey> {
        Ok(SortKey::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<SortKey> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<SortKey> {
        Ok(SortKey::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<SortKey> {
        Ok(SortKey::Null)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<SortKey> {
        Ok(SortKey::Static(variant))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<SortKey> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<SortKey> {
        Err(Self::unsupported("dict"))
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(Self::unsupported("list"))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple> {
        Err(Self::unsupported("tuple"))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(Self::unsupported("tuple"))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(Self::unsupported("dict"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap> {
        Err(Self::unsupported("dict"))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct> {
        Err(Self::unsupported("dict"))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(Self::unsupported("dict"))
    }
}

// ---------------------------------------------------------------------------------------
// JSON text, parsed as Python's json.loads does
// ---------------------------------------------------------------------------------------

struct TextParser<'t> {
    src: &'t [u8],
    pos: usize,
    canon: &'t mut Canon,
}

/// Where a decoded string goes.
#[derive(Clone, Copy)]
enum StrDest {
    /// Escaped straight into the output.
    Out,
    /// Raw (generalized UTF-8) into the key arena.
    Arena,
}

impl TextParser<'_> {
    fn error(&self, message: impl Into<String>, at: usize) -> ArgsHashError {
        let at = at.min(self.src.len());
        let before = &self.src[..at];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        // Characters, not bytes: count non-continuation bytes.
        let column = before[line_start..]
            .iter()
            .filter(|&&b| b & 0xc0 != 0x80)
            .count()
            + 1;
        ArgsHashError::InvalidJson {
            message: message.into(),
            line,
            column,
            offset: at,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn parse_document(&mut self) -> Result<()> {
        self.skip_ws();
        self.parse_value()?;
        self.skip_ws();
        if self.pos < self.src.len() {
            return Err(self.error("Extra data", self.pos));
        }
        Ok(())
    }

    fn eat_literal(&mut self, lit: &[u8], text: &[u8]) -> bool {
        if self.src[self.pos..].starts_with(lit) {
            self.pos += lit.len();
            self.canon.out.extend_from_slice(text);
            true
        } else {
            false
        }
    }

    fn parse_value(&mut self) -> Result<()> {
        let Some(b) = self.peek() else {
            return Err(self.error("Expecting value", self.pos));
        };
        let matched = match b {
            b'{' => return self.parse_object(),
            b'[' => return self.parse_array(),
            b'"' => {
                self.pos += 1;
                return self.parse_string(StrDest::Out).map(drop);
            }
            b'-' | b'0'..=b'9' => {
                if b == b'-' && self.eat_literal(b"-Infinity", b"-Infinity") {
                    return Ok(());
                }
                return self.parse_number();
            }
            b'n' => self.eat_literal(b"null", b"null"),
            b't' => self.eat_literal(b"true", b"true"),
            b'f' => self.eat_literal(b"false", b"false"),
            b'N' => self.eat_literal(b"NaN", b"NaN"),
            b'I' => self.eat_literal(b"Infinity", b"Infinity"),
            _ => false,
        };
        if matched {
            Ok(())
        } else {
            Err(self.error("Expecting value", self.pos))
        }
    }

    fn parse_array(&mut self) -> Result<()> {
        self.pos += 1;
        self.canon.begin_array()?;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.canon.end_array();
            return Ok(());
        }
        let mut first = true;
        loop {
            if !first {
                self.canon.out.extend_from_slice(b", ");
            }
            first = false;
            self.skip_ws();
            self.parse_value()?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.canon.end_array();
                    return Ok(());
                }
                _ => return Err(self.error("Expecting ',' delimiter", self.pos)),
            }
        }
    }

    /// Parses an object. Its keys, all strings, are compared as they are read: when each is
    /// greater than the one before (the usual case: arguments written from a sorted map or a
    /// struct), the entries are in canonical order as written and are not reordered.
    fn parse_object(&mut self) -> Result<()> {
        self.pos += 1;
        let frame = self.canon.begin_object()?;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return self.canon.end_object(frame, true);
        }
        let mut previous: Option<(usize, usize)> = None;
        let mut in_order = true;
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error(
                    "Expecting property name enclosed in double quotes",
                    self.pos,
                ));
            }
            self.pos += 1;
            let start = self.canon.arena.len();
            let plain = self.parse_string(StrDest::Arena)?;
            let end = self.canon.arena.len();
            if let Some((p_start, p_end)) = previous {
                let arena = &self.canon.arena;
                in_order = in_order && arena[p_start..p_end] < arena[start..end];
            }
            previous = Some((start, end));
            self.canon.begin_text_entry(&frame, start, end, plain);
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("Expecting ':' delimiter", self.pos));
            }
            self.pos += 1;
            self.skip_ws();
            self.parse_value()?;
            self.canon.end_entry();
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    if in_order {
                        self.canon.close_object(&frame);
                        return Ok(());
                    }
                    return self.canon.end_text_object(frame);
                }
                _ => return Err(self.error("Expecting ',' delimiter", self.pos)),
            }
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.src.get(at..at + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = (v << 4) | char::from(d).to_digit(16)?;
        }
        Some(v)
    }

    /// Parses a string body (after the opening quote) into `dest`; `true` when it was plain
    /// (printable ASCII without `"` or `\`), which is its own canonical form.
    fn parse_string(&mut self, dest: StrDest) -> Result<bool> {
        // Printable ASCII without an escape up to the closing quote (most keys and values) is
        // its own canonical form: copied once, neither decoded nor escaped again.
        let rest = &self.src[self.pos..];
        let n = plain_prefix_len(rest);
        if rest.get(n) == Some(&b'"') {
            match dest {
                StrDest::Out => {
                    let out = &mut self.canon.out;
                    out.push(b'"');
                    out.extend_from_slice(&rest[..n]);
                    out.push(b'"');
                }
                StrDest::Arena => self.canon.arena.extend_from_slice(&rest[..n]),
            }
            self.pos += n + 1;
            return Ok(true);
        }
        let opening = self.pos - 1;
        // Decode into the arena (keys) or a temporary region at the arena's end (values).
        let base = self.canon.arena.len();
        let mut run = self.pos;
        loop {
            let Some(&b) = self.src.get(self.pos) else {
                return Err(self.error("Unterminated string starting at", opening));
            };
            match b {
                b'"' => {
                    self.canon.arena.extend_from_slice(&self.src[run..self.pos]);
                    self.pos += 1;
                    break;
                }
                b'\\' => {
                    self.canon.arena.extend_from_slice(&self.src[run..self.pos]);
                    let esc_at = self.pos;
                    let Some(&e) = self.src.get(self.pos + 1) else {
                        return Err(self.error("Unterminated string starting at", opening));
                    };
                    self.pos += 2;
                    let simple = match e {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0c),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(c) = simple {
                        self.canon.arena.push(c);
                    } else if e == b'u' {
                        let Some(mut cp) = self.hex4(self.pos) else {
                            return Err(self.error("Invalid \\uXXXX escape", esc_at + 1));
                        };
                        self.pos += 4;
                        if (0xd800..0xdc00).contains(&cp)
                            && self.src.get(self.pos) == Some(&b'\\')
                            && self.src.get(self.pos + 1) == Some(&b'u')
                        {
                            match self.hex4(self.pos + 2) {
                                Some(lo) if (0xdc00..0xe000).contains(&lo) => {
                                    cp = 0x1_0000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                    self.pos += 6;
                                }
                                Some(_) => {}
                                None => {
                                    return Err(self.error("Invalid \\uXXXX escape", self.pos + 1));
                                }
                            }
                        }
                        push_wtf8(&mut self.canon.arena, cp);
                    } else {
                        return Err(self.error("Invalid \\escape", esc_at));
                    }
                    run = self.pos;
                }
                0x00..=0x1f => {
                    return Err(self.error("Invalid control character at", self.pos));
                }
                _ => self.pos += 1,
            }
        }
        if let StrDest::Out = dest {
            write_escaped_str(&mut self.canon.out, &self.canon.arena[base..]);
            self.canon.arena.truncate(base);
        }
        Ok(false)
    }

    fn parse_number(&mut self) -> Result<()> {
        let start = self.pos;
        let src = self.src;
        let mut i = self.pos;
        let negative = src.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let int_start = i;
        match src.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = src.get(i) {
                    i += 1;
                }
            }
            _ => return Err(self.error("Expecting value", start)),
        }
        let int_end = i;
        let mut is_float = false;
        if src.get(i) == Some(&b'.') && matches!(src.get(i + 1), Some(b'0'..=b'9')) {
            is_float = true;
            i += 1;
            while let Some(b'0'..=b'9') = src.get(i) {
                i += 1;
            }
        }
        if let Some(b'e' | b'E') = src.get(i) {
            let mut j = i + 1;
            if let Some(b'+' | b'-') = src.get(j) {
                j += 1;
            }
            if let Some(b'0'..=b'9') = src.get(j) {
                while let Some(b'0'..=b'9') = src.get(j) {
                    j += 1;
                }
                is_float = true;
                i = j;
            }
        }
        self.pos = i;
        let out = &mut self.canon.out;
        if is_float {
            let text = std::str::from_utf8(&src[start..i]).unwrap_or("");
            match text.parse::<f64>() {
                Ok(v) => write_py_float(out, v),
                Err(_) => return Err(self.error("Invalid number", start)),
            }
        } else {
            let digits = &src[int_start..int_end];
            if digits.len() > MAX_INT_DIGITS {
                return Err(self.error(
                    format!(
                        "Exceeds the limit ({MAX_INT_DIGITS} digits) for integer string conversion: value has {} digits",
                        digits.len()
                    ),
                    start,
                ));
            }
            if negative && digits != b"0" {
                out.push(b'-');
            }
            out.extend_from_slice(digits);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 2202's HMAC-SHA1 test cases 1, 2, 6 and 7 (a key longer than the block is hashed).
    #[test]
    fn hmac_sha1_matches_rfc_2202() {
        let hex = |k: &ArgsHashKey, d: &[u8]| crate::hex::encode(&k.mac(d));
        let k = ArgsHashKey::new(&[0x0b; 20]).unwrap();
        assert_eq!(
            hex(&k, b"Hi There"),
            "b617318655057264e28bc0b6fb378c8ef146be00"
        );
        let k = ArgsHashKey::new(b"Jefe").unwrap();
        assert_eq!(
            hex(&k, b"what do ya want for nothing?"),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
        let k = ArgsHashKey::new(&[0xaa; 80]).unwrap();
        assert_eq!(
            hex(
                &k,
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "aa4ae5e15272d00e95705637ce8a3b55ed402112"
        );
        assert_eq!(
            hex(
                &k,
                b"Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data"
            ),
            "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"
        );
    }

    use std::collections::BTreeMap;

    fn float(v: f64) -> String {
        let mut out = Vec::new();
        write_py_float(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    fn text(s: &str) -> String {
        canonical_json_from_text(s).unwrap()
    }

    #[test]
    #[allow(clippy::excessive_precision)] // the literal is the point of the case
    fn float_repr_matches_python() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (-1.0, "-1.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1e-7, "1e-07"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e300, "1.5e+300"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.1 + 0.2, "0.30000000000000004"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (123456789.123456789, "123456789.12345679"),
            (1e22, "1e+22"),
            (1e21, "1e+21"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.5, "0.5"),
            (100.0, "100.0"),
            (-2.5e-5, "-2.5e-05"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for &(v, want) in cases {
            assert_eq!(float(v), want, "{v:e}");
        }
    }

    #[test]
    fn string_escapes() {
        assert_eq!(
            canonical_json("a\"\\\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}/é€😀").unwrap(),
            r#""a\"\\\n\r\t\b\f\u0000\u001f\u007f/\u00e9\u20ac\ud83d\ude00""#
        );
        assert_eq!(canonical_json("</script>").unwrap(), "\"</script>\"");
    }

    #[test]
    fn separators_and_sorting() {
        let v = serde_json::json!({"b": [1, {"d": null, "c": true}], "a": "x"});
        assert_eq!(
            canonical_json(&v).unwrap(),
            r#"{"a": "x", "b": [1, {"c": true, "d": null}]}"#
        );
        assert_eq!(canonical_json(&serde_json::json!({})).unwrap(), "{}");
        assert_eq!(canonical_json(&serde_json::json!([])).unwrap(), "[]");
    }

    #[test]
    fn code_point_key_order() {
        let mut m = std::collections::HashMap::new();
        m.insert("\u{1F600}", 1);
        m.insert("\u{FFFF}", 2);
        m.insert("a", 3);
        assert_eq!(
            canonical_json(&m).unwrap(),
            r#"{"a": 3, "\uffff": 2, "\ud83d\ude00": 1}"#
        );
    }

    #[test]
    fn numeric_keys_sort_numerically() {
        let m: BTreeMap<i32, &str> = [(10, "a"), (9, "b"), (-1, "c")].into();
        assert_eq!(
            canonical_json(&m).unwrap(),
            r#"{"-1": "c", "9": "b", "10": "a"}"#
        );
        let b: BTreeMap<bool, i32> = [(true, 1), (false, 0)].into();
        assert_eq!(canonical_json(&b).unwrap(), r#"{"false": 0, "true": 1}"#);
        let o: BTreeMap<Option<i32>, i32> = [(None, 1)].into();
        assert_eq!(canonical_json(&o).unwrap(), r#"{"null": 1}"#);
    }

    #[test]
    fn int_float_comparison_is_exact() {
        let big = NumKey::Int {
            negative: false,
            magnitude: (1u128 << 53) + 1,
        };
        let f = NumKey::Float(9007199254740992.0); // 2^53
        assert_eq!(num_cmp(big, f), Ordering::Greater);
        assert_eq!(
            num_cmp(NumKey::Bool(true), NumKey::Float(0.5)),
            Ordering::Greater
        );
        assert_eq!(
            num_cmp(
                NumKey::Int {
                    negative: true,
                    magnitude: 1
                },
                NumKey::Float(-0.5)
            ),
            Ordering::Less
        );
        assert_eq!(
            num_cmp(
                NumKey::Int {
                    negative: false,
                    magnitude: u128::MAX
                },
                NumKey::Float(1e300)
            ),
            Ordering::Less
        );
    }

    #[test]
    fn key_errors() {
        let m: BTreeMap<(i32, i32), i32> = [((1, 2), 3)].into();
        assert_eq!(
            canonical_json(&m).unwrap_err(),
            ArgsHashError::UnsupportedKey { found: "tuple" }
        );
        let o: BTreeMap<Option<i32>, i32> = [(None, 1), (Some(2), 2)].into();
        assert!(matches!(
            canonical_json(&o),
            Err(ArgsHashError::IncomparableKeys { .. })
        ));
    }

    #[test]
    fn integers_of_any_size() {
        assert_eq!(canonical_json(&u128::MAX).unwrap(), u128::MAX.to_string());
        assert_eq!(canonical_json(&i128::MIN).unwrap(), i128::MIN.to_string());
        assert_eq!(canonical_json(&0u8).unwrap(), "0");
        assert_eq!(text("-0"), "0");
        assert_eq!(
            text("[100000000000000000000000000000000000000000, -18446744073709551617]"),
            "[100000000000000000000000000000000000000000, -18446744073709551617]"
        );
        assert!(canonical_json_from_text(&"9".repeat(4300)).is_ok());
        assert!(canonical_json_from_text(&"9".repeat(4301)).is_err());
    }

    #[test]
    fn text_numbers_and_literals() {
        assert_eq!(
            text("[1E400, -1e400, 1e-400, -0.0, 1.0e2, NaN, Infinity, -Infinity]"),
            "[Infinity, -Infinity, 0.0, -0.0, 100.0, NaN, Infinity, -Infinity]"
        );
        for bad in [
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "-NaN",
            "[1,]",
            "{\"a\":1,}",
            "nul",
        ] {
            assert!(canonical_json_from_text(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn text_strings() {
        assert_eq!(
            text(r#"["\ud800", "\ud83d\ude00", "\ud83dx", "\udc00\ud800", "\/"]"#),
            r#"["\ud800", "\ud83d\ude00", "\ud83dx", "\udc00\ud800", "/"]"#
        );
        assert!(canonical_json_from_text("\"a\u{1}\"").is_err());
        assert!(canonical_json_from_text(r#""\x""#).is_err());
        assert!(canonical_json_from_text(r#""\u12""#).is_err());
    }

    #[test]
    fn text_duplicate_keys_last_wins() {
        assert_eq!(
            text(r#"{"b": 1, "a": 2, "b": 3, "a": {"y": 1, "x": 2}}"#),
            r#"{"a": {"x": 2, "y": 1}, "b": 3}"#
        );
    }

    /// Objects past the entries ordered on the stack (and duplicates among them, from text)
    /// come out sorted as from a map that sorts, at every level.
    #[test]
    fn objects_larger_than_the_stack_order_sort_like_a_sorted_map() {
        for n in [2usize, 31, 32, 33, 40, 100] {
            let keys: Vec<String> = (0..n).rev().map(|i| format!("k{i:03}")).collect();
            let entries = |plus: usize| {
                keys.iter()
                    .enumerate()
                    .map(|(i, k)| format!("\"{k}\": {}", plus + i))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            // Each key twice (the second value wins), and the object nested in another.
            let twice = format!("{{{}, {}}}", entries(0), entries(1000));
            let doc = format!("{{\"z\": {twice}, \"a\": [{twice}]}}");
            let sorted: std::collections::BTreeMap<&str, usize> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.as_str(), 1000 + i))
                .collect();
            let want_inner = sorted
                .iter()
                .map(|(k, i)| format!("\"{k}\": {i}"))
                .collect::<Vec<_>>()
                .join(", ");
            assert_eq!(
                text(&doc),
                format!("{{\"a\": [{{{want_inner}}}], \"z\": {{{want_inner}}}}}"),
                "{n} keys"
            );
            // Through Serialize: a map written in reverse order.
            let map: Vec<(String, usize)> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.clone(), i))
                .collect();
            let value = serde_json::Value::Object(
                map.iter()
                    .map(|(k, i)| (k.clone(), serde_json::json!(i)))
                    .collect(),
            );
            let sorted_direct = sorted
                .iter()
                .map(|(k, i)| format!("\"{k}\": {}", i - 1000))
                .collect::<Vec<_>>()
                .join(", ");
            assert_eq!(
                canonical_json(&value).unwrap(),
                format!("{{{sorted_direct}}}")
            );
        }
    }

    /// Keys read from text in order are written as they come, keys out of order are sorted,
    /// and both give what the same value gives through `Serialize`: plain keys, escaped ones
    /// (compared by what they decode to), non-ASCII ones, prefixes, equal neighbours, and
    /// objects nested in objects whose keys sort before or after theirs.
    #[test]
    fn text_keys_in_and_out_of_order_match_the_value() {
        let cases = [
            (r#"{"a": 1, "b": 2, "c": 3}"#, r#"{"a": 1, "b": 2, "c": 3}"#),
            (r#"{"c": 1, "b": 2, "a": 3}"#, r#"{"a": 3, "b": 2, "c": 1}"#),
            (
                r#"{"a": 1, "ab": 2, "b": 3}"#,
                r#"{"a": 1, "ab": 2, "b": 3}"#,
            ),
            (r#"{"ab": 1, "a": 2}"#, r#"{"a": 2, "ab": 1}"#),
            (r#"{"a": 1, "a": 2}"#, r#"{"a": 2}"#),
            (r#"{"a": 1, "\u0061": 2, "b": 3}"#, r#"{"a": 2, "b": 3}"#),
            (r#"{"\u0062": 1, "a": 2}"#, r#"{"a": 2, "b": 1}"#),
            (r#"{"a\"b": 1, "a": 2}"#, r#"{"a": 2, "a\"b": 1}"#),
            (r#"{"a\\b": 1, "a b": 2}"#, r#"{"a b": 2, "a\\b": 1}"#),
            (r#"{"a\nb": 1, "a": 2}"#, r#"{"a": 2, "a\nb": 1}"#),
            (r#"{"é": 1, "z": 2}"#, r#"{"z": 2, "\u00e9": 1}"#),
            (
                r#"{"z": 1, "é": 2, "😀": 3}"#,
                r#"{"z": 1, "\u00e9": 2, "\ud83d\ude00": 3}"#,
            ),
            (r#"{"~": 1, "\u007f": 2}"#, r#"{"~": 1, "\u007f": 2}"#),
            (
                r#"{"m": {"z": 1, "a": 2}, "n": {"a": {"b": 1, "c": 2}}}"#,
                r#"{"m": {"a": 2, "z": 1}, "n": {"a": {"b": 1, "c": 2}}}"#,
            ),
            (
                r#"{"b": {"a": 1, "b": 2}, "a": [{"y": 1}, {"x": 2, "w": 3}]}"#,
                r#"{"a": [{"y": 1}, {"w": 3, "x": 2}], "b": {"a": 1, "b": 2}}"#,
            ),
            ("{}", "{}"),
            (r#"{"a": {}}"#, r#"{"a": {}}"#),
        ];
        for (doc, want) in cases {
            assert_eq!(text(doc), want, "{doc}");
            let value: serde_json::Value = serde_json::from_str(doc).unwrap();
            assert_eq!(canonical_json(&value).unwrap(), want, "{doc} as a value");
            assert_eq!(args_hash_json(doc).unwrap(), args_hash(&value).unwrap());
        }
    }

    /// Objects nested to the limit read from text, with plain and escaped keys, in order and
    /// out of order, and one level past it.
    #[test]
    fn text_objects_at_and_past_the_depth_limit() {
        for key in ["a", "\\u0061"] {
            let open = format!("{{\"{key}\": ");
            let at = format!("{}1{}", open.repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
            let want = format!("{}1{}", "{\"a\": ".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
            assert_eq!(text(&at), want);
            let past = format!(
                "{}1{}",
                open.repeat(MAX_DEPTH + 1),
                "}".repeat(MAX_DEPTH + 1)
            );
            assert_eq!(
                canonical_json_from_text(&past).unwrap_err(),
                ArgsHashError::TooDeep { limit: MAX_DEPTH }
            );
        }
        let depth = MAX_DEPTH - 1;
        let inner = format!("{}1{}", "{\"b\": ".repeat(depth), "}".repeat(depth));
        let unordered = format!("{{\"z\": 0, \"a\": {inner}}}");
        assert_eq!(text(&unordered), format!("{{\"a\": {inner}, \"z\": 0}}"));
    }

    /// The plain prefix, read a word at a time, ends where a byte by byte scan ends: each byte
    /// value at each place of strings up to three words long, after plain bytes of each kind.
    #[test]
    fn plain_prefix_len_matches_a_byte_by_byte_scan() {
        let plain = |b: u8| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\';
        for len in 0..=24 {
            for at in 0..len {
                for special in 0..=255u8 {
                    for filler in [b' ', b'a', b'~', b'!', b'#', b'[', b']'] {
                        let mut s = vec![filler; len];
                        s[at] = special;
                        let want = s.iter().position(|&b| !plain(b)).unwrap_or(len);
                        assert_eq!(plain_prefix_len(&s), want, "{s:?}");
                    }
                }
            }
            let s = vec![b'x'; len];
            assert_eq!(plain_prefix_len(&s), len);
        }
        // Non-plain bytes after the first do not move it (a borrow marks only bytes above).
        for pair in [
            [0x00u8, 0x01],
            [0x1f, 0x00],
            [0x22, 0x00],
            [0x5c, 0x80],
            [0x7f, 0xff],
        ] {
            let mut s = b"abcdefghijklmnop".to_vec();
            s[5] = pair[0];
            s[6] = pair[1];
            assert_eq!(plain_prefix_len(&s), 5, "{pair:?}");
        }
    }

    /// The buffers kept between calls on a thread change no hash: after an error at any depth,
    /// after a text too large for them to be kept, and after other texts.
    #[test]
    fn kept_buffers_change_no_hash() {
        let doc = r#"{"q": "a", "n": [1, {"z": 2, "y": "\u00e9"}]}"#;
        let want = args_hash_json(doc).unwrap();
        assert_eq!(span_args_hash_json(doc).unwrap(), want);
        let deep = format!(
            "{}{}",
            "{\"a\": [".repeat(MAX_DEPTH),
            "]}".repeat(MAX_DEPTH)
        );
        let large = format!(
            r#"{{"b": "{}", "a": 1}}"#,
            "x".repeat(3 * KEPT_BUFFER_BYTES)
        );
        let bad = [r#"{"b": {"c": [1, 2"#, r#"{"a": {"b": x}}"#, deep.as_str()];
        for before in bad {
            assert!(span_args_hash_json(before).is_err(), "{before}");
            assert_eq!(span_args_hash_json(doc).unwrap(), want, "after {before}");
        }
        assert_eq!(
            span_args_hash_json(&large).unwrap(),
            args_hash_json(&large).unwrap()
        );
        assert_eq!(span_args_hash_json(doc).unwrap(), want);
        assert_eq!(
            span_args_hash_json("[]").unwrap(),
            args_hash_json("[]").unwrap()
        );
    }

    #[test]
    fn error_position() {
        match canonical_json_from_text("{\n  \"é\": x}") {
            Err(ArgsHashError::InvalidJson { line, column, .. }) => {
                assert_eq!((line, column), (2, 8));
            }
            other => panic!("{other:?}"),
        }
        assert!(canonical_json_from_text("").is_err());
        assert!(canonical_json_from_text("1 2").is_err());
        assert_eq!(text(" \t\n1\r\n"), "1");
    }

    #[test]
    fn depth_limit() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(canonical_json_from_text(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(
            canonical_json_from_text(&deep).unwrap_err(),
            ArgsHashError::TooDeep { limit: MAX_DEPTH }
        );
        let huge = "[{\"a\":".repeat(100_000);
        assert!(canonical_json_from_text(&huge).is_err());
    }

    #[test]
    fn hash_is_python_sha1_prefix() {
        // hashlib.sha1(b'{"a": 1}').hexdigest()[:12]
        let h = args_hash(&serde_json::json!({"a": 1})).unwrap();
        assert_eq!(h.len(), 12);
        assert_eq!(h, args_hash_of_canonical(br#"{"a": 1}"#));
        assert_eq!(h, args_hash_json(r#"{ "a" : 1 }"#).unwrap());
    }

    /// A `Serialize` impl that breaks the key/value protocol must not make us panic.
    struct Misbehaving;

    impl Serialize for Misbehaving {
        fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            use ser::SerializeMap;
            let mut m = s.serialize_map(None)?;
            m.serialize_key("b")?;
            m.serialize_key("a")?;
            m.serialize_value(&1)?;
            m.serialize_value(&2)?;
            m.serialize_key("c")?;
            m.end()
        }
    }

    #[test]
    fn misbehaving_serialize_does_not_panic() {
        let _ = canonical_json(&Misbehaving);
        let _ = canonical_json(&[Misbehaving, Misbehaving]);
        let _ = canonical_json(&serde_json::json!([{"x": 1}]));
    }

    #[test]
    fn nan_and_duplicate_keys() {
        struct M;
        impl Serialize for M {
            fn serialize<S: ser::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                use ser::SerializeMap;
                let mut m = s.serialize_map(None)?;
                m.serialize_entry(&f64::NAN, "n1")?;
                m.serialize_entry(&2.0, "two")?;
                m.serialize_entry(&1, "one")?;
                m.serialize_entry(&1.0, "one again")?;
                m.end()
            }
        }
        assert_eq!(
            canonical_json(&M).unwrap(),
            r#"{"1": "one", "1.0": "one again", "2.0": "two", "NaN": "n1"}"#
        );
    }

    #[test]
    fn f32_uses_shortest_digits() {
        assert_eq!(canonical_json(&0.1f32).unwrap(), "0.1");
        assert_eq!(canonical_json(&1e-7f32).unwrap(), "1e-07");
        assert_eq!(canonical_json(&f32::NAN).unwrap(), "NaN");
    }

    /// The hash a span records of arguments sent as text is the one of the same arguments as a
    /// value: the wrappers that read the model's text hash it without building the value.
    #[test]
    fn span_hash_of_text_is_the_hash_of_its_value() {
        for text in [
            r#"{"query": "ceilings", "limit": 10, "filters": ["docs", "guides"]}"#,
            r#"{"b": {"y": 1.5, "x": null}, "a": [true, false, "é\n"]}"#,
            "[]",
            "null",
        ] {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                span_args_hash_json(text).unwrap(),
                span_args_hash(&value).unwrap(),
                "{text}"
            );
        }
        assert!(span_args_hash_json("{not json").is_err());
    }
}
