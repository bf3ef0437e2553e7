//! The daemon's network edge: listeners with their budgets and their admission at the cap
//! (`evict`), TLS, the shared token, and the
//! outbound HTTP client that delivers alerts.

pub(crate) mod auth;
pub(crate) mod client;
pub(crate) mod evict;
pub mod listener;
#[cfg(feature = "tls")]
pub(crate) mod tls;
