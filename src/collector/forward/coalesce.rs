//! The writes of one HTTP/2 connection to an upstream, gathered into few system calls.
//!
//! h2 writes a message as DATA frames of the receiver's `SETTINGS_MAX_FRAME_SIZE` (16 KiB unless
//! the receiver raises it, and tonic's and Go's gRPC servers do not) and flushes its socket
//! after each: a 357 KB export request went out as about 22 `writev` calls, each its own trip
//! through the TCP stack, where OTLP/HTTP sends the same bytes with one. [`Coalesce`] takes
//! the writes of one turn of the connection and sends them together: a flush that follows a
//! write is held back (and the connection's task woken at once), and the next flush with
//! nothing written in between, the one h2 makes each time its connection is polled with
//! nothing more to send, sends everything. A shutdown, or more than [`MAX_HELD`] bytes held,
//! sends what is held first; a read does not: h2 reads at the start of each turn of its
//! connection and flushes at its end, so a request's HEADERS, held, leave with its DATA frames
//! in one write (one wake-up of the upstream, not two: `strace` showed a 67-byte write before
//! each request's DATA while a read sent what was held). Nothing waits on a timer: the held
//! bytes leave on the connection's next poll, which the wake asks for at once.
//!
//! Nothing of a request is copied to be held: the messages being sent are [`Lent`] to the
//! connection, and a write whose bytes lie within one of them is held as a shared slice of it
//! ([`Bytes::slice_ref`]); only the frames' own headers (a few bytes each) are copied. The held
//! pieces leave with one `writev` (a `perf` profile of gRPC forwarding showed the gathering
//! copy at 91 ns a span, more than the kernel's copy into the socket).

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use prost::bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes held before a flush sends them regardless (a few export requests).
pub(super) const MAX_HELD: usize = 1 << 20;

/// Writes shorter than this are copied without looking for them among the lent messages
/// (frame headers, the gRPC prefix): a lookup takes a lock.
const LOOKED_UP_FROM: usize = 256;

/// Pieces given to one `writev` (Linux takes up to 1024).
const PIECES_PER_WRITE: usize = 64;

/// The messages a connection is sending, whose bytes its writes may be slices of.
#[derive(Debug, Clone, Default)]
pub(super) struct Lent(Arc<Mutex<Vec<Bytes>>>);

/// A message lent to a connection until this is dropped.
#[derive(Debug)]
pub(super) struct Lending {
    lent: Lent,
    ptr: usize,
    len: usize,
}

impl Lent {
    /// Lends `message` (shared, not copied) until the returned guard is dropped.
    pub(super) fn lend(&self, message: &Bytes) -> Lending {
        self.lock().push(message.clone());
        Lending {
            lent: self.clone(),
            ptr: message.as_ptr() as usize,
            len: message.len(),
        }
    }

    /// `data` as a shared slice of a lent message, when it lies within one.
    fn find(&self, data: &[u8]) -> Option<Bytes> {
        let (at, end) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
        self.lock()
            .iter()
            .find(|m| m.as_ptr() as usize <= at && end <= m.as_ptr() as usize + m.len())
            .map(|m| m.slice_ref(data))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Bytes>> {
        // A panic while the lock is held leaves a list of shared buffers, still whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Lending {
    fn drop(&mut self) {
        let mut lent = self.lent.lock();
        if let Some(i) = lent
            .iter()
            .position(|m| m.as_ptr() as usize == self.ptr && m.len() == self.len)
        {
            lent.swap_remove(i);
        }
    }
}

/// An I/O stream whose writes are gathered until the end of a turn of writes and flushes.
#[derive(Debug)]
pub(super) struct Coalesce<T> {
    inner: T,
    lent: Lent,
    /// Accepted bytes not yet written to `inner`, in order: copies and slices of lent messages.
    held: VecDeque<Bytes>,
    /// Small writes gathered since the last piece was added to `held`.
    copied: BytesMut,
    /// Bytes in `held` and `copied`.
    held_len: usize,
    /// A write came since the last flush.
    wrote: bool,
}

impl<T> Coalesce<T> {
    /// `inner`, gathering its writes; those within a message lent to `lent` are not copied.
    pub(super) fn new(inner: T, lent: Lent) -> Self {
        Self {
            inner,
            lent,
            held: VecDeque::new(),
            copied: BytesMut::new(),
            held_len: 0,
            wrote: false,
        }
    }

    /// Holds `data`: a slice of a lent message when it is one, else a copy.
    fn hold(&mut self, data: &[u8]) {
        self.held_len += data.len();
        match (data.len() >= LOOKED_UP_FROM)
            .then(|| self.lent.find(data))
            .flatten()
        {
            Some(shared) => {
                self.end_copied();
                self.held.push_back(shared);
            }
            None => self.copied.extend_from_slice(data),
        }
    }

    /// Moves the small writes gathered so far into `held`, as one piece.
    fn end_copied(&mut self) {
        if !self.copied.is_empty() {
            self.held.push_back(self.copied.split().freeze());
        }
    }
}

impl<T: AsyncWrite + Unpin> Coalesce<T> {
    /// Writes out everything held.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.end_copied();
        while !self.held.is_empty() {
            // On the stack: no allocation per send.
            let mut pieces = [IoSlice::new(&[]); PIECES_PER_WRITE];
            let mut count = 0;
            for (slot, b) in pieces.iter_mut().zip(&self.held) {
                *slot = IoSlice::new(b);
                count += 1;
            }
            let mut n =
                ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, &pieces[..count]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.held_len -= n;
            while n > 0 {
                let front = self.held.front_mut().expect("written bytes were held");
                if n < front.len() {
                    front.advance(n);
                    break;
                }
                n -= front.len();
                self.held.pop_front();
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Room for more: what is held is sent first when it reached [`MAX_HELD`].
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.held_len >= MAX_HELD {
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
        this.hold(data);
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
            this.hold(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.wrote) && this.held_len > 0 && this.held_len < MAX_HELD {
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
        let mut c = Coalesce::new(ours, Lent::default());
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
        let mut c = Coalesce::new(ours, Lent::default());
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

    /// Whether `piece` lies within `message`'s bytes (shares them).
    fn within(piece: &Bytes, message: &Bytes) -> bool {
        let (p, m) = (piece.as_ptr() as usize, message.as_ptr() as usize);
        m <= p && p + piece.len() <= m + message.len()
    }

    #[tokio::test]
    async fn a_lent_message_is_held_where_it_is_and_only_frame_headers_are_copied() {
        let (ours, mut peer) = tokio::io::duplex(4 << 20);
        let lent = Lent::default();
        let message = Bytes::from((0..100_000u32).map(|i| i as u8).collect::<Vec<u8>>());
        let lending = lent.lend(&message);
        let mut c = Coalesce::new(ours, lent.clone());
        // Two DATA frames as h2 writes them: a 9-byte header, then the payload, a slice of the
        // message.
        for (header, part) in [(1u8, &message[..16_384]), (2, &message[16_384..])] {
            let n = c
                .write_vectored(&[IoSlice::new(&[header; 9]), IoSlice::new(part)])
                .await
                .unwrap();
            assert_eq!(n, 9 + part.len());
            c.flush().await.unwrap();
        }
        c.end_copied();
        let shared = c.held.iter().filter(|b| within(b, &message)).count();
        assert_eq!(shared, 2, "both payloads held as slices of the message");
        let copied: usize = c
            .held
            .iter()
            .filter(|b| !within(b, &message))
            .map(Bytes::len)
            .sum();
        assert_eq!(copied, 18, "only the two headers copied");
        assert_eq!(readable(&mut peer).await, 0, "held until the turn ends");
        c.flush().await.unwrap();
        let mut got = vec![0u8; 18 + message.len()];
        peer.read_exact(&mut got).await.unwrap();
        assert_eq!(&got[..9], &[1u8; 9]);
        assert_eq!(&got[9..9 + 16_384], &message[..16_384]);
        assert_eq!(&got[9 + 16_384..18 + 16_384], &[2u8; 9]);
        assert_eq!(&got[18 + 16_384..], &message[16_384..]);
        // Given back, the message is no longer lent: its bytes are copied like any others.
        drop(lending);
        assert!(lent.lock().is_empty());
        c.write_all(&message[..1000]).await.unwrap();
        assert!(c.held.is_empty());
        assert_eq!(c.copied.len(), 1000);
    }

    #[tokio::test]
    async fn held_pieces_leave_whole_and_in_order_through_short_writes() {
        // A peer that takes at most 1000 bytes at a time: every write is short, and a piece is
        // often cut in the middle.
        let (ours, mut peer) = tokio::io::duplex(1000);
        let lent = Lent::default();
        let message = Bytes::from((0..50_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        let _lending = lent.lend(&message);
        let mut c = Coalesce::new(ours, lent);
        let mut want = Vec::new();
        for (i, part) in message.chunks(7_000).enumerate() {
            let header = [i as u8; 9];
            let n = c
                .write_vectored(&[IoSlice::new(&header), IoSlice::new(part)])
                .await
                .unwrap();
            assert_eq!(n, header.len() + part.len(), "taken whole");
            want.extend_from_slice(&header);
            want.extend_from_slice(part);
        }
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            peer.read_to_end(&mut got).await.map(|_| got)
        });
        c.flush().await.unwrap();
        c.shutdown().await.unwrap();
        assert_eq!(c.held_len, 0);
        let got = reader.await.unwrap().unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the bytes arrive whole and in order");
    }

    #[tokio::test]
    async fn a_held_flush_wakes_the_connection_at_once() {
        let (ours, _peer) = tokio::io::duplex(1 << 16);
        let mut c = Coalesce::new(ours, Lent::default());
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
