//! The frames a segment is made of, and their reader.
//!
//! A segment is a run of frames: payload length (u32 LE), CRC-32 of sequence and payload (u32
//! LE), sequence (u64 LE), payload (the signal, one byte, then the body). A frame's head is
//! built apart from its body, so the writer writes the body from the request's own buffer.
//!
//! Reading stops at the first frame that is not whole: a short frame, a CRC mismatch, an unknown
//! signal or a sequence not above the one before ([`Torn`]) is a write that never completed, so
//! was never acknowledged; the caller cuts the segment there. A zero length ends the log cleanly
//! (the zeros after the last frame of a write past the page cache, then perhaps a reused
//! segment's old bytes). Reading borrows the segment's bytes and allocates one entry per frame;
//! it does not fail.

use crate::collector::stats::OtlpSignal;

/// Length, CRC-32 and sequence before each payload.
pub(super) const HEADER_BYTES: usize = 16;

/// The signal's byte in a payload.
fn signal_code(s: OtlpSignal) -> u8 {
    match s {
        OtlpSignal::Traces => 1,
        OtlpSignal::Logs => 2,
        OtlpSignal::Metrics => 3,
    }
}

fn signal_of(code: u8) -> Option<OtlpSignal> {
    match code {
        1 => Some(OtlpSignal::Traces),
        2 => Some(OtlpSignal::Logs),
        3 => Some(OtlpSignal::Metrics),
        _ => None,
    }
}

/// Length, CRC-32, sequence and signal byte of an entry whose body is `body`: the bytes written
/// before the body, which is written from the request's own buffer, not copied.
pub(super) fn frame_head(seq: u64, signal: OtlpSignal, body: &[u8]) -> [u8; HEADER_BYTES + 1] {
    let len = u32::try_from(body.len() + 1).unwrap_or(u32::MAX);
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&[signal_code(signal)]);
    h.update(body);
    let mut head = [0u8; HEADER_BYTES + 1];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4..8].copy_from_slice(&h.finalize().to_le_bytes());
    head[8..16].copy_from_slice(&seq.to_le_bytes());
    head[16] = signal_code(signal);
    head
}

/// Appends the frame of one entry to `out`.
#[cfg(test)]
pub(crate) fn encode_frame(out: &mut Vec<u8>, seq: u64, signal: OtlpSignal, body: &[u8]) {
    out.extend_from_slice(&frame_head(seq, signal, body));
    out.extend_from_slice(body);
}

/// One entry read back.
#[derive(Debug, PartialEq)]
pub(crate) struct Entry<'a> {
    pub(crate) seq: u64,
    pub(crate) signal: OtlpSignal,
    pub(crate) body: &'a [u8],
}

/// Why reading a segment stopped before its end.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Torn {
    /// Fewer bytes than a header, or than the header says.
    Short,
    /// The CRC-32 does not match.
    Checksum,
    /// An unknown signal byte, or a sequence not above the previous one.
    Invalid,
}

impl std::fmt::Display for Torn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Torn::Short => "short frame",
            Torn::Checksum => "CRC-32 mismatch",
            Torn::Invalid => "invalid frame",
        })
    }
}

/// The entries of a segment's bytes, in order, and where and why they stop early, if they do.
pub(crate) fn read_frames(bytes: &[u8]) -> (Vec<Entry<'_>>, Option<(usize, Torn)>) {
    let mut out: Vec<Entry<'_>> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.iter().take(4).all(|b| *b == 0) {
            // A length of zero is never written: zeros after the last frame (the rest of a
            // block written past the page cache, at least a header of them, then a reused
            // segment's old bytes), or a write that never reached the disk, so was never
            // acknowledged, nor was anything after it. The log ends here.
            return (out, None);
        }
        if rest.len() < HEADER_BYTES {
            return (out, Some((at, Torn::Short)));
        }
        let word = |i: usize| u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
        let (len, crc) = (word(0) as usize, word(4));
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&rest[8..16]);
        let seq = u64::from_le_bytes(seq);
        if len == 0 || rest.len() - HEADER_BYTES < len {
            return (out, Some((at, Torn::Short)));
        }
        let payload = &rest[HEADER_BYTES..HEADER_BYTES + len];
        let mut h = crc32fast::Hasher::new();
        h.update(&rest[8..16]);
        h.update(payload);
        if h.finalize() != crc {
            return (out, Some((at, Torn::Checksum)));
        }
        let Some(signal) = signal_of(payload[0]) else {
            return (out, Some((at, Torn::Invalid)));
        };
        if out.last().is_some_and(|e| e.seq >= seq) {
            return (out, Some((at, Torn::Invalid)));
        }
        out.push(Entry {
            seq,
            signal,
            body: &payload[1..],
        });
        at += HEADER_BYTES + len;
    }
    (out, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wal::active::BLOCK;
    use crate::collector::ingest::wal::tests::frames;

    #[test]
    fn frames_read_back_and_a_flipped_bit_stops_them() {
        let mut bytes = frames(1..=3);
        let (e, torn) = read_frames(&bytes);
        assert_eq!(e.len(), 3);
        assert_eq!((e[2].seq, e[2].body), (3, &b"body 3"[..]));
        assert_eq!(torn, None);
        let second = HEADER_BYTES + 1 + "body 1".len();
        bytes[second + HEADER_BYTES + 2] ^= 1;
        let (e, torn) = read_frames(&bytes);
        assert_eq!(e.len(), 1);
        assert_eq!(torn, Some((second, Torn::Checksum)));
    }

    /// Zeros after the last frame (the rest of a block written past the page cache) end the
    /// log cleanly, and so they do with bytes after them (a reused segment's old frames, or a
    /// write that never completed, so never acknowledged); a header cut short is still torn.
    #[test]
    fn zeros_after_the_last_frame_end_the_log() {
        let mut bytes = frames(1..=2);
        bytes.resize(BLOCK, 0);
        let (e, torn) = read_frames(&bytes);
        assert_eq!((e.len(), torn), (2, None));
        bytes.extend(frames(3..=3));
        let (e, torn) = read_frames(&bytes);
        assert_eq!((e.len(), torn), (2, None));
        let mut short = frames(1..=2);
        let end = short.len();
        short.extend([7, 0, 0]);
        assert_eq!(
            read_frames(&short),
            (read_frames(&short).0, Some((end, Torn::Short)))
        );
    }
}
