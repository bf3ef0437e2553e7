//! The daemon's network edge: listeners with their budgets, TLS, the shared token, and the
//! outbound HTTP client that delivers alerts.

pub(crate) mod auth;
pub(crate) mod client;
pub mod listener;
#[cfg(feature = "tls")]
pub(crate) mod tls;
