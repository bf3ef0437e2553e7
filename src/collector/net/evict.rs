//! Admission at the connection cap: a new connection takes the place of the one that has been
//! idle longest without a request in flight.
//!
//! A listener at its cap (`listeners.*_max_connections`, lowered to fit the open-file limit)
//! used to close every new connection: 1,100 idle sockets under `ulimit -n 1024` kept every real
//! exporter out while `/healthz` said all was well. The cap protects the file descriptors; this
//! protects the service. Each accepted connection carries an [`Activity`]: when it last read or
//! wrote a byte or finished a request, and how many requests are in flight on it (OTLP/HTTP and
//! admin count them around the handler, gRPC around each call, found through the connection
//! info tonic puts on every request). At the cap, the accept loop picks the connection with no
//! request in flight whose last activity is the oldest, tells it to close (its next read or
//! write fails, its task is woken at once), counts it as `reason="evicted"`, and admits the new
//! one in its slot. Only when every connection has a request in flight is the newcomer closed
//! (`reason="limit"`).
//!
//! Why oldest-idle: a silent attacker's sockets are as old as their accept, while a live
//! exporter's keep-alive connection was active at its last export (seconds ago) and a gRPC
//! channel keeps itself fresh with keepalive pings; a flood must open more connections than the
//! cap within one export interval to push a real client out, and that client's exporter simply
//! reconnects (taking an attacker's slot in turn). A request in flight is never cut. The scan
//! is linear in the cap and runs only at the cap.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::task::Waker;

use tokio::time::Instant;

/// How long the accept loop waits for an evicted connection to give its slot back.
pub(crate) const EVICTION_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// What the accept loop knows of one connection, shared with it.
#[derive(Debug)]
pub(crate) struct Activity {
    /// Milliseconds since the listener's epoch at the last byte read or written, or the last
    /// request finished.
    last_ms: AtomicU64,
    /// Requests being handled on it.
    in_flight: AtomicU32,
    /// Told to close.
    evicted: AtomicBool,
    /// The connection's task, woken to close.
    waker: Mutex<Option<Waker>>,
    epoch: Instant,
}

impl Activity {
    fn new(epoch: Instant) -> Self {
        Self {
            last_ms: AtomicU64::new(ms_since(epoch)),
            in_flight: AtomicU32::new(0),
            evicted: AtomicBool::new(false),
            waker: Mutex::new(None),
            epoch,
        }
    }

    /// A byte moved, or a request ended.
    pub(crate) fn touch(&self) {
        self.last_ms.store(ms_since(self.epoch), Relaxed);
    }

    /// Whether the accept loop told it to close.
    pub(crate) fn evicted(&self) -> bool {
        self.evicted.load(Relaxed)
    }

    /// The task to wake if it is told to close while waiting for I/O.
    pub(crate) fn park(&self, w: &Waker) {
        if let Ok(mut slot) = self.waker.lock() {
            match slot.as_ref() {
                Some(old) if old.will_wake(w) => {}
                _ => *slot = Some(w.clone()),
            }
        }
    }

    /// A request starts on this connection; it ends when the guard is dropped.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Relaxed);
        Busy(self.clone())
    }

    fn evict(&self) {
        self.evicted.store(true, Relaxed);
        let waker = self.waker.lock().ok().and_then(|mut w| w.take());
        if let Some(w) = waker {
            w.wake();
        }
    }
}

fn ms_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A request in flight on a connection (see [`Activity::busy`]).
#[derive(Debug)]
pub(crate) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Relaxed);
    }
}

/// The open connections of one listener, as the accept loop sees them.
#[derive(Debug)]
pub(crate) struct Registry {
    epoch: Instant,
    conns: Vec<Weak<Activity>>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            conns: Vec::new(),
        }
    }

    /// The activity of a connection just accepted.
    pub(crate) fn admit(&mut self, cap: usize) -> Arc<Activity> {
        let a = Arc::new(Activity::new(self.epoch));
        if self.conns.len() >= cap.saturating_mul(2).max(64) {
            self.conns.retain(|w| w.strong_count() > 0);
        }
        self.conns.push(Arc::downgrade(&a));
        a
    }

    /// Tells the connection idle longest, with no request in flight, to close; `false` when
    /// every open connection has a request in flight.
    pub(crate) fn evict_idlest(&mut self) -> bool {
        self.conns.retain(|w| w.strong_count() > 0);
        let victim = self
            .conns
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|a| a.in_flight.load(Relaxed) == 0 && !a.evicted())
            .min_by_key(|a| a.last_ms.load(Relaxed));
        match victim {
            Some(v) => {
                v.evict();
                true
            }
            None => false,
        }
    }
}

/// axum middleware: the request is in flight on its connection until its response is ready
/// (the gRPC listener, whose connections tonic serves: the [`ConnInfo`] it adds to every request
/// names the connection).
pub(crate) async fn in_flight(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let busy = req
        .extensions()
        .get::<ConnInfo>()
        .map(|c| c.activity.busy());
    let response = next.run(req).await;
    drop(busy);
    response
}

/// What tonic puts on every request of a connection of ours (`Connected::ConnectInfo`): its
/// activity.
#[derive(Debug, Clone)]
pub(crate) struct ConnInfo {
    /// The connection's activity.
    pub(crate) activity: Arc<Activity>,
}

/// Runs `f`, a request's future, as in flight on `activity`'s connection.
pub(crate) fn track<F: Future>(activity: &Arc<Activity>, f: F) -> impl Future<Output = F::Output> {
    let busy = activity.busy();
    async move {
        let out = f.await;
        drop(busy);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idlest_connection_without_a_request_in_flight_goes() {
        let mut r = Registry::new();
        let old = r.admit(4);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let busy_old = r.admit(4);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let fresh = r.admit(4);
        let guard = busy_old.busy();
        std::thread::sleep(std::time::Duration::from_millis(5));
        // `old` was active just now; `busy_old` is older than `fresh` but has a request in
        // flight.
        old.touch();
        assert!(r.evict_idlest());
        assert!(
            !old.evicted() && !busy_old.evicted() && fresh.evicted(),
            "fresh was idle longest after old's touch"
        );
        assert!(r.evict_idlest());
        assert!(old.evicted());
        assert!(!r.evict_idlest(), "only a busy one left");
        drop(guard);
        assert!(r.evict_idlest());
        assert!(busy_old.evicted());
        drop((old, busy_old, fresh));
        assert!(!r.evict_idlest(), "all gone");
        assert!(r.conns.is_empty());
    }
}
