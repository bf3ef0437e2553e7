//! State on disk: the file's own versioned types ([`format`]), reading every version so far
//! ([`migrate`]), the invariants checked before a restore ([`verify`]), the state to and from
//! them ([`snapshot`]) and the atomic file they live in ([`store`]), written off the aggregator
//! and restored at start; and the optional write-ahead log ([`wal`]), compacted into them.

pub(crate) mod format;
pub(crate) mod migrate;
pub(crate) mod snapshot;
pub(crate) mod store;
pub(crate) mod verify;
