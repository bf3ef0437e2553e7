//! The daemon's own counters (self-metrics): requests, refusals, spans, series, snapshots,
//! shared lock-free between the receivers, the aggregator and the store, and read by
//! `/metrics`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::collector::net::listener;

/// Why a whole request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedRequest {
    /// Not decodable (bad protobuf, JSON, gzip).
    Decode,
    /// Over the body limit.
    TooLarge,
    /// Unknown content type or encoding.
    UnsupportedMediaType,
    /// The aggregator queue was full, or the decoding slots or the read budget were taken.
    Overloaded,
    /// The body did not arrive within the body deadline.
    Timeout,
    /// The token was missing or wrong.
    Unauthenticated,
    /// The aggregator has stopped (it panicked): nothing can be recorded until the daemon is
    /// restarted.
    Stopped,
    /// The write-ahead log could not make the request durable (write or fsync failed, or it
    /// holds its most segments): nothing of it was kept.
    Wal,
}

impl RefusedRequest {
    /// Every reason, in exposition order.
    pub const ALL: [RefusedRequest; 8] = [
        RefusedRequest::Decode,
        RefusedRequest::TooLarge,
        RefusedRequest::UnsupportedMediaType,
        RefusedRequest::Overloaded,
        RefusedRequest::Timeout,
        RefusedRequest::Unauthenticated,
        RefusedRequest::Stopped,
        RefusedRequest::Wal,
    ];

    /// The `reason` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RefusedRequest::Decode => "decode",
            RefusedRequest::TooLarge => "too_large",
            RefusedRequest::UnsupportedMediaType => "unsupported_media_type",
            RefusedRequest::Overloaded => "overloaded",
            RefusedRequest::Timeout => "timeout",
            RefusedRequest::Unauthenticated => "unauthenticated",
            RefusedRequest::Stopped => "aggregator_stopped",
            RefusedRequest::Wal => "wal_failed",
        }
    }
}

/// The OTLP signals the receivers accept. Traces and logs are read for tool calls; metrics are
/// acknowledged and counted, never refused for being metrics (an SDK left at its defaults
/// exports all three to one endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OtlpSignal {
    /// `ExportTraceServiceRequest`.
    Traces,
    /// `ExportLogsServiceRequest`.
    Logs,
    /// `ExportMetricsServiceRequest`.
    Metrics,
}

impl OtlpSignal {
    /// Every signal, in exposition order.
    pub(crate) const ALL: [OtlpSignal; 3] =
        [OtlpSignal::Traces, OtlpSignal::Logs, OtlpSignal::Metrics];

    /// The `signal` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            OtlpSignal::Traces => "traces",
            OtlpSignal::Logs => "logs",
            OtlpSignal::Metrics => "metrics",
        }
    }

    /// The OTLP/HTTP path.
    pub(crate) fn http_path(self) -> &'static str {
        match self {
            OtlpSignal::Traces => "/v1/traces",
            OtlpSignal::Logs => "/v1/logs",
            OtlpSignal::Metrics => "/v1/metrics",
        }
    }

    /// The OTLP/gRPC method path.
    pub(crate) fn grpc_path(self) -> &'static str {
        match self {
            OtlpSignal::Traces => "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            OtlpSignal::Logs => "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            OtlpSignal::Metrics => {
                "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
            }
        }
    }
}

/// Requests accepted, by signal: counters (`AtomicU64`) or a copy of them (`u64`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AcceptedRequests<T = u64> {
    /// `ExportTraceServiceRequest`s.
    pub(crate) traces: T,
    /// `ExportLogsServiceRequest`s.
    pub(crate) logs: T,
    /// `ExportMetricsServiceRequest`s.
    pub(crate) metrics: T,
}

impl<T> AcceptedRequests<T> {
    /// The count of signal `s`.
    pub(crate) fn of(&self, s: OtlpSignal) -> &T {
        match s {
            OtlpSignal::Traces => &self.traces,
            OtlpSignal::Logs => &self.logs,
            OtlpSignal::Metrics => &self.metrics,
        }
    }
}

impl AcceptedRequests<AtomicU64> {
    fn load(&self) -> AcceptedRequests {
        AcceptedRequests {
            traces: self.traces.load(Relaxed),
            logs: self.logs.load(Relaxed),
            metrics: self.metrics.load(Relaxed),
        }
    }
}

/// Log records accepted (tool calls recorded, others ignored) and refused under overload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LogRecords {
    /// Records of tool calls, recorded.
    pub(crate) tool: u64,
    /// Other records, ignored.
    pub(crate) other: u64,
    /// Records refused because the queue was full.
    pub(crate) overloaded: u64,
    /// Records refused because the aggregator had stopped.
    pub(crate) stopped: u64,
    /// Records of tool calls refused for a size no result can have.
    pub(crate) invalid_size: u64,
    /// Records refused because the write-ahead log could not make them durable.
    pub(crate) wal: u64,
    /// Records accepted and then lost: queued when the aggregator stopped.
    pub(crate) dropped: u64,
}

/// Requests refused as a whole, by [`RefusedRequest`]: counters (`AtomicU64`) or a copy of
/// them (`u64`, what [`SelfStats::view`] gives).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefusedRequests<T = u64> {
    /// [`RefusedRequest::Decode`].
    pub decode: T,
    /// [`RefusedRequest::TooLarge`].
    pub too_large: T,
    /// [`RefusedRequest::UnsupportedMediaType`].
    pub unsupported_media_type: T,
    /// [`RefusedRequest::Overloaded`].
    pub overloaded: T,
    /// [`RefusedRequest::Timeout`].
    pub timeout: T,
    /// [`RefusedRequest::Unauthenticated`].
    pub unauthenticated: T,
    /// [`RefusedRequest::Stopped`].
    pub stopped: T,
    /// [`RefusedRequest::Wal`].
    pub wal: T,
}

impl<T> RefusedRequests<T> {
    /// The count of reason `r`.
    pub(crate) fn of(&self, r: RefusedRequest) -> &T {
        match r {
            RefusedRequest::Decode => &self.decode,
            RefusedRequest::TooLarge => &self.too_large,
            RefusedRequest::UnsupportedMediaType => &self.unsupported_media_type,
            RefusedRequest::Overloaded => &self.overloaded,
            RefusedRequest::Timeout => &self.timeout,
            RefusedRequest::Unauthenticated => &self.unauthenticated,
            RefusedRequest::Stopped => &self.stopped,
            RefusedRequest::Wal => &self.wal,
        }
    }
}

impl RefusedRequests<AtomicU64> {
    fn load(&self) -> RefusedRequests {
        RefusedRequests {
            decode: self.decode.load(Relaxed),
            too_large: self.too_large.load(Relaxed),
            unsupported_media_type: self.unsupported_media_type.load(Relaxed),
            overloaded: self.overloaded.load(Relaxed),
            timeout: self.timeout.load(Relaxed),
            unauthenticated: self.unauthenticated.load(Relaxed),
            stopped: self.stopped.load(Relaxed),
            wal: self.wal.load(Relaxed),
        }
    }
}

/// The daemon's own counters, shared lock-free between receivers and the aggregator.
#[derive(Debug, Default)]
pub struct SelfStats {
    requests_http: AtomicU64,
    requests_grpc: AtomicU64,
    refused_requests: RefusedRequests<AtomicU64>,
    admin_unauthenticated: AtomicU64,
    spans_tool: AtomicU64,
    spans_other: AtomicU64,
    spans_invalid: AtomicU64,
    spans_invalid_size: AtomicU64,
    spans_overloaded: AtomicU64,
    spans_stopped: AtomicU64,
    spans_wal: AtomicU64,
    spans_dropped: AtomicU64,
    series: AtomicU64,
    overflow: AtomicU64,
    snapshot_interval_ms: AtomicU64,
    snapshot_durable_ms: AtomicU64,
    snapshot_write_us: AtomicU64,
    snapshots_written: AtomicU64,
    snapshot_failures: AtomicU64,
    snapshot_failing: AtomicU64,
    snapshots_refused: AtomicU64,
    snapshot_refused_in_place: AtomicBool,
    attributes_ignored: AtomicU64,
    service_cuts: Cuts<AtomicU64>,
    tool_cuts: Cuts<AtomicU64>,
    accepted_requests: AcceptedRequests<AtomicU64>,
    log_records_tool: AtomicU64,
    log_records_other: AtomicU64,
    log_records_overloaded: AtomicU64,
    log_records_stopped: AtomicU64,
    log_records_invalid_size: AtomicU64,
    log_records_wal: AtomicU64,
    log_records_dropped: AtomicU64,
    wal_segments: AtomicU64,
    wal_syncs: AtomicU64,
    wal_replay_us: AtomicU64,
    wal_enabled: AtomicBool,
    /// Connection counters of the listeners.
    pub listeners: Arc<listener::ListenerStats>,
}

/// A plain copy of [`SelfStats`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelfStatsView {
    /// OTLP/HTTP requests received.
    pub(crate) requests_http: u64,
    /// OTLP/gRPC requests received.
    pub(crate) requests_grpc: u64,
    /// Requests refused, by reason.
    pub refused_requests: RefusedRequests,
    /// Admin requests refused for a missing or wrong token.
    pub admin_unauthenticated: u64,
    /// Tool spans accepted and recorded.
    pub spans_tool: u64,
    /// Other spans accepted and ignored.
    pub(crate) spans_other: u64,
    /// Tool spans rejected as unusable (partial success).
    pub spans_invalid: u64,
    /// Tool spans refused for a size no result can have (negative, not finite, above 2^53).
    pub spans_invalid_size: u64,
    /// Spans refused because the queue was full.
    pub spans_overloaded: u64,
    /// Spans refused because the aggregator had stopped.
    pub spans_stopped: u64,
    /// Spans refused because the write-ahead log could not make them durable.
    pub spans_wal: u64,
    /// Tool spans accepted and then lost: queued when the aggregator stopped.
    pub spans_dropped: u64,
    /// Series, overflow included.
    pub(crate) series: u64,
    /// Records routed to the overflow series.
    pub(crate) overflow: u64,
    /// The snapshot interval, milliseconds (0: no data directory).
    pub(crate) snapshot_interval_ms: u64,
    /// What the state held at this time (Unix milliseconds) is on disk: the capture of the last
    /// snapshot written, or the start (0: no data directory).
    pub(crate) snapshot_durable_ms: u64,
    /// How long the last snapshot written took from when it was due to its rename,
    /// microseconds.
    pub(crate) snapshot_write_us: u64,
    /// Snapshots written.
    pub(crate) snapshots_written: u64,
    /// Snapshot writes that failed.
    pub(crate) snapshot_failures: u64,
    /// Snapshot writes that failed since the last one that succeeded.
    pub(crate) snapshot_failing: u64,
    /// Snapshots found at start and not restored (damaged, unreadable, of a newer format).
    pub(crate) snapshots_refused: u64,
    /// The snapshot refused at start could not be moved aside, and no snapshot has been written
    /// over it since.
    pub(crate) snapshot_refused_in_place: bool,
    /// Span attributes past the first 255 of their span, not looked at.
    pub attributes_ignored: u64,
    /// Service and tool names cut or cleaned, per tool span.
    pub(crate) label_cuts: LabelCuts,
    /// Requests accepted, by signal.
    pub(crate) accepted_requests: AcceptedRequests,
    /// Log records.
    pub(crate) log_records: LogRecords,
    /// The write-ahead log is on.
    pub(crate) wal_enabled: bool,
    /// Closed write-ahead log segments kept (awaiting a snapshot that covers them).
    pub(crate) wal_segments: u64,
    /// Groups of requests written to the write-ahead log, each with one fsync.
    pub(crate) wal_syncs: u64,
    /// How long the replay of the write-ahead log took at start, microseconds.
    pub(crate) wal_replay_us: u64,
}

impl SelfStats {
    pub(crate) fn request(&self, transport: &str) {
        match transport {
            "grpc" => &self.requests_grpc,
            _ => &self.requests_http,
        }
        .fetch_add(1, Relaxed);
    }
    pub(crate) fn refused_request(&self, r: RefusedRequest) {
        self.refused_requests.of(r).fetch_add(1, Relaxed);
    }
    pub(crate) fn admin_unauthenticated(&self) {
        self.admin_unauthenticated.fetch_add(1, Relaxed);
    }
    /// Spans of a request refused for `reason` (only a full queue or a stopped aggregator
    /// refuses spans that were decoded).
    pub(crate) fn refused_spans(&self, reason: RefusedRequest, n: u64) {
        match reason {
            RefusedRequest::Stopped => &self.spans_stopped,
            RefusedRequest::Wal => &self.spans_wal,
            _ => &self.spans_overloaded,
        }
        .fetch_add(n, Relaxed);
    }
    /// Log records of a request refused for `reason`, as [`SelfStats::refused_spans`].
    pub(crate) fn refused_logs(&self, reason: RefusedRequest, n: u64) {
        match reason {
            RefusedRequest::Stopped => &self.log_records_stopped,
            RefusedRequest::Wal => &self.log_records_wal,
            _ => &self.log_records_overloaded,
        }
        .fetch_add(n, Relaxed);
    }
    /// Tool records that were acknowledged and then lost with the aggregator's queue.
    pub(crate) fn dropped(&self, signal: OtlpSignal, n: u64) {
        match signal {
            OtlpSignal::Logs => &self.log_records_dropped,
            _ => &self.spans_dropped,
        }
        .fetch_add(n, Relaxed);
    }
    pub(crate) fn accepted(&self, tools: u64, other: u64, invalid: u64) {
        self.spans_tool.fetch_add(tools, Relaxed);
        self.spans_other.fetch_add(other, Relaxed);
        self.spans_invalid.fetch_add(invalid, Relaxed);
    }
    pub(crate) fn invalid_size(&self, n: u64) {
        if n > 0 {
            self.spans_invalid_size.fetch_add(n, Relaxed);
        }
    }
    pub(crate) fn log_records_invalid_size(&self, n: u64) {
        if n > 0 {
            self.log_records_invalid_size.fetch_add(n, Relaxed);
        }
    }
    pub(crate) fn accepted_request(&self, s: OtlpSignal) {
        self.accepted_requests.of(s).fetch_add(1, Relaxed);
    }
    pub(crate) fn accepted_logs(&self, tool: u64, other: u64) {
        self.log_records_tool.fetch_add(tool, Relaxed);
        self.log_records_other.fetch_add(other, Relaxed);
    }
    pub(crate) fn set_series(&self, series: u64, overflow: u64) {
        self.series.store(series, Relaxed);
        self.overflow.store(overflow, Relaxed);
    }
    /// A data directory is configured: snapshots every `interval`, and what the state holds at
    /// `now_ms` (the start, after a restore or with nothing to restore) is on disk.
    pub(crate) fn snapshots_every(&self, interval: std::time::Duration, now_ms: u64) {
        let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        self.snapshot_interval_ms.store(ms, Relaxed);
        self.snapshot_durable_ms.store(now_ms, Relaxed);
    }
    /// A snapshot of the state captured at `captured_ms` (Unix milliseconds) was written, `took`
    /// after it was due.
    pub(crate) fn snapshot_written(&self, captured_ms: u64, took: std::time::Duration) {
        self.snapshot_failing.store(0, Relaxed);
        self.snapshot_refused_in_place.store(false, Relaxed);
        self.snapshot_durable_ms.fetch_max(captured_ms, Relaxed);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.snapshot_write_us.store(us, Relaxed);
        self.snapshots_written.fetch_add(1, Relaxed);
    }
    /// The snapshot found at start was not restored; `moved` says whether it was moved aside.
    pub(crate) fn snapshot_refused(&self, moved: bool) {
        self.snapshots_refused.fetch_add(1, Relaxed);
        if !moved {
            self.snapshot_refused_in_place.store(true, Relaxed);
        }
    }
    pub(crate) fn attributes_ignored(&self, n: u64) {
        if n > 0 {
            self.attributes_ignored.fetch_add(n, Relaxed);
        }
    }
    pub(crate) fn label_cuts(&self, c: &LabelCuts) {
        self.service_cuts.add(c.service);
        self.tool_cuts.add(c.tool);
    }
    /// The write-ahead log was replayed at start in `took`.
    pub(crate) fn wal_replayed(&self, took: std::time::Duration) {
        self.wal_enabled.store(true, Relaxed);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.wal_replay_us.store(us, Relaxed);
    }
    /// The write-ahead log keeps `n` closed segments.
    pub(crate) fn wal_segments(&self, n: u64) {
        self.wal_segments.store(n, Relaxed);
    }
    /// The write-ahead log wrote and fsynced a group of requests.
    pub(crate) fn wal_synced(&self) {
        self.wal_syncs.fetch_add(1, Relaxed);
    }
    pub(crate) fn snapshot_failed(&self) {
        self.snapshot_failures.fetch_add(1, Relaxed);
        self.snapshot_failing.fetch_add(1, Relaxed);
    }

    /// A copy of every counter.
    pub fn view(&self) -> SelfStatsView {
        SelfStatsView {
            requests_http: self.requests_http.load(Relaxed),
            requests_grpc: self.requests_grpc.load(Relaxed),
            refused_requests: self.refused_requests.load(),
            admin_unauthenticated: self.admin_unauthenticated.load(Relaxed),
            spans_tool: self.spans_tool.load(Relaxed),
            spans_other: self.spans_other.load(Relaxed),
            spans_invalid: self.spans_invalid.load(Relaxed),
            spans_invalid_size: self.spans_invalid_size.load(Relaxed),
            spans_overloaded: self.spans_overloaded.load(Relaxed),
            spans_stopped: self.spans_stopped.load(Relaxed),
            spans_wal: self.spans_wal.load(Relaxed),
            spans_dropped: self.spans_dropped.load(Relaxed),
            series: self.series.load(Relaxed),
            overflow: self.overflow.load(Relaxed),
            snapshot_interval_ms: self.snapshot_interval_ms.load(Relaxed),
            snapshot_durable_ms: self.snapshot_durable_ms.load(Relaxed),
            snapshot_write_us: self.snapshot_write_us.load(Relaxed),
            snapshots_written: self.snapshots_written.load(Relaxed),
            snapshot_failures: self.snapshot_failures.load(Relaxed),
            snapshot_failing: self.snapshot_failing.load(Relaxed),
            snapshots_refused: self.snapshots_refused.load(Relaxed),
            snapshot_refused_in_place: self.snapshot_refused_in_place.load(Relaxed),
            attributes_ignored: self.attributes_ignored.load(Relaxed),
            label_cuts: LabelCuts {
                service: self.service_cuts.load(),
                tool: self.tool_cuts.load(),
            },
            accepted_requests: self.accepted_requests.load(),
            log_records: LogRecords {
                tool: self.log_records_tool.load(Relaxed),
                other: self.log_records_other.load(Relaxed),
                overloaded: self.log_records_overloaded.load(Relaxed),
                stopped: self.log_records_stopped.load(Relaxed),
                invalid_size: self.log_records_invalid_size.load(Relaxed),
                wal: self.log_records_wal.load(Relaxed),
                dropped: self.log_records_dropped.load(Relaxed),
            },
            wal_enabled: self.wal_enabled.load(Relaxed),
            wal_segments: self.wal_segments.load(Relaxed),
            wal_syncs: self.wal_syncs.load(Relaxed),
            wal_replay_us: self.wal_replay_us.load(Relaxed),
        }
    }
}

/// Label values that had to be cut or cleaned, by label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LabelCuts {
    /// `service.name` values, counted per tool span.
    pub(crate) service: Cuts,
    /// Tool names.
    pub(crate) tool: Cuts,
}

/// Values of one label cut to its byte limit or cleaned of hidden characters: counters
/// (`AtomicU64`) or counts (`u64`); for one value, 0 or 1 each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cuts<T = u64> {
    /// Cut to the label's byte limit (`reason="too_long"`).
    pub(crate) too_long: T,
    /// Control or format characters replaced (`reason="hidden_characters"`).
    pub(crate) hidden_characters: T,
}

impl Cuts {
    /// How one value was sanitised: 1 for each thing done to it.
    pub(crate) fn of(s: &crate::label::Sanitized) -> Self {
        Self {
            too_long: u64::from(s.truncated),
            hidden_characters: u64::from(s.replaced),
        }
    }
}

impl std::ops::AddAssign for Cuts {
    fn add_assign(&mut self, o: Self) {
        self.too_long += o.too_long;
        self.hidden_characters += o.hidden_characters;
    }
}

impl Cuts<AtomicU64> {
    fn add(&self, c: Cuts) {
        for (counter, n) in [
            (&self.too_long, c.too_long),
            (&self.hidden_characters, c.hidden_characters),
        ] {
            if n > 0 {
                counter.fetch_add(n, Relaxed);
            }
        }
    }

    fn load(&self) -> Cuts {
        Cuts {
            too_long: self.too_long.load(Relaxed),
            hidden_characters: self.hidden_characters.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runbook's `ToolsizeSpansRefused` table has a row for every reason a whole request
    /// is refused, so an operator paged with a `reason` finds its cause.
    #[test]
    fn the_runbook_explains_every_reason_a_request_is_refused() {
        let runbook = include_str!("../../docs/runbook.md");
        let section = runbook
            .split("## ToolsizeSpansRefused")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("a ToolsizeSpansRefused section");
        for reason in RefusedRequest::ALL {
            let row = section.lines().any(|l| {
                l.starts_with("| `requests refused`")
                    && l.contains(&format!("`{}`", reason.as_str()))
            });
            assert!(
                row,
                "docs/runbook.md: no `requests refused` row for reason `{}`",
                reason.as_str()
            );
        }
    }

    #[test]
    fn a_label_value_counts_what_was_done_to_it() {
        let cut = crate::label::sanitize("abcdef", 3);
        let cleaned = crate::label::sanitize("a\u{200B}b", 64);
        assert_eq!(
            Cuts::of(&cut),
            Cuts {
                too_long: 1,
                hidden_characters: 0
            }
        );
        assert_eq!(
            Cuts::of(&cleaned),
            Cuts {
                too_long: 0,
                hidden_characters: 1
            }
        );
        let stats = SelfStats::default();
        let cuts = LabelCuts {
            service: Cuts {
                too_long: 1,
                hidden_characters: 2,
            },
            tool: Cuts {
                too_long: 3,
                hidden_characters: 4,
            },
        };
        stats.label_cuts(&cuts);
        stats.label_cuts(&cuts);
        let twice = |c: Cuts| Cuts {
            too_long: 2 * c.too_long,
            hidden_characters: 2 * c.hidden_characters,
        };
        assert_eq!(
            stats.view().label_cuts,
            LabelCuts {
                service: twice(cuts.service),
                tool: twice(cuts.tool),
            }
        );
    }
}
