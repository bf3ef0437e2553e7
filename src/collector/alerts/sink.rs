//! Where alerts go: the log (always), Alertmanager API v2 and a webhook (HTTP/1.1 POST, `http`
//! or, built with `tls`, `https`), whose body is Alertmanager's JSON list of `postableAlert`s, a
//! Slack incoming webhook's message or a PagerDuty Events API v2 event ([`WebhookFormat`]).
//!
//! Each HTTP sink is one task holding the latest alert set from a watch channel. When the set
//! changes it posts the alerts whose state it has not posted yet (a new alert goes out at once,
//! whatever the size of the set), in posts of at most [`Format::per_post`] alerts. An
//! Alertmanager-shaped sink also posts the whole set every resend interval (Alertmanager
//! resolves an alert whose `endsAt` passes); a Slack or PagerDuty sink posts changes only (a
//! channel must not get the set every minute; PagerDuty keys incidents by `dedup_key`). A
//! failure (connection refused, TLS handshake refused, timeout, non-2xx) is counted and retried
//! after a backoff doubling from [`BACKOFF_MIN`] up to [`BACKOFF_MAX`] (or the resend interval if
//! shorter), with the latest whole set (Alertmanager) or what is still unposted (Slack,
//! PagerDuty). Each post is bounded by [`POST_TIMEOUT`], connect and handshake included, so a
//! peer that never answers is a counted failure, never a stuck sink.
//!
//! Tokens and routing keys are never logged; a target is logged by its scheme and authority
//! (a Slack URL's path is its key).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{Alert, AlertState, AlertStats};
pub(crate) use crate::collector::config::WebhookFormat as Format;

/// First retry delay after a failed post.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest retry delay.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Longest time one post may take (connect included).
pub(crate) const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// Most alerts in one post to Alertmanager (about 1.5 KB each: a post stays under 1 MB).
pub(crate) const MAX_ALERTS_PER_POST: usize = 500;
/// Most alerts in one Slack message (a line each: well under Slack's 40,000 characters).
pub(crate) const MAX_ALERTS_PER_MESSAGE: usize = 20;
/// When a sink that does not resend wakes without a change: never, in practice.
const NO_RESEND: Duration = Duration::from_secs(365 * 24 * 3600);

impl Format {
    /// Most alerts in one post (PagerDuty takes one event per request).
    pub(crate) fn per_post(self) -> usize {
        match self {
            Format::Alertmanager => MAX_ALERTS_PER_POST,
            Format::Slack => MAX_ALERTS_PER_MESSAGE,
            Format::Pagerduty => 1,
        }
    }

    /// Whether the whole set is posted again every resend interval.
    pub(crate) fn resends(self) -> bool {
        self == Format::Alertmanager
    }
}

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

/// One HTTP sink. Its `Debug` leaves the token out.
#[derive(Clone)]
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
    /// The body's shape.
    pub(crate) format: Format,
}

impl std::fmt::Debug for HttpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSink")
            .field("kind", &self.kind)
            .field("target", &self.target)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
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

/// Slack's escaping of `&`, `<` and `>` in message text.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A Slack incoming webhook's message: one line per alert, its state, name, summary and
/// runbook link.
pub(crate) fn slack_payload<'a>(
    alerts: impl IntoIterator<Item = &'a Alert>,
    generator_url: &str,
) -> Vec<u8> {
    let lines: Vec<String> = alerts
        .into_iter()
        .map(|a| {
            let (mark, state) = match a.state {
                AlertState::Firing => (":rotating_light:", "FIRING"),
                AlertState::Resolved => (":white_check_mark:", "RESOLVED"),
            };
            let summary = a.annotations.get("summary").map_or("", String::as_str);
            let mut line = format!(
                "{mark} *{state}* `{}` {}",
                slack_escape(&a.name),
                slack_escape(summary)
            );
            if let Some(base) = generator_url.strip_suffix("/api/v1/alerts") {
                let anchor = crate::collector::alerts::runbook::anchor(&a.name);
                line.push_str(&format!(" <{base}/runbook#{anchor}|runbook>"));
            }
            line
        })
        .collect();
    let text = lines.join("\n");
    serde_json::to_vec(&serde_json::json!({ "text": text })).unwrap_or_default()
}

/// PagerDuty's severity for the alert's `severity` label: its own four as they are, `page`
/// critical, anything else a warning.
fn pagerduty_severity(label: Option<&String>) -> &'static str {
    match label.map(String::as_str) {
        Some("critical" | "page") => "critical",
        Some("error") => "error",
        Some("info") => "info",
        _ => "warning",
    }
}

/// A PagerDuty Events API v2 event: `trigger` for a firing alert, `resolve` for a resolved one,
/// keyed by the alert's fingerprint.
pub(crate) fn pagerduty_payload(a: &Alert, routing_key: &str, generator_url: &str) -> Vec<u8> {
    let body = match a.state {
        AlertState::Resolved => serde_json::json!({
            "routing_key": routing_key,
            "event_action": "resolve",
            "dedup_key": a.fingerprint,
        }),
        AlertState::Firing => {
            let summary = a
                .annotations
                .get("summary")
                .cloned()
                .unwrap_or_else(|| a.name.clone());
            // PagerDuty refuses a summary over 1024 characters.
            let summary: String = summary.chars().take(1024).collect();
            let source = match (a.labels.get("service"), a.labels.get("tool")) {
                (Some(s), Some(t)) => format!("{s}/{t}"),
                (Some(s), None) => s.clone(),
                _ => "toolsize".into(),
            };
            let mut details: serde_json::Map<String, serde_json::Value> = a
                .labels
                .iter()
                .chain(&a.annotations)
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            details.insert("fingerprint".into(), a.fingerprint.clone().into());
            let mut event = serde_json::json!({
                "routing_key": routing_key,
                "event_action": "trigger",
                "dedup_key": a.fingerprint,
                "client": "toolsize",
                "client_url": generator_url,
                "payload": {
                    "summary": summary,
                    "source": source,
                    "severity": pagerduty_severity(a.labels.get("severity")),
                    "timestamp": super::rfc3339(a.starts_at),
                    "class": a.name,
                    "component": a.labels.get("tool"),
                    "group": a.labels.get("service"),
                    "custom_details": details,
                },
            });
            if let Some(base) = generator_url.strip_suffix("/api/v1/alerts") {
                let anchor = crate::collector::alerts::runbook::anchor(&a.name);
                event["links"] = serde_json::json!([
                    { "href": format!("{base}/runbook#{anchor}"), "text": "Runbook" }
                ]);
            }
            event
        }
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Posts `alerts` in posts of at most [`Format::per_post`]; stops at the first failure. Returns
/// how many alerts went out, and the failure if one stopped it.
async fn post_all(
    sink: &HttpSink,
    alerts: &[&Alert],
    stats: &AlertStats,
) -> (usize, Result<(), String>) {
    let mut done = 0;
    for chunk in alerts.chunks(sink.format.per_post()) {
        let (body, bearer) = match sink.format {
            Format::Alertmanager => (
                payload(
                    chunk.iter().copied(),
                    SystemTime::now(),
                    sink.resend,
                    &sink.generator_url,
                ),
                sink.token.as_deref(),
            ),
            Format::Slack => (
                slack_payload(chunk.iter().copied(), &sink.generator_url),
                sink.token.as_deref(),
            ),
            Format::Pagerduty => (
                pagerduty_payload(
                    chunk[0],
                    sink.token.as_deref().unwrap_or(""),
                    &sink.generator_url,
                ),
                None,
            ),
        };
        let post = sink.target.post("application/json", bearer, body);
        let outcome = match tokio::time::timeout(POST_TIMEOUT, post).await {
            Ok(r) => r,
            Err(_) => Err("timed out".into()),
        };
        stats.notification(sink.kind, outcome.is_ok());
        if outcome.is_err() {
            return (done, outcome);
        }
        done += chunk.len();
    }
    (done, Ok(()))
}

/// Runs one HTTP sink until the alert task stops.
pub(crate) async fn run(
    sink: HttpSink,
    mut alerts: watch::Receiver<Arc<Vec<Alert>>>,
    stats: Arc<AlertStats>,
) {
    let resends = sink.format.resends();
    let every = if resends { sink.resend } else { NO_RESEND };
    let cap = BACKOFF_MAX.min(sink.resend).max(BACKOFF_MIN);
    let mut backoff = BACKOFF_MIN;
    let mut pending = false;
    let mut next = Instant::now() + every;
    let origin = sink.target.origin();
    // The state each alert had when it was last posted, by fingerprint.
    let mut posted: HashMap<String, AlertState> = HashMap::new();
    loop {
        let timer = tokio::select! {
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
        // The resend timer of an Alertmanager-shaped sink: the whole set goes out.
        let whole = timer && resends;
        let current = alerts.borrow_and_update().clone();
        let send: Vec<&Alert> = if whole || (pending && resends) {
            current.iter().collect()
        } else {
            current
                .iter()
                .filter(|a| posted.get(&a.fingerprint) != Some(&a.state))
                .collect()
        };
        if send.is_empty() {
            if timer {
                pending = false;
                next = Instant::now() + every;
            }
            continue;
        }
        let (done, outcome) = post_all(&sink, &send, &stats).await;
        if (whole || pending) && resends && outcome.is_ok() {
            posted.clear();
        }
        posted.extend(
            send[..done]
                .iter()
                .map(|a| (a.fingerprint.clone(), a.state)),
        );
        match outcome {
            Ok(()) => {
                if pending {
                    tracing::info!(
                        sink = sink.kind.as_str(),
                        target = %origin,
                        alerts = current.len(),
                        "Alert sink recovered."
                    );
                }
                if timer || pending {
                    next = Instant::now() + every;
                }
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
                        target = %origin,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::alerts::tests::m;
    use crate::collector::alerts::Engine;
    use std::time::UNIX_EPOCH;

    const GENERATOR: &str = "http://127.0.0.1:9464/api/v1/alerts";

    #[test]
    fn slack_lines_escape_the_three_characters() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut e = Engine::default();
        let mut a = e.on_match(m("a<b>&c", 60), t0).unwrap();
        a.annotations
            .insert("summary".into(), "tool <a> & friends".into());
        let body: serde_json::Value =
            serde_json::from_slice(&slack_payload([&a], GENERATOR)).unwrap();
        assert_eq!(
            body["text"],
            ":rotating_light: *FIRING* `ToolResultOverCeiling` tool &lt;a&gt; &amp; friends \
             <http://127.0.0.1:9464/runbook#toolresultoverceiling|runbook>"
        );
    }

    #[test]
    fn pagerduty_resolves_by_the_same_dedup_key() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut e = Engine::default();
        let mut a = e.on_match(m("fetch", 60), t0).unwrap();
        let fire: serde_json::Value =
            serde_json::from_slice(&pagerduty_payload(&a, "rk", GENERATOR)).unwrap();
        assert_eq!(fire["event_action"], "trigger");
        assert_eq!(fire["payload"]["severity"], "warning", "no severity label");
        assert_eq!(fire["payload"]["summary"], "ToolResultOverCeiling");
        assert_eq!(fire["payload"]["timestamp"], "2027-01-15T08:00:00.000Z");
        a.state = AlertState::Resolved;
        let resolve: serde_json::Value =
            serde_json::from_slice(&pagerduty_payload(&a, "rk", GENERATOR)).unwrap();
        assert_eq!(
            resolve,
            serde_json::json!({"routing_key": "rk", "event_action": "resolve", "dedup_key": a.fingerprint})
        );
        assert_eq!(fire["dedup_key"], resolve["dedup_key"]);
        for (label, sev) in [
            ("page", "critical"),
            ("ticket", "warning"),
            ("info", "info"),
        ] {
            assert_eq!(pagerduty_severity(Some(&label.to_string())), sev);
        }
    }

    #[test]
    fn only_alertmanager_resends() {
        assert!(Format::Alertmanager.resends());
        assert!(!Format::Slack.resends());
        assert!(!Format::Pagerduty.resends());
        assert_eq!(Format::Pagerduty.per_post(), 1);
    }
}
