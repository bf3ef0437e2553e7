//! OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export`.
//!
//! Accepts gzip-compressed messages; the message size limit (`otlp.max_request_bytes`) applies
//! after decompression (tonic's default of 4 MiB is raised to it). Under overload it answers
//! `UNAVAILABLE` (retryable); partial success carries `rejected_spans` and a message.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use super::{Accepted, Ingest};

/// The gRPC trace service.
#[derive(Debug)]
pub struct GrpcReceiver {
    ingest: Arc<Ingest>,
}

/// The tonic service to mount: limits and gzip set.
pub fn service(ingest: Arc<Ingest>) -> TraceServiceServer<GrpcReceiver> {
    let limit = usize::try_from(ingest.max_request_bytes()).unwrap_or(usize::MAX);
    TraceServiceServer::new(GrpcReceiver { ingest })
        .max_decoding_message_size(limit)
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
}

/// The response for an accepted request.
pub fn response(a: Accepted) -> ExportTraceServiceResponse {
    ExportTraceServiceResponse {
        partial_success: (a.rejected_spans > 0 || !a.message.is_empty()).then_some(
            ExportTracePartialSuccess {
                rejected_spans: a.rejected_spans,
                error_message: a.message,
            },
        ),
    }
}

#[tonic::async_trait]
impl TraceService for GrpcReceiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.ingest.stats().request("grpc");
        match self.ingest.ingest(request.get_ref()) {
            Ok(a) => Ok(Response::new(response(a))),
            Err(e) => Err(Status::unavailable(e.to_string())),
        }
    }
}
