//! The `[alerts]` section: where alerts go and one sub-table per rule. Each key is its field
//! ([`super::declare`]).

use super::declare::section;
use super::values::Interval;
use crate::collector::alerts::rules::for_each_rule;

/// Declares `[alerts]` with one sub-table per rule of [`for_each_rule`], `[alerts.<module>]`
/// holding the rule's `Config`.
macro_rules! alerts_section {
    ($($(#[doc = $doc:literal])+ $kind:ident => $m:ident ($constant:ident): $trait:ident;)+) => {
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
            pub $m: crate::collector::alerts::rules::$m::Config,
        )+
    }
}
    };
}

for_each_rule!(alerts_section);

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
