//! The alert rules, one type per rule behind two small traits, run on the aggregator.
//!
//! - [`RecordRule`]s see every record over the ceiling of its weakest layer, with the verdict the
//!   aggregator already computed (one verdict per record, shared by the counters and the rules):
//!   [`over_ceiling`] (`ToolResultOverCeiling`) and [`repeated_oversize`]
//!   (`ToolArgsRepeatedlyOversize`).
//! - [`WindowRule`]s run every `alerts.evaluation_interval` on each series' sliding windows:
//!   [`p95_jump`] (`ToolResultSizeP95Jump`), [`near_ceiling`] (`ToolResultSizeNearCeiling`) and
//!   [`truncation_rate`] (`ToolResultTruncationRate`).
//!
//! Adding a rule is its file here (`NAME`, `Rule`, hint, payload, tests), its entry in the one
//! list of rules ([`for_each_rule`], in `config/alerts.rs`: its section's keys and one line),
//! its runbook section and its rows in `docs/collector.md`; the tests here fail when any of
//! these is missing.
//!
//! **Deduplicate first.** A record over the ceiling for an alert already firing costs a probe
//! of a [`Firing`] map keyed by integers (series id, layer index) and nothing else: no string,
//! no label map, no channel send. The payload (labels, annotations, links) is built only when an
//! alert starts firing, and again every third of its quiet period while it keeps matching, so
//! the alert task sees it alive and Alertmanager gets fresh annotations. A storm of oversized
//! results therefore costs the alert path a few hash probes per record.
//!
//! **No alert crowds out another.** Events go to the alert task over a bounded channel. When it
//! is full, events wait in a bounded queue here (new alerts first) and are retried after every
//! batch and every [`FLUSH_INTERVAL`](crate::collector::aggregator::FLUSH_INTERVAL) (100 ms), so a new
//! (service, tool, layer) over the ceiling fires within 100 ms of the channel draining. The
//! alert task holds every alert the rules can make
//! (see [`super::capacity`]); repeated oversize is one alert per (service, tool) that lists its
//! most repeated argument hashes, so thousands of hot hashes cannot flood the table. Every match
//! is counted by rule and outcome (`toolsize_alert_matches_total`): `sent`, `merged` into an
//! alert already firing, `deferred` while the channel was full, `dropped` past the queue.

/// What the one list of rules ([`for_each_rule`]) generates here: the modules, [`RuleKind`], the
/// name constants and the wiring from `[alerts]` to the rules.
macro_rules! declare_rules {
    ($(
        $(#[doc = $doc:literal])+
        $m:ident: $cfg:ident => $kind:ident ($constant:ident), $trait:ident { $($body:tt)* }
    )+) => {
        $(pub mod $m;)+

        /// The built-in rules, by type; their order is that of `toolsize_alert_matches_total`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub(crate) enum RuleKind {
            $($(#[doc = $doc])+ $kind,)+
        }

        impl RuleKind {
            /// Every rule, in exposition order.
            pub(crate) const ALL: [RuleKind; [$(stringify!($kind)),+].len()] =
                [$(RuleKind::$kind),+];

            /// The alert name.
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(RuleKind::$kind => $m::NAME,)+
                }
            }

            /// The config section, `alerts.<module>`.
            pub(crate) fn section(self) -> &'static str {
                match self {
                    $(RuleKind::$kind => concat!("alerts.", stringify!($m)),)+
                }
            }

            /// The rule as `config` sets it, `None` when disabled.
            fn build(self, config: &AlertsConfig) -> Option<Built> {
                match self {
                    $(RuleKind::$kind => $m::Rule::from_config(&config.$m)
                        .map(|r| Built::$trait(Box::new(r))),)+
                }
            }

            /// Whether it runs on the windows (else on every record over a ceiling).
            #[cfg(test)]
            pub(crate) fn is_window(self) -> bool {
                match self {
                    $(RuleKind::$kind => stringify!($trait) == "Window",)+
                }
            }

            /// Switches it on or off in `config`.
            #[cfg(test)]
            pub(crate) fn set_enabled(self, config: &mut AlertsConfig, on: bool) {
                match self {
                    $(RuleKind::$kind => config.$m.enabled = on,)+
                }
            }

            /// Takes its section of `new` into `running` (a reload that retuned it).
            pub(crate) fn take(self, running: &mut AlertsConfig, new: &AlertsConfig) {
                match self {
                    $(RuleKind::$kind => running.$m = new.$m.clone(),)+
                }
            }

            /// (whether its section differs between `old` and `new`, whether `old` enabled it).
            fn changed(self, old: &AlertsConfig, new: &AlertsConfig) -> (bool, bool) {
                match self {
                    $(RuleKind::$kind => (old.$m != new.$m, old.$m.enabled),)+
                }
            }
        }

        /// The alert names of the built-in rules.
        pub mod names {
            $($(#[doc = $doc])+ pub const $constant: &str = super::$m::NAME;)+
            /// Every built-in alert name, in exposition order.
            pub const BUILT_IN: &[&str] = &[$($constant),+];
        }
    };
}

for_each_rule!(declare_rules);

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{AlertStats, Event, Matched};
use crate::collector::config::{for_each_rule, AlertsConfig, Config};
pub(crate) use crate::collector::state::restack::Remap;
use crate::collector::state::{
    Limits, MapHasher, Observed, ResultObserver, Retune, Series, SeriesKey, SeriesMap, State, Stats,
};
use crate::layers::Ceiling;

/// A rule built from its section, by the trait it implements.
enum Built {
    /// Run on every record over a ceiling.
    Record(Box<dyn RecordRule>),
    /// Run every evaluation on the windows.
    Window(Box<dyn WindowRule>),
}

pub use crate::collector::config::Severity;

/// What became of one match, the `outcome` label of `toolsize_alert_matches_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchOutcome {
    /// An event went to the alert task: a new alert, or a resend of a firing one.
    Sent = 0,
    /// Absorbed into an alert already firing (nothing built, nothing sent).
    Merged = 1,
    /// The channel was full: queued here and retried.
    Deferred = 2,
    /// The retry queue was full too: lost (the alert fires at its next resend).
    Dropped = 3,
    /// The alert task had stopped (it panicked): lost, and every later match with it.
    EngineStopped = 4,
}

impl MatchOutcome {
    /// Every outcome, in exposition order.
    pub(crate) const ALL: [MatchOutcome; 5] = [
        MatchOutcome::Sent,
        MatchOutcome::Merged,
        MatchOutcome::Deferred,
        MatchOutcome::Dropped,
        MatchOutcome::EngineStopped,
    ];

    /// The `outcome` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MatchOutcome::Sent => "sent",
            MatchOutcome::Merged => "merged",
            MatchOutcome::Deferred => "deferred",
            MatchOutcome::Dropped => "dropped",
            MatchOutcome::EngineStopped => "engine_stopped",
        }
    }
}

/// A record over the ceiling of its weakest layer, as the record rules see it.
#[derive(Debug)]
pub(crate) struct Over<'a> {
    /// The aggregator's record, its series and the verdict.
    pub(crate) seen: &'a Observed<'a>,
    /// Result bytes.
    pub(crate) bytes: u64,
    /// Index of the weakest cutting layer in [`Stack::layers`].
    pub(crate) layer: usize,
    /// The cut.
    pub(crate) cut: &'a crate::layers::Cut<'a>,
}

/// What a rule made of one match.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Nothing matched.
    Quiet,
    /// Matched an alert already firing: absorbed.
    Merged,
    /// An event is due: a new alert, or a resend.
    Due(Matched),
}

/// A rule run on every record over a ceiling.
pub(crate) trait RecordRule: Send + std::fmt::Debug {
    /// The `severity` label.
    fn severity(&self) -> &str;
    /// One record over the ceiling.
    fn over(&mut self, over: &Over<'_>) -> Decision;
    /// Forgets alerts quiet for their quiet period at `now_ms` (called every evaluation).
    fn sweep(&mut self, now_ms: u64);
    /// The layers were renumbered (a reload; see [`ResultObserver::restack`]).
    fn restack(&mut self, _remap: &Remap) {}
}

/// What a window rule sees of one series at an evaluation.
#[derive(Debug)]
pub(crate) struct WindowInput<'a> {
    /// The series.
    pub(crate) key: &'a SeriesKey,
    /// All of its state (for baselines).
    pub(crate) series: &'a Series,
    /// Its stats over the recent (shortest) window.
    pub(crate) recent: &'a Stats,
    /// Results of known size in the recent window.
    pub(crate) n: u64,
    /// Their p95, bytes.
    pub(crate) p95: u64,
    /// Index, label and length of the recent window.
    pub(crate) recent_window: (usize, &'a str, Duration),
    /// Index and label of the baseline (longest) window.
    pub(crate) base_window: (usize, &'a str),
    /// The stack's ceiling.
    pub(crate) ceiling: Option<Ceiling<'a>>,
    /// Evaluation time, Unix seconds.
    pub(crate) now_unix: u64,
    /// How long a window alert stays firing without a match.
    pub(crate) quiet_period: Duration,
}

/// A rule run every evaluation on each series' windows.
pub(crate) trait WindowRule: Send + std::fmt::Debug {
    /// The `severity` label.
    fn severity(&self) -> &str;
    /// The match of one series, if any.
    fn evaluate(&self, w: &WindowInput<'_>) -> Option<Matched>;
}

/// Builds a label or annotation map.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The labels every per-series alert carries.
pub(crate) fn series_labels(
    name: &str,
    key: &SeriesKey,
    severity: &str,
) -> BTreeMap<String, String> {
    labels(&[
        ("alertname", name),
        ("service", &key.service),
        ("tool", &key.tool),
        ("severity", severity),
    ])
}

/// Formats a ratio with two decimals.
pub(crate) fn ratio(x: f64) -> String {
    format!("{x:.2}")
}

/// What a [`Firing`] probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hit {
    /// Not firing (or quiet long enough to have resolved): a new alert.
    New,
    /// Firing, and a resend is due.
    Resend,
    /// Firing, resend not due: merged.
    Merged,
}

#[derive(Debug, Clone, Copy)]
struct Hot {
    sent_ms: u64,
    seen_ms: u64,
}

/// The alerts a record rule has firing, keyed by integers: the deduplication that runs before
/// anything is built. An alert is resent every third of its quiet period while it matches, so
/// the alert task, which resolves it after the quiet period without an event, keeps it firing.
#[derive(Debug)]
pub(crate) struct Firing<K> {
    hot: HashMap<K, Hot, MapHasher>,
    quiet_ms: u64,
    resend_ms: u64,
}

impl<K: std::hash::Hash + Eq + Copy> Firing<K> {
    /// Deduplication for alerts that resolve after `quiet_period` without a match.
    pub(crate) fn new(quiet_period: Duration) -> Self {
        let quiet_ms = quiet_period.as_millis().max(1) as u64;
        Self {
            hot: HashMap::default(),
            quiet_ms,
            resend_ms: (quiet_ms / 3).max(1),
        }
    }

    /// One match of `key` at `now_ms`.
    pub(crate) fn hit(&mut self, key: K, now_ms: u64) -> Hit {
        match self.hot.get_mut(&key) {
            Some(h) if h.seen_ms + self.quiet_ms > now_ms => {
                h.seen_ms = now_ms;
                if now_ms >= h.sent_ms + self.resend_ms {
                    h.sent_ms = now_ms;
                    Hit::Resend
                } else {
                    Hit::Merged
                }
            }
            Some(h) => {
                *h = Hot {
                    sent_ms: now_ms,
                    seen_ms: now_ms,
                };
                Hit::New
            }
            None => {
                self.hot.insert(
                    key,
                    Hot {
                        sent_ms: now_ms,
                        seen_ms: now_ms,
                    },
                );
                Hit::New
            }
        }
    }

    /// Gives every held alert the key `f` maps its key to; one mapped to `None` is forgotten.
    pub(crate) fn rekey(&mut self, f: impl Fn(K) -> Option<K>) {
        self.hot = self
            .hot
            .drain()
            .filter_map(|(k, h)| Some((f(k)?, h)))
            .collect();
    }

    /// Forgets alerts quiet for the quiet period.
    pub(crate) fn sweep(&mut self, now_ms: u64) {
        let quiet = self.quiet_ms;
        self.hot.retain(|_, h| h.seen_ms + quiet > now_ms);
    }

    #[cfg(test)]
    /// Alerts held.
    pub(crate) fn len(&self) -> usize {
        self.hot.len()
    }

    #[cfg(test)]
    /// True when nothing is firing.
    pub(crate) fn is_empty(&self) -> bool {
        self.hot.is_empty()
    }
}

/// Events waiting for room in the channel, at most this many.
pub(crate) const MAX_DEFERRED: usize = 8192;

/// The enabled rules, as one [`ResultObserver`] on the aggregator.
#[derive(Debug)]
pub struct Rules {
    records: Vec<(RuleKind, Box<dyn RecordRule>)>,
    windows: Vec<(RuleKind, Box<dyn WindowRule>)>,
    /// Window rules resolve after this long without a match (3 × the evaluation interval).
    window_quiet_period: Duration,
    tx: Option<mpsc::Sender<Event>>,
    stats: Arc<AlertStats>,
    /// New alerts waiting for the channel, sent before `deferred`.
    urgent: VecDeque<(RuleKind, Matched)>,
    /// Resends and window matches waiting for the channel.
    deferred: VecDeque<(RuleKind, Matched)>,
    /// The alert task was found stopped (said once in the log).
    engine_stopped: bool,
}

impl Rules {
    /// The alert name and severity of every enabled rule.
    pub(crate) fn enabled(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(RuleKind, &'static str, String)> = self
            .records
            .iter()
            .map(|(i, r)| (*i, i.name(), r.severity().to_string()))
            .chain(
                self.windows
                    .iter()
                    .map(|(i, r)| (*i, i.name(), r.severity().to_string())),
            )
            .collect();
        out.sort_by_key(|(i, ..)| *i);
        out.into_iter().map(|(_, n, s)| (n, s)).collect()
    }

    /// The enabled rules of `config` (`None` when all are off).
    pub fn from_config(config: &Config) -> Option<Self> {
        let window_quiet_period = config.alerts.evaluation_interval.0 * 3;
        let (mut records, mut windows) = (Vec::new(), Vec::new());
        for kind in RuleKind::ALL {
            match kind.build(&config.alerts) {
                Some(Built::Record(r)) => records.push((kind, r)),
                Some(Built::Window(r)) => windows.push((kind, r)),
                None => {}
            }
        }
        if records.is_empty() && windows.is_empty() {
            return None;
        }
        Some(Self {
            records,
            windows,
            window_quiet_period,
            tx: None,
            stats: Arc::default(),
            urgent: VecDeque::new(),
            deferred: VecDeque::new(),
            engine_stopped: false,
        })
    }

    /// Attaches the rules to the aggregator's state: every recorded result goes through them.
    pub fn attach_to(self, state: &mut State) {
        state.add_observer(Box::new(self));
    }

    /// Where matches go.
    #[must_use]
    pub fn with_sender(mut self, tx: mpsc::Sender<Event>, stats: Arc<AlertStats>) -> Self {
        self.tx = Some(tx);
        self.stats = stats;
        self
    }

    /// The matches of the window rules over every series at `now_unix`.
    ///
    /// "Recent" is the shortest configured window (5m by default). `ToolResultSizeP95Jump`
    /// compares its p95 with the p95 of the baseline: the slots of the longest window (1h) that
    /// ended before the recent window began (see [`Series::window_stats_ending_by`]).
    pub(crate) fn evaluate_windows(
        &self,
        series: &SeriesMap,
        limits: &Limits,
        now_unix: u64,
    ) -> Vec<(RuleKind, Matched)> {
        let mut out = Vec::new();
        if self.windows.is_empty() {
            return out;
        }
        let by_len = |longest: bool| {
            let it = limits.windows.iter().enumerate();
            if longest {
                it.max_by_key(|(_, (_, d))| *d)
                    .map(|(i, (l, d))| (i, l.as_str(), *d))
            } else {
                it.min_by_key(|(_, (_, d))| *d)
                    .map(|(i, (l, d))| (i, l.as_str(), *d))
            }
        };
        let (Some(recent_window), Some((base_i, base_label, _))) = (by_len(false), by_len(true))
        else {
            return out;
        };
        let mut keys: Vec<&SeriesKey> = series.keys().collect();
        keys.sort_by(|a, b| (&a.service, &a.tool).cmp(&(&b.service, &b.tool)));
        for key in keys {
            let s = &series[key];
            let recent = s.window_stats(recent_window.0, now_unix);
            if recent.counts.calls == 0 {
                continue;
            }
            let input = WindowInput {
                key,
                series: s,
                recent: &recent,
                n: recent.size.len(),
                p95: recent.size.quantile(0.95),
                recent_window,
                base_window: (base_i, base_label),
                ceiling: limits.stacks.ceiling(&s.profile),
                now_unix,
                quiet_period: self.window_quiet_period,
            };
            out.extend(
                self.windows
                    .iter()
                    .filter_map(|(k, r)| Some((*k, r.evaluate(&input)?))),
            );
        }
        out
    }

    /// Sends what waits, new alerts first; stops at the first refusal. A stopped alert task
    /// loses everything that waits, each counted.
    fn flush(&mut self) {
        let Some(tx) = &self.tx else { return };
        for q in [&mut self.urgent, &mut self.deferred] {
            while let Some((rule, m)) = q.pop_front() {
                match tx.try_send(m) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(m)) => {
                        q.push_front((rule, m));
                        return;
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        self.stats.matched(rule, MatchOutcome::EngineStopped);
                    }
                }
            }
        }
    }

    /// Sends one due event, or queues it when the channel is full.
    fn send(&mut self, rule: RuleKind, m: Matched, urgent: bool) {
        let Some(tx) = &self.tx else { return };
        let waiting = !self.urgent.is_empty() || (!urgent && !self.deferred.is_empty());
        if !waiting {
            match tx.try_send(m) {
                Ok(()) => {
                    self.stats.matched(rule, MatchOutcome::Sent);
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return self.lost(rule),
                Err(mpsc::error::TrySendError::Full(back)) => {
                    return self.defer(rule, back, urgent)
                }
            }
        }
        self.defer(rule, m, urgent);
    }

    /// A match that found the alert task stopped: counted, and the stop said once.
    fn lost(&mut self, rule: RuleKind) {
        self.stats.matched(rule, MatchOutcome::EngineStopped);
        if !self.engine_stopped {
            self.engine_stopped = true;
            tracing::error!(
                "Alert task stopped; alerts are no longer raised nor sent until the daemon \
                 restarts (counted in toolsize_alert_matches_total{{outcome=\"engine_stopped\"}})."
            );
        }
    }

    fn defer(&mut self, rule: RuleKind, m: Matched, urgent: bool) {
        if self.urgent.len() + self.deferred.len() >= MAX_DEFERRED {
            // Make room for a new alert by dropping the oldest resend (counted against its own
            // rule); a resend past the queue is dropped (its alert is resent at its next match).
            let oldest = if urgent {
                self.deferred.pop_front()
            } else {
                None
            };
            match oldest {
                Some((oldest, _)) => self.stats.matched(oldest, MatchOutcome::Dropped),
                None => {
                    self.stats.matched(rule, MatchOutcome::Dropped);
                    return;
                }
            }
        }
        self.stats.matched(rule, MatchOutcome::Deferred);
        if urgent {
            self.urgent.push_back((rule, m));
        } else {
            self.deferred.push_back((rule, m));
        }
    }
}

/// Puts `rule` (built from the reloaded settings, `None` when disabled) in place of the rule of
/// its kind in `list`: `Ok(true)` when replaced, `Ok(false)` when disabled before and after,
/// `Err(())` when the rule was enabled or disabled by the reload (that waits for a restart).
fn replace_rule<R: ?Sized>(
    list: &mut [(RuleKind, Box<R>)],
    kind: RuleKind,
    was_enabled: bool,
    rule: Option<Box<R>>,
) -> Result<bool, ()> {
    match rule {
        Some(r) => match list.iter_mut().find(|(k, _)| *k == kind) {
            Some(slot) => {
                slot.1 = r;
                Ok(true)
            }
            None => Err(()),
        },
        None if was_enabled => Err(()),
        None => Ok(false),
    }
}

impl Rules {
    /// Rebuilds each rule whose section differs between `old` and `new` from `new` (its
    /// thresholds, severity, quiet periods). The firing alerts live in the alert task and stay;
    /// a rebuilt rule starts its own counts over (the repeated argument hashes, the last
    /// resend). A rule enabled or disabled by the reload waits for a restart.
    fn retune_rules(&mut self, old: &AlertsConfig, new: &AlertsConfig, out: &mut Retune) {
        for kind in RuleKind::ALL {
            let (changed, was) = kind.changed(old, new);
            if !changed {
                continue;
            }
            let replaced = match kind.build(new) {
                Some(Built::Record(r)) => replace_rule(&mut self.records, kind, was, Some(r)),
                Some(Built::Window(r)) => replace_rule(&mut self.windows, kind, was, Some(r)),
                None if was => Err(()),
                None => Ok(false),
            };
            match replaced {
                Ok(true) => out.applied.push(kind.section()),
                Ok(false) => {}
                Err(()) => out.restart.push(kind.section()),
            }
        }
    }
}

impl ResultObserver for Rules {
    fn retune(&mut self, old: &AlertsConfig, new: &AlertsConfig, out: &mut Retune) {
        self.retune_rules(old, new, out);
    }

    fn restack(&mut self, remap: &Remap) {
        for (_, r) in &mut self.records {
            r.restack(remap);
        }
    }

    fn observe(&mut self, seen: &Observed<'_>) {
        if self.tx.is_none() || seen.over.is_none() {
            return;
        }
        if !self.urgent.is_empty() || !self.deferred.is_empty() {
            self.flush();
        }
        let (Some((layer, cut)), Some(bytes)) = (&seen.over, seen.record.size.bytes()) else {
            return;
        };
        let over = Over {
            seen,
            bytes,
            layer: *layer,
            cut,
        };
        // No allocation here: one decision at a time, sent before the next.
        for k in 0..self.records.len() {
            let (rule, decision) = {
                let (i, r) = &mut self.records[k];
                (*i, r.over(&over))
            };
            match decision {
                Decision::Quiet => {}
                Decision::Merged => self.stats.matched(rule, MatchOutcome::Merged),
                Decision::Due(m) => {
                    let urgent = m.new;
                    self.send(rule, m, urgent);
                }
            }
        }
    }

    fn periodic(&mut self, series: &SeriesMap, limits: &Limits, now_unix: u64, now_ms: u64) {
        if self.tx.is_none() {
            return;
        }
        for (_, r) in &mut self.records {
            r.sweep(now_ms);
        }
        self.flush();
        for (rule, m) in self.evaluate_windows(series, limits, now_unix) {
            self.send(rule, m, false);
        }
    }

    fn tick(&mut self) {
        if !self.urgent.is_empty() || !self.deferred.is_empty() {
            self.flush();
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Records, keys and workloads shared by the rules' tests.

    use super::*;
    use crate::collector::ingest::recognize::{ArgsHash, Size, SizeSource, ToolRecord};
    use crate::collector::state::State;

    /// A measured record of `bytes` for `svc`/`fetch`.
    pub(crate) fn rec(bytes: u64) -> ToolRecord {
        let mut r = crate::collector::state::tests::rec(
            "fetch",
            Size::Known {
                bytes,
                source: SizeSource::Measured,
            },
        );
        r.trace_id = [0xab; 16];
        r.args_hash = Some(ArgsHash::new("0123456789ab"));
        r
    }

    /// A deterministic log-normal-ish size: exp(N(ln median, sigma)) with the normal from the
    /// sum of 12 uniforms of a xorshift generator.
    pub(crate) struct Sizes(pub(crate) u64);

    impl Sizes {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        /// The next size.
        pub(crate) fn next(&mut self, median: f64, sigma: f64) -> u64 {
            let z: f64 = (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0;
            (median.ln() + sigma * z).exp().round().max(1.0) as u64
        }
    }

    /// Only the window rule `name` on (the record rules off).
    pub(crate) fn only_window(name: &str) -> Config {
        let mut c = Config::default();
        for kind in RuleKind::ALL.into_iter().filter(|k| !k.is_window()) {
            kind.set_enabled(&mut c.alerts, false);
        }
        only(&mut c, name);
        c
    }

    /// Only the window rule `name` on among the window rules.
    pub(crate) fn only(c: &mut Config, name: &str) {
        for kind in RuleKind::ALL.into_iter().filter(|k| k.is_window()) {
            kind.set_enabled(&mut c.alerts, kind.name() == name);
        }
    }

    /// A whole hour (1_800_000_000 is one).
    pub(crate) const T0: u64 = 1_800_000_000;

    /// A state with `config`'s rules wired to a channel of `capacity` events.
    pub(crate) fn wired(config: &Config, capacity: usize) -> (State, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(capacity);
        let mut st = State::new(Limits::from_config(config));
        st.add_observer(Box::new(
            Rules::from_config(config)
                .unwrap()
                .with_sender(tx, Arc::default()),
        ));
        (st, rx)
    }

    /// The alert names received so far.
    pub(crate) fn names(rx: &mut mpsc::Receiver<Event>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| m.labels["alertname"].clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::collector::alerts::{OVER_CEILING, TRUNCATION_RATE};
    use crate::collector::state::State;

    /// The reference of the collector, where each rule has its rows.
    const DOCS: &str = include_str!("../../../../docs/collector.md");

    #[test]
    fn every_rule_has_its_name_runbook_section_docs_rows_and_config() {
        let anchors = crate::collector::alerts::runbook::anchors();
        let mut seen = std::collections::HashSet::new();
        for kind in RuleKind::ALL {
            let (name, section) = (kind.name(), kind.section());
            assert!(seen.insert(name), "{name}: two rules share the alert name");
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{name}: an alert name is letters and digits (its runbook anchor)"
            );
            assert!(
                anchors.contains(&crate::collector::alerts::runbook::anchor(name)),
                "{name}: docs/runbook.md has no `## {name}` section"
            );
            let row = format!("| `{name}` (`[{section}]`) |");
            assert!(
                DOCS.lines().any(|l| l.starts_with(&row)),
                "{name}: docs/collector.md's table of rules has no row `{row} …`"
            );
            let keys = format!("`{section}.enabled`, `.severity`");
            assert!(
                DOCS.lines()
                    .any(|l| l.starts_with("| | |") && l.contains(&keys)),
                "{name}: docs/collector.md's table of keys has no row `| | | {keys}, …`"
            );
            for leaf in ["enabled", "severity"] {
                let key = format!("{section}.{leaf}");
                assert!(
                    crate::collector::config::keys::find(&key).is_some(),
                    "{name}: no config key `{key}`"
                );
            }
        }
        let held = format!("times {} rules", RuleKind::ALL.len());
        assert!(
            DOCS.replace('\n', " ").contains(&held),
            "docs/collector.md does not say the alert table holds `{held}`"
        );
        assert_eq!(
            crate::collector::alerts::BUILT_IN.to_vec(),
            RuleKind::ALL.map(RuleKind::name).to_vec(),
            "the public names follow the list"
        );
    }

    /// Every file of `alerts/rules/` is a rule of the list: a rule file without its line in
    /// `for_each_rule!` would not even be compiled.
    #[test]
    fn every_rule_file_is_in_the_list() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/collector/alerts/rules");
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if stem == "mod" {
                continue;
            }
            files += 1;
            let section = format!("alerts.{stem}");
            assert!(
                RuleKind::ALL.iter().any(|k| k.section() == section),
                "{}: no line in for_each_rule! (src/collector/config/alerts.rs), so the rule is \
                 not compiled",
                path.display()
            );
        }
        assert_eq!(files, RuleKind::ALL.len());
    }

    /// A reload takes each retuned rule's section, and only it, into the running configuration.
    #[test]
    fn each_rule_takes_its_own_section() {
        let running = AlertsConfig::default();
        let mut new = AlertsConfig::default();
        for kind in RuleKind::ALL {
            kind.set_enabled(&mut new, false);
        }
        for kind in RuleKind::ALL {
            let mut took = running.clone();
            kind.take(&mut took, &new);
            for other in RuleKind::ALL {
                assert_eq!(
                    other.changed(&took, &new).0,
                    other != kind,
                    "{other:?} after taking {kind:?}"
                );
            }
        }
    }

    #[test]
    fn a_severity_is_a_short_label_value() {
        for ok in ["page", "warning", "sev-1", "P_2"] {
            assert_eq!(Severity::try_from(ok.to_string()).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "two words",
            "pa\nge",
            &"x".repeat(Severity::MAX_LEN + 1),
        ] {
            let err = Severity::try_from(bad.to_string()).unwrap_err();
            assert!(err.contains("a severity is 1 to 64"), "{err}");
        }
        let err = Config::from_toml("[alerts.over_ceiling]\nseverity = \"a b\"\n").unwrap_err();
        assert!(
            err.to_string().contains("a severity is"),
            "a bad severity in the file is refused: {err}"
        );
    }

    #[test]
    fn firing_deduplicates_and_resends_every_third_of_the_quiet_period() {
        let mut f = Firing::new(Duration::from_secs(3));
        assert_eq!(f.hit(1u32, 0), Hit::New);
        assert_eq!(f.hit(1, 999), Hit::Merged);
        assert_eq!(f.hit(1, 1000), Hit::Resend);
        assert_eq!(f.hit(2, 1000), Hit::New, "another key");
        assert_eq!(f.hit(1, 1500), Hit::Merged);
        assert_eq!(
            f.hit(1, 4500),
            Hit::New,
            "quiet for 3 s: resolved, a new episode"
        );
        f.sweep(7499);
        assert_eq!(f.len(), 1, "key 2 quiet since 1000");
        f.sweep(7500);
        assert!(f.is_empty());
    }

    #[test]
    fn window_rules_run_through_the_aggregator_seam() {
        let config = only_window(TRUNCATION_RATE);
        let (mut st, mut rx) = wired(&config, 64);
        for i in 0..40 {
            let mut r = rec(2000);
            r.truncated = i % 2 == 0;
            st.record(&r, T0 + i);
        }
        assert!(
            names(&mut rx).is_empty(),
            "window rules wait for the evaluation"
        );
        st.evaluate_observers(T0 + 40);
        assert_eq!(names(&mut rx), vec![TRUNCATION_RATE.to_string()]);
    }

    #[test]
    fn a_storm_of_one_alert_sends_it_once_per_resend_and_counts_the_rest() {
        let mut config = Config::default();
        only(&mut config, "");
        let stats = Arc::new(AlertStats::default());
        let (tx, mut rx) = mpsc::channel(64);
        let mut st = State::new(Limits::from_config(&config));
        st.add_observer(Box::new(
            Rules::from_config(&config)
                .unwrap()
                .with_sender(tx, stats.clone()),
        ));
        // 10,000 over-ceiling results within one second, each with other arguments.
        let batch: Vec<_> = (0..10_000u32)
            .map(|i| {
                let mut r = rec(20_000 + u64::from(i));
                r.args_hash = Some(crate::collector::ingest::recognize::ArgsHash::new(
                    &format!("{i:012x}"),
                ));
                r
            })
            .collect();
        st.record_batch_ms(&batch, T0 * 1000);
        assert_eq!(names(&mut rx), vec![OVER_CEILING.to_string()]);
        let over = RuleKind::OverCeiling;
        assert_eq!(stats.matches(over, MatchOutcome::Sent), 1);
        assert_eq!(stats.matches(over, MatchOutcome::Merged), 9_999);
        assert_eq!(
            stats.matches(RuleKind::RepeatedOversize, MatchOutcome::Sent),
            0,
            "no hash repeated"
        );
    }

    #[test]
    fn a_new_tool_fires_even_when_the_channel_is_full() {
        let mut config = Config::default();
        only(&mut config, "");
        config.alerts.repeated_oversize.enabled = false;
        let (mut st, mut rx) = wired(&config, 4);
        // Four tools fill the channel; the fifth waits, and is sent once there is room.
        for t in 0..5 {
            let mut r = rec(20_000);
            r.tool = format!("tool_{t}").into();
            st.record_batch_ms(&[r], T0 * 1000 + t);
        }
        assert_eq!(names(&mut rx).len(), 4);
        // Another record of a firing tool: merged, but the queue is flushed first.
        let mut r = rec(20_000);
        r.tool = "tool_0".into();
        st.record_batch_ms(&[r], T0 * 1000 + 10);
        let got: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| m.labels["tool"].clone())
            .collect();
        assert_eq!(got, vec!["tool_4".to_string()]);
    }
}
