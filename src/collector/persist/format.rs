//! The snapshot file's own types: what is on disk, in the current format ([`VERSION`]).
//!
//! They are plain data, declared here and nowhere else: neither the aggregator's state types nor
//! the API's views are serialised into the file, so a change to either cannot change the format
//! by accident (it fails to compile in `snapshot.rs`, which converts both ways). Changing a type
//! here changes the format: bump [`VERSION`], freeze the types as they were in
//! [`super::migrate`] and write the migration from them, with a fixture written by the previous
//! build in `tests/data/snapshots/`.
//!
//! Version history:
//! - 1 (until 0.1.0's snapshots of November 2026): the state's own types serialised, the
//!   counters flattened into each statistics object, optional `size_bounds` and `alerts`.
//! - 2: these types; counters nested; the size bucket layout always written; a recent
//!   over-ceiling result names its layer by id only (its unit is the stack's); the call
//!   calls weighted by sampling ([`Counts::calls_milli`]), the over-ceiling counts per layer
//!   too.
//! - 3: the types of version 2 inside an envelope that carries the CRC-32 of their bytes
//!   ([`encode`]): `{"version":3,"crc32":"<8 hex>","snapshot":{…}}`, still one JSON document.
//!   A file whose body does not match its checksum is refused at restore
//!   ([`super::migrate::read`]).
//! - 4: version 3 with the context ledger's per-tool totals and counts ([`Context`]), written
//!   when it holds any; a version 3 body is a version 4 body without them.

use std::collections::BTreeMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

/// The format version this build writes; it reads this one and every earlier one.
pub(crate) const VERSION: u32 = 4;

/// The file's bytes: `snapshot` serialised, inside the envelope that carries its CRC-32.
pub(crate) fn encode(snapshot: &Snapshot) -> Result<Vec<u8>, serde_json::Error> {
    let body = serde_json::to_vec(snapshot)?;
    let crc = crc32fast::hash(&body);
    let mut out = Vec::with_capacity(body.len() + 64);
    write!(
        out,
        "{{\"version\":{VERSION},\"crc32\":\"{crc:08x}\",\"snapshot\":"
    )
    .map_err(serde_json::Error::io)?;
    out.extend_from_slice(&body);
    out.push(b'}');
    Ok(out)
}

/// One snapshot file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// [`VERSION`].
    pub(crate) version: u32,
    /// When it was written, Unix seconds.
    pub(crate) written_unix: u64,
    /// When the state started, Unix seconds.
    pub(crate) started_unix: u64,
    /// Records routed to the overflow series.
    pub(crate) overflow_records: u64,
    /// Upper bounds of the size buckets the series' `size_buckets` count by.
    pub(crate) size_bounds: Vec<u64>,
    /// Every series.
    pub(crate) series: Vec<Series>,
    /// The alerts firing when it was written.
    pub(crate) alerts: Vec<Alert>,
    /// With the write-ahead log on: the highest sequence the state had ingested when captured
    /// (every entry at or below it is in these numbers). Absent otherwise, and in files written
    /// before the log existed (read as absent: the log is replayed whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) wal_seq: Option<u64>,
    /// The context ledger's totals (version 4; absent when it holds nothing, and in earlier
    /// versions: read as empty).
    #[serde(default, skip_serializing_if = "Context::is_empty")]
    pub(crate) context: Context,
}

/// The context ledger's totals, as the snapshot keeps them: the ledger's own disk form
/// ([`crate::collector::state::context::LedgerDisk`]), so a total added there is kept.
pub(crate) use crate::collector::state::context::{LedgerDisk as Context, ToolDisk as ToolContext};

/// One (service, tool) series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Series {
    /// `service.name`.
    pub(crate) service: String,
    /// Tool name.
    pub(crate) tool: String,
    /// Since the state started.
    pub(crate) total: Stats,
    /// Per configured window: its slots.
    pub(crate) windows: Vec<Ring>,
    /// Non-cumulative counts per size bound, +Inf last.
    pub(crate) size_buckets: Vec<u64>,
    /// Non-cumulative counts per latency bound, +Inf last.
    pub(crate) latency_buckets: Vec<u64>,
    /// Sum of known result bytes.
    pub(crate) size_sum: u64,
    /// Sum of latencies, microseconds.
    pub(crate) latency_sum_us: u64,
    /// Largest recent results, largest first.
    pub(crate) largest: Vec<Largest>,
    /// Arguments hashes (top-k).
    pub(crate) args: Vec<Args>,
    /// Over-ceiling results since start, per weakest layer.
    pub(crate) over_ceiling: Vec<LayerCount>,
    /// The most recent over-ceiling results, oldest first.
    pub(crate) over_recent: Vec<Over>,
    /// Closed slots of the shortest window, oldest first.
    pub(crate) history: Vec<Point>,
}

/// Counters and histograms over one period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Stats {
    /// The counters.
    pub(crate) counts: Counts,
    /// Result bytes.
    pub(crate) size: Hist,
    /// Latency, microseconds.
    pub(crate) latency: Hist,
}

/// The counters of one period: the live struct, declared once in
/// [`crate::collector::state::counts`], every field required.
pub(crate) use crate::collector::state::Counts;

/// An HDR histogram: its non-empty buckets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hist {
    /// The highest value it held when written.
    pub(crate) ceiling: u64,
    /// Values clamped to the ceiling.
    pub(crate) clamped: u64,
    /// The largest value seen, exact.
    pub(crate) max_seen: u64,
    /// (value, count) of each non-empty bucket.
    pub(crate) buckets: Vec<(u64, u64)>,
}

/// The slots of one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ring {
    /// Slot length, seconds (a window whose length changed is not restored).
    pub(crate) slot_secs: u64,
    /// (slot index, statistics).
    pub(crate) slots: Vec<(u64, Stats)>,
}

/// Which result a listed one is, its fields flattened into its holder's object: the live
/// reference (`state::series::ResultRef`), every field required but the arguments hash.
pub(crate) use crate::collector::state::ResultRef;

/// One of the largest recent results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Largest {
    /// Bytes.
    pub(crate) bytes: u64,
    /// Which result.
    #[serde(flatten)]
    pub(crate) result: ResultRef,
    /// It showed an upstream cut.
    pub(crate) truncated_upstream: bool,
    /// The layer that cut it, when the emitter said.
    pub(crate) cut_by: Option<String>,
    /// Its size before that cut, when the emitter said.
    pub(crate) original: Option<u64>,
}

/// One arguments hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Args {
    /// The hash.
    pub(crate) hash: String,
    /// Calls (upper bound).
    pub(crate) count: u64,
    /// Largest result with it.
    pub(crate) max_bytes: u64,
}

/// Over-ceiling results of one layer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LayerCount {
    /// Layer id.
    pub(crate) layer: String,
    /// Results, weighted as the calls: thousandths of a call.
    pub(crate) count_milli: u64,
}

/// One recent over-ceiling result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Over {
    /// Bytes.
    pub(crate) bytes: u64,
    /// The weakest layer that cut it (by id: the stack may change between runs).
    pub(crate) layer: String,
    /// That layer's effective limit then, in its unit.
    pub(crate) limit: u64,
    /// The result's size in the layer's unit.
    pub(crate) value: u64,
    /// Whether `value` was estimated from bytes.
    pub(crate) estimated: bool,
    /// Which result.
    #[serde(flatten)]
    pub(crate) result: ResultRef,
}

/// One closed slot of the shortest window: the live point (`state::series::Point`), every field
/// required.
pub(crate) use crate::collector::state::Point;

/// A firing alert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Alert {
    /// Labels, `alertname` included.
    pub(crate) labels: BTreeMap<String, String>,
    /// Annotations.
    pub(crate) annotations: BTreeMap<String, String>,
    /// Start of the episode, Unix milliseconds.
    pub(crate) starts_at_unix_ms: u64,
    /// Quiet period, milliseconds.
    pub(crate) quiet_period_ms: u64,
}
