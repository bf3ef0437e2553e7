//! Bounding and cleaning strings that become label values, keys or API fields.
//!
//! A client chooses `service.name` and tool names; they end up in every series key, every
//! `/metrics` line, the JSON API and the status page. [`sanitize`] cuts such a string to a byte
//! limit on a character boundary and replaces every character that would hide or reorder text
//! with `_`: controls (Unicode category Cc), format characters (Cf: bidi overrides and isolates
//! such as U+202E, zero-width characters, the BOM, tag characters) and the line and paragraph
//! separators U+2028/U+2029. It reports what it did so the caller can count it. The work is
//! one pass over at most `max` bytes of output; the rest of a long input is skipped unread.

/// What [`sanitize`] did to a value.
#[cfg_attr(not(feature = "collector"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Sanitized {
    /// The value to use.
    pub(crate) value: String,
    /// The input was longer than the limit and was cut.
    pub(crate) truncated: bool,
    /// At least one hidden character was replaced.
    pub(crate) replaced: bool,
}

/// Whether `c` is a control (Cc), a format character (Cf), or a line/paragraph separator: the
/// characters that hide, reorder or break text when shown.
pub(crate) fn is_hidden(c: char) -> bool {
    if c.is_control() {
        return true;
    }
    let u = c as u32;
    if u < 0xAD {
        return false;
    }
    // Unicode 16.0, general category Cf, plus Zl and Zp.
    matches!(
        u,
        0xAD
            | 0x600..=0x605
            | 0x61C
            | 0x6DD
            | 0x70F
            | 0x890..=0x891
            | 0x8E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x2028..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// Cuts `name` (trimmed) to at most `max` bytes on a character boundary, replacing each hidden
/// character ([`is_hidden`]) with `_`.
#[cfg_attr(not(feature = "collector"), allow(dead_code))]
pub(crate) fn sanitize(name: &str, max: usize) -> Sanitized {
    let name = name.trim();
    let mut out = Sanitized {
        value: String::with_capacity(name.len().min(max)),
        ..Sanitized::default()
    };
    for c in name.chars() {
        let c = if is_hidden(c) {
            out.replaced = true;
            '_'
        } else {
            c
        };
        if out.value.len() + c.len_utf8() > max {
            out.truncated = true;
            break;
        }
        out.value.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_replaced_and_long_values_cut() {
        let s = sanitize("a\u{202E}b\u{200B}c\u{0}d\u{2028}e\u{E0041}", 128);
        assert_eq!(s.value, "a_b_c_d_e_");
        assert!(s.replaced && !s.truncated);
        let s = sanitize("ééééé", 5);
        assert_eq!(s.value, "éé");
        assert!(s.truncated && !s.replaced);
        let s = sanitize("plain-name.v2 ünïcode 名前", 128);
        assert_eq!(s.value, "plain-name.v2 ünïcode 名前");
        assert!(!s.truncated && !s.replaced);
        assert_eq!(sanitize(&"x".repeat(1 << 16), 128).value.len(), 128);
    }

    #[test]
    fn format_characters_match_the_categories() {
        // A sample of Cf and Zl/Zp; letters, marks and spaces stay.
        for c in [
            '\u{AD}', '\u{61C}', '\u{200E}', '\u{2066}', '\u{FEFF}', '\u{2029}',
        ] {
            assert!(is_hidden(c), "{:X}", c as u32);
        }
        for c in [
            'a', ' ', '\u{301}', '\u{A0}', 'é', '\u{2027}', '\u{2030}', '\u{FFFD}',
        ] {
            assert!(!is_hidden(c), "{:X}", c as u32);
        }
    }
}
