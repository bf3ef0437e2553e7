//! Pagination: pages of rows with an opaque cursor and a total estimate, fetched with the
//! page-size-plus-one trick, and the schema fragment that tells a model how to ask for more.
//!
//! Paging is the cure for an oversized result: instead of cutting a list, hand over one page and
//! say how to get the next. A [`PageRequest`] asks the backend for `page_size + 1` rows; if that
//! extra row comes back there is a next page, and it is dropped from this one — no `COUNT(*)`
//! needed to know whether to offer a cursor. A requested page size outside `1..=max` is clamped
//! and reported as `VALUE_CLAMPED`, never silently. A cursor that does not decode is an error.
//! Cursors are opaque to the model: a version letter and hex, passed back unchanged.

use std::fmt;

use serde::Serialize;
use serde_json::{json, Value};

use crate::guard::envelope::Warning;

/// Rows per page when the caller does not say.
pub const DEFAULT_PAGE_SIZE: usize = 50;

/// Where the next page starts, decoded from a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// Skip this many rows.
    Offset(u64),
    /// Start after this key (keyset pagination).
    After(String),
}

/// An opaque cursor string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Cursor(String);

/// A cursor that was not produced by [`Cursor`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorError;

impl fmt::Display for CursorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid cursor: pass back the `next_cursor` of the previous page unchanged, or omit it for the first page")
    }
}

impl std::error::Error for CursorError {}

use crate::hex::{decode as unhex, encode as hex};

impl Cursor {
    /// A cursor for "skip `offset` rows".
    pub fn offset(offset: u64) -> Self {
        Self(format!("o{}", hex(&offset.to_be_bytes())))
    }

    /// A cursor for "rows after `key`".
    pub fn after(key: &str) -> Self {
        Self(format!("k{}", hex(key.as_bytes())))
    }

    /// The cursor's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Decodes a cursor string.
    pub fn decode(s: &str) -> Result<Position, CursorError> {
        let (tag, body) = s.split_at_checked(1).ok_or(CursorError)?;
        let bytes = unhex(body).ok_or(CursorError)?;
        match tag {
            "o" => {
                let arr: [u8; 8] = bytes.try_into().map_err(|_| CursorError)?;
                Ok(Position::Offset(u64::from_be_bytes(arr)))
            }
            "k" => String::from_utf8(bytes)
                .map(Position::After)
                .map_err(|_| CursorError),
            _ => Err(CursorError),
        }
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One page request: where to start and how many rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// Where to start (`None`: the first page).
    pub position: Option<Position>,
    /// Rows per page.
    pub page_size: usize,
}

impl PageRequest {
    /// Reads the `cursor` and `limit` arguments. A `limit` outside `1..=max_page_size` is clamped
    /// and reported as a `VALUE_CLAMPED` warning for `field`; a bad cursor is an error.
    pub fn from_args(
        cursor: Option<&str>,
        limit: Option<u64>,
        max_page_size: usize,
        field: &str,
    ) -> Result<(Self, Vec<Warning>), CursorError> {
        let position = cursor.map(Cursor::decode).transpose()?;
        let max = max_page_size.max(1);
        let mut warnings = Vec::new();
        let page_size = match limit {
            None => DEFAULT_PAGE_SIZE.min(max),
            Some(l) => {
                let applied = (l.min(max as u64) as usize).max(1);
                if applied as u64 != l {
                    warnings.push(Warning::ValueClamped {
                        field: field.to_owned(),
                        requested: json!(l),
                        applied: json!(applied),
                        reason: format!("page size must be between 1 and {max}"),
                    });
                }
                applied
            }
        };
        Ok((
            Self {
                position,
                page_size,
            },
            warnings,
        ))
    }

    /// The first page of `page_size` rows.
    pub fn first(page_size: usize) -> Self {
        Self {
            position: None,
            page_size: page_size.max(1),
        }
    }

    /// How many rows to ask the backend for: one more than the page, to learn whether there is
    /// a next page.
    pub fn fetch_limit(&self) -> usize {
        self.page_size.saturating_add(1)
    }

    /// The offset to start at (0 for the first page or a keyset cursor).
    pub fn offset(&self) -> u64 {
        match self.position {
            Some(Position::Offset(o)) => o,
            _ => 0,
        }
    }
}

/// One page of rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page<T> {
    /// The rows of this page.
    pub rows: Vec<T>,
    /// Pass this as `cursor` to get the next page; `null` on the last page.
    pub next_cursor: Option<Cursor>,
    /// Whether there is a next page.
    pub has_more: bool,
    /// Roughly how many rows there are in all, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_estimate: Option<u64>,
}

impl<T> Page<T> {
    /// Builds a page from up to [`PageRequest::fetch_limit`] fetched rows: the extra row, if
    /// any, is dropped and means there is a next page, whose cursor `next` makes from the last
    /// row kept.
    pub fn from_fetched(
        mut rows: Vec<T>,
        request: &PageRequest,
        next: impl FnOnce(&T) -> Cursor,
    ) -> Self {
        let has_more = rows.len() > request.page_size;
        rows.truncate(request.page_size);
        let next_cursor = if has_more {
            rows.last().map(next)
        } else {
            None
        };
        Self {
            has_more: next_cursor.is_some(),
            rows,
            next_cursor,
            total_estimate: None,
        }
    }

    /// Builds an offset-paged page: the next cursor skips the rows of this page.
    pub fn from_offset(rows: Vec<T>, request: &PageRequest) -> Self {
        let next = request.offset() + request.page_size as u64;
        Self::from_fetched(rows, request, |_| Cursor::offset(next))
    }

    /// Sets the total estimate.
    pub fn total_estimate(mut self, total: u64) -> Self {
        self.total_estimate = Some(total);
        self
    }
}

/// The JSON Schema fragment for a paged tool's `cursor` and `limit` arguments, with descriptions
/// that tell the model how to ask for the next page. Merge its `properties` into the tool's
/// input schema.
pub fn schema_fragment(default_page_size: usize, max_page_size: usize) -> Value {
    json!({
        "type": "object",
        "description": "Results are paged. A response holds `rows`, `has_more`, `next_cursor` and, when known, `total_estimate`. While `has_more` is true, call again with the same arguments and `cursor` set to `next_cursor` to get the next page. Prefer narrowing the query over reading every page.",
        "properties": {
            "cursor": {
                "type": "string",
                "description": "Opaque cursor from the previous response's `next_cursor`, passed back unchanged. Omit it for the first page."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": max_page_size,
                "default": default_page_size,
                "description": format!("Rows per page, 1 to {max_page_size}; larger values are clamped and reported as VALUE_CLAMPED.")
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip() {
        assert_eq!(
            Cursor::decode(Cursor::offset(1234).as_str()),
            Ok(Position::Offset(1234))
        );
        assert_eq!(
            Cursor::decode(Cursor::after("user:é").as_str()),
            Ok(Position::After("user:é".into()))
        );
        assert_eq!(Cursor::decode("zz"), Err(CursorError));
        assert_eq!(Cursor::decode(""), Err(CursorError));
        assert_eq!(Cursor::decode("o12"), Err(CursorError));
    }

    #[test]
    fn plus_one_trick() {
        let req = PageRequest::first(3);
        assert_eq!(req.fetch_limit(), 4);
        let page = Page::from_offset(vec![1, 2, 3, 4], &req).total_estimate(10);
        assert_eq!(page.rows, vec![1, 2, 3]);
        assert!(page.has_more);
        let next = page.next_cursor.clone().unwrap();
        let (req2, w) = PageRequest::from_args(Some(next.as_str()), Some(3), 100, "limit").unwrap();
        assert!(w.is_empty());
        assert_eq!(req2.offset(), 3);
        let last = Page::from_offset(vec![4, 5], &req2);
        assert!(!last.has_more);
        assert_eq!(last.next_cursor, None);
        let v = serde_json::to_value(&page).unwrap();
        assert_eq!(v["total_estimate"], json!(10));
    }

    #[test]
    fn oversized_limit_is_clamped_loudly() {
        let (req, w) = PageRequest::from_args(None, Some(10_000), 500, "limit").unwrap();
        assert_eq!(req.page_size, 500);
        assert_eq!(w.len(), 1);
        let (req, w) = PageRequest::from_args(None, Some(0), 500, "limit").unwrap();
        assert_eq!(req.page_size, 1);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn fragment_mentions_next_cursor() {
        let f = schema_fragment(50, 500);
        assert!(f["description"].as_str().unwrap().contains("next_cursor"));
        assert_eq!(f["properties"]["limit"]["maximum"], json!(500));
    }
}
