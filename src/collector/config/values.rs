//! The values of the configuration that are parsed once, when it is read: durations
//! ([`Interval`], [`parse_duration`]), sliding windows ([`Window`]), listen addresses
//! ([`ListenAddr`]), and the upstream receivers and headers of `[forward]` ([`otlp_upstream`],
//! [`header_pairs`]).

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Uri};
use serde::{Deserialize, Serialize};

/// A positive duration written as in the file (`"250ms"`, `"10s"`, `"5m"`, `"1h"`, `"1d"`),
/// parsed once when the configuration is read; a bad or zero value is an error there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(pub Duration);

impl std::str::FromStr for Interval {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match parse_duration(s)? {
            d if d.is_zero() => Err(format!("{s:?} must be above 0")),
            d => Ok(Interval(d)),
        }
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Interval {
    /// `n` seconds, for a default (zero would be refused when read: the tests read the
    /// defaults back).
    pub(crate) const fn secs(n: u64) -> Self {
        Interval(Duration::from_secs(n))
    }

    /// `n` milliseconds, for a default.
    pub(crate) const fn ms(n: u64) -> Self {
        Interval(Duration::from_millis(n))
    }
}

/// Written back in the file's grammar, with the largest unit that divides it.
impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            return write!(f, "{ms}ms");
        }
        let s = ms / 1000;
        match [(86400, "d"), (3600, "h"), (60, "m")]
            .into_iter()
            .find(|(n, _)| s.is_multiple_of(*n))
        {
            Some((n, unit)) => write!(f, "{}{unit}", s / n),
            None => write!(f, "{s}s"),
        }
    }
}

/// A listen address written `IP:PORT` or `HOST:PORT` (`localhost:4318`), resolved once when the
/// configuration is read ([`crate::addr::resolve_listen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddr(pub std::net::SocketAddr);

impl std::str::FromStr for ListenAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        crate::addr::resolve_listen(s).map(ListenAddr)
    }
}

impl From<std::net::SocketAddr> for ListenAddr {
    fn from(a: std::net::SocketAddr) -> Self {
        ListenAddr(a)
    }
}

impl<'de> Deserialize<'de> for ListenAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for ListenAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One sliding window of `aggregation.windows`: its label as written (`"5m"`, used in metric
/// labels and the API) and its duration, parsed once when the configuration is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    /// The value as written, e.g. `"5m"`.
    pub(crate) label: String,
    /// Its length.
    pub(crate) duration: Duration,
}

impl std::str::FromStr for Window {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(Window {
            label: s.to_string(),
            duration: parse_duration(s)?,
        })
    }
}

impl Serialize for Window {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label)
    }
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A sampling rate configured for one service (`recognition.sampling_rates`: `"service=rate"`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServiceRate {
    /// `service.name`, as the tracer sends it.
    pub(crate) service: String,
    /// The probability its tracer samples a trace with.
    pub(crate) rate: f64,
}

impl std::str::FromStr for ServiceRate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (service, rate) = s
            .rsplit_once('=')
            .ok_or_else(|| format!("{s:?} is not service=rate (e.g. \"toolhive=0.1\")"))?;
        let service = service.trim();
        let rate: f64 = rate
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: the rate {rate:?} is not a number"))?;
        if service.is_empty() {
            return Err(format!("{s:?} names no service"));
        }
        if !(rate > 0.0 && rate <= 1.0) {
            return Err(format!(
                "{s:?}: the rate must be above 0 and at most 1 (a probability)"
            ));
        }
        Ok(Self {
            service: service.to_string(),
            rate,
        })
    }
}

impl Serialize for ServiceRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}={}", self.service, self.rate))
    }
}

impl<'de> Deserialize<'de> for ServiceRate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The longest duration a setting takes: 100 years. Longer ones are refused, not wrapped or
/// saturated, so that a typo such as `999999999999999d` is an error naming the value rather than a
/// timer that overflows the clock it is added to.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Parses `"250ms"`, `"10s"`, `"5m"`, `"1h"`, `"1d"`, up to [`MAX_DURATION`].
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{s:?} has no unit (use ms, s, m, h or d)"))?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} does not start with a number"))?;
    let (per, millis) = match unit {
        "ms" => (1, true),
        "s" => (1, false),
        "m" => (60, false),
        "h" => (3600, false),
        "d" => (86_400, false),
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    let d = n.checked_mul(per).map(|v| {
        if millis {
            Duration::from_millis(v)
        } else {
            Duration::from_secs(v)
        }
    });
    match d {
        Some(d) if d <= MAX_DURATION => Ok(d),
        _ => Err(format!(
            "{s:?} is longer than 100 years, the longest duration taken"
        )),
    }
}

/// (scheme, authority, path prefix) of an upstream OTLP receiver's URL: `http(s)://host[:4318][/prefix]`
/// or `grpc(s)://host[:4317]` (`forward.upstreams`; the `s` forms need the `tls` feature).
pub(crate) fn otlp_upstream(url: &str) -> Result<(&'static str, String, String), String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    let scheme = match uri.scheme_str() {
        Some("http") => "http",
        Some("grpc") => "grpc",
        Some("https") if cfg!(feature = "tls") => "https",
        Some("grpcs") if cfg!(feature = "tls") => "grpcs",
        Some(s @ ("https" | "grpcs")) => {
            return Err(format!(
                "{s}:// upstreams need toolsize built with the `tls` feature"
            ))
        }
        Some(other) => {
            return Err(format!(
                "{other}:// upstreams are not supported: use http(s)://host:port (OTLP/HTTP) or \
                 grpc(s)://host:port (OTLP/gRPC)"
            ))
        }
        None => return Err(format!("{url:?} has no scheme: use http:// or grpc://")),
    };
    let grpc = scheme.starts_with("grpc");
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("{url:?} has no host"))?;
    let port = uri.port_u16().unwrap_or(if grpc { 4317 } else { 4318 });
    let prefix = uri.path().trim_end_matches('/').to_string();
    if grpc && !prefix.is_empty() {
        return Err(format!(
            "{url:?}: a grpc:// upstream takes no path (the OTLP service paths are fixed)"
        ));
    }
    Ok((scheme, format!("{host}:{port}"), prefix))
}

/// Parses `name=value` headers (`OTEL_EXPORTER_OTLP_HEADERS`' form, values percent-decoded).
pub(crate) fn header_pairs(list: &[String]) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    list.iter()
        .flat_map(|l| l.split(','))
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| {
            let (name, value) = h
                .split_once('=')
                .ok_or_else(|| format!("header {:?} is not name=value", shown(h)))?;
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| format!("{:?} is not a header name", name.trim()))?;
            let value = HeaderValue::from_bytes(&percent_decode(value.trim()))
                .map_err(|_| format!("the value of header {name} is not a header value"))?;
            Ok((name, value))
        })
        .collect()
}

/// A header as an error may show it: its name only (values often hold credentials).
fn shown(h: &str) -> String {
    match h.split_once('=') {
        Some((n, _)) => format!("{n}=…"),
        // (`str::floor_char_boundary` is newer than the crate's minimum Rust, 1.88.)
        None if h.len() > 40 => {
            let end = (0..=40).rev().find(|&i| h.is_char_boundary(i)).unwrap_or(0);
            format!("{}…", &h[..end])
        }
        None => h.to_string(),
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_display_in_the_file_grammar() {
        for s in ["250ms", "1500ms", "10s", "90s", "5m", "1h", "36h", "1d"] {
            let i: Interval = s.parse().unwrap();
            assert_eq!(i.to_string(), s);
        }
        assert_eq!("120s".parse::<Interval>().unwrap().to_string(), "2m");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("m").is_err());
        assert_eq!(parse_duration("36500d").unwrap(), MAX_DURATION);
        for huge in [
            "36501d",
            "999999999999999d",
            "18446744073709551615s",
            "18446744073709551615ms",
        ] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("longer than 100 years"), "{huge}: {e}");
        }
        // Past u64 seconds: the number itself does not parse.
        assert!(parse_duration("18446744073709551616s").is_err());
    }
}

#[cfg(test)]
mod upstream_tests {
    use super::*;

    #[test]
    fn urls_are_checked_with_a_clear_error() {
        assert_eq!(
            otlp_upstream("http://127.0.0.1:4318/otlp/").unwrap(),
            ("http", "127.0.0.1:4318".into(), "/otlp".into())
        );
        assert_eq!(
            otlp_upstream("grpc://collector").unwrap(),
            ("grpc", "collector:4317".into(), String::new())
        );
        assert!(otlp_upstream("ftp://x")
            .unwrap_err()
            .contains("not supported"));
        assert!(otlp_upstream("grpc://x:4317/v1")
            .unwrap_err()
            .contains("no path"));
        assert!(otlp_upstream("localhost:4318").is_err());
    }

    #[test]
    fn headers_are_parsed_and_never_shown_with_their_values() {
        let h = header_pairs(&["a=1, x-key=s%20ecret".into(), "b = 2".into()]).unwrap();
        let got: Vec<(String, Vec<u8>)> = h
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(
            got,
            [
                ("a".into(), b"1".to_vec()),
                ("x-key".into(), b"s ecret".to_vec()),
                ("b".into(), b"2".to_vec())
            ]
        );
        let e = header_pairs(&["authorization".into()]).unwrap_err();
        assert!(e.contains("not name=value"));
        let e = header_pairs(&["bad name=secret-token".into()]).unwrap_err();
        assert!(!e.contains("secret-token"), "{e}");
    }
}
