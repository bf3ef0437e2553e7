//! toolsize: make tool-result size visible in LLM agent loops, and make silent truncation loud.
//!
//! The crate documentation is the README, whose examples are compiled and run as doctests.
#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

#[cfg(feature = "cli")]
pub mod addr;
pub mod args_hash;
#[cfg(feature = "export")]
pub mod export;
pub mod guard;
mod hex;
pub mod instrument;
mod label;
pub mod layers;
pub mod measure;
pub mod origin;
pub mod semconv;
pub mod suggest;

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "collector")]
pub mod collector;
#[cfg(feature = "cli")]
pub mod mcp;
/// `tools/call` results shaped to a limit: shared by `toolsize mcp` and [`rmcp`]'s guard.
#[cfg(any(feature = "cli", feature = "rmcp"))]
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
#[path = "mcp/result.rs"]
pub(crate) mod mcp_result;
#[cfg(feature = "rig")]
pub mod rig;
#[cfg(feature = "rmcp")]
pub mod rmcp;
#[cfg(feature = "swiftide")]
pub mod swiftide;
#[cfg(any(feature = "rig", feature = "swiftide"))]
mod wrapped;

/// Helpers shared by the crate's unit tests.
#[cfg(all(test, any(feature = "cli", feature = "swiftide")))]
pub(crate) mod test_support {
    use std::sync::{Arc, Mutex};

    /// A writer into a shared buffer, for a test's `tracing` subscriber: what it wrote, read
    /// back with [`SharedBuffer::text`].
    #[derive(Clone, Default)]
    pub(crate) struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

    impl SharedBuffer {
        /// Everything written so far.
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl std::io::Write for SharedBuffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}

/// The examples of `docs/rust-agents.md`, compiled and run as doc tests so the guide cannot
/// drift.
#[cfg(all(doctest, feature = "rig", feature = "rmcp", feature = "swiftide"))]
#[doc = include_str!("../docs/rust-agents.md")]
struct RustAgentsGuide;

pub use args_hash::{args_hash, canonical_json, ArgsHashError, ArgsHashKey};
pub use guard::{CeilingGuard, Envelope, Warning};
pub use instrument::{record_cut, tool_call, ToolCall, ToolCallBuilder};
pub use measure::{measure, Measurement, Measures};
pub use origin::Origin;
