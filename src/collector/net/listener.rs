//! Listeners with time and connection budgets: every socket the daemon accepts holds one of its
//! listener's connection slots and is closed when it stays silent too long.
//!
//! - **Connection cap** (`listeners.max_connections`, per listener), so idle or hostile clients
//!   cannot take the file descriptors the daemon needs for its other listeners and its
//!   snapshots. At the cap a new connection takes the place of the one idle longest without a
//!   request in flight, which is closed and counted (`reason="evicted"`, see
//!   `net/evict.rs`), so they cannot shut out legitimate clients either; only
//!   when every connection has a request in flight is the new one closed at once
//!   (`reason="limit"`). At start the caps are checked against the open-file limit
//!   (`RLIMIT_NOFILE`, read from `/proc/self/limits`): when the three caps plus a reserve of
//!   [`FD_RESERVE`] do not fit, they are lowered in proportion and a warning says so.
//! - **Header-read timeout** (`listeners.header_read_timeout`). HTTP/1.1 listeners (OTLP/HTTP,
//!   admin) close a connection whose request head is not complete within it, the wait for the
//!   next request on a keep-alive connection included (hyper's header timer). On gRPC the
//!   HTTP/2 preface must arrive within it. Counted as `reason="header_timeout"`.
//! - **Idle timeout** (`listeners.idle_timeout`). A connection on which nothing was read or
//!   written for that long is closed (`reason="idle_timeout"`). On gRPC the HTTP/2 keepalive
//!   pings (`listeners.grpc_keepalive_interval`) count as traffic: a dead peer is dropped after
//!   `grpc_keepalive_timeout`, a live idle channel is kept (within the cap).
//! - **TLS** (feature `tls`, `tls.cert_file` / `tls.key_file`): the handshake runs on the
//!   connection's own task within the header-read timeout; see [`crate::collector::net::tls`].
//! - **Body deadline** (`listeners.body_timeout`): see [`crate::collector::ingest`]; OTLP bodies are read
//!   before a decoding slot is taken, so slow bodies never hold one.
//!
//! The deadlines are checked only while a read or write is pending (one timer per
//! connection, reset lazily), so an active connection pays nothing for them.

use std::future::Future;
use std::io;

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::collector::net::evict::{self, Activity, ConnInfo, Registry};

/// File descriptors kept free for everything but client connections (snapshots, the log,
/// outgoing alert connections, the listeners themselves).
pub(crate) const FD_RESERVE: u64 = 64;

/// Bytes of the HTTP/2 client preface, which a gRPC client must send within the header-read
/// timeout.
const H2_PREFACE_BYTES: usize = 24;

/// One of the daemon's listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// OTLP/gRPC.
    OtlpGrpc,
    /// OTLP/HTTP.
    OtlpHttp,
    /// Admin HTTP.
    Admin,
}

impl Listener {
    /// Every listener, in exposition order.
    pub(crate) const ALL: [Listener; 3] = [Listener::OtlpGrpc, Listener::OtlpHttp, Listener::Admin];

    /// The `listener` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Listener::OtlpGrpc => "otlp_grpc",
            Listener::OtlpHttp => "otlp_http",
            Listener::Admin => "admin",
        }
    }

    fn idx(self) -> usize {
        self as usize
    }
}

/// Why the daemon closed (or refused) a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The listener's connection cap was reached and every connection had a request in flight:
    /// closed right after accept.
    Limit,
    /// Idle longest, without a request in flight, when a new connection came at the cap.
    Evicted,
    /// The request head (HTTP/1.1) or the HTTP/2 preface did not arrive in time.
    HeaderTimeout,
    /// Nothing read or written for `idle_timeout`.
    IdleTimeout,
    /// The TLS handshake failed or did not finish within the header-read timeout.
    TlsHandshake,
}

impl Closed {
    /// Every reason, in exposition order.
    pub(crate) const ALL: [Closed; 5] = [
        Closed::Limit,
        Closed::Evicted,
        Closed::HeaderTimeout,
        Closed::IdleTimeout,
        Closed::TlsHandshake,
    ];

    /// The `reason` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Closed::Limit => "limit",
            Closed::Evicted => "evicted",
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::TlsHandshake => "tls_handshake",
        }
    }
}

/// Connection counters per listener (indexed by [`Listener`], then [`Closed`]).
#[derive(Debug, Default)]
pub struct ListenerStats {
    open: [AtomicU64; Listener::ALL.len()],
    limit: [AtomicU64; Listener::ALL.len()],
    closed: [[AtomicU64; Closed::ALL.len()]; Listener::ALL.len()],
}

impl ListenerStats {
    /// Connections open now.
    pub(crate) fn open(&self, l: Listener) -> u64 {
        self.open[l.idx()].load(Relaxed)
    }
    /// The effective connection cap.
    pub(crate) fn limit(&self, l: Listener) -> u64 {
        self.limit[l.idx()].load(Relaxed)
    }
    /// Connections closed by the daemon for `reason`.
    pub fn closed(&self, l: Listener, reason: Closed) -> u64 {
        self.closed[l.idx()][reason as usize].load(Relaxed)
    }
    pub(crate) fn count_closed(&self, l: Listener, reason: Closed) {
        self.closed[l.idx()][reason as usize].fetch_add(1, Relaxed);
    }
    fn set_limit(&self, l: Listener, n: usize) {
        self.limit[l.idx()].store(n as u64, Relaxed);
    }
}

/// The time and connection budget of one listener.
#[derive(Clone)]
pub(crate) struct Budget {
    /// Which listener.
    pub(crate) listener: Listener,
    /// Most connections open at once.
    pub(crate) max_connections: usize,
    /// Time to receive a request head (HTTP/1.1) or the HTTP/2 preface.
    pub(crate) header_read_timeout: Duration,
    /// Longest silence on a connection.
    pub(crate) idle_timeout: Duration,
    /// TLS on this listener.
    pub(crate) tls: Option<TlsAcceptor>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("listener", &self.listener)
            .field("max_connections", &self.max_connections)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// A TLS acceptor (feature `tls`).
#[cfg(feature = "tls")]
pub(crate) type TlsAcceptor = tokio_rustls::TlsAcceptor;
/// Without the `tls` feature there is no acceptor.
#[cfg(not(feature = "tls"))]
pub(crate) type TlsAcceptor = std::convert::Infallible;

/// A connection after the TLS handshake, if the listener has TLS.
#[derive(Debug)]
pub(crate) enum Stream {
    /// Without TLS.
    Plain(Conn),
    /// With TLS.
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::server::TlsStream<Conn>>),
}

/// The TLS handshake of `conn` when `tls` is set, within `timeout`; `None` (counted) when it
/// fails.
async fn handshake(conn: Conn, tls: Option<&TlsAcceptor>, timeout: Duration) -> Option<Stream> {
    let Some(tls) = tls else {
        return Some(Stream::Plain(conn));
    };
    #[cfg(feature = "tls")]
    {
        let (stats, which) = (conn.stats.clone(), conn.listener);
        let activity = conn.activity.clone();
        match tokio::time::timeout(timeout, tls.accept(conn)).await {
            Ok(Ok(s)) => Some(Stream::Tls(Box::new(s))),
            // Evicted mid-handshake: counted once, as evicted.
            _ if activity.evicted() => None,
            _ => {
                stats.count_closed(which, Closed::TlsHandshake);
                None
            }
        }
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = (timeout, conn);
        match *tls {}
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(c) => Pin::new(c).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(c) => Pin::new(c).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(c) => Pin::new(c).poll_flush(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(c) => Pin::new(c).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

impl tonic::transport::server::Connected for Stream {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        match self {
            Stream::Plain(c) => c.connect_info(),
            #[cfg(feature = "tls")]
            Stream::Tls(t) => t.get_ref().0.connect_info(),
        }
    }
}

/// The soft open-file limit of this process (`None` where `/proc/self/limits` is missing).
pub fn open_file_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    match soft {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}

/// The caps to use under an open-file limit of `nofile`: `caps` unchanged when they fit with
/// [`FD_RESERVE`] to spare, else lowered in proportion (at least 8 each). The second value says
/// whether they were lowered.
pub(crate) fn fit_caps(caps: [usize; 3], nofile: Option<u64>) -> ([usize; 3], bool) {
    let Some(nofile) = nofile else {
        return (caps, false);
    };
    let want: u64 = caps.iter().map(|&c| c as u64).sum::<u64>() + FD_RESERVE;
    if want <= nofile {
        return (caps, false);
    }
    let room = nofile.saturating_sub(FD_RESERVE);
    let total = (want - FD_RESERVE) as f64;
    let mut fit = caps.map(|c| ((c as f64 * room as f64 / total) as usize).max(8));
    // The floor of 8 may overshoot: take the excess from the largest caps.
    while fit.iter().sum::<usize>() as u64 > room.max(24) {
        let i = (0..3).max_by_key(|&i| fit[i]).unwrap_or(0);
        fit[i] -= 1;
    }
    (fit, true)
}

/// An accepted connection holding a slot of its listener, closed after `idle_timeout` of silence
/// or when the HTTP/2 preface is late.
#[derive(Debug)]
pub(crate) struct Conn {
    io: TcpStream,
    _slot: OwnedSemaphorePermit,
    stats: Arc<ListenerStats>,
    listener: Listener,
    idle: Duration,
    last: Instant,
    /// Bytes still expected before the deadline (the HTTP/2 preface), and the deadline.
    preface: Option<(usize, Instant)>,
    timer: Pin<Box<Sleep>>,
    activity: Arc<Activity>,
}

impl Conn {
    fn new(
        io: TcpStream,
        slot: OwnedSemaphorePermit,
        stats: Arc<ListenerStats>,
        b: &Budget,
        activity: Arc<Activity>,
    ) -> Self {
        let now = Instant::now();
        stats.open[b.listener.idx()].fetch_add(1, Relaxed);
        let _ = io.set_nodelay(true);
        Self {
            io,
            _slot: slot,
            stats,
            listener: b.listener,
            idle: b.idle_timeout,
            last: now,
            preface: (b.listener == Listener::OtlpGrpc)
                .then_some((H2_PREFACE_BYTES, now + b.header_read_timeout)),
            timer: Box::pin(tokio::time::sleep_until(now + b.idle_timeout)),
            activity,
        }
    }

    /// What the accept loop knows of it.
    pub(crate) fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// `Some(error)` once the accept loop told it to close (counted there).
    fn evicted(&self) -> Option<io::Error> {
        self.activity.evicted().then(|| {
            io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "connection closed: evicted at the connection cap",
            )
        })
    }

    fn deadline(&self) -> Instant {
        let idle = self.last + self.idle;
        match self.preface {
            Some((_, d)) => d.min(idle),
            None => idle,
        }
    }

    /// Pending I/O: `Ready(error)` when a deadline has passed or the connection was evicted,
    /// else arms the timer and leaves its waker for an eviction.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.activity.park(cx.waker());
        if let Some(e) = self.evicted() {
            return Poll::Ready(e);
        }
        loop {
            let deadline = self.deadline();
            if self.timer.deadline() != deadline {
                self.timer.as_mut().reset(deadline);
            }
            ready!(self.timer.as_mut().poll(cx));
            let now = Instant::now();
            let reason = match self.preface {
                Some((_, d)) if now >= d => Closed::HeaderTimeout,
                _ if now >= self.last + self.idle => Closed::IdleTimeout,
                _ => continue,
            };
            self.stats.count_closed(self.listener, reason);
            return Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connection closed: {}", reason.as_str()),
            ));
        }
    }

    fn active(&mut self, n: usize) {
        if n > 0 {
            self.last = Instant::now();
            self.activity.touch();
            if let Some((left, _)) = &mut self.preface {
                *left = left.saturating_sub(n);
                if *left == 0 {
                    self.preface = None;
                }
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.stats.open[self.listener.idx()].fetch_sub(1, Relaxed);
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.evicted() {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                // Only what was read counts toward the preface (writes do not).
                let n = buf.filled().len() - before;
                if n > 0 {
                    this.active(n);
                }
                Poll::Ready(r)
            }
            Poll::Pending => this.poll_deadline(cx).map(Err),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.evicted() {
            return Poll::Ready(Err(e));
        }
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    this.last = Instant::now();
                    this.activity.touch();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_deadline(cx).map(Err),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending => this.poll_deadline(cx).map(Err),
            r => r,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        ConnInfo {
            activity: self.activity.clone(),
        }
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Accepts connections within the budget until `stop` turns true; each accepted one is passed
/// to `serve`. At the cap, the connection idle longest without a request in flight is evicted to
/// make room ([`evict`]). Accept errors (EMFILE when the open-file limit is reached after all)
/// are logged and retried after a pause instead of spinning.
async fn accept_loop<F>(
    listener: TcpListener,
    budget: Budget,
    stats: Arc<ListenerStats>,
    mut stop: watch::Receiver<bool>,
    mut serve: F,
) where
    F: FnMut(Conn),
{
    let slots = Arc::new(Semaphore::new(budget.max_connections));
    stats.set_limit(budget.listener, budget.max_connections);
    let mut open = Registry::new();
    loop {
        let accepted = tokio::select! {
            _ = stopped(&mut stop) => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((tcp, _)) => {
                let slot = match slots.clone().try_acquire_owned() {
                    Ok(slot) => Some(slot),
                    Err(_) if open.evict_idlest() => {
                        stats.count_closed(budget.listener, Closed::Evicted);
                        tokio::time::timeout(evict::EVICTION_WAIT, slots.clone().acquire_owned())
                            .await
                            .ok()
                            .and_then(Result::ok)
                    }
                    Err(_) => None,
                };
                match slot {
                    Some(slot) => {
                        let activity = open.admit(budget.max_connections);
                        serve(Conn::new(tcp, slot, stats.clone(), &budget, activity));
                    }
                    None => {
                        stats.count_closed(budget.listener, Closed::Limit);
                        drop(tcp);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(
                    listener = budget.listener.as_str(),
                    error = %e,
                    "Cannot accept a connection; retrying in 100 ms."
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serves `router` over HTTP/1.1 on `listener` within `budget` until `stop` turns true, then
/// lets open connections finish their requests.
#[cfg_attr(not(feature = "tls"), allow(clippy::clone_on_copy))]
pub(crate) async fn serve_http(
    listener: TcpListener,
    router: axum::Router,
    budget: Budget,
    stats: Arc<ListenerStats>,
    stop: watch::Receiver<bool>,
) {
    let mut tasks = tokio::task::JoinSet::new();
    let header = budget.header_read_timeout;
    let which = budget.listener;
    let tls = budget.tls.clone();
    let conn_stop = stop.clone();
    let conn_stats = stats.clone();
    accept_loop(listener, budget, stats, stop, |conn| {
        // Every request is in flight on its connection until its response is ready.
        let activity = conn.activity().clone();
        let router = router.clone();
        let svc = hyper::service::service_fn(move |req| {
            let mut router = router.clone();
            evict::track(&activity, tonic::codegen::Service::call(&mut router, req))
        });
        let mut stop = conn_stop.clone();
        let stats = conn_stats.clone();
        let tls = tls.clone();
        // Polled in place when hyper wakes it from within (see `repoll`): a request is served in
        // one run of its task, on one core.
        tasks.spawn(super::repoll::Repoll::new(async move {
            let Some(conn) = handshake(conn, tls.as_ref(), header).await else {
                return;
            };
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header)
                .keep_alive(true);
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(conn), svc);
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                _ = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                if e.is_timeout() {
                    stats.count_closed(which, Closed::HeaderTimeout);
                }
            }
        }));
        // Reap finished connections as we go, so the set stays the size of the open ones.
        while tasks.try_join_next().is_some() {}
    })
    .await;
    while tasks.join_next().await.is_some() {}
}

/// The connections of the gRPC listener, accepted within `budget` until `stop` turns true, as
/// the stream `tonic::transport::Server::serve_with_incoming_shutdown` takes.
#[cfg_attr(not(feature = "tls"), allow(clippy::clone_on_copy))]
pub(crate) fn grpc_incoming(
    listener: TcpListener,
    budget: Budget,
    stats: Arc<ListenerStats>,
    stop: watch::Receiver<bool>,
) -> tonic::codegen::tokio_stream::wrappers::ReceiverStream<io::Result<Stream>> {
    let (tx, rx) = mpsc::channel(64);
    let tls = budget.tls.clone();
    let header = budget.header_read_timeout;
    tokio::spawn(accept_loop(listener, budget, stats, stop, move |conn| {
        let tx = tx.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            if let Some(s) = handshake(conn, tls.as_ref(), header).await {
                let _ = tx.send(Ok(s)).await;
            }
        });
    }));
    tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_under_the_open_file_limit() {
        assert_eq!(
            fit_caps([1024, 1024, 128], None),
            ([1024, 1024, 128], false)
        );
        assert_eq!(
            fit_caps([1024, 1024, 128], Some(65536)),
            ([1024, 1024, 128], false)
        );
        let (caps, lowered) = fit_caps([1024, 1024, 128], Some(1024));
        assert!(lowered);
        assert!(
            caps.iter().sum::<usize>() as u64 + FD_RESERVE <= 1024,
            "{caps:?}"
        );
        assert!(caps[2] >= 8);
        assert!(open_file_limit().is_some_and(|n| n > 0));
    }
}
