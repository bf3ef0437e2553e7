//! The ingest stage: OTLP receivers, gRPC ([`grpc`]) and HTTP ([`http`]), sharing one ingest
//! path for the three signals; the zero-copy reader ([`wire`]); span recognition
//! ([`recognize`], learned limits in [`learn`], content counted in [`text`]); the coding agents' own telemetry ([`agents`]);
//! and the record they all produce ([`record`]).
//!
//! A request goes through the same steps on both transports and for every signal: authenticate
//! ([`Ingest::authorize`]), negotiate the encoding (HTTP), read the body ([`Ingest::read_body`];
//! on gRPC tonic reads it through a [`BudgetBody`]), take a decoding slot
//! ([`Ingest::decode_slot`]), decode and ingest ([`Ingest::ingest_signal`]), respond. Each step
//! refuses with one type, [`Refusal`], counted once by the receiver and answered with the status
//! of its reason.
//!
//! Traces and logs are read in place for tool calls (spans by [`recognize`] or, under a coding
//! agent's scopes, by [`agents`]; log records by [`agents`]) and the tool records handed to the
//! aggregator with `try_send`; metrics are checked and acknowledged. They never wait for the aggregator: when its queue
//! is full the whole request is refused as retryable (HTTP 503 + `Retry-After`, gRPC
//! `UNAVAILABLE`) and counted, so nothing that was acknowledged is ever dropped. Spans that are
//! tool spans but unusable are rejected through OTLP partial success and counted.
//!
//! A body is read before anything else is reserved for it, under two budgets: a deadline
//! (`listeners.body_timeout`; late bodies get 408 / `DEADLINE_EXCEEDED`, reason `timeout`) and a
//! byte budget shared by every body being read (`otlp.max_concurrent_requests` ×
//! `otlp.max_request_bytes`, counted as bytes arrive; past it 503 / `UNAVAILABLE`, reason
//! `overloaded`). Only then is one of the `otlp.max_concurrent_requests` decoding slots taken,
//! for the time of decompression, decoding and recognition. A client sending a byte a second
//! therefore holds a few bytes of budget until its deadline, never a slot ([`admission`]).

mod admission;
pub(crate) mod agents;
pub(crate) mod context;
pub mod decode;
pub(crate) mod grpc;
pub mod heard;
pub mod hooks;
pub mod http;
pub(crate) mod learn;
pub mod recognize;
pub mod record;
pub(crate) mod sampling;
pub mod text;
pub mod unrecognised;
pub(crate) mod wal;
pub(crate) mod wire;

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::mpsc;

use prost::bytes::Bytes;

use crate::collector::forward::{Forwarder, Relay};
use crate::collector::ingest::recognize::Recognizer;
use crate::collector::ingest::record::{Batch, ToolRecord};
use crate::collector::ingest::wal::{Wal, WalError};
use crate::collector::stats::{OtlpSignal, RefusedRequest, SelfStats};

pub(crate) use admission::{overloaded_budget, BudgetBody};

/// What a receiver answers after a request was accepted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Accepted {
    /// Spans rejected (partial success); 0 for full success.
    pub(crate) rejected_spans: i64,
    /// Why, for partial success.
    pub(crate) message: String,
}

/// A refused request: the reason it is counted under and the message sent back. Every step of
/// a receiver returns one; the receiver counts it once ([`Refusal::counted`]) and answers with
/// the HTTP status ([`Refusal::http_status`]) or the gRPC code ([`Refusal::grpc_code`]) of its
/// reason, so a reason always gets the same answer on both transports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// Why, as counted in `toolsize_otlp_requests_refused_total{reason}`.
    pub(crate) reason: RefusedRequest,
    /// What the client is told.
    pub(crate) message: String,
}

impl Refusal {
    /// A refusal for `reason`.
    pub(crate) fn new(reason: RefusedRequest, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// Counts the refusal in `stats` and returns it, to answer.
    pub(crate) fn counted(self, stats: &SelfStats) -> Self {
        stats.refused_request(self.reason);
        self
    }

    /// The HTTP status of the reason (OTLP/HTTP).
    pub(crate) fn http_status(&self) -> u16 {
        match self.reason {
            RefusedRequest::Decode => 400,
            RefusedRequest::Unauthenticated => 401,
            RefusedRequest::Timeout => 408,
            RefusedRequest::TooLarge => 413,
            RefusedRequest::UnsupportedMediaType => 415,
            RefusedRequest::Overloaded | RefusedRequest::Stopped | RefusedRequest::Wal => 503,
        }
    }

    /// The gRPC status code of the reason (OTLP/gRPC, and the `google.rpc.Status` body of
    /// OTLP/HTTP errors).
    pub(crate) fn grpc_code(&self) -> i32 {
        match self.reason {
            RefusedRequest::Decode | RefusedRequest::UnsupportedMediaType => 3,
            RefusedRequest::Timeout => 4,
            RefusedRequest::TooLarge => 8,
            RefusedRequest::Overloaded | RefusedRequest::Stopped | RefusedRequest::Wal => 14,
            RefusedRequest::Unauthenticated => 16,
        }
    }

    /// Whether the client should retry (503 + `Retry-After` / `UNAVAILABLE`).
    pub(crate) fn retryable(&self) -> bool {
        matches!(
            self.reason,
            RefusedRequest::Overloaded | RefusedRequest::Wal
        )
    }
}

impl From<decode::DecodeError> for Refusal {
    fn from(e: decode::DecodeError) -> Self {
        let reason = match e {
            decode::DecodeError::TooLarge { .. } => RefusedRequest::TooLarge,
            _ => RefusedRequest::Decode,
        };
        Refusal::new(reason, e.to_string())
    }
}

/// The ingest path shared by both receivers.
#[derive(Debug)]
pub struct Ingest {
    recognizer: Arc<Recognizer>,
    tx: mpsc::Sender<Batch>,
    stats: Arc<SelfStats>,
    max_request_bytes: u64,
    bodies: Arc<tokio::sync::Semaphore>,
    read_budget: Arc<tokio::sync::Semaphore>,
    body_timeout: std::time::Duration,
    auth: Arc<crate::collector::net::auth::Auth>,
    forward: Option<Forwarder>,
    wal: Option<Wal>,
    /// What each coding agent has sent, per signal.
    heard: Arc<heard::Heard>,
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
            read_budget: Arc::new(tokio::sync::Semaphore::new(admission::read_budget(
                crate::collector::config::DEFAULT_MAX_CONCURRENT_REQUESTS,
                max_request_bytes,
            ))),
            body_timeout: crate::collector::config::DEFAULT_BODY_TIMEOUT,
            auth: Arc::default(),
            forward: None,
            wal: None,
            heard: Arc::default(),
        }
    }

    /// Requires the token of `auth` on every request (default: none required).
    #[must_use]
    pub(crate) fn with_auth(mut self, auth: Arc<crate::collector::net::auth::Auth>) -> Self {
        self.auth = auth;
        self
    }

    /// Step 1, authenticate: `headers` carry the token, if one is configured.
    pub(crate) fn authorize(&self, headers: &axum::http::HeaderMap) -> Result<(), Refusal> {
        if self.auth.check(headers) {
            Ok(())
        } else {
            Err(Refusal::new(
                RefusedRequest::Unauthenticated,
                "missing or wrong token (authorization: Bearer <token>)",
            ))
        }
    }

    /// Largest request accepted, after decompression.
    pub(crate) fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes
    }

    /// The daemon's self-metrics.
    pub(crate) fn stats(&self) -> &SelfStats {
        &self.stats
    }

    /// Classifies a decoded request (the JSON path) and queues its tool records.
    pub async fn ingest_request(
        &self,
        req: &ExportTraceServiceRequest,
    ) -> Result<Accepted, Refusal> {
        self.ingest_protobuf(&prost::Message::encode_to_vec(req).into(), &mut None)
            .await
    }

    /// Steps 5 and 6 for any signal: decodes a protobuf-encoded export request and queues the
    /// tool records it holds (traces and logs); metrics are checked and acknowledged. Counts the
    /// request as accepted by signal and, once accepted, offers it to the upstreams
    /// ([`Forwarder`]): with its records when it has any (the aggregator offers it as it takes
    /// them, so the request wakes one task), else here.
    pub(crate) async fn ingest_signal(
        &self,
        signal: OtlpSignal,
        body: &Bytes,
    ) -> Result<Accepted, Refusal> {
        let mut relay = self.forward.as_ref().map(|f| f.relay(signal, body));
        let accepted = match signal {
            OtlpSignal::Traces => self.ingest_protobuf(body, &mut relay).await,
            OtlpSignal::Logs => self.ingest_logs_protobuf(body, &mut relay).await,
            OtlpSignal::Metrics => decode::check_metrics_protobuf(body)
                .map(|()| Accepted::default())
                .map_err(Refusal::from),
        }?;
        if signal == OtlpSignal::Metrics {
            self.heard_metrics(body);
        }
        self.stats.accepted_request(signal);
        if let Some(r) = relay {
            r.send();
        }
        Ok(accepted)
    }

    /// Counts a request as accepted by signal and offers it to the upstreams.
    pub(crate) fn accepted(&self, signal: OtlpSignal, body: &Bytes) {
        self.stats.accepted_request(signal);
        if signal == OtlpSignal::Metrics {
            self.heard_metrics(body);
        }
        if let Some(f) = &self.forward {
            f.offer(signal, body);
        }
    }

    /// Makes every request with tool records durable in `wal` before it is queued and answered
    /// ([`crate::collector::ingest::wal`]).
    #[must_use]
    pub(crate) fn with_wal(mut self, wal: Option<Wal>) -> Self {
        self.wal = wal;
        self
    }

    /// Counts what each coding agent sends in `heard` (`/api/v1/agents`).
    #[must_use]
    pub(crate) fn with_heard(mut self, heard: Arc<heard::Heard>) -> Self {
        self.heard = heard;
        self
    }

    /// Relays every accepted request to `forward`'s upstreams.
    #[must_use]
    pub(crate) fn with_forwarder(mut self, forward: Option<Forwarder>) -> Self {
        self.forward = forward;
        self
    }

    /// Steps 5 and 6, decode and ingest: classifies a protobuf-encoded request in place and
    /// queues its tool records, with `relay` when it has any ([`Ingest::queue`]). The spans of
    /// a request refused for a full queue are counted here; the refusal itself is counted by
    /// the caller, like every other.
    pub(crate) async fn ingest_protobuf(
        &self,
        body: &Bytes,
        relay: &mut Option<Relay>,
    ) -> Result<Accepted, Refusal> {
        let mut rec = decode::recognize_protobuf(&self.recognizer, body)?;
        self.recognizer
            .unrecognised()
            .merge(std::mem::take(&mut rec.unrecognised));
        let (tools, other, invalid) = (rec.records.len() as u64, rec.not_tool, rec.invalid);
        self.stats.attributes_ignored(rec.attributes_ignored);
        self.stats.label_cuts(&rec.label_cuts);
        let tally = heard::Tally::of(&rec.records);
        self.queue(OtlpSignal::Traces, (rec.records, rec.context), relay, body)
            .await
            .inspect_err(|r| self.stats.refused_spans(r.reason, tools + other + invalid))?;
        self.heard(heard::Kind::Traces, tally);
        self.stats
            .accepted(tools, other, invalid - rec.invalid_size);
        self.stats.invalid_size(rec.invalid_size);
        Ok(match rec.invalid_reason {
            Some(why) => Accepted {
                rejected_spans: invalid as i64,
                message: format!("{invalid} span(s) rejected: {why}"),
            },
            None => Accepted::default(),
        })
    }

    /// Reads the log records of a protobuf-encoded `ExportLogsServiceRequest` in place and
    /// queues the tool calls among them.
    pub(crate) async fn ingest_logs_protobuf(
        &self,
        body: &Bytes,
        relay: &mut Option<Relay>,
    ) -> Result<Accepted, Refusal> {
        let mut rec = decode::recognize_logs_protobuf(&self.recognizer, body)?;
        self.recognizer
            .unrecognised()
            .merge(std::mem::take(&mut rec.unrecognised));
        let (tools, other) = (rec.records.len() as u64, rec.not_tool);
        self.stats.label_cuts(&rec.label_cuts);
        self.stats.log_records_invalid_size(rec.invalid_size);
        let tally = heard::Tally::of(&rec.records);
        self.queue(OtlpSignal::Logs, (rec.records, rec.context), relay, body)
            .await
            .inspect_err(|r| self.stats.refused_logs(r.reason, tools + other))?;
        self.heard(heard::Kind::Logs, tally);
        self.stats.accepted_logs(tools, other);
        Ok(Accepted::default())
    }

    /// Steps 5 and 6 for a coding agent's hook payload ([`hooks`]): reads it and queues the
    /// record it gives its call, if any. Counted as a log record and as an accepted request of
    /// the logs signal; never forwarded (it is not OTLP), and never written to the write-ahead
    /// log (which holds OTLP requests): a hook's record, like a coding agent's call still
    /// waiting for its other signals, is durable once a snapshot holds it.
    pub(crate) fn ingest_hook(
        &self,
        agent: hooks::HookAgent,
        service: Option<&str>,
        body: &[u8],
    ) -> Result<Accepted, Refusal> {
        let rec = hooks::recognize(&self.recognizer, agent, service, body)
            .map_err(|e| Refusal::new(RefusedRequest::Decode, e.to_string()))?;
        let (tools, other) = (rec.records.len() as u64, rec.not_tool);
        self.stats.label_cuts(&rec.label_cuts);
        if !rec.records.is_empty() {
            self.queue_now(self.batch(rec.records, OtlpSignal::Logs, None))
                .inspect_err(|r| self.stats.refused_logs(r.reason, tools + other))?;
        }
        self.stats.accepted_logs(tools, other);
        self.stats.accepted_request(OtlpSignal::Logs);
        // Every payload counts as the hook heard, whether or not it revealed a cut.
        self.heard.add(
            agent.name(),
            heard::Kind::Hooks,
            1,
            0,
            crate::collector::clock::now_unix_ms(),
        );
        Ok(Accepted::default())
    }

    /// Adds a request's agents' records to what they have sent.
    fn heard(&self, kind: heard::Kind, tally: heard::Tally) {
        self.heard
            .add_tally(kind, tally, crate::collector::clock::now_unix_ms());
    }

    /// Counts an accepted metrics request (`body`, protobuf) for the agents whose resources it
    /// names.
    fn heard_metrics(&self, body: &[u8]) {
        let now = crate::collector::clock::now_unix_ms();
        for agent in heard::metrics_agents(body) {
            self.heard.add(agent, heard::Kind::Metrics, 1, 0, now);
        }
    }

    /// Hands the records of one request to the aggregator, with the request's `relay` (taken),
    /// or refuses the request as overloaded when its queue is full, or as stopped when the
    /// aggregator is gone (nothing of it is kept or forwarded). With the write-ahead log on, the
    /// request (`body`) is made durable first and the batch queued by the log's writer
    /// ([`Ingest::log_then_queue`]). A batch lost in the queue afterwards counts itself as
    /// dropped. A request without records or context events keeps its `relay`.
    async fn queue(
        &self,
        signal: OtlpSignal,
        (records, context): (Vec<ToolRecord>, context::ContextEvents),
        relay: &mut Option<Relay>,
        body: &Bytes,
    ) -> Result<(), Refusal> {
        if records.is_empty() && context.is_empty() {
            return Ok(());
        }
        let batch = self
            .batch(records, signal, relay.take())
            .with_context(context);
        match &self.wal {
            Some(wal) => self.log_then_queue(wal, signal, body, batch).await,
            None => self.queue_now(batch),
        }
    }

    /// The batch of `records`, their arguments' hashes dropped unless they are kept
    /// (`recognition.keep_args_hashes`): never held, nothing downstream (views, alerts,
    /// snapshot) can show them.
    fn batch(
        &self,
        mut records: Vec<ToolRecord>,
        signal: OtlpSignal,
        relay: Option<Relay>,
    ) -> Batch {
        if !self.recognizer.keeps_args_hashes() {
            for r in &mut records {
                r.args_hash = None;
            }
        }
        Batch::new(records, signal, self.stats.clone(), relay)
    }

    /// Puts `batch` in the aggregator's queue at once, or refuses as [`Ingest::queue`] does.
    fn queue_now(&self, batch: Batch) -> Result<(), Refusal> {
        match self.tx.try_send(batch) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(b)) => {
                b.refused();
                Err(queue_full())
            }
            Err(mpsc::error::TrySendError::Closed(b)) => {
                b.refused();
                Err(stopped())
            }
        }
    }

    /// Reserves the batch's place in the aggregator's queue (or refuses as [`Ingest::queue`]
    /// does), hands the request to the write-ahead log's writer and waits until it is durable
    /// and the batch queued; refuses as `wal_failed` when the write fails.
    async fn log_then_queue(
        &self,
        wal: &Wal,
        signal: OtlpSignal,
        body: &Bytes,
        batch: Batch,
    ) -> Result<(), Refusal> {
        let place = match self.tx.clone().try_reserve_owned() {
            Ok(p) => p,
            Err(mpsc::error::TrySendError::Full(_)) => {
                batch.refused();
                return Err(queue_full());
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                batch.refused();
                return Err(stopped());
            }
        };
        let pending = wal
            .append(signal, body.clone(), batch, place)
            .map_err(|e| match e {
                WalError::Busy => Refusal::new(
                    RefusedRequest::Overloaded,
                    "too many requests waiting for the write-ahead log; retry later",
                ),
                e => wal_failed(&e.to_string()),
            })?;
        pending.durable().await.map_err(|why| wal_failed(&why))
    }
}

fn queue_full() -> Refusal {
    Refusal::new(
        RefusedRequest::Overloaded,
        "the aggregator queue is full; retry later",
    )
}

fn stopped() -> Refusal {
    Refusal::new(
        RefusedRequest::Stopped,
        "the aggregator has stopped; this daemon records nothing until it is restarted (see its \
         log)",
    )
}

/// The refusal of a request the write-ahead log could not make durable. The client is told it
/// can retry; the cause is in the daemon's log (paths are not sent to clients).
fn wal_failed(why: &str) -> Refusal {
    tracing::debug!(error = %why, "Request refused: the write-ahead log failed.");
    Refusal::new(
        RefusedRequest::Wal,
        "the request could not be made durable (write-ahead log); retry later",
    )
}
