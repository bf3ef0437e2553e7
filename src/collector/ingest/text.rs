//! Result content counted at memory speed: its code points and UTF-16 units in one pass, and
//! its UTF-8 validity, each by a SIMD kernel chosen at run time.
//!
//! A result's content is counted once, where the receiver recognises it, and the counts are
//! shared by everything that needs them: the configured attribute length limits
//! (`recognize`) and the learner of limits ([`crate::collector::ingest::learn`]). Content is
//! never decoded to `char`s: a code point starts at every byte that is not a continuation byte
//! (`0x80..=0xBF`), counted by `bytecount::num_chars` (AVX2 or SSE2); a UTF-16 unit is a code
//! point, plus one more for each 4-byte sequence (lead byte `0xF0` or above), counted in
//! byte-wide sums that the compiler vectorises. Both are exact for valid UTF-8 and
//! estimates, never panics, for invalid bytes; the one check that needs the exact count of
//! invalid content ([`lengths_checked`]) validates it with `simdutf8` and, only when it is not
//! UTF-8, counts it as decoded with replacement characters (a rare path: the receivers do not
//! refuse such content, and sizes stay byte counts).
//!
//! Cost under load: no allocation, no branch per byte; the bench `content` in
//! `benches/collector.rs` prints nanoseconds per byte of each pass on ASCII, accented Latin,
//! CJK and emoji text.

/// The other pass over every result's content: its truncation markers (SIMD, Teddy).
pub use crate::collector::ingest::recognize::content::has_marker;

/// Code points and UTF-16 code units of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lengths {
    /// Code points (`str::chars().count()` for valid UTF-8).
    pub chars: u64,
    /// UTF-16 code units (`str::encode_utf16().count()` for valid UTF-8).
    pub utf16: u64,
}

/// Bytes counted into one byte-wide sum by [`four_byte_leads`]: at most 255, so it cannot
/// overflow, and a multiple of the 64 bytes the compiler's vector loop takes a step, so no
/// byte of a run is left to a scalar loop.
const RUN: usize = 192;

/// Code points and UTF-16 units of UTF-8 bytes `s`, counted from the bytes without decoding or
/// validating them: exact for valid UTF-8, an estimate for invalid bytes.
pub fn lengths(s: &[u8]) -> Lengths {
    let chars = bytecount::num_chars(s) as u64;
    // Without a continuation byte, valid UTF-8 is ASCII: no 4-byte sequence to look for.
    if chars == s.len() as u64 {
        return Lengths {
            chars,
            utf16: chars,
        };
    }
    Lengths {
        chars,
        utf16: chars + four_byte_leads(s),
    }
}

/// Bytes of `s` at `0xF0` or above: the lead bytes of 4-byte sequences, each of which is two
/// UTF-16 units. Counted [`RUN`] bytes at a time into a byte-wide sum, a shape the compiler
/// turns into vector compares and adds (32 byte-wide lanes held in an array, the first form,
/// were left scalar: 0.7–1 ns a byte in the bench `content` at `1c1cc9a`).
fn four_byte_leads(s: &[u8]) -> u64 {
    s.chunks(RUN)
        .map(|run| u64::from(run.iter().fold(0u8, |n, &b| n + u8::from(b >= 0xF0))))
        .sum()
}

/// True when `s` is valid UTF-8 (SIMD: AVX2 or SSE4.2, chosen at run time).
pub fn is_utf8(s: &[u8]) -> bool {
    simdutf8::basic::from_utf8(s).is_ok()
}

/// The lengths of `s` as its text is read by an SDK that decoded it: [`lengths`] when `s` is
/// valid UTF-8 (`counted`, when the caller has them already), otherwise those of `s` decoded
/// with each invalid sequence replaced by U+FFFD (`String::from_utf8_lossy`).
pub fn lengths_checked(s: &[u8], counted: Option<Lengths>) -> Lengths {
    if is_utf8(s) {
        return counted.unwrap_or_else(|| lengths(s));
    }
    let text = String::from_utf8_lossy(s);
    Lengths {
        chars: text.chars().count() as u64,
        utf16: text.encode_utf16().count() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decoded(s: &str) -> Lengths {
        Lengths {
            chars: s.chars().count() as u64,
            utf16: s.encode_utf16().count() as u64,
        }
    }

    #[test]
    fn lengths_match_decoding_every_character() {
        for s in [
            "",
            "plain ascii",
            "é€😀a",
            "😀😀",
            "日本語テキスト",
            "mixed 😀 and é",
        ] {
            assert_eq!(lengths(s.as_bytes()), decoded(s), "{s:?}");
        }
    }

    /// Long enough to cross the byte-wide sums (255 bytes) and to end inside one.
    #[test]
    fn long_texts_are_counted_across_every_lane_sum() {
        for unit in ["😀", "é", "日", "a", "😀a", "🇫🇷 é—"] {
            for n in [1, 31, 32, 33, 2040, 2041, 8160, 8161, 20_000] {
                let s = unit.repeat(n);
                assert_eq!(lengths(s.as_bytes()), decoded(&s), "{unit:?} × {n}");
            }
        }
    }

    #[test]
    fn invalid_bytes_are_counted_as_decoded_with_replacements() {
        let bytes = b"ab\xF0\x9F\x98caf\xC3\xA9\xFF\xF0";
        assert!(!is_utf8(bytes));
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(lengths_checked(bytes, None), decoded(&text));
        // An estimate, never a panic, without the check.
        let guess = lengths(bytes);
        assert!(guess.chars <= bytes.len() as u64 && guess.utf16 >= guess.chars);
        // Valid text keeps the counts it was given.
        let counted = lengths("é😀".as_bytes());
        assert_eq!(lengths_checked("é😀".as_bytes(), Some(counted)), counted);
        assert_eq!(lengths_checked("é😀".as_bytes(), None), counted);
    }

    /// Characters of every UTF-8 length, and a flag and skin tone (sequences of 4-byte ones).
    const UNITS: [&str; 7] = ["é", "—", "日本", "😀", "a", " ", "🇫🇷👍🏽"];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any text, of any characters, at any length: the counts of decoding it.
        #[test]
        fn counts_are_exact_for_any_text(s in any::<String>()) {
            prop_assert_eq!(lengths(s.as_bytes()), decoded(&s));
            prop_assert!(is_utf8(s.as_bytes()));
        }

        /// Long texts of non-ASCII characters (runs of up to 300 of one, up to ~90 KB), where
        /// the vector lanes and their sums count.
        #[test]
        fn counts_are_exact_for_long_non_ascii_text(
            runs in proptest::collection::vec((0..UNITS.len(), 1..300usize), 0..80)
        ) {
            let s: String = runs.iter().map(|&(u, n)| UNITS[u].repeat(n)).collect();
            prop_assert_eq!(lengths(s.as_bytes()), decoded(&s));
        }

        /// Any bytes: validity as `std` says, and the checked counts those of the lossy decoding.
        #[test]
        fn any_bytes_are_checked_as_std_checks_them(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            prop_assert_eq!(is_utf8(&b), std::str::from_utf8(&b).is_ok());
            prop_assert_eq!(lengths_checked(&b, None), decoded(&String::from_utf8_lossy(&b)));
        }
    }
}
