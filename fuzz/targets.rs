#![allow(dead_code)] // each fuzz binary uses one target
//! The bodies of the fuzz targets, shared by the libFuzzer binaries (`fuzz_targets/`) and the
//! corpus replay on stable (`tests/fuzz_corpus.rs`). Each panics on a broken invariant, which is
//! what the fuzzer reports.

use std::sync::OnceLock;

use toolsize::collector::ingest::decode::{decode_json, recognize_protobuf, recognize_request};
use toolsize::collector::ingest::recognize::Recognizer;

fn recognizer() -> &'static Recognizer {
    static R: OnceLock<Recognizer> = OnceLock::new();
    R.get_or_init(|| Recognizer::new(&Default::default(), 128))
}

fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Every name kept is bounded and clean.
fn check_records(records: &[toolsize::collector::ingest::record::ToolRecord]) {
    for r in records {
        assert!(
            r.tool.len() <= 128 + "_tool".len(),
            "tool name of {} bytes",
            r.tool.len()
        );
        assert!(
            r.service.len() <= 128,
            "service name of {} bytes",
            r.service.len()
        );
        assert!(
            !r.tool.chars().any(hidden),
            "hidden character in {:?}",
            r.tool
        );
        assert!(
            !r.service.chars().any(hidden),
            "hidden character in {:?}",
            r.service
        );
        assert!(!r.tool.is_empty() && !r.service.is_empty());
    }
}

/// OTLP protobuf request: decoded in place and recognised; never panics, names bounded.
pub(crate) fn otlp_protobuf(data: &[u8]) {
    if let Ok(rec) = recognize_protobuf(recognizer(), data) {
        check_records(&rec.records);
        assert_eq!(
            rec.spans(),
            rec.records.len() as u64 + rec.not_tool + rec.invalid
        );
    }
}

/// OTLP/JSON request: decoded (enum names included) and recognised.
pub(crate) fn otlp_json(data: &[u8]) {
    if let Ok(req) = decode_json(data) {
        check_records(&recognize_request(recognizer(), &req).records);
    }
}

/// The configuration parser: errors, never panics; what it accepts is valid.
pub(crate) fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(c) = toolsize::collector::Config::from_toml(text) {
            c.validate().expect("accepted config validates");
        }
    }
}

/// The args-hash JSON parser: canonical JSON is a fixed point, and the hash of a text is the
/// hash of its canonical form.
pub(crate) fn args_hash(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(canon) = toolsize::args_hash::canonical_json_from_text(text) {
        let again =
            toolsize::args_hash::canonical_json_from_text(&canon).expect("canonical JSON parses");
        assert_eq!(again, canon, "canonical JSON is not a fixed point");
        assert_eq!(
            toolsize::args_hash::args_hash_json(text).unwrap(),
            toolsize::args_hash::args_hash_of_canonical(canon.as_bytes())
        );
    }
}
