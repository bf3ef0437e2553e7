//! Series keys: (service, tool) pairs looked up by borrowed strings on the hot path (one hash,
//! no allocation unless the series is new).

use serde::{Deserialize, Serialize};

use crate::collector::hash::bytes_eq;

/// A (service, tool) pair.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct SeriesKey {
    /// `service.name`.
    pub(crate) service: String,
    /// Tool name.
    pub(crate) tool: String,
}

/// Borrowed form of [`SeriesKey`] for allocation-free lookups.
pub(crate) struct SeriesKeyRef<'a> {
    pub(crate) service: &'a str,
    pub(crate) tool: &'a str,
}

pub(crate) trait KeyLike {
    fn parts(&self) -> (&str, &str);
}

impl KeyLike for SeriesKey {
    fn parts(&self) -> (&str, &str) {
        (&self.service, &self.tool)
    }
}

impl KeyLike for SeriesKeyRef<'_> {
    fn parts(&self) -> (&str, &str) {
        (self.service, self.tool)
    }
}

impl<'a> std::borrow::Borrow<dyn KeyLike + 'a> for SeriesKey {
    fn borrow(&self) -> &(dyn KeyLike + 'a) {
        self
    }
}

impl PartialEq for dyn KeyLike + '_ {
    fn eq(&self, o: &Self) -> bool {
        let ((s, t), (os, ot)) = (self.parts(), o.parts());
        bytes_eq(t.as_bytes(), ot.as_bytes()) && bytes_eq(s.as_bytes(), os.as_bytes())
    }
}

impl Eq for dyn KeyLike + '_ {}

impl std::hash::Hash for dyn KeyLike + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let (s, t) = self.parts();
        s.hash(h);
        t.hash(h);
    }
}

impl std::hash::Hash for SeriesKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.service.hash(h);
        self.tool.hash(h);
    }
}
