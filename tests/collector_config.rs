//! The configuration as a user meets it: `gen-config` output parses back, unknown keys fail with
//! a "did you mean", and the error is the structured JSON of the CLI (exit 2).
#![cfg(feature = "collector")]

use std::process::Command;

use toolsize::collector::Config;

#[test]
fn gen_config_parses_back_to_the_defaults() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("gen-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(Config::from_toml(&text).unwrap(), Config::default());
}

#[test]
fn unknown_key_is_a_structured_error_with_a_suggestion() {
    let dir = std::env::temp_dir().join(format!("toolsize-cfg-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "[aggregation]\nmax_serie = 10\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "CONFIG");
    let msg = err["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("did you mean `aggregation.max_series`"),
        "{msg}"
    );
    std::fs::remove_dir_all(dir).ok();
}
