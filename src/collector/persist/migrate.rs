//! Reading a snapshot of any format version this build knows, and bringing it to the current one
//! ([`format::VERSION`]).
//!
//! Each earlier version has its types frozen here as they were serialised (field names, nesting,
//! the defaults of fields it gained over time), and one migration to the next version; a file is
//! migrated step by step. A file that is not JSON, has no version, is of a version newer than
//! this build, or does not match its version's types is refused with a [`ReadError`] that says
//! which; so is one whose body does not match its checksum (version 3 on), or whose numbers
//! break an invariant ([`super::verify`]: a damaged file that still parses). The store moves
//! it aside and the daemon starts empty.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::format;
use super::verify::{self, Violation};

/// Why a snapshot file cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// Not JSON, or no `version`.
    #[error("not a snapshot (no format version could be read: {0})")]
    NoVersion(serde_json::Error),
    /// Written by a newer build.
    #[error(
        "snapshot format version {found} is newer than this build reads (1 to {}): written by a \
         newer toolsize; run that version, or keep the file aside until you do",
        format::VERSION
    )]
    Newer {
        /// Its version.
        found: u32,
    },
    /// Version 0 does not exist.
    #[error("snapshot format version 0 does not exist")]
    Zero,
    /// The version is known but the content does not match it (a damaged file).
    #[error("snapshot of format version {version} is damaged: {error}")]
    Damaged {
        /// Its version.
        version: u32,
        /// What did not match.
        error: serde_json::Error,
    },
    /// The body does not match the checksum written with it.
    #[error(
        "snapshot is damaged: its checksum does not match its content (CRC-32 written \
         {written:08x}, of the content {found:08x})"
    )]
    Checksum {
        /// The checksum in the file.
        written: u32,
        /// The checksum of the body as read.
        found: u32,
    },
    /// The numbers contradict each other.
    #[error("snapshot of format version {version} is damaged: {violation}")]
    Invariant {
        /// Its version.
        version: u32,
        /// Which invariant, where.
        violation: Violation,
    },
}

impl ReadError {
    /// The version of a file this build does not read, if that is the reason.
    pub(crate) fn unsupported_version(&self) -> Option<u32> {
        match self {
            ReadError::Newer { found } => Some(*found),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct Version {
    version: u32,
}

/// The envelope of versions 3 and 4: the body's CRC-32 and the body, as written.
#[derive(Deserialize)]
struct Envelope<'a> {
    crc32: String,
    #[serde(borrow)]
    snapshot: &'a RawValue,
}

/// Reads a snapshot file of any known version, migrated to the current format, its checksum
/// and its invariants checked.
pub(crate) fn read(bytes: &[u8]) -> Result<format::Snapshot, ReadError> {
    let version = serde_json::from_slice::<Version>(bytes)
        .map_err(ReadError::NoVersion)?
        .version;
    let damaged = |error| ReadError::Damaged { version, error };
    let snapshot = match version {
        0 => return Err(ReadError::Zero),
        1 => v1::migrate(serde_json::from_slice(bytes).map_err(damaged)?),
        // Version 2 is version 3's body without the envelope.
        2 => format::Snapshot {
            version: format::VERSION,
            ..serde_json::from_slice(bytes).map_err(damaged)?
        },
        // Version 3 is version 4 without the context ledger's totals (read as empty).
        3 | format::VERSION => {
            let e: Envelope<'_> = serde_json::from_slice(bytes).map_err(damaged)?;
            let written = u32::from_str_radix(&e.crc32, 16).map_err(|_| {
                damaged(serde::de::Error::custom(format_args!(
                    "crc32 {:?} is not 8 hex digits",
                    e.crc32
                )))
            })?;
            let found = crc32fast::hash(e.snapshot.get().as_bytes());
            if found != written {
                return Err(ReadError::Checksum { written, found });
            }
            format::Snapshot {
                version: format::VERSION,
                ..serde_json::from_str(e.snapshot.get()).map_err(damaged)?
            }
        }
        found => return Err(ReadError::Newer { found }),
    };
    verify::check(&snapshot).map_err(|violation| ReadError::Invariant { version, violation })?;
    Ok(snapshot)
}

/// Version 1: the aggregator's own types serialised as they were until format 2.
mod v1 {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::format;

    /// The size bucket layout of version-1 snapshots written before they recorded theirs.
    const LEGACY_SIZE_BUCKETS: &[u64] = &[
        256, 1024, 4096, 8000, 10_000, 16_384, 20_000, 25_000, 32_768, 65_536, 131_072, 262_144,
        1_048_576, 4_194_304, 16_777_216,
    ];

    #[derive(Deserialize)]
    pub(super) struct Snapshot {
        written_unix: u64,
        started_unix: u64,
        overflow_records: u64,
        #[serde(default)]
        size_bounds: Option<Vec<u64>>,
        series: Vec<Series>,
        #[serde(default)]
        alerts: Vec<Alert>,
    }

    #[derive(Deserialize)]
    struct Key {
        service: String,
        tool: String,
    }

    #[derive(Deserialize)]
    struct Series {
        key: Key,
        total: Stats,
        windows: Vec<Ring>,
        size_buckets: Vec<u64>,
        latency_buckets: Vec<u64>,
        size_sum: u64,
        latency_sum_us: u64,
        largest: Vec<Largest>,
        args: Vec<(String, Args)>,
        #[serde(default)]
        over_ceiling: Vec<(String, u64)>,
        #[serde(default)]
        over_recent: Vec<Over>,
        #[serde(default)]
        history: Vec<Point>,
    }

    /// The counters inline, beside the two histograms.
    #[derive(Deserialize)]
    struct Stats {
        #[serde(flatten)]
        counts: Counts,
        size: Hist,
        latency: Hist,
    }

    #[derive(Deserialize)]
    struct Counts {
        calls: u64,
        errors: u64,
        truncated: u64,
        truncated_upstream: u64,
        unknown_size: u64,
        measured: u64,
        derived: u64,
        #[serde(default)]
        unwrapped: u64,
        #[serde(default)]
        lower_bound: u64,
        #[serde(default)]
        unwrapped_approximate: u64,
        #[serde(default)]
        reported: u64,
        #[serde(default)]
        over_ceiling: u64,
        #[serde(default)]
        upstream_limit: Option<u64>,
    }

    #[derive(Deserialize)]
    struct Hist {
        ceiling: u64,
        clamped: u64,
        max_seen: u64,
        buckets: Vec<(u64, u64)>,
    }

    #[derive(Deserialize)]
    struct Ring {
        slot_secs: u64,
        slots: Vec<(u64, Stats)>,
    }

    #[derive(Deserialize)]
    struct Largest {
        bytes: u64,
        trace_id: String,
        span_id: String,
        args_hash: Option<String>,
        at_unix: u64,
        truncated_upstream: bool,
        #[serde(default)]
        cut_by: Option<String>,
        #[serde(default)]
        original: Option<u64>,
    }

    #[derive(Deserialize)]
    struct Args {
        count: u64,
        max_bytes: u64,
    }

    /// The API's over-ceiling entry, as version 1 stored it.
    #[derive(Deserialize)]
    struct Over {
        bytes: u64,
        layer: String,
        limit: u64,
        #[allow(dead_code)]
        unit: String,
        value: u64,
        estimated: bool,
        trace_id: String,
        span_id: String,
        args_hash: Option<String>,
        at_unix: u64,
    }

    #[derive(Deserialize)]
    struct Point {
        at_unix: u64,
        count: u32,
        sized: u32,
        p50: u32,
        p95: u32,
        p99: u32,
        max: u32,
        errors: u32,
        truncated: u32,
        truncated_upstream: u32,
        over_ceiling: u32,
    }

    #[derive(Deserialize)]
    struct Alert {
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
        starts_at_unix_ms: u64,
        quiet_period_ms: u64,
    }

    /// Version 1 to version 2: the same numbers in the new types; the size bucket layout of the
    /// oldest files made explicit.
    pub(super) fn migrate(s: Snapshot) -> format::Snapshot {
        format::Snapshot {
            wal_seq: None,
            context: format::Context::default(),
            version: format::VERSION,
            written_unix: s.written_unix,
            started_unix: s.started_unix,
            overflow_records: s.overflow_records,
            size_bounds: s
                .size_bounds
                .unwrap_or_else(|| LEGACY_SIZE_BUCKETS.to_vec()),
            series: s.series.into_iter().map(series).collect(),
            alerts: s
                .alerts
                .into_iter()
                .map(|a| format::Alert {
                    labels: a.labels,
                    annotations: a.annotations,
                    starts_at_unix_ms: a.starts_at_unix_ms,
                    quiet_period_ms: a.quiet_period_ms,
                })
                .collect(),
        }
    }

    fn series(s: Series) -> format::Series {
        format::Series {
            service: s.key.service,
            tool: s.key.tool,
            total: stats(s.total),
            windows: s
                .windows
                .into_iter()
                .map(|r| format::Ring {
                    slot_secs: r.slot_secs,
                    slots: r.slots.into_iter().map(|(i, st)| (i, stats(st))).collect(),
                })
                .collect(),
            size_buckets: s.size_buckets,
            latency_buckets: s.latency_buckets,
            size_sum: s.size_sum,
            latency_sum_us: s.latency_sum_us,
            largest: s
                .largest
                .into_iter()
                .map(|l| format::Largest {
                    bytes: l.bytes,
                    result: format::ResultRef {
                        trace_id: l.trace_id,
                        span_id: l.span_id,
                        args_hash: l.args_hash,
                        at_unix: l.at_unix,
                    },
                    truncated_upstream: l.truncated_upstream,
                    cut_by: l.cut_by,
                    original: l.original,
                })
                .collect(),
            args: s
                .args
                .into_iter()
                .map(|(hash, a)| format::Args {
                    hash,
                    count: a.count,
                    max_bytes: a.max_bytes,
                })
                .collect(),
            over_ceiling: s
                .over_ceiling
                .into_iter()
                .map(|(layer, count)| format::LayerCount {
                    layer,
                    count_milli: count * 1000,
                })
                .collect(),
            over_recent: s
                .over_recent
                .into_iter()
                .map(|o| format::Over {
                    bytes: o.bytes,
                    layer: o.layer,
                    limit: o.limit,
                    value: o.value,
                    estimated: o.estimated,
                    result: format::ResultRef {
                        trace_id: o.trace_id,
                        span_id: o.span_id,
                        args_hash: o.args_hash,
                        at_unix: o.at_unix,
                    },
                })
                .collect(),
            history: s
                .history
                .into_iter()
                .map(|p| format::Point {
                    at_unix: p.at_unix,
                    count: p.count,
                    sized: p.sized,
                    p50: p.p50,
                    p95: p.p95,
                    p99: p.p99,
                    max: p.max,
                    errors: p.errors,
                    truncated: p.truncated,
                    truncated_upstream: p.truncated_upstream,
                    over_ceiling: p.over_ceiling,
                })
                .collect(),
        }
    }

    fn stats(s: Stats) -> format::Stats {
        let c = s.counts;
        let hist = |h: Hist| format::Hist {
            ceiling: h.ceiling,
            clamped: h.clamped,
            max_seen: h.max_seen,
            buckets: h.buckets,
        };
        format::Stats {
            counts: format::Counts {
                calls: c.calls,
                errors: c.errors,
                truncated: c.truncated,
                truncated_upstream: c.truncated_upstream,
                unknown_size: c.unknown_size,
                measured: c.measured,
                derived: c.derived,
                unwrapped: c.unwrapped,
                unwrapped_approximate: c.unwrapped_approximate,
                lower_bound: c.lower_bound,
                reported: c.reported,
                over_ceiling: c.over_ceiling,
                upstream_limit: c.upstream_limit,
                // Nothing was weighted before version 2: one call per span.
                calls_milli: c.calls * 1000,
            },
            size: hist(s.size),
            latency: hist(s.latency),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = include_str!("../../../tests/data/snapshots/v1.json");
    const V2: &str = include_str!("../../../tests/data/snapshots/v2.json");
    /// A version 3 file written by `toolsize demo` (0.2.0) on SIGTERM.
    const V3: &str = include_str!("../../../tests/data/snapshots/v3.json");

    /// `bytes` with the first digit of the first count of the first size bucket of the first
    /// series' `total` changed, and where.
    fn flip_a_bucket_count(bytes: &[u8]) -> Vec<u8> {
        let text = std::str::from_utf8(bytes).unwrap();
        let total = text.find("\"total\":").unwrap();
        let buckets = total + text[total..].find("\"buckets\":[[").unwrap();
        let comma = buckets + text[buckets..].find(',').unwrap();
        let mut out = bytes.to_vec();
        let digit = &mut out[comma + 1];
        *digit = if *digit == b'9' { b'1' } else { *digit + 1 };
        out
    }

    #[test]
    fn a_version_2_file_is_read_with_every_number() {
        let s = read(V2.as_bytes()).unwrap();
        assert_eq!(s.version, format::VERSION);
        let mut as_read = serde_json::to_value(&s).unwrap();
        as_read["version"] = 2.into();
        let file: serde_json::Value = serde_json::from_str(V2).unwrap();
        assert_eq!(as_read, file);
    }

    #[test]
    fn a_version_3_file_is_read_with_every_number_and_written_back_the_same() {
        let s = read(V3.as_bytes()).unwrap();
        assert_eq!(s.series.len(), 4);
        let fetch = &s.series[0];
        assert_eq!(fetch.total.counts.calls, 96);
        assert_eq!(fetch.total.counts.over_ceiling, 28);
        assert_eq!(fetch.total.counts.calls_milli, 96_000);
        let file: serde_json::Value = serde_json::from_str(V3).unwrap();
        let mut again: serde_json::Value =
            serde_json::from_slice(&format::encode(&s).unwrap()).unwrap();
        // Written back as the current version, every other field as it was.
        assert_eq!(again["snapshot"]["version"], format::VERSION);
        again["snapshot"]["version"] = 3.into();
        // The checksum is over the text, whose counters are in the order of this version.
        assert!(
            again["snapshot"] == file["snapshot"],
            "every field of the file, read and written back"
        );
    }

    /// Version 3 (0.2.0) had no context ledger totals: read as empty, and written back as
    /// version 4 without them.
    #[test]
    fn a_version_3_file_has_an_empty_ledger() {
        let s = read(V3.as_bytes()).unwrap();
        assert_eq!(s.version, format::VERSION);
        assert!(s.context.is_empty());
        let again: serde_json::Value =
            serde_json::from_slice(&format::encode(&s).unwrap()).unwrap();
        assert_eq!(again["version"], 4);
        assert!(again["snapshot"].get("context").is_none());
    }

    #[test]
    fn the_current_version_is_checked_against_its_checksum() {
        let s = read(V2.as_bytes()).unwrap();
        let bytes = format::encode(&s).unwrap();
        assert!(bytes.starts_with(b"{\"version\":4,\"crc32\":\""));
        // Still one JSON document.
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["snapshot"]["series"].as_array().unwrap().len(), 3);
        assert_eq!(read(&bytes).unwrap(), s);
        let e = read(&flip_a_bucket_count(&bytes)).unwrap_err();
        assert!(matches!(e, ReadError::Checksum { .. }), "{e}");
        assert!(e.to_string().contains("checksum does not match"), "{e}");
    }

    #[test]
    fn a_flipped_bucket_count_under_a_matching_checksum_breaks_an_invariant() {
        let s = read(V2.as_bytes()).unwrap();
        let bytes = flip_a_bucket_count(&format::encode(&s).unwrap());
        // The checksum written again over the damaged body, as a careless hand edit would.
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let body = serde_json::to_string(&v["snapshot"]).unwrap();
        let crc = crc32fast::hash(body.as_bytes());
        let file = format!("{{\"version\":3,\"crc32\":\"{crc:08x}\",\"snapshot\":{body}}}");
        let e = read(file.as_bytes()).unwrap_err();
        assert!(matches!(e, ReadError::Invariant { .. }), "{e}");
        assert!(e.to_string().contains("is damaged: series"), "{e}");
        // A version 2 file (no checksum) with the same flip: the invariants catch it.
        let e = read(&flip_a_bucket_count(V2.as_bytes())).unwrap_err();
        assert!(matches!(e, ReadError::Invariant { version: 2, .. }), "{e}");
    }

    #[test]
    fn a_version_1_file_is_migrated_with_every_number() {
        let s = read(V1.as_bytes()).unwrap();
        assert_eq!(s.version, format::VERSION);
        assert_eq!(s.series.len(), 3);
        let search = s.series.iter().find(|s| s.tool == "search").unwrap();
        assert_eq!(search.service, "agent-v1");
        assert_eq!(search.total.counts.calls, 10);
        assert_eq!(search.total.counts.truncated, 1);
        assert_eq!(search.total.counts.over_ceiling, 2);
        assert_eq!(search.total.counts.calls_milli, 10_000);
        assert_eq!(search.total.size.max_seen, 50_000);
        assert_eq!(
            search.over_ceiling,
            [format::LayerCount {
                layer: "default".into(),
                count_milli: 2000
            }]
        );
        assert_eq!(search.args.len(), 3);
        assert_eq!(s.alerts.len(), 1);
        assert_eq!(s.alerts[0].labels["alertname"], "ToolResultOverCeiling");
        // Written again, it reads back as it is.
        let again = format::encode(&s).unwrap();
        assert_eq!(read(&again).unwrap(), s);
    }

    #[test]
    fn the_oldest_version_1_files_get_the_legacy_bucket_layout() {
        let mut v: serde_json::Value = serde_json::from_str(V1).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("size_bounds");
        o.remove("alerts");
        let s = read(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(s.size_bounds[..3], [256, 1024, 4096]);
        assert!(s.alerts.is_empty());
    }

    #[test]
    fn unreadable_files_say_why() {
        let e = read(br#"{"version": 9, "series": []}"#).unwrap_err();
        assert_eq!(e.unsupported_version(), Some(9));
        assert!(e.to_string().contains("newer than this build reads"), "{e}");
        let e = read(b"{not json").unwrap_err();
        assert!(e.to_string().starts_with("not a snapshot"), "{e}");
        let e = read(br#"{"version": 1, "series": 3}"#).unwrap_err();
        assert!(e.to_string().contains("version 1 is damaged"), "{e}");
        assert!(read(br#"{"version": 0}"#).is_err());
    }
}
