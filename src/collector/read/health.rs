//! Readiness beyond the aggregator's answer: whether the snapshots make the daemon not ready
//! (`/readyz` answers 503 with the reason). Read from the self-metrics' lock-free view, so the
//! check itself never waits on the aggregator or the disk.

use std::time::Duration;

use crate::collector::stats::SelfStatsView;

/// Why the snapshots make the daemon not ready, if they do.
pub(super) fn snapshot_trouble(v: &SelfStatsView, now_ms: u64) -> Option<String> {
    use crate::collector::{
        SNAPSHOT_FAILURES_NOT_READY, SNAPSHOT_STALE_GRACE, SNAPSHOT_STALE_INTERVALS,
    };
    let failing = v.snapshot_failing;
    if failing >= SNAPSHOT_FAILURES_NOT_READY {
        return Some(format!(
            "not ready: the last {failing} snapshot writes failed (see the log: disk full or \
             data directory not writable?)\n"
        ));
    }
    if v.snapshot_refused_in_place {
        return Some(
            "not ready: the snapshot found at start could not be restored nor moved aside; \
             started empty, and nothing is on disk until a snapshot is written over it (see the \
             log)\n"
                .to_string(),
        );
    }
    if v.snapshot_interval_ms > 0 {
        let interval = Duration::from_millis(v.snapshot_interval_ms);
        let bound = interval * SNAPSHOT_STALE_INTERVALS + SNAPSHOT_STALE_GRACE;
        let age = Duration::from_millis(now_ms.saturating_sub(v.snapshot_durable_ms));
        if age > bound {
            return Some(format!(
                "not ready: the last snapshot on disk was taken {:.1} s ago, over {:.1} s \
                 ({SNAPSHOT_STALE_INTERVALS} intervals of {:.1} s + {} s): a write is stalled \
                 (see toolsize_snapshot_write_seconds and the log)\n",
                age.as_secs_f64(),
                bound.as_secs_f64(),
                interval.as_secs_f64(),
                SNAPSHOT_STALE_GRACE.as_secs()
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::SelfStats;

    #[test]
    fn snapshot_trouble_names_failures_a_stale_snapshot_and_a_refused_one_left_in_place() {
        let stats = SelfStats::default();
        let t0 = 1_800_000_000_000;
        assert_eq!(
            snapshot_trouble(&stats.view(), t0),
            None,
            "no data directory"
        );
        stats.snapshots_every(Duration::from_secs(1), t0);
        // Two intervals + 5 s: 7 s.
        assert_eq!(snapshot_trouble(&stats.view(), t0 + 7_000), None);
        let stale = snapshot_trouble(&stats.view(), t0 + 7_001).unwrap();
        assert!(stale.contains("taken 7.0 s ago, over 7.0 s"), "{stale}");
        stats.snapshot_written(t0 + 7_000, Duration::from_millis(3));
        assert_eq!(snapshot_trouble(&stats.view(), t0 + 7_001), None, "written");
        stats.snapshot_refused(false);
        let refused = snapshot_trouble(&stats.view(), t0 + 7_001).unwrap();
        assert!(refused.contains("nor moved aside"), "{refused}");
        stats.snapshot_written(t0 + 8_000, Duration::from_millis(3));
        assert_eq!(
            snapshot_trouble(&stats.view(), t0 + 8_001),
            None,
            "written over it"
        );
        for _ in 0..crate::collector::SNAPSHOT_FAILURES_NOT_READY {
            stats.snapshot_failed();
        }
        let failing = snapshot_trouble(&stats.view(), t0 + 8_001).unwrap();
        assert!(
            failing.contains("the last 3 snapshot writes failed"),
            "{failing}"
        );
    }
}
