//! The request mix shared by the collector bench and the load generator, so both measure the same
//! workload, and the OTLP envelope the tests build their requests with. Included with `#[path]`;
//! not an example of its own.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

/// One attribute.
pub(crate) fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

/// How the measured sizes of a request fall against the default 16 KiB ceiling, and what
/// content its spans (or log records) carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)]
pub(crate) enum Mix {
    /// Measured sizes uniform in 0..32 KiB: half of them over the ceiling, with 4,099 argument
    /// hashes (a deploy that made results balloon); the content attributes ASCII.
    Storm,
    /// Measured sizes uniform in 0..16,000 bytes: nothing over the ceiling.
    Quiet,
    /// [`Mix::Storm`] with 1.5–2 KB of accented Latin text (with dashes and guillemets) in the
    /// OTel GenAI spans' `gen_ai.tool.call.result`, as an agent working in French or German
    /// records it.
    StormUtf8,
    /// [`Mix::StormUtf8`] with large content attributes: one span in 64 an OpenInference `TOOL`
    /// span whose `output.value` holds 60 KB (accented Latin or CJK, alternately). As logs: one
    /// Claude Code `tool_result` record in 32 carries 30,000 characters of output in
    /// `tool.output`.
    Large,
}

impl Mix {
    /// Every mix, the historic storm first.
    #[allow(dead_code)]
    pub(crate) const ALL: [Mix; 4] = [Mix::Storm, Mix::Quiet, Mix::StormUtf8, Mix::Large];

    /// The name the load generator and the scripts give the mix.
    #[allow(dead_code)]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mix::Storm => "storm",
            Mix::Quiet => "quiet",
            Mix::StormUtf8 => "storm-utf8",
            Mix::Large => "large",
        }
    }

    /// Measured sizes wrap at this many bytes (uniform below it).
    fn size_mod(self) -> u64 {
        match self {
            Mix::Quiet => 16_000,
            _ => 32_768,
        }
    }
}

/// The writing systems of generated result text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)]
pub(crate) enum Script {
    /// Plain ASCII prose.
    Ascii,
    /// French and German prose: accented letters (two bytes), dashes and guillemets.
    Latin,
    /// Chinese, Japanese and Korean (three bytes a character).
    Cjk,
    /// Emoji among short words (four bytes a pictograph, flags and skin tones as sequences).
    Emoji,
}

impl Script {
    /// Every script.
    #[allow(dead_code)]
    pub(crate) const ALL: [Script; 4] = [Script::Ascii, Script::Latin, Script::Cjk, Script::Emoji];

    fn passage(self) -> &'static str {
        match self {
            Script::Ascii => {
                "Read 300 lines from src/main.rs; the build finished with 2 warnings \
                              and the test suite passed in 41.2 seconds. "
            }
            Script::Latin => {
                "Résumé de l’opération — état : réussi ; données reçues à 12 h 04, \
                              élément n° 3 traité « sans erreur » – Größe der Übergröße geprüft, \
                              Straße, naïve, café, año, señal. "
            }
            Script::Cjk => {
                "工具调用结果：文件已读取，共计三百行，测试全部通过。日本語のテキストも\
                            含まれています。한국어 문장도 있습니다。"
            }
            Script::Emoji => "✅ done 🚀 deploy 🎉 merged 👍🏽 ok 🇫🇷 fr 🔥 hot 📦 pkg 😀 ",
        }
    }
}

/// At most `bytes` bytes of text in `script`, cut on a character boundary: for one length
/// always the same text, so results of one length end alike and teach the daemon no limit.
#[allow(dead_code)]
pub(crate) fn text(script: Script, bytes: usize) -> String {
    let p = script.passage();
    let mut s = p.repeat(bytes / p.len() + 1);
    let mut end = bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

/// A protobuf OTLP request of `spans` spans for `service`: 60 % toolsize-contract tool spans
/// (measured sizes), 20 % OTel GenAI tool spans carrying ~2 KiB of result content, 20 % LLM spans,
/// over 40 tools, with the storm mix. `seed` varies the ids and sizes between requests.
#[allow(dead_code)]
pub(crate) fn request(service: &str, seed: u64, spans: u64) -> Vec<u8> {
    request_mix(service, seed, spans, Mix::Storm)
}

/// [`request`] with the sizes of `mix`.
#[allow(dead_code)]
pub(crate) fn request_mix(service: &str, seed: u64, spans: u64, mix: Mix) -> Vec<u8> {
    request_tools(service, seed, spans, mix, 40)
}

/// [`request_mix`] over `tools` tools.
#[allow(dead_code)]
pub(crate) fn request_tools(service: &str, seed: u64, spans: u64, mix: Mix, tools: u64) -> Vec<u8> {
    let (size_mod, hashes) = match mix {
        Mix::Quiet => (mix.size_mod(), 97),
        _ => (mix.size_mod(), 4_099),
    };
    let ascii: String = (0..2048).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    // 1.5–2 KB of accented text, 32 lengths (each always the same text).
    let latin: Vec<String> = (0..32)
        .map(|k| text(Script::Latin, 1_536 + k * 16))
        .collect();
    let large = [text(Script::Latin, 60_000), text(Script::Cjk, 60_000)];
    let per_request = spans;
    let spans = (0..spans)
        .map(|i| {
            let n = seed * 100_000 + i;
            let tool = format!("tool_{}", (seed * per_request + i) % tools.max(1));
            let mut attrs = vec![
                kv(
                    "gen_ai.operation.name",
                    Value::StringValue("execute_tool".into()),
                ),
                kv("gen_ai.tool.name", Value::StringValue(tool.clone())),
                kv(
                    "gen_ai.tool.call.id",
                    Value::StringValue(format!("call_{n:08}")),
                ),
            ];
            let name = match n % 10 {
                _ if mix == Mix::Large && n % 64 == 63 => {
                    attrs = vec![
                        kv("openinference.span.kind", Value::StringValue("TOOL".into())),
                        kv("tool.name", Value::StringValue(tool.clone())),
                        kv(
                            "input.value",
                            Value::StringValue("{\"path\": \"README.md\"}".into()),
                        ),
                        kv(
                            "output.value",
                            Value::StringValue(large[(n / 64 % 2) as usize].clone()),
                        ),
                    ];
                    tool.clone()
                }
                0..=5 => {
                    attrs.extend([
                        kv("tool.name", Value::StringValue(tool.clone())),
                        kv(
                            "tool.args_hash",
                            Value::StringValue(format!("{:012x}", n % hashes)),
                        ),
                        kv(
                            "tool.result.bytes",
                            Value::IntValue(((n * 7919) % size_mod) as i64),
                        ),
                        kv("tool.result.truncated", Value::BoolValue(false)),
                        kv("tool.latency_ms", Value::DoubleValue(12.5)),
                        kv(
                            "tool.result.chars",
                            Value::IntValue(((n * 7919) % size_mod) as i64),
                        ),
                    ]);
                    format!("execute_tool {tool}")
                }
                6 | 7 => {
                    let content = match mix {
                        Mix::Storm | Mix::Quiet => ascii.clone(),
                        _ => latin[((n * 7919) % 32) as usize].clone(),
                    };
                    attrs.push(kv("gen_ai.tool.call.result", Value::StringValue(content)));
                    format!("execute_tool {tool}")
                }
                _ => {
                    attrs = vec![
                        kv("gen_ai.operation.name", Value::StringValue("chat".into())),
                        kv("gen_ai.request.model", Value::StringValue("gpt-4o".into())),
                        kv("gen_ai.usage.input_tokens", Value::IntValue(1234)),
                    ];
                    "chat gpt-4o".into()
                }
            };
            Span {
                trace_id: [(n as u8).wrapping_add(1); 16].to_vec(),
                span_id: (n + 1).to_be_bytes().to_vec(),
                name,
                kind: 1,
                start_time_unix_nano: 1_700_000_000_000_000_000,
                end_time_unix_nano: 1_700_000_000_012_500_000,
                attributes: attrs,
                ..Default::default()
            }
        })
        .collect();
    envelope(service, spans).encode_to_vec()
}

/// An OTLP request holding `spans` under the resource `service.name = service` and the scope
/// `toolsize`.
pub(crate) fn envelope(service: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Value::StringValue(service.into()))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "toolsize".into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// A protobuf OTLP logs request of `records` Claude Code `tool_result` log records for `service`
/// (string-typed values, as Claude Code sends them), sized as [`request_mix`]'s measured spans,
/// over 40 tools; with [`Mix::Large`], one record in 32 carries 30,000 characters of output
/// (accented Latin) in `tool.output`.
#[allow(dead_code)]
pub(crate) fn logs_request(service: &str, seed: u64, records: u64, mix: Mix) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    let size_mod = mix.size_mod();
    let s = |v: String| Value::StringValue(v);
    let output = {
        let long = text(Script::Latin, 60_000);
        let end = long
            .char_indices()
            .nth(30_000)
            .map_or(long.len(), |(i, _)| i);
        long[..end].to_string()
    };
    let log_records = (0..records)
        .map(|i| {
            let n = seed * 100_000 + i;
            let large = mix == Mix::Large && n % 32 == 31;
            let size = if large {
                output.len() as u64
            } else {
                (n * 7919) % size_mod
            };
            let mut record = LogRecord {
                time_unix_nano: 1_700_000_000_000_000_000,
                body: Some(AnyValue {
                    value: Some(s("claude_code.tool_result".into())),
                }),
                attributes: vec![
                    kv("event.name", s("tool_result".into())),
                    kv("event.timestamp", s("2026-11-24T12:00:00.000Z".into())),
                    kv("event.sequence", Value::IntValue(n as i64)),
                    kv(
                        "session.id",
                        s("5f0c8a3e-4b1d-4c55-9a51-1f2b3c4d5e6f".into()),
                    ),
                    kv(
                        "prompt.id",
                        s("8d1e2f3a-0b4c-4d5e-8f6a-7b8c9d0e1f2a".into()),
                    ),
                    kv("tool_name", s(format!("tool_{}", n % 40))),
                    kv("tool_use_id", s(format!("toolu_{n:020}"))),
                    kv("success", s("true".into())),
                    kv("duration_ms", s("12".into())),
                    kv("tool_input_size_bytes", s("59".into())),
                    kv("tool_result_size_bytes", s(size.to_string())),
                    kv("request_id", s(format!("req_{n:020}"))),
                ],
                ..Default::default()
            };
            if large {
                record.attributes.push(kv("tool.output", s(output.clone())));
            }
            record
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![kv("service.name", s(service.into()))],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: "com.anthropic.claude_code.events".into(),
                    ..Default::default()
                }),
                log_records,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}
