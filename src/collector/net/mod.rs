//! The daemon's network edge: listeners with their budgets, TLS, the shared token, and the
//! outbound HTTP client that delivers alerts.

pub mod auth;
pub mod client;
pub mod listener;
#[cfg(feature = "tls")]
pub mod tls;
