//! One line instruments a [swiftide](https://docs.rs/swiftide-agents) tool:
//! [`sized`]`(tool)` in place of `tool` when it is added to an agent
//! (`.tools([toolsize::swiftide::sized(my_tool)])`), for any swiftide `Tool` that is `Clone`
//! (`Box<dyn Tool>` is); every tool of a `ToolBox` at once with [`sized_box`]
//! (`.add_toolbox(toolsize::swiftide::sized_box(tools))`).
//!
//! swiftide's agent (swiftide-agents 0.32) runs each call of a turn in its own task, inside an
//! INFO span named `tool` whose OpenTelemetry name is `tool.<name>`; the span carries no tool
//! attribute, the result appears only in a DEBUG event ("Completed tool call", the result as
//! text), and a failed call leaves nothing on it. Inside that span the wrapper adds toolsize's
//! attributes to it, through the OpenTelemetry layer of `tracing-opentelemetry` (the one
//! [`crate::export`] sets up), rather than opening a second span, so the daemon counts each call
//! once: `gen_ai.operation.name = execute_tool`, `tool.name`, `tool.args_hash` (of the JSON
//! arguments the model sent), `tool.result.bytes` measured in process (the text the model is
//! handed: a `Text` output's text), `tool.result.truncated`. A failure (the tool's `Err`, or a
//! `Fail` / `AgentFailed` output, both handed to the model as failures) records `tool.error`
//! (its message, at most [`MAX_ERROR_MESSAGE_BYTES`](crate::instrument::MAX_ERROR_MESSAGE_BYTES))
//! and `error.type` ([`error_type`]), and no size. `Stop` and `FeedbackRequired` outputs hand the
//! model no result: no size is recorded. swiftide's span holds the tool's own work alone (it
//! opens when the call's task starts), so the span's duration is the call's latency. Outside a
//! swiftide tool span (the tool invoked directly, or swiftide's span not exported through that
//! layer), the call gets toolsize's own span ([`crate::tool_call`]) instead.
//!
//! With a guard ([`Sized::guard`], [`sized_box_guarded`]), a `Text` result over the guard's
//! limit is cut, spilled or refused before swiftide hands it to the model: cut and spilled
//! results become the guard's marked text, a refusal becomes a `RESULT_TOO_LARGE` envelope handed
//! to the model as the result, so the model learns why. A spill that fails is handed over as a
//! refusal, never whole.
//!
//! Arguments and result content are never recorded: sizes and the hash only. The cost per call is
//! one pass over the result and one arguments hash; nothing here blocks or panics.

use std::borrow::Cow;

use async_trait::async_trait;
use swiftide_core::chat_completion::errors::ToolError;
use swiftide_core::chat_completion::{ToolCall, ToolOutput, ToolSpec};
use swiftide_core::{AgentContext, Tool, ToolBox};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::guard::ceiling::{CeilingGuard, Guarded};
use crate::guard::Envelope;
use crate::instrument::bounded_message;
use crate::semconv::*;
pub use crate::wrapped::Sized;

/// The name of swiftide's tool span (its OpenTelemetry name is `tool.<name>`).
pub const SWIFTIDE_TOOL_SPAN: &str = "tool";

/// The target (module) swiftide's agent opens its tool spans in.
pub const SWIFTIDE_AGENT_TARGET: &str = "swiftide_agents::agent";

/// Whether `meta` is swiftide's own tool span.
pub fn is_swiftide_tool_span(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && meta.name() == SWIFTIDE_TOOL_SPAN && meta.target() == SWIFTIDE_AGENT_TARGET
}

/// Wraps a swiftide tool so that every call of it is measured.
pub fn sized<T: Tool + Clone>(tool: T) -> Sized<T> {
    Sized {
        inner: tool,
        guard: None,
    }
}

/// Every tool `toolbox` lists, measured as [`sized`] measures one.
pub fn sized_box<B: ToolBox + Clone>(toolbox: B) -> SizedBox<B> {
    SizedBox {
        inner: toolbox,
        guard: None,
    }
}

/// [`sized_box`], with every result held to `guard`'s limit and policy before the model is
/// handed it.
pub fn sized_box_guarded<B: ToolBox + Clone>(toolbox: B, guard: CeilingGuard) -> SizedBox<B> {
    SizedBox {
        inner: toolbox,
        guard: Some(guard),
    }
}

#[async_trait]
impl<T: Tool + Clone> Tool for Sized<T> {
    async fn invoke(
        &self,
        agent_context: &dyn AgentContext,
        tool_call: &ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        let name = self.inner.name();
        let call = Call::start(&name, tool_call.args());
        let done = match &call.own {
            Some(own) => {
                own.scoped(std::pin::pin!(self.inner.invoke(agent_context, tool_call)))
                    .await
            }
            None => self.inner.invoke(agent_context, tool_call).await,
        };
        match done {
            Ok(ToolOutput::Text(text)) => Ok(call.finish(&name, text, self.guard.as_ref())),
            Ok(output) => {
                match &output {
                    ToolOutput::Fail(message) => call.fail(message, "fail"),
                    ToolOutput::AgentFailed(_) => call.fail(&output, "agent_failed"),
                    _ => call.no_result(),
                }
                Ok(output)
            }
            Err(error) => {
                call.fail(&error, error_type(&error));
                Err(error)
            }
        }
    }

    fn name(&self) -> Cow<'_, str> {
        self.inner.name()
    }

    fn tool_spec(&self) -> ToolSpec {
        self.inner.tool_spec()
    }
}

/// So that a sized tool goes wherever swiftide takes tools (`AgentBuilder::tools`).
impl<T: Tool + Clone + 'static> From<Sized<T>> for Box<dyn Tool> {
    fn from(tool: Sized<T>) -> Self {
        Box::new(tool)
    }
}

/// A swiftide tool box whose tools are measured: built by [`sized_box`].
#[derive(Debug, Clone)]
pub struct SizedBox<B> {
    inner: B,
    guard: Option<CeilingGuard>,
}

#[async_trait]
impl<B: ToolBox + Clone> ToolBox for SizedBox<B> {
    async fn available_tools(&self) -> anyhow::Result<Vec<Box<dyn Tool>>> {
        let tools = self.inner.available_tools().await?;
        Ok(tools
            .into_iter()
            .map(|inner| {
                Box::new(Sized {
                    inner,
                    guard: self.guard.clone(),
                }) as Box<dyn Tool>
            })
            .collect())
    }

    fn name(&self) -> Cow<'_, str> {
        self.inner.name()
    }
}

/// The `error.type` of a tool's error: `wrong_arguments`, `missing_arguments`,
/// `execution_failed` or `unknown`, as swiftide names its variants.
pub fn error_type(error: &ToolError) -> &'static str {
    match error {
        ToolError::WrongArguments(_) => "wrong_arguments",
        ToolError::MissingArguments(_) => "missing_arguments",
        ToolError::ExecutionFailed(_) => "execution_failed",
        ToolError::Unknown(_) => "unknown",
    }
}

/// Where a call's attributes go: swiftide's own span, or toolsize's.
struct Call {
    /// swiftide's span, when the call runs inside one.
    swiftide: Option<tracing::Span>,
    /// toolsize's span, otherwise.
    own: Option<crate::ToolCall>,
}

impl Call {
    /// `args`: the call's arguments as the model sent them (JSON text; `None` or not JSON: the
    /// hash is left out).
    fn start(tool: &str, args: Option<&str>) -> Self {
        // Canonicalized straight from the text, without building a `serde_json::Value`.
        let hash = args.and_then(|a| crate::args_hash::span_args_hash_json(a).ok());
        if !crate::wrapped::in_span(is_swiftide_tool_span) {
            let builder = crate::tool_call(tool);
            let builder = match hash {
                Some(hash) => builder.args_hash(hash),
                None => builder,
            };
            return Call {
                swiftide: None,
                own: Some(builder.start()),
            };
        }
        let current = tracing::Span::current();
        current.set_attribute(GEN_AI_OPERATION_NAME, OPERATION_EXECUTE_TOOL);
        current.set_attribute(TOOL_NAME, tool.to_owned());
        if let Some(hash) = hash {
            current.set_attribute(TOOL_ARGS_HASH, hash);
        }
        Call {
            swiftide: Some(current),
            own: None,
        }
    }

    /// Guards the text, measures what the model is handed, records it; returns the output to
    /// hand over.
    fn finish(mut self, tool: &str, text: String, guard: Option<&CeilingGuard>) -> ToolOutput {
        let original = text.len() as u64;
        let handed = match guard.filter(|g| original > g.limit().bytes) {
            None => text,
            Some(g) => match g.text(tool, "result", &text) {
                Ok(Guarded { output, .. }) => output,
                Err(error) => Envelope::err(error.to_envelope_error()).to_json(),
            },
        };
        let bytes = handed.len() as u64;
        let truncated = bytes != original;
        if let Some(own) = self.own.take() {
            if truncated {
                own.finish_truncated(&handed, original);
            } else {
                own.finish(&handed, false);
            }
        } else if let Some(span) = &self.swiftide {
            span.set_attribute(TOOL_RESULT_BYTES, int(bytes));
            span.set_attribute(TOOL_RESULT_TRUNCATED, truncated);
            if truncated {
                span.set_attribute(TOOL_RESULT_ORIGINAL_BYTES, int(original));
            }
        }
        ToolOutput::Text(handed)
    }

    fn fail(mut self, error: &dyn std::fmt::Display, kind: &str) {
        if let Some(own) = self.own.take() {
            own.fail(error, kind);
        } else if let Some(span) = &self.swiftide {
            span.set_attribute(TOOL_ERROR, bounded_message(error));
            span.set_attribute(ERROR_TYPE, kind.to_owned());
        }
    }

    /// No result for the model (`Stop`, `FeedbackRequired`): toolsize's own span ends
    /// cancelled; swiftide's keeps the name and hash alone.
    fn no_result(self) {}
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::testing::{attr, captured};
    use swiftide_core::chat_completion::ToolCallBuilder;

    /// Answers 1,000 bytes, or fails when its arguments say `"fail": true`.
    #[derive(Clone)]
    struct Echo;

    #[async_trait]
    impl Tool for Echo {
        async fn invoke(
            &self,
            _: &dyn AgentContext,
            call: &ToolCall,
        ) -> Result<ToolOutput, ToolError> {
            match call.args() {
                Some(a) if a.contains("fail") => Err(ToolError::unknown(anyhow::anyhow!("no"))),
                _ => Ok(ToolOutput::text("x".repeat(1000))),
            }
        }
        fn name(&self) -> Cow<'_, str> {
            "echo".into()
        }
        fn tool_spec(&self) -> ToolSpec {
            ToolSpec::builder()
                .name("echo")
                .description("Echoes.")
                .build()
                .unwrap()
        }
    }

    /// The span swiftide-agents 0.32 opens around a call (`agent.rs`, `invoke_tools`), opened
    /// here under swiftide's target.
    fn swiftide_span() -> tracing::Span {
        tracing::info_span!(target: "swiftide_agents::agent", "tool", "otel.name" = "tool.echo")
    }

    fn invoke(tool: &dyn Tool, args: &str) -> Result<ToolOutput, ToolError> {
        let call = ToolCallBuilder::default()
            .id("c1")
            .name("echo")
            .args(args)
            .build()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(tool.invoke(&(), &call))
    }

    #[test]
    fn swiftide_spans_are_told_from_others() {
        let _ = captured(|| {
            assert!(swiftide_span()
                .metadata()
                .is_some_and(is_swiftide_tool_span));
            let other = tracing::info_span!("tool");
            assert!(!other.metadata().is_some_and(is_swiftide_tool_span));
        });
    }

    /// Inside swiftide's span the wrapper writes to it: one span per call.
    #[test]
    fn inside_swiftide_span_one_span_carries_the_size_and_hash() {
        let spans = captured(|| {
            let span = swiftide_span();
            let _in = span.enter();
            invoke(&sized(Echo), r#"{"q": 1}"#).unwrap();
        });
        assert_eq!(spans.len(), 1, "one span per call");
        let s = &spans[0];
        assert_eq!(s.name, "tool.echo");
        assert_eq!(attr(s, TOOL_RESULT_BYTES), Some(1000i64.into()));
        assert_eq!(attr(s, TOOL_RESULT_TRUNCATED), Some(false.into()));
        assert_eq!(attr(s, TOOL_NAME), Some("echo".into()));
        assert_eq!(
            attr(s, GEN_AI_OPERATION_NAME),
            Some(OPERATION_EXECUTE_TOOL.into())
        );
        assert_eq!(
            attr(s, TOOL_ARGS_HASH).unwrap().to_string(),
            crate::args_hash(&serde_json::json!({"q": 1})).unwrap()
        );
    }

    #[test]
    fn a_failure_is_unsized_and_typed() {
        let spans = captured(|| {
            let span = swiftide_span();
            let _in = span.enter();
            invoke(&sized(Echo), r#"{"fail": true}"#).unwrap_err();
        });
        let s = &spans[0];
        assert_eq!(attr(s, TOOL_RESULT_BYTES), None);
        assert_eq!(attr(s, ERROR_TYPE), Some("unknown".into()));
        assert_eq!(attr(s, TOOL_ERROR), Some("no".into()));
    }

    /// Outside swiftide's span the call gets toolsize's own span.
    #[test]
    fn outside_swiftide_span_toolsize_opens_its_own() {
        let spans = captured(|| {
            invoke(&sized(Echo), "{}").unwrap();
        });
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].name, "execute_tool echo");
        assert_eq!(attr(&spans[0], TOOL_RESULT_BYTES), Some(1000i64.into()));
    }

    /// A guarded tool box hands over the cut result and says so on the span.
    #[test]
    fn a_guarded_box_hands_over_the_cut_result() {
        let guard = CeilingGuard::builder()
            .max_output(500)
            .policy(crate::guard::Policy::Truncate)
            .build()
            .unwrap();
        let tools: Vec<Box<dyn Tool>> = vec![Box::new(Echo)];
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let listed = rt
            .block_on(sized_box_guarded(tools, guard).available_tools())
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name(), "echo");
        let mut handed = String::new();
        let spans = captured(|| {
            let span = swiftide_span();
            let _in = span.enter();
            let output = invoke(&listed[0], "{}").unwrap();
            handed = output.as_text().unwrap().to_owned();
        });
        assert!(handed.len() <= 500, "{} bytes handed", handed.len());
        let s = &spans[0];
        assert_eq!(
            attr(s, TOOL_RESULT_BYTES),
            Some((handed.len() as i64).into())
        );
        assert_eq!(attr(s, TOOL_RESULT_TRUNCATED), Some(true.into()));
        assert_eq!(attr(s, TOOL_RESULT_ORIGINAL_BYTES), Some(1000i64.into()));
    }
}
