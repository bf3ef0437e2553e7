//! The pipeline's record: what recognition makes of one tool span and the aggregator keeps,
//! and the batch the receivers hand over per request.
//!
//! A record is plain data, small and allocation-light on purpose: it crosses the bounded queue
//! from the receiver tasks to the aggregator once per tool span. The service name is shared
//! (`Arc<str>`, one per resource), the arguments hash and the measures are inline, and nothing
//! here holds result content.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::collector::forward::Relay;
use crate::collector::ingest::sampling::Weight;
use crate::collector::stats::{OtlpSignal, SelfStats};

/// Who emitted a tool span: declared with the emitters' entries.
pub(crate) use crate::collector::ingest::recognize::emitters::Emitter;

/// How a record's size was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SizeSource {
    /// Measured by the tool and reported in a size attribute.
    Measured,
    /// The result content the emitter recorded, counted as it is (it is what the model got).
    Derived,
    /// The result content with the tracer's own wrapping removed (JSON string escapes, a
    /// message envelope, `{"result": …}`, `[{"text": …}]`): see [`unwrap_content`](crate::collector::ingest::recognize::unwrap_content).
    Unwrapped,
    /// As [`SizeSource::Unwrapped`], but the result inside the envelope is itself JSON and is
    /// measured re-serialised compactly: close to, not exactly, the text the model got.
    UnwrappedApproximate,
    /// Reported by a coding agent in its own size attribute, in the agent's unit (UTF-16 code
    /// units for Claude Code and Gemini CLI: equal to bytes for ASCII text; bytes of the output
    /// before the agent's own cut for Codex). See `docs/agents.md`.
    Reported,
}

impl SizeSource {}

/// Why a result's size is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unknown {
    /// No content and no size attribute (content capture off, or attribute dropped).
    Missing,
    /// A placeholder such as `__REDACTED__`.
    Placeholder,
}

/// A result size, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// A size in bytes and where it came from.
    Known {
        /// UTF-8 bytes.
        bytes: u64,
        /// Measured or derived.
        source: SizeSource,
    },
    /// No usable size.
    Unknown(Unknown),
    /// The call failed; a failed call has no result.
    Failed,
}

impl Size {
    /// The bytes of a known size.
    pub(crate) fn bytes(&self) -> Option<u64> {
        match self {
            Size::Known { bytes, .. } => Some(*bytes),
            _ => None,
        }
    }
}

/// `service.name` used when a resource has none.
pub(crate) const UNKNOWN_SERVICE: &str = "unknown_service";

/// Service and tool name of the series that takes the records past the cardinality cap.
pub(crate) const OVERFLOW: &str = "__overflow__";

/// An arguments hash held inline (no allocation per span): up to 12 bytes of UTF-8, normally
/// 12 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ArgsHash {
    len: u8,
    bytes: [u8; 12],
}

impl ArgsHash {
    /// No bytes.
    pub(crate) const EMPTY: Self = Self {
        len: 0,
        bytes: [0; 12],
    };

    /// The first 12 bytes of `s`, cut on a character boundary.
    pub(crate) fn new(s: &str) -> Self {
        let mut end = s.len().min(12);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let mut bytes = [0u8; 12];
        bytes[..end].copy_from_slice(&s.as_bytes()[..end]);
        Self {
            len: end as u8,
            bytes,
        }
    }

    /// A client-supplied hash: accepted only when its first 12 bytes are ASCII hex digits
    /// (lowercased; anything after them dropped), else `None`. Never copies more than 12 bytes,
    /// whatever the length of the value.
    ///
    /// Every record of a toolsize-contract span takes this path: the 12 bytes are checked and
    /// lowercased together, without a branch per byte (`| 0x20` lowercases `A`–`F` and leaves
    /// digits as they are; a digit is checked on the byte as sent, so `0x10`–`0x19`, which
    /// `| 0x20` would turn into digits, are refused).
    pub(crate) fn from_hex(s: &[u8]) -> Option<Self> {
        let head: [u8; 12] = s.get(..12)?.try_into().ok()?;
        let bytes = head.map(|c| c | 0x20);
        let hex = head.iter().zip(&bytes).fold(true, |ok, (&c, &l)| {
            ok & ((c.wrapping_sub(b'0') < 10) | (l.wrapping_sub(b'a') < 6))
        });
        hex.then_some(Self { len: 12, bytes })
    }

    /// The hash as text.
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }

    /// One byte that depends on every byte of the hash (the top byte of a multiplicative mix of
    /// its 12 bytes): equal hashes have equal tags, so a search compares tags first and whole
    /// hashes only where the tags match. Not seeded: a client that sends hashes sharing one tag
    /// makes such a search compare every hash, as a plain scan would.
    pub(crate) fn tag(&self) -> u8 {
        let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11] = self.bytes;
        let low = u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]);
        let high = u32::from_le_bytes([b8, b9, b10, b11]);
        ((low ^ u64::from(high)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
    }
}

impl std::fmt::Debug for ArgsHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for ArgsHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The measures a span carries exactly: the library's one measures type, so recognition, the
/// layer verdicts and the span contract cannot drift apart. In a record, `bytes` is 0 (the
/// record's [`Size`] holds the size; join them with [`Measurement::with_bytes`]), `items` is
/// `None`, and the other measures ([`MEASURE_KEYS`](crate::collector::ingest::recognize::MEASURE_KEYS)) are read
/// only for measured sizes; an absent one is estimated from bytes by the layer verdict. Keeping
/// the two unused fields costs 24 bytes per record (see [`Measurement`] for the size).
pub(crate) use crate::measure::Measurement;

/// What the daemon keeps of one tool span.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
    /// `service.name` of the resource.
    pub service: Arc<str>,
    /// Sanitised tool name (shared by the records of one request that name the same tool).
    pub tool: Arc<str>,
    /// The emitter that produced the span.
    pub(crate) emitter: Emitter,
    /// Result size.
    pub(crate) size: Size,
    /// The tool reported it cut the result (`tool.result.truncated`).
    pub(crate) truncated: bool,
    /// The content shows a cut made before the daemon saw it: the size is a lower bound.
    pub(crate) truncated_upstream: bool,
    /// The call failed.
    pub error: bool,
    /// Latency in microseconds.
    pub(crate) latency_us: u64,
    /// Trace id.
    pub(crate) trace_id: [u8; 16],
    /// Span id.
    pub(crate) span_id: [u8; 8],
    /// 12 hex digits: `tool.args_hash`, or the canonical hash of the recorded arguments.
    pub(crate) args_hash: Option<ArgsHash>,
    /// Exact measures other than bytes the span carries (measured sizes only).
    pub(crate) measures: Measurement,
    /// The attribute value length limit (characters or UTF-16 units) the recorded content
    /// ended at, configured or learned from the data ([`crate::collector::ingest::learn`]): set with
    /// `truncated_upstream`.
    pub(crate) upstream_limit: Option<u64>,
    /// Results of the same service counted as whole when they arrived, that the limit learned
    /// from this one shows were cut: the aggregator flags them now.
    pub(crate) earlier_cuts: Vec<EarlierCut>,
    /// What the aggregator learns attribute length limits from: the recorded content's lengths
    /// and ending, when it was sized from content and no configured limit cut it.
    pub(crate) sample: Option<Sample>,
    /// What the emitter revealed of a cut it made itself (a coding agent's own limit).
    pub(crate) upstream: Upstream,
    /// The call this record is one signal of, when the emitter sends a call more than once
    /// (span, span event, log): the aggregator joins them into one record.
    pub(crate) join: Option<Join>,
    /// How many calls it stands for: its adjusted count when its tracer sampled it
    /// ([`crate::collector::ingest::sampling`]).
    pub(crate) weight: Weight,
}

impl ToolRecord {
    /// A record of nothing, left in a batch in the place of a record that moved on, named
    /// `empty` (an empty name made once for the batch: shared, not counted from several
    /// threads as the records' own names are).
    pub(crate) fn vacant(empty: &Arc<str>) -> Self {
        Self {
            service: Arc::clone(empty),
            tool: Arc::clone(empty),
            emitter: Emitter::Toolsize,
            size: Size::Unknown(Unknown::Missing),
            truncated: false,
            truncated_upstream: false,
            error: false,
            latency_us: 0,
            trace_id: [0; 16],
            span_id: [0; 8],
            args_hash: None,
            measures: Measurement::default(),
            upstream_limit: None,
            earlier_cuts: Vec::new(),
            sample: None,
            upstream: Upstream::default(),
            join: None,
            weight: Weight::ONE,
        }
    }
}

/// What the learner of attribute length limits ([`crate::collector::ingest::learn`]) needs of
/// one result's recorded content, taken by the receiver that read it
/// ([`crate::collector::ingest::learn::sample`]): its lengths in both units an SDK may count a limit in, a fingerprint of its ending, its
/// bytes, and how its size is counted when whole. The content itself is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Code points.
    pub(crate) chars: u64,
    /// UTF-16 code units.
    pub(crate) utf16: u64,
    /// A hash of its ending.
    pub(crate) tail: u64,
    /// Bytes of the recorded content: the result's size once a limit shows it was cut.
    pub(crate) bytes: u64,
    /// How its size is counted when whole; `None` when it is flagged cut for another reason (a
    /// marker, a cut JSON document, `logfire.truncated`): then it is no earlier cut to correct.
    pub(crate) whole: Option<SizeSource>,
}

/// A cut the emitter made itself and says so: the layer (a catalog id) and, when known, the
/// size before the cut, in the record's size unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Upstream {
    /// The catalog layer that cut the result.
    pub(crate) layer: Option<&'static str>,
    /// The result's size before the cut.
    pub(crate) original: Option<u64>,
    /// The layer that cut the result if `original` turns out larger than what the model got
    /// (a hook reports the size before the agent's cuts, the telemetry what the model got).
    pub(crate) when_over: Option<&'static str>,
    /// The limit the agent says it applied to this call (Gemini CLI's and Qwen Code's
    /// `threshold`): observed, it wins over the catalog's value.
    pub(crate) limit: Option<u64>,
}

/// Which call a record belongs to, and what it can tell about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Join {
    /// A hash of the service and the emitter's call identity (a call id, or what the emitter
    /// offers instead).
    pub(crate) key: u64,
    /// What this signal is for the call.
    pub(crate) role: Role,
    /// A second key a part of the call may arrive under when it does not carry the call's id
    /// (Qwen Code's truncation notice: its trace, tool and the length it cut to).
    pub(crate) alt: Option<u64>,
}

/// What one signal is for a call that arrives as several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// The signal that carries the size: it decides the record.
    Primary,
    /// A signal that counts the call when the primary never comes (its exporter off).
    Secondary,
    /// A part of the call (a child span, a truncation notice, a hook's report): never counted
    /// on its own; adds what it knows (failure, the agent's cut) to the call's record.
    Part,
}

/// A result counted as whole that a learned limit shows was cut: which call, and how its size
/// was counted then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EarlierCut {
    /// Its (sanitised) tool name.
    pub(crate) tool: Box<str>,
    /// Its span id.
    pub(crate) span_id: [u8; 8],
    /// How its size was counted.
    pub(crate) source: SizeSource,
    /// When it was seen, Unix milliseconds.
    pub(crate) at_ms: u64,
}

/// A batch of records from one OTLP request, acknowledged once queued.
///
/// It counts its own loss: a batch dropped before the aggregator took its records (the
/// aggregator stopped with it in the queue) adds them to the dropped records of its signal
/// (`toolsize_spans_dropped_total`, `toolsize_log_records_dropped_total`), so every loss after
/// the acknowledgement is counted once, where it happens.
///
/// When the daemon forwards, the batch also carries its request to the upstreams ([`Relay`]),
/// offered when the aggregator takes the records, or when the batch is dropped unread: an
/// accepted request is offered either way, a refused one never.
#[derive(Debug)]
pub struct Batch {
    records: Vec<ToolRecord>,
    signal: OtlpSignal,
    stats: Arc<SelfStats>,
    relay: Option<Relay>,
    /// Its sequence in the write-ahead log, when it went through one.
    seq: Option<u64>,
    /// What the request tells of its sessions' context (the ledger's).
    context: crate::collector::ingest::context::ContextEvents,
}

impl Batch {
    /// The records of one request of `signal`; their loss is counted in `stats`; `relay`, when
    /// given, is offered to the upstreams once the batch is taken or dropped.
    pub(crate) fn new(
        records: Vec<ToolRecord>,
        signal: OtlpSignal,
        stats: Arc<SelfStats>,
        relay: Option<Relay>,
    ) -> Self {
        Self {
            records,
            signal,
            stats,
            relay,
            seq: None,
            context: Default::default(),
        }
    }

    /// The batch with the request's context events.
    #[must_use]
    pub(crate) fn with_context(
        mut self,
        context: crate::collector::ingest::context::ContextEvents,
    ) -> Self {
        self.context = context;
        self
    }

    /// The context events, taken by the aggregator before the records.
    pub(crate) fn take_context(&mut self) -> crate::collector::ingest::context::ContextEvents {
        std::mem::take(&mut self.context)
    }

    /// The records, still the batch's (the ledger reads them in place).
    pub(crate) fn records(&self) -> &[ToolRecord] {
        &self.records
    }

    /// The batch, as entry `seq` of the write-ahead log.
    #[must_use]
    pub(crate) fn with_seq(mut self, seq: u64) -> Self {
        self.seq = Some(seq);
        self
    }

    /// Its sequence in the write-ahead log, if it went through one.
    pub(crate) fn seq(&self) -> Option<u64> {
        self.seq
    }

    /// The records, taken by the aggregator: from here on they are its to count. The request
    /// is offered to the upstreams first, so it is on its way while the records are counted.
    pub(crate) fn take(mut self) -> Vec<ToolRecord> {
        self.offer();
        std::mem::take(&mut self.records)
    }

    /// Offers the request to the upstreams now (the aggregator took the batch and holds it
    /// before counting its records); once only.
    pub(crate) fn offer(&mut self) {
        if let Some(r) = self.relay.take() {
            r.send();
        }
    }

    /// The batch was never queued (its request was refused and counted as such, and is not
    /// forwarded).
    pub(crate) fn refused(mut self) {
        self.records.clear();
        self.relay = None;
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if !self.records.is_empty() {
            self.stats.dropped(self.signal, self.records.len() as u64);
        }
        if let Some(r) = self.relay.take() {
            r.send();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::alerts::rules::testing::rec;
    use crate::collector::forward::Forwarder;

    /// The branch-free check accepts and lowercases exactly what a byte-by-byte one does:
    /// every byte value at every place, and lengths around 12.
    #[test]
    fn a_supplied_hash_is_checked_as_hex_byte_by_byte_would() {
        let reference = |s: &[u8]| -> Option<Vec<u8>> {
            let head = s.get(..12)?;
            head.iter()
                .all(u8::is_ascii_hexdigit)
                .then(|| head.to_ascii_lowercase())
        };
        let got = |s: &[u8]| ArgsHash::from_hex(s).map(|h| h.as_str().as_bytes().to_vec());
        let base = *b"0123456789aBcDeF";
        for place in 0..12 {
            for b in 0..=255u8 {
                let mut s = base;
                s[place] = b;
                assert_eq!(got(&s), reference(&s), "byte {b:#04x} at {place}");
            }
        }
        for n in 0..16 {
            assert_eq!(got(&base[..n]), reference(&base[..n]), "{n} bytes");
        }
        assert_eq!(got(b"ABCDEF012345").as_deref(), Some(&b"abcdef012345"[..]));
    }

    /// Tags spread hashes that differ in a few bytes only (the load generator's 4,099, 12 hex
    /// digits with nine leading zeros) and hashes of random digits over all 256 values, none
    /// taking more than twice its share, so a search by tag rarely compares a whole hash in vain.
    #[test]
    fn tags_spread_hashes_over_every_value() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let sets: [Vec<ArgsHash>; 2] = [
            (0..4099u64)
                .map(|n| ArgsHash::new(&format!("{n:012x}")))
                .collect(),
            (0..4099)
                .map(|_| ArgsHash::new(&format!("{:012x}", next() >> 16)))
                .collect(),
        ];
        for hashes in sets {
            let mut per_tag = [0usize; 256];
            for h in &hashes {
                assert_eq!(h.tag(), ArgsHash::new(h.as_str()).tag());
                per_tag[usize::from(h.tag())] += 1;
            }
            let share = hashes.len() / 256;
            assert!(
                per_tag.iter().all(|&n| n > 0 && n <= 2 * share),
                "{per_tag:?}"
            );
        }
    }

    fn batch(relay: Relay, stats: &Arc<SelfStats>) -> Batch {
        Batch::new(
            vec![rec(10), rec(20)],
            OtlpSignal::Traces,
            stats.clone(),
            Some(relay),
        )
    }

    /// A forwarded request travels with its records: offered once when the aggregator takes
    /// them, once when the batch is lost unread (it was accepted), never when it was refused.
    #[test]
    fn a_batch_offers_its_request_once_unless_refused() {
        let (fwd, mut queue) = Forwarder::unstarted();
        let stats = Arc::new(SelfStats::default());
        let body = prost::bytes::Bytes::from_static(b"request");

        let b = batch(fwd.relay(OtlpSignal::Traces, &body), &stats);
        assert_eq!(
            queue.take(),
            0,
            "nothing offered before the records are taken"
        );
        assert_eq!(b.take().len(), 2);
        assert_eq!(queue.take(), 1);

        batch(fwd.relay(OtlpSignal::Traces, &body), &stats).refused();
        assert_eq!(queue.take(), 0);
        assert_eq!(stats.view().spans_dropped, 0);

        drop(batch(fwd.relay(OtlpSignal::Traces, &body), &stats));
        assert_eq!(queue.take(), 1);
        assert_eq!(stats.view().spans_dropped, 2);
    }
}
