//! `toolsize_read_spill`: the tool `toolsize mcp --policy spill` adds to the server's tools, so the
//! model can read a spilled result in slices.
//!
//! A spilled result is stored as the text the model would read (its text items, one after another)
//! in the guard's spill store ([`crate::guard::FsSpillStore`]: one `0600` file per payload, named
//! by its SHA-1). The tool takes the `full_payload_id` from the `RESULT_SPILLED` notice, an
//! `offset` in bytes (default 0) and a `length` in bytes (default and most: what fits the limit);
//! it answers with the slice (cut at UTF-8 boundaries) and a notice giving `offset`, the `length`
//! returned, `total_bytes` and the `next_offset` to ask for (`null` at the end). A slice is never
//! silently shorter than asked: the notice says when, and why. Its answer, like any other result,
//! is at most the limit. A bad id, an unknown one or an offset past the end is a tool error
//! (`isError`) saying what to send instead.
//!
//! The tool is answered by the proxy; the server never sees it. Reading a payload reads its
//! file, so slices cost one file read each.

use serde_json::{json, Value};

use crate::guard::ceiling::{SpillError, SpillStore};
use crate::guard::envelope::{Envelope, EnvelopeError, Phase};
use crate::guard::truncate::floor_char_boundary;

use super::result::{error_result, json_len};

/// The tool's name.
pub const SPILL_TOOL: &str = "toolsize_read_spill";

/// Bytes of a slice answer's fixed part (the notice and the JSON around the slice), kept free of
/// the slice when sizing it.
const ANSWER_OVERHEAD: u64 = 512;

/// The most a slice can hold under `limit`.
pub(crate) fn max_slice(limit: u64) -> u64 {
    limit.saturating_sub(ANSWER_OVERHEAD).max(1)
}

/// The tool's definition, as listed in `tools/list`.
pub(crate) fn definition(limit: u64) -> Value {
    json!({
        "name": SPILL_TOOL,
        "description": format!(
            "Read a slice of a tool result that toolsize stored because it was over the {limit}-byte limit. \
             Pass the full_payload_id from the RESULT_SPILLED notice, and an offset in bytes; each answer \
             says the next_offset to ask for (null at the end)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "full_payload_id from the RESULT_SPILLED notice"},
                "offset": {"type": "integer", "minimum": 0, "description": "first byte to read (default 0)"},
                "length": {"type": "integer", "minimum": 1, "maximum": max_slice(limit),
                           "description": "bytes to read (default and most: as many as fit)"}
            },
            "required": ["id"],
            "additionalProperties": false
        }
    })
}

fn failure(code: &str, message: String, hint: &str) -> Value {
    let err = EnvelopeError::new(code, message, Phase::Validation).with_hint(hint);
    error_result(Envelope::err(err).to_json())
}

/// Answers one call of the tool with arguments `args` (already checked against the tool's
/// schema); the answer is at most `limit` bytes.
pub(crate) fn read(store: &dyn SpillStore, args: &Value, limit: u64) -> Value {
    let id = args.get("id").and_then(Value::as_str).unwrap_or_default();
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let most = max_slice(limit);
    let requested = args.get("length").and_then(Value::as_u64);
    let payload = match store.get(id) {
        Ok(p) => p,
        Err(SpillError::InvalidId(_)) => {
            return failure(
                "INVALID_ID",
                "id is not a full_payload_id (40 hex digits)".to_owned(),
                "Copy full_payload_id from the RESULT_SPILLED notice.",
            )
        }
        Err(SpillError::NotFound(_)) => {
            return failure(
                "SPILL_NOT_FOUND",
                "no spilled result is stored under this id".to_owned(),
                "Call the original tool again; the stored result may have been removed.",
            )
        }
        Err(e) => {
            return failure(
                "SPILL_UNREADABLE",
                e.to_string(),
                "Call the original tool again.",
            )
        }
    };
    let text = String::from_utf8_lossy(&payload);
    let total = text.len() as u64;
    if offset > total || (offset == total && total > 0) {
        return failure(
            "OFFSET_OUT_OF_RANGE",
            format!("offset {offset} is past the end of the {total}-byte result"),
            "Start again from offset 0, or use the next_offset of the last answer.",
        );
    }
    let start = floor_char_boundary(&text, usize::try_from(offset).unwrap_or(usize::MAX));
    let mut want = requested.unwrap_or(most).min(most);
    for _ in 0..16 {
        let end = floor_char_boundary(
            &text,
            start.saturating_add(usize::try_from(want).unwrap_or(usize::MAX)),
        );
        let end = if end <= start && start < text.len() {
            // Never an empty slice in the middle: one whole char at least.
            start + text[start..].chars().next().map_or(0, char::len_utf8)
        } else {
            end
        };
        let slice = &text[start..end];
        let returned = slice.len() as u64;
        let next = (end < text.len()).then_some(end as u64);
        let mut notice = json!({
            "full_payload_id": id,
            "offset": start,
            "length": returned,
            "total_bytes": total,
            "next_offset": next,
        });
        if let Some(r) = requested.filter(|r| *r > returned && next.is_some()) {
            notice["requested_length"] = json!(r);
            notice["message"] = json!(format!(
                "{returned} of the {r} bytes asked for are returned: more would be over the {limit}-byte limit."
            ));
        }
        let answer = json!({"content": [
            {"type": "text", "text": slice},
            {"type": "text", "text": json!({"toolsize": notice}).to_string()}
        ]});
        let len = json_len(&answer);
        if len <= limit || returned <= 1 {
            return answer;
        }
        // Escaping made the slice grow: shrink in proportion.
        let aimed = u128::from(returned) * u128::from(limit.saturating_sub(ANSWER_OVERHEAD))
            / u128::from(len.max(1));
        want = u64::try_from(aimed).unwrap_or(1).clamp(1, returned - 1);
    }
    failure(
        "SLICE_TOO_LARGE",
        "no slice of this result fits the limit".to_owned(),
        "Ask for a smaller length.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::FsSpillStore;

    #[test]
    fn slices_cover_the_payload_and_fit() {
        let dir = std::env::temp_dir().join(format!("toolsize-mcp-spill-{}", std::process::id()));
        let store = FsSpillStore::new(&dir);
        let text = "漢字 and \"quotes\"\n".repeat(2000);
        let id = store.put("t", text.as_bytes()).unwrap();
        let mut offset = 0u64;
        let mut back = String::new();
        let mut rounds = 0;
        loop {
            let a = read(&store, &json!({"id": id, "offset": offset}), 2048);
            assert!(json_len(&a) <= 2048, "{}", json_len(&a));
            back.push_str(a["content"][0]["text"].as_str().unwrap());
            let n: Value = serde_json::from_str(a["content"][1]["text"].as_str().unwrap()).unwrap();
            match n["toolsize"]["next_offset"].as_u64() {
                Some(next) => offset = next,
                None => break,
            }
            rounds += 1;
            assert!(rounds < 1000);
        }
        assert_eq!(back, text);
        let short = read(&store, &json!({"id": id, "length": 100_000}), 2048);
        let n: Value = serde_json::from_str(short["content"][1]["text"].as_str().unwrap()).unwrap();
        assert_eq!(n["toolsize"]["requested_length"], json!(100_000));
        for (args, code) in [
            (json!({"id": "nope"}), "INVALID_ID"),
            (json!({"id": "0".repeat(40)}), "SPILL_NOT_FOUND"),
            (
                json!({"id": id, "offset": 10_000_000}),
                "OFFSET_OUT_OF_RANGE",
            ),
        ] {
            let a = read(&store, &args, 2048);
            assert_eq!(a["isError"], json!(true));
            let env: Value =
                serde_json::from_str(a["content"][0]["text"].as_str().unwrap()).unwrap();
            assert_eq!(env["error"]["code"], json!(code));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
