//! The writes of one HTTP/2 connection to an upstream, gathered into few system calls.
//!
//! h2 writes a message as DATA frames of the receiver's `SETTINGS_MAX_FRAME_SIZE` (16 KiB unless
//! the receiver raises it, and tonic's and Go's gRPC servers do not) and flushes its socket
//! after each: a 357 KB export request went out as about 22 `writev` calls, each its own trip
//! through the TCP stack, where OTLP/HTTP sends the same bytes with one. [`Coalesce`] takes
//! the writes of one turn of the connection into a buffer and sends them together: a flush
//! that follows a write is held back (and the connection's task woken at once), and the next
//! flush with nothing written in between, the one h2 makes each time its connection is polled
//! with nothing more to send, sends everything. A shutdown, or a buffer past [`MAX_HELD`],
//! sends what is held first; a read does not: h2 reads at the start of each turn of its
//! connection and flushes at its end, so a request's HEADERS, held, leave with its DATA frames
//! in one write (one wake-up of the upstream, not two: `strace` showed a 67-byte write before
//! each request's DATA while a read sent what was held). Nothing waits on a timer: the held
//! bytes leave on the connection's next poll, which the wake asks for at once.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes held before a flush sends them regardless (a few export requests).
pub(super) const MAX_HELD: usize = 1 << 20;

/// An I/O stream whose writes are gathered until the end of a turn of writes and flushes.
#[derive(Debug)]
pub(super) struct Coalesce<T> {
    inner: T,
    /// Accepted bytes not yet written to `inner`; `buf[sent..]` remains to write.
    buf: Vec<u8>,
    sent: usize,
    /// A write came since the last flush.
    wrote: bool,
}

impl<T> Coalesce<T> {
    pub(super) fn new(inner: T) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            sent: 0,
            wrote: false,
        }
    }
}

impl<T: AsyncWrite + Unpin> Coalesce<T> {
    /// Writes out everything held.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buf.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Room for more: what is held is sent first when it reached [`MAX_HELD`].
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.buf.len() >= MAX_HELD {
            ready!(self.poll_send(cx))?;
        }
        self.wrote = true;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // What is held stays held: h2 reads at the start of each turn of its connection and
        // flushes at its end, so held bytes leave with that flush, with whatever the turn adds
        // (a request's DATA after its HEADERS: one write, one wake-up of the upstream).
        Pin::new(&mut self.get_mut().inner).poll_read(cx, out)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        this.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        let mut n = 0;
        for b in bufs {
            this.buf.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.wrote)
            && this.sent < this.buf.len()
            && this.buf.len() < MAX_HELD
        {
            // More frames may follow in this turn: hold them, and have the connection polled
            // again at once; its next flush, with nothing written since, sends them all.
            cx.waker().wake_by_ref();
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// How many bytes `peer` can read without waiting.
    async fn readable(peer: &mut tokio::io::DuplexStream) -> usize {
        let mut got = vec![0u8; 4 << 20];
        let mut n = 0;
        loop {
            match tokio::time::timeout(std::time::Duration::from_millis(50), peer.read(&mut got))
                .await
            {
                Ok(Ok(k)) if k > 0 => n += k,
                _ => return n,
            }
        }
    }

    #[tokio::test]
    async fn a_turn_of_writes_leaves_with_the_flush_that_follows_nothing_written() {
        let (ours, mut peer) = tokio::io::duplex(4 << 20);
        let mut c = Coalesce::new(ours);
        // Two frames, each flushed as h2 does: held.
        c.write_all(&[1u8; 9]).await.unwrap();
        c.flush().await.unwrap();
        let n = c
            .write_vectored(&[IoSlice::new(&[2u8; 9]), IoSlice::new(&[3u8; 16_384])])
            .await
            .unwrap();
        assert_eq!(n, 9 + 16_384, "taken whole");
        c.flush().await.unwrap();
        assert_eq!(readable(&mut peer).await, 0, "held until the turn ends");
        // The connection's next flush with nothing written: everything, in order.
        c.flush().await.unwrap();
        let mut got = vec![0u8; 9 + 9 + 16_384];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..9], &[1u8; 9]);
        assert_eq!(&got[9..18], &[2u8; 9]);
        assert!(got[18..].iter().all(|&b| b == 3));
        assert_eq!(readable(&mut peer).await, 0);
    }

    #[tokio::test]
    async fn a_full_buffer_and_a_shutdown_send_what_is_held_a_read_does_not() {
        // As h2 turns: HEADERS written and flushed (held); the next turn reads first, then
        // writes the DATA and flushes (held); the turn after sends both in one write.
        let (ours, mut peer) = tokio::io::duplex(8 << 20);
        let mut c = Coalesce::new(ours);
        c.write_all(b"headers").await.unwrap();
        c.flush().await.unwrap();
        peer.write_all(b"answer").await.unwrap();
        let mut answer = [0u8; 6];
        c.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"answer");
        assert_eq!(readable(&mut peer).await, 0, "a read sends nothing");
        c.write_all(b"data").await.unwrap();
        c.flush().await.unwrap();
        assert_eq!(readable(&mut peer).await, 0);
        c.flush().await.unwrap();
        let mut got = [0u8; 11];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"headersdata");
        // Past MAX_HELD, a flush sends at once.
        c.write_all(&vec![7u8; MAX_HELD]).await.unwrap();
        c.flush().await.unwrap();
        assert_eq!(readable(&mut peer).await, MAX_HELD);
        // A shutdown sends what is held, then closes.
        c.write_all(b"last").await.unwrap();
        c.flush().await.unwrap();
        c.shutdown().await.unwrap();
        let mut rest = Vec::new();
        peer.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"last");
    }

    #[tokio::test]
    async fn a_held_flush_wakes_the_connection_at_once() {
        let (ours, _peer) = tokio::io::duplex(1 << 16);
        let mut c = Coalesce::new(ours);
        c.write_all(b"frame").await.unwrap();
        let waker = std::sync::Arc::new(Woken::default());
        let w = std::task::Waker::from(waker.clone());
        let mut cx = Context::from_waker(&w);
        assert!(Pin::new(&mut c).poll_flush(&mut cx).is_ready());
        assert!(waker.0.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicBool);

    impl std::task::Wake for Woken {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}
