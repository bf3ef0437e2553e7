//! A followed session's entry in the ledger's table: the results its context holds, by end
//! time, and per tool the tokens a request carries, the first few tools in the entry itself.
//!
//! **Under load.** A result is inserted in end order: in order (the usual case) pushed after a
//! compare with the latest end the entry keeps, so the held results, cold between requests,
//! are written and not searched (a binary search over them was a cache miss a step); out of
//! order, a binary search. A request in start order adds only the results ended since the
//! previous one to the sums it reads, so each result is added once. A request that started
//! before an earlier one walks the held results instead. **Bounded** by the ledger: the caller
//! checks `context.max_results_per_session` before [`Session::hold`]; nothing here fails.

use std::sync::Arc;

use crate::collector::ingest::context::SessionId;

/// A result a session's context holds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    pub(super) at_ns: u64,
    pub(super) tool: u32,
    pub(super) tokens: u32,
}

/// One followed session.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// The results held, by `at_ns` (they arrive in that order; a late one is inserted).
    pub(super) held: Vec<Held>,
    /// The latest `at_ns` of `held` (0 when empty): a result at or after it is pushed.
    held_max_ns: u64,
    /// How many of `held` (a prefix) ended by `last_start`: carried by every later request.
    carried_len: usize,
    /// Their tokens per tool: what a request carries, without walking `held`.
    by_tool: Sums,
    /// The latest start of a request.
    last_start: u64,
    pub(super) last_ms: u64,
    pub(super) requests: u64,
    pub(super) results: u64,
    pub(super) result_tokens: u64,
    pub(super) carried: u64,
    pub(super) input: u64,
    pub(super) cache_read: u64,
    pub(super) cache_creation: u64,
    pub(super) compactions: u64,
}

impl Session {
    /// Adds a result in `at_ns` order; one that ended before the latest request started is
    /// carried from the next request on.
    /// Returns whether it is late: a request it preceded was applied without it.
    pub(super) fn hold(&mut self, h: Held) -> bool {
        let at = if h.at_ns >= self.held_max_ns {
            self.held_max_ns = h.at_ns;
            self.held.push(h);
            self.held.len() - 1
        } else {
            let at = self.held.partition_point(|x| x.at_ns <= h.at_ns);
            self.held.insert(at, h);
            at
        };
        let late = at < self.carried_len || (self.requests > 0 && h.at_ns <= self.last_start);
        if late {
            self.carried_len += 1;
            self.by_tool.add(h.tool, u64::from(h.tokens));
        }
        late
    }

    /// The tokens per tool a request starting at `start` carries, into `out`: the results
    /// ended by then. Requests come in start order: the carried prefix only grows, each result
    /// is added once. A request that started before an earlier one walks the results instead.
    pub(super) fn carry(&mut self, start: u64, out: &mut Vec<(u32, u64)>) {
        out.clear();
        if self.requests > 1 && start < self.last_start {
            for h in self.held.iter().filter(|h| h.at_ns <= start) {
                add(out, h.tool, u64::from(h.tokens));
            }
            return;
        }
        self.last_start = start;
        while let Some(h) = self.held.get(self.carried_len).filter(|h| h.at_ns <= start) {
            self.by_tool.add(h.tool, u64::from(h.tokens));
            self.carried_len += 1;
        }
        self.by_tool.carried(out);
    }

    /// A sum of the fields an event reads, over the entry's cache lines: reading it loads
    /// them ([`super::apply`]'s warming pass).
    #[inline(always)]
    pub(super) fn touch(&self) -> u64 {
        self.last_ms
            .wrapping_add(self.requests)
            .wrapping_add(self.results)
            .wrapping_add(self.input)
            .wrapping_add(self.carried_len as u64)
            .wrapping_add(self.held.len() as u64)
            .wrapping_add(self.by_tool.len as u64)
            .wrapping_add(self.compactions)
    }

    /// Recounts the carried prefix after a compaction removed results.
    pub(super) fn recount(&mut self) {
        self.held_max_ns = self.held.last().map_or(0, |h| h.at_ns);
        self.carried_len = if self.requests > 0 {
            self.held.partition_point(|h| h.at_ns <= self.last_start)
        } else {
            0
        };
        self.by_tool.clear();
        for h in &self.held[..self.carried_len] {
            self.by_tool.add(h.tool, u64::from(h.tokens));
        }
    }
}

/// Tools whose sums a session holds in its own entry; past them, on the heap.
const INLINE_TOOLS: usize = 6;

/// Tokens per tool, the first [`INLINE_TOOLS`] tools in place: a request reads its session's
/// sums from the entry it already looked up (a few tools carry most sessions), not from a
/// separate allocation that costs a cache miss of its own.
#[derive(Debug, Default)]
struct Sums {
    len: usize,
    tools: [u32; INLINE_TOOLS],
    tokens: [u64; INLINE_TOOLS],
    more: Vec<(u32, u64)>,
}

impl Sums {
    fn add(&mut self, tool: u32, tokens: u64) {
        if let Some(k) = self.tools[..self.len].iter().position(|&t| t == tool) {
            self.tokens[k] += tokens;
        } else if self.len < INLINE_TOOLS {
            (self.tools[self.len], self.tokens[self.len]) = (tool, tokens);
            self.len += 1;
        } else {
            add(&mut self.more, tool, tokens);
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        self.more.clear();
    }

    /// The tools with tokens, into `out`.
    fn carried(&self, out: &mut Vec<(u32, u64)>) {
        let inline = self.tools[..self.len].iter().zip(&self.tokens[..self.len]);
        out.extend(inline.map(|(&t, &n)| (t, n)).filter(|&(_, n)| n > 0));
        out.extend(self.more.iter().filter(|(_, n)| *n > 0));
    }
}

/// Adds `tokens` to `tool`'s entry of `sums`.
fn add(sums: &mut Vec<(u32, u64)>, tool: u32, tokens: u64) {
    match sums.iter_mut().find(|(t, _)| *t == tool) {
        Some((_, n)) => *n += tokens,
        None => sums.push((tool, tokens)),
    }
}

pub(super) type SessionKey = (Arc<str>, SessionId);

/// A session's id, borrowed: a trace id (read in place from a tool span's record) or the
/// emitter's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum IdRef<'a> {
    Trace(&'a [u8; 16]),
    Named(&'a str),
}

impl SessionId {
    /// The id, borrowed.
    pub(super) fn as_ref(&self) -> IdRef<'_> {
        match self {
            SessionId::Trace(t) => IdRef::Trace(t),
            SessionId::Named(s) => IdRef::Named(s),
        }
    }
}

impl IdRef<'_> {
    /// The id, owned, for a session's entry.
    pub(super) fn to_owned(self) -> SessionId {
        match self {
            IdRef::Trace(t) => SessionId::Trace(*t),
            IdRef::Named(s) => SessionId::Named(s.into()),
        }
    }
}

/// A borrowed session key. The table hashes its owned keys through it
/// ([`SessionRef::of`]), so a key hashes the same borrowed or owned.
pub(super) struct SessionRef<'a>(pub(super) &'a str, pub(super) IdRef<'a>);

/// Hashed in as few writes as the key allows (every tool span's record is hashed once): the
/// service's bytes and a terminator, then a trace id as one 128-bit word, or a tag and the
/// emitter's id. The derived form also wrote the variant's tag as a word and the trace id's
/// length before its bytes. Keys that differ still write different sequences: the service
/// ends at its terminator (a byte that UTF-8 never holds), and a trace id is one word where a
/// named id is a byte and its bytes.
impl std::hash::Hash for SessionRef<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.0.as_bytes());
        state.write_u8(0xff);
        match self.1 {
            IdRef::Trace(t) => state.write_u128(u128::from_ne_bytes(*t)),
            IdRef::Named(s) => {
                state.write_u8(1);
                state.write(s.as_bytes());
            }
        }
    }
}

impl<'a> SessionRef<'a> {
    /// The borrowed form of an entry's key.
    pub(super) fn of(key: &'a SessionKey) -> Self {
        Self(&key.0, key.1.as_ref())
    }
}

impl hashbrown::Equivalent<SessionKey> for SessionRef<'_> {
    fn equivalent(&self, key: &SessionKey) -> bool {
        self.1 == key.1.as_ref()
            && crate::collector::hash::bytes_eq(self.0.as_bytes(), key.0.as_bytes())
    }
}

impl PartialOrd for SessionId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SessionId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (SessionId::Trace(a), SessionId::Trace(b)) => a.cmp(b),
            (SessionId::Named(a), SessionId::Named(b)) => a.cmp(b),
            (SessionId::Trace(_), SessionId::Named(_)) => std::cmp::Ordering::Less,
            (SessionId::Named(_), SessionId::Trace(_)) => std::cmp::Ordering::Greater,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(at_ns: u64) -> Held {
        Held {
            at_ns,
            tool: 0,
            tokens: 1,
        }
    }

    fn ends(s: &Session) -> Vec<u64> {
        s.held.iter().map(|h| h.at_ns).collect()
    }

    /// Results in end order are pushed, one out of order is placed among them, and after a
    /// compaction the latest end is the latest of what is left (none: any result is pushed).
    #[test]
    fn held_results_stay_in_end_order_through_pushes_inserts_and_compactions() {
        let mut s = Session::default();
        for at in [10, 20, 20, 30, 15, 5, 30] {
            s.hold(held(at));
        }
        assert_eq!(ends(&s), [5, 10, 15, 20, 20, 30, 30]);
        s.held.retain(|h| h.at_ns > 18);
        s.recount();
        s.hold(held(17));
        s.hold(held(40));
        assert_eq!(ends(&s), [17, 20, 20, 30, 30, 40]);
        s.held.retain(|h| h.at_ns > 40);
        s.recount();
        s.hold(held(3));
        s.hold(held(2));
        assert_eq!(ends(&s), [2, 3]);
    }

    /// What a request carries, through pushes, inserts, late results, requests out of order and
    /// compactions, is what walking every held result gives.
    #[test]
    fn requests_carry_what_walking_the_held_results_gives() {
        let mut s = Session::default();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % m
        };
        let mut out = Vec::new();
        for step in 0..5_000u64 {
            let at = step / 3 + next(40);
            match next(10) {
                0..=5 => {
                    let tool = next(9) as u32;
                    s.hold(Held {
                        at_ns: at,
                        tool,
                        tokens: 1 + next(100) as u32,
                    });
                }
                6..=8 => {
                    s.requests += 1;
                    s.carry(at, &mut out);
                    let mut walked = Vec::new();
                    for h in s.held.iter().filter(|h| h.at_ns <= at) {
                        add(&mut walked, h.tool, u64::from(h.tokens));
                    }
                    out.sort_unstable();
                    walked.sort_unstable();
                    assert_eq!(out, walked, "step {step}, request at {at}");
                }
                _ => {
                    s.held.retain(|h| h.at_ns > at.saturating_sub(30));
                    s.recount();
                }
            }
        }
    }
}
