//! Durability under sustained load: the real `toolsize serve` with CPU hogs beside it (one busy
//! process per core) and senders posting as fast as it answers. (Here the receivers, reading
//! the requests, are the slowest stage, so the aggregator's queue fills only at times: the spans
//! refused for a full queue are printed. An aggregator whose queue never empties is held by
//! `collector::aggregator::tests::timers_run_on_time_while_the_queue_never_empties`.) Under
//! that load:
//!
//! - the snapshot's age (`toolsize_snapshot_age_seconds`) stays within two intervals plus the
//!   longest write the daemon reports (`toolsize_snapshot_write_seconds`, counted from when the
//!   snapshot was due), or an interval plus two writes when a write takes longer than an
//!   interval (a debug build under the hogs, on a busy machine);
//! - a window rule (`ToolResultSizeNearCeiling`, evaluated every 250 ms) fires for results sent
//!   under that load within [`RULE_BOUND`] of their acknowledgement;
//! - the daemon is killed with SIGKILL [`KILLS`] times, at varied points of the snapshot
//!   interval, and restarted each time; every restart holds at least every span acknowledged
//!   (HTTP 200, counted by the senders) up to the age bound and [`QUEUE_WAIT`] before the kill,
//!   and no more than were sent. The worst loss seen is printed
//!   in seconds of acknowledgements.
//!
//! Bounded in time: 20 kills take about 30 s on an idle 2-core machine (70 s at a load average
//! of 17).
#![cfg(feature = "collector")]

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use support::collector::*;
use support::load::*;

/// The snapshot interval.
const INTERVAL: Duration = Duration::from_secs(1);
/// The window rules' evaluation interval.
const EVALUATION: Duration = Duration::from_millis(250);
/// Batches the queue holds: small, so that it fills and its wait stays short.
const QUEUE: usize = 16;
/// Kills.
const KILLS: u64 = 20;
/// Tools the load spreads over (the snapshot grows with them).
const TOOLS: u64 = 60;
/// Spans per request.
const SPANS: u64 = 2000;
/// Concurrent senders.
const SENDERS: usize = 8;
/// What a kill may lose, in time of acknowledgements before it, beyond the snapshot age bound
/// (see the test): the wait in a full queue of [`QUEUE`] requests (acknowledged when queued,
/// recorded when taken), given 1 s under the hogs.
const QUEUE_WAIT: Duration = Duration::from_secs(1);
/// Time from a window rule's input being acknowledged to its alert: the queue's wait, an
/// evaluation interval, and the alert task.
const RULE_BOUND: Duration = Duration::from_secs(2);

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("toolsize.toml");
    std::fs::write(
        &path,
        format!(
            "[otlp]\nqueue_capacity = {QUEUE}\n[alerts]\nevaluation_interval = \"{}ms\"\n",
            EVALUATION.as_millis()
        ),
    )
    .unwrap();
    path
}

fn start(config: &std::path::Path, data: &std::path::Path) -> Binary {
    Binary::start_with_env(
        &[
            "--config",
            config.to_str().unwrap(),
            "--snapshot-interval",
            &format!("{}ms", INTERVAL.as_millis()),
        ],
        Some(data),
        &[("RUST_LOG", "error")],
    )
}

fn overloaded(text: &str) -> f64 {
    sample(text, r#"toolsize_spans_refused_total{reason="overloaded"}"#).unwrap_or(0.0)
}

/// Sends 40 results near the 16 KiB default ceiling for tool `near` until accepted; returns when.
async fn send_probe(http: std::net::SocketAddr) -> Instant {
    let spans = (0..40)
        .map(|n| own_span(1_000_000 + n, "near", 15_000))
        .collect();
    let body = request("probe", spans).encode_to_vec();
    let client = reqwest::Client::new();
    loop {
        let r = client
            .post(format!("http://{http}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            return Instant::now();
        }
    }
}

async fn near_ceiling_firing(admin: std::net::SocketAddr) -> bool {
    let v = get_json(admin, "/api/v1/alerts").await;
    v["firing"].as_array().unwrap().iter().any(|a| {
        a["labels"]["alertname"] == "ToolResultSizeNearCeiling" && a["labels"]["tool"] == "near"
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshots_rules_and_kills_under_sustained_overload() {
    let data = support::Scratch::new("durability-overload");
    let conf_dir = support::Scratch::new("durability-overload-conf");
    let conf = config(&conf_dir);
    let _hogs = Hogs::start();
    let bodies = bodies(SPANS, TOOLS);
    let acks = Arc::new(Acks::default());

    // Snapshot age and a window rule, with the queue full throughout.
    let mut b = start(&conf, &data);
    let load = Load::start(b.http, bodies.clone(), SPANS, SENDERS, acks.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mut worst_age, mut worst_write, mut interval) = (0.0f64, 0.0f64, 0.0f64);
    let refused_before = overloaded(&metrics(b.admin).await);
    let mut probe = None;
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(3) {
        let text = metrics(b.admin).await;
        worst_age = worst_age.max(sample(&text, "toolsize_snapshot_age_seconds").unwrap());
        worst_write = worst_write.max(sample(&text, "toolsize_snapshot_write_seconds").unwrap());
        interval = sample(&text, "toolsize_snapshot_interval_seconds").unwrap();
        if probe.is_none() && began.elapsed() >= Duration::from_secs(1) {
            // Sent, then watched for its alert every 20 ms, beside this loop.
            let (http, admin) = (b.http, b.admin);
            probe = Some(tokio::spawn(async move {
                let at = send_probe(http).await;
                while !near_ceiling_firing(admin).await {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                at.elapsed()
            }));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One interval, plus the wait for the tick (a turn of the loop, or the write before it: at
    // most an interval, or a write when writes take longer), plus the write.
    let bound = interval + interval.max(worst_write) + worst_write;
    let fired_after = tokio::time::timeout(Duration::from_secs(10), probe.unwrap())
        .await
        .ok()
        .map(Result::unwrap);
    let full = overloaded(&metrics(b.admin).await) - refused_before;
    eprintln!(
        "under load: snapshot age at most {worst_age:.3} s (bound {interval} s + max({interval} \
         s, the longest write {worst_write:.3} s) + that write = {bound:.3} s); the window rule \
         fired {:?} after its \
         input was acknowledged; {full} spans refused for a full queue meanwhile",
        fired_after
    );
    assert_eq!(interval, INTERVAL.as_secs_f64());
    assert!(
        worst_age <= bound,
        "snapshot age {worst_age} s over {bound} s"
    );
    let fired_after = fired_after.expect("the window rule did not fire under load");
    assert!(
        fired_after <= RULE_BOUND,
        "rule fired after {fired_after:?}"
    );
    let mut killed_at = Instant::now();
    b.signal("-KILL");
    let _ = b.child.wait();
    drop(b);
    load.stop().await;

    // Kills at varied points of the interval.
    let mut worst_loss = Duration::ZERO;
    let mut worst_bound = Duration::ZERO;
    // Acknowledged spans lost at the earlier kills (within their bound): never restored again.
    let mut lost_before = 0;
    for k in 0..=KILLS {
        let b = start(&conf, &data);
        let restored = held(b.admin).await;
        let write = Duration::from_secs_f64(worst_write);
        let bound = INTERVAL + INTERVAL.max(write) + write + QUEUE_WAIT;
        worst_bound = worst_bound.max(bound);
        let must = acks.by(killed_at - bound).saturating_sub(lost_before);
        let (sent, acked) = (acks.sent.load(Ordering::Relaxed), acks.by(Instant::now()));
        // The spans lost now are the latest acknowledged: they span from the end of what the
        // restart and the earlier losses account for to the kill.
        let loss = acks
            .covered_until(restored + lost_before)
            .map_or(Duration::ZERO, |t| killed_at.saturating_duration_since(t));
        worst_loss = worst_loss.max(loss);
        assert!(
            restored >= must,
            "kill {k}: restored {restored} spans, fewer than the {must} acknowledged {bound:?} \
             before the kill and not lost earlier (lost {loss:?} of acknowledgements)"
        );
        assert!(
            restored <= sent,
            "kill {k}: restored {restored} > {sent} sent"
        );
        lost_before = acked.saturating_sub(restored);
        if k == KILLS {
            b.stop();
            break;
        }
        let load = Load::start(b.http, bodies.clone(), SPANS, SENDERS, acks.clone());
        // 0.4 to 1.4 s of load, the write times read meanwhile: the kills land at every point
        // of the interval.
        let until = Instant::now() + Duration::from_millis(400 + (k * 53 % 1000));
        while Instant::now() < until {
            if let Some(w) = sample(&metrics(b.admin).await, "toolsize_snapshot_write_seconds") {
                worst_write = worst_write.max(w);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut b = b;
        killed_at = Instant::now();
        b.signal("-KILL");
        let _ = b.child.wait();
        drop(b);
        load.stop().await;
    }
    eprintln!(
        "{KILLS} kills under load: the worst lost the acknowledgements of the last {:.3} s \
         (bound {:.3} s, the longest write {worst_write:.3} s); {} spans acknowledged in all",
        worst_loss.as_secs_f64(),
        worst_bound.as_secs_f64(),
        acks.by(Instant::now())
    );
}
