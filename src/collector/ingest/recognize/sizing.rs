//! A tool span's result size: measured by the tracer, or derived from the content it recorded.
//!
//! A measured size in reading order wins, with the other measures carried beside it as ints;
//! otherwise the first result attribute present (or, failing that, result event) is sized as
//! the framework handed it to the model, the tracer's wrapping removed, and looked at for an
//! upstream cut (a configured attribute length limit, a truncation marker, JSON that no longer
//! parses). Placeholders and missing content make the size unknown.
//!
//! Under load this is pure CPU on the receiving task, called once per tool span: content is
//! counted at most once, for the configured limits and the learner alike. It never fails: a
//! size attribute no result can have is reported to the caller ([`AbsurdSize`]), which refuses
//! the span; content it cannot read is "size unknown".

use super::emitters::{Encoding, Envelope};
use super::{
    has_marker, json_cut, json_len, size_of, str_of, unwrap_content, AbsurdSize, Emitter,
    Measurement, Recognizer, Size, SizeSource, Unknown,
};
use crate::collector::ingest::wire::{AttrValue, SpanView};
use crate::collector::ingest::{learn, text};

impl Recognizer {
    /// The first measured size in reading order, or the size attribute no result can have.
    #[inline]
    pub(super) fn measured_size<'a>(
        &self,
        get: &impl Fn(usize) -> Option<AttrValue<'a>>,
    ) -> Result<Option<u64>, AbsurdSize> {
        for &i in &self.size {
            if let Some(n) = size_of(get(i))? {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    /// The other measures ([`MEASURE_KEYS`](super::emitters::MEASURE_KEYS)) carried as non-negative ints beside a measured
    /// size (`measured`); none without one.
    #[inline]
    pub(super) fn measures<'a>(
        &self,
        get: &impl Fn(usize) -> Option<AttrValue<'a>>,
        measured: bool,
    ) -> Measurement {
        if !measured {
            return Measurement::default();
        }
        let m = |n: usize| match get(self.measures[n]) {
            Some(AttrValue::Int(v)) if v >= 0 => Some(v as u64),
            _ => None,
        };
        Measurement {
            chars: m(0),
            utf16_units: m(1),
            lines: m(2),
            json_depth: m(3),
            max_string_chars: m(4),
            tokens_estimate: m(5),
            ..Measurement::default()
        }
    }

    /// What the recorded result says of the size (no measured size): the first result
    /// attribute present, with `emitter`'s wrapping of it, else the first result event; missing
    /// when there is none. `flagged`: the span says the content was cut (`logfire.truncated`).
    #[inline]
    pub(super) fn recorded_content<'a>(
        &self,
        get: &impl Fn(usize) -> Option<AttrValue<'a>>,
        span: &SpanView<'a>,
        emitter: Emitter,
        flagged: bool,
    ) -> Content {
        let json_mime = str_of(get(self.mime)).is_some_and(|m| m.contains("json"));
        let content = self
            .content
            .iter()
            .find_map(|&(i, enc, env)| {
                let v = get(i)?;
                let env = self
                    .emitter_envelopes
                    .iter()
                    .find(|&&(e, k, _)| e == emitter && k == i)
                    .map_or(env, |&(_, _, x)| x);
                Some((v, enc, env))
            })
            .or_else(|| {
                self.events.iter().find_map(|(e, k)| {
                    span.event_attr(e, k)
                        .map(|v| (v, Encoding::Auto, Envelope::TextParts))
                })
            });
        match content {
            Some((v, enc, env)) => self.size_of_content(flagged, v, enc, env, json_mime),
            None => Content::unknown(Unknown::Missing),
        }
    }

    /// The size of recorded content, with the tracer's envelope removed, whether it shows an
    /// upstream cut (and at which configured attribute length limit), and the sample the
    /// aggregator learns limits from ([`crate::collector::ingest::learn`]). `flagged`: the span
    /// already says the content was cut (`logfire.truncated`).
    pub(super) fn size_of_content(
        &self,
        flagged: bool,
        v: AttrValue<'_>,
        enc: Encoding,
        env: Envelope,
        json_mime: bool,
    ) -> Content {
        match v {
            AttrValue::Str(s) => {
                if self.placeholders.iter().any(|p| p.as_bytes() == s)
                    || (enc == Encoding::JsonEmptyIsHidden && s.trim_ascii() == b"{}")
                {
                    return Content::unknown(Unknown::Placeholder);
                }
                let unwrapped = unwrap_content(env, s);
                let whole = match unwrapped {
                    Some((_, true)) => SizeSource::Unwrapped,
                    Some((_, false)) => SizeSource::UnwrappedApproximate,
                    None => SizeSource::Derived,
                };
                // Counted once, for the configured limits and the learner alike (content too
                // short for either is not counted).
                let counted = (!self.limits.is_empty() || s.len() as u64 >= learn::MIN_LIMIT)
                    .then(|| text::lengths(s));
                // Markers and cut JSON are looked for only when no length limit says it all;
                // a limit learned from the data is the aggregator's to apply.
                let limit = self.at_length_limit(s, counted);
                let marked = limit.is_none()
                    && (has_marker(s) || json_cut(s, enc != Encoding::Auto || json_mime));
                let sample = match limit {
                    None => learn::sample(s, counted, (!(flagged || marked)).then_some(whole)),
                    Some(_) => None,
                };
                let cut = limit.is_some() || marked;
                let (bytes, source) = match (cut, unwrapped) {
                    (false, Some((n, _))) => (n, whole),
                    _ => (s.len() as u64, SizeSource::Derived),
                };
                Content {
                    size: Size::Known { bytes, source },
                    cut,
                    limit,
                    sample,
                }
            }
            AttrValue::Kvlist([]) if enc == Encoding::JsonEmptyIsHidden => {
                Content::unknown(Unknown::Placeholder)
            }
            other => match other.to_owned_value() {
                Some(v) => Content {
                    size: Size::Known {
                        bytes: json_len(&v),
                        source: SizeSource::Derived,
                    },
                    cut: false,
                    limit: None,
                    sample: None,
                },
                None => Content::unknown(Unknown::Missing),
            },
        }
    }

    /// The configured (or, failing that, the daemon's own `OTEL_*` environment) attribute value
    /// length limit that `s` ends at exactly, in code points or UTF-16 units (`counted`: its
    /// lengths from [`text::lengths`], exact once `s` is checked as UTF-8; content that is not
    /// is counted as an SDK decoding it with replacement characters would).
    pub(super) fn at_length_limit(&self, s: &[u8], counted: Option<text::Lengths>) -> Option<u64> {
        if self.limits.is_empty() {
            return None;
        }
        let text::Lengths { chars, utf16 } = text::lengths_checked(s, counted);
        self.limits
            .iter()
            .copied()
            .find(|&l| l == chars || l == utf16)
    }
}

/// What recorded content says of a result.
pub(super) struct Content {
    pub(super) size: Size,
    pub(super) cut: bool,
    pub(super) limit: Option<u64>,
    /// What the aggregator learns limits from.
    pub(super) sample: Option<crate::collector::ingest::record::Sample>,
}

impl Content {
    /// `size`, with no cut seen and nothing to learn from.
    #[inline]
    pub(super) fn of(size: Size) -> Self {
        Self {
            size,
            cut: false,
            limit: None,
            sample: None,
        }
    }

    pub(super) fn unknown(why: Unknown) -> Self {
        Self::of(Size::Unknown(why))
    }
}
