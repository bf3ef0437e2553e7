//! `/api/v1/sessions`: the heaviest sessions the ledger follows, sizes and counts only.
//!
//! **Under load.** Built on the aggregator when asked: a walk of the session table and a sort,
//! at most `context.max_sessions` entries; at most [`MAX_SESSIONS_SHOWN`] rows are returned.

use serde::{Deserialize, Serialize};

use super::session::{Session, SessionKey};
use super::Ledger;
use crate::collector::ingest::context::SessionId;

/// Sessions shown by `/api/v1/sessions` unless the request asks for fewer or more.
pub(crate) const DEFAULT_SESSIONS_SHOWN: usize = 20;

/// Most sessions `/api/v1/sessions` shows.
pub(crate) const MAX_SESSIONS_SHOWN: usize = 200;

/// One session of `/api/v1/sessions`: sizes and counts only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SessionRow {
    /// Service.
    pub(crate) service: String,
    /// The emitter's session id, else the trace id (32 hex digits).
    pub(crate) session: String,
    /// `session` or `trace`.
    pub(crate) by: String,
    /// Model requests seen.
    pub(crate) requests: u64,
    /// Tool results seen.
    pub(crate) results: u64,
    /// Their tokens.
    pub(crate) result_tokens: u64,
    /// Results the context holds now (since the last compaction).
    pub(crate) held: u64,
    /// Σ over requests of the result tokens each carried.
    pub(crate) context_tokens: u64,
    /// Input tokens of its requests in all.
    pub(crate) input_tokens: u64,
    /// Of them, cache reads.
    pub(crate) cache_read_tokens: u64,
    /// Of them, cache writes.
    pub(crate) cache_creation_tokens: u64,
    /// Compactions.
    pub(crate) compactions: u64,
    /// Seconds since its last event.
    pub(crate) idle_secs: u64,
}

/// `/api/v1/sessions`: the heaviest sessions followed, by context tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SessionsView {
    /// Sessions followed now.
    pub(crate) followed: u64,
    /// `context.max_sessions`.
    pub(crate) max_sessions: u64,
    /// Events of sessions past the cap, not followed, since start.
    pub(crate) overflow: u64,
    /// Sessions ended by `context.session_idle` since start.
    pub(crate) expired: u64,
    /// Results that arrived after a request they preceded, since start: not carried by it.
    pub(crate) late: u64,
    /// The heaviest first.
    pub(crate) sessions: Vec<SessionRow>,
}

impl Ledger {
    /// The `limit` heaviest sessions by context tokens, then by result tokens (of `service`
    /// only, when given).
    pub(crate) fn sessions_view(
        &self,
        limit: usize,
        service: Option<&str>,
        now_ms: u64,
    ) -> SessionsView {
        let mut all: Vec<(&SessionKey, &Session)> = self
            .sessions
            .iter()
            .filter(|((svc, _), _)| service.is_none_or(|s| s == &**svc))
            .map(|(k, s)| (k, s))
            .collect();
        let weight = |s: &Session| (s.carried, s.result_tokens, s.requests);
        all.sort_by(|a, b| weight(b.1).cmp(&weight(a.1)).then_with(|| a.0.cmp(b.0)));
        all.truncate(limit.min(MAX_SESSIONS_SHOWN));
        SessionsView {
            followed: self.sessions.len() as u64,
            max_sessions: self.limits.max_sessions as u64,
            overflow: self.stats.sessions_overflow,
            expired: self.stats.sessions_expired,
            late: self.stats.results_late,
            sessions: all
                .into_iter()
                .map(|((service, id), s)| SessionRow {
                    service: service.to_string(),
                    session: id.to_string(),
                    by: match id {
                        SessionId::Trace(_) => "trace",
                        SessionId::Named(_) => "session",
                    }
                    .to_string(),
                    requests: s.requests,
                    results: s.results,
                    result_tokens: s.result_tokens,
                    held: s.held.len() as u64,
                    context_tokens: s.carried,
                    input_tokens: s.input,
                    cache_read_tokens: s.cache_read,
                    cache_creation_tokens: s.cache_creation,
                    compactions: s.compactions,
                    idle_secs: now_ms.saturating_sub(s.last_ms) / 1000,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::result;
    use super::super::*;
    use crate::collector::ingest::context::SessionId;

    /// Trace sessions are shown by their trace id in hex.
    #[test]
    fn trace_sessions_show_their_trace_id() {
        let mut l = Ledger::new(LedgerLimits::default());
        let mut e = result("x", 1, "t", 1);
        e.session = SessionId::Trace([0xab; 16]);
        l.record(vec![e], 0);
        let v = l.sessions_view(DEFAULT_SESSIONS_SHOWN, None, 0);
        assert_eq!(v.sessions[0].session, "ab".repeat(16));
        assert_eq!(v.sessions[0].by, "trace");
    }
}
