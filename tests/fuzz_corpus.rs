//! Replays the fuzz corpora (`fuzz/corpus/<target>/`, seeds plus anything the fuzzer kept or
//! found) through the same target bodies as the libFuzzer binaries (`fuzz/targets.rs`), on
//! stable, so every input that once crashed a decoder stays a regression test.
#![cfg(feature = "collector")]

#[path = "../fuzz/targets.rs"]
mod targets;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let r = std::panic::catch_unwind(|| run(&data));
        assert!(r.is_ok(), "{target}: {} fails", path.display());
        n += 1;
    }
    assert!(n >= 5, "{target}: only {n} inputs in {}", dir.display());
    eprintln!("{target}: {n} inputs replayed");
}

#[test]
fn otlp_protobuf_corpus() {
    replay("otlp_protobuf", targets::otlp_protobuf);
}

#[test]
fn otlp_json_corpus() {
    replay("otlp_json", targets::otlp_json);
}

#[test]
fn config_corpus() {
    replay("config", targets::config);
}

#[test]
fn args_hash_corpus() {
    replay("args_hash", targets::args_hash);
}

/// The seeds reach what they are meant to: tool spans recognised (JSON enum names included),
/// configurations accepted, JSON texts hashed.
#[test]
fn seeds_exercise_the_decoders() {
    use toolsize::collector::ingest::decode::{decode_json, recognize_protobuf};
    let r = toolsize::collector::ingest::recognize::Recognizer::new(&Default::default(), 128);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let own = std::fs::read(dir.join("otlp_protobuf/own")).unwrap();
    assert_eq!(recognize_protobuf(&r, &own).unwrap().records.len(), 1);
    let json = std::fs::read(dir.join("otlp_json/failed")).unwrap();
    let req = decode_json(&json).unwrap();
    let rec = toolsize::collector::ingest::decode::recognize_request(&r, &req);
    assert!(rec.records[0].error);
    let generated = std::fs::read_to_string(dir.join("config/generated")).unwrap();
    toolsize::collector::Config::from_toml(&generated).unwrap();
}
