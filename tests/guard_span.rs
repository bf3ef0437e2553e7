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
            tool_call("bash")
                .run_text(|| g.text("bash", "result", &"q".repeat(10_000)))
                .map(|guarded| guarded.output)
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
    let guarded = cap
        .run(|| tool_call("rows").run(|| g.json("rows", "data", &value)))
        .unwrap();
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), Some(original));
    // The span measured what was handed over, not the wrapper.
    let handed = serde_json::to_string(&guarded.output).unwrap().len() as i64;
    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(handed));
    assert!(!guarded.warnings.is_empty());
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

/// A writer collecting formatted log lines.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_effective_limit_is_logged_once_with_its_source() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            CeilingGuard::builder()
                .env_value(Some("77777".into()))
                .build()
                .unwrap();
        }
        CeilingGuard::builder().max_output(77_778).build().unwrap();
    });
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let env_lines: Vec<_> = text
        .lines()
        .filter(|l| l.contains("limit_bytes=77777"))
        .collect();
    assert_eq!(env_lines.len(), 1, "{text}");
    assert!(env_lines[0].contains("source=env"), "{text}");
    assert!(
        env_lines[0].contains("Tool output limit resolved."),
        "{text}"
    );
    assert!(text.contains("limit_bytes=77778 source=explicit"), "{text}");
}
