//! The reading order docs/collector.md states (which emitter's measured size and result content
//! is read first when a span carries several), compared with the ranks the code declares:
//! `read: Some(n)` on the entries of `for_each_span_emitter!`. An entry re-ranked, or a size or
//! result key added, fails here until the docs say the same.
//!
//! The list is read from the source text (the recognition tables are internal to the crate),
//! each key resolved to its string: a literal, a constant of the emitters' file or of
//! `semconv`.

use super::read;

/// The file holding `for_each_span_emitter!`.
const EMITTERS_FILE: &str = "src/collector/ingest/recognize/emitters.rs";
/// Where docs/collector.md's list of measured-size attributes begins.
const SIZES: &str = "Measured sizes, read first:";
/// Where docs/collector.md's list of result-content attributes begins.
const RESULTS: &str = "Result content, read when no size is:";

/// The string a key expression of the emitters' file names.
fn resolve(expr: &str, emitters: &str, semconv: &str) -> String {
    let expr = expr.trim();
    if let Some(lit) = expr.strip_prefix('"') {
        return lit.trim_end_matches('"').to_string();
    }
    let name = expr.rsplit("::").next().unwrap_or(expr);
    let source = match expr.starts_with("semconv::") {
        true => semconv,
        false => emitters,
    };
    let value = source
        .split(&format!("const {name}: &str = "))
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or_else(|| panic!("{EMITTERS_FILE}: `{expr}` declared nowhere"));
    resolve(value, emitters, semconv)
}

/// The keys of field `field` (`size`, `result`) in an entry's text, in order.
fn keys(entry: &str, field: &str, emitters: &str, semconv: &str) -> Vec<String> {
    let Some(list) = entry
        .split(&format!("{field}: &["))
        .nth(1)
        .and_then(|s| s.split(']').next())
    else {
        return Vec::new();
    };
    let exprs: Vec<&str> = match field {
        // `content(key, encoding, envelope)`: the key is its first argument.
        "result" => list
            .split("content(")
            .skip(1)
            .filter_map(|c| c.split(',').next())
            .collect(),
        _ => list.split(',').filter(|k| !k.trim().is_empty()).collect(),
    };
    exprs
        .into_iter()
        .map(|e| resolve(e, emitters, semconv))
        .collect()
}

/// The size keys and the result keys of the emitters, in reading order (by `read` rank, each
/// entry's keys in their order), each key once.
fn reading_order(emitters: &str, semconv: &str) -> (Vec<String>, Vec<String>) {
    let list = emitters
        .split("macro_rules! for_each_span_emitter")
        .nth(1)
        .and_then(|s| s.split("macro_rules!").next())
        .unwrap_or_else(|| panic!("{EMITTERS_FILE}: no for_each_span_emitter!"));
    // Entries: a line `Name {`, up to the next one.
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in list.lines() {
        let head = line.trim().strip_suffix(" {").filter(|n| {
            n.starts_with(|c: char| c.is_ascii_uppercase())
                && n.chars().all(|c| c.is_ascii_alphanumeric())
        });
        match (head, entries.last_mut()) {
            (Some(name), _) => entries.push((name.to_string(), String::new())),
            (None, Some((_, body))) => body.push_str(&format!("{line}\n")),
            (None, None) => {}
        }
    }
    assert!(
        entries.len() > 10,
        "{EMITTERS_FILE}: {} entries",
        entries.len()
    );
    let mut ranked = Vec::new();
    for (name, body) in &entries {
        let (size, result) = (
            keys(body, "size", emitters, semconv),
            keys(body, "result", emitters, semconv),
        );
        let rank = body
            .split("read: Some(")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .map(|n| n.parse::<u32>().expect("a rank"));
        match rank {
            Some(rank) => ranked.push((rank, size, result)),
            None => assert!(
                size.is_empty() && result.is_empty(),
                "{name} reads keys without a `read` rank"
            ),
        }
    }
    ranked.sort_by_key(|(rank, _, _)| *rank);
    let mut order = (Vec::<String>::new(), Vec::<String>::new());
    for (_, size, result) in ranked {
        for k in size {
            if !order.0.contains(&k) {
                order.0.push(k);
            }
        }
        for k in result {
            if !order.1.contains(&k) {
                order.1.push(k);
            }
        }
    }
    order
}

/// The code spans of the sentence of `doc` after `marker`, in order (line breaks read as
/// spaces; the sentence ends at `;` or at a full stop outside a code span).
fn documented(doc: &str, marker: &str) -> Vec<String> {
    let text = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(rest) = text.split(marker).nth(1) else {
        return Vec::new();
    };
    let mut spans = Vec::new();
    for (i, part) in rest.split('`').enumerate() {
        if i % 2 == 1 {
            spans.push(part.to_string());
        } else if part.contains(';') || part.contains(". ") {
            break;
        }
    }
    spans
}

/// Where `doc`'s lists differ from the code's order, as problems.
fn order_problems(doc: &str, sizes: &[String], results: &[String]) -> Vec<String> {
    [(SIZES, sizes), (RESULTS, results)]
        .into_iter()
        .filter_map(|(marker, code)| {
            let said = documented(doc, marker);
            (said != code).then(|| {
                format!(
                    "docs/collector.md, after {marker:?}: {said:?}, while the `read` ranks of \
                     {EMITTERS_FILE} read {code:?}"
                )
            })
        })
        .collect()
}

#[test]
fn the_documented_reading_order_is_the_ranks_of_the_emitters() {
    let (sizes, results) = reading_order(&read(EMITTERS_FILE), &read("src/semconv.rs"));
    assert!(
        sizes.len() >= 2 && results.len() >= 5,
        "{sizes:?} {results:?}"
    );
    let problems = order_problems(&read("docs/collector.md"), &sizes, &results);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check finds a re-ranked entry and a documented list out of order: a check that cannot
/// fail fails here.
#[test]
fn the_checks_catch_a_changed_reading_order() {
    let (emitters, semconv) = (read(EMITTERS_FILE), read("src/semconv.rs"));
    let doc = read("docs/collector.md");
    let (sizes, results) = reading_order(&emitters, &semconv);
    // OTel GenAI (rank 1) read after toolsize's own (rank 2).
    let reranked = emitters.replacen("read: Some(1),", "read: Some(99),", 1);
    let (sizes_then, results_then) = reading_order(&reranked, &semconv);
    assert_eq!(sizes_then, [sizes[1].clone(), sizes[0].clone()]);
    assert_eq!(results_then.last(), results.first());
    assert_eq!(order_problems(&doc, &sizes_then, &results_then).len(), 2);
    // Two result keys swapped in the docs' list.
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let (head, list) = doc.split_once(RESULTS).expect("the documented list");
    let (a, b) = (format!("`{}`", results[1]), format!("`{}`", results[2]));
    let list = list
        .replacen(&a, "\0", 1)
        .replacen(&b, &a, 1)
        .replacen("\0", &b, 1);
    let swapped = format!("{head}{RESULTS}{list}");
    assert_eq!(order_problems(&swapped, &sizes, &results).len(), 1);
    // A list the docs no longer give.
    assert_eq!(order_problems("", &sizes, &results).len(), 2);
}
