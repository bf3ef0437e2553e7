//! Where alerts go: the log (always), Alertmanager API v2 and a webhook (HTTP/1.1 POST of a
//! JSON list of `postableAlert`s).
//!
//! Each HTTP sink is one task holding the latest alert set from a watch channel. When the set
//! changes it posts the alerts whose state it has not posted yet (a new alert goes out at once,
//! whatever the size of the set), and every resend interval it posts the whole set; either way
//! in posts of at most [`MAX_ALERTS_PER_POST`] alerts. A failure (connection refused, timeout,
//! non-2xx) is retried after a backoff doubling from [`BACKOFF_MIN`] up to [`BACKOFF_MAX`] (or
//! the resend interval if shorter), always with the latest whole set. Each post is bounded by
//! [`POST_TIMEOUT`]. Only `http://` URLs are supported.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{Alert, AlertState, AlertStats};

/// First retry delay after a failed post.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest retry delay.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Longest time one post may take (connect included).
pub(crate) const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// Most alerts in one post (about 1.5 KB each: a post stays under 1 MB).
pub(crate) const MAX_ALERTS_PER_POST: usize = 500;

/// A sink, as the `sink` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SinkKind {
    /// The daemon's log.
    Log = 0,
    /// Alertmanager API v2.
    Alertmanager = 1,
    /// The webhook.
    Webhook = 2,
}

impl SinkKind {
    /// Every sink, in exposition order.
    pub(crate) const ALL: [SinkKind; 3] =
        [SinkKind::Log, SinkKind::Alertmanager, SinkKind::Webhook];

    /// The `sink` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SinkKind::Log => "log",
            SinkKind::Alertmanager => "alertmanager",
            SinkKind::Webhook => "webhook",
        }
    }
}

/// Writes one log line for a state change: names, labels, sizes and hashes only.
pub(crate) fn log(a: &Alert) {
    let get = |k: &str| {
        a.labels
            .get(k)
            .or_else(|| a.annotations.get(k))
            .map(String::as_str)
            .unwrap_or("")
    };
    match a.state {
        AlertState::Firing => tracing::warn!(
            alertname = %a.name,
            state = a.state.as_str(),
            fingerprint = %a.fingerprint,
            service = get("service"),
            tool = get("tool"),
            layer = get("layer"),
            severity = get("severity"),
            bytes = get("bytes"),
            ceiling = get("ceiling"),
            unit = get("unit"),
            trace_id = get("trace_id"),
            args_hash = get("args_hash"),
            "Alert firing."
        ),
        AlertState::Resolved => tracing::info!(
            alertname = %a.name,
            state = a.state.as_str(),
            fingerprint = %a.fingerprint,
            service = get("service"),
            tool = get("tool"),
            layer = get("layer"),
            args_hash = get("args_hash"),
            "Alert resolved."
        ),
    }
}

pub(crate) use crate::collector::net::client::Target;

/// One HTTP sink.
#[derive(Debug, Clone)]
pub(crate) struct HttpSink {
    /// Alertmanager or webhook.
    pub(crate) kind: SinkKind,
    /// Where to post.
    pub(crate) target: Target,
    /// Bearer token.
    pub(crate) token: Option<String>,
    /// Resend interval.
    pub(crate) resend: Duration,
    /// `generatorURL` of every alert.
    pub(crate) generator_url: String,
}

/// The body posted: every alert of `alerts` as a `postableAlert`.
pub(crate) fn payload<'a>(
    alerts: impl IntoIterator<Item = &'a Alert>,
    now: SystemTime,
    resend: Duration,
    generator_url: &str,
) -> Vec<u8> {
    let list: Vec<serde_json::Value> = alerts
        .into_iter()
        .map(|a| a.postable(now, resend, generator_url))
        .collect();
    serde_json::to_vec(&list).unwrap_or_else(|_| b"[]".to_vec())
}

/// Posts `alerts` in posts of at most [`MAX_ALERTS_PER_POST`]; stops at the first failure.
async fn post_all(sink: &HttpSink, alerts: &[&Alert], stats: &AlertStats) -> Result<(), String> {
    for chunk in alerts.chunks(MAX_ALERTS_PER_POST) {
        let body = payload(
            chunk.iter().copied(),
            SystemTime::now(),
            sink.resend,
            &sink.generator_url,
        );
        let post = sink
            .target
            .post("application/json", sink.token.as_deref(), body);
        let outcome = match tokio::time::timeout(POST_TIMEOUT, post).await {
            Ok(r) => r,
            Err(_) => Err("timed out".into()),
        };
        stats.notification(sink.kind, outcome.is_ok());
        outcome?;
    }
    Ok(())
}

/// Runs one HTTP sink until the alert task stops.
pub(crate) async fn run(
    sink: HttpSink,
    mut alerts: watch::Receiver<Arc<Vec<Alert>>>,
    stats: Arc<AlertStats>,
) {
    let cap = BACKOFF_MAX.min(sink.resend).max(BACKOFF_MIN);
    let mut backoff = BACKOFF_MIN;
    let mut pending = false;
    let mut next = Instant::now() + sink.resend;
    // The state each alert had when it was last posted, by fingerprint.
    let mut posted: HashMap<String, AlertState> = HashMap::new();
    loop {
        let whole = tokio::select! {
            changed = alerts.changed() => {
                if changed.is_err() {
                    return;
                }
                if pending {
                    // Backing off: the next attempt takes the latest set anyway.
                    continue;
                }
                false
            }
            _ = tokio::time::sleep_until(next) => true,
        };
        let current = alerts.borrow_and_update().clone();
        let send: Vec<&Alert> = if whole || pending {
            current.iter().collect()
        } else {
            current
                .iter()
                .filter(|a| posted.get(&a.fingerprint) != Some(&a.state))
                .collect()
        };
        if send.is_empty() {
            if whole {
                pending = false;
                next = Instant::now() + sink.resend;
            }
            continue;
        }
        match post_all(&sink, &send, &stats).await {
            Ok(()) => {
                if pending {
                    tracing::info!(
                        sink = sink.kind.as_str(),
                        target = %sink.target.authority,
                        alerts = current.len(),
                        "Alert sink recovered."
                    );
                }
                if whole || pending {
                    posted.clear();
                    next = Instant::now() + sink.resend;
                }
                posted.extend(send.iter().map(|a| (a.fingerprint.clone(), a.state)));
                // Forget alerts no longer in the set.
                if posted.len() > current.len() {
                    let live: std::collections::HashSet<&str> =
                        current.iter().map(|a| a.fingerprint.as_str()).collect();
                    posted.retain(|fp, _| live.contains(fp.as_str()));
                }
                pending = false;
                backoff = BACKOFF_MIN;
            }
            Err(error) => {
                if !pending {
                    tracing::warn!(
                        sink = sink.kind.as_str(),
                        target = %sink.target.authority,
                        alerts = current.len(),
                        %error,
                        "Alert notification failed; retrying with backoff."
                    );
                }
                pending = true;
                next = Instant::now() + backoff;
                backoff = (backoff * 2).min(cap);
            }
        }
    }
}
