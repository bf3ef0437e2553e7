//! Forwarding: every request the daemon accepts, of every signal, relayed unchanged to each
//! configured upstream (`--forward URL`), so pointing an agent at toolsize keeps its telemetry
//! flowing to the backend the team already uses.
//!
//! Each accepted request (its protobuf bytes, shared, not copied) is offered to every
//! upstream's bounded queue with `try_send` ([`Forwarder::offer`]): nothing the daemon measures
//! waits on an upstream. A request with tool records is offered by the aggregator as it takes
//! them ([`Relay`], carried in the records' batch), so that receiving it wakes one task, not
//! two; such a request reaches the upstreams after the batches queued before it (and may follow
//! a later request without records), and its bytes are held while it waits in the aggregator's
//! queue. Any other request is offered by the receiver. When a queue is full the request is
//! dropped for that upstream and counted (`queue_full`). A few workers per upstream
//! (`forward.concurrency`) send from the queue, each over a connection it keeps and drives
//! itself ([`drive`]); a failed attempt whose status OTLP calls retryable (HTTP 429, 502, 503,
//! 504; gRPC `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `ABORTED`, `CANCELLED`,
//! `OUT_OF_RANGE`, `DATA_LOSS`; a connection error or a timeout) is retried with exponential
//! backoff and jitter, after the server's `Retry-After` when it sends one, until
//! `forward.retry_for` has passed since the first attempt: then the request is given up and
//! counted (`gave_up`), as is a request refused for good (any other status). Every request
//! offered ends in exactly one of `sent`, `queue_full` and `gave_up`, or is still queued
//! (`toolsize_forward_queue_requests`); [`UpstreamStats`] keeps the counts per upstream and the
//! last error, shown on `/metrics`, `/api/v1/forward` and the status page.
//!
//! At shutdown the workers stop with the runtime: what is still queued is not sent (the
//! receivers have stopped taking requests by then, and a client that retries sends it again),
//! nor are the requests whose batches the aggregator takes while it drains its queue.

mod coalesce;
mod drive;
mod upstream;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::bytes::Bytes;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::collector::config::ForwardConfig;
use crate::collector::stats::OtlpSignal;
pub(crate) use upstream::Upstream;
use upstream::{Attempt, Conn};

/// Sends one export request of `signal` to `url` (`http(s)://` or `grpc(s)://`, as `--forward`
/// takes it) with `headers`, over a connection of its own, once: `toolsize hook`'s OTLP path.
/// The caller bounds the time it may take.
pub(crate) async fn export_once(
    url: &str,
    headers: Vec<(axum::http::HeaderName, axum::http::HeaderValue)>,
    signal: OtlpSignal,
    body: Bytes,
) -> Result<(), String> {
    let upstream = Upstream::parse(url)?.with_headers(headers);
    let mut conn = Conn::default();
    match upstream.send(&mut conn, signal, body).await {
        Attempt::Sent => Ok(()),
        Attempt::Retry { error, .. } | Attempt::Refused(error) => Err(error),
    }
}

/// One request to relay.
#[derive(Debug, Clone)]
struct Item {
    signal: OtlpSignal,
    body: Bytes,
}

/// What happened to the requests offered to one upstream.
#[derive(Debug, Default)]
pub(crate) struct UpstreamStats {
    /// The upstream, as shown (scheme, host and port).
    pub(crate) name: String,
    /// `http` or `grpc`.
    pub(crate) protocol: &'static str,
    sent: AtomicU64,
    queue_full: AtomicU64,
    gave_up: AtomicU64,
    retries: AtomicU64,
    /// Offered and not yet sent or given up.
    queued: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// A plain copy of [`UpstreamStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct UpstreamView {
    /// The upstream (scheme, host and port).
    pub(crate) upstream: String,
    /// `http` or `grpc`.
    pub(crate) protocol: &'static str,
    /// Requests the upstream accepted.
    pub(crate) sent: u64,
    /// Requests dropped because its queue was full.
    pub(crate) queue_full: u64,
    /// Requests given up: refused for good, or still failing after `forward.retry_for`.
    pub(crate) gave_up: u64,
    /// Attempts retried.
    pub(crate) retries: u64,
    /// Requests queued or in flight.
    pub(crate) queued: u64,
    /// The last error, if any.
    pub(crate) last_error: Option<String>,
}

impl UpstreamStats {
    /// A copy of the counts.
    pub(crate) fn view(&self) -> UpstreamView {
        UpstreamView {
            upstream: self.name.clone(),
            protocol: self.protocol,
            sent: self.sent.load(Relaxed),
            queue_full: self.queue_full.load(Relaxed),
            gave_up: self.gave_up.load(Relaxed),
            retries: self.retries.load(Relaxed),
            queued: self.queued.load(Relaxed),
            last_error: self.last_error.lock().ok().and_then(|e| e.clone()),
        }
    }

    fn error(&self, e: String) {
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(e);
        }
    }
}

/// One upstream's queue and counts.
#[derive(Debug)]
struct Lane {
    tx: mpsc::Sender<Item>,
    stats: Arc<UpstreamStats>,
}

/// The handle the receivers offer accepted requests to; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Forwarder {
    lanes: Arc<[Lane]>,
}

/// How a lane's workers retry.
#[derive(Debug, Clone, Copy)]
struct Policy {
    retry_for: Duration,
    timeout: Duration,
}

impl Forwarder {
    /// Starts `concurrency` workers per upstream of `config` on the current runtime; `None`
    /// when no upstream is configured. The upstreams were checked when the configuration was
    /// loaded.
    pub(crate) fn start(config: &ForwardConfig) -> Result<Option<Self>, String> {
        if config.upstreams.is_empty() {
            return Ok(None);
        }
        let headers = crate::collector::config::header_pairs(&config.headers)?;
        let policy = Policy {
            retry_for: config.retry_for.0,
            timeout: config.timeout.0,
        };
        let mut lanes = Vec::with_capacity(config.upstreams.len());
        for url in &config.upstreams {
            let up = Arc::new(Upstream::parse(url)?.with_headers(headers.clone()));
            let stats = Arc::new(UpstreamStats {
                name: up.name(),
                protocol: up.protocol(),
                ..UpstreamStats::default()
            });
            let (tx, rx) = mpsc::channel(config.queue_requests);
            let rx = Arc::new(tokio::sync::Mutex::new(rx));
            for _ in 0..config.concurrency {
                crate::collector::net::repoll::spawn(worker(
                    up.clone(),
                    rx.clone(),
                    stats.clone(),
                    policy,
                ));
            }
            lanes.push(Lane { tx, stats });
        }
        Ok(Some(Self {
            lanes: lanes.into(),
        }))
    }

    /// Queues one accepted request for every upstream, without waiting: a full queue drops it
    /// for that upstream and counts it.
    pub(crate) fn offer(&self, signal: OtlpSignal, body: &Bytes) {
        for lane in self.lanes.iter() {
            let item = Item {
                signal,
                body: body.clone(),
            };
            match lane.tx.try_send(item) {
                Ok(()) => {
                    lane.stats.queued.fetch_add(1, Relaxed);
                }
                Err(_) => {
                    lane.stats.queue_full.fetch_add(1, Relaxed);
                }
            }
        }
    }

    /// One accepted request, ready to be offered ([`Relay::send`]) where it is convenient: the
    /// receivers hand it to the aggregator with the request's records, so a request wakes one
    /// task, not two (a second wake in one poll makes Tokio wake an idle worker to share it).
    pub(crate) fn relay(&self, signal: OtlpSignal, body: &Bytes) -> Relay {
        Relay {
            forwarder: self.clone(),
            signal,
            body: body.clone(),
        }
    }

    /// The counts of every upstream, in configuration order.
    pub(crate) fn views(&self) -> Vec<UpstreamView> {
        self.lanes.iter().map(|l| l.stats.view()).collect()
    }
}

#[cfg(test)]
impl Forwarder {
    /// One lane and no worker, and the receiving end of its queue: what was offered stays
    /// there to be counted.
    pub(crate) fn unstarted() -> (Self, Unsent) {
        let (tx, rx) = mpsc::channel(16);
        let lane = Lane {
            tx,
            stats: Arc::default(),
        };
        (
            Self {
                lanes: vec![lane].into(),
            },
            Unsent(rx),
        )
    }
}

/// The queue of [`Forwarder::unstarted`].
#[cfg(test)]
pub(crate) struct Unsent(mpsc::Receiver<Item>);

#[cfg(test)]
impl Unsent {
    /// The requests offered since the last call.
    pub(crate) fn take(&mut self) -> usize {
        std::iter::from_fn(|| self.0.try_recv().ok()).count()
    }
}

/// An accepted request on its way to the upstreams ([`Forwarder::relay`]).
#[derive(Debug)]
pub(crate) struct Relay {
    forwarder: Forwarder,
    signal: OtlpSignal,
    body: Bytes,
}

impl Relay {
    /// Offers the request to every upstream ([`Forwarder::offer`]).
    pub(crate) fn send(self) {
        self.forwarder.offer(self.signal, &self.body);
    }
}

/// Sends the requests of one lane, one at a time, until the queue closes.
async fn worker(
    up: Arc<Upstream>,
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Item>>>,
    stats: Arc<UpstreamStats>,
    policy: Policy,
) {
    let mut conn = Conn::default();
    loop {
        let item = conn.idle(async { rx.lock().await.recv().await }).await;
        let Some(item) = item else { return };
        let sent = deliver(&up, &mut conn, &item, &stats, policy).await;
        stats.queued.fetch_sub(1, Relaxed);
        if sent {
            stats.sent.fetch_add(1, Relaxed);
        } else {
            stats.gave_up.fetch_add(1, Relaxed);
        }
    }
}

/// Tries `item` until the upstream takes it (true), refuses it for good or `retry_for` passes
/// (false).
async fn deliver(
    up: &Upstream,
    conn: &mut Conn,
    item: &Item,
    stats: &UpstreamStats,
    policy: Policy,
) -> bool {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(100);
    loop {
        let attempt = tokio::time::timeout(
            policy.timeout,
            up.send(conn, item.signal, item.body.clone()),
        )
        .await
        .unwrap_or_else(|_| {
            conn.reset();
            Attempt::Retry {
                error: format!("no answer within {:?}", policy.timeout),
                after: None,
            }
        });
        let (error, after) = match attempt {
            Attempt::Sent => return true,
            Attempt::Refused(error) => {
                stats.error(error);
                return false;
            }
            Attempt::Retry { error, after } => (error, after),
        };
        stats.error(error);
        let wait = after.unwrap_or_else(|| jitter(backoff));
        if started.elapsed() + wait > policy.retry_for {
            return false;
        }
        stats.retries.fetch_add(1, Relaxed);
        tokio::time::sleep(wait).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// `d` scaled by a factor in [0.5, 1.0), from the clock's low bits (enough to spread the
/// workers' retries).
fn jitter(d: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    d.mul_f64(0.5 + f64::from(nanos % 1000) / 2000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An OTLP/HTTP (`h2` false) or OTLP/gRPC upstream on a thread and runtime of its own that
    /// takes every request; its address.
    fn upstream(h2: bool) -> std::net::SocketAddr {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                tx.send(listener.local_addr().expect("addr")).expect("send");
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| async move {
                            let _ = http_body_util::BodyExt::collect(req.into_body()).await;
                            let mut answer = hyper::Response::new(http_body_util::Empty::<
                                prost::bytes::Bytes,
                            >::new(
                            ));
                            if h2 {
                                let h = answer.headers_mut();
                                h.insert("content-type", "application/grpc".parse().expect("v"));
                                h.insert("grpc-status", "0".parse().expect("v"));
                            }
                            Ok::<_, std::convert::Infallible>(answer)
                        },
                    );
                    let io = hyper_util::rt::TokioIo::new(stream);
                    if h2 {
                        let conn = hyper::server::conn::http2::Builder::new(
                            hyper_util::rt::TokioExecutor::new(),
                        )
                        .serve_connection(io, svc);
                        tokio::spawn(conn);
                    } else {
                        tokio::spawn(
                            hyper::server::conn::http1::Builder::new().serve_connection(io, svc),
                        );
                    }
                }
            });
        });
        rx.recv().expect("upstream address")
    }

    /// The parks of each of two workers while `requests` requests are forwarded one at a time
    /// to an upstream of its own, each offered as the daemon does: a task woken by a socket
    /// (the receiver) hands it to another (the aggregator), which offers it.
    fn parks_forwarding(h2: bool, requests: u64) -> [u64; 2] {
        use std::io::Write;
        let up = upstream(h2);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let scheme = if h2 { "grpc" } else { "http" };
        let config = ForwardConfig {
            upstreams: vec![format!("{scheme}://{up}")],
            ..ForwardConfig::default()
        };
        let fwd = rt
            .block_on(async { Forwarder::start(&config) })
            .expect("start")
            .expect("an upstream");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let body = Bytes::from(vec![b'x'; 256 * 1024]);
        let (to_aggregator, mut batches) = mpsc::channel::<Bytes>(16);
        let relay = fwd.clone();
        rt.spawn(async move {
            while let Some(b) = batches.recv().await {
                relay.relay(OtlpSignal::Traces, &b).send();
            }
        });
        rt.spawn(async move {
            use tokio::io::AsyncReadExt;
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut byte = [0u8; 1];
            while s.read_exact(&mut byte).await.is_ok() {
                let _ = to_aggregator.try_send(body.clone());
            }
        });
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        let sent = || fwd.views()[0].sent;
        let mut one = |n: u64| {
            s.write_all(b"x").expect("write");
            let deadline = Instant::now() + Duration::from_secs(10);
            while sent() < n {
                assert!(Instant::now() < deadline, "request {n} not forwarded");
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(Duration::from_millis(3));
        };
        one(1);
        let m = rt.metrics();
        let parks = || [m.worker_park_count(0), m.worker_park_count(1)];
        let before = parks();
        for n in 2..=requests + 1 {
            one(n);
        }
        let after = parks();
        [after[0] - before[0], after[1] - before[1]]
    }

    /// The worker drives its own connection ([`drive`]): a forwarded request, HTTP/1.1 or
    /// HTTP/2, is sent and answered on one worker thread while the other stays parked. Best of
    /// three tries, as other tests may share the CPUs.
    #[test]
    fn forwarding_a_request_wakes_no_second_worker() {
        let requests = 60;
        for h2 in [false, true] {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let p = parks_forwarding(h2, requests);
                if p[0].min(p[1]) < requests / 4 {
                    break;
                }
                seen.push(p);
            }
            assert!(
                seen.len() < 3,
                "worker parks for {requests} requests (h2 {h2}): {seen:?}"
            );
        }
    }

    #[test]
    fn jitter_stays_within_half_to_whole() {
        for _ in 0..100 {
            let j = jitter(Duration::from_millis(1000));
            assert!(j >= Duration::from_millis(500) && j < Duration::from_millis(1000));
        }
    }
}
