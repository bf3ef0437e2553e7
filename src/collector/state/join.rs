//! One record per tool call: the signals a coding agent sends about one call (a log record, a
//! span event, a span, a truncation notice) joined before the call is counted.
//!
//! Records that carry a [`Join`] wait here, at most the join window from the first signal of
//! their call ([`DEFAULT_JOIN_WINDOW_MS`]: the agents' SDKs export logs and spans on their own
//! timers, 5 s apart at most by default, and flush both at exit). Then the call is released as
//! one record: the primary signal's (the one with the size), else the secondary's, with what the
//! others add (a failure, the agent's own cut and the size before it). A call made only of parts
//! is dropped; a signal that arrives after its call was released is dropped as a duplicate; both
//! are counted ([`JoinStats`]). Several calls with one key (Gemini CLI's calls of one tool in
//! one batch share a trace) stay apart: a second primary opens a second call.
//!
//! Under load: at most [`MAX_PENDING`] calls wait; a signal past that is counted at once, unjoined.
//! The keys of released calls are kept for two windows, at most [`MAX_PENDING`] of them. Every
//! waiting call is released at shutdown, before the final snapshot. A crash loses at most one
//! window of agent calls.

use std::collections::{HashMap, VecDeque};

use crate::collector::ingest::record::{Join, Role, Size, ToolRecord, Upstream};
use crate::collector::state::MapHasher;

/// How long the signals of one call are waited for, from the first, in milliseconds.
pub(crate) const DEFAULT_JOIN_WINDOW_MS: u64 = 10_000;

/// Calls waiting at most; also the most released keys remembered.
pub(crate) const MAX_PENDING: usize = 65_536;

/// What the joiner did, counted since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct JoinStats {
    /// Signals folded into the record of a call another signal opened.
    pub(crate) merged: u64,
    /// Signals that arrived after their call was released, dropped.
    pub(crate) late: u64,
    /// Calls released with only parts (no primary nor secondary signal), dropped.
    pub(crate) orphans: u64,
    /// Signals counted at once because [`MAX_PENDING`] calls were waiting.
    pub(crate) unjoined: u64,
}

/// One call being waited for. Its primary signal is held inline, its secondary one boxed: a
/// record is about 400 bytes, most calls wait with one signal (a primary, or a secondary whose
/// primary comes later), and up to [`MAX_PENDING`] calls wait, so a call with room for two
/// records in line made the joiner's memory twice what it holds; that memory is fresh pages
/// faulted in (zeroed by the kernel) as the joiner fills.
#[derive(Debug)]
struct Pending {
    release_ms: u64,
    primary: Option<ToolRecord>,
    secondary: Option<Box<ToolRecord>>,
    parts: Vec<ToolRecord>,
}

impl Pending {
    fn takes(&self, role: Role) -> bool {
        match role {
            Role::Primary => self.primary.is_none(),
            Role::Secondary => self.secondary.is_none(),
            Role::Part => true,
        }
    }

    fn put(&mut self, r: ToolRecord, role: Role) {
        match role {
            Role::Primary => self.primary = Some(r),
            Role::Secondary => self.secondary = Some(Box::new(r)),
            Role::Part => self.parts.push(r),
        }
    }

    /// The second key of its primary or secondary signal.
    fn alt(&self) -> Option<u64> {
        self.primary
            .iter()
            .chain(self.secondary.as_deref())
            .find_map(|r| r.join?.alt)
    }

    /// The call as one record, or `None` for parts alone.
    fn merge(self) -> Option<ToolRecord> {
        let Pending {
            primary,
            secondary,
            parts,
            ..
        } = self;
        let (mut base, other) = match (primary, secondary) {
            (Some(p), s) => (p, s),
            (None, Some(s)) => (*s, None),
            (None, None) => return None,
        };
        base.join = None;
        for o in other.as_deref().into_iter().chain(&parts) {
            if base.tool.is_empty() {
                base.tool.clone_from(&o.tool);
            }
            if base.latency_us == 0 {
                base.latency_us = o.latency_us;
            }
            if base.args_hash.is_none() {
                base.args_hash = o.args_hash;
            }
            if base.trace_id == [0; 16] {
                (base.trace_id, base.span_id) = (o.trace_id, o.span_id);
            }
            base.error |= o.error;
            base.upstream = merged(base.upstream, o.upstream);
        }
        // A hook's size before the cuts, larger than what the model got: the cut it reveals.
        if let (None, Some(layer), Some(original), Some(got)) = (
            base.upstream.layer,
            base.upstream.when_over,
            base.upstream.original,
            base.size.bytes(),
        ) {
            if original > got {
                base.upstream.layer = Some(layer);
            }
        }
        if base.upstream.layer.is_none() {
            // No cut: a size before the cuts that equals what the model got says nothing more.
            base.upstream.original = None;
        }
        if base.error {
            base.size = Size::Failed;
            base.truncated_upstream = false;
            base.sample = None;
        } else {
            base.truncated_upstream |= base.upstream.layer.is_some();
        }
        Some(base)
    }
}

/// What two signals of one call say of its cut. A signal that names the layer comes first:
/// the size it gives is the size before that cut, where a hook's size is the size when the hook
/// ran, before the cuts made after it only (Qwen Code's shell cuts its output before its hook
/// sees it). Then the first original size given (a hook's exact size fills in a notice that
/// had none), the first limit observed.
fn merged(a: Upstream, b: Upstream) -> Upstream {
    let (first, second) = if a.layer.is_none() && b.layer.is_some() {
        (b, a)
    } else {
        (a, b)
    };
    Upstream {
        layer: first.layer.or(second.layer),
        original: first.original.or(second.original),
        when_over: first.when_over.or(second.when_over),
        limit: first.limit.or(second.limit),
    }
}

/// The calls waiting under one key, oldest first. A signal goes to the first call whose place
/// for its role is free, so the calls holding a primary signal are always the first
/// `filled[0]` of them, and those holding a secondary the first `filled[1]` (a call is only
/// opened when every call has the role filled, and removing any call keeps a prefix a
/// prefix): a signal finds its call by index, never by walking the calls of its key. A client
/// that sends the same call id again and again (an exporter retrying a request) makes that
/// key's list long; walked, each of its signals read every call of it.
#[derive(Debug, Default)]
struct Calls {
    calls: Vec<Pending>,
    /// Calls holding a primary signal, and a secondary one: the first that many.
    filled: [usize; 2],
}

impl Calls {
    /// The index in [`Calls::filled`] of `role`, when a call holds one signal of it.
    fn slot(role: Role) -> Option<usize> {
        match role {
            Role::Primary => Some(0),
            Role::Secondary => Some(1),
            Role::Part => None,
        }
    }

    /// Whether a call of this key takes a signal of `role`, as [`Calls::put`] finds it.
    fn takes(&self, role: Role) -> bool {
        Self::slot(role).map_or(0, |k| self.filled[k]) < self.calls.len()
    }

    /// Puts `r` into the first call that takes `role`; gives it back when none does.
    fn put(&mut self, r: ToolRecord, role: Role) -> Option<ToolRecord> {
        let slot = Self::slot(role);
        let at = slot.map_or(0, |k| self.filled[k]);
        let Some(call) = self.calls.get_mut(at) else {
            return Some(r);
        };
        debug_assert!(call.takes(role));
        call.put(r, role);
        if let Some(k) = slot {
            self.filled[k] += 1;
        }
        None
    }

    /// The call the last [`Calls::put`] of `role` filled.
    fn last_put(&mut self, role: Role) -> Option<&mut Pending> {
        let i = Self::slot(role).map_or(0, |k| self.filled[k].wrapping_sub(1));
        self.calls.get_mut(i)
    }

    /// Opens a call with `r`, the first of its role no earlier call takes. The first call of
    /// a key gets room for itself alone: most keys only ever hold one (a call id is unique), and
    /// a vector's first push makes room for four calls, each with room for two records.
    fn open(&mut self, p: Pending, role: Role) {
        if let Some(k) = Self::slot(role) {
            self.filled[k] += 1;
        }
        if self.calls.capacity() == 0 {
            self.calls.reserve_exact(1);
        }
        self.calls.push(p);
    }

    /// Takes out call `i`.
    fn remove(&mut self, i: usize) -> Pending {
        let p = self.calls.remove(i);
        self.filled[0] -= usize::from(p.primary.is_some());
        self.filled[1] -= usize::from(p.secondary.is_some());
        p
    }
}

/// A signal that does not wait, as [`Joiner::passing`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Passing {
    /// Its call was released: dropped as a duplicate.
    Late,
    /// Too many calls wait: recorded at once without its join (a part is dropped).
    Unjoined,
}

/// The calls being waited for.
#[derive(Debug)]
pub(crate) struct Joiner {
    window_ms: u64,
    pending: HashMap<u64, Calls, MapHasher>,
    /// (release time, key), in arrival order: release times only grow.
    due: VecDeque<(u64, u64)>,
    released: HashMap<u64, u64, MapHasher>,
    /// (forget time, key).
    forget: VecDeque<(u64, u64)>,
    waiting: usize,
    /// The key of the pending call each second key ([`Join::alt`]) belongs to.
    alts: HashMap<u64, u64, MapHasher>,
    pub(crate) stats: JoinStats,
}

impl Default for Joiner {
    fn default() -> Self {
        Self::new(DEFAULT_JOIN_WINDOW_MS)
    }
}

impl Joiner {
    /// A joiner waiting `window_ms` for the signals of a call.
    pub(crate) fn new(window_ms: u64) -> Self {
        Self {
            window_ms,
            pending: HashMap::default(),
            due: VecDeque::new(),
            released: HashMap::default(),
            forget: VecDeque::new(),
            waiting: 0,
            alts: HashMap::default(),
            stats: JoinStats::default(),
        }
    }

    /// Calls waiting.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Reads, for each signal of a batch about to be added, the entries of its key that
    /// [`Joiner::passing`] and [`Joiner::add`] look up; returns a sum of what it read, so that
    /// the reads are kept. Read one signal at a time, with
    /// the whole work of a record between two lookups, each lookup missed the cache on its own:
    /// two loads were 15 % of the daemon's time on Claude Code's log records at 100,000 records/s
    /// (65,536 calls waiting). Read here in one tight loop, the lookups miss together, the
    /// processor overlapping them, and [`Joiner::add`] finds them cached. Changes nothing.
    pub(crate) fn warm(&self, joins: impl Iterator<Item = Join>) -> usize {
        let mut found = 0;
        for j in joins {
            // What `takes` reads, not just the key: a bucket is 48 bytes, and half of them hold
            // the counts of filled calls on the cache line after their key's (read by the key
            // alone, that load was 72 % of `passing`'s samples on the logs mix).
            // The released calls are looked up only for a key no call waits under.
            found += match self.pending.get(&j.key) {
                Some(c) => {
                    1 + usize::from(c.takes(Role::Primary)) + usize::from(c.takes(Role::Secondary))
                }
                None => usize::from(self.released.contains_key(&j.key)),
            };
        }
        std::hint::black_box(found)
    }

    /// What [`Joiner::add`] would do with a signal of `join` when that needs no record: a
    /// signal of a call already released is counted late ([`Passing::Late`]), one that no
    /// waiting call takes while [`MAX_PENDING`] calls wait is counted unjoined
    /// ([`Passing::Unjoined`]: recorded at once without its join, a part dropped); `None` when
    /// the signal must be added. Decided from the join alone, so that a signal that does not
    /// wait is never moved (a record is ~400 bytes: moved into [`Joiner::add`] and back, Claude
    /// Code's log records past the cap spent 7 % of the daemon's time copying). Counts what it
    /// decides, as [`Joiner::add`] does.
    pub(crate) fn passing(&mut self, join: Join) -> Option<Passing> {
        let may_join = (join.role == Role::Part && self.alts.contains_key(&join.key))
            || join
                .alt
                .is_some_and(|alt| join.role != Role::Part && self.pending.contains_key(&alt));
        let calls = self.pending.get(&join.key);
        if may_join || calls.is_some_and(|c| c.takes(join.role)) {
            None
        } else if calls.is_none() && self.released.contains_key(&join.key) {
            self.stats.late += 1;
            Some(Passing::Late)
        } else if self.waiting >= MAX_PENDING {
            self.stats.unjoined += 1;
            Some(Passing::Unjoined)
        } else {
            None
        }
    }

    /// Takes one signal received at `now_ms`; returns it at once when it cannot wait.
    pub(crate) fn add(&mut self, mut r: ToolRecord, now_ms: u64) -> Option<ToolRecord> {
        let Some(mut join) = r.join else {
            return Some(r);
        };
        // A part under a call's second key joins that call.
        if join.role == Role::Part && !self.pending.contains_key(&join.key) {
            if let Some(&key) = self.alts.get(&join.key) {
                if self.pending.contains_key(&key) {
                    join.key = key;
                }
            }
        }
        // Parts that came first under this call's second key join it.
        let early = join
            .alt
            .filter(|_| join.role != Role::Part)
            .map(|alt| self.take_parts(alt))
            .unwrap_or_default();
        if let Some(calls) = self.pending.get_mut(&join.key) {
            match calls.put(r, join.role) {
                None => {
                    self.stats.merged += 1 + early.len() as u64;
                    // The parts that came first under the call's second key join it.
                    if let Some(p) = calls.last_put(join.role) {
                        p.parts.extend(early);
                    }
                    if let Some(alt) = join.alt {
                        self.alts.insert(alt, join.key);
                    }
                    return None;
                }
                Some(back) => r = back,
            }
        } else if self.released.contains_key(&join.key) {
            self.stats.late += 1;
            return None;
        }
        if self.waiting >= MAX_PENDING {
            self.stats.unjoined += 1;
            r.join = None;
            return (join.role != Role::Part).then_some(r);
        }
        let release_ms = now_ms.saturating_add(self.window_ms);
        let mut p = Pending {
            release_ms,
            primary: None,
            secondary: None,
            parts: Vec::new(),
        };
        p.put(r, join.role);
        self.stats.merged += early.len() as u64;
        p.parts.extend(early);
        if let Some(alt) = join.alt.filter(|_| join.role != Role::Part) {
            if self.alts.len() < MAX_PENDING {
                self.alts.insert(alt, join.key);
            }
        }
        self.pending.entry(join.key).or_default().open(p, join.role);
        self.due.push_back((release_ms, join.key));
        self.waiting += 1;
        None
    }

    /// The parts waiting alone under `key` (no primary nor secondary), taken.
    fn take_parts(&mut self, key: u64) -> Vec<ToolRecord> {
        let Some(calls) = self.pending.get_mut(&key) else {
            return Vec::new();
        };
        let (mut out, mut calls_taken) = (Vec::new(), 0);
        // A call with neither a primary nor a secondary stands after both filled prefixes, so
        // taking it out leaves [`Calls::filled`] as it is.
        calls.calls.retain_mut(|p| {
            if p.primary.is_some() || p.secondary.is_some() {
                return true;
            }
            out.append(&mut p.parts);
            calls_taken += 1;
            false
        });
        if calls.calls.is_empty() {
            self.pending.remove(&key);
        }
        // Each taken call was waiting; its release finds nothing left.
        self.waiting -= calls_taken;
        out
    }

    /// Releases the calls whose window ended by `now_ms` (every call with `u64::MAX`), each as
    /// one record, to `out`.
    #[cfg(test)]
    pub(crate) fn release(&mut self, now_ms: u64, out: &mut Vec<ToolRecord>) {
        self.release_at_most(now_ms, out, usize::MAX);
    }

    /// [`Joiner::release`] until `out` holds `most` records, in the same order: the calls left
    /// due are released by the next call. A caller that records what it gets before asking again
    /// holds `most` records at a time, whatever the number of calls due.
    pub(crate) fn release_at_most(&mut self, now_ms: u64, out: &mut Vec<ToolRecord>, most: usize) {
        while let Some(&(at, key)) = self.due.front() {
            if at > now_ms || out.len() >= most {
                break;
            }
            self.due.pop_front();
            let Some(calls) = self.pending.get_mut(&key) else {
                continue;
            };
            let Some(i) = calls.calls.iter().position(|p| p.release_ms == at) else {
                continue;
            };
            let p = calls.remove(i);
            if calls.calls.is_empty() {
                self.pending.remove(&key);
                let forget_at = now_ms.saturating_add(2 * self.window_ms);
                if self.released.len() < MAX_PENDING {
                    self.released.insert(key, forget_at);
                    self.forget.push_back((forget_at, key));
                }
            }
            self.waiting -= 1;
            if let Some(alt) = p.alt() {
                self.alts.remove(&alt);
            }
            match p.merge() {
                Some(r) => out.push(r),
                None => self.stats.orphans += 1,
            }
        }
        while let Some(&(at, key)) = self.forget.front() {
            if at > now_ms {
                break;
            }
            self.forget.pop_front();
            if self.released.get(&key) == Some(&at) {
                self.released.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::record::SizeSource;
    use crate::collector::state::tests::rec;

    fn known(bytes: u64) -> Size {
        Size::Known {
            bytes,
            source: SizeSource::Reported,
        }
    }

    fn signal(key: u64, role: Role, size: Option<u64>) -> ToolRecord {
        let size = size.map_or(
            Size::Unknown(crate::collector::ingest::record::Unknown::Missing),
            known,
        );
        let mut r = rec("Bash", size);
        r.join = Some(Join {
            key,
            role,
            alt: None,
        });
        r
    }

    #[test]
    fn three_signals_of_one_call_make_one_record_with_the_primarys_size() {
        let mut j = Joiner::new(1000);
        let mut out = Vec::new();
        let mut part = signal(1, Role::Part, None);
        part.error = false;
        part.upstream = Upstream {
            layer: Some("gemini-cli.tool-output"),
            original: Some(108_967),
            ..Upstream::default()
        };
        assert!(j.add(signal(1, Role::Secondary, None), 0).is_none());
        assert!(j.add(part, 10).is_none());
        assert!(j.add(signal(1, Role::Primary, Some(40_302)), 20).is_none());
        j.release(999, &mut out);
        assert!(out.is_empty(), "released before the window ended");
        j.release(1000, &mut out);
        assert_eq!(out.len(), 1);
        let r = &out[0];
        assert_eq!(r.size.bytes(), Some(40_302));
        assert!(r.truncated_upstream);
        assert_eq!(r.upstream.original, Some(108_967));
        assert!(r.join.is_none());
        assert_eq!(j.stats.merged, 2);
        assert_eq!(j.waiting(), 0);
    }

    #[test]
    fn a_hooks_size_before_the_cuts_reveals_a_cut_only_when_larger() {
        let hook = |key, original| {
            let mut part = signal(key, Role::Part, None);
            part.upstream = Upstream {
                original: Some(original),
                when_over: Some("qwen-code.shell"),
                ..Upstream::default()
            };
            part
        };
        let mut j = Joiner::new(10);
        let mut out = Vec::new();
        j.add(signal(1, Role::Primary, Some(30_120)), 0);
        j.add(hook(1, 108_894), 1);
        j.add(signal(2, Role::Primary, Some(6)), 0);
        j.add(hook(2, 6), 1);
        j.release(100, &mut out);
        out.sort_by_key(|r| r.size.bytes());
        assert_eq!(out.len(), 2);
        assert!(!out[0].truncated_upstream);
        assert_eq!(out[0].upstream.original, None);
        assert!(out[1].truncated_upstream);
        assert_eq!(out[1].upstream.layer, Some("qwen-code.shell"));
        assert_eq!(out[1].upstream.original, Some(108_894));
        // A notice that names the layer and the size before it wins over a hook that came
        // first with the size it saw.
        let mut j = Joiner::new(10);
        let mut notice = signal(4, Role::Part, None);
        notice.upstream.layer = Some("qwen-code.shell");
        notice.upstream.original = Some(109_009);
        j.add(hook(4, 4_480), 0);
        j.add(signal(4, Role::Primary, Some(4_480)), 1);
        j.add(notice, 2);
        j.release(100, &mut out);
        let r = out.last().unwrap();
        assert_eq!(
            (r.upstream.layer, r.upstream.original),
            (Some("qwen-code.shell"), Some(109_009))
        );
        // A notice that names the layer but not the size takes the hook's size.
        let mut j = Joiner::new(10);
        let mut notice = signal(3, Role::Part, None);
        notice.upstream.layer = Some("claude-code.bash");
        j.add(signal(3, Role::Primary, Some(2_281)), 0);
        j.add(notice, 1);
        j.add(hook(3, 108_894), 2);
        j.release(100, &mut out);
        let r = out.last().unwrap();
        assert_eq!(
            (r.upstream.layer, r.upstream.original),
            (Some("claude-code.bash"), Some(108_894))
        );
    }

    #[test]
    fn a_part_without_the_call_id_joins_by_the_calls_second_key_before_or_after_it() {
        let notice = |key| {
            let mut part = signal(key, Role::Part, None);
            part.upstream.layer = Some("qwen-code.shell");
            part
        };
        let primary = |key, alt| {
            let mut r = signal(key, Role::Primary, Some(4_483));
            r.join.as_mut().unwrap().alt = Some(alt);
            r
        };
        let mut j = Joiner::new(10);
        let mut out = Vec::new();
        // The notice first (as Qwen Code sends it), then the call.
        assert!(j.add(notice(900), 0).is_none());
        assert!(j.add(primary(1, 900), 1).is_none());
        assert_eq!(j.waiting(), 1);
        // The call first, then the notice.
        j.add(primary(2, 901), 2);
        j.add(notice(901), 3);
        j.release(100, &mut out);
        assert_eq!(out.len(), 2);
        assert!(out
            .iter()
            .all(|r| r.upstream.layer == Some("qwen-code.shell")));
        assert_eq!(j.stats.orphans, 0);
        assert_eq!(j.stats.merged, 2);
        assert_eq!(j.waiting(), 0);
    }

    #[test]
    fn a_failed_part_makes_the_call_failed_and_unsized() {
        let mut j = Joiner::new(10);
        let mut failed = signal(2, Role::Part, None);
        failed.error = true;
        j.add(signal(2, Role::Secondary, None), 0);
        j.add(failed, 1);
        let mut out = Vec::new();
        j.release(10, &mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].error);
        assert_eq!(out[0].size, Size::Failed);
    }

    #[test]
    fn late_signals_duplicates_and_orphans_are_counted_not_recorded() {
        let mut j = Joiner::new(10);
        let mut out = Vec::new();
        j.add(signal(3, Role::Primary, Some(5)), 0);
        j.release(10, &mut out);
        assert!(j.add(signal(3, Role::Secondary, None), 11).is_none());
        assert_eq!(j.stats.late, 1);
        j.add(signal(4, Role::Part, None), 12);
        j.release(22, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(j.stats.orphans, 1);
        // Two windows later the key is forgotten: a new call with it counts again.
        j.release(100, &mut out);
        j.add(signal(3, Role::Primary, Some(6)), 100);
        j.release(110, &mut out);
        assert_eq!(out.len(), 2);
    }

    /// What a batch hands to the joiner: through [`Joiner::passing`] first, as
    /// `State::record_owned_batch_ms` does, or to [`Joiner::add`] alone.
    fn offer(
        j: &mut Joiner,
        mut r: ToolRecord,
        now_ms: u64,
        ask_first: bool,
    ) -> Option<ToolRecord> {
        let join = r.join.expect("a signal");
        match ask_first.then(|| j.passing(join)).flatten() {
            None => j.add(r, now_ms),
            Some(Passing::Late) => None,
            Some(Passing::Unjoined) => {
                r.join = None;
                (join.role != Role::Part).then_some(r)
            }
        }
    }

    #[test]
    fn asking_first_changes_nothing_joined_late_or_unjoined() {
        let run = |ask_first: bool| {
            let mut j = Joiner::new(50);
            let mut out = Vec::new();
            // Nearly full: the signals below find room, then none.
            for k in 0..MAX_PENDING as u64 - 40 {
                assert!(offer(
                    &mut j,
                    signal(1 << 32 | k, Role::Primary, Some(1)),
                    0,
                    ask_first
                )
                .is_none());
            }
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            for t in 0..4_000u64 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let role = [Role::Primary, Role::Secondary, Role::Part][(seed % 3) as usize];
                let mut r = signal(seed >> 8 & 63, role, Some(t));
                r.join.as_mut().expect("a signal").alt =
                    (seed >> 20 & 3 == 0).then_some(seed >> 24 & 63);
                out.extend(offer(&mut j, r, t, ask_first));
                if t % 97 == 0 {
                    j.release(t, &mut out);
                }
            }
            j.release(u64::MAX, &mut out);
            (out, j.stats)
        };
        let (alone, asked) = (run(false), run(true));
        assert!(
            alone.1.late > 0 && alone.1.unjoined > 0 && alone.1.merged > 0,
            "{:?}",
            alone.1
        );
        assert_eq!(asked, alone);
    }

    #[test]
    fn calls_released_a_few_at_a_time_come_in_the_order_of_all_at_once() {
        let fill = || {
            let mut j = Joiner::new(10);
            for k in 0..600u64 {
                assert!(j.add(signal(k, Role::Primary, Some(k)), k / 100).is_none());
            }
            j
        };
        let mut all = Vec::new();
        fill().release(u64::MAX, &mut all);
        let mut j = fill();
        let (mut chunks, mut few) = (Vec::new(), Vec::new());
        loop {
            let mut out = Vec::new();
            j.release_at_most(14, &mut out, 256);
            if out.is_empty() {
                break;
            }
            chunks.push(out.len());
            few.extend(out);
        }
        // Due by 14 ms: the calls opened by 4 ms, 500 of them.
        assert_eq!(chunks, [256, 244]);
        assert!(
            few[..] == all[..500],
            "the first 500 in the order they came"
        );
        assert_eq!(j.waiting(), 100);
        let mut rest = Vec::new();
        j.release_at_most(u64::MAX, &mut rest, 256);
        assert_eq!(rest.len(), 100);
        assert!(rest[..] == all[500..], "the rest in the order they came");
    }

    #[test]
    fn two_primaries_with_one_key_are_two_calls() {
        let mut j = Joiner::new(10);
        j.add(signal(5, Role::Primary, Some(1)), 0);
        j.add(signal(5, Role::Primary, Some(2)), 1);
        let mut out = Vec::new();
        j.release(u64::MAX, &mut out);
        let mut sizes: Vec<_> = out.iter().filter_map(|r| r.size.bytes()).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [1, 2]);
    }

    /// Many calls under one key: each signal goes to the first call with its place free, as a
    /// walk over the calls would put it, before and after the oldest call is released.
    #[test]
    fn signals_under_one_key_fill_the_first_free_call() {
        let mut j = Joiner::new(10);
        let key = 6;
        j.add(signal(key, Role::Primary, Some(1)), 0); // call A
        j.add(signal(key, Role::Primary, Some(2)), 1); // call B
        j.add(signal(key, Role::Secondary, None), 2); // A
        j.add(signal(key, Role::Secondary, None), 3); // B
        j.add(signal(key, Role::Secondary, None), 4); // call C
        let mut failed = signal(key, Role::Part, None);
        failed.error = true;
        j.add(failed, 5); // A: failed
        j.add(signal(key, Role::Primary, Some(3)), 6); // C
        assert_eq!((j.waiting(), j.stats.merged), (3, 4));
        let mut out = Vec::new();
        j.release(10, &mut out); // A
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].size, Size::Failed);
        j.add(signal(key, Role::Primary, Some(4)), 12); // call D: B and C hold primaries
        j.add(signal(key, Role::Secondary, None), 13); // D
        assert_eq!((j.waiting(), j.stats.merged), (3, 5));
        j.release(u64::MAX, &mut out);
        let sizes: Vec<_> = out.iter().map(|r| r.size.bytes()).collect();
        assert_eq!(sizes, [None, Some(2), Some(3), Some(4)]);
        assert_eq!(j.waiting(), 0);
        assert!(j.pending.is_empty());
    }

    /// A key with one call holds room for that call alone.
    #[test]
    fn a_key_with_one_call_holds_room_for_one() {
        let mut j = Joiner::new(10);
        j.add(signal(7, Role::Primary, Some(1)), 0);
        assert_eq!(j.pending[&7].calls.capacity(), 1);
        j.add(signal(7, Role::Primary, Some(2)), 1);
        assert_eq!(j.pending[&7].calls.len(), 2);
    }

    /// A waiting call holds room for one record in line, not two.
    #[test]
    fn a_waiting_call_holds_one_record_in_line() {
        let (call, record) = (size_of::<Pending>(), size_of::<ToolRecord>());
        assert!(call < record + 64, "{call} bytes a call, {record} a record");
    }

    #[test]
    fn records_without_a_key_pass_at_once() {
        let mut j = Joiner::new(10);
        let r = rec("t", known(3));
        let size = r.size;
        assert_eq!(j.add(r, 0).map(|r| r.size), Some(size));
    }
}
