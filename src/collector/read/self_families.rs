//! The daemon's own families of `/metrics`, each described once next to the others of the
//! same owner of numbers: the receivers, the series cap, the joiner, forwarding, recognition,
//! the admin API, the listeners, the store and the alerts. Called in exposition order by
//! [`super::families::write_families`]; a new self-metric is one family in its owner's function
//! here and one name in [`super::names`]. Each writes counters kept elsewhere (the receivers'
//! [`SelfStatsView`], the listeners', the alert engine's, or the aggregator's [`Frame`]); none
//! counts anything itself.

use crate::collector::alerts::rules::{MatchOutcome, RuleKind};
use crate::collector::alerts::sink::SinkKind;
use crate::collector::alerts::AlertStats;
use crate::collector::forward::UpstreamView;
use crate::collector::net::listener::{Closed, Listener, ListenerStats};
use crate::collector::state::join::JoinStats;
use crate::collector::stats::{LabelCuts, OtlpSignal, RefusedRequest, SelfStatsView};

use super::exposition::{Frame, Kind, Sink, Value};
use super::names::*;

/// A family of one sample without labels.
pub(super) fn single(sink: &mut impl Sink, name: &str, kind: Kind, help: &str, n: u64) {
    sink.family(name, kind, help);
    sink.sample(None, &[], Value::Int(n));
}

/// A family of one sample per value of `label`.
pub(super) fn by<'a>(
    sink: &mut impl Sink,
    (name, kind, help): (&str, Kind, &str),
    label: &str,
    samples: impl IntoIterator<Item = (&'a str, u64)>,
) {
    sink.family(name, kind, help);
    for (value, n) in samples {
        sink.sample(None, &[(label, value)], Value::Int(n));
    }
}

/// The receivers' counters ([`SelfStats`]): OTLP requests, log records and spans.
pub(super) fn requests(v: &SelfStatsView, sink: &mut impl Sink) {
    let counter = |name, help| (name, Kind::Counter, help);
    by(
        sink,
        counter(OTLP_REQUESTS, "OTLP export requests received."),
        "transport",
        [("grpc", v.requests_grpc), ("http", v.requests_http)],
    );
    by(
        sink,
        counter(
            OTLP_REQUESTS_REFUSED,
            "OTLP export requests refused as a whole, by reason.",
        ),
        "reason",
        RefusedRequest::ALL.map(|r| (r.as_str(), *v.refused_requests.of(r))),
    );
    by(
        sink,
        counter(
            OTLP_REQUESTS_ACCEPTED,
            "OTLP export requests accepted, by signal: traces and logs are read for tool calls, metrics acknowledged.",
        ),
        "signal",
        OtlpSignal::ALL.map(|s| (s.as_str(), *v.accepted_requests.of(s))),
    );
    let logs = &v.log_records;
    by(
        sink,
        counter(
            LOG_RECORDS_ACCEPTED,
            "Log records accepted: tool calls of coding agents recorded, other records ignored.",
        ),
        "kind",
        [("tool", logs.tool), ("other", logs.other)],
    );
    by(
        sink,
        counter(LOG_RECORDS_REFUSED, "Log records refused, by reason."),
        "reason",
        [
            ("invalid_size", logs.invalid_size),
            ("overloaded", logs.overloaded),
            ("aggregator_stopped", logs.stopped),
            ("wal_failed", logs.wal),
        ],
    );
    single(
        sink,
        LOG_RECORDS_DROPPED,
        Kind::Counter,
        "Tool-call log records accepted and then lost: queued when the aggregator stopped.",
        logs.dropped,
    );
    by(
        sink,
        counter(
            SPANS_ACCEPTED,
            "Spans accepted: tool spans recorded, other spans ignored.",
        ),
        "kind",
        [("tool", v.spans_tool), ("other", v.spans_other)],
    );
    by(
        sink,
        counter(SPANS_REFUSED, "Spans refused, by reason."),
        "reason",
        [
            ("invalid", v.spans_invalid),
            ("invalid_size", v.spans_invalid_size),
            ("overloaded", v.spans_overloaded),
            ("aggregator_stopped", v.spans_stopped),
            ("wal_failed", v.spans_wal),
        ],
    );
    single(
        sink,
        SPANS_DROPPED,
        Kind::Counter,
        "Tool spans accepted and then lost: queued when the aggregator stopped.",
        v.spans_dropped,
    );
}

/// The aggregator's series: how many, the cap, the overflow, values clamped.
pub(super) fn series_cap(frame: &Frame, sink: &mut impl Sink) {
    single(
        sink,
        SERIES,
        Kind::Gauge,
        "(service, tool) series held, overflow included.",
        frame.series.len() as u64,
    );
    single(
        sink,
        SERIES_LIMIT,
        Kind::Gauge,
        "Cardinality cap on (service, tool) series.",
        frame.max_series as u64,
    );
    single(
        sink,
        SERIES_OVERFLOW,
        Kind::Counter,
        "Tool results recorded in the overflow series because the cap was reached.",
        frame.overflow_records,
    );
    let c = frame.clamped;
    by(
        sink,
        (
            VALUES_CLAMPED,
            Kind::Counter,
            "Values above a histogram's highest trackable value (1 GiB, one hour), recorded at it.",
        ),
        "histogram",
        [("size", c.size), ("latency", c.latency)],
    );
}

/// The joiner of coding agents' signals ([`crate::collector::state::join`]): what it did with
/// them, and the calls waiting.
pub(super) fn joiner((joins, waiting): (JoinStats, usize), sink: &mut impl Sink) {
    by(
        sink,
        (
            AGENT_SIGNALS,
            Kind::Counter,
            "Signals of coding agents' tool calls joined into one record per call: merged into a call another signal opened, late (after the call was counted), orphan calls (parts alone), unjoined (too many calls waiting).",
        ),
        "outcome",
        [
            ("merged", joins.merged),
            ("late", joins.late),
            ("orphan", joins.orphans),
            ("unjoined", joins.unjoined),
        ],
    );
    single(
        sink,
        AGENT_CALLS_WAITING,
        Kind::Gauge,
        "Coding agents' tool calls waiting for their other signals (at most one join window).",
        waiting as u64,
    );
}

/// Forwarding ([`crate::collector::forward`]): each upstream's requests by outcome, retries
/// and queue.
pub(super) fn forward(upstreams: &[UpstreamView], sink: &mut impl Sink) {
    let int = Value::Int;
    sink.family(
        FORWARD_REQUESTS,
        Kind::Counter,
        "Accepted OTLP requests relayed to an upstream, by outcome: sent, dropped for a full queue (queue_full), given up after retries or refused for good (gave_up).",
    );
    for u in upstreams {
        for (outcome, n) in [
            ("sent", u.sent),
            ("queue_full", u.queue_full),
            ("gave_up", u.gave_up),
        ] {
            sink.sample(
                None,
                &[("upstream", &u.upstream), ("outcome", outcome)],
                int(n),
            );
        }
    }
    sink.family(
        FORWARD_RETRIES,
        Kind::Counter,
        "Attempts to relay a request to an upstream that were retried.",
    );
    for u in upstreams {
        sink.sample(None, &[("upstream", &u.upstream)], int(u.retries));
    }
    sink.family(
        FORWARD_QUEUE,
        Kind::Gauge,
        "Requests waiting for or in flight to an upstream.",
    );
    for u in upstreams {
        sink.sample(None, &[("upstream", &u.upstream)], int(u.queued));
    }
}

/// Recognition: span attributes past the ones it looks at.
pub(super) fn attributes_ignored(v: &SelfStatsView, sink: &mut impl Sink) {
    single(
        sink,
        SPAN_ATTRIBUTES_IGNORED,
        Kind::Counter,
        "Span attributes past the first 255 of their span, not looked at by recognition.",
        v.attributes_ignored,
    );
}

/// The admin API: requests refused.
pub(super) fn admin(v: &SelfStatsView, sink: &mut impl Sink) {
    by(
        sink,
        (
            ADMIN_REQUESTS_REFUSED,
            Kind::Counter,
            "Admin API requests refused for a missing or wrong token.",
        ),
        "reason",
        [("unauthenticated", v.admin_unauthenticated)],
    );
}

/// The listeners ([`ListenerStats`]): connections open, their cap, connections closed.
pub(super) fn listeners(l: &ListenerStats, sink: &mut impl Sink) {
    by(
        sink,
        (CONNECTIONS, Kind::Gauge, "Connections open, by listener."),
        "listener",
        Listener::ALL.map(|x| (x.as_str(), l.open(x))),
    );
    by(
        sink,
        (
            CONNECTIONS_LIMIT,
            Kind::Gauge,
            "Connection cap of each listener, after fitting under the open-file limit.",
        ),
        "listener",
        Listener::ALL.map(|x| (x.as_str(), l.limit(x))),
    );
    sink.family(
        CONNECTIONS_CLOSED,
        Kind::Counter,
        "Connections the daemon closed: over the cap with every connection busy (limit), idle longest when a new one came at the cap (evicted), request head or HTTP/2 preface late (header_timeout), silent too long (idle_timeout), TLS handshake failed or late (tls_handshake).",
    );
    for x in Listener::ALL {
        for r in Closed::ALL {
            sink.sample(
                None,
                &[("listener", x.as_str()), ("reason", r.as_str())],
                Value::Int(l.closed(x, r)),
            );
        }
    }
}

/// Service and tool names cut or cleaned before they became labels.
pub(super) fn label_cuts(cuts: LabelCuts, sink: &mut impl Sink) {
    sink.family(
        LABEL_VALUES_SANITIZED,
        Kind::Counter,
        "Tool spans whose service or tool name was cut to its byte limit (too_long) or had control or format characters replaced (hidden_characters).",
    );
    for (label, cuts) in [("service", cuts.service), ("tool", cuts.tool)] {
        for (reason, n) in [
            ("too_long", cuts.too_long),
            ("hidden_characters", cuts.hidden_characters),
        ] {
            sink.sample(None, &[("label", label), ("reason", reason)], Value::Int(n));
        }
    }
}

/// The store's snapshots: with a data directory, the age of what is on disk, the interval and
/// the last write's duration; always, written, failed and refused at start.
pub(super) fn snapshots(v: &SelfStatsView, sink: &mut impl Sink) {
    if v.snapshot_interval_ms > 0 {
        let now_ms = crate::collector::state::now_unix_ms();
        let secs = |ms: u64| Value::Float(ms as f64 / 1000.0);
        for (name, help, value) in [
            (
                SNAPSHOT_AGE,
                "Seconds since the capture of the last snapshot written to disk (or since the start): what arrived since is in memory only.",
                secs(now_ms.saturating_sub(v.snapshot_durable_ms)),
            ),
            (
                SNAPSHOT_INTERVAL,
                "The configured interval between snapshots, seconds.",
                secs(v.snapshot_interval_ms),
            ),
            (
                SNAPSHOT_WRITE,
                "Seconds the last snapshot written took from when it was due to its rename (captured on the aggregator; built, encoded, written and fsynced off it).",
                Value::Float(v.snapshot_write_us as f64 / 1e6),
            ),
        ] {
            sink.family(name, Kind::Gauge, help);
            sink.sample(None, &[], value);
        }
    }
    if v.wal_enabled {
        for (name, help, value) in [
            (
                WAL_REPLAY,
                "Seconds the replay of the write-ahead log took at start.",
                Value::Float(v.wal_replay_us as f64 / 1e6),
            ),
            (
                WAL_SEGMENTS,
                "Closed write-ahead log segments kept until a snapshot covers them (requests are refused past 16).",
                Value::Int(v.wal_segments),
            ),
        ] {
            sink.family(name, Kind::Gauge, help);
            sink.sample(None, &[], value);
        }
        single(
            sink,
            WAL_SYNCS,
            Kind::Counter,
            "Groups of requests written to the write-ahead log, each in one write with one fsync.",
            v.wal_syncs,
        );
    }
    single(
        sink,
        SNAPSHOTS_WRITTEN,
        Kind::Counter,
        "Snapshots written to disk.",
        v.snapshots_written,
    );
    single(
        sink,
        SNAPSHOT_FAILURES,
        Kind::Counter,
        "Snapshot writes that failed.",
        v.snapshot_failures,
    );
    single(
        sink,
        SNAPSHOTS_REFUSED,
        Kind::Counter,
        "Snapshots found at start and not restored (damaged, unreadable, or of a newer format); the log says why.",
        v.snapshots_refused,
    );
}

/// The alert engine and task ([`AlertStats`]): notifications, matches, alerts firing.
pub(super) fn alert_stats(alerts: &AlertStats, sink: &mut impl Sink) {
    let int = Value::Int;
    sink.family(
        ALERT_NOTIFICATIONS,
        Kind::Counter,
        "Alert notifications, by sink and outcome.",
    );
    for kind in SinkKind::ALL {
        for (ok, outcome) in [(true, "success"), (false, "failure")] {
            sink.sample(
                None,
                &[("sink", kind.as_str()), ("outcome", outcome)],
                int(alerts.notifications(kind, ok)),
            );
        }
    }
    single(
        sink,
        ALERT_EVENTS_DROPPED,
        Kind::Counter,
        "Alert rule matches dropped because the alert table was full.",
        alerts.events_dropped(),
    );
    sink.family(
        ALERT_MATCHES,
        Kind::Counter,
        "Alert rule matches, by rule and outcome: sent (a new alert or a resend), merged into an alert already firing, deferred while the alert queue was full, dropped past the retry queue, engine_stopped when the alert task had stopped.",
    );
    for rule in RuleKind::ALL {
        for outcome in MatchOutcome::ALL {
            sink.sample(
                None,
                &[("alertname", rule.name()), ("outcome", outcome.as_str())],
                int(alerts.matches(rule, outcome)),
            );
        }
    }
    sink.family(
        ALERTS_FIRING,
        Kind::Gauge,
        "Alerts the daemon holds firing, by rule and severity.",
    );
    for ((name, severity), n) in alerts.firing() {
        sink.sample(
            None,
            &[("alertname", &name), ("severity", &severity)],
            int(n),
        );
    }
}
