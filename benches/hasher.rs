//! The hasher of the daemon's maps ([`MapHasher`], foldhash's fast hasher with a per-process
//! seed) against the FxHash mix it replaced (kept here, as it was in `src/collector/hash.rs`),
//! on the keys the daemon hashes:
//!
//! - a series key, (`service.name`, tool name), hashed as `SeriesKey` hashes it (both strings,
//!   each with its terminator), looked up in a map of 2,000 series (the default `max_series`);
//! - a span id (`u64`), looked up in a map of 10,000 pending calls (the joiner's maps).
//!
//! Each lookup hashes the key and compares it once: what a recorded span costs the aggregator's
//! maps. Sizes of service and tool names follow the agents' (`svc-7`, `mcp__github__…`).
//!
//! Measured on this machine (2 cores, shared), two runs: a series-key lookup 28.4 / 16.2 ns with
//! foldhash vs 37.0 / 33.6 ns with FxHash, a span-id lookup 5.9 / 3.8 vs 6.5 / 5.4 ns; hashing a
//! series key alone 15.1 / 13.5 vs 16.6 / 8.6 ns (a draw; the lookups are what the daemon does).
//!
//! `cargo bench --features collector --bench hasher`

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use toolsize::collector::MapHasher;

/// Series in the map: the default `aggregation.max_series`.
const SERIES: usize = 2000;
/// Pending calls in the span-id map.
const SPANS: u64 = 10_000;

/// 2,000 (service, tool) keys with the lengths tool spans carry.
fn series_keys() -> Vec<(String, String)> {
    let tools = [
        "bash",
        "read_file",
        "grep",
        "mcp__github__search_issues",
        "mcp__filesystem__read_text_file",
        "web_fetch",
        "execute_tool",
        "mcp__playwright__browser_snapshot",
    ];
    (0..SERIES)
        .map(|i| {
            let tool = tools[i % tools.len()];
            (
                format!("svc-{}", i % 40),
                format!("{tool}_{}", i / tools.len()),
            )
        })
        .collect()
}

/// Span ids as a tracer draws them: random 64-bit values (a fixed xorshift sequence).
fn span_ids() -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..SPANS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect()
}

/// Looks every key up in a map of them all, hashed by `build`.
fn lookups<S: BuildHasher + Clone>(c: &mut Criterion, name: &str, build: S) {
    let keys = series_keys();
    let mut map: HashMap<(String, String), u64, S> = HashMap::with_hasher(build.clone());
    for (i, k) in keys.iter().enumerate() {
        map.insert(k.clone(), i as u64);
    }
    let mut g = c.benchmark_group("series_key_lookup");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for k in &keys {
                sum = sum.wrapping_add(*map.get(black_box(k)).expect("present"));
            }
            sum
        })
    });
    g.finish();

    let ids = span_ids();
    let mut spans: HashMap<u64, u64, S> = HashMap::with_hasher(build.clone());
    for &id in &ids {
        spans.insert(id, id >> 3);
    }
    let mut g = c.benchmark_group("span_id_lookup");
    g.throughput(Throughput::Elements(ids.len() as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for id in &ids {
                sum = sum.wrapping_add(*spans.get(black_box(id)).expect("present"));
            }
            sum
        })
    });
    g.finish();

    let mut g = c.benchmark_group("series_key_hash");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            let mut x = 0u64;
            for (s, t) in &keys {
                x ^= build.hash_one((black_box(s.as_str()), black_box(t.as_str())));
            }
            x
        })
    });
    g.finish();
}

fn hashers(c: &mut Criterion) {
    lookups(c, "fx", FxBuild::default());
    lookups(c, "foldhash", MapHasher::default());
}

/// The FxHash mix the daemon's maps used before foldhash, with its per-process seed.
#[derive(Clone, Copy)]
struct FxBuild(u64);

impl Default for FxBuild {
    fn default() -> Self {
        use std::hash::Hasher;
        Self(
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
        )
    }
}

impl BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(self.0)
    }
}

/// The hasher of [`FxBuild`].
struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        let n = rest.len();
        if n >= 4 {
            let lo = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
            let hi = u32::from_le_bytes(rest[n - 4..].try_into().expect("4 bytes"));
            self.add(u64::from(lo) | u64::from(hi) << 32);
            self.add(n as u64);
        } else if n > 0 {
            let (a, b, c) = (rest[0], rest[n / 2], rest[n - 1]);
            self.add(u64::from(a) | u64::from(b) << 8 | u64::from(c) << 16 | (n as u64) << 24);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

criterion_group!(benches, hashers);
criterion_main!(benches);
