//! Dashboard queries made runnable: Grafana's variables filled in, and the panels the fleet
//! and live tests look for.

use serde_json::Value;

/// Replaces each `(variable, value)` in `expr`, longest variable first (so `$__rate_interval`
/// is not taken for `$__rate`), in both the `$name` and `${name}` forms.
pub fn fill(expr: &str, vars: &[(&str, &str)]) -> String {
    let mut vars = vars.to_vec();
    vars.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    let mut out = expr.to_string();
    for (k, v) in vars {
        let name = k.trim_start_matches('$');
        out = out.replace(&format!("${{{name}}}"), v);
        out = out.replace(&format!("${name}"), v);
    }
    out
}

/// The dashboard's fleet p95 result size per tool: the one query taking the 0.95 quantile of
/// the summed `toolsize_tool_result_size_bytes_bucket` rates by `le` and `tool`.
pub fn p95_size_query(d: &Value) -> String {
    let found: Vec<String> = super::dashboard::targets(d)
        .into_iter()
        .map(|(.., expr, _)| expr)
        .filter(|e| {
            let flat: String = e.split_whitespace().collect();
            flat.starts_with(
                "histogram_quantile(0.95,sumby(le,tool)(rate(toolsize_tool_result_size_bytes_bucket",
            )
        })
        .collect();
    assert!(
        !found.is_empty(),
        "the dashboard has no fleet p95 size query by tool"
    );
    found[0].clone()
}

/// The metric and label names a PromQL expression refers to, found by a small tokenizer
/// (enough for this project's dashboards and rules: selectors, matchers, grouping clauses,
/// `offset`, subqueries and Grafana's `label_values(selector, label)`).
#[derive(Debug, Default, PartialEq)]
pub struct Refs {
    /// Metric names of selectors.
    pub metrics: Vec<String>,
    /// Label names in matchers, grouping clauses and `label_values`.
    pub labels: Vec<String>,
    /// Label names of `by (…)` clauses: what an aggregation keeps.
    pub kept: Vec<String>,
    /// Labels that `label_replace` writes.
    pub written: Vec<String>,
}

const KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const OPERATORS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];

/// The names `expr` refers to. Strings are skipped (their contents are values), as are range
/// and subquery brackets and the duration after `offset`.
pub fn refs(expr: &str) -> Refs {
    #[derive(Debug, PartialEq)]
    enum Tok {
        Ident(String),
        Punct(char),
        Other,
    }
    let mut toks = Vec::new();
    let mut chars = expr.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' || c == '\'' || c == '`' {
            chars.next();
            while let Some(d) = chars.next() {
                if d == '\\' {
                    chars.next();
                } else if d == c {
                    break;
                }
            }
            toks.push(Tok::Other);
        } else if c == '[' {
            // A range or subquery: durations and variables only.
            for d in chars.by_ref() {
                if d == ']' {
                    break;
                }
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let mut id = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' || d == ':' {
                    id.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            toks.push(Tok::Ident(id));
        } else if c.is_ascii_digit() || c == '.' || c == '$' {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_alphanumeric() || *d == '.' || *d == '$' || *d == '_')
            {
                chars.next();
            }
            toks.push(Tok::Other);
        } else {
            toks.push(Tok::Punct(c));
            chars.next();
        }
    }
    let mut r = Refs::default();
    let mut i = 0;
    let mut in_braces = false;
    while i < toks.len() {
        let next = toks.get(i + 1);
        match &toks[i] {
            Tok::Punct('{') => in_braces = true,
            Tok::Punct('}') => in_braces = false,
            Tok::Ident(id) if in_braces => {
                // A label name: the identifier before a matcher operator.
                if matches!(next, Some(Tok::Punct('=' | '!'))) {
                    r.labels.push(id.clone());
                }
            }
            Tok::Ident(id) if id == "label_values" => {
                // Grafana: label_values(selector, label) or label_values(label).
                let close = (i..toks.len())
                    .find(|&j| toks[j] == Tok::Punct(')'))
                    .unwrap_or(toks.len());
                if let Some(Tok::Ident(label)) = toks.get(close.wrapping_sub(1)) {
                    r.labels.push(label.clone());
                }
                let inner = &toks[i + 2..close.saturating_sub(2).max(i + 2)];
                let mut braces = false;
                for (k, t) in inner.iter().enumerate() {
                    match t {
                        Tok::Punct('{') => braces = true,
                        Tok::Punct('}') => braces = false,
                        Tok::Ident(m) if !braces => r.metrics.push(m.clone()),
                        Tok::Ident(l)
                            if braces
                                && matches!(inner.get(k + 1), Some(Tok::Punct('=' | '!'))) =>
                        {
                            r.labels.push(l.clone())
                        }
                        _ => {}
                    }
                }
                i = close;
            }
            Tok::Ident(id) if KEYWORDS.contains(&id.as_str()) && next == Some(&Tok::Punct('(')) => {
                let mut j = i + 2;
                while j < toks.len() && toks[j] != Tok::Punct(')') {
                    if let Tok::Ident(l) = &toks[j] {
                        r.labels.push(l.clone());
                        if id == "by" {
                            r.kept.push(l.clone());
                        }
                    }
                    j += 1;
                }
                i = j;
            }
            // `group_left` without a label list.
            Tok::Ident(id) if KEYWORDS.contains(&id.as_str()) => {}
            Tok::Ident(id) if id == "offset" => i += 1,
            Tok::Ident(id) if OPERATORS.contains(&id.as_str()) => {}
            // `sum by (…) (…)`: the grouping clause comes next.
            Tok::Ident(id)
                if AGGREGATIONS.contains(&id.as_str())
                    && matches!(next, Some(Tok::Ident(k)) if k == "by" || k == "without") => {}
            Tok::Ident(_) if next == Some(&Tok::Punct('(')) => {} // a function
            Tok::Ident(id) => r.metrics.push(id.clone()),
            _ => {}
        }
        i += 1;
    }
    // label_replace(v, "dst", …): the destination is the first string after `, `.
    for (at, _) in expr.match_indices("label_replace(") {
        if let Some(rest) = expr[at..].split_once(", \"").map(|(_, r)| r) {
            let dst: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            r.written.push(dst);
        }
    }
    for v in [&mut r.metrics, &mut r.labels, &mut r.kept, &mut r.written] {
        v.sort();
        v.dedup();
    }
    r
}

/// Series names of a `/metrics` exposition (histograms as their `_bucket`, `_sum` and `_count`
/// series, and under their own name, the native histogram a Prometheus with native histograms
/// keeps) with the label names seen on each.
pub fn exported(
    text: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut out: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            let (name, kind) = (it.next().unwrap(), it.next().unwrap());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    out.entry(format!("{name}{suffix}")).or_default();
                }
            } else {
                out.entry(name.to_string()).or_default();
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let name_end = line.find(['{', ' ']).unwrap();
            let labels = out.entry(line[..name_end].to_string()).or_default();
            if let Some(body) = line[name_end..].strip_prefix('{') {
                // name="value",… with escapes in values.
                let mut chars = body.chars();
                loop {
                    let name: String = chars.by_ref().take_while(|&c| c != '=').collect();
                    let name = name.trim_start_matches(',');
                    if name.is_empty() || name.starts_with('}') {
                        break;
                    }
                    labels.insert(name.to_string());
                    chars.next(); // the opening quote
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => {
                                chars.next();
                            }
                            '"' => break,
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    let natives: Vec<(String, std::collections::BTreeSet<String>)> = out
        .iter()
        .filter_map(|(name, labels)| {
            let family = name.strip_suffix("_count")?;
            out.contains_key(&format!("{family}_bucket"))
                .then(|| (family.to_string(), labels.clone()))
        })
        .collect();
    out.extend(natives);
    out
}

/// Metrics Prometheus makes itself, and the label names they carry.
pub const PROMETHEUS_SERIES: &[(&str, &[&str])] = &[
    ("up", &[]),
    ("ALERTS", &["alertname", "alertstate", "severity"]),
];
/// Labels every scraped series gets.
pub const TARGET_LABELS: &[&str] = &["job", "instance"];

/// Why `expr` names a metric or label the daemon does not export (empty: it does not).
pub fn drift(
    expr: &str,
    exported: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<String> {
    let r = refs(expr);
    let mut problems = Vec::new();
    let mut allowed: std::collections::BTreeSet<String> =
        TARGET_LABELS.iter().map(|s| s.to_string()).collect();
    for m in &r.metrics {
        if let Some(labels) = exported.get(m) {
            allowed.extend(labels.iter().cloned());
        } else if let Some((_, labels)) = PROMETHEUS_SERIES.iter().find(|(n, _)| n == m) {
            allowed.extend(labels.iter().map(|s| s.to_string()));
            if *m == "ALERTS" {
                // An alert carries the labels of the series it fired on.
                allowed.extend(exported.values().flatten().cloned());
            }
        } else {
            problems.push(format!("metric {m:?} is not exported"));
        }
    }
    if r.metrics.is_empty() {
        allowed.extend(exported.values().flatten().cloned());
    }
    for l in &r.labels {
        if !allowed.contains(l) {
            problems.push(format!("label {l:?} is not on {:?}", r.metrics));
        }
    }
    problems
}
