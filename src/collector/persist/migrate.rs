//! Reading a snapshot of any format version this build knows, and bringing it to the current one
//! ([`format::VERSION`]).
//!
//! Each earlier version has its types frozen here as they were serialised (field names, nesting,
//! the defaults of fields it gained over time), and one migration to the next version; a file is
//! migrated step by step. A file that is not JSON, has no version, is of a version newer than
//! this build, or does not match its version's types is refused with a [`ReadError`] that says
//! which; the store moves it aside and the daemon starts empty.

use serde::Deserialize;

use super::format;

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

/// Reads a snapshot file of any known version, migrated to the current format.
pub(crate) fn read(bytes: &[u8]) -> Result<format::Snapshot, ReadError> {
    let version = serde_json::from_slice::<Version>(bytes)
        .map_err(ReadError::NoVersion)?
        .version;
    let damaged = |error| ReadError::Damaged { version, error };
    match version {
        0 => Err(ReadError::Zero),
        1 => Ok(v1::migrate(serde_json::from_slice(bytes).map_err(damaged)?)),
        format::VERSION => serde_json::from_slice(bytes).map_err(damaged),
        found => Err(ReadError::Newer { found }),
    }
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
            version: 2,
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
        let again = serde_json::to_vec(&s).unwrap();
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
