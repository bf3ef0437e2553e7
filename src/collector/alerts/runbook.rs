//! The alert runbook (`docs/runbook.md`, compiled in) as one HTML page for `GET /runbook`.
//!
//! Every alert, built in or in `alerts/toolsize.rules.yml`, links to `/runbook#<alertname in
//! lowercase>`: each `##` heading gets that id (the anchor GitHub gives the same heading), so
//! the link works from Alertmanager, Grafana or the repository alike. Rendered once, on first
//! use.

use std::sync::OnceLock;

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// The runbook's Markdown source.
pub(crate) const SOURCE: &str = include_str!("../../../docs/runbook.md");

/// The anchor of a heading: its letters and digits, lowercased (`ToolResultOverCeiling` →
/// `toolresultoverceiling`).
pub(crate) fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
/// The anchors of the runbook's `##` sections, in order.
pub(crate) fn anchors() -> Vec<String> {
    sections(SOURCE).into_iter().map(|(a, _)| a).collect()
}

/// (anchor, heading text) of every `##` heading of `markdown`.
fn sections(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for ev in Parser::new_ext(markdown, Options::empty()) {
        match ev {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H2,
                ..
            }) => current = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(c) = &mut current {
                    c.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(HeadingLevel::H2)) => {
                if let Some(text) = current.take() {
                    out.push((anchor(&text), text));
                }
            }
            _ => {}
        }
    }
    out
}

/// `markdown` as a standalone HTML page, each `##` heading with its anchor as `id`.
pub(crate) fn render(markdown: &str) -> String {
    let mut ids = sections(markdown).into_iter().map(|(a, _)| a);
    let events = Parser::new_ext(markdown, Options::ENABLE_TABLES).map(|ev| match ev {
        Event::Start(Tag::Heading {
            level: HeadingLevel::H2,
            id: None,
            classes,
            attrs,
        }) => Event::Start(Tag::Heading {
            level: HeadingLevel::H2,
            id: ids.next().map(CowStr::from),
            classes,
            attrs,
        }),
        other => other,
    });
    let mut body = String::with_capacity(markdown.len() * 2);
    pulldown_cmark::html::push_html(&mut body, events);
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>toolsize runbook</title><style>\
         body{{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1b1f24}}\
         code,pre{{font:13px ui-monospace,monospace;background:#f3f4f6;border-radius:4px}}\
         code{{padding:0 .25rem}}pre{{padding:.75rem;overflow:auto}}\
         h2{{border-top:1px solid #d0d7de;padding-top:1rem;margin-top:2rem}}\
         h2:target{{background:#fff8c5}}\
         </style></head><body>\n{body}</body></html>\n"
    )
}

/// The runbook page, rendered once.
pub(crate) fn html() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| render(SOURCE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_two_headings_get_their_anchor_as_id() {
        let page = render("# Title\n\n## ToolResultOverCeiling\n\nText with `code`.\n\n## Other `One`\n\n### Sub\n");
        assert!(
            page.contains("<h2 id=\"toolresultoverceiling\">ToolResultOverCeiling</h2>"),
            "{page}"
        );
        assert!(page.contains("<h2 id=\"otherone\">"), "{page}");
        assert!(page.contains("<h3>Sub</h3>"), "{page}");
        assert!(page.contains("<code>code</code>"));
    }

    #[test]
    fn html_in_the_source_is_escaped_in_code() {
        let page = render("## A\n\n`<script>`\n");
        assert!(page.contains("&lt;script&gt;"));
    }

    #[test]
    fn the_runbook_has_a_section_per_built_in_alert() {
        let anchors = anchors();
        for name in crate::collector::alerts::BUILT_IN {
            assert!(
                anchors.contains(&anchor(name)),
                "no runbook section for {name}"
            );
        }
    }
}
