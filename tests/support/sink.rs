//! An in-process OTLP receiver for tests: the generated gRPC service from `opentelemetry-proto`,
//! and a minimal HTTP/1.1 `POST /v1/traces` endpoint, both on loopback port 0.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// What a sink received: every request, in order.
#[derive(Clone, Default)]
pub struct Received(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

impl Received {
    pub fn requests(&self) -> Vec<ExportTraceServiceRequest> {
        self.0.lock().unwrap().clone()
    }

    /// Every span received, with its resource's attributes.
    pub fn spans(&self) -> Vec<(Vec<KeyValue>, Span)> {
        let mut out = Vec::new();
        for req in self.requests() {
            for rs in req.resource_spans {
                let res = rs.resource.map(|r| r.attributes).unwrap_or_default();
                for ss in rs.scope_spans {
                    for span in ss.spans {
                        out.push((res.clone(), span));
                    }
                }
            }
        }
        out
    }
}

struct Grpc(Received);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0 .0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Starts the gRPC receiver on the current runtime; returns its address.
pub async fn grpc() -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let svc = TraceServiceServer::new(Grpc(received.clone()))
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    (addr, received)
}

/// Starts the HTTP receiver on the current runtime; returns its address.
pub async fn http() -> (SocketAddr, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Received::default();
    let r = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let r = r.clone();
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                loop {
                    let mut request_line = String::new();
                    if stream.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0usize;
                    let mut content_type = String::new();
                    loop {
                        let mut line = String::new();
                        stream.read_line(&mut line).await.unwrap();
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        let (name, value) = line.split_once(':').unwrap();
                        match name.to_ascii_lowercase().as_str() {
                            "content-length" => length = value.trim().parse().unwrap(),
                            "content-type" => content_type = value.trim().to_owned(),
                            _ => {}
                        }
                    }
                    let mut body = vec![0; length];
                    stream.read_exact(&mut body).await.unwrap();
                    assert!(
                        request_line.starts_with("POST /v1/traces "),
                        "{request_line}"
                    );
                    assert_eq!(content_type, "application/x-protobuf");
                    let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
                    r.0.lock().unwrap().push(req);
                    let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    stream.get_mut().write_all(reply.as_bytes()).await.unwrap();
                }
            });
        }
    });
    (addr, received)
}

pub fn find<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

pub fn int_attr(span: &Span, key: &str) -> Option<i64> {
    match find(&span.attributes, key)? {
        any_value::Value::IntValue(v) => Some(*v),
        other => panic!("{key}: not an int: {other:?}"),
    }
}

pub fn str_attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    match find(attrs, key)? {
        any_value::Value::StringValue(v) => Some(v.clone()),
        other => panic!("{key}: not a string: {other:?}"),
    }
}
