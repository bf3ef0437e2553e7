//! Marked head+tail truncation of text to a byte budget.
//!
//! A cut keeps the start and the end of the text (the command line and the final error message
//! both survive) and puts a marker between them saying how many bytes were left out of how many:
//! `[... toolsize: omitted 12000 of 20000 bytes ...]`. The split point respects UTF-8, so the
//! output is always valid UTF-8, and the output *including* the marker (and the optional
//! `<START_TOOL_OUTPUT>` / `<END_TOOL_OUTPUT>` wrapper) never exceeds the budget. The work is one
//! pass over the boundaries plus one copy of the kept bytes; nothing here allocates more than the
//! output. With a budget too small for any marker (below about 50 bytes) the output is the
//! shortest marker that fits, or empty; [`TextCut::truncated`] still says a cut happened.

use crate::guard::envelope::{Unit, Warning};

/// Share of the kept bytes taken from the head of the text by default; the rest comes from the
/// tail.
pub const DEFAULT_HEAD_RATIO: f64 = 0.5;

/// First line of the wrapper used with [`TextTruncator::inspect_wrapper`] (the `{tool}` part is
/// the tool's name).
const WRAP_INTRO: &str = "The output of your call to ";
const WRAP_INTRO_END: &str =
    " was too long to be displayed.\nHere is a truncated version:\n<START_TOOL_OUTPUT>\n";
const WRAP_END: &str = "\n<END_TOOL_OUTPUT>";
/// Used when the budget is too small for the full marker.
const SHORT_MARKER: &str = "[...truncated...]";

/// The marker put between head and tail.
pub fn marker(omitted: u64, total: u64) -> String {
    format!("\n[... toolsize: omitted {omitted} of {total} bytes ...]\n")
}

/// Cuts text to a byte budget, keeping head and tail. Built by value.
#[derive(Debug, Clone)]
pub struct TextTruncator {
    budget: usize,
    head_ratio: f64,
    wrapper_tool: Option<String>,
}

/// The result of [`TextTruncator::truncate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCut {
    /// The text to hand on: the original when it fit, else head + marker + tail (wrapped if asked).
    pub text: String,
    /// Whether anything was cut.
    pub truncated: bool,
    /// Bytes of the input.
    pub original_bytes: u64,
    /// Bytes kept from the start of the input.
    pub head_bytes: u64,
    /// Bytes kept from the end of the input.
    pub tail_bytes: u64,
}

impl TextCut {
    /// Bytes of the input left out.
    pub fn omitted_bytes(&self) -> u64 {
        self.original_bytes - self.head_bytes - self.tail_bytes
    }

    /// The `FIELD_TRUNCATED` warning describing this cut at `field`, or `None` when nothing was
    /// cut. Lengths are in bytes; `truncated_length` counts the kept input bytes, not the marker.
    pub fn warning(&self, field: &str) -> Option<Warning> {
        self.truncated.then(|| {
            Warning::truncated(
                field,
                Some(self.original_bytes),
                self.head_bytes + self.tail_bytes,
                Unit::Bytes,
            )
        })
    }
}

impl TextTruncator {
    /// A truncator for `budget` bytes with [`DEFAULT_HEAD_RATIO`] and no wrapper.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            head_ratio: DEFAULT_HEAD_RATIO,
            wrapper_tool: None,
        }
    }

    /// Share of the kept bytes taken from the head, clamped to `0.0..=1.0` (NaN means the default).
    pub fn head_ratio(mut self, ratio: f64) -> Self {
        self.head_ratio = if ratio.is_nan() {
            DEFAULT_HEAD_RATIO
        } else {
            ratio.clamp(0.0, 1.0)
        };
        self
    }

    /// Wraps a cut output the way Inspect does: `The output of your call to {tool} was too long
    /// to be displayed. Here is a truncated version: <START_TOOL_OUTPUT> … <END_TOOL_OUTPUT>`.
    /// The wrapper counts against the budget; it is dropped when the budget cannot hold it.
    pub fn inspect_wrapper(mut self, tool: impl Into<String>) -> Self {
        self.wrapper_tool = Some(tool.into());
        self
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Cuts `text` to the budget. Returns it unchanged when it fits.
    pub fn truncate(&self, text: &str) -> TextCut {
        let total = text.len();
        if total <= self.budget {
            return TextCut {
                text: text.to_owned(),
                truncated: false,
                original_bytes: total as u64,
                head_bytes: total as u64,
                tail_bytes: 0,
            };
        }
        // The marker's real length is at most this (the omitted count has at most as many
        // digits as the total).
        let marker_max = marker(total as u64, total as u64).len();
        let (prefix, suffix) = match &self.wrapper_tool {
            Some(tool) => (format!("{WRAP_INTRO}{tool}{WRAP_INTRO_END}"), WRAP_END),
            None => (String::new(), ""),
        };
        let overhead_wrapped = prefix.len() + suffix.len() + marker_max;
        let (prefix, suffix, content) = if overhead_wrapped <= self.budget {
            (prefix.as_str(), suffix, self.budget - overhead_wrapped)
        } else if marker_max <= self.budget {
            ("", "", self.budget - marker_max)
        } else {
            let text = if SHORT_MARKER.len() <= self.budget {
                SHORT_MARKER.to_owned()
            } else {
                String::new()
            };
            return TextCut {
                text,
                truncated: true,
                original_bytes: total as u64,
                head_bytes: 0,
                tail_bytes: 0,
            };
        };
        let head_want = ((content as f64) * self.head_ratio).floor() as usize;
        let head = floor_char_boundary(text, head_want.min(content));
        let tail_want = content - head;
        let tail_start = ceil_char_boundary(text, total - tail_want);
        let omitted = tail_start - head;
        let mark = marker(omitted as u64, total as u64);
        let mut out = String::with_capacity(
            prefix.len() + head + mark.len() + total - tail_start + suffix.len(),
        );
        out.push_str(prefix);
        out.push_str(&text[..head]);
        out.push_str(&mark);
        out.push_str(&text[tail_start..]);
        out.push_str(suffix);
        debug_assert!(out.len() <= self.budget);
        TextCut {
            text: out,
            truncated: true,
            original_bytes: total as u64,
            head_bytes: head as u64,
            tail_bytes: (total - tail_start) as u64,
        }
    }
}

/// The largest char boundary at or below `index`.
pub(crate) fn floor_char_boundary(s: &str, index: usize) -> usize {
    if index >= s.len() {
        return s.len();
    }
    let mut i = index;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary at or above `index`.
pub(crate) fn ceil_char_boundary(s: &str, index: usize) -> usize {
    if index >= s.len() {
        return s.len();
    }
    let mut i = index;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_untouched() {
        let cut = TextTruncator::new(100).truncate("hello");
        assert!(!cut.truncated);
        assert_eq!(cut.text, "hello");
        assert!(cut.warning("result").is_none());
    }

    #[test]
    fn long_text_keeps_head_and_tail_with_marker() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let cut = TextTruncator::new(200).truncate(&text);
        assert!(cut.truncated);
        assert!(cut.text.len() <= 200);
        assert!(cut.text.starts_with("abcdef"));
        assert!(cut.text.ends_with(&text[text.len() - 10..]));
        assert!(cut
            .text
            .contains(&format!("omitted {} of 1000 bytes", cut.omitted_bytes())));
        assert_eq!(cut.head_bytes + cut.tail_bytes + cut.omitted_bytes(), 1000);
    }

    #[test]
    fn never_splits_a_character() {
        let text = "é漢🙂".repeat(300);
        for budget in [60, 61, 62, 63, 64, 100, 333] {
            let cut = TextTruncator::new(budget).head_ratio(0.3).truncate(&text);
            assert!(cut.text.len() <= budget, "budget {budget}");
            // Valid UTF-8 by construction (it is a String); head and tail are whole chars.
            assert!(text.is_char_boundary(cut.head_bytes as usize));
            assert!(text.is_char_boundary(text.len() - cut.tail_bytes as usize));
        }
    }

    #[test]
    fn inspect_wrapper_fits_in_budget() {
        let text = "x".repeat(50_000);
        let cut = TextTruncator::new(16_384)
            .inspect_wrapper("bash")
            .truncate(&text);
        assert!(cut.text.len() <= 16_384);
        assert!(cut
            .text
            .starts_with("The output of your call to bash was too long"));
        assert!(cut.text.contains("<START_TOOL_OUTPUT>\n"));
        assert!(cut.text.ends_with("\n<END_TOOL_OUTPUT>"));
    }

    #[test]
    fn tiny_budgets_stay_within_budget() {
        let text = "y".repeat(1000);
        for budget in 0..80 {
            let cut = TextTruncator::new(budget)
                .inspect_wrapper("t")
                .truncate(&text);
            assert!(cut.text.len() <= budget);
            assert!(cut.truncated);
        }
    }

    #[test]
    fn head_ratio_one_keeps_only_head() {
        let text = "0123456789".repeat(100);
        let cut = TextTruncator::new(100).head_ratio(1.0).truncate(&text);
        assert_eq!(cut.tail_bytes, 0);
        assert!(cut.text.starts_with("0123456789"));
    }
}
