//! The events that wait for the join window before they are applied: a request of an emitter
//! whose results come on another signal, on another timer (Codex), so its results are in the
//! session first.
//!
//! **Under load.** A queue in arrival order, due times rising: each request's work applies the
//! events due by then from its front. **Bounded** by [`MAX_SETTLING`]: past it the oldest is
//! applied early (nothing is dropped). A shutdown applies every waiting one.

use super::Ledger;

/// Events waiting to settle at most; past it the oldest is applied early (nothing is dropped).
pub(super) const MAX_SETTLING: usize = 65_536;

impl Ledger {
    /// Applies the waiting events due by `now_ms` (all of them with `u64::MAX`, at shutdown).
    pub(crate) fn settle(&mut self, now_ms: u64) {
        while let Some(&(due, _)) = self.settling.front() {
            if due > now_ms {
                break;
            }
            let (_, e) = self.settling.pop_front().expect("a front");
            self.apply_owned(&e, due);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{request, result};
    use super::super::*;
    use crate::collector::ingest::context::ContextEvent;

    /// Codex sends its requests on its logs and its results on its traces, each on its own
    /// timer: a request waits the join window, so a result exported later but ended before it
    /// is carried, not late; a shutdown applies what still waits.
    #[test]
    fn requests_that_settle_wait_for_results_on_the_slower_signal() {
        let settling = |mut e: ContextEvent| {
            e.settles = true;
            e
        };
        let mut l = Ledger::new(LedgerLimits {
            settle_ms: 3_000,
            ..LedgerLimits::default()
        });
        l.record(vec![result("c", 10, "shell", 100)], 1_000);
        l.record(vec![settling(request("c", 20, 1_000))], 1_100);
        assert_eq!(l.tool("agent", "shell").unwrap().cost, 0, "not yet applied");
        // The trace with the second result arrives two seconds after the request's record.
        l.record(vec![result("c", 15, "read", 40)], 3_100);
        l.settle(4_099);
        assert_eq!(l.tool("agent", "shell").unwrap().cost, 0, "due at 4,100");
        l.settle(4_100);
        assert_eq!(l.tool("agent", "shell").unwrap().cost, 100);
        assert_eq!(
            l.tool("agent", "read").unwrap().cost,
            40,
            "carried, not late"
        );
        assert_eq!(l.stats.results_late, 0);
        l.record(vec![settling(request("c", 30, 1_000))], 5_000);
        l.settle(u64::MAX);
        assert_eq!(
            l.tool("agent", "shell").unwrap().cost,
            200,
            "applied at shutdown"
        );
        assert!(l.settling.is_empty());
    }
}
