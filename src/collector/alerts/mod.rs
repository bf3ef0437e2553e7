//! Built-in alerts: rules fed by the aggregator, deduplicated firing/resolved state, delivery to
//! the log, Alertmanager (API v2) and a webhook.
//!
//! ```text
//!  aggregator ── try_send ──▶ alert task ── watch (current set) ──▶ one task per HTTP sink
//!  (rules.rs: verdict)  (bounded) (Engine: dedup, resolve)           (sink.rs: send, resend, retry)
//!                                  └─▶ log line per state change, /api/v1/alerts view
//! ```
//!
//! - **States.** An alert is identified by its labels (the [`Alert::fingerprint`] is a hash of
//!   them). The first matching event fires it; later events with the same labels only refresh
//!   its annotations and its last-seen time. It resolves when no event came for its quiet period
//!   (`ToolResultOverCeiling`: `alerts.over_ceiling.quiet_period`; `ToolArgsRepeatedlyOversize`:
//!   its window; the window rules: 3 × `alerts.evaluation_interval`). A resolved alert that
//!   fires again starts a new episode with a new `startsAt`. Firing alerts are kept in the
//!   snapshot ([`SavedAlert`]) and restored silently with their `startsAt`.
//! - **Delivery off the hot path.** The rules ([`rules`]) deduplicate on the aggregator before
//!   they build anything and `try_send` only new alerts and resends on a bounded channel
//!   ([`EVENT_QUEUE_CAPACITY`]); when it is full the events wait in a bounded queue on the
//!   aggregator, new alerts first, and every match is counted by outcome
//!   (`toolsize_alert_matches_total`). The aggregator never waits.
//! - **Room for every alert.** The table holds [`capacity`] alerts: every (service, tool) of
//!   the series cap times every rule and layer, so a new alert is never refused because others
//!   are hot (past it, matches are dropped and counted in `toolsize_alert_events_dropped_total`).
//! - **Sinks are state-based.** The alert task publishes the whole current set (firing alerts,
//!   and resolved ones for [`RESOLVED_RESEND`]) on a watch channel. Each HTTP sink posts what
//!   changed at once (a new alert does not wait behind the others), and the whole set every
//!   resend interval (firing alerts with `endsAt = now + 4 × interval`, resolved ones with their
//!   resolution time), in posts of at most [`sink::MAX_ALERTS_PER_POST`] alerts. A failed post is
//!   retried with exponential backoff from the latest set, so an outage shorter than
//!   `4 × interval` loses nothing and the retry "queue" is bounded by the table. Sends and
//!   failures are counted in `toolsize_alert_notifications_total{sink,outcome}`.
//! - The log sink writes one structured line per state change, with sizes and hashes only.

pub mod rules;
pub(crate) mod runbook;
pub(crate) mod sink;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};

use crate::collector::config::Config;

pub use rules::names::*;
pub use rules::Severity;

/// Capacity of the channel from the aggregator to the alert task, in events.
pub const EVENT_QUEUE_CAPACITY: usize = 1024;
/// Fewest alerts held at once (firing plus recently resolved); the daemon holds [`capacity`].
pub(crate) const MAX_ALERTS: usize = 1000;

/// Alerts the daemon holds: enough for every alert its rules can make, one per (series, rule)
/// and one per (series, layer) over the ceiling, and at least [`MAX_ALERTS`]. Recently resolved
/// alerts are forgotten first when it is reached.
pub(crate) fn capacity(config: &Config) -> usize {
    let per_series = rules::RuleKind::ALL.len() + config.stack.layers().len();
    (config.aggregation.max_series + 1)
        .saturating_mul(per_series)
        .max(MAX_ALERTS)
}
/// How long a resolved alert is still sent (and listed on `/api/v1/alerts`), so an Alertmanager
/// restarted meanwhile still learns the resolution.
pub(crate) const RESOLVED_RESEND: Duration = Duration::from_secs(300);
/// How often the alert task looks for alerts to resolve.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// Firing or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlertState {
    /// Still matching.
    Firing,
    /// Quiet for its quiet period.
    Resolved,
}

impl AlertState {
    /// `firing` or `resolved`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
        }
    }
}

/// One alert.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Alert {
    /// `alertname`.
    pub(crate) name: String,
    /// Identifying labels, `alertname` included.
    pub(crate) labels: BTreeMap<String, String>,
    /// Non-identifying details; the latest event's win.
    pub(crate) annotations: BTreeMap<String, String>,
    /// When this episode started.
    pub(crate) starts_at: SystemTime,
    /// When it resolved (`None` while firing).
    pub(crate) ends_at: Option<SystemTime>,
    /// Firing or resolved.
    pub(crate) state: AlertState,
    /// Hash of the labels, hex.
    pub(crate) fingerprint: String,
}

/// The fingerprint of a label set: the first 16 hex digits of the SHA-1 of `k=v\n` lines.
pub(crate) fn fingerprint(labels: &BTreeMap<String, String>) -> String {
    use sha1::{Digest, Sha1};
    let mut h = Sha1::new();
    for (k, v) in labels {
        h.update(k.as_bytes());
        h.update(b"=");
        h.update(v.as_bytes());
        h.update(b"\n");
    }
    crate::hex::encode(&h.finalize()[..8])
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-01-01T00:00:00.000Z`.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let ms = unix_ms(t);
    let (secs, ms) = (ms / 1000, ms % 1000);
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Alert {
    /// The Alertmanager API v2 `postableAlert`: firing alerts end at `now + 4 × resend`, resolved
    /// ones at their resolution time. A `runbook_url` annotation points at the daemon's own
    /// `/runbook` section for the alert.
    pub(crate) fn postable(&self, now: SystemTime, resend: Duration, generator_url: &str) -> Value {
        let ends_at = match (self.state, self.ends_at) {
            (AlertState::Resolved, Some(t)) => t,
            _ => now + resend * 4,
        };
        let mut annotations = self.annotations.clone();
        if let Some(base) = generator_url.strip_suffix("/api/v1/alerts") {
            annotations.entry("runbook_url".into()).or_insert_with(|| {
                format!(
                    "{base}/runbook#{}",
                    crate::collector::alerts::runbook::anchor(&self.name)
                )
            });
        }
        json!({
            "labels": self.labels,
            "annotations": annotations,
            "startsAt": rfc3339(self.starts_at),
            "endsAt": rfc3339(ends_at),
            "generatorURL": generator_url,
        })
    }

    /// The `/api/v1/alerts` entry. `runbook_url` is the alert's section of the runbook: its
    /// `runbook_url` annotation when it has one, else `/runbook#anchor` on the admin listener
    /// that serves this answer.
    pub(crate) fn to_json(&self) -> Value {
        let runbook_url = self
            .annotations
            .get("runbook_url")
            .cloned()
            .unwrap_or_else(|| {
                format!(
                    "/runbook#{}",
                    crate::collector::alerts::runbook::anchor(&self.name)
                )
            });
        json!({
            "name": self.name,
            "state": self.state.as_str(),
            "fingerprint": self.fingerprint,
            "labels": self.labels,
            "annotations": self.annotations,
            "runbook_url": runbook_url,
            "startsAt": rfc3339(self.starts_at),
            "endsAt": self.ends_at.map(rfc3339),
        })
    }
}

/// What a rule matched: the alert's labels and annotations, and how long it stays firing
/// without another match.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    /// Labels, `alertname` included.
    pub(crate) labels: BTreeMap<String, String>,
    /// Annotations.
    pub(crate) annotations: BTreeMap<String, String>,
    /// Resolves after this long without a match.
    pub(crate) quiet_period: Duration,
    /// The rule saw it start (not a resend): sent before resends when the channel is full.
    pub(crate) new: bool,
}

/// A firing alert as kept in the snapshot, so a restart neither re-pages (same labels, same
/// `startsAt`) nor loses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SavedAlert {
    /// Labels, `alertname` included.
    pub(crate) labels: BTreeMap<String, String>,
    /// The latest annotations.
    pub(crate) annotations: BTreeMap<String, String>,
    /// When the episode started, Unix milliseconds.
    pub(crate) starts_at_unix_ms: u64,
    /// Its quiet period, milliseconds.
    pub(crate) quiet_period_ms: u64,
}

use crate::collector::clock::unix_ms;

struct Held {
    alert: Alert,
    last_seen: SystemTime,
    quiet_period: Duration,
}

/// The alert state machine, clock-free (every call takes `now`): deduplication by fingerprint,
/// resolution after the quiet period, recently resolved alerts kept for [`RESOLVED_RESEND`].
pub(crate) struct Engine {
    firing: HashMap<String, Held>,
    resolved: VecDeque<Alert>,
    capacity: usize,
    /// Matches dropped because `capacity` alerts were firing.
    pub(crate) dropped: u64,
}

impl Default for Engine {
    fn default() -> Self {
        Self::with_capacity(MAX_ALERTS)
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("firing", &self.firing.len())
            .field("resolved", &self.resolved.len())
            .finish()
    }
}

impl Engine {
    /// An engine holding at most `capacity` alerts.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            firing: HashMap::new(),
            resolved: VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    /// Applies a match; returns the alert when it starts firing (a state change).
    pub(crate) fn on_match(&mut self, m: Matched, now: SystemTime) -> Option<Alert> {
        let fp = fingerprint(&m.labels);
        if let Some(h) = self.firing.get_mut(&fp) {
            h.alert.annotations = m.annotations;
            h.last_seen = now;
            h.quiet_period = m.quiet_period;
            return None;
        }
        if self.firing.len() + self.resolved.len() >= self.capacity {
            self.resolved.pop_front();
            if self.firing.len() >= self.capacity {
                self.dropped += 1;
                return None;
            }
        }
        let alert = Alert {
            name: m.labels.get("alertname").cloned().unwrap_or_default(),
            labels: m.labels,
            annotations: m.annotations,
            starts_at: now,
            ends_at: None,
            state: AlertState::Firing,
            fingerprint: fp.clone(),
        };
        self.resolved.retain(|a| a.fingerprint != fp);
        self.firing.insert(
            fp,
            Held {
                alert: alert.clone(),
                last_seen: now,
                quiet_period: m.quiet_period,
            },
        );
        Some(alert)
    }

    /// Resolves the alerts quiet for their quiet period and forgets resolutions older than
    /// [`RESOLVED_RESEND`]; returns the newly resolved alerts.
    pub(crate) fn tick(&mut self, now: SystemTime) -> Vec<Alert> {
        let quiet: Vec<String> = self
            .firing
            .iter()
            .filter(|(_, h)| h.last_seen + h.quiet_period <= now)
            .map(|(fp, _)| fp.clone())
            .collect();
        let mut out = Vec::with_capacity(quiet.len());
        for fp in quiet {
            if let Some(h) = self.firing.remove(&fp) {
                let mut a = h.alert;
                a.state = AlertState::Resolved;
                a.ends_at = Some(now);
                self.resolved.push_back(a.clone());
                out.push(a);
            }
        }
        while self
            .resolved
            .front()
            .is_some_and(|a| a.ends_at.is_some_and(|t| t + RESOLVED_RESEND <= now))
        {
            self.resolved.pop_front();
        }
        out
    }

    /// The firing alerts to keep in the snapshot.
    pub(crate) fn saved(&self) -> Vec<SavedAlert> {
        let mut out: Vec<SavedAlert> = self
            .firing
            .values()
            .map(|h| SavedAlert {
                labels: h.alert.labels.clone(),
                annotations: h.alert.annotations.clone(),
                starts_at_unix_ms: unix_ms(h.alert.starts_at),
                quiet_period_ms: h.quiet_period.as_millis() as u64,
            })
            .collect();
        out.sort_by_key(|a| a.starts_at_unix_ms);
        out
    }

    /// Restores firing alerts from a snapshot, silently (no state change): each keeps its
    /// `startsAt` and is considered seen at `now`, so it resolves after its quiet period unless
    /// its rule matches again.
    pub(crate) fn restore(&mut self, saved: Vec<SavedAlert>, now: SystemTime) {
        for s in saved.into_iter().take(self.capacity) {
            let fp = fingerprint(&s.labels);
            let alert = Alert {
                name: s.labels.get("alertname").cloned().unwrap_or_default(),
                labels: s.labels,
                annotations: s.annotations,
                starts_at: UNIX_EPOCH + Duration::from_millis(s.starts_at_unix_ms),
                ends_at: None,
                state: AlertState::Firing,
                fingerprint: fp.clone(),
            };
            self.firing.insert(
                fp,
                Held {
                    alert,
                    last_seen: now,
                    quiet_period: Duration::from_millis(s.quiet_period_ms),
                },
            );
        }
    }

    /// Firing alerts (oldest first), then recently resolved ones (latest first).
    pub(crate) fn current(&self) -> Vec<Alert> {
        let mut firing: Vec<Alert> = self.firing.values().map(|h| h.alert.clone()).collect();
        firing.sort_by(|a, b| (a.starts_at, &a.fingerprint).cmp(&(b.starts_at, &b.fingerprint)));
        firing.extend(self.resolved.iter().rev().cloned());
        firing
    }
}

/// The notifications of one sink, by outcome.
#[derive(Debug, Default)]
struct Notifications {
    success: AtomicU64,
    failure: AtomicU64,
}

impl Notifications {
    /// The counter of notifications that succeeded (`ok`) or failed.
    fn of(&self, ok: bool) -> &AtomicU64 {
        if ok {
            &self.success
        } else {
            &self.failure
        }
    }
}

/// The alert counters, shared lock-free with `/metrics`.
#[derive(Debug, Default)]
pub struct AlertStats {
    events_dropped: AtomicU64,
    /// By [`rules::RuleKind`] × [`rules::MatchOutcome`].
    matches: [[AtomicU64; rules::MatchOutcome::ALL.len()]; rules::RuleKind::ALL.len()],
    /// By [`sink::SinkKind`].
    notifications: [Notifications; sink::SinkKind::ALL.len()],
    /// Firing alerts by (alertname, severity), one entry per enabled rule.
    firing: RwLock<BTreeMap<(String, String), u64>>,
}

impl AlertStats {
    pub(crate) fn event_dropped(&self) {
        self.events_dropped.fetch_add(1, Relaxed);
    }
    pub(crate) fn matched(&self, rule: rules::RuleKind, outcome: rules::MatchOutcome) {
        self.matches[rule as usize][outcome as usize].fetch_add(1, Relaxed);
    }
    /// Matches of `rule` with `outcome`.
    pub(crate) fn matches(&self, rule: rules::RuleKind, outcome: rules::MatchOutcome) -> u64 {
        self.matches[rule as usize][outcome as usize].load(Relaxed)
    }
    pub(crate) fn notification(&self, sink: sink::SinkKind, ok: bool) {
        self.notifications[sink as usize]
            .of(ok)
            .fetch_add(1, Relaxed);
    }
    /// Events dropped because the alert queue was full or too many alerts were held.
    pub(crate) fn events_dropped(&self) -> u64 {
        self.events_dropped.load(Relaxed)
    }
    /// Notifications of `sink` that succeeded (`ok`) or failed.
    pub(crate) fn notifications(&self, sink: sink::SinkKind, ok: bool) -> u64 {
        self.notifications[sink as usize].of(ok).load(Relaxed)
    }
    /// Alerts held firing, by (alertname, severity): every enabled rule, 0 when quiet.
    pub(crate) fn firing(&self) -> Vec<((String, String), u64)> {
        self.firing
            .read()
            .map(|f| f.iter().map(|(k, n)| (k.clone(), *n)).collect())
            .unwrap_or_default()
    }
    /// Sets the firing counts from the enabled rules and the current alerts.
    fn set_firing(&self, rules: &[(&str, &str)], current: &[Alert]) {
        let mut counts: BTreeMap<(String, String), u64> = rules
            .iter()
            .map(|(n, s)| ((n.to_string(), s.to_string()), 0))
            .collect();
        for a in current.iter().filter(|a| a.state == AlertState::Firing) {
            let severity = a.labels.get("severity").cloned().unwrap_or_default();
            *counts.entry((a.name.clone(), severity)).or_default() += 1;
        }
        if let Ok(mut f) = self.firing.write() {
            *f = counts;
        }
    }
}

/// The current alerts, readable by the admin API.
#[derive(Debug, Clone, Default)]
pub(crate) struct AlertsHandle {
    current: Arc<RwLock<Vec<Alert>>>,
    /// The firing alerts as the snapshot keeps them, updated on every state change.
    pub(crate) saved: Arc<RwLock<Vec<SavedAlert>>>,
    /// Counters.
    pub(crate) stats: Arc<AlertStats>,
    /// The alert task, when rules are enabled (stopped only by an injected fault).
    task: Option<tokio::task::AbortHandle>,
    /// The sinks' tasks and what a new one needs, when rules are enabled; replaced on reload.
    sinks: Option<Arc<std::sync::Mutex<Sinks>>>,
}

/// The running sinks (Alertmanager, webhook) and what starting others takes.
#[derive(Debug)]
struct Sinks {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    published: watch::Receiver<Arc<Vec<Alert>>>,
    generator_url: String,
}

/// Starts one task per sink of `config` on the published alert set.
fn spawn_sinks(
    config: &Config,
    generator_url: &str,
    published: &watch::Receiver<Arc<Vec<Alert>>>,
    stats: &Arc<AlertStats>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let resend = config.alerts.resend_interval.0;
    let mut tasks = Vec::new();
    for url in &config.alerts.alertmanager_urls {
        if let Ok(target) = sink::Target::parse(url) {
            tasks.push(tokio::spawn(sink::run(
                sink::HttpSink {
                    kind: sink::SinkKind::Alertmanager,
                    target: target.with_path("/api/v2/alerts"),
                    token: None,
                    resend,
                    generator_url: generator_url.to_string(),
                    format: sink::Format::Alertmanager,
                },
                published.clone(),
                stats.clone(),
            )));
        }
    }
    if let Some(Ok(target)) = config
        .alerts
        .webhook_url
        .as_deref()
        .map(sink::Target::parse)
    {
        tasks.push(tokio::spawn(sink::run(
            sink::HttpSink {
                kind: sink::SinkKind::Webhook,
                target,
                token: config.alerts.webhook_token.clone(),
                resend,
                generator_url: generator_url.to_string(),
                format: config.alerts.webhook_format,
            },
            published.clone(),
            stats.clone(),
        )));
    }
    tasks
}

impl AlertsHandle {
    /// Replaces the sinks with those of `config` (a reload): the old sinks' tasks stop, each new
    /// one starts from the current alert set, so what fires is sent again to it at once and
    /// nothing firing is lost. `false` when no rule is enabled (there is no sink to replace).
    pub(crate) fn reload_sinks(&self, config: &Config) -> bool {
        let Some(sinks) = &self.sinks else {
            return false;
        };
        let Ok(mut s) = sinks.lock() else {
            return false;
        };
        for t in s.tasks.drain(..) {
            t.abort();
        }
        let tasks = spawn_sinks(config, &s.generator_url, &s.published, &self.stats);
        s.tasks = tasks;
        true
    }

    /// Stops the alert task, as a panic in it would ([`crate::collector::Fault`]), and returns
    /// once it has ended: its queue is closed, so every match from then on finds it stopped.
    pub(crate) async fn stop_task(&self) {
        if let Some(t) = &self.task {
            t.abort();
            while !t.is_finished() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// Firing alerts, then recently resolved ones.
    pub(crate) fn current(&self) -> Vec<Alert> {
        self.current.read().map(|c| c.clone()).unwrap_or_default()
    }

    /// The `/api/v1/alerts` body.
    pub(crate) fn to_json(&self) -> Value {
        let current = self.current();
        let (firing, resolved): (Vec<&Alert>, Vec<&Alert>) =
            current.iter().partition(|a| a.state == AlertState::Firing);
        json!({
            "firing": firing.iter().map(|a| a.to_json()).collect::<Vec<_>>(),
            "resolved": resolved.iter().map(|a| a.to_json()).collect::<Vec<_>>(),
        })
    }
}

/// A rule's match sent from the aggregator.
pub(crate) type Event = Matched;

/// Starts the alert task and its sinks; returns the observer to add to the aggregator (`None`
/// when every rule is off) and the handle for the admin API.
///
/// `restored` are the firing alerts of the snapshot: they are held again without a new
/// notification (same `startsAt`) and published to the sinks at once.
pub(crate) fn spawn(
    config: &Config,
    generator_url: String,
    stats: Arc<AlertStats>,
    restored: Vec<SavedAlert>,
) -> (Option<rules::Rules>, AlertsHandle) {
    let handle = AlertsHandle {
        current: Arc::default(),
        saved: Arc::default(),
        stats,
        task: None,
        sinks: None,
    };
    let Some(rules) = rules::Rules::from_config(config) else {
        return (None, handle);
    };
    let (tx, rx) = mpsc::channel(EVENT_QUEUE_CAPACITY);
    let (publish, watch_rx) = watch::channel(Arc::new(Vec::<Alert>::new()));
    let tasks = spawn_sinks(config, &generator_url, &watch_rx, &handle.stats);
    let handle = AlertsHandle {
        sinks: Some(Arc::new(std::sync::Mutex::new(Sinks {
            tasks,
            published: watch_rx,
            generator_url,
        }))),
        ..handle
    };
    let mut engine = Engine::with_capacity(capacity(config));
    engine.restore(restored, SystemTime::now());
    let enabled: Vec<(&'static str, String)> = rules.enabled();
    let publish_state = move |engine: &Engine, handle: &AlertsHandle| {
        let current = engine.current();
        let names: Vec<(&str, &str)> = enabled.iter().map(|(n, s)| (*n, s.as_str())).collect();
        handle.stats.set_firing(&names, &current);
        if let Ok(mut c) = handle.current.write() {
            c.clone_from(&current);
        }
        if let Ok(mut s) = handle.saved.write() {
            *s = engine.saved();
        }
        let _ = publish.send(Arc::new(current));
    };
    publish_state(&engine, &handle);
    let mut handle = handle;
    handle.task = Some(tokio::spawn(run(engine, rx, publish_state, handle.clone())).abort_handle());
    (Some(rules.with_sender(tx, handle.stats.clone())), handle)
}

async fn run(
    mut engine: Engine,
    mut events: mpsc::Receiver<Event>,
    publish_state: impl Fn(&Engine, &AlertsHandle),
    handle: AlertsHandle,
) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut dropped = 0;
    loop {
        let changed = tokio::select! {
            ev = events.recv() => match ev {
                Some(m) => {
                    let mut changed = Vec::new();
                    changed.extend(engine.on_match(m, SystemTime::now()));
                    // Take what else is queued before publishing once.
                    while let Ok(m) = events.try_recv() {
                        changed.extend(engine.on_match(m, SystemTime::now()));
                    }
                    changed
                }
                None => return,
            },
            _ = tick.tick() => engine.tick(SystemTime::now()),
        };
        while dropped < engine.dropped {
            dropped += 1;
            handle.stats.event_dropped();
        }
        for a in &changed {
            sink::log(a);
            handle.stats.notification(sink::SinkKind::Log, true);
        }
        // Resolutions also age out of the resend set silently; publish on every tick with a
        // change only, the sinks resend on their own schedule.
        if !changed.is_empty() {
            publish_state(&engine, &handle);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn m(tool: &str, quiet: u64) -> Matched {
        let labels: BTreeMap<String, String> = [
            ("alertname", OVER_CEILING),
            ("service", "svc"),
            ("tool", tool),
            ("layer", "default"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Matched {
            labels,
            annotations: BTreeMap::new(),
            quiet_period: Duration::from_secs(quiet),
            new: true,
        }
    }

    #[test]
    fn deduplicates_and_resolves_after_the_quiet_period() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let s = Duration::from_secs;
        let mut e = Engine::default();
        assert!(e.on_match(m("a", 10), t0).is_some(), "first match fires");
        assert!(e.on_match(m("a", 10), t0 + s(5)).is_none(), "deduplicated");
        assert!(e.on_match(m("b", 10), t0 + s(5)).is_some(), "other labels");
        assert!(
            e.tick(t0 + s(14)).is_empty(),
            "a seen at 5 s: quiet until 15 s"
        );
        let resolved = e.tick(t0 + s(15));
        assert_eq!(resolved.len(), 2);
        assert!(resolved.iter().all(|a| a.state == AlertState::Resolved));
        assert_eq!(resolved[0].ends_at, Some(t0 + s(15)));
        assert_eq!(e.current().len(), 2, "resolved ones are still resent");
        let again = e.on_match(m("a", 10), t0 + s(20)).unwrap();
        assert_eq!(again.starts_at, t0 + s(20), "a new episode");
        assert_eq!(e.current().len(), 2, "its resolution is replaced");
        e.tick(t0 + s(15) + RESOLVED_RESEND);
        assert_eq!(e.current().len(), 1, "old resolutions are forgotten");
    }

    #[test]
    fn the_api_entry_links_the_runbook() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        let mut e = Engine::default();
        let a = e.on_match(m("web_fetch", 60), t0).unwrap();
        assert_eq!(a.to_json()["runbook_url"], "/runbook#toolresultoverceiling");
        // An annotation of the rule's own wins.
        let mut b = a.clone();
        b.annotations
            .insert("runbook_url".into(), "https://wiki/x".into());
        assert_eq!(b.to_json()["runbook_url"], "https://wiki/x");
    }

    #[test]
    fn postable_alert_has_the_alertmanager_v2_shape() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01T00:00:00Z
        let mut e = Engine::default();
        let mut a = e.on_match(m("web_fetch", 60), t0).unwrap();
        let p = a.postable(
            t0,
            Duration::from_secs(60),
            "http://127.0.0.1:9464/api/v1/alerts",
        );
        assert_eq!(p["labels"]["alertname"], OVER_CEILING);
        assert_eq!(p["labels"]["tool"], "web_fetch");
        assert_eq!(p["startsAt"], "2026-01-01T00:00:00.000Z");
        assert_eq!(p["endsAt"], "2026-01-01T00:04:00.000Z", "now + 4 x resend");
        assert_eq!(p["generatorURL"], "http://127.0.0.1:9464/api/v1/alerts");
        assert_eq!(
            p["annotations"]["runbook_url"],
            "http://127.0.0.1:9464/runbook#toolresultoverceiling"
        );
        assert!(p["annotations"].is_object());
        a.state = AlertState::Resolved;
        a.ends_at = Some(t0 + Duration::from_secs(90));
        let p = a.postable(t0 + Duration::from_secs(120), Duration::from_secs(60), "");
        assert_eq!(
            p["endsAt"], "2026-01-01T00:01:30.000Z",
            "resolved: its resolution time"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(951_827_696_789)),
            "2000-02-29T12:34:56.789Z"
        );
    }
}
