//! The configuration as a user meets it: `gen-config` output parses back, unknown keys fail with
//! a "did you mean", and the error is the structured JSON of the CLI (exit 2).
#![cfg(feature = "collector")]

mod support;

use std::process::Command;

use support::cli::structured_error;

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
    let dir = support::collector::temp_dir("cfg-cli");
    let file = dir.join("bad.toml");
    std::fs::write(&file, "[aggregation]\nmax_serie = 10\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    let err = structured_error(&out);
    assert_eq!(err["code"], "CONFIG");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("did you mean `aggregation.max_series`"),
        "{msg}"
    );
    std::fs::remove_dir_all(dir).ok();
}
