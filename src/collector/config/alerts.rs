//! The `[alerts]` section: where alerts go and one sub-table per rule. Each key is its field
//! ([`super::declare`]).
//!
//! The built-in rules are one list, [`for_each_rule`]: each entry is a rule's section (its doc
//! and keys), its module in `alerts/rules/`, the type of its section, its
//! [`RuleKind`](crate::collector::alerts::rules::RuleKind) variant, the public constant of its
//! alert name and the trait it implements. The list generates the `[alerts.<module>]`
//! sections here, and on the alert stage the kind, `ALL`, the names and the wiring from these
//! sections to the rules (`alerts/rules/mod.rs`). It lives here because the configuration is
//! read before any later stage exists.

use super::declare::{above, section};
use super::values::Interval;

/// The built-in alert rules, in the order of `toolsize_alert_matches_total`; see the
/// [module docs](self). Calls `$then!` with the whole list.
macro_rules! for_each_rule {
    ($then:ident) => {
        $then! {
            /// ToolResultOverCeiling: a result over the ceiling of a layer, per (service, tool, layer).
            over_ceiling: OverCeilingConfig => OverCeiling (OVER_CEILING), Record {
                /// Whether the rule runs.
                pub enabled: bool = true,
                /// The alert's severity label.
                pub severity: Severity = Severity::from("page"),
                /// Resolves after this long without an over-ceiling result.
                pub quiet_period: Interval = Interval::secs(300),
            }
            /// ToolArgsRepeatedlyOversize: `count` over-ceiling results with the same arguments hash
            /// within `window` (an agent retrying the same huge call); resolves after a window without
            /// any.
            repeated_oversize: RepeatedOversizeConfig => RepeatedOversize (REPEATED_OVERSIZE), Record {
                /// Whether the rule runs.
                pub enabled: bool = true,
                /// The alert's severity label.
                pub severity: Severity = Severity::from("warning"),
                /// Over-ceiling results with one arguments hash that fire it.
                #[key(check = above(0))]
                pub count: u32 = 3,
                /// Window in which they are counted.
                pub window: Interval = Interval::secs(600),
            }
            /// ToolResultSizeP95Jump: per (service, tool), the p95 of result bytes in the recent window
            /// is at least `factor` x the p95 of the baseline: the slots of the longest window (1h) that
            /// ended before the recent window began (a deploy or a changed query made results larger).
            p95_jump: P95JumpConfig => P95Jump (P95_JUMP), Window {
                /// Whether the rule runs.
                pub enabled: bool = true,
                /// The alert's severity label.
                pub severity: Severity = Severity::from("warning"),
                /// Fires when the recent p95 is at least this many times the baseline p95.
                #[key(check = factor)]
                pub factor: f64 = 3.0,
                /// Minimum sized results in the recent window.
                pub min_recent: u64 = 20,
                /// Minimum sized results in the baseline.
                pub min_baseline: u64 = 50,
            }
            /// ToolResultSizeNearCeiling: the p95 of result bytes in the recent window is at least
            /// `ratio` of the stack's ceiling in bytes (results about to be cut).
            near_ceiling: NearCeilingConfig => NearCeiling (NEAR_CEILING), Window {
                /// Whether the rule runs.
                pub enabled: bool = true,
                /// The alert's severity label.
                pub severity: Severity = Severity::from("warning"),
                /// Fires when the recent p95 is at least this share of the ceiling in bytes.
                #[key(check = share_of_ceiling)]
                pub ratio: f64 = 0.8,
                /// Minimum sized results in the recent window.
                pub min_count: u64 = 20,
            }
            /// ToolResultTruncationRate: (truncated + truncated upstream) / calls in the recent window is
            /// above `threshold`.
            truncation_rate: TruncationRateConfig => TruncationRate (TRUNCATION_RATE), Window {
                /// Whether the rule runs.
                pub enabled: bool = true,
                /// The alert's severity label.
                pub severity: Severity = Severity::from("warning"),
                /// Fires when the truncated share of calls in the recent window is above this.
                #[key(check = share)]
                pub threshold: f64 = 0.05,
                /// Minimum calls in the recent window.
                pub min_count: u64 = 20,
            }
        }
    };
}
pub(crate) use for_each_rule;

/// Declares each rule's section and `[alerts]` with one sub-table per rule of [`for_each_rule`].
macro_rules! alerts_section {
    ($(
        $(#[doc = $doc:literal])+
        $m:ident: $cfg:ident => $kind:ident ($constant:ident), $trait:ident { $($body:tt)* }
    )+) => {
$(
section! {
    $(#[doc = $doc])+
    pub struct $cfg { $($body)* }
}
)+

section! {
    /// Alert rules and where alerts go.
    pub struct AlertsConfig {
        /// Alertmanager base URLs (http://host:port, or https:// built with `tls`); every alert
        /// is posted to each one (POST /api/v2/alerts). Comma-separated in the environment, the
        /// flag repeatable.
        #[key(
            env = "TOOLSIZE_ALERTMANAGER_URLS",
            flag = "--alertmanager-url",
            value_name = "URL",
            check = sink_urls,
        )]
        pub alertmanager_urls: Vec<String> = Vec::new(),
        /// Interval between resends of every firing alert; each send sets endsAt = now + 4 x
        /// this.
        pub(crate) resend_interval: Interval = Interval::secs(60),
        /// A URL receiving every alert (http:// or, built with `tls`, https://), in the body
        /// webhook_format says. Its path may hold a key (Slack): messages show only its host.
        #[key(
            env = "TOOLSIZE_WEBHOOK_URL",
            flag = "--webhook-url",
            value_name = "URL",
            example = "\"http://127.0.0.1:8080/alerts\"",
            check = sink_url,
        )]
        pub webhook_url: Option<String> = None,
        /// The webhook's body: "alertmanager" (the JSON list of alerts Alertmanager takes, the
        /// whole set resent every resend_interval), "slack" (an incoming webhook's message, one
        /// per change), "pagerduty" (an Events API v2 event per change, dedup_key = the
        /// alert's fingerprint; the routing key is webhook_token).
        #[key(env = "TOOLSIZE_WEBHOOK_FORMAT", flag = "--webhook-format", value_name = "FORMAT")]
        pub(crate) webhook_format: WebhookFormat = WebhookFormat::Alertmanager,
        /// Bearer token sent to the webhook; with webhook_format = "pagerduty", the
        /// integration's routing key, sent in the body instead.
        #[key(env = "TOOLSIZE_WEBHOOK_TOKEN", example = "\"\"")]
        pub webhook_token: Option<String> = None,
        /// Interval between evaluations of the window rules (p95_jump, near_ceiling,
        /// truncation_rate). They read the aggregated windows ("recent" = the shortest of
        /// aggregation.windows, 5m by default) and resolve within 3 x this once their condition
        /// no longer holds.
        pub(crate) evaluation_interval: Interval = Interval::secs(10),
        $(
            $(#[doc = $doc])+
            #[section]
            pub $m: $cfg,
        )+
    }
}
    };
}

for_each_rule!(alerts_section);

/// An alert's `severity` label: 1 to 64 ASCII letters, digits, `_` or `-` (Alertmanager routes
/// on it; free text would make a label no route matches).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Severity(String);

impl Severity {
    /// Longest severity, in bytes.
    pub const MAX_LEN: usize = 64;

    /// The label's value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Severity {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        match !s.is_empty() && s.len() <= Self::MAX_LEN && s.chars().all(ok) {
            true => Ok(Self(s)),
            false => Err(format!(
                "{:?}: a severity is 1 to {} ASCII letters, digits, `_` or `-`",
                s.chars().take(Self::MAX_LEN).collect::<String>(),
                Self::MAX_LEN
            )),
        }
    }
}

impl From<Severity> for String {
    fn from(s: Severity) -> String {
        s.0
    }
}

impl From<&str> for Severity {
    /// A severity from a literal; panics on an invalid one (for defaults and tests; text from
    /// outside goes through [`TryFrom<String>`]).
    fn from(s: &str) -> Self {
        Self::try_from(s.to_string()).expect("a valid severity literal")
    }
}

impl super::declare::Scalar for Severity {
    fn parse_item(item: &str) -> Result<Self, String> {
        Self::try_from(item.to_string())
    }
}

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum WebhookFormat {
    /// The JSON list of `postableAlert`s Alertmanager's API v2 takes.
    #[default]
    Alertmanager,
    /// A Slack incoming webhook's `{"text": …}` message.
    Slack,
    /// A PagerDuty Events API v2 event.
    Pagerduty,
}

impl std::str::FromStr for WebhookFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "alertmanager" => Ok(Self::Alertmanager),
            "slack" => Ok(Self::Slack),
            "pagerduty" => Ok(Self::Pagerduty),
            _ => Err(format!(
                "{s:?}: expected \"alertmanager\", \"slack\" or \"pagerduty\""
            )),
        }
    }
}

/// Check of `alertmanager_urls`: each an `http://` or `https://` URL the client can post to.
fn sink_urls(urls: &[String]) -> Result<(), String> {
    urls.iter()
        .try_for_each(|u| crate::collector::net::client::Target::parse(u).map(drop))
}

/// Check of `webhook_url`.
fn sink_url(url: &Option<String>) -> Result<(), String> {
    url.iter()
        .try_for_each(|u| crate::collector::net::client::Target::parse(u).map(drop))
}

/// Check of `p95_jump.factor`: a number above 1.
fn factor(f: &f64) -> Result<(), String> {
    match f.is_finite() && *f > 1.0 {
        true => Ok(()),
        false => Err("must be a number above 1".into()),
    }
}

/// Check of `near_ceiling.ratio`: in (0, 1].
fn share_of_ceiling(r: &f64) -> Result<(), String> {
    match r.is_finite() && *r > 0.0 && *r <= 1.0 {
        true => Ok(()),
        false => Err("must be above 0 and at most 1".into()),
    }
}

/// Check of `truncation_rate.threshold`: in [0, 1).
fn share(t: &f64) -> Result<(), String> {
    match t.is_finite() && (0.0..1.0).contains(t) {
        true => Ok(()),
        false => Err("must be at least 0 and below 1".into()),
    }
}
