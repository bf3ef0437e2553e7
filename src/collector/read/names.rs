//! The names of the metric families `/metrics` exports, each declared once, and the list of
//! all of them ([`FAMILIES`]) that the drift tests (alert rules, dashboards, docs) read. A test
//! of the exposition holds the list equal to what is written.

/// Tool calls.
pub(crate) const TOOL_CALLS: &str = "toolsize_tool_calls_total";
/// Failed tool calls.
pub(crate) const TOOL_CALL_ERRORS: &str = "toolsize_tool_call_errors_total";
/// Results the tool reported truncated.
pub(crate) const TOOL_RESULTS_TRUNCATED: &str = "toolsize_tool_results_truncated_total";
/// Results whose content showed an upstream cut.
pub(crate) const TOOL_RESULTS_TRUNCATED_UPSTREAM: &str =
    "toolsize_tool_results_truncated_upstream_total";
/// Successful results of unknown size.
pub(crate) const TOOL_RESULTS_SIZE_UNKNOWN: &str = "toolsize_tool_results_size_unknown_total";
/// Tool spans received (below the calls when the tracer sampled).
pub(crate) const TOOL_SPANS: &str = "toolsize_tool_spans_total";
/// Results with a known size, by how it was obtained.
pub(crate) const TOOL_RESULTS_SIZED: &str = "toolsize_tool_results_sized_total";
/// Attribute value length limit a tool's results were seen cut at (configured or learned).
pub(crate) const TOOL_RESULT_UPSTREAM_LIMIT: &str = "toolsize_tool_result_upstream_limit_chars";
/// Results over a ceiling, by the weakest layer that cuts them (`layer` label).
pub(crate) const TOOL_RESULTS_OVER_CEILING: &str = "toolsize_tool_results_over_ceiling_total";
/// The ceiling each series is held to, in bytes (`stack` and `layer` labels).
pub(crate) const TOOL_RESULT_CEILING_BYTES: &str = "toolsize_tool_result_ceiling_bytes";
/// Each layer's effective limit in bytes (`layer` label); estimated for non-byte units.
pub(crate) const CEILING_BYTES: &str = "toolsize_ceiling_bytes";
/// Result size histogram.
pub(crate) const TOOL_RESULT_SIZE: &str = "toolsize_tool_result_size_bytes";
/// Call duration histogram.
pub(crate) const TOOL_CALL_DURATION: &str = "toolsize_tool_call_duration_seconds";
/// Daemon-computed result size median per window (a `quantile` label is reserved for summaries,
/// so each quantile has its own name).
pub(crate) const TOOL_RESULT_SIZE_P50: &str = "toolsize_tool_result_size_p50_bytes";
/// Daemon-computed result size 95th percentile per window.
pub(crate) const TOOL_RESULT_SIZE_P95: &str = "toolsize_tool_result_size_p95_bytes";
/// Daemon-computed result size 99th percentile per window.
pub(crate) const TOOL_RESULT_SIZE_P99: &str = "toolsize_tool_result_size_p99_bytes";
/// Largest result size per window (exact).
pub(crate) const TOOL_RESULT_SIZE_MAX: &str = "toolsize_tool_result_size_max_bytes";
/// Daemon-computed duration 95th percentile per window.
pub(crate) const TOOL_CALL_DURATION_P95: &str = "toolsize_tool_call_duration_p95_seconds";
/// OTLP requests received.
pub(crate) const OTLP_REQUESTS: &str = "toolsize_otlp_requests_total";
/// OTLP requests refused, by reason.
pub(crate) const OTLP_REQUESTS_REFUSED: &str = "toolsize_otlp_requests_refused_total";
/// Spans accepted, by kind (tool, other).
pub(crate) const SPANS_ACCEPTED: &str = "toolsize_spans_accepted_total";
/// OTLP export requests accepted, by signal.
pub(crate) const OTLP_REQUESTS_ACCEPTED: &str = "toolsize_otlp_requests_accepted_total";
/// Signals of coding agents' calls, by what the joiner did with them.
pub(crate) const AGENT_SIGNALS: &str = "toolsize_agent_signals_total";
/// Coding agents' calls waiting for their other signals.
pub(crate) const AGENT_CALLS_WAITING: &str = "toolsize_agent_calls_waiting";
/// Accepted requests relayed to an upstream, by outcome.
pub(crate) const FORWARD_REQUESTS: &str = "toolsize_forward_requests_total";
/// Relay attempts retried, by upstream.
pub(crate) const FORWARD_RETRIES: &str = "toolsize_forward_retries_total";
/// Requests waiting for or in flight to an upstream.
pub(crate) const FORWARD_QUEUE: &str = "toolsize_forward_queue_requests";
/// Log records accepted, by kind.
pub(crate) const LOG_RECORDS_ACCEPTED: &str = "toolsize_log_records_accepted_total";
/// Log records refused, by reason.
pub(crate) const LOG_RECORDS_REFUSED: &str = "toolsize_log_records_refused_total";
/// Tool-call log records accepted then lost (queued when the aggregator stopped).
pub(crate) const LOG_RECORDS_DROPPED: &str = "toolsize_log_records_dropped_total";
/// Spans refused, by reason (invalid, overloaded, aggregator_stopped, wal_failed).
pub(crate) const SPANS_REFUSED: &str = "toolsize_spans_refused_total";
/// Tool spans accepted then lost (queued when the aggregator stopped).
pub(crate) const SPANS_DROPPED: &str = "toolsize_spans_dropped_total";
/// Series held.
pub(crate) const SERIES: &str = "toolsize_series";
/// Cardinality cap.
pub(crate) const SERIES_LIMIT: &str = "toolsize_series_limit";
/// Records routed to the overflow series.
pub(crate) const SERIES_OVERFLOW: &str = "toolsize_series_overflow_total";
/// Values above a histogram ceiling, clamped to it, by histogram (size, latency).
pub(crate) const VALUES_CLAMPED: &str = "toolsize_values_clamped_total";
/// Span attributes past the first 255 of their span, not looked at by recognition.
pub(crate) const SPAN_ATTRIBUTES_IGNORED: &str = "toolsize_span_attributes_ignored_total";
/// Service and tool names cut or cleaned before use, by `label` and `reason`.
pub(crate) const LABEL_VALUES_SANITIZED: &str = "toolsize_label_values_sanitized_total";
/// Admin requests refused, by reason (`unauthenticated`).
pub(crate) const ADMIN_REQUESTS_REFUSED: &str = "toolsize_admin_requests_refused_total";
/// Connections open now, by `listener`.
pub(crate) const CONNECTIONS: &str = "toolsize_connections";
/// Connection cap in effect, by `listener`.
pub(crate) const CONNECTIONS_LIMIT: &str = "toolsize_connections_limit";
/// Connections the daemon closed or refused, by `listener` and `reason`.
pub(crate) const CONNECTIONS_CLOSED: &str = "toolsize_connections_closed_total";
/// Age of what the last snapshot holds: since its capture (or the start).
pub(crate) const SNAPSHOT_AGE: &str = "toolsize_snapshot_age_seconds";
/// The configured snapshot interval.
pub(crate) const SNAPSHOT_INTERVAL: &str = "toolsize_snapshot_interval_seconds";
/// How long the last snapshot written took, from when it was due to its rename.
pub(crate) const SNAPSHOT_WRITE: &str = "toolsize_snapshot_write_seconds";
/// How long the write-ahead log's replay took at start.
pub(crate) const WAL_REPLAY: &str = "toolsize_wal_replay_seconds";
/// Closed write-ahead log segments kept until a snapshot covers them.
pub(crate) const WAL_SEGMENTS: &str = "toolsize_wal_segments";
/// Groups of requests written to the write-ahead log, each with one fsync.
pub(crate) const WAL_SYNCS: &str = "toolsize_wal_syncs_total";
/// Snapshots found at start and not restored.
pub(crate) const SNAPSHOTS_REFUSED: &str = "toolsize_snapshots_refused_total";
/// Snapshots written.
pub(crate) const SNAPSHOTS_WRITTEN: &str = "toolsize_snapshots_written_total";
/// Snapshot writes failed.
pub(crate) const SNAPSHOT_FAILURES: &str = "toolsize_snapshot_failures_total";

/// Alert notifications, by sink (log, alertmanager, webhook) and outcome (success, failure).
pub(crate) const ALERT_NOTIFICATIONS: &str = "toolsize_alert_notifications_total";
/// Alerts the daemon holds firing, by `alertname` and `severity` (every enabled rule, 0 when quiet).
pub(crate) const ALERTS_FIRING: &str = "toolsize_alerts_firing";
/// Alert rule matches dropped (alert queue full, or too many alerts held).
pub(crate) const ALERT_EVENTS_DROPPED: &str = "toolsize_alert_events_dropped_total";
/// Alert rule matches, by rule (`alertname`) and `outcome` (sent, merged, deferred, dropped).
pub(crate) const ALERT_MATCHES: &str = "toolsize_alert_matches_total";

/// Cumulative context cost per tool: Σ over model requests of its result tokens each carried.
pub(crate) const TOOL_CONTEXT_TOKENS: &str = "toolsize_tool_context_tokens_total";
/// Tokens of a tool's results that entered a session's context.
pub(crate) const TOOL_RESULT_TOKENS: &str = "toolsize_tool_result_tokens_total";
/// Share of a model request's input tokens taken by one tool's carried results (histogram).
pub(crate) const TOOL_CONTEXT_SHARE: &str = "toolsize_tool_context_share";
/// Sessions the context ledger follows.
pub(crate) const CONTEXT_SESSIONS: &str = "toolsize_context_sessions";
/// `context.max_sessions`.
pub(crate) const CONTEXT_SESSIONS_LIMIT: &str = "toolsize_context_sessions_limit";
/// Context events of sessions past the cap, not followed.
pub(crate) const CONTEXT_SESSIONS_OVERFLOW: &str = "toolsize_context_sessions_overflow_total";
/// Results the ledger did not carry (`reason`: session_full, tools_full).
pub(crate) const CONTEXT_RESULTS_DROPPED: &str = "toolsize_context_results_dropped_total";
/// Sessions ended by `context.session_idle`.
pub(crate) const CONTEXT_SESSIONS_EXPIRED: &str = "toolsize_context_sessions_expired_total";
/// Results that arrived after a model request they preceded (not carried by it).
pub(crate) const CONTEXT_RESULTS_LATE: &str = "toolsize_context_results_late_total";

/// Every family `/metrics` can show, in no particular order.
pub const FAMILIES: &[&str] = &[
    TOOL_CALLS,
    TOOL_CALL_ERRORS,
    TOOL_RESULTS_TRUNCATED,
    TOOL_RESULTS_TRUNCATED_UPSTREAM,
    TOOL_RESULTS_SIZE_UNKNOWN,
    TOOL_SPANS,
    TOOL_RESULTS_SIZED,
    TOOL_RESULT_UPSTREAM_LIMIT,
    TOOL_RESULTS_OVER_CEILING,
    TOOL_RESULT_CEILING_BYTES,
    CEILING_BYTES,
    TOOL_RESULT_SIZE,
    TOOL_CALL_DURATION,
    TOOL_RESULT_SIZE_P50,
    TOOL_RESULT_SIZE_P95,
    TOOL_RESULT_SIZE_P99,
    TOOL_RESULT_SIZE_MAX,
    TOOL_CALL_DURATION_P95,
    OTLP_REQUESTS,
    OTLP_REQUESTS_REFUSED,
    SPANS_ACCEPTED,
    OTLP_REQUESTS_ACCEPTED,
    AGENT_SIGNALS,
    AGENT_CALLS_WAITING,
    FORWARD_REQUESTS,
    FORWARD_RETRIES,
    FORWARD_QUEUE,
    LOG_RECORDS_ACCEPTED,
    LOG_RECORDS_REFUSED,
    LOG_RECORDS_DROPPED,
    SPANS_REFUSED,
    SPANS_DROPPED,
    SERIES,
    SERIES_LIMIT,
    SERIES_OVERFLOW,
    VALUES_CLAMPED,
    SPAN_ATTRIBUTES_IGNORED,
    LABEL_VALUES_SANITIZED,
    ADMIN_REQUESTS_REFUSED,
    CONNECTIONS,
    CONNECTIONS_LIMIT,
    CONNECTIONS_CLOSED,
    SNAPSHOT_AGE,
    SNAPSHOT_INTERVAL,
    SNAPSHOT_WRITE,
    SNAPSHOTS_WRITTEN,
    SNAPSHOT_FAILURES,
    SNAPSHOTS_REFUSED,
    WAL_REPLAY,
    WAL_SEGMENTS,
    WAL_SYNCS,
    ALERT_NOTIFICATIONS,
    ALERTS_FIRING,
    ALERT_EVENTS_DROPPED,
    ALERT_MATCHES,
    TOOL_CONTEXT_TOKENS,
    TOOL_RESULT_TOKENS,
    TOOL_CONTEXT_SHARE,
    CONTEXT_SESSIONS,
    CONTEXT_SESSIONS_LIMIT,
    CONTEXT_SESSIONS_OVERFLOW,
    CONTEXT_RESULTS_DROPPED,
    CONTEXT_SESSIONS_EXPIRED,
    CONTEXT_RESULTS_LATE,
];

/// The families that are histograms (their series add `_bucket`, `_count` and `_sum`, or are
/// native histograms).
pub const HISTOGRAMS: &[&str] = &[TOOL_RESULT_SIZE, TOOL_CALL_DURATION, TOOL_CONTEXT_SHARE];
