//! toolsize: make tool-result size visible in LLM agent loops, and make silent truncation loud.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod args_hash;
pub mod semconv;

pub use args_hash::{args_hash, canonical_json, ArgsHashError};

#[cfg(feature = "cli")]
pub mod cli;
