//! toolsize: make tool-result size visible in LLM agent loops, and make silent truncation loud.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod semconv;

#[cfg(feature = "cli")]
pub mod cli;

#[cfg(feature = "collector")]
pub mod collector;
