//! A forwarding worker's connection, driven by the worker itself.
//!
//! hyper's client connections come with futures that must be polled for the connection to
//! move: the `Connection` returned by the handshake, and, for HTTP/2, what hyper hands its
//! executor (the connection's I/O, a request body it cannot send at once). Spawned as tasks of
//! their own, every request the worker hands them is a wake of another task from the worker's,
//! and Tokio answers the second such wake within one poll by waking an idle worker thread to
//! share the work: two `futex` wakes of the other thread per forwarded request, measured with
//! `strace -f` at 100,000 spans/s. Kept here instead and polled beside whatever the worker
//! awaits ([`Drivers::drive`]), the same hand-over is a wake of the task being polled, which
//! `Repoll` polls again in place.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// A connection's future.
type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The executor given to hyper: what it would spawn is kept for the worker to poll.
#[derive(Clone, Default)]
pub(super) struct InTask {
    inbox: Arc<Mutex<Vec<Task>>>,
}

impl<F> hyper::rt::Executor<F> for InTask
where
    F: Future + Send + 'static,
{
    fn execute(&self, fut: F) {
        self.inbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(task(fut));
    }
}

/// `fut` as a connection's future, its output dropped.
fn task<F: Future + Send + 'static>(fut: F) -> Task {
    Box::pin(async move {
        let _ = fut.await;
    })
}

impl InTask {
    fn take(&self) -> Vec<Task> {
        std::mem::take(
            &mut *self
                .inbox
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// The futures of one connection: the handshake's `Connection` and what hyper spawned.
#[derive(Default)]
pub(super) struct Drivers {
    main: Option<Task>,
    tasks: Vec<Task>,
    exec: InTask,
}

impl Drivers {
    /// The futures of a connection: its `main` future (the handshake's `Connection`) and what
    /// `exec` is given.
    pub(super) fn new<F: Future + Send + 'static>(main: F, exec: InTask) -> Self {
        Self {
            main: Some(task(main)),
            tasks: Vec::new(),
            exec,
        }
    }

    /// Awaits `fut`, polling the connection's futures beside it. When they have all ended (the
    /// connection closed or failed) `fut` is polled once more: what waited on the connection
    /// fails on its own.
    pub(super) async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(v);
            }
            match self.poll_connection(cx) {
                Connection::Ended => fut.as_mut().poll(cx),
                Connection::None | Connection::Open => Poll::Pending,
            }
        })
        .await
    }

    /// Polls every future of the connection once, and those they spawn meanwhile (a future
    /// never polled would never wake the worker).
    ///
    /// The main future may end first: HTTP/2's `ClientTask` stops taking requests when the
    /// upstream sends GOAWAY, while the connection's I/O goes on carrying the answers of the
    /// requests in flight. The connection has ended when all of them have.
    fn poll_connection(&mut self, cx: &mut Context<'_>) -> Connection {
        if self.main.is_none() && self.tasks.is_empty() {
            return Connection::None;
        }
        if let Some(main) = self.main.as_mut() {
            if main.as_mut().poll(cx).is_ready() {
                self.main = None;
            }
        }
        let mut pending = std::mem::take(&mut self.tasks);
        loop {
            pending.append(&mut self.exec.take());
            if pending.is_empty() {
                break;
            }
            for mut t in pending.drain(..) {
                if t.as_mut().poll(cx).is_pending() {
                    self.tasks.push(t);
                }
            }
        }
        if self.main.is_none() && self.tasks.is_empty() {
            *self = Self::default();
            return Connection::Ended;
        }
        Connection::Open
    }
}

/// What a poll of a connection's futures found.
enum Connection {
    /// There is none (not opened yet, or ended before).
    None,
    /// Some of its futures go on.
    Open,
    /// Its last futures ended in this poll.
    Ended,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::Duration;

    /// What hyper hands the executor is polled by the worker, and so is what those tasks hand
    /// it while being polled: a task never polled would never wake the worker, and what waits
    /// on it would hang.
    #[tokio::test]
    async fn what_the_connection_spawns_is_polled_with_it() {
        let exec = InTask::default();
        let done = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (e, d) = (exec.clone(), done.clone());
        let mut tx = Some(tx);
        let main: Task = Box::pin(async move {
            // Spawns a task that spawns a second one, which answers.
            let e2 = e.clone();
            let tx = tx.take().expect("first poll");
            hyper::rt::Executor::execute(
                &e,
                Box::pin(async move {
                    hyper::rt::Executor::execute(
                        &e2,
                        Box::pin(async move {
                            d.store(true, SeqCst);
                            let _ = tx.send(());
                        }),
                    );
                }),
            );
            std::future::pending::<()>().await;
        });
        let mut drivers = Drivers::new(main, exec);
        let answer = tokio::time::timeout(Duration::from_secs(5), drivers.drive(rx))
            .await
            .expect("answered, not hung");
        assert!(answer.is_ok());
        assert!(done.load(SeqCst));
        assert!(drivers.main.is_some(), "the connection goes on");
    }

    /// HTTP/2 after the upstream's GOAWAY: the main future (hyper's `ClientTask`) ends first
    /// and the connection's I/O still delivers the answer of the request in flight; once the
    /// I/O ends too the connection has ended, what still waits on it fails instead of hanging,
    /// and the drivers are empty, as after a reset.
    #[tokio::test]
    async fn the_answer_in_flight_arrives_after_the_main_future_ended() {
        use tokio::sync::oneshot::channel;
        let (answer, answered) = channel::<u8>();
        let (deliver, delivering) = channel::<()>();
        let (close, closed) = channel::<()>();
        let (held, waiting) = channel::<()>();
        let exec = InTask::default();
        let e = exec.clone();
        let main: Task = Box::pin(async move {
            hyper::rt::Executor::execute(
                &e,
                Box::pin(async move {
                    let _held = held;
                    let _ = delivering.await;
                    let _ = answer.send(5);
                    let _ = closed.await;
                }),
            );
        });
        let mut drivers = Drivers::new(main, exec);
        let _ = deliver.send(());
        let got = tokio::time::timeout(Duration::from_secs(5), drivers.drive(answered))
            .await
            .expect("answered, not hung");
        assert_eq!(got, Ok(5));
        assert!(drivers.main.is_none(), "the main future ended first");
        assert_eq!(drivers.tasks.len(), 1, "the connection's I/O goes on");
        let _ = close.send(());
        let got = tokio::time::timeout(Duration::from_secs(5), drivers.drive(waiting))
            .await
            .expect("failed, not hung");
        assert!(got.is_err(), "the sender went with the connection");
        assert!(drivers.main.is_none() && drivers.tasks.is_empty());
        // Without a connection, the future alone.
        assert_eq!(drivers.drive(async { 7 }).await, 7);
    }
}
