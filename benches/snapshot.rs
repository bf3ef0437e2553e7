//! What a snapshot costs the aggregator, at 1,500 tools with every window slot filled: the pause
//! when the aggregator built and encoded the file itself against the pause of the capture it
//! takes now (the building and encoding moved to a blocking thread), with the file's size.
//!
//! The state: 1,500 tools of one service, each with results of the storm mix (sizes uniform in
//! 0..32 KiB, several thousand argument hashes) recorded every minute of the last hour, so the
//! 5-minute and the 1-hour windows hold all their slots and every histogram has grown to the
//! sizes seen. Five rounds; the median and the worst are printed.
//!
//! `cargo bench --features collector --bench snapshot`

use toolsize::collector::ingest::decode::recognize_protobuf;
use toolsize::collector::ingest::recognize::Recognizer;
use toolsize::collector::state::{now_unix, Limits, State};
use toolsize::collector::Config;

#[path = "../examples/common/workload.rs"]
mod workload;

/// Tools in the state.
const TOOLS: u64 = 1_500;
/// Minutes of results recorded, one batch per minute.
const MINUTES: u64 = 60;
/// Rounds measured.
const ROUNDS: usize = 5;

fn main() {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let mut state = State::new(Limits::from_config(&config));
    let now = now_unix();
    for minute in 0..MINUTES {
        // Each tool gets about 8 results a minute (60 % of the spans are measured tool spans).
        let body =
            workload::request_tools("agent", minute, TOOLS * 14, workload::Mix::Storm, TOOLS);
        let records = recognize_protobuf(&recognizer, &body).unwrap().records;
        state.record_batch(&records, now - (MINUTES - 1 - minute) * 60);
    }
    let mut rounds: Vec<_> = (0..ROUNDS).map(|_| state.snapshot_costs()).collect();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let median =
        |rounds: &mut Vec<toolsize::collector::SnapshotCosts>,
         f: fn(&toolsize::collector::SnapshotCosts) -> std::time::Duration| {
            rounds.sort_by_key(f);
            (ms(f(&rounds[ROUNDS / 2])), ms(f(&rounds[ROUNDS - 1])))
        };
    let (before, before_max) = median(&mut rounds, |c| c.build_in_place);
    let (capture, capture_max) = median(&mut rounds, |c| c.capture);
    let (off, off_max) = median(&mut rounds, |c| c.build_from_capture);
    eprintln!(
        "snapshot of {TOOLS} tools ({:.1} MB): the aggregator paused {before:.1} ms (worst \
         {before_max:.1}) building and encoding it in place; it now pauses {capture:.1} ms \
         (worst {capture_max:.1}) for the capture, ×{:.3}; building and encoding from the \
         capture, on a blocking thread: {off:.1} ms (worst {off_max:.1})",
        rounds[0].bytes as f64 / 1e6,
        capture / before,
    );
}
