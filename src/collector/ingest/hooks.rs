//! The coding agents' hook payloads as a source of exact sizes: `POST /v1/hooks/{agent}` on the
//! OTLP/HTTP listener ([`super::http`]).
//!
//! Claude Code and Qwen Code post their `PostToolUse` payload there themselves (a hook of
//! `"type": "http"`); Gemini CLI, whose hooks are commands only, through `toolsize hook
//! gemini-cli`, which posts a payload already reduced to sizes ([`Reduced`]). Each payload is read
//! once, in a streaming pass that keeps no content: the tool's name, the call's ids, and the
//! sizes the payload reveals ([`Measured`]). What each agent's payload brings:
//!
//! - **Claude Code** (`PostToolUse`): when it persisted the output and gave the model a 2 KB
//!   preview, `tool_response.persistedOutputSize`, the whole output's bytes. The call (by
//!   `tool_use_id`, the id of its `tool_result` log record) is then counted as cut upstream by
//!   `claude-code.bash` (Bash) or `claude-code.tool-result.persist`, with that size. A payload
//!   without a cut adds nothing and is not joined.
//! - **Qwen Code** (`PostToolUse`): `tool_response.llmContent`, the output before Qwen's own cuts
//!   (its 30,000-character and 1,000-line shell cut, its 25,000 + 3,000-character persist gate
//!   run after the hook), measured in UTF-16 code units like its `content_length`. Joined by
//!   `tool_call_id` (the `call_id` of its `qwen-code.tool_call` log record and `qwen-code.tool`
//!   span): when the original is longer than what the model got, the call is counted as cut
//!   upstream with the original size.
//! - **Gemini CLI** (`AfterTool`): its `llmContent` before Gemini's own cut, but no call id, no
//!   prompt id and no trace that its telemetry shares: the payload is acknowledged and counted as
//!   a record that is not a tool call, never counted as a call of its own (the telemetry counts
//!   it) nor joined.
//!
//! Under load and failure the route is an OTLP route like the others: the same token, the same
//! body deadline and byte budget, the same decoding slots, `otlp.max_request_bytes`, the same
//! refusals (400 with a message on a payload that is not JSON or not an object, 404 on an
//! unknown agent, 415 on a content type other than JSON, 503 + `Retry-After` when the aggregator
//! queue is full) and the same counters (`toolsize_otlp_requests_accepted_total{signal="logs"}`,
//! the log-record counters). An accepted payload is answered 200 with `{}`: Claude Code reads an
//! HTTP hook's answer as JSON and an empty object asks nothing of it. Hook payloads are never
//! forwarded (they are not OTLP). Strings that become labels (the tool name, `?service=`) are
//! sanitised and bounded like every other; ids are only hashed into the join key.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::agents::{self, Attrs, CallId, Signal};
use super::decode::Recognized;
use super::recognize::Recognizer;
use super::record::{Emitter, Role, Upstream};
use super::wire::LogView;

/// The path of the route; `{agent}` is one of [`HookAgent::ALL`]'s names.
pub(crate) const HOOKS_PATH: &str = "/v1/hooks/{agent}";

/// The agents whose hook payloads the daemon reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookAgent {
    /// Claude Code's `PostToolUse`.
    ClaudeCode,
    /// Qwen Code's `PostToolUse`.
    QwenCode,
    /// Gemini CLI's `AfterTool`.
    GeminiCli,
}

impl HookAgent {
    /// Every agent, by its name in the path.
    pub(crate) const ALL: [HookAgent; 3] = [
        HookAgent::ClaudeCode,
        HookAgent::QwenCode,
        HookAgent::GeminiCli,
    ];

    /// Its name in the path, and the `service.name` its telemetry uses by default.
    pub(crate) fn name(self) -> &'static str {
        match self {
            HookAgent::ClaudeCode => "claude-code",
            HookAgent::QwenCode => "qwen-code",
            HookAgent::GeminiCli => "gemini-cli",
        }
    }

    /// The agent named `name`.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    fn emitter(self) -> Emitter {
        match self {
            HookAgent::ClaudeCode => Emitter::ClaudeCode,
            HookAgent::QwenCode => Emitter::QwenCode,
            HookAgent::GeminiCli => Emitter::GeminiCli,
        }
    }
}

/// A payload that could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookError {
    /// Not JSON, or not an object.
    #[error("invalid hook payload: {0}")]
    Json(#[from] serde_json::Error),
    /// Valid JSON, but not an object.
    #[error("invalid hook payload: a JSON object is expected")]
    NotObject,
}

/// What one hook payload says, content left unread.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Payload<'a> {
    /// `PostToolUse`, `AfterTool`, …
    #[serde(borrow, default)]
    pub(crate) hook_event_name: Option<Cow<'a, str>>,
    /// The tool.
    #[serde(borrow, default)]
    pub(crate) tool_name: Option<Cow<'a, str>>,
    /// Claude Code's call id (Qwen Code's own hook id).
    #[serde(borrow, default)]
    pub(crate) tool_use_id: Option<Cow<'a, str>>,
    /// Qwen Code's call id, the `call_id` of its telemetry.
    #[serde(borrow, default)]
    pub(crate) tool_call_id: Option<Cow<'a, str>>,
    /// The result, measured.
    #[serde(default)]
    pub(crate) tool_response: Measured,
    /// The sizes `toolsize hook` measured, in a payload it reduced.
    #[serde(default)]
    pub(crate) toolsize: Option<Reduced>,
}

/// The sizes a command hook measured before posting (`toolsize hook`): the payload it posts
/// carries these instead of the result.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
pub(crate) struct Reduced {
    /// Claude Code's `persistedOutputSize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) persisted_bytes: Option<u64>,
    /// UTF-16 code units of the `llmContent` the tool returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) llm_content_utf16: Option<u64>,
    /// The tool reported an error.
    #[serde(default)]
    pub(crate) failed: bool,
}

/// What a `tool_response` reveals, read in one pass without keeping any of it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Measured(pub(crate) Reduced);

impl<'de> Deserialize<'de> for Measured {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ResponseVisitor)
    }
}

struct ResponseVisitor;

impl<'de> Visitor<'de> for ResponseVisitor {
    type Value = Measured;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool response")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Measured, A::Error> {
        let mut m = Reduced::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "persistedOutputSize" => m.persisted_bytes = map.next_value::<Option<u64>>()?,
                "llmContent" => m.llm_content_utf16 = Some(map.next_value::<TextLen>()?.0),
                "error" => m.failed |= !map.next_value::<IsNull>()?.0,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Measured(m))
    }

    // Any other shape (a string, an array, null) reveals nothing.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Measured, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Measured::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Measured, E> {
        Ok(Measured::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Measured, E> {
        Ok(Measured::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Measured, E> {
        Ok(Measured::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Measured, E> {
        Ok(Measured::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Measured, E> {
        Ok(Measured::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Measured, E> {
        Ok(Measured::default())
    }
}

/// Whether a value is `null` (an absent `error`), read without keeping it.
struct IsNull(bool);

impl<'de> Deserialize<'de> for IsNull {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Option::<IgnoredAny>::deserialize(d)?;
        Ok(IsNull(v.is_none()))
    }
}

/// The UTF-16 length of an `llmContent`: a string, a part (`{"text": …}`), or a list of them
/// (strings or parts; text parts are joined with a newline, as the agents join them for the
/// model). Other parts (inline data) count nothing.
struct TextLen(u64);

/// UTF-16 code units of `s`, counted over its bytes: one per character (every byte but a
/// continuation byte), one more per four-byte character (a surrogate pair).
fn utf16_len(s: &str) -> u64 {
    s.as_bytes()
        .iter()
        .map(|&b| u64::from(b & 0xC0 != 0x80) + u64::from(b >= 0xF0))
        .sum()
}

impl<'de> Deserialize<'de> for TextLen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor { depth: 0 })
    }
}

/// Reads a text, a part or a list of parts; `depth` stops a list of lists at one level.
struct TextVisitor {
    depth: u8,
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = TextLen;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a text, a part or a list of parts")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<TextLen, E> {
        Ok(TextLen(utf16_len(s)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TextLen, A::Error> {
        let mut n = 0;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == "text" {
                n += map.next_value::<TextLen>()?.0;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(TextLen(n))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TextLen, A::Error> {
        let (mut n, mut texts) = (0u64, 0u64);
        if self.depth > 0 {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(TextLen(0));
        }
        while let Some(part) = seq.next_element_seed(PartSeed)? {
            if let Some(len) = part {
                n += len;
                texts += 1;
            }
        }
        Ok(TextLen(n + texts.saturating_sub(1)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<TextLen, E> {
        Ok(TextLen(0))
    }
}

/// One element of a list of parts: its text's length, or `None` for a part without text.
struct PartSeed;

impl<'de> de::DeserializeSeed<'de> for PartSeed {
    type Value = Option<u64>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
        struct PartVisitor;
        impl<'de> Visitor<'de> for PartVisitor {
            type Value = Option<u64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a part")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Option<u64>, E> {
                Ok(Some(utf16_len(s)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<u64>, A::Error> {
                let mut n = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "text" {
                        n = Some(map.next_value::<TextLen>()?.0);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(n)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<u64>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Option<u64>, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<u64>, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<u64>, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<u64>, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<u64>, E> {
                Ok(None)
            }
        }
        d.deserialize_any(PartVisitor)
    }
}

impl Payload<'_> {
    /// The sizes it reveals: measured from its `tool_response`, or as a command hook reduced
    /// them.
    pub(crate) fn sizes(&self) -> Reduced {
        self.toolsize.unwrap_or(self.tool_response.0)
    }
}

/// Reads one payload.
pub(crate) fn parse(body: &[u8]) -> Result<Payload<'_>, HookError> {
    // A struct also reads from a JSON array: only an object is a payload.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(HookError::NotObject);
    }
    Ok(serde_json::from_slice(body)?)
}

/// What a hook says of one call, whichever way it came (a payload, or `toolsize hook`'s log
/// record).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    /// The tool.
    pub(crate) tool: &'a str,
    /// `tool_use_id`.
    pub(crate) tool_use_id: Option<&'a str>,
    /// `tool_call_id`.
    pub(crate) tool_call_id: Option<&'a str>,
    /// The sizes it reveals.
    pub(crate) sizes: Reduced,
}

impl<'a> Payload<'a> {
    /// The call it describes, if it names its tool.
    pub(crate) fn call(&'a self) -> Option<Call<'a>> {
        Some(Call {
            tool: self.tool_name.as_deref().filter(|t| !t.is_empty())?,
            tool_use_id: self.tool_use_id.as_deref(),
            tool_call_id: self.tool_call_id.as_deref(),
            sizes: self.sizes(),
        })
    }
}

/// The signal a hook of `agent` gives its call, if it gives one.
pub(crate) fn signal(agent: HookAgent, c: Call<'_>) -> Option<Signal<'_>> {
    let id = match agent {
        HookAgent::ClaudeCode => c.tool_use_id,
        HookAgent::QwenCode => c.tool_call_id.or(c.tool_use_id),
        // No id its telemetry shares.
        HookAgent::GeminiCli => None,
    }
    .filter(|id| !id.is_empty())?;
    let mut sig = Signal::new(agent.emitter(), Role::Part, CallId::Id(id));
    sig.tool = Some(c.tool);
    sig.failed = c.sizes.failed;
    match agent {
        HookAgent::ClaudeCode => {
            // Only a persisted output is news: its telemetry sizes everything else.
            let original = c.sizes.persisted_bytes?;
            sig.upstream = Upstream {
                layer: Some(agents::claude_code::persist_layer(c.tool)),
                original: Some(original),
                ..Upstream::default()
            };
        }
        HookAgent::QwenCode => {
            let original = c.sizes.llm_content_utf16?;
            sig.upstream = Upstream {
                original: Some(original),
                when_over: Some(agents::gemini::qwen_cut_layer(c.tool)),
                ..Upstream::default()
            };
        }
        HookAgent::GeminiCli => return None,
    }
    Some(sig)
}

/// The instrumentation scope of the log records `toolsize hook` sends over OTLP/gRPC.
pub(crate) const LOG_SCOPE: &str = agents::claude_code::HOOK_SCOPE;

/// Their `event.name`.
pub(crate) const LOG_EVENT: &str = agents::claude_code::HOOK_EVENT;

/// The attributes of those records beside `tool_name`, `tool_use_id` and `tool_call_id`.
pub(crate) mod log_attr {
    /// The agent's name (absent: Claude Code, as records before it was added).
    pub(crate) const AGENT: &str = "toolsize.hook.agent";
    /// [`super::Reduced::persisted_bytes`] (also read under its earlier name,
    /// `tool.result.original_bytes`).
    pub(crate) const PERSISTED_BYTES: &str = "toolsize.hook.persisted_bytes";
    /// [`super::Reduced::llm_content_utf16`].
    pub(crate) const LLM_CONTENT_UTF16: &str = "toolsize.hook.llm_content_utf16";
    /// [`super::Reduced::failed`].
    pub(crate) const FAILED: &str = "toolsize.hook.failed";
}

/// Reads a log record `toolsize hook` sent ([`LOG_EVENT`]).
pub(crate) fn log_signal<'a>(l: &LogView<'a>, out: &mut Vec<Signal<'a>>) {
    let a = Attrs(&l.attrs);
    let agent = match a.str(log_attr::AGENT) {
        None => HookAgent::ClaudeCode,
        Some(name) => match HookAgent::parse(name) {
            Some(agent) => agent,
            None => return,
        },
    };
    let Some(tool) = a.str("tool_name").filter(|t| !t.is_empty()) else {
        return;
    };
    let call = Call {
        tool,
        tool_use_id: a.str("tool_use_id"),
        tool_call_id: a.str("tool_call_id"),
        sizes: Reduced {
            persisted_bytes: a
                .int(log_attr::PERSISTED_BYTES)
                .or_else(|| a.int("tool.result.original_bytes")),
            llm_content_utf16: a.int(log_attr::LLM_CONTENT_UTF16),
            failed: a.bool(log_attr::FAILED) == Some(true),
        },
    };
    out.extend(signal(agent, call));
}

/// Reads one payload of `agent`, for `service` (the agent's own name when `None`): its record,
/// if it gives its call one, else it is counted as not a tool call.
pub(crate) fn recognize(
    r: &Recognizer,
    agent: HookAgent,
    service: Option<&str>,
    body: &[u8],
) -> Result<Recognized, HookError> {
    let payload = parse(body)?;
    let mut out = Recognized::default();
    let (svc, cut): (Arc<str>, _) = r.service_name(service.unwrap_or(agent.name()));
    match payload.call().and_then(|c| signal(agent, c)) {
        Some(sig) => {
            let at = agents::Origin {
                trace_id: &[],
                span_id: &[],
                span_us: None,
            };
            out.push_signals(r, &svc, cut, &[sig], at, "");
        }
        None => out.not_tool += 1,
    }
    Ok(out)
}

/// Reads one coding agent's hook payload, as `POST /v1/hooks/{agent}` does (`agent` is its name
/// in the path, `service` the `?service=` query): the record it gives its call, if it gives one.
pub fn recognize_hook(
    r: &Recognizer,
    agent: &str,
    service: Option<&str>,
    body: &[u8],
) -> Result<Recognized, String> {
    let agent = HookAgent::parse(agent).ok_or_else(|| format!("no hook for {agent:?}"))?;
    recognize(r, agent, service, body).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(json: &str) -> Reduced {
        parse(json.as_bytes()).unwrap().sizes()
    }

    /// Claude Code 2.1.332's `PostToolUse` for `seq 1 20000` (output cut to 30,000 chars in
    /// `stdout`, persisted).
    const CLAUDE_PERSISTED: &str = r#"{"session_id":"s","transcript_path":"/t","cwd":"/p",
        "permission_mode":"default","hook_event_name":"PostToolUse","tool_name":"Bash",
        "tool_input":{"command":"seq 1 20000","description":"d"},
        "tool_response":{"stdout":"1\n2\n3","stderr":"","interrupted":false,"isImage":false,
        "noOutputExpected":false,"persistedOutputPath":"/h/tool-results/x.txt",
        "persistedOutputSize":108894},"tool_use_id":"toolu_01","duration_ms":31}"#;

    #[test]
    fn claude_code_persisted_output_is_a_cut_with_its_original_size() {
        let p = parse(CLAUDE_PERSISTED.as_bytes()).unwrap();
        assert_eq!(p.hook_event_name.as_deref(), Some("PostToolUse"));
        let s = signal(HookAgent::ClaudeCode, p.call().unwrap()).unwrap();
        assert_eq!(s.role, Role::Part);
        assert!(matches!(s.call, CallId::Id("toolu_01")));
        assert_eq!(s.upstream.layer, Some("claude-code.bash"));
        assert_eq!(s.upstream.original, Some(108_894));
        // A whole result adds nothing.
        let whole = r#"{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_use_id":"t2",
            "tool_response":{"stdout":"small","stderr":"","interrupted":false}}"#;
        let whole = parse(whole.as_bytes()).unwrap();
        assert!(signal(HookAgent::ClaudeCode, whole.call().unwrap()).is_none());
    }

    #[test]
    fn qwen_code_llm_content_is_measured_in_utf16_units_and_joined_by_its_call_id() {
        let p = parse(
            r#"{"session_id":"s","hook_event_name":"PostToolUse","permission_mode":"yolo",
            "tool_name":"run_shell_command","tool_input":{"command":"seq 1 20000"},
            "tool_response":{"llmContent":"h\u00e9\ud83d\ude00\n","returnDisplay":"x"},
            "tool_use_id":"hook_1","tool_call_id":"call_9","duration_ms":4}"#
                .as_bytes(),
        )
        .unwrap();
        let s = signal(HookAgent::QwenCode, p.call().unwrap()).unwrap();
        assert!(matches!(s.call, CallId::Id("call_9")));
        // h, é, 😀 (two units), newline.
        assert_eq!(s.upstream.original, Some(5));
        assert_eq!(s.upstream.layer, None);
        assert_eq!(s.upstream.when_over, Some("qwen-code.shell"));
    }

    #[test]
    fn parts_are_joined_by_newlines_and_other_parts_count_nothing() {
        let r = sizes(
            r#"{"tool_response":{"llmContent":[{"text":"ab"},{"inlineData":{"data":"zz"}},"cd"],
            "error":null}}"#,
        );
        assert_eq!(r.llm_content_utf16, Some(5));
        assert!(!r.failed);
        let r = sizes(r#"{"tool_response":{"llmContent":{"text":"abc"},"error":{"message":"x"}}}"#);
        assert_eq!((r.llm_content_utf16, r.failed), (Some(3), true));
        // Odd shapes reveal nothing, and are no error.
        assert_eq!(sizes(r#"{"tool_response":"text"}"#), Reduced::default());
        assert_eq!(sizes(r#"{"tool_response":[1,2]}"#), Reduced::default());
        assert_eq!(
            sizes(r#"{"tool_response":{"llmContent":[[1]]}}"#).llm_content_utf16,
            Some(0)
        );
    }

    #[test]
    fn a_reduced_payload_wins_over_the_response() {
        let r = sizes(r#"{"tool_name":"Bash","toolsize":{"persisted_bytes":7}}"#);
        assert_eq!(r.persisted_bytes, Some(7));
    }

    #[test]
    fn gemini_after_tool_has_no_call_to_join() {
        let p = parse(
            br#"{"session_id":"s","hook_event_name":"AfterTool","tool_name":"run_shell_command",
            "tool_input":{},"tool_response":{"llmContent":"x","returnDisplay":"x"}}"#,
        )
        .unwrap();
        assert!(signal(HookAgent::GeminiCli, p.call().unwrap()).is_none());
    }

    #[test]
    fn what_is_not_a_json_object_is_an_error() {
        for bad in ["", "[]", "not json", "{\"tool_name\":", "\"x\""] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn agents_are_named_as_in_the_path() {
        for a in HookAgent::ALL {
            assert_eq!(HookAgent::parse(a.name()), Some(a));
        }
        assert_eq!(HookAgent::parse("codex"), None);
    }
}
