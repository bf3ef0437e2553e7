//! State on disk: the snapshot format ([`snapshot`]) and the atomic file it lives in
//! ([`store`]), written by the aggregator and restored at start.

pub mod snapshot;
pub mod store;
