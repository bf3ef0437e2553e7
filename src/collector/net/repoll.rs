//! A connection's future polled again in place when it wakes itself while being polled.
//!
//! hyper's HTTP/1 server hands a request body to the handler through a channel polled by the
//! same task: while the connection task is polled, the dispatcher reads body bytes and wakes
//! the handler waiting on that channel, which is this very task. Tokio then reschedules the task
//! as a yield, to the back of its worker's queue, and wakes an idle worker to share the work:
//! one cross-CPU wake-up per request (a `futex` call, a context switch on the other core, often
//! the task stolen there with its data cold in that core's cache). At paced rates, with the
//! daemon idle between requests, that wake-up was most of what a second worker cost per span.
//!
//! [`Repoll`] gives the future a waker of its own: a wake that arrives while the future is being
//! polled (from this thread or any other) only marks it, and the future is polled again at once,
//! up to [`REPOLLS`] times and while the task has coop budget left; every other wake goes to the
//! task's waker as before. So a request is read, handled and answered in one run of its task,
//! on one core. Nothing is lost: a wake during a poll always leads to another poll, here or
//! through the task's waker when the bound is reached.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Polls in place per poll of the task, at most, before deferring to the scheduler. Four are
/// enough for a request (see the park-count test); the bound keeps a future that wakes itself
/// on every poll (hyper's dispatcher does after 16 passes of its loop, to yield) from running
/// more than this many times longer than it would unwrapped before other tasks get their turn.
pub(crate) const REPOLLS: usize = 4;

pin_project_lite::pin_project! {
    /// `inner`, polled again in place when it wakes itself during a poll.
    pub(crate) struct Repoll<F> {
        #[pin]
        inner: F,
        shared: Arc<Shared>,
        waker: Waker,
    }
}

/// The flags are read and written with `SeqCst` on both sides: the waker's second look at
/// `polling` must not be reordered before its store to `woken`, nor the poller's look at
/// `woken` before its store to `polling` (with Acquire/Release a wake could be neither
/// re-polled nor forwarded).
#[derive(Default)]
struct Shared {
    /// The inner future is being polled.
    polling: AtomicBool,
    /// It was woken while being polled.
    woken: AtomicBool,
    /// The task's waker, for wakes that come between polls.
    task: Mutex<Option<Waker>>,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(SeqCst) {
            self.woken.store(true, SeqCst);
            // Still polling: the poller sees the mark when it stops. If it stopped in between,
            // it may have looked before the mark: wake the task too (at worst one extra poll).
            if self.polling.load(SeqCst) {
                return;
            }
        }
        if let Some(w) = self.task.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            w.wake_by_ref();
        }
    }
}

impl<F: Future> Repoll<F> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: F) -> Self {
        let shared = Arc::new(Shared::default());
        Self {
            inner,
            waker: Waker::from(shared.clone()),
            shared,
        }
    }
}

/// `polling` set for the time of one poll of the inner future, cleared when it returns or
/// unwinds (a wake after a panic then reaches the task).
struct Polling<'a>(&'a AtomicBool);

impl<'a> Polling<'a> {
    fn start(flag: &'a AtomicBool) -> Self {
        flag.store(true, SeqCst);
        Self(flag)
    }
}

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        self.0.store(false, SeqCst);
    }
}

impl<F: Future> Future for Repoll<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        {
            let mut task = this.shared.task.lock().unwrap_or_else(|e| e.into_inner());
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let mut inner_cx = Context::from_waker(this.waker);
        for _ in 0..REPOLLS {
            this.shared.woken.store(false, SeqCst);
            let out = {
                let _polling = Polling::start(&this.shared.polling);
                this.inner.as_mut().poll(&mut inner_cx)
            };
            if out.is_ready() {
                return out;
            }
            if !this.shared.woken.load(SeqCst) {
                return Poll::Pending;
            }
            if !tokio::task::coop::has_budget_remaining() {
                break;
            }
        }
        // Woken during the last poll: let the scheduler run it again, after the others.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Spawns `fut` on the current Tokio runtime, polled in place when it wakes itself.
pub(crate) fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(Repoll::new(fut))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Wakes itself during its first `n` polls, then finishes.
    struct SelfWaking {
        left: usize,
        polls: Arc<AtomicUsize>,
    }

    impl Future for SelfWaking {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, SeqCst);
            if self.left == 0 {
                return Poll::Ready(());
            }
            self.left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// Counts the wakes of the task that polls it.
    struct CountWakes(AtomicUsize);
    impl Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn a_self_wake_is_polled_again_in_place() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut f = std::pin::pin!(Repoll::new(SelfWaking {
            left: 3,
            polls: polls.clone(),
        }));
        let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        assert!(f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
        assert_eq!(
            polls.load(SeqCst),
            4,
            "three self-wakes, three polls in place"
        );
        assert_eq!(wakes.0.load(SeqCst), 0, "the task was never rescheduled");
    }

    #[test]
    fn past_the_bound_the_task_is_woken_and_finishes_later() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut f = std::pin::pin!(Repoll::new(SelfWaking {
            left: REPOLLS + 2,
            polls: polls.clone(),
        }));
        let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(f.as_mut().poll(&mut cx).is_pending());
        assert_eq!(polls.load(SeqCst), REPOLLS);
        assert_eq!(
            wakes.0.load(SeqCst),
            1,
            "deferred to the scheduler, not lost"
        );
        assert!(f.as_mut().poll(&mut cx).is_ready());
        assert_eq!(polls.load(SeqCst), REPOLLS + 3);
    }

    /// Worker parks on a two-worker runtime serving `requests` bodies of 256 KiB, one at a time
    /// with the runtime idle in between, over one real hyper HTTP/1 connection spawned as is or
    /// wrapped.
    fn parks_serving(wrap: bool, requests: usize) -> [u64; 2] {
        use std::io::{Read, Write};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        rt.spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let svc =
                hyper::service::service_fn(|req: hyper::Request<hyper::body::Incoming>| async {
                    let n = http_body_util::BodyExt::collect(req.into_body())
                        .await
                        .map_or(0, |b| b.to_bytes().len());
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(
                        http_body_util::Full::new(prost::bytes::Bytes::from(n.to_string())),
                    ))
                });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            if wrap {
                tokio::spawn(Repoll::new(conn));
            } else {
                tokio::spawn(conn);
            }
        });
        let body = vec![b'x'; 256 * 1024];
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        // A lost wake fails the test instead of hanging it.
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        let mut exchange = || {
            let head = format!(
                "POST / HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            s.write_all(head.as_bytes()).expect("head");
            s.write_all(&body).expect("body");
            let mut got = Vec::new();
            let mut buf = [0u8; 512];
            while !got.ends_with(body.len().to_string().as_bytes()) {
                let n = s.read(&mut buf).expect("read");
                assert!(n > 0, "connection closed");
                got.extend_from_slice(&buf[..n]);
            }
            std::thread::sleep(std::time::Duration::from_millis(3));
        };
        exchange();
        let m = rt.metrics();
        let parks = || [m.worker_park_count(0), m.worker_park_count(1)];
        let before = parks();
        for _ in 0..requests {
            exchange();
        }
        let after = parks();
        [after[0] - before[0], after[1] - before[1]]
    }

    /// What the wrapper is for: a request read and answered on a real hyper connection wakes
    /// no second worker. Measured by the parks of the quieter worker: as spawned, both workers
    /// wake and park again for each request; wrapped, one serves them all and the other stays
    /// parked. Best of three tries, as other tests may share the CPUs.
    #[test]
    fn a_request_on_a_hyper_connection_wakes_no_second_worker() {
        let requests = 60;
        let mut seen = Vec::new();
        for _ in 0..3 {
            let plain = parks_serving(false, requests);
            let wrapped = parks_serving(true, requests);
            let quieter = |p: [u64; 2]| p[0].min(p[1]);
            if quieter(plain) >= requests as u64 / 3 && quieter(wrapped) * 4 < quieter(plain) {
                return;
            }
            seen.push((plain, wrapped));
        }
        panic!("worker parks for {requests} requests, (as spawned, wrapped): {seen:?}");
    }

    #[tokio::test]
    async fn a_wake_between_polls_reaches_the_task() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let task = tokio::spawn(Repoll::new(async move { rx.await.expect("sent") }));
        tokio::task::yield_now().await;
        tx.send(7).expect("receiver alive");
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .expect("woken, not hung")
            .expect("no panic");
        assert_eq!(got, 7);
    }

    #[test]
    fn a_wake_from_another_thread_during_a_poll_is_not_lost() {
        // The inner future hands its waker to a thread that wakes it while the poll is still
        // running, then reports ready on the poll after that wake.
        struct WokenElsewhere {
            spawned: bool,
            done: Arc<AtomicBool>,
        }
        impl Future for WokenElsewhere {
            type Output = ();
            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                if self.done.load(SeqCst) {
                    return Poll::Ready(());
                }
                if !self.spawned {
                    self.spawned = true;
                    let w = cx.waker().clone();
                    let done = self.done.clone();
                    let t = std::thread::spawn(move || {
                        done.store(true, SeqCst);
                        w.wake();
                    });
                    t.join().expect("waker thread");
                }
                Poll::Pending
            }
        }
        let mut f = std::pin::pin!(Repoll::new(WokenElsewhere {
            spawned: false,
            done: Arc::new(AtomicBool::new(false)),
        }));
        let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        assert!(f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
    }
}
