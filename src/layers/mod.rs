//! Truncation layers: the built-in catalog, the user's stack, and the weakest layer for a result.
//!
//! Between a tool and the model (harness, framework, transport, model API), and between the agent
//! and toolsize (tracer, collector, backend), many layers cut, spill or reject a tool result, each
//! counting in its own unit (bytes, code points, UTF-16 units, tokens, lines, JSON depth, items)
//! over its own scope (the whole result, every string, an attribute value, every line).
//!
//! * [`catalog()`]: the known layers, embedded in the binary and parsed once (`toolsize layers`
//!   prints them).
//! * [`Stack`]: the layers a deployment declares by id, with limit overrides and custom layers,
//!   resolved with precedence flag > env > file > default; with none declared, one `default`
//!   layer of [`DEFAULT_CEILING_BYTES`].
//! * [`Stack::verdict`]: every layer that would cut one result, weakest first, each value exact
//!   where measured and estimated from bytes otherwise ([`convert`] states the rules);
//!   [`Stack::ceiling_bytes`]: the weakest layer's limit in bytes.
//!
//! Resolution fails on bad input (unknown id, zero limit) with a typed [`StackError`]; a verdict
//! never fails, panics or allocates unless a layer cuts, so it can run for every result.

mod catalog;
pub mod convert;
mod stack;

pub use catalog::{catalog, find, Action, Layer, LayerKind, Scope, Unit};
pub use convert::{ByteLimit, ResultMeasures, Value};
#[cfg_attr(not(feature = "collector"), allow(unused_imports))]
pub(crate) use stack::{parse_limit, KEY_CEILING_BYTES};
pub use stack::{
    suggest, Ceiling, CustomLayer, Cut, Stack, StackConfig, StackError, StackLayer, Verdict,
    DEFAULT_CEILING_BYTES, DEFAULT_LAYER_ID, ENV_CEILING_BYTES, ENV_STACK, MAX_LAYER_NAME_BYTES,
};
