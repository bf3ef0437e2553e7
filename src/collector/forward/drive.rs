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
pub(super) type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

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
        let task: Task = Box::pin(async move {
            let _ = fut.await;
        });
        self.inbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(task);
    }
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
    /// The futures of a connection: its `main` future and what `exec` is given.
    pub(super) fn new(main: Task, exec: InTask) -> Self {
        Self {
            main: Some(main),
            tasks: Vec::new(),
            exec,
        }
    }

    /// Awaits `fut`, polling the connection's futures beside it. When the main future ends
    /// (the connection closed or failed) they are all dropped, and what was waiting on the
    /// connection fails on its own.
    pub(super) async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(v);
            }
            if !self.poll_connection(cx) {
                return fut.as_mut().poll(cx);
            }
            Poll::Pending
        })
        .await
    }

    /// Polls every future of the connection once, and those they spawn meanwhile (a future
    /// never polled would never wake the worker); false once the connection has ended.
    fn poll_connection(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(main) = self.main.as_mut() else {
            return false;
        };
        if main.as_mut().poll(cx).is_ready() {
            *self = Self::default();
            return false;
        }
        let mut pending = std::mem::take(&mut self.tasks);
        loop {
            pending.append(&mut self.exec.take());
            if pending.is_empty() {
                return true;
            }
            for mut t in pending.drain(..) {
                if t.as_mut().poll(cx).is_pending() {
                    self.tasks.push(t);
                }
            }
        }
    }
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

    /// A connection that ends (closed by the upstream) drops its futures, and what waited on
    /// it fails instead of hanging; the drivers are then empty, as after a reset.
    #[tokio::test]
    async fn a_connection_that_ends_fails_what_waits_on_it() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (close, closed) = tokio::sync::oneshot::channel::<()>();
        let exec = InTask::default();
        let e = exec.clone();
        let main: Task = Box::pin(async move {
            // A task of the connection holds the answer's sender.
            hyper::rt::Executor::execute(
                &e,
                Box::pin(async move {
                    let _keep = tx;
                    std::future::pending::<()>().await;
                }),
            );
            let _ = closed.await;
        });
        let mut drivers = Drivers::new(main, exec);
        let _ = close.send(());
        let answer = tokio::time::timeout(Duration::from_secs(5), drivers.drive(rx))
            .await
            .expect("failed, not hung");
        assert!(answer.is_err(), "the sender went with the connection");
        assert!(drivers.main.is_none() && drivers.tasks.is_empty());
        // Idle drivers wait on the future alone.
        assert_eq!(drivers.drive(async { 7 }).await, 7);
    }
}
