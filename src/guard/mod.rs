//! The loud truncation toolkit: a complete response envelope, a ceiling guard, marked head+tail
//! and JSON-aware truncation, field limits checked before a write, and sent-vs-returned comparison.
//!
//! Nothing here cuts silently. Every cut is marked in the value itself (a marker string) *and*
//! described in `warnings[]` as `FIELD_TRUNCATED` with its path and lengths, and the envelope's
//! `meta.truncated` follows from the warnings. Every override of a requested value is a
//! `VALUE_CLAMPED` warning. Every refused input lists all its violations. Inside a tool call
//! ([`crate::tool_call`]), a cut made by the guard is also recorded on the call's span.
//!
//! All of it is synchronous, allocation-light and panic-free on any input; under load the cost is
//! one length check per result that fits. The only I/O is the spill store, whose failure is an
//! error, never a silent fallback.
//!
//! | module | what |
//! |---|---|
//! | [`envelope`] | `{ok, data, error, warnings[], meta{duration_ms, truncated}}` |
//! | [`ceiling`] | the guard: reject / truncate / spill over the limit; limit resolution; spill store |
//! | [`truncate`] | text cut to a byte budget, head + marker + tail |
//! | [`json_truncate`] | JSON cut to a byte budget, still valid JSON, one warning per cut |
//! | [`schema`] | field limits and loud argument validation (the `toolsize check` schema format) |
//! | [`forms`] | the schemas users have: JSON Schema, MCP / OpenAI / Anthropic tools, parameter lists |
//! | [`compare`](mod@compare) | what was sent vs what a backend returned |
//! | [`paginate`] | pages with an opaque cursor, fetched with the page-size-plus-one trick |
//!
//! ```
//! use toolsize::guard::{CeilingGuard, Policy};
//! use serde_json::json;
//!
//! let guard = CeilingGuard::builder().max_output(1024).policy(Policy::Truncate).build()?;
//! // Inside the tool call, so its span records the cut and the original size by itself.
//! let guarded = toolsize::tool_call("list_rows").run(|| {
//!     let rows: Vec<_> = (0..100).map(|i| json!({"id": i, "name": "row"})).collect();
//!     // The whole envelope, warnings included, is at most the limit.
//!     guard.json_envelope("list_rows", &json!({ "rows": rows }))
//! })?;
//! let envelope = guarded.output;
//! assert!(envelope.is_truncated()); // meta.truncated, plus a FIELD_TRUNCATED for data.rows
//! assert!(envelope.to_json().len() <= 1024);
//! println!("{}", envelope.to_json());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod ceiling;
pub mod compare;
pub mod envelope;
pub mod forms;
pub mod json_truncate;
pub mod paginate;
pub mod schema;
pub mod truncate;

pub use ceiling::{
    resolve_limit, CeilingGuard, CeilingGuardBuilder, FsSpillStore, GuardError, Guarded, Limit,
    Outcome, Policy, SpillStore, DEFAULT_MAX_TOOL_OUTPUT, DEFAULT_POLICY, ENV_MAX_TOOL_OUTPUT,
};
pub use compare::compare;
pub use envelope::{Envelope, EnvelopeError, Phase, Unit, Violation, Warning};
pub use json_truncate::{JsonCut, JsonTruncator};
pub use paginate::{Cursor, Page, PageRequest, Position};
pub use schema::{FieldSpec, FieldType, Schema};
pub use truncate::{TextCut, TextTruncator, DEFAULT_HEAD_RATIO};

/// The examples of `docs/guard.md`, compiled and run as doc tests so the guide cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guard.md")]
struct GuideExamples;

/// The exit code a proxy passes through for the program it runs (`toolsize wrap`'s tool,
/// `toolsize mcp`'s server): the program's own, or 128 + the signal that ended it.
pub fn child_exit_code(status: std::process::ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code & 0xff).unwrap_or(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return u8::try_from(128 + (sig & 0x7f)).unwrap_or(1);
        }
    }
    1
}
