//! Lowercase hexadecimal, the one encoder and decoder of the crate (trace and span ids, digests,
//! pagination cursors).

/// `bytes` as lowercase hex digits.
pub(crate) fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// The bytes of an even number of hex digits (either case), or `None`.
pub(crate) fn decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Exactly `N` bytes from `2 * N` hex digits, or `None`. (Read by the collector only.)
#[cfg_attr(not(feature = "collector"), allow(dead_code))]
pub(crate) fn decode_array<const N: usize>(s: &str) -> Option<[u8; N]> {
    decode(s)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_hex() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(encode(&b), "0001abff");
        assert_eq!(decode("0001ABff").as_deref(), Some(&b[..]));
        assert_eq!(decode_array::<4>("0001abff"), Some(b));
        assert_eq!(decode_array::<3>("0001abff"), None);
        assert_eq!(decode("abc"), None);
        assert_eq!(decode("zz"), None);
        assert_eq!(decode("é0"), None);
    }
}
