//! The results a series lists: the largest recent ones ([`Largest`], shown as [`LargestView`])
//! and the recent ones over a ceiling ([`OverRecent`], shown as [`OverCeiling`]), each named by
//! its trace, span and arguments hash ([`ResultId`], shown as [`ResultRef`]). Kept per series as
//! plain numbers and ids, no hex made per record; the API's and the snapshot's forms are built
//! when a reader asks.

use serde::{Deserialize, Serialize};

use crate::collector::ingest::recognize::{ArgsHash, ToolRecord};
use crate::layers::Stack;

/// Which result a listed one is: its trace and span, its arguments' hash, when the daemon
/// received it; as the API shows it (hex), flattened into its holder's JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ResultRef {
    /// Trace id, hex.
    pub(crate) trace_id: String,
    /// Span id, hex.
    pub(crate) span_id: String,
    /// Arguments hash, when known.
    pub(crate) args_hash: Option<String>,
    /// When the daemon received it, Unix seconds.
    pub(crate) at_unix: u64,
}

/// [`ResultRef`] as a series keeps it: plain numbers and ids, nothing allocated per record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResultId {
    /// Trace id.
    pub(crate) trace_id: [u8; 16],
    /// Span id.
    pub(crate) span_id: [u8; 8],
    /// Arguments hash, when known.
    pub(crate) args_hash: Option<ArgsHash>,
    /// When the daemon received it, Unix seconds.
    pub(crate) at_unix: u64,
}

impl ResultId {
    /// Record `r`, received at `now` (Unix seconds).
    pub(crate) fn of(r: &ToolRecord, now: u64) -> Self {
        Self {
            trace_id: r.trace_id,
            span_id: r.span_id,
            args_hash: r.args_hash,
            at_unix: now,
        }
    }

    /// In hex, as the API shows it.
    pub(crate) fn hex(&self) -> ResultRef {
        ResultRef {
            trace_id: crate::hex::encode(&self.trace_id),
            span_id: crate::hex::encode(&self.span_id),
            args_hash: self.args_hash.map(|h| h.to_string()),
            at_unix: self.at_unix,
        }
    }

    /// Back from hex: `None` when the ids are not hex of the right length.
    pub(crate) fn from_hex(r: &ResultRef) -> Option<Self> {
        Some(Self {
            trace_id: crate::hex::decode_array(&r.trace_id)?,
            span_id: crate::hex::decode_array(&r.span_id)?,
            args_hash: r.args_hash.as_deref().map(ArgsHash::new),
            at_unix: r.at_unix,
        })
    }
}

/// One result among the largest recent ones, as kept per series: its ids in binary, so an
/// insertion (often evicted soon after) formats no hex. [`Largest::view`] gives the API's form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Largest {
    /// Bytes.
    pub(crate) bytes: u64,
    /// Which result.
    pub(crate) result: ResultId,
    /// The content showed an upstream cut: `bytes` is a lower bound, unless the emitter told
    /// the size before its cut (`original`).
    pub(crate) truncated_upstream: bool,
    /// The layer that cut it, when the emitter said (a coding agent's own limit).
    pub(crate) cut_by: Option<String>,
    /// The size before that cut, when the emitter said.
    pub(crate) original: Option<u64>,
}

impl Largest {
    /// The API's form: the ids in hex.
    pub(crate) fn view(&self) -> LargestView {
        LargestView {
            bytes: self.bytes,
            result: self.result.hex(),
            truncated_upstream: self.truncated_upstream,
            cut_by: self.cut_by.clone(),
            original: self.original,
        }
    }
}

/// One result among the largest recent ones, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LargestView {
    /// Bytes.
    pub(crate) bytes: u64,
    /// Which result.
    #[serde(flatten)]
    pub(crate) result: ResultRef,
    /// The content showed an upstream cut: `bytes` is a lower bound, unless the emitter told
    /// the size before its cut (`original`).
    pub(crate) truncated_upstream: bool,
    /// The layer that cut it, when the emitter said (a coding agent's own limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cut_by: Option<String>,
    /// The size before that cut, when the emitter said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) original: Option<u64>,
}

/// One recent result over the ceiling of its weakest cutting layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OverCeiling {
    /// Result bytes.
    pub(crate) bytes: u64,
    /// The weakest layer that cuts it.
    pub(crate) layer: String,
    /// That layer's effective limit, in `unit`.
    pub(crate) limit: u64,
    /// The layer's unit.
    pub(crate) unit: String,
    /// The result's size in `unit`.
    pub(crate) value: u64,
    /// Whether `value` was estimated from bytes.
    pub(crate) estimated: bool,
    /// Which result.
    #[serde(flatten)]
    pub(crate) result: ResultRef,
}

/// One recent result over the ceiling of its weakest cutting layer, as kept per series: plain
/// numbers and ids, nothing allocated per record. [`OverRecent::view`] gives the API's form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OverRecent {
    /// Result bytes.
    pub(crate) bytes: u64,
    /// Index of the weakest cutting layer in the stack's layers.
    pub(crate) layer: u16,
    /// That layer's effective limit, in its unit.
    pub(crate) limit: u64,
    /// The result's size in that unit.
    pub(crate) value: u64,
    /// Whether `value` was estimated from bytes.
    pub(crate) estimated: bool,
    /// Which result.
    pub(crate) result: ResultId,
}

impl OverRecent {
    /// The API's form, with the layer's id and unit from `stack` (`None` if the stack has no
    /// such layer).
    pub(crate) fn view(&self, stack: &Stack) -> Option<OverCeiling> {
        let l = stack.layers().get(usize::from(self.layer))?;
        Some(OverCeiling {
            bytes: self.bytes,
            layer: l.id().to_string(),
            limit: self.limit,
            unit: l.layer.unit.as_str().to_string(),
            value: self.value,
            estimated: self.estimated,
            result: self.result.hex(),
        })
    }
}
