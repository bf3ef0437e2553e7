//! OTLP/gRPC receiver: `TraceService/Export`, `LogsService/Export` (read for the coding agents'
//! tool calls) and `MetricsService/Export` (checked and acknowledged) of
//! `opentelemetry.proto.collector.*.v1`.
//!
//! The service is routed by hand with a bytes codec (rather than the generated server and its
//! prost codec) so that a message that does not decode is answered `INVALID_ARGUMENT`, as OTLP
//! requires (tonic's codec says `INTERNAL`), and is counted in the self-metrics like on HTTP.
//! Gzip is accepted; the message size limit (`otlp.max_request_bytes`, raised from tonic's 4 MiB
//! default) applies after decompression. Both an uncompressed message over the limit (refused by
//! tonic's framing before it is buffered) and a gzip bomb get `RESOURCE_EXHAUSTED`. Under overload
//! (aggregator queue full, the read budget taken, or `otlp.max_concurrent_requests` requests
//! already being decoded) the answer is `UNAVAILABLE` (retryable); a message not received within
//! `listeners.body_timeout` gets `DEADLINE_EXCEEDED`; partial success carries `rejected_spans`
//! and a message.
//!
//! Every call is counted as a request, whatever its path. Refusals tonic makes before the
//! handler runs are counted by the status it answered: `OUT_OF_RANGE` / `RESOURCE_EXHAUSTED` as
//! `too_large`, `UNIMPLEMENTED` (unsupported `grpc-encoding`) as `unsupported_media_type`, any
//! other error as `decode`. A path other than the three Export methods is answered
//! `UNIMPLEMENTED` and counted as `unsupported_media_type`. The three responses share one wire
//! layout (`partial_success` = rejected count, message), so one encoder answers all three. With a token configured, a call without it gets `UNAUTHENTICATED`
//! (reason `unauthenticated`) before its message is read.

use std::convert::Infallible;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::bytes::Buf;
use prost::Message;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{http, Body, BoxFuture, Bytes, Context, Poll, Service, StdError};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};

use super::{Accepted, Ingest, Refusal};
use crate::collector::stats::OtlpSignal;
use crate::collector::RefusedRequest;

/// Fully qualified gRPC service name.
pub(crate) const SERVICE_NAME: &str = "opentelemetry.proto.collector.trace.v1.TraceService";

/// The gRPC trace service, mounted with `tonic::transport::Server::add_service`.
#[derive(Debug, Clone)]
pub(crate) struct GrpcReceiver {
    ingest: Arc<Ingest>,
    limit: usize,
}

/// The service to mount: limits and gzip set.
pub(crate) fn service(ingest: Arc<Ingest>) -> GrpcReceiver {
    let limit = usize::try_from(ingest.max_request_bytes()).unwrap_or(usize::MAX);
    GrpcReceiver { ingest, limit }
}

/// The response for an accepted request.
pub(crate) fn response(a: Accepted) -> ExportTraceServiceResponse {
    ExportTraceServiceResponse {
        partial_success: (a.rejected_spans > 0 || !a.message.is_empty()).then_some(
            ExportTracePartialSuccess {
                rejected_spans: a.rejected_spans,
                error_message: a.message,
            },
        ),
    }
}

impl NamedService for GrpcReceiver {
    const NAME: &'static str = SERVICE_NAME;
}

impl<B> Service<http::Request<B>> for GrpcReceiver
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        self.ingest.stats().request("grpc");
        let path = req.uri().path();
        let Some(signal) = OtlpSignal::ALL.into_iter().find(|s| s.grpc_path() == path) else {
            self.ingest
                .stats()
                .refused_request(RefusedRequest::UnsupportedMediaType);
            return Box::pin(async {
                Ok(Status::unimplemented(
                    "only the trace, logs and metrics Export methods are served",
                )
                .into_http())
            });
        };
        if let Err(r) = self.ingest.authorize(req.headers()) {
            let s = status(r, self.ingest.stats());
            return Box::pin(async move { Ok(s.into_http()) });
        }
        let reached = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let export = Export(self.ingest.clone(), signal, reached.clone());
        let mut grpc = Grpc::new(RawCodec)
            .accept_compressed(CompressionEncoding::Gzip)
            .send_compressed(CompressionEncoding::Gzip)
            .max_decoding_message_size(self.limit)
            .max_encoding_message_size(4 << 20);
        let ingest = self.ingest.clone();
        // The body takes bytes from the shared read budget as frames arrive (tonic enforces the
        // message size limit); the decoding slot is taken by the handler, once the message is
        // whole; the deadline covers both.
        let (parts, body) = req.into_parts();
        let (body, refused) = ingest.budget_body(body, u64::MAX);
        let req = http::Request::from_parts(parts, body);
        let deadline = ingest.body_timeout();
        Box::pin(async move {
            let Ok(mut res) = tokio::time::timeout(deadline, grpc.unary(export, req)).await else {
                return Ok(status(ingest.late(), ingest.stats()).into_http());
            };
            if let Some(reason) = super::BudgetBody::<()>::refused(&refused) {
                let r = match reason {
                    RefusedRequest::TooLarge => Refusal::new(reason, "request body over the limit"),
                    _ => super::overloaded_budget(),
                };
                return Ok(status(r, ingest.stats()).into_http());
            }
            // tonic refuses a message whose length prefix passes the limit before buffering it,
            // with OUT_OF_RANGE; OTLP says RESOURCE_EXHAUSTED (non-retryable without RetryInfo).
            // Decompression over the limit already comes back as RESOURCE_EXHAUSTED.
            let code = res
                .headers()
                .get("grpc-status")
                .map(|v| v.as_bytes().to_vec());
            if code.as_deref() == Some(b"11") {
                res.headers_mut()
                    .insert("grpc-status", http::HeaderValue::from_static("8"));
            }
            // The handler counts its own refusals; count those tonic made before it ran.
            if !reached.load(std::sync::atomic::Ordering::Relaxed) {
                match code.as_deref() {
                    None | Some(b"0") => {}
                    Some(b"11") | Some(b"8") => {
                        ingest.stats().refused_request(RefusedRequest::TooLarge)
                    }
                    Some(b"12") => ingest
                        .stats()
                        .refused_request(RefusedRequest::UnsupportedMediaType),
                    Some(_) => ingest.stats().refused_request(RefusedRequest::Decode),
                }
            }
            Ok(res)
        })
    }
}

/// Counts a refusal and answers it with the gRPC code of its reason.
fn status(r: Refusal, stats: &crate::collector::SelfStats) -> Status {
    let r = r.counted(stats);
    Status::new(tonic::Code::from_i32(r.grpc_code()), r.message)
}

/// The handler of one signal, and a flag it sets once tonic has handed it a message.
struct Export(Arc<Ingest>, OtlpSignal, Arc<std::sync::atomic::AtomicBool>);

impl UnaryService<Bytes> for Export {
    type Response = ExportTraceServiceResponse;
    type Future = BoxFuture<Response<Self::Response>, Status>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let (ingest, signal) = (self.0.clone(), self.1);
        self.2.store(true, std::sync::atomic::Ordering::Relaxed);
        Box::pin(async move {
            let _slot = ingest
                .decode_slot()
                .map_err(|r| status(r, ingest.stats()))?;
            ingest
                .ingest_signal(signal, request.get_ref())
                .await
                .map(|a| Response::new(response(a)))
                .map_err(|r| status(r, ingest.stats()))
        })
    }
}

/// Passes request bytes through (decoded by [`Export`]) and encodes responses with prost.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = ExportTraceServiceResponse;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = ExportTraceServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Self::Error> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode response: {e}")))
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
