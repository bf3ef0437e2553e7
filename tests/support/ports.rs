//! Loopback ports for peers that must be told their port before they bind (Alertmanager,
//! Prometheus, Python servers, a port where nothing listens).
//!
//! Such a port is free when chosen and bound later by the peer. A port from the kernel's
//! ephemeral range (`bind(":0")`) can be handed in between to any outgoing connection of a test
//! running beside it (every `connect()` takes one), and the peer then fails to bind, or a test
//! talks to a stranger. So the port is chosen below that range, where the kernel never hands
//! out ports by itself: only another test choosing the same one at random can take it, and
//! each choice is first checked free by binding it.
#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// The lowest port chosen: above the well-known and most registered service ports.
pub const FLOOR: u16 = 20_000;

/// The kernel's ephemeral range (`net.ipv4.ip_local_port_range`), Linux's default when it
/// cannot be read.
pub fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32_768, 60_999))
}

/// A loopback port free at the time of the call, outside the kernel's ephemeral range (see the
/// module doc); a port from `bind(":0")` when the range leaves no room below it.
pub fn free_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SEED: OnceLock<u64> = OnceLock::new();
    let (low, _) = ephemeral_range();
    if low <= FLOOR + 1_000 {
        return ephemeral_port();
    }
    let span = u64::from(low - FLOOR);
    // Where this process starts in the span (its id and the clock), then a prime stride
    // through it, so that two processes rarely try the same ports and one process does not
    // repeat one before it has tried them all.
    let seed = *SEED.get_or_init(|| {
        u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
    });
    for _ in 0..span {
        let k = NEXT.fetch_add(1, Relaxed);
        let port = FLOOR + ((seed.wrapping_add(k.wrapping_mul(7_919))) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    ephemeral_port()
}

fn ephemeral_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
