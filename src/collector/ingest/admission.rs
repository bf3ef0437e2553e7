//! Admission of a request's body: read within its deadline and the shared byte budget, then a
//! decoding slot (steps 3 and 4 of the ingest path, [`super`]).
//!
//! Under load: a body is read before anything else is reserved for it. Its bytes are taken from
//! one budget shared by every body being read (`otlp.max_concurrent_requests` ×
//! `otlp.max_request_bytes`) as they arrive and given back when the body is dropped, so a slow
//! client holds only the bytes it sent. Past the budget the request is refused as `overloaded`
//! (503 / `UNAVAILABLE`, retryable); a body past `otlp.max_request_bytes` as `too_large` (413 /
//! `RESOURCE_EXHAUSTED`), before it is kept when its declared length says so (read and discarded
//! first, up to [`MAX_DISCARDED_BODY`] bytes, so the client reads the answer); a body not received
//! within `listeners.body_timeout` as `timeout` (408 / `DEADLINE_EXCEEDED`). Only a body read in
//! full takes one of the `otlp.max_concurrent_requests` decoding slots, without waiting: none
//! free is `overloaded` too.
//!
//! On failure nothing is kept: a refused body's bytes and slot are released when it is dropped,
//! and the refusal is counted once by the receiver. A body that cannot be read (a broken stream)
//! is refused as `decode` with the transport's error.

use std::sync::Arc;

use prost::bytes::Bytes;

use crate::collector::ingest::{Ingest, Refusal};
use crate::collector::stats::RefusedRequest;

/// Most bytes of a refused request's body read (and discarded) before its answer is sent, so that
/// a client still sending reads the 401 or 413 rather than a broken pipe; past it, or past
/// `listeners.body_timeout`, the connection is closed.
pub(crate) const MAX_DISCARDED_BODY: u64 = 16 * 1024 * 1024;

/// The refusal of a body past the shared read budget.
pub(crate) fn overloaded_budget() -> Refusal {
    Refusal::new(
        RefusedRequest::Overloaded,
        "too many request bytes being read at once; retry later",
    )
}

/// Bytes of bodies read at once: `n` bodies of the largest size, within the semaphore's range.
pub(super) fn read_budget(n: usize, max_request_bytes: u64) -> usize {
    (n as u64)
        .saturating_mul(max_request_bytes)
        .min(tokio::sync::Semaphore::MAX_PERMITS as u64) as usize
}

const REFUSED_NONE: u8 = 0;
const REFUSED_TOO_LARGE: u8 = 1;
const REFUSED_OVERLOADED: u8 = 2;

pin_project_lite::pin_project! {
    /// A request body that takes bytes from the shared read budget as frames arrive and stops
    /// past `limit` bytes; the bytes are given back when it is dropped.
    pub(crate) struct BudgetBody<B> {
        #[pin]
        inner: B,
        budget: Arc<tokio::sync::Semaphore>,
        held: Option<tokio::sync::OwnedSemaphorePermit>,
        total: u64,
        limit: u64,
        refused: Arc<std::sync::atomic::AtomicU8>,
    }
}

impl<B> BudgetBody<B> {
    /// Why reading stopped early, if it did: `Some(Overloaded)` or `Some(TooLarge)`.
    pub(crate) fn refused(flag: &std::sync::atomic::AtomicU8) -> Option<RefusedRequest> {
        match flag.load(std::sync::atomic::Ordering::Relaxed) {
            REFUSED_TOO_LARGE => Some(RefusedRequest::TooLarge),
            REFUSED_OVERLOADED => Some(RefusedRequest::Overloaded),
            _ => None,
        }
    }
}

impl<B> http_body::Body for BudgetBody<B>
where
    B: http_body::Body<Data = prost::bytes::Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = prost::bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        use std::sync::atomic::Ordering::Relaxed;
        let this = self.project();
        let frame = match std::task::ready!(this.inner.poll_frame(cx)) {
            None => return std::task::Poll::Ready(None),
            Some(Err(e)) => return std::task::Poll::Ready(Some(Err(e.into()))),
            Some(Ok(f)) => f,
        };
        if let Some(d) = frame.data_ref() {
            *this.total += d.len() as u64;
            if *this.total > *this.limit {
                this.refused.store(REFUSED_TOO_LARGE, Relaxed);
                return std::task::Poll::Ready(Some(Err("request body over the limit".into())));
            }
            let n = u32::try_from(d.len()).unwrap_or(u32::MAX);
            match this.budget.clone().try_acquire_many_owned(n) {
                Ok(p) => match this.held {
                    Some(h) => h.merge(p),
                    None => *this.held = Some(p),
                },
                Err(_) => {
                    this.refused.store(REFUSED_OVERLOADED, Relaxed);
                    return std::task::Poll::Ready(Some(Err(
                        "request byte budget exhausted".into()
                    )));
                }
            }
        }
        std::task::Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Ingest {
    /// Allows at most `n` requests to be decoded at once, and `n` × `max_request_bytes` bytes of
    /// bodies to be read at once (default
    /// [`DEFAULT_MAX_CONCURRENT_REQUESTS`](crate::collector::config::DEFAULT_MAX_CONCURRENT_REQUESTS)).
    #[must_use]
    pub fn with_max_concurrent_requests(mut self, n: usize) -> Self {
        self.bodies = Arc::new(tokio::sync::Semaphore::new(n.max(1)));
        self.read_budget = Arc::new(tokio::sync::Semaphore::new(read_budget(
            n.max(1),
            self.max_request_bytes,
        )));
        self
    }

    /// Sets the deadline for receiving a whole request body (default
    /// [`DEFAULT_BODY_TIMEOUT`](crate::collector::config::DEFAULT_BODY_TIMEOUT)).
    #[must_use]
    pub(crate) fn with_body_timeout(mut self, d: std::time::Duration) -> Self {
        self.body_timeout = d;
        self
    }

    /// The deadline for receiving a whole request body.
    pub(crate) fn body_timeout(&self) -> std::time::Duration {
        self.body_timeout
    }

    /// `body` wrapped in the read budget; `flag` tells why it stopped early
    /// ([`BudgetBody::refused`]).
    pub(crate) fn budget_body<B>(
        &self,
        body: B,
        limit: u64,
    ) -> (BudgetBody<B>, Arc<std::sync::atomic::AtomicU8>) {
        let flag = Arc::new(std::sync::atomic::AtomicU8::new(REFUSED_NONE));
        (
            BudgetBody {
                inner: body,
                budget: self.read_budget.clone(),
                held: None,
                total: 0,
                limit,
                refused: flag.clone(),
            },
            flag,
        )
    }

    /// Reads `body` to its end and discards it, holding no more than one chunk: `true` when it
    /// ended within `bound` bytes and `listeners.body_timeout`.
    pub(crate) async fn discard_body<B>(&self, body: B, bound: u64) -> bool
    where
        B: http_body::Body<Data = prost::bytes::Bytes>,
    {
        if http_body::Body::size_hint(&body).lower() > bound {
            return false;
        }
        let mut body = std::pin::pin!(body);
        let read = async {
            let mut n = 0u64;
            while let Some(frame) =
                std::future::poll_fn(|cx| http_body::Body::poll_frame(body.as_mut(), cx)).await
            {
                let Ok(frame) = frame else { return false };
                if let Ok(d) = frame.into_data() {
                    n += d.len() as u64;
                    if n > bound {
                        return false;
                    }
                }
            }
            true
        };
        tokio::time::timeout(self.body_timeout, read)
            .await
            .unwrap_or(false)
    }

    /// Step 3 (OTLP/HTTP), read: the whole body within the deadline, the byte budget and
    /// `max_request_bytes`. The permit returned holds the body's bytes of the budget until
    /// dropped.
    pub(crate) async fn read_body<B>(
        &self,
        body: B,
    ) -> Result<(Bytes, Option<tokio::sync::OwnedSemaphorePermit>), Refusal>
    where
        B: http_body::Body<Data = prost::bytes::Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let limit = self.max_request_bytes;
        let too_large = || {
            Refusal::new(
                RefusedRequest::TooLarge,
                format!("request body is larger than {limit} bytes"),
            )
        };
        let declared = http_body::Body::size_hint(&body).lower();
        if declared > limit {
            // Read to its end first when it is not much larger, so a client still sending reads
            // the 413 (which exporters do not retry) rather than a closed connection (which
            // they do).
            if declared <= MAX_DISCARDED_BODY {
                self.discard_body(body, MAX_DISCARDED_BODY).await;
            }
            Err(too_large())
        } else {
            let (b, flag) = self.budget_body(body, limit);
            let mut b = std::pin::pin!(b);
            let read = async {
                let mut chunks = Vec::new();
                while let Some(frame) =
                    std::future::poll_fn(|cx| http_body::Body::poll_frame(b.as_mut(), cx)).await
                {
                    let frame = frame.map_err(|e| match BudgetBody::<B>::refused(&flag) {
                        Some(RefusedRequest::TooLarge) => too_large(),
                        Some(_) => overloaded_budget(),
                        None => {
                            Refusal::new(RefusedRequest::Decode, format!("cannot read body: {e}"))
                        }
                    })?;
                    if let Ok(d) = frame.into_data() {
                        chunks.push(d);
                    }
                }
                Ok(chunks)
            };
            match tokio::time::timeout(self.body_timeout, read).await {
                Err(_) => Err(self.late()),
                Ok(Err(e)) => Err(e),
                Ok(Ok(mut chunks)) => {
                    // A body that came in one chunk is used as it is (no copy).
                    let out = if chunks.len() == 1 {
                        chunks.pop().expect("one chunk")
                    } else {
                        let mut out = Vec::with_capacity(chunks.iter().map(|c| c.len()).sum());
                        for c in chunks {
                            out.extend_from_slice(&c);
                        }
                        out.into()
                    };
                    Ok((out, b.project().held.take()))
                }
            }
        }
    }

    /// The refusal of a body not received within the deadline.
    pub(crate) fn late(&self) -> Refusal {
        Refusal::new(
            RefusedRequest::Timeout,
            format!("request body not received within {:?}", self.body_timeout),
        )
    }

    /// A decoding slot, held while a body that was read is decompressed, decoded and
    /// recognised; `None` when `max_concurrent_requests` requests are being decoded.
    pub fn body_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.bodies.clone().try_acquire_owned().ok()
    }

    /// Step 4, take a decoding slot ([`Ingest::body_permit`]), or be refused as overloaded.
    pub(crate) fn decode_slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Refusal> {
        self.body_permit().ok_or_else(|| {
            Refusal::new(
                RefusedRequest::Overloaded,
                "too many requests being decoded at once; retry later",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::Full;

    use super::*;
    use crate::collector::ingest::recognize::Recognizer;
    use crate::collector::stats::SelfStats;

    /// An ingest path taking bodies of at most `max` bytes, `n` at once.
    fn ingest(max: u64, n: usize) -> Ingest {
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        Ingest::new(
            Arc::new(Recognizer::new(&Default::default(), 128)),
            tx,
            Arc::new(SelfStats::default()),
            max,
        )
        .with_max_concurrent_requests(n)
    }

    fn body(b: &'static [u8]) -> Full<Bytes> {
        Full::new(Bytes::from_static(b))
    }

    #[test]
    fn the_read_budget_is_n_bodies_within_the_semaphores_range() {
        assert_eq!(read_budget(4, 1000), 4000);
        assert_eq!(
            read_budget(usize::MAX, u64::MAX),
            tokio::sync::Semaphore::MAX_PERMITS
        );
    }

    /// A body's bytes are held from the budget until its permit is dropped; a body declaring
    /// more than the limit is refused before it is read.
    #[tokio::test]
    async fn a_body_holds_its_bytes_until_dropped_and_one_past_the_limit_is_refused() {
        let ing = ingest(8, 2);
        let (read, held) = ing.read_body(body(b"12345678")).await.unwrap();
        assert_eq!(&read[..], b"12345678");
        assert_eq!(ing.read_budget.available_permits(), 8);
        drop(held);
        assert_eq!(ing.read_budget.available_permits(), 16);
        let refused = ing.read_body(body(b"123456789")).await.unwrap_err();
        assert_eq!(refused.reason, RefusedRequest::TooLarge);
        assert_eq!((refused.http_status(), refused.grpc_code()), (413, 8));
        assert_eq!(ing.read_budget.available_permits(), 16, "nothing held");
    }

    /// Past the shared budget a body is refused as overloaded, retryable, and what it took is
    /// given back.
    #[tokio::test]
    async fn a_body_past_the_shared_budget_is_refused_as_overloaded() {
        let ing = ingest(8, 1);
        let other = ing.read_budget.clone().try_acquire_many_owned(4).unwrap();
        let refused = ing.read_body(body(b"12345678")).await.unwrap_err();
        assert_eq!(refused.reason, RefusedRequest::Overloaded);
        assert!(refused.retryable());
        drop(other);
        assert_eq!(ing.read_budget.available_permits(), 8);
        assert!(ing.read_body(body(b"12345678")).await.is_ok());
    }

    /// With every decoding slot taken, the next request is refused at once as overloaded.
    #[test]
    fn a_decoding_slot_is_taken_without_waiting() {
        let ing = ingest(8, 1);
        let slot = ing.decode_slot().unwrap();
        let refused = ing.decode_slot().unwrap_err();
        assert_eq!(refused.reason, RefusedRequest::Overloaded);
        drop(slot);
        assert!(ing.decode_slot().is_ok());
    }
}
