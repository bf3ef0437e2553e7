//! How a request's context events are applied: each event resolved to its tool and its
//! session's hash in arrival order, then applied session by session.
//!
//! **Under load.** A tool span's result is read from the record the batch carries
//! ([`Entry::Record`]): nothing of it was cloned on the way. A request of many sessions (one
//! per trace) has its events grouped by session (a counting sort on the hash) so each session's
//! entry is touched once in a row. **Bounded** by the ledger's caps; nothing here fails: an entry whose record is
//! missing (it cannot be: the records travel with their events) is skipped.

use std::sync::Arc;

use super::session::{Held, IdRef, Session, SessionKey, SessionRef};
use super::settle::MAX_SETTLING;
use super::tools::ToolCache;
use super::Ledger;
use crate::collector::ingest::context::{
    result_tokens, ContextEvent, ContextEvents, ContextKind, Entry,
};
use crate::collector::ingest::record::ToolRecord;
use crate::collector::state::MapHasher;

/// The groups a request's events are sorted into by their session's hash ([`Ledger::group`]).
const GROUPS: usize = 256;

/// An event of the request being applied: its index, its tool's (`u32::MAX`: none) and its
/// session key's hash.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pending {
    event: u32,
    tool: u32,
    hash: u64,
}

impl Pending {
    /// Its group among [`GROUPS`]: the low bits of the hash, which place it in the table too.
    fn group(&self) -> usize {
        (self.hash % GROUPS as u64) as usize
    }
}

/// An event as it is applied, borrowed from the request's events or read from its records.
#[derive(Debug)]
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

    /// The `n`th event of a request.
    #[inline(always)]
    fn at(events: &'a ContextEvents, records: &'a [ToolRecord], n: usize) -> Option<Self> {
        match events.order[n] {
            Entry::Whole(i) => events.whole.get(i as usize).map(Self::of),
            Entry::Record { record, at_ns } => {
                let rec = records.get(record as usize)?;
                Some(Self {
                    service: &rec.service,
                    session: IdRef::Trace(&rec.trace_id),
                    at_ns,
                    kind: Kind::Result {
                        tokens: result_tokens(rec)?,
                        estimated: true,
                    },
                    tool: Some(&rec.tool),
                })
            }
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
}

impl Ledger {
    /// Applies the events of one request, whose tool spans' records are `records`, at
    /// `now_ms`, each session's in order; an event that settles waits
    /// [`super::LedgerLimits::settle_ms`] first.
    ///
    /// While the map has room for every session the request could add, its events are applied
    /// session by session ([`Ledger::group`]): a request of many sessions (traces) touches each
    /// session's entry once in a row instead of once per event scattered among the others',
    /// which cost a cache miss each. Tools are resolved in arrival order, and near the cap
    /// every event is applied in arrival order, so which tools and sessions are followed does
    /// not depend on the grouping; only the order of the shares of one request's sessions in a
    /// tool's recent ones does.
    pub(crate) fn record_batch(
        &mut self,
        events: &ContextEvents,
        records: &[ToolRecord],
        now_ms: u64,
    ) {
        self.expire(now_ms);
        // The records (and the names they share) live until the end: an address in the cache
        // names one tool for the whole request.
        self.tool_cache = ToolCache::default();
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        for (n, entry) in events.order.iter().enumerate() {
            if let Entry::Whole(i) = entry {
                if let Some(e) = events.whole.get(*i as usize).filter(|e| e.settles) {
                    self.wait(e, now_ms);
                    continue;
                }
            }
            let Some(e) = EventRef::at(events, records, n) else {
                continue;
            };
            if let Some(tool) = self.tool_of(e.service, e.tool, true) {
                order.push(Pending {
                    event: n as u32,
                    tool: tool.unwrap_or(u32::MAX),
                    hash: self.hash_of(&e),
                });
            }
        }
        if self.sessions.len() + order.len() <= self.limits.max_sessions {
            self.group(&mut order);
        }
        for p in &order {
            if let Some(e) = EventRef::at(events, records, p.event as usize) {
                let tool = (p.tool != u32::MAX).then_some(p.tool);
                self.apply(&e, p.hash, tool, now_ms);
            }
        }
        self.order = order;
        self.settle(now_ms);
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
        use std::hash::BuildHasher;
        self.hasher.hash_one(SessionRef(e.service, e.session))
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
        let max_results = self.limits.max_results;
        let full = self.sessions.len() >= self.limits.max_sessions;
        let Some(s) = session_of(&mut self.sessions, &self.hasher, full, e, hash) else {
            self.stats.sessions_overflow += 1;
            return;
        };
        s.last_ms = now_ms;
        match e.kind {
            Kind::Result { tokens, estimated } => {
                let i = tool.expect("a result has its tool");
                s.results += 1;
                s.result_tokens += tokens;
                let held = s.held.len() < max_results;
                let late = held
                    && s.hold(Held {
                        at_ns: e.at_ns,
                        tool: i,
                        tokens: tokens.min(u64::from(u32::MAX)) as u32,
                    });
                let t = &mut self.tools[i as usize];
                t.results += 1;
                t.result_tokens += tokens;
                t.estimated += u64::from(estimated);
                self.stats.results_late += u64::from(late);
                self.stats.results_dropped += u64::from(!held);
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
                s.carry(e.at_ns, &mut self.scratch);
                for &(i, tokens) in &self.scratch {
                    s.carried += tokens;
                    let t = &mut self.tools[i as usize];
                    t.cost += tokens;
                    t.requests += 1;
                    if input > 0 {
                        t.observe_share(tokens as f64 / input as f64);
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
}

/// The entry of `e`'s session in `sessions`, whose key hashes to `hash`; added unless `full`
/// (`None` then).
fn session_of<'s>(
    sessions: &'s mut hashbrown::HashTable<(SessionKey, Session)>,
    hasher: &MapHasher,
    full: bool,
    e: &EventRef<'_>,
    hash: u64,
) -> Option<&'s mut Session> {
    use std::hash::BuildHasher;
    let key = SessionRef(e.service, e.session);
    let found = sessions.entry(
        hash,
        |(k, _)| hashbrown::Equivalent::equivalent(&key, k),
        |(k, _)| hasher.hash_one(SessionRef::of(k)),
    );
    match found {
        hashbrown::hash_table::Entry::Occupied(o) => Some(&mut o.into_mut().1),
        hashbrown::hash_table::Entry::Vacant(_) if full => None,
        hashbrown::hash_table::Entry::Vacant(v) => {
            let key = (e.service.clone(), e.session.to_owned());
            Some(&mut v.insert((key, Session::default())).into_mut().1)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;

    use super::super::{Ledger, LedgerLimits};
    use crate::collector::ingest::decode::recognize_protobuf;
    use crate::collector::ingest::recognize::Recognizer;

    fn kv(k: &str, v: Value) -> KeyValue {
        KeyValue {
            key: k.into(),
            key_strindex: 0,
            value: Some(AnyValue { value: Some(v) }),
        }
    }

    /// A request of the load generator's storm mix, as the ledger sees it: 512 spans over 256
    /// traces and 40 tools, eight in ten tool spans with a size, two in ten model spans.
    fn storm_request(seed: u64) -> Vec<u8> {
        let spans = (0..512u64)
            .map(|i| {
                let n = seed * 100_000 + i;
                let tool = format!("tool_{}", (seed * 512 + i) % 40);
                let (name, attributes) = if n % 10 < 8 {
                    let attrs = vec![
                        kv(
                            "gen_ai.operation.name",
                            Value::StringValue("execute_tool".into()),
                        ),
                        kv("gen_ai.tool.name", Value::StringValue(tool.clone())),
                        kv(
                            "tool.result.bytes",
                            Value::IntValue(((n * 7919) % 8192) as i64),
                        ),
                    ];
                    (format!("execute_tool {tool}"), attrs)
                } else {
                    let attrs = vec![
                        kv("gen_ai.operation.name", Value::StringValue("chat".into())),
                        kv("gen_ai.usage.input_tokens", Value::IntValue(1234)),
                    ];
                    ("chat gpt-4o".into(), attrs)
                };
                Span {
                    trace_id: [(n as u8).wrapping_add(1); 16].to_vec(),
                    span_id: (n + 1).to_be_bytes().to_vec(),
                    name,
                    start_time_unix_nano: 1_700_000_000_000_000_000,
                    end_time_unix_nano: 1_700_000_000_012_500_000,
                    attributes,
                    ..Span::default()
                }
            })
            .collect();
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", Value::StringValue("loadgen".into()))],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec()
    }

    /// A tool span's result read from its record (as the daemon hands it over) costs what the
    /// same result kept whole costs: same tools, sums, shares and sessions.
    #[test]
    fn results_read_from_their_records_cost_what_whole_events_cost() {
        use crate::collector::ingest::context::{ContextEvent, ContextKind, Entry, SessionId};
        let r = Recognizer::new(&Default::default(), 128).with_context_ledger(true);
        let (mut by_record, mut whole) = (
            Ledger::new(LedgerLimits::default()),
            Ledger::new(LedgerLimits::default()),
        );
        let mut from_records = 0;
        for seed in 0..3 {
            let read = recognize_protobuf(&r, &storm_request(seed)).unwrap();
            // Independently of the indexes: the results read from records are the request's
            // tool spans, in order, each with its own span id, tool and tokens.
            let expected: Vec<(u64, String, u64)> = (0..512u64)
                .map(|i| (seed * 100_000 + i, i))
                .filter(|(n, _)| n % 10 < 8)
                .map(|(n, i)| {
                    let tool = format!("tool_{}", (seed * 512 + i) % 40);
                    (n + 1, tool, ((n * 7919) % 8192).div_ceil(4))
                })
                .collect();
            let got: Vec<(u64, String, u64)> = read
                .context
                .order
                .iter()
                .filter_map(|e| match *e {
                    Entry::Record { record, .. } => {
                        let rec = &read.records[record as usize];
                        let tokens = super::result_tokens(rec).unwrap();
                        Some((
                            u64::from_be_bytes(rec.span_id),
                            rec.tool.to_string(),
                            tokens,
                        ))
                    }
                    Entry::Whole(_) | Entry::Request(_) => None,
                })
                .collect();
            assert_eq!(got, expected, "seed {seed}");
            by_record.record_batch(&read.context, &read.records, 0);
            // The same events kept whole, results read from their records.
            let all = read.context.events(&read.records).into_iter();
            let events = all.zip(&read.context.order).map(|(e, entry)| match *entry {
                Entry::Whole(_) | Entry::Request(_) => e,
                Entry::Record { record, at_ns } => {
                    from_records += 1;
                    let rec = &read.records[record as usize];
                    ContextEvent {
                        service: rec.service.clone(),
                        session: SessionId::Trace(rec.trace_id),
                        at_ns,
                        kind: ContextKind::Result {
                            tool: rec.tool.clone(),
                            tokens: super::result_tokens(rec).unwrap(),
                            estimated: true,
                        },
                        settles: false,
                    }
                }
            });
            whole.record(events.collect(), 0);
        }
        assert!(from_records > 1000, "{from_records}");
        for t in 0..40 {
            let tool = format!("tool_{t}");
            let (a, b) = (
                by_record.tool("loadgen", &tool).unwrap(),
                whole.tool("loadgen", &tool).unwrap(),
            );
            assert_eq!(
                (
                    a.results,
                    a.result_tokens,
                    a.cost,
                    a.requests,
                    a.share_buckets
                ),
                (
                    b.results,
                    b.result_tokens,
                    b.cost,
                    b.requests,
                    b.share_buckets
                ),
                "{tool}"
            );
            assert!(a.cost > 0, "{tool}");
        }
        let view = |l: &Ledger| l.sessions_view(super::super::MAX_SESSIONS_SHOWN, None, 0);
        assert_eq!(view(&by_record).sessions, view(&whole).sessions);
        assert_eq!(by_record.stats, whole.stats);
    }

    /// The ledger's own cost per span on the storm mix, in one thread, without the rest of the
    /// daemon: reading the requests with the ledger on and off, and applying their events to a
    /// ledger whose sessions are full (as they are within seconds of a storm). A measurement,
    /// run in a release build:
    /// `cargo test --release --features collector --lib ledger_cost_on_the_storm -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement: prints the ledger's cost per span on the storm mix"]
    fn ledger_cost_on_the_storm() {
        let bodies: Vec<Vec<u8>> = (0..16).map(storm_request).collect();
        let spans = (bodies.len() * 512) as f64;
        let on = Recognizer::new(&Default::default(), 128).with_context_ledger(true);
        let off = Recognizer::new(&Default::default(), 128).with_context_ledger(false);
        // Each figure the fastest of seven runs: the least disturbed by other work.
        let fastest = |run: &mut dyn FnMut()| {
            (0..7)
                .map(|_| {
                    let t0 = Instant::now();
                    run();
                    t0.elapsed().as_nanos() as f64 / (10.0 * spans)
                })
                .fold(f64::INFINITY, f64::min)
        };
        let read = |r: &Recognizer| {
            fastest(&mut || {
                for _ in 0..10 {
                    for b in &bodies {
                        std::hint::black_box(recognize_protobuf(r, b).unwrap());
                    }
                }
            })
        };
        let (off_ns, on_ns) = (read(&off), read(&on));
        let read_events: Vec<_> = bodies
            .iter()
            .map(|b| recognize_protobuf(&on, b).unwrap())
            .collect();
        let mut l = Ledger::new(LedgerLimits::default());
        // Until the sessions are full, as within seconds of a storm.
        for _ in 0..40 {
            for r in &read_events {
                l.record_batch(&r.context, &r.records, 0);
            }
        }
        let apply = fastest(&mut || {
            for _ in 0..10 {
                for r in &read_events {
                    l.record_batch(&r.context, &r.records, 0);
                }
            }
        });
        // The same with the caches emptied before each request, as in a daemon whose other
        // work and neighbours run between requests: the memory the ledger touches per request.
        let mut other = vec![1u64; 1 << 20];
        let cold = (0..7)
            .map(|_| {
                let mut took = std::time::Duration::ZERO;
                for _ in 0..10 {
                    for r in &read_events {
                        for (i, x) in other.iter_mut().enumerate().step_by(8) {
                            *x = x.wrapping_add(i as u64);
                        }
                        let t0 = Instant::now();
                        l.record_batch(&r.context, &r.records, 0);
                        took += t0.elapsed();
                    }
                }
                took.as_nanos() as f64 / (10.0 * spans)
            })
            .fold(f64::INFINITY, f64::min);
        println!(
            "storm, ns per span: read with the ledger off {off_ns:.1}, on {on_ns:.1}; \
             events applied {apply:.1}, from cold caches {cold:.1}"
        );
    }
}
