//! Listen addresses as people write them: `IP:PORT` or `HOST:PORT` (`localhost:4318`), resolved
//! once when read.
//!
//! A host name is resolved with the system resolver (`/etc/hosts`, then DNS) when the flag,
//! variable or file is read, never again: the daemon listens on what it resolved at start, and
//! logs it. Of the addresses a name resolves to, the first IPv4 one is taken (`localhost` is
//! `127.0.0.1`, as every OTLP exporter's default endpoint means it), else the first. A name that
//! does not resolve, or text with no port, is an error naming both accepted forms.

use std::net::{SocketAddr, ToSocketAddrs};

/// `text` as a socket address: `IP:PORT`, `[IPv6]:PORT` or `HOST:PORT`.
pub fn resolve_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = |why: String| {
        format!(
            "{text:?}: not an address ({why}); write IP:PORT or HOST:PORT, e.g. 127.0.0.1:4318 \
             or localhost:4318"
        )
    };
    let has_port = text
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !has_port {
        return Err(bad("no HOST:PORT".into()));
    }
    let all: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| bad("the name resolves to no address".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn localhost_is_the_ipv4_loopback() {
        assert_eq!(
            resolve_listen("localhost:4318"),
            Ok("127.0.0.1:4318".parse().unwrap())
        );
        assert_eq!(
            resolve_listen(" 127.0.0.1:0 "),
            Ok("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(resolve_listen("[::1]:9"), Ok("[::1]:9".parse().unwrap()));
    }

    #[test]
    fn text_without_a_port_names_both_forms() {
        for bad in ["localhost", "nope", ":4318", "localhost:99999"] {
            let e = resolve_listen(bad).unwrap_err();
            assert!(e.contains("IP:PORT or HOST:PORT"), "{bad}: {e}");
        }
    }
}
