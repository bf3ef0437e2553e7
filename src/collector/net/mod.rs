//! The daemon's network edge: listeners with their budgets and their admission at the cap
//! (`evict`), TLS, the shared token, connections polled in place when they wake themselves
//! (`repoll`), and the outbound HTTP client that delivers alerts.

pub(crate) mod auth;
pub(crate) mod client;
pub(crate) mod evict;
pub mod listener;
pub(crate) mod repoll;
#[cfg(feature = "tls")]
pub(crate) mod tls;
