//! A reload of the configuration (on SIGHUP in `toolsize serve`, [`Daemon::reload`]): what
//! changed, what was taken in place and what waits for a restart.
//!
//! Taken in place: the alert sinks, each rule's settings and the layer stacks; the state, the
//! firing alerts, the snapshots and the listeners are kept. A part that cannot be taken (the
//! aggregator stopped, a sink that cannot be built) stays as it ran and its keys are listed as
//! waiting for a restart; a reload never stops the daemon. Keys are named, never their values.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::Daemon;
use crate::collector::alerts::rules::RuleKind;
use crate::collector::read::Command;
use crate::collector::{config, state, Config};

/// What a reload ([`Daemon::reload`]) found and did. Keys are named, never their values (a
/// token may have changed).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Keys whose value differs from the running configuration.
    pub changed: Vec<String>,
    /// Of those, the keys now in effect.
    pub applied: Vec<String>,
    /// Of those, the keys that wait for a restart.
    pub restart: Vec<String>,
    /// What holding the series to a new layer stack did, when the stack changed.
    pub restacked: Option<state::Restacked>,
}

/// The keys of the alert sinks, replaced together on a reload.
const SINK_KEYS: [&str; 5] = [
    "alerts.alertmanager_urls",
    "alerts.webhook_url",
    "alerts.webhook_token",
    "alerts.webhook_format",
    "alerts.resend_interval",
];

/// The dotted keys whose values differ between `a` and `b` (the resolved layer stack counts as
/// `layers.stack`), sorted.
fn changed_keys(a: &Config, b: &Config) -> Vec<String> {
    fn walk(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value;
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let null = Value::Null;
                    walk(
                        &config::declare::join(path, k),
                        x.get(k).unwrap_or(&null),
                        y.get(k).unwrap_or(&null),
                        out,
                    );
                }
            }
            _ if a != b => out.push(path.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let (x, y) = (serde_json::to_value(a), serde_json::to_value(b));
    if let (Ok(x), Ok(y)) = (x, y) {
        walk("", &x, &y, &mut out);
    }
    if a.stack != b.stack && !out.iter().any(|k| k == "layers.stack") {
        out.push("layers.stack".into());
    }
    out.sort();
    out
}

impl Daemon {
    /// Takes what can change without a restart from `new`, a configuration read again (on
    /// SIGHUP): the alert sinks (`alerts.alertmanager_urls`, `alerts.webhook_*`,
    /// `alerts.resend_interval`; the new sinks are sent the firing alerts at once), each alert
    /// rule's settings (thresholds, severities, quiet periods) and the layer stacks (`[layers]`:
    /// every series is held to its new stack at once, its counts kept by layer id, see
    /// [`state::restack`]). The aggregated state, the firing alerts and the snapshots are
    /// otherwise untouched. Every other changed key (listeners, windows, enabling or disabling a
    /// rule) waits for a restart and is listed as such. Returns the configuration now in effect
    /// (`running` with what was taken) and what was done.
    pub async fn reload(&self, running: &Config, new: &Config) -> (Config, Reloaded) {
        let changed = changed_keys(running, new);
        let mut effective = running.clone();
        let mut applied: Vec<String> = Vec::new();
        let sinks: Vec<&String> = changed
            .iter()
            .filter(|k| SINK_KEYS.contains(&k.as_str()))
            .collect();
        if !sinks.is_empty() && self.pipeline.api.alerts().reload_sinks(new) {
            let (e, n) = (&mut effective.alerts, &new.alerts);
            e.alertmanager_urls.clone_from(&n.alertmanager_urls);
            e.webhook_url.clone_from(&n.webhook_url);
            e.webhook_token.clone_from(&n.webhook_token);
            e.webhook_format = n.webhook_format;
            e.resend_interval = n.resend_interval;
            applied.extend(sinks.into_iter().cloned());
        }
        let rules_changed = changed.iter().any(|k| {
            k.starts_with("alerts.")
                && k.matches('.').count() >= 2
                && !SINK_KEYS.contains(&k.as_str())
        });
        if rules_changed {
            let (tx, rx) = oneshot::channel();
            let asked = self
                .pipeline
                .control
                .send(Command::Retune {
                    old: Box::new(running.alerts.clone()),
                    new: Box::new(new.alerts.clone()),
                    reply: tx,
                })
                .await;
            if let (Ok(()), Ok(retune)) = (asked, rx.await) {
                for section in retune.applied {
                    let taken = RuleKind::ALL.into_iter().find(|k| k.section() == section);
                    if let Some(kind) = taken {
                        kind.take(&mut effective.alerts, &new.alerts);
                    }
                    let prefix = format!("{section}.");
                    applied.extend(changed.iter().filter(|k| k.starts_with(&prefix)).cloned());
                }
            }
        }
        let layer_keys: Vec<&String> = changed
            .iter()
            .filter(|k| k.starts_with("layers."))
            .collect();
        let mut restacked = None;
        if !layer_keys.is_empty() {
            restacked = self.restack(new).await;
            if restacked.is_some() {
                effective.stack = new.stack.clone();
                effective.layers = new.layers.clone();
                applied.extend(layer_keys.into_iter().cloned());
            }
        }
        let restart = changed
            .iter()
            .filter(|k| !applied.contains(k))
            .cloned()
            .collect();
        applied.sort();
        (
            effective,
            Reloaded {
                changed,
                applied,
                restart,
                restacked,
            },
        )
    }

    /// Holds every series to the stacks of `new` (the aggregator renumbers what it keeps by
    /// layer id), then serves them on `/api/v1/layers`. `None` when the aggregator has stopped.
    async fn restack(&self, new: &Config) -> Option<state::Restacked> {
        let stacks = Arc::new(state::stacks::Stacks::new(&new.stack, &new.layers));
        let (tx, rx) = oneshot::channel();
        let command = Command::Restack {
            stacks: stacks.clone(),
            size_bounds: state::layer_bounds(&new.stack, &new.layers),
            reply: tx,
        };
        self.pipeline.control.send(command).await.ok()?;
        let done = rx.await.ok()?;
        self.pipeline
            .api
            .set_stack(Arc::new(new.stack.clone()), stacks.others());
        Some(done)
    }
}
