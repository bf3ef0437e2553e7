//! How a request's context events are applied: each event resolved to its tool and its
//! session's hash in arrival order, then applied session by session.
//!
//! **Under load.** A tool span's result is read from the record the batch carries
//! ([`Entry::Record`]) once: what the ledger needs of it (tokens, start, trace, service) is
//! copied into its pending entry, so applying it reads no record again (a record is 400 bytes
//! over several cache lines: read again when applied, a tenth of `record_batch`'s samples in
//! `ledger_cost_on_the_storm`). A request of many sessions (one per trace) has its events
//! grouped by session (a counting sort on the hash), and a run of one session's events looks
//! its entry up once, after a first pass has read every run's entry so that their cache
//! misses overlap ([`warm`]). **Bounded** by the ledger's caps; nothing here fails: an entry
//! whose record is missing (it cannot be: the records travel with their events) is skipped.

use std::sync::Arc;

use super::session::{Held, IdRef, Session, SessionKey, SessionRef};
use super::settle::MAX_SETTLING;
use super::tools::{Input, ToolCache, ToolContext};
use super::{Ledger, LedgerStats};
use crate::collector::ingest::context::{
    result_tokens, ContextEvent, ContextEvents, ContextKind, Entry,
};
use crate::collector::ingest::record::ToolRecord;
use crate::collector::state::MapHasher;

/// The groups a request's events are sorted into by their session's hash ([`Ledger::group`]).
const GROUPS: usize = 256;

/// No index: an event without a tool, an event not read from a record.
const NONE: u32 = u32::MAX;

/// An event of the request being applied: its index, its tool's ([`NONE`]: none) and its
/// session key's hash; for a result read from a record, what the ledger reads of the record.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    event: u32,
    tool: u32,
    hash: u64,
    /// A record's result: its service's index in [`Ledger::services`] ([`NONE`]: another
    /// event, read from the request's events when applied), tokens, start and trace.
    service: u32,
    /// Its request among those applied together ([`Ledger::record_batches`]).
    batch: u16,
    tokens: u64,
    at_ns: u64,
    trace: [u8; 16],
}

impl Default for Pending {
    fn default() -> Self {
        Self {
            event: 0,
            tool: NONE,
            hash: 0,
            service: NONE,
            batch: 0,
            tokens: 0,
            at_ns: 0,
            trace: [0; 16],
        }
    }
}

impl Pending {
    /// Its group among [`GROUPS`]: the low bits of the hash, which place it in the table too.
    fn group(&self) -> usize {
        (self.hash % GROUPS as u64) as usize
    }

    /// The result it carries, as applied (`services`: [`Ledger::services`]); `None` for an
    /// event not read from a record.
    #[inline(always)]
    fn result<'a>(&'a self, services: &'a [Arc<str>]) -> Option<EventRef<'a>> {
        Some(EventRef {
            service: services.get(self.service as usize)?,
            session: IdRef::Trace(&self.trace),
            at_ns: self.at_ns,
            kind: Kind::Result {
                tokens: self.tokens,
                estimated: true,
            },
            tool: None,
        })
    }
}

/// An event as it is applied, borrowed from the request's events or read from its records.
#[derive(Debug, Clone, Copy)]
pub(super) struct EventRef<'a> {
    service: &'a Arc<str>,
    session: IdRef<'a>,
    at_ns: u64,
    kind: Kind,
    /// A result's tool.
    tool: Option<&'a Arc<str>>,
}

/// What an event did, without its tool's name.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Result {
        tokens: u64,
        estimated: bool,
    },
    Request {
        input: u64,
        cache_read: u64,
        cache_creation: u64,
    },
    Clear,
}

impl<'a> EventRef<'a> {
    /// An event kept whole.
    ///
    /// Always inlined, as [`EventRef::at`]: returned through memory, the event was read back
    /// over the words just stored (a store-forwarding miss per event).
    #[inline(always)]
    pub(super) fn of(e: &'a ContextEvent) -> Self {
        let (kind, tool) = match &e.kind {
            ContextKind::Result {
                tool,
                tokens,
                estimated,
            } => (
                Kind::Result {
                    tokens: *tokens,
                    estimated: *estimated,
                },
                Some(tool),
            ),
            &ContextKind::Request {
                input,
                cache_read,
                cache_creation,
            } => (
                Kind::Request {
                    input,
                    cache_read,
                    cache_creation,
                },
                None,
            ),
            ContextKind::Clear => (Kind::Clear, None),
        };
        Self {
            service: &e.service,
            session: e.session.as_ref(),
            at_ns: e.at_ns,
            kind,
            tool,
        }
    }

    /// The `n`th event of a request, unless it is a record's (read once, by
    /// [`Ledger::pending`]).
    #[inline(always)]
    fn at(events: &'a ContextEvents, n: usize) -> Option<Self> {
        match events.order[n] {
            Entry::Whole(i) => events.whole.get(i as usize).map(Self::of),
            Entry::Record { .. } => None,
            Entry::Request(i) => {
                let r = events.requests.get(i as usize)?;
                Some(Self {
                    service: events.services.get(r.service as usize)?,
                    session: IdRef::Trace(&r.trace),
                    at_ns: r.at_ns,
                    kind: Kind::Request {
                        input: r.input,
                        cache_read: r.cache_read,
                        cache_creation: r.cache_creation,
                    },
                    tool: None,
                })
            }
        }
    }

    /// Whether `other` is of the same session (the same service name, mostly the same
    /// allocation, and id).
    #[inline(always)]
    fn same_session(&self, other: &EventRef<'_>) -> bool {
        self.session == other.session
            && (Arc::ptr_eq(self.service, other.service)
                || crate::collector::hash::bytes_eq(
                    self.service.as_bytes(),
                    other.service.as_bytes(),
                ))
    }
}

/// What an event adds to besides its session: the tools, the ledger's counts and the buffer a
/// request's carried tokens are summed in.
struct Books<'l> {
    tools: &'l mut [ToolContext],
    stats: &'l mut LedgerStats,
    scratch: &'l mut Vec<(u32, u64)>,
    max_results: usize,
}

impl Ledger {
    /// Applies the events of one request, whose tool spans' records are `records`, at
    /// `now_ms`, each session's in order; an event that settles waits
    /// [`super::LedgerLimits::settle_ms`] first.
    ///
    /// While the map has room for every session the request could add, its events are applied
    /// session by session ([`Ledger::group`]): a request of many sessions (traces) touches each
    /// session's entry once in a row instead of once per event scattered among the others',
    /// which cost a cache miss each; the events of one session in a row look its entry up
    /// once. Tools are resolved in arrival order, and near the cap every event is applied in
    /// arrival order, so which tools and sessions are followed does not depend on the
    /// grouping; only the order of the shares of one request's sessions in a tool's recent ones
    /// does.
    pub(crate) fn record_batch(
        &mut self,
        events: &ContextEvents,
        records: &[ToolRecord],
        now_ms: u64,
    ) {
        self.record_batches(&[(events, records)], now_ms);
    }

    /// Applies the events of several requests as [`Ledger::record_batch`] applies one's, in
    /// the order the requests came: a session's events of all of them are applied in one run,
    /// its entry looked up once for them all (the aggregator applies the batches it holds so).
    pub(crate) fn record_batches(
        &mut self,
        batches: &[(&ContextEvents, &[ToolRecord])],
        now_ms: u64,
    ) {
        self.expire(now_ms);
        let mut order = self.pending(batches, now_ms);
        if self.sessions.len() + order.len() <= self.limits.max_sessions {
            self.group(&mut order);
        }
        std::hint::black_box(warm(&self.sessions, &order));
        let Ledger {
            sessions,
            hasher,
            tools,
            stats,
            scratch,
            services,
            limits,
            ..
        } = self;
        let mut books = Books {
            tools,
            stats,
            scratch,
            max_results: limits.max_results,
        };
        let services: &[Arc<str>] = services;
        // The session of the run of events being applied: its hash, an event of it and its
        // entry.
        let mut run: Option<(u64, EventRef<'_>, &mut Session)> = None;
        for p in &order {
            let Some(e) = p.result(services).or_else(|| {
                let (events, _) = batches.get(usize::from(p.batch))?;
                EventRef::at(events, p.event as usize)
            }) else {
                continue;
            };
            let same = run
                .as_ref()
                .is_some_and(|(hash, first, _)| *hash == p.hash && first.same_session(&e));
            if !same {
                let full = sessions.len() >= limits.max_sessions;
                run = session_of(sessions, hasher, full, e.service, e.session, p.hash)
                    .map(|s| (p.hash, e, s));
            }
            match run.as_mut() {
                Some((_, _, s)) => {
                    let tool = (p.tool != NONE).then_some(p.tool);
                    apply_to(s, &e, tool, now_ms, &mut books);
                }
                None => books.stats.sessions_overflow += 1,
            }
        }
        self.order = order;
        self.services.clear();
        self.settle(now_ms);
    }

    /// The requests' events to apply, in arrival order: each resolved to its tool and its
    /// session's hash, a record's result read from its record; those that settle queued.
    fn pending(
        &mut self,
        batches: &[(&ContextEvents, &[ToolRecord])],
        now_ms: u64,
    ) -> Vec<Pending> {
        // The records (and the names they share) live until the end: an address in the cache
        // names one tool for all the requests.
        self.tool_cache = ToolCache::default();
        self.services.clear();
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        for (batch, (events, records)) in batches.iter().enumerate() {
            let batch = u16::try_from(batch).unwrap_or(u16::MAX);
            self.pending_of(events, records, batch, now_ms, &mut order);
        }
        order
    }

    /// One request's events to apply ([`Ledger::pending`]), the `batch`th, onto `order`.
    fn pending_of(
        &mut self,
        events: &ContextEvents,
        records: &[ToolRecord],
        batch: u16,
        now_ms: u64,
        order: &mut Vec<Pending>,
    ) {
        for (n, entry) in events.order.iter().enumerate() {
            let p = match *entry {
                Entry::Record { record, at_ns } => {
                    let Some(rec) = records.get(record as usize) else {
                        continue;
                    };
                    let Some(tokens) = result_tokens(rec) else {
                        continue;
                    };
                    let Some(Some(tool)) = self.tool_of(&rec.service, Some(&rec.tool), true) else {
                        continue;
                    };
                    let session = IdRef::Trace(&rec.trace_id);
                    Pending {
                        event: n as u32,
                        tool,
                        hash: self.hash_key(&rec.service, session),
                        service: self.service_index(&rec.service),
                        batch,
                        tokens,
                        at_ns,
                        trace: rec.trace_id,
                    }
                }
                Entry::Whole(i) if events.whole.get(i as usize).is_some_and(|e| e.settles) => {
                    self.wait(&events.whole[i as usize], now_ms);
                    continue;
                }
                Entry::Whole(_) | Entry::Request(_) => {
                    let Some(e) = EventRef::at(events, n) else {
                        continue;
                    };
                    let Some(tool) = self.tool_of(e.service, e.tool, true) else {
                        continue;
                    };
                    Pending {
                        event: n as u32,
                        tool: tool.unwrap_or(NONE),
                        hash: self.hash_of(&e),
                        batch,
                        ..Pending::default()
                    }
                }
            };
            order.push(p);
        }
    }

    /// The index of a record's service in [`Ledger::services`], added the first time: the
    /// records of one resource share one.
    fn service_index(&mut self, service: &Arc<str>) -> u32 {
        match self.services.iter().rposition(|s| Arc::ptr_eq(s, service)) {
            Some(i) => i as u32,
            None => {
                self.services.push(service.clone());
                (self.services.len() - 1) as u32
            }
        }
    }

    /// Queues an event that settles, applying the oldest waiting one early when the queue is
    /// full.
    fn wait(&mut self, e: &ContextEvent, now_ms: u64) {
        if self.settling.len() >= MAX_SETTLING {
            if let Some((due, early)) = self.settling.pop_front() {
                self.apply_owned(&early, due.min(now_ms));
            }
        }
        let due = now_ms.saturating_add(self.limits.settle_ms);
        self.settling.push_back((due, e.clone()));
    }

    /// The hash of an event's session key.
    pub(super) fn hash_of(&self, e: &EventRef<'_>) -> u64 {
        self.hash_key(e.service, e.session)
    }

    /// The hash of the session key (`service`, `session`).
    fn hash_key(&self, service: &str, session: IdRef<'_>) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(SessionRef(service, session))
    }

    /// Orders `order` by slot, stably (a counting sort): the events of a session come
    /// together, in arrival order.
    fn group(&mut self, order: &mut Vec<Pending>) {
        let mut starts = [0u32; GROUPS + 1];
        for p in order.iter() {
            starts[p.group() + 1] += 1;
        }
        for g in 0..GROUPS {
            starts[g + 1] += starts[g];
        }
        let sorted = &mut self.sorted;
        sorted.clear();
        sorted.resize(order.len(), Pending::default());
        for p in order.iter() {
            let at = &mut starts[p.group()];
            sorted[*at as usize] = *p;
            *at += 1;
        }
        std::mem::swap(order, sorted);
    }

    /// Applies an event that outlived its request (its names' addresses are not cached).
    pub(super) fn apply_owned(&mut self, e: &ContextEvent, now_ms: u64) {
        let e = EventRef::of(e);
        if let Some(tool) = self.tool_of(e.service, e.tool, false) {
            self.apply(&e, self.hash_of(&e), tool, now_ms);
        }
    }

    /// Applies `e`, whose session key hashes to `hash`, of `tool` when it is a result.
    fn apply(&mut self, e: &EventRef<'_>, hash: u64, tool: Option<u32>, now_ms: u64) {
        let full = self.sessions.len() >= self.limits.max_sessions;
        let (sessions, hasher) = (&mut self.sessions, &self.hasher);
        let Some(s) = session_of(sessions, hasher, full, e.service, e.session, hash) else {
            self.stats.sessions_overflow += 1;
            return;
        };
        let mut books = Books {
            tools: &mut self.tools,
            stats: &mut self.stats,
            scratch: &mut self.scratch,
            max_results: self.limits.max_results,
        };
        apply_to(s, e, tool, now_ms, &mut books);
    }
}

/// Reads the entry of each run's session in `order` (a run: events of one hash in a row)
/// before any is applied, returning a sum of what it read.
///
/// The entries are cold between requests (the daemon sleeps, other processes run), and
/// applying a run's events between two lookups left the CPU one miss at a time: the load
/// of an entry's first byte was two thirds of `session_of`'s samples on the storm. Here
/// nothing waits on what a load returns, so the misses of many entries overlap, and the
/// lookups that apply the events find them in the cache. The probe takes the first entry
/// whose tag matches the hash: almost always the session's, and only a cache is warmed
/// when it is not.
fn warm(sessions: &hashbrown::HashTable<(SessionKey, Session)>, order: &[Pending]) -> u64 {
    let mut sum = 0u64;
    let mut last = None;
    for p in order {
        if last == Some(p.hash) {
            continue;
        }
        last = Some(p.hash);
        if let Some((_, s)) = sessions.find(p.hash, |_| true) {
            sum = sum.wrapping_add(s.touch());
        }
    }
    sum
}

/// Applies `e` to its session `s`, of `tool` when it is a result.
fn apply_to(s: &mut Session, e: &EventRef<'_>, tool: Option<u32>, now_ms: u64, b: &mut Books<'_>) {
    s.last_ms = now_ms;
    match e.kind {
        Kind::Result { tokens, estimated } => {
            let i = tool.expect("a result has its tool");
            s.results += 1;
            s.result_tokens += tokens;
            let held = s.held.len() < b.max_results;
            let late = held
                && s.hold(Held {
                    at_ns: e.at_ns,
                    tool: i,
                    tokens: tokens.min(u64::from(u32::MAX)) as u32,
                });
            let t = &mut b.tools[i as usize];
            t.results += 1;
            t.result_tokens += tokens;
            t.estimated += u64::from(estimated);
            b.stats.results_late += u64::from(late);
            b.stats.results_dropped += u64::from(!held);
        }
        Kind::Request {
            input,
            cache_read,
            cache_creation,
        } => {
            s.requests += 1;
            s.input += input;
            s.cache_read += cache_read;
            s.cache_creation += cache_creation;
            s.carry(e.at_ns, b.scratch);
            let input = Input::of(input);
            for &(i, tokens) in b.scratch.iter() {
                s.carried += tokens;
                let t = &mut b.tools[i as usize];
                t.cost += tokens;
                t.requests += 1;
                if let Some(input) = &input {
                    t.observe_share(input, tokens);
                }
            }
        }
        Kind::Clear => {
            s.compactions += 1;
            s.held.retain(|h| h.at_ns > e.at_ns);
            s.recount();
        }
    }
}

/// The entry of the session (`service`, `id`) in `sessions`, whose key hashes to `hash`; added
/// unless `full` (`None` then).
///
/// The key comes in registers, its id apart, not as a borrowed event or a tuple: a 16-byte read
/// of an id the caller had just written as two 8-byte words waited for both stores (a
/// store-forwarding stall: two thirds of this function's samples in `ledger_cost_on_the_storm`).
#[inline]
fn session_of<'s>(
    sessions: &'s mut hashbrown::HashTable<(SessionKey, Session)>,
    hasher: &MapHasher,
    full: bool,
    service: &Arc<str>,
    id: IdRef<'_>,
    hash: u64,
) -> Option<&'s mut Session> {
    use std::hash::BuildHasher;
    let found = sessions.entry(
        hash,
        |(k, _)| {
            id == k.1.as_ref()
                && crate::collector::hash::bytes_eq(service.as_bytes(), k.0.as_bytes())
        },
        |(k, _)| hasher.hash_one(SessionRef::of(k)),
    );
    match found {
        hashbrown::hash_table::Entry::Occupied(o) => Some(&mut o.into_mut().1),
        hashbrown::hash_table::Entry::Vacant(_) if full => None,
        hashbrown::hash_table::Entry::Vacant(v) => {
            let key = (service.clone(), id.to_owned());
            Some(&mut v.insert((key, Session::default())).into_mut().1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{request, result};
    use super::super::LedgerLimits;
    use super::*;

    /// The warming pass reads each run's session once, and a hash no session has reads none.
    #[test]
    fn warming_reads_each_runs_session_once() {
        let mut l = Ledger::new(LedgerLimits::default());
        // A fixed seed: which entries a hash's tag could match does not change from run to run.
        l.hasher = MapHasher::seeded(40);
        l.record(
            vec![
                result("a", 1, "Read", 10),
                request("a", 2, 100),
                result("b", 1, "Read", 20),
                result("b", 2, "Bash", 30),
                request("c", 3, 300),
            ],
            7,
        );
        let run = |session: &str, n: usize| {
            let e = request(session, 0, 0);
            let hash = l.hash_of(&EventRef::of(&e));
            vec![
                Pending {
                    hash,
                    ..Pending::default()
                };
                n
            ]
        };
        let touch = |session: &str| {
            let e = request(session, 0, 0);
            let hash = l.hash_of(&EventRef::of(&e));
            l.sessions.find(hash, |_| true).unwrap().1.touch()
        };
        let order = [run("a", 2), run("b", 3), run("c", 1), run("nobody", 2)].concat();
        let want = touch("a") + touch("b") + touch("c");
        assert_ne!(want, 0);
        assert_eq!(warm(&l.sessions, &order), want);
    }
}
