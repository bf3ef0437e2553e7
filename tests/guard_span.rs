//! A cut made by the guard inside a tool call marks that call's span by itself.
#![cfg(feature = "export")]

mod support;

use serde_json::json;
use support::{boolean, int, Capture};
use toolsize::guard::{CeilingGuard, Policy};
use toolsize::semconv::{TOOL_RESULT_BYTES, TOOL_RESULT_ORIGINAL_BYTES, TOOL_RESULT_TRUNCATED};
use toolsize::tool_call;

fn guard(policy: Policy, limit: u64) -> CeilingGuard {
    CeilingGuard::builder()
        .max_output(limit)
        .policy(policy)
        .build()
        .unwrap()
}

#[test]
fn truncating_text_inside_a_call_records_truncated_and_original_bytes() {
    let cap = Capture::new();
    let g = guard(Policy::Truncate, 512);
    let out = cap
        .run(|| {
            tool_call("bash").run_text(|| {
                g.text("bash", "result", &"q".repeat(10_000))
                    .map(|guarded| guarded.output)
            })
        })
        .unwrap();
    assert!(out.len() <= 512);
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), Some(10_000));
    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(out.len() as i64));
}

#[test]
fn truncating_json_inside_a_call_records_the_cut() {
    let cap = Capture::new();
    let g = guard(Policy::Truncate, 300);
    let value = json!({"rows": (0..500).collect::<Vec<_>>()});
    let original = value.to_string().len() as i64;
    cap.run(|| tool_call("rows").run(|| g.json("rows", "data", &value).map(|g| g.output)))
        .unwrap();
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), Some(original));
}

#[test]
fn a_result_that_fits_is_not_marked() {
    let cap = Capture::new();
    let g = guard(Policy::Truncate, 300);
    cap.run(|| tool_call("small").run_text(|| g.text("small", "result", "ok").map(|g| g.output)))
        .unwrap();
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(false));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), None);
}

#[test]
fn spilling_inside_a_call_records_the_cut() {
    let cap = Capture::new();
    let dir = std::env::temp_dir().join(format!("toolsize-span-spill-{}", std::process::id()));
    let g = CeilingGuard::builder()
        .max_output(400)
        .policy(Policy::Spill)
        .store(std::sync::Arc::new(toolsize::guard::FsSpillStore::new(
            &dir,
        )))
        .build()
        .unwrap();
    cap.run(|| {
        tool_call("grep").run_text(|| {
            g.text("grep", "result", &"m\n".repeat(5000))
                .map(|g| g.output)
        })
    })
    .unwrap();
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), Some(10_000));
    let _ = std::fs::remove_dir_all(dir);
}
