//! OTLP receivers: gRPC ([`grpc`]) and HTTP ([`http`]), sharing one ingest path.
//!
//! Both decode a request, classify its spans ([`decode::recognize_request`]) and hand the tool
//! records to the aggregator with `try_send`. They never wait for the aggregator: when its queue
//! is full the whole request is refused as retryable (HTTP 503 + `Retry-After`, gRPC
//! `UNAVAILABLE`) and counted, so nothing that was acknowledged is ever dropped. Spans that are
//! tool spans but unusable are rejected through OTLP partial success and counted.

pub mod decode;
pub mod grpc;
pub mod http;
pub mod wire;

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::mpsc;

use super::aggregator::Batch;
use super::recognize::Recognizer;
use super::{RefusedRequest, SelfStats};

/// What a receiver answers after a request was accepted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Accepted {
    /// Spans rejected (partial success); 0 for full success.
    pub rejected_spans: i64,
    /// Why, for partial success.
    pub message: String,
}

/// Why a request was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The body is not a valid request.
    #[error(transparent)]
    Decode(#[from] decode::DecodeError),
    /// The aggregator's queue is full (or it is stopping): retry later.
    #[error("the aggregator queue is full; retry later")]
    Overloaded,
}

/// The ingest path shared by both receivers.
#[derive(Debug)]
pub struct Ingest {
    recognizer: Arc<Recognizer>,
    tx: mpsc::Sender<Batch>,
    stats: Arc<SelfStats>,
    max_request_bytes: u64,
    bodies: Arc<tokio::sync::Semaphore>,
}

impl Ingest {
    /// A new ingest path.
    pub fn new(
        recognizer: Arc<Recognizer>,
        tx: mpsc::Sender<Batch>,
        stats: Arc<SelfStats>,
        max_request_bytes: u64,
    ) -> Self {
        Self {
            recognizer,
            tx,
            stats,
            max_request_bytes,
            bodies: Arc::new(tokio::sync::Semaphore::new(
                crate::collector::config::DEFAULT_MAX_CONCURRENT_REQUESTS,
            )),
        }
    }

    /// Allows at most `n` requests to read their bodies at once (default
    /// [`DEFAULT_MAX_CONCURRENT_REQUESTS`](crate::collector::config::DEFAULT_MAX_CONCURRENT_REQUESTS)).
    #[must_use]
    pub fn with_max_concurrent_requests(mut self, n: usize) -> Self {
        self.bodies = Arc::new(tokio::sync::Semaphore::new(n.max(1)));
        self
    }

    /// A permit to read one request body, held until the request is answered; `None` when
    /// `max_concurrent_requests` bodies are already being read. The caller answers 503 /
    /// UNAVAILABLE; the refusal is counted here (reason `overloaded`).
    pub fn body_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let p = self.bodies.clone().try_acquire_owned().ok();
        if p.is_none() {
            self.stats.refused_request(RefusedRequest::Overloaded);
        }
        p
    }

    /// Largest request accepted, after decompression.
    pub fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes
    }

    /// The daemon's self-metrics.
    pub fn stats(&self) -> &SelfStats {
        &self.stats
    }

    /// Classifies a decoded request (the JSON path) and queues its tool records.
    pub fn ingest_request(&self, req: &ExportTraceServiceRequest) -> Result<Accepted, IngestError> {
        self.ingest_protobuf(&prost::Message::encode_to_vec(req))
    }

    /// Classifies a protobuf-encoded request in place and queues its tool records. A decoding
    /// error is counted as a refused request.
    pub fn ingest_protobuf(&self, body: &[u8]) -> Result<Accepted, IngestError> {
        let rec = decode::recognize_protobuf(&self.recognizer, body).inspect_err(|_| {
            self.stats.refused_request(RefusedRequest::Decode);
        })?;
        let (tools, other, invalid) = (rec.records.len() as u64, rec.not_tool, rec.invalid);
        self.stats.attributes_ignored(rec.attributes_ignored);
        self.stats.label_cuts(&rec.label_cuts);
        if tools > 0
            && self
                .tx
                .try_send(Batch {
                    records: rec.records,
                })
                .is_err()
        {
            self.stats.refused_request(RefusedRequest::Overloaded);
            self.stats.refused_spans_overloaded(tools + other + invalid);
            return Err(IngestError::Overloaded);
        }
        self.stats.accepted(tools, other, invalid);
        Ok(match rec.invalid_reason {
            Some(why) => Accepted {
                rejected_spans: invalid as i64,
                message: format!("{invalid} span(s) rejected: {why}"),
            },
            None => Accepted::default(),
        })
    }
}
