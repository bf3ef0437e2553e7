//! State on disk: the snapshot format ([`snapshot`]) and the atomic file it lives in
//! ([`store`]), written by the aggregator and restored at start.

pub(crate) mod snapshot;
pub(crate) mod store;
