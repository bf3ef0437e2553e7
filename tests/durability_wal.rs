//! With the write-ahead log on (`--durability wal`), `kill -9` under load loses nothing
//! acknowledged: the real `toolsize serve`, senders posting as fast as it answers and counting
//! each span answered 200, killed with SIGKILL [`KILLS`] times at varied points of the snapshot
//! interval and restarted each time. Every restart holds at least every span acknowledged before
//! the kill (the log replayed above the snapshot), and no more than were sent (a request made
//! durable whose answer the kill cut is held, never one that was not sent). The log is compacted
//! as snapshots are written (and at each start, after the replay): a start finds at most two
//! segments, and after the final snapshot of a clean stop the active segment is alone. The replay time of each start is read from `toolsize_wal_replay_seconds` and the worst
//! printed.
#![cfg(feature = "collector")]

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::collector::*;
use support::load::*;

/// The snapshot interval.
const INTERVAL: Duration = Duration::from_secs(1);
/// Kills.
const KILLS: u64 = 20;
/// Tools the load spreads over.
const TOOLS: u64 = 60;
/// Spans per request: small requests, so that many wait for each fsync.
const SPANS: u64 = 200;
/// Concurrent senders.
const SENDERS: usize = 8;

fn start(data: &std::path::Path) -> Binary {
    Binary::start_with_env(
        &[
            "--durability",
            "wal",
            "--snapshot-interval",
            &format!("{}ms", INTERVAL.as_millis()),
        ],
        Some(data),
        &[("RUST_LOG", "error")],
    )
}

/// The log's segment files.
fn segments(data: &std::path::Path) -> usize {
    std::fs::read_dir(data.join("wal"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".wal"))
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kills_under_load_lose_nothing_acknowledged() {
    let data = support::Scratch::new("durability-wal");
    let bodies = bodies(SPANS, TOOLS);
    let acks = Arc::new(Acks::default());
    let (mut worst_replay, mut most_segments, mut durable_unanswered) = (0.0f64, 0, 0);
    let began = Instant::now();
    for k in 0..=KILLS {
        let b = start(&data);
        let restored = held(b.admin).await;
        let text = metrics(b.admin).await;
        let replay = sample(&text, "toolsize_wal_replay_seconds").expect("replay gauge");
        worst_replay = worst_replay.max(replay);
        let (sent, acked) = (acks.sent.load(Ordering::Relaxed), acks.by(Instant::now()));
        assert!(
            restored >= acked,
            "kill {k}: restored {restored} spans, fewer than the {acked} acknowledged"
        );
        assert!(
            restored <= sent,
            "kill {k}: restored {restored} > {sent} sent"
        );
        durable_unanswered = restored - acked;
        most_segments = most_segments.max(segments(&data));
        if k == KILLS {
            b.stop();
            break;
        }
        let load = Load::start(b.http, bodies.clone(), SPANS, SENDERS, acks.clone());
        // 0.4 to 1.4 s of load: the kills land at every point of the interval.
        tokio::time::sleep(Duration::from_millis(400 + (k * 53 % 1000))).await;
        let mut b = b;
        b.signal("-KILL");
        let _ = b.child.wait();
        drop(b);
        load.stop().await;
    }
    // A clean stop writes a final snapshot that covers the whole log: what is left is the
    // active segment at most.
    let left = segments(&data);
    eprintln!(
        "{KILLS} kills under load in {:.1} s: 0 acknowledged spans lost of {} acknowledged \
         ({durable_unanswered} more durable whose answers the last kill cut); replay took at \
         most {:.3} s; at most {most_segments} segment files at a start, {left} after the \
         final snapshot",
        began.elapsed().as_secs_f64(),
        acks.by(Instant::now()),
        worst_replay,
    );
    assert!(acks.by(Instant::now()) > 0, "nothing was acknowledged");
    assert!(left <= 1, "{left} segments left after the final snapshot");
    // A start writes a snapshot after its replay and compacts: its new segment, and at most one
    // closed by a rotation meanwhile.
    assert!(
        most_segments <= 2,
        "{most_segments} segments at a start: the log is not compacted"
    );
}
