//! What each coding agent has sent, per signal, for `GET /api/v1/agents` and `toolsize doctor`:
//! how many tool-call records came as traces, as logs and as hook payloads (and how many of
//! them carried a size), how many metrics requests, and when each last arrived.
//!
//! Counts and times only: nothing of a record's content, names or ids is kept. The agent is the
//! one whose `service.name` the record carries (the services of
//! [`AGENTS`](crate::collector::ingest::agents::AGENTS)), or, for a hook, the agent its path
//! names. A service that is no coding agent's is not counted here.
//!
//! Cost on the ingest path: a request's records are tallied in a short list on the stack (one
//! string match per change of service within the request), then added under one lock, once per
//! request that had an agent's records. Bounded by construction: one entry per known agent.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::collector::ingest::agents::AGENTS;
use crate::collector::ingest::record::ToolRecord;

/// The kinds of signal an agent's calls arrive as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Tool-call spans (or span events).
    Traces,
    /// Tool-call log records.
    Logs,
    /// Metrics export requests.
    Metrics,
    /// Hook payloads posted to `/v1/hooks/{agent}`.
    Hooks,
}

/// What arrived of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Signal {
    /// Records (metrics: requests).
    pub(crate) count: u64,
    /// Of them, the records that carried a size (0 for metrics and hooks).
    pub(crate) sized: u64,
    /// When the last arrived, Unix milliseconds (0: never).
    pub(crate) last_seen_ms: u64,
}

impl Signal {
    fn add(&mut self, count: u64, sized: u64, now_ms: u64) {
        self.count += count;
        self.sized += sized;
        self.last_seen_ms = self.last_seen_ms.max(now_ms);
    }
}

/// What arrived from one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct AgentSignals {
    /// The agent's name (its stack's: `claude-code`, `codex`, …).
    pub(crate) agent: &'static str,
    /// Tool-call spans.
    pub(crate) traces: Signal,
    /// Tool-call log records.
    pub(crate) logs: Signal,
    /// Metrics requests.
    pub(crate) metrics: Signal,
    /// Hook payloads.
    pub(crate) hooks: Signal,
}

impl AgentSignals {
    fn of(&mut self, kind: Kind) -> &mut Signal {
        match kind {
            Kind::Traces => &mut self.traces,
            Kind::Logs => &mut self.logs,
            Kind::Metrics => &mut self.metrics,
            Kind::Hooks => &mut self.hooks,
        }
    }
}

/// The `/api/v1/agents` answer.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AgentsView {
    /// The agents heard from, in the order of the agents the daemon knows.
    pub(crate) agents: Vec<AgentSignals>,
    /// The daemon's clock, Unix milliseconds, to read `last_seen_ms` against.
    pub(crate) now_ms: u64,
}

/// The agent (its stack name) whose telemetry uses `service`.
pub(crate) fn agent_of(service: &str) -> Option<&'static str> {
    AGENTS
        .iter()
        .find(|a| a.stack.serves(service))
        .map(|a| a.stack.name)
}

/// The agents' records of one request: per agent, records and sized records.
#[derive(Debug, Default)]
pub(crate) struct Tally(Vec<(&'static str, u64, u64)>);

impl Tally {
    /// The agents' records among `records`.
    pub(crate) fn of(records: &[ToolRecord]) -> Self {
        let mut tally: Vec<(&'static str, u64, u64)> = Vec::new();
        let mut last: Option<(&Arc<str>, Option<&'static str>)> = None;
        for r in records {
            let agent = match last {
                Some((s, a)) if Arc::ptr_eq(s, &r.service) => a,
                _ => agent_of(&r.service),
            };
            last = Some((&r.service, agent));
            let Some(agent) = agent else { continue };
            let sized = u64::from(r.size.bytes().is_some());
            match tally.iter_mut().find(|t| t.0 == agent) {
                Some(t) => {
                    t.1 += 1;
                    t.2 += sized;
                }
                None => tally.push((agent, 1, sized)),
            }
        }
        Self(tally)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The coding agents ([`agent_of`]) whose `service.name` a
/// protobuf `ExportMetricsServiceRequest` names, each once; none when it does not decode. Only
/// the resources are read: the metrics themselves are skipped field by field.
pub(crate) fn metrics_agents(body: &[u8]) -> Vec<&'static str> {
    #[derive(Clone, PartialEq, prost::Message)]
    struct Resources {
        #[prost(message, repeated, tag = "1")]
        resource_metrics: Vec<ResourceOnly>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct ResourceOnly {
        #[prost(message, optional, tag = "1")]
        resource: Option<opentelemetry_proto::tonic::resource::v1::Resource>,
    }
    let Ok(req) = <Resources as prost::Message>::decode(body) else {
        return vec![];
    };
    let mut out: Vec<&'static str> = Vec::new();
    for r in req
        .resource_metrics
        .iter()
        .filter_map(|r| r.resource.as_ref())
    {
        let service = r
            .attributes
            .iter()
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s) => {
                    Some(s.as_str())
                }
                _ => None,
            });
        if let Some(a) = service.and_then(agent_of) {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

/// The shared counts.
#[derive(Debug, Default)]
pub struct Heard {
    agents: Mutex<Vec<AgentSignals>>,
}

impl Heard {
    /// Adds `count` items (`sized` of them with a size) of `kind` from `agent`.
    pub(crate) fn add(&self, agent: &'static str, kind: Kind, count: u64, sized: u64, now_ms: u64) {
        let mut all = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        let entry = match all.iter().position(|a| a.agent == agent) {
            Some(i) => &mut all[i],
            None => {
                all.push(AgentSignals {
                    agent,
                    ..AgentSignals::default()
                });
                all.last_mut().expect("just pushed")
            }
        };
        entry.of(kind).add(count, sized, now_ms);
    }

    /// Adds a request's `tally`, arrived as `kind`.
    pub(crate) fn add_tally(&self, kind: Kind, tally: Tally, now_ms: u64) {
        if tally.is_empty() {
            return;
        }
        for (agent, count, sized) in tally.0 {
            self.add(agent, kind, count, sized, now_ms);
        }
    }

    /// What has arrived, per agent, in the order of [`AGENTS`].
    pub(crate) fn view(&self, now_ms: u64) -> AgentsView {
        let all = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        let mut agents: Vec<AgentSignals> = all.clone();
        agents.sort_by_key(|a| AGENTS.iter().position(|k| k.stack.name == a.agent));
        AgentsView { agents, now_ms }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_known_by_their_services() {
        assert_eq!(agent_of("claude-code"), Some("claude-code"));
        assert_eq!(agent_of("codex_exec"), Some("codex"));
        assert_eq!(agent_of("github-copilot"), Some("copilot"));
        assert_eq!(agent_of("checkout-agent"), None);
    }

    #[test]
    fn a_metrics_request_names_its_agents_once() {
        use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
        use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
        use opentelemetry_proto::tonic::metrics::v1::ResourceMetrics;
        use opentelemetry_proto::tonic::resource::v1::Resource;
        let of = |service: &str| ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue(service.into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = ExportMetricsServiceRequest {
            resource_metrics: vec![of("codex_exec"), of("checkout"), of("codex_exec")],
        };
        let body = prost::Message::encode_to_vec(&req);
        assert_eq!(metrics_agents(&body), ["codex"]);
        assert!(metrics_agents(b"\xff\xff").is_empty());
    }

    #[test]
    fn counts_and_last_seen_per_agent_and_kind() {
        let h = Heard::default();
        h.add("codex", Kind::Metrics, 1, 0, 5);
        h.add("claude-code", Kind::Logs, 3, 2, 7);
        h.add("claude-code", Kind::Logs, 1, 1, 6);
        h.add("claude-code", Kind::Hooks, 1, 0, 9);
        let v = h.view(10);
        assert_eq!(
            v.agents[0].agent, "claude-code",
            "in the order of the known agents"
        );
        let c = &v.agents[0];
        assert_eq!((c.logs.count, c.logs.sized, c.logs.last_seen_ms), (4, 3, 7));
        assert_eq!(c.hooks.count, 1);
        assert_eq!(c.traces, Signal::default());
        assert_eq!(v.agents[1].metrics.count, 1);
    }
}
