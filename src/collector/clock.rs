//! Unix time, the daemon's one clock conversion: milliseconds and seconds since the epoch, 0
//! for a time before it (a clock set wrong never panics).

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` in Unix milliseconds.
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Current time, Unix milliseconds.
pub fn now_unix_ms() -> u64 {
    unix_ms(SystemTime::now())
}

/// Current time, Unix seconds.
pub fn now_unix() -> u64 {
    now_unix_ms() / 1000
}
