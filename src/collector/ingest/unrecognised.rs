//! Spans and log records that arrive but are recognised as no tool call, counted per service,
//! with the attribute keys they carried (keys only, never values), for `/api/v1/unrecognised`,
//! the status page and one log line per service.
//!
//! Cost on the ingest path: a span or record that is no tool call adds one pointer compare to
//! the request's own short list ([`Seen`], one entry per service in the request). Keys are
//! copied from the first such span of a service in a request, and only while the service has
//! had fewer than [`SAMPLES_PER_SERVICE`] samples (one lock, once per service per request, to
//! ask); later spans are only counted. The request's counts are merged into the shared
//! [`Unrecognised`] once, after the request is read (one lock per request that had any).
//!
//! Bounded: at most [`MAX_SERVICES`] services (the spans and records of others are counted in
//! one overflow count, with the number of services turned away), [`MAX_KEYS`] keys and
//! [`MAX_SCOPES`] scope names per service (further ones counted), each cut to [`MAX_KEY_BYTES`]
//! on a character boundary. Items under a coding agent's own scope are recognised as the
//! agent's and not counted here: their other spans and events are expected.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// Services whose unrecognised items are kept apart; the items of further services are counted
/// together.
pub(crate) const MAX_SERVICES: usize = 64;
/// Attribute keys kept per service.
pub(crate) const MAX_KEYS: usize = 32;
/// Instrumentation scope names kept per service.
pub(crate) const MAX_SCOPES: usize = 8;
/// Longest key or scope name kept, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 64;
/// Spans or records of a service whose keys are read; later ones are only counted.
pub(crate) const SAMPLES_PER_SERVICE: u32 = 8;
/// Where the recipe is, named by every answer.
pub(crate) const RECIPE_DOC: &str = "docs/collector.md#the-recipe";

/// The unrecognised items of one request, per service, before they are merged.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    entries: Vec<SeenEntry>,
}

#[derive(Debug)]
struct SeenEntry {
    service: Arc<str>,
    spans: u64,
    logs: u64,
    /// Keys and scope of a sample, when one was taken.
    keys: Vec<Box<str>>,
    scope: Option<Box<str>>,
}

/// A span or a log record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    Span,
    Log,
}

impl Seen {
    /// Counts one item of `service` (instrumentation scope `scope`) that is no tool call; reads
    /// the keys `keys` gives when this is the service's first item in the request and
    /// `registry` wants a sample of it.
    #[inline]
    pub(crate) fn add<'k>(
        &mut self,
        registry: &Unrecognised,
        service: &Arc<str>,
        scope: &str,
        item: Item,
        keys: impl FnOnce() -> Vec<&'k [u8]>,
    ) {
        let at = match self.entries.last() {
            Some(e) if Arc::ptr_eq(&e.service, service) => self.entries.len() - 1,
            _ => match self
                .entries
                .iter()
                .position(|e| Arc::ptr_eq(&e.service, service) || e.service == *service)
            {
                Some(i) => i,
                None => self.first(registry, service, scope, keys),
            },
        };
        let e = &mut self.entries[at];
        match item {
            Item::Span => e.spans += 1,
            Item::Log => e.logs += 1,
        }
    }

    /// The service's first item in the request: a new entry, with a sample when wanted.
    #[cold]
    fn first<'k>(
        &mut self,
        registry: &Unrecognised,
        service: &Arc<str>,
        scope: &str,
        keys: impl FnOnce() -> Vec<&'k [u8]>,
    ) -> usize {
        let sampled = registry.wants_sample(service);
        let (keys, scope) = match sampled {
            true => (
                keys()
                    .into_iter()
                    .take(MAX_KEYS)
                    .map(|k| cut(&String::from_utf8_lossy(k)))
                    .collect(),
                (!scope.is_empty()).then(|| cut(scope)),
            ),
            false => (Vec::new(), None),
        };
        self.entries.push(SeenEntry {
            service: service.clone(),
            spans: 0,
            logs: 0,
            keys,
            scope,
        });
        self.entries.len() - 1
    }

    /// Whether nothing was seen.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `s` cut to [`MAX_KEY_BYTES`] on a character boundary, control characters replaced.
fn cut(s: &str) -> Box<str> {
    crate::label::sanitize(s, MAX_KEY_BYTES).value.into()
}

/// Every service's unrecognised items since start, shared by the receivers and the admin API.
#[derive(Debug, Default)]
pub struct Unrecognised {
    inner: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    services: HashMap<Arc<str>, ServiceEntry>,
    overflow: Overflow,
}

#[derive(Debug, Default, Clone, Serialize)]
struct Overflow {
    /// Services turned away at the cap.
    services: u64,
    spans: u64,
    log_records: u64,
}

#[derive(Debug, Default)]
struct ServiceEntry {
    spans: u64,
    logs: u64,
    keys: BTreeSet<Box<str>>,
    keys_dropped: u64,
    scopes: BTreeSet<Box<str>>,
    samples: u32,
    first_seen: u64,
    last_seen: u64,
}

impl Unrecognised {
    /// Whether the next item of `service` should have its keys read.
    fn wants_sample(&self, service: &Arc<str>) -> bool {
        let Ok(r) = self.inner.lock() else {
            return false;
        };
        match r.services.get(service) {
            Some(e) => e.samples < SAMPLES_PER_SERVICE,
            None => r.services.len() < MAX_SERVICES,
        }
    }

    /// Adds the counts of one request; logs each service the first time it is seen (its name
    /// and keys, never values).
    pub(crate) fn merge(&self, seen: Seen) {
        if seen.is_empty() {
            return;
        }
        let now = crate::collector::clock::now_unix();
        let Ok(mut r) = self.inner.lock() else {
            return;
        };
        for s in seen.entries {
            let full = r.services.len() >= MAX_SERVICES;
            let entry = match r.services.get_mut(&s.service) {
                Some(e) => e,
                None if full => {
                    r.overflow.services += 1;
                    r.overflow.spans += s.spans;
                    r.overflow.log_records += s.logs;
                    continue;
                }
                None => r.services.entry(s.service.clone()).or_insert(ServiceEntry {
                    first_seen: now,
                    ..ServiceEntry::default()
                }),
            };
            let new = entry.spans + entry.logs == 0;
            entry.spans += s.spans;
            entry.logs += s.logs;
            entry.last_seen = now;
            if !s.keys.is_empty() || s.scope.is_some() {
                entry.samples += 1;
            }
            for k in s.keys {
                if entry.keys.contains(&k) {
                    continue;
                }
                match entry.keys.len() < MAX_KEYS {
                    true => {
                        entry.keys.insert(k);
                    }
                    false => entry.keys_dropped += 1,
                }
            }
            if let Some(scope) = s.scope {
                if entry.scopes.len() < MAX_SCOPES {
                    entry.scopes.insert(scope);
                }
            }
            if new {
                let keys: Vec<&str> = entry.keys.iter().map(|k| &**k).collect();
                let scopes: Vec<&str> = entry.scopes.iter().map(|k| &**k).collect();
                tracing::info!(
                    service = %s.service,
                    spans = s.spans,
                    log_records = s.logs,
                    keys = ?keys,
                    scopes = ?scopes,
                    recipe = %recipe(&keys, &scopes),
                    "Received spans or log records that are no tool call (keys shown, never \
                     values); see /api/v1/unrecognised."
                );
            }
        }
    }

    /// What `/api/v1/unrecognised` answers.
    pub fn view(&self) -> UnrecognisedView {
        let Ok(r) = self.inner.lock() else {
            return UnrecognisedView::default();
        };
        let mut services: Vec<ServiceView> = r
            .services
            .iter()
            .map(|(name, e)| {
                let keys: Vec<String> = e.keys.iter().map(|k| k.to_string()).collect();
                let scopes: Vec<String> = e.scopes.iter().map(|k| k.to_string()).collect();
                let recipe = recipe(
                    &keys.iter().map(String::as_str).collect::<Vec<_>>(),
                    &scopes.iter().map(String::as_str).collect::<Vec<_>>(),
                );
                ServiceView {
                    service: name.to_string(),
                    spans: e.spans,
                    log_records: e.logs,
                    keys,
                    keys_not_kept: e.keys_dropped,
                    scopes,
                    first_seen_unix: e.first_seen,
                    last_seen_unix: e.last_seen,
                    recipe,
                }
            })
            .collect();
        services.sort_by(|a, b| {
            (b.spans + b.log_records)
                .cmp(&(a.spans + a.log_records))
                .then_with(|| a.service.cmp(&b.service))
        });
        UnrecognisedView {
            unrecognised: services,
            overflow: OverflowView {
                services: r.overflow.services,
                spans: r.overflow.spans,
                log_records: r.overflow.log_records,
            },
            recipe_doc: RECIPE_DOC,
        }
    }
}

/// `/api/v1/unrecognised`: per service, the spans and log records that were no tool call.
#[derive(Debug, Default, Clone, Serialize)]
pub struct UnrecognisedView {
    /// Services, most items first.
    pub unrecognised: Vec<ServiceView>,
    /// Items of services past the cap of [`MAX_SERVICES`].
    overflow: OverflowView,
    /// Where the recipe is.
    recipe_doc: &'static str,
}

/// Items of services past the cap.
#[derive(Debug, Default, Clone, Serialize)]
struct OverflowView {
    services: u64,
    spans: u64,
    log_records: u64,
}

/// One service's unrecognised items.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceView {
    /// `service.name`, cut and cleaned as series names are.
    pub service: String,
    /// Spans that were no tool call.
    pub spans: u64,
    /// Log records that were no tool call.
    pub log_records: u64,
    /// Attribute keys of the first few (keys only, never values), sorted.
    pub keys: Vec<String>,
    /// Further distinct keys seen but not kept.
    pub keys_not_kept: u64,
    /// Instrumentation scope names of the first few.
    pub scopes: Vec<String>,
    /// When the first arrived, Unix seconds.
    pub first_seen_unix: u64,
    /// When the last arrived, Unix seconds.
    pub last_seen_unix: u64,
    /// What to switch on, from the keys and scopes seen.
    pub recipe: String,
}

/// One hint: when a key or scope starts with `prefix`, the framework and its switch.
struct Hint {
    prefix: &'static str,
    what: &'static str,
}

/// Hints in order; the first whose prefix a key or scope has is given.
const HINTS: &[Hint] = &[
    Hint {
        prefix: "openinference",
        what: "OpenInference spans arrive but none is a TOOL span: install the instrumentation \
               of the framework that runs the tools (e.g. openinference-instrumentation-langchain) \
               and keep OPENINFERENCE_HIDE_OUTPUTS unset",
    },
    Hint {
        prefix: "traceloop",
        what: "OpenLLMetry spans arrive but none is a tool: wrap the tools in its @tool \
               decorator, and keep TRACELOOP_TRACE_CONTENT unset",
    },
    Hint {
        prefix: "pydantic-ai",
        what: "pydantic-ai spans arrive but no tool span: call Agent.instrument_all() (or \
               Agent(..., instrument=True))",
    },
    Hint {
        prefix: "logfire",
        what: "Logfire spans arrive but no tool span: call Agent.instrument_all() for \
               pydantic-ai, or instrument the framework that runs the tools",
    },
    Hint {
        prefix: "ai.",
        what: "Vercel AI SDK spans arrive but no ai.toolCall span: pass \
               experimental_telemetry: { isEnabled: true } to each generateText/streamText call",
    },
    Hint {
        prefix: "gen_ai.",
        what: "GenAI spans arrive but none has gen_ai.operation.name=execute_tool with a \
               gen_ai.tool.name: turn on your framework's tool tracing",
    },
];

/// What to switch on for a service whose items carried `keys` under `scopes`.
fn recipe(keys: &[&str], scopes: &[&str]) -> String {
    let hint = HINTS
        .iter()
        .find(|h| keys.iter().chain(scopes).any(|k| k.starts_with(h.prefix)));
    let what = hint.map_or(
        "no span is a tool call: turn on your framework's tracing switch, or set \
         gen_ai.operation.name=execute_tool, gen_ai.tool.name and tool.result.bytes on your \
         tool spans",
        |h| h.what,
    );
    format!("{what} (see {RECIPE_DOC})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn counts_per_service_with_keys_of_the_first_only() {
        let r = Unrecognised::default();
        let svc = service("agent");
        let mut seen = Seen::default();
        seen.add(&r, &svc, "my.scope", Item::Span, || {
            vec![b"http.method".as_slice(), b"gen_ai.request.model"]
        });
        // Later items of the same request are counted, never read.
        for _ in 0..3 {
            seen.add(&r, &svc, "my.scope", Item::Span, || {
                panic!("keys read twice in one request")
            });
        }
        seen.add(&r, &svc, "my.scope", Item::Log, || unreachable!());
        r.merge(seen);
        let v = r.view();
        assert_eq!(v.unrecognised.len(), 1);
        let s = &v.unrecognised[0];
        assert_eq!((s.spans, s.log_records), (4, 1));
        assert_eq!(s.keys, ["gen_ai.request.model", "http.method"]);
        assert_eq!(s.scopes, ["my.scope"]);
        assert!(
            s.recipe.contains("gen_ai.operation.name=execute_tool"),
            "{}",
            s.recipe
        );
        assert!(s.recipe.ends_with("(see docs/collector.md#the-recipe)"));
    }

    #[test]
    fn bounded_in_services_keys_and_length() {
        let r = Unrecognised::default();
        for n in 0..MAX_SERVICES + 3 {
            let mut seen = Seen::default();
            seen.add(&r, &service(&format!("s{n}")), "", Item::Span, Vec::new);
            r.merge(seen);
        }
        let v = r.view();
        assert_eq!(v.unrecognised.len(), MAX_SERVICES);
        assert_eq!((v.overflow.services, v.overflow.spans), (3, 3));

        let r = Unrecognised::default();
        let svc = service("wide");
        for round in 0..SAMPLES_PER_SERVICE + 2 {
            let mut seen = Seen::default();
            // More keys than are read, the first one long.
            let batch: Vec<Vec<u8>> = std::iter::once(format!("{}{round}", "k".repeat(500)))
                .chain((1..MAX_KEYS * 2).map(|i| format!("key{round}.{i}")))
                .map(String::into_bytes)
                .collect();
            seen.add(&r, &svc, "", Item::Span, || {
                batch.iter().map(Vec::as_slice).collect()
            });
            r.merge(seen);
        }
        let s = &r.view().unrecognised[0];
        assert_eq!(s.keys.len(), MAX_KEYS);
        assert!(s.keys.iter().all(|k| k.len() <= MAX_KEY_BYTES));
        // Sampled SAMPLES_PER_SERVICE times, then only counted.
        assert_eq!(s.spans, u64::from(SAMPLES_PER_SERVICE) + 2);
        assert_eq!(
            s.keys_not_kept,
            u64::from(SAMPLES_PER_SERVICE - 1) * (MAX_KEYS as u64 - 1)
        );
    }

    #[test]
    fn the_recipe_names_the_framework_its_keys_show() {
        assert!(recipe(&["openinference.span.kind"], &[]).starts_with("OpenInference"));
        assert!(recipe(&["traceloop.span.kind"], &[]).starts_with("OpenLLMetry"));
        assert!(recipe(&[], &["pydantic-ai"]).starts_with("pydantic-ai"));
        assert!(recipe(&["http.method"], &[]).starts_with("no span is a tool call"));
    }
}
