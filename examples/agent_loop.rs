//! A small agent loop whose tools are instrumented with toolsize and exported over OTLP.
//!
//! Three tools, the way real ones behave:
//! - `search`: a paginated search returning JSON hits and a cursor (sizes vary with the page);
//! - `fetch_page`: fetches a page as text; now and then the page is very large (100-400 KiB),
//!   the case that silently overflows a layer's ceiling;
//! - `lookup_account`: an upstream API that fails one call in five.
//!
//! Run it against a collector (or any OTLP receiver):
//!
//! ```text
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=demo-agent \
//!     cargo run --features export --example agent_loop -- --steps 300
//! ```
//!
//! Flags: `--steps N` (default 200), `--seed N` (default 1; the run is deterministic for a seed).
//! On exit it prints, as one JSON object on standard output, what it sent per tool: calls,
//! errors, and the exact p50/p95/max of result bytes (nearest rank), so a collector's figures can
//! be checked against it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use toolsize::tool_call;

/// A deterministic pseudo-random source (SplitMix64): no dependency, same run for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Serialize)]
struct SearchArgs<'a> {
    query: &'a str,
    cursor: Option<String>,
    page_size: u32,
}

#[derive(Serialize)]
struct Hit {
    url: String,
    title: String,
    snippet: String,
}

#[derive(Serialize)]
struct SearchPage {
    hits: Vec<Hit>,
    next_cursor: Option<String>,
    total_estimate: u64,
}

#[derive(Debug)]
struct UpstreamError(u16);

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "upstream answered HTTP {}", self.0)
    }
}

const WORDS: [&str; 12] = [
    "latency",
    "ceiling",
    "truncation",
    "agent",
    "résumé",
    "tokens",
    "schema",
    "cursor",
    "naïve",
    "payload",
    "日本語",
    "emoji 😀",
];

fn text(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 16);
    while s.len() < bytes {
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        s.push(if rng.below(12) == 0 { '\n' } else { ' ' });
    }
    s
}

async fn search(rng: &mut Rng, args: &SearchArgs<'_>) -> Result<SearchPage, UpstreamError> {
    tokio::time::sleep(Duration::from_millis(rng.below(3))).await;
    let n = 1 + rng.below(args.page_size as u64) as usize;
    let hits = (0..n)
        .map(|i| {
            let snippet_bytes = 120 + rng.below(900) as usize;
            Hit {
                url: format!("https://example.com/doc/{}", rng.below(100_000)),
                title: format!("{} result {i}", args.query),
                snippet: text(rng, snippet_bytes),
            }
        })
        .collect();
    let page = args
        .cursor
        .as_deref()
        .and_then(|c| c.parse::<u32>().ok())
        .unwrap_or(0);
    Ok(SearchPage {
        hits,
        next_cursor: (page < 4).then(|| (page + 1).to_string()),
        total_estimate: 5 * args.page_size as u64,
    })
}

fn fetch_page(rng: &mut Rng, _url: &str) -> Result<String, UpstreamError> {
    let bytes = if rng.below(20) == 0 {
        100_000 + rng.below(300_000) as usize
    } else {
        2_000 + rng.below(10_000) as usize
    };
    Ok(text(rng, bytes))
}

fn lookup_account(rng: &mut Rng, id: u64) -> Result<BTreeMap<&'static str, String>, UpstreamError> {
    if rng.below(5) == 0 {
        return Err(UpstreamError(503));
    }
    let mut account = BTreeMap::new();
    account.insert("id", id.to_string());
    account.insert(
        "plan",
        ["free", "team", "enterprise"][rng.below(3) as usize].into(),
    );
    let notes_bytes = rng.below(600) as usize;
    account.insert("notes", text(rng, notes_bytes));
    Ok(account)
}

/// What was sent per tool, for the summary.
#[derive(Default)]
struct Sent {
    calls: u64,
    errors: u64,
    sizes: Vec<u64>,
}

#[derive(Serialize)]
struct ToolSummary {
    calls: u64,
    errors: u64,
    p50_bytes: u64,
    p95_bytes: u64,
    max_bytes: u64,
    total_bytes: u64,
}

/// Nearest-rank quantile of sorted values.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn record<T, E>(
    sent: &mut BTreeMap<&'static str, Sent>,
    tool: &'static str,
    r: &Result<T, E>,
    size: impl Fn(&T) -> u64,
) {
    let s = sent.entry(tool).or_default();
    s.calls += 1;
    match r {
        Ok(v) => s.sizes.push(size(v)),
        Err(_) => s.errors += 1,
    }
}

fn flag(args: &[String], name: &str, default: u64) -> u64 {
    match args.iter().position(|a| a == name) {
        None => default,
        Some(i) => match args.get(i + 1).map(|v| v.parse::<u64>()) {
            Some(Ok(v)) => v,
            _ => {
                eprintln!("{name} takes a whole number");
                std::process::exit(2);
            }
        },
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let steps = flag(&argv, "--steps", 200);
    let mut rng = Rng(flag(&argv, "--seed", 1));

    let mut export = toolsize::export::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        export = export.service_name("toolsize-example-agent");
    }
    let guard = export.install()?;
    let mut sent: BTreeMap<&'static str, Sent> = BTreeMap::new();

    let mut cursor = None;
    for step in 0..steps {
        let call_id = format!("call_{step}");
        match step % 3 {
            0 => {
                let args = SearchArgs {
                    query: WORDS[rng.below(WORDS.len() as u64) as usize],
                    cursor: cursor.take(),
                    page_size: 10,
                };
                let r = tool_call("search")
                    .call_id(&call_id)
                    .args(&args)
                    .instrument(search(&mut rng, &args))
                    .await;
                record(&mut sent, "search", &r, |p| {
                    serde_json::to_vec(p).map_or(0, |v| v.len() as u64)
                });
                cursor = r.ok().and_then(|p| p.next_cursor);
            }
            1 => {
                let url = format!("https://example.com/doc/{}", rng.below(1000));
                let r = tool_call("fetch_page")
                    .call_id(&call_id)
                    .args(&serde_json::json!({ "url": url }))
                    .run_text(|| fetch_page(&mut rng, &url));
                record(&mut sent, "fetch_page", &r, |t| t.len() as u64);
            }
            _ => {
                let id = rng.below(50);
                let r = tool_call("lookup_account")
                    .call_id(&call_id)
                    .args(&serde_json::json!({ "account_id": id }))
                    .run(|| lookup_account(&mut rng, id));
                record(&mut sent, "lookup_account", &r, |a| {
                    serde_json::to_vec(a).map_or(0, |v| v.len() as u64)
                });
            }
        }
    }

    let stats = guard.flush()?;
    let summary: BTreeMap<&str, ToolSummary> = sent
        .into_iter()
        .map(|(tool, mut s)| {
            s.sizes.sort_unstable();
            let summary = ToolSummary {
                calls: s.calls,
                errors: s.errors,
                p50_bytes: quantile(&s.sizes, 0.50),
                p95_bytes: quantile(&s.sizes, 0.95),
                max_bytes: s.sizes.last().copied().unwrap_or(0),
                total_bytes: s.sizes.iter().sum(),
            };
            (tool, summary)
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "tools": summary,
            "spans": { "ended": stats.spans_ended, "exported": stats.spans_exported, "lost": stats.spans_lost() },
        })
    );
    if stats.spans_lost() > 0 {
        eprintln!("{} spans did not reach the collector", stats.spans_lost());
        std::process::exit(1);
    }
    Ok(())
}
