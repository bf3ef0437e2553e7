//! `toolsize layers`: the catalog as a table and as JSON, its filters, and structured errors on
//! unknown filter values.
#![cfg(feature = "cli")]

#[path = "support/cli.rs"]
mod cli;

use std::process::Output;

fn toolsize(args: &[&str]) -> Output {
    let mut all = vec!["layers"];
    all.extend_from_slice(args);
    cli::run(&all, None)
}

fn json(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = toolsize(&all);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn error(args: &[&str]) -> serde_json::Value {
    cli::structured_error(&toolsize(args))
}

#[test]
fn table_lists_the_whole_catalog() {
    let out = toolsize(&[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ID"));
    for h in ["PRODUCT", "LIMIT", "UNIT", "SCOPE", "ACTION"] {
        assert!(lines[0].contains(h), "{}", lines[0]);
    }
    assert_eq!(lines.len() - 1, toolsize::layers::catalog().len());
    let cline = lines
        .iter()
        .find(|l| l.starts_with("cline.message-builder "))
        .unwrap();
    let cells: Vec<&str> = cline.split_whitespace().collect();
    assert_eq!(
        cells[cells.len() - 4..],
        ["8000", "utf16_units", "per_string", "truncate_marked"]
    );
}

#[test]
fn json_carries_every_fact() {
    let all = json(&[]);
    assert_eq!(all.len(), toolsize::layers::catalog().len());
    let tempo = all.iter().find(|l| l["id"] == "tempo.attr-bytes").unwrap();
    assert_eq!(tempo["limit"], 2048);
    assert_eq!(tempo["unit"], "bytes");
    assert_eq!(tempo["scope"], "per_attribute");
    assert_eq!(tempo["action"], "truncate_silent");
    assert!(tempo["source"].is_string());
}

#[test]
fn filters_combine() {
    let tokens = json(&["--unit", "tokens"]);
    assert!(!tokens.is_empty());
    assert!(tokens.iter().all(|l| l["unit"] == "tokens"));

    let claude = json(&["--product", "CLAUDE code"]);
    assert!(!claude.is_empty());
    assert!(claude.iter().all(|l| l["product"] == "Claude Code"));

    let silent = json(&["--action", "truncate_silent"]);
    assert!(silent.iter().any(|l| l["id"] == "tempo.attr-bytes"));
    assert!(silent.iter().all(|l| l["action"] == "truncate_silent"));

    let both = json(&["--product", "claude", "--unit", "tokens"]);
    assert!(both.len() < claude.len() && both.len() < tokens.len());
    assert!(both
        .iter()
        .all(|l| l["unit"] == "tokens" && l["product"] == "Claude Code"));

    // Valid filters matching nothing together: an empty list, not an error.
    assert!(json(&["--product", "serde_json", "--unit", "bytes"]).is_empty());
}

#[test]
fn unknown_filter_values_are_structured_errors() {
    let e = error(&["--unit", "words"]);
    assert_eq!(e["code"], "UNKNOWN_UNIT");
    assert!(e["message"].as_str().unwrap().contains("utf16_units"));

    let e = error(&["--action", "explode"]);
    assert_eq!(e["code"], "UNKNOWN_ACTION");
    assert!(e["message"].as_str().unwrap().contains("truncate_silent"));

    let e = error(&["--product", "no-such-product"]);
    assert_eq!(e["code"], "UNKNOWN_PRODUCT");

    let e = error(&["--bogus"]);
    assert_eq!(e["code"], "USAGE");
}
