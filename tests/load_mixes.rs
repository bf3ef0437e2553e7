//! The load generator's mixes carry what the performance figures say they carry: non-ASCII
//! results of 1.5–2 KB in `storm-utf8`, 60 KB OpenInference `output.value` in `large`, 30,000
//! characters of `tool.output` in the large logs; and every tool span among them is recognised
//! (none taken for a non-tool span, none rejected), so a figure per accepted span counts the
//! work the mix describes.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use toolsize::collector::ingest::decode::{recognize_logs_protobuf, recognize_protobuf};
use toolsize::collector::ingest::recognize::Recognizer;
use toolsize::collector::Config;

#[path = "../examples/common/workload.rs"]
mod workload;

use workload::Mix;

const SPANS: u64 = 512;

fn recognizer() -> Recognizer {
    let config = Config::default();
    Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes)
}

/// The string values of attribute `key` among `attrs`.
fn strings<'a>(attrs: impl Iterator<Item = &'a KeyValue>, key: &str) -> Vec<&'a str> {
    attrs
        .filter(|kv| kv.key == key)
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_mix_of_spans_carries_its_content_and_is_recognised() {
    let r = recognizer();
    for mix in Mix::ALL {
        let body = workload::request_mix("agent", 3, SPANS, mix);
        let req = ExportTraceServiceRequest::decode(&body[..]).unwrap();
        let spans: Vec<_> = req.resource_spans[0].scope_spans[0].spans.iter().collect();
        assert_eq!(spans.len() as u64, SPANS);
        let chat = spans.iter().filter(|s| s.name.starts_with("chat")).count() as u64;
        let got = recognize_protobuf(&r, &body).unwrap();
        assert_eq!(got.records.len() as u64, SPANS - chat, "{mix:?}");
        assert_eq!((got.not_tool, got.invalid), (chat, 0), "{mix:?}");

        let attrs = || spans.iter().flat_map(|s| s.attributes.iter());
        let results = strings(attrs(), "gen_ai.tool.call.result");
        assert!(
            results.len() as u64 >= SPANS / 6,
            "{mix:?}: {}",
            results.len()
        );
        let outputs = strings(attrs(), "output.value");
        match mix {
            Mix::Storm | Mix::Quiet => {
                assert!(results.iter().all(|c| c.is_ascii() && c.len() == 2048));
                assert!(outputs.is_empty());
            }
            Mix::StormUtf8 | Mix::Large => {
                for c in &results {
                    assert!(
                        !c.is_ascii() && (1_500..=2_048).contains(&c.len()),
                        "{}",
                        c.len()
                    );
                    // Accented letters, not a sprinkle: over 5 % of the characters.
                    let wide = c.chars().filter(|ch| !ch.is_ascii()).count();
                    assert!(wide * 20 > c.chars().count());
                }
                let mut lengths: Vec<usize> = results.iter().map(|c| c.len()).collect();
                lengths.sort();
                lengths.dedup();
                assert!(lengths.len() >= 8, "lengths vary: {lengths:?}");
            }
        }
        if mix == Mix::Large {
            assert_eq!(outputs.len() as u64, SPANS / 64);
            assert!(outputs
                .iter()
                .all(|o| o.len() > 59_990 && o.len() <= 60_000));
            assert!(
                outputs.iter().any(|o| o.contains('日')) && outputs.iter().any(|o| o.contains('é'))
            );
        } else {
            assert!(outputs.is_empty());
        }
    }
}

#[test]
fn the_large_logs_carry_30000_characters_of_output_and_are_all_recognised() {
    let r = recognizer();
    let mut per_mix = Vec::new();
    for mix in [Mix::Storm, Mix::Large] {
        let body = workload::logs_request("claude-code", 3, SPANS, mix);
        let req = ExportLogsServiceRequest::decode(&body[..]).unwrap();
        let records = &req.resource_logs[0].scope_logs[0].log_records;
        let outputs = strings(
            records.iter().flat_map(|l| l.attributes.iter()),
            "tool.output",
        );
        match mix {
            Mix::Large => {
                assert_eq!(outputs.len() as u64, SPANS / 32);
                assert!(outputs
                    .iter()
                    .all(|o| o.chars().count() == 30_000 && !o.is_ascii()));
            }
            _ => assert!(outputs.is_empty()),
        }
        let got = recognize_logs_protobuf(&r, &body).unwrap();
        assert_eq!(got.invalid, 0);
        per_mix.push(got.records.len());
    }
    assert!(per_mix[0] > 0);
    assert_eq!(
        per_mix[0], per_mix[1],
        "the output attribute changes no record"
    );
}
