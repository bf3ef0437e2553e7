//! `dashboards/toolsize.json` has what Grafana 11 and 12 need to import it and to provision it
//! from a file: the current schema version, one Prometheus input, the `datasource`, `service` and
//! `tool` variables, unique panel ids, panels that do not overlap, every query on the selected
//! data source and filtered on the selected services and tools, rate windows from Grafana's
//! `$__rate_interval` or `$__range`; and the provisioning files agree with it and the README.
//!
//! Each check is a function of the parsed files returning every problem it finds; the `broken`
//! module feeds each one a damaged copy and expects that problem.

mod support;

use std::collections::{HashMap, HashSet};

use serde_json::Value;
use support::dashboard::{
    self, all_panels, is_row, panels, title, variable, variable_queries, variables,
};

/// The dashboard schema version Grafana 12.0 and 12.1 write (their latest migration is to 41).
/// Later versions migrate 41 upward on load (the migration to 42 only copies `hideFrom.viz` to
/// `hideFrom.tooltip` in field overrides, which this dashboard has none of); Grafana 11 loads it
/// without migrating. A higher value would break Grafana 12.0 and 12.1, whose backend refuses
/// to migrate a dashboard newer than its latest version.
const SCHEMA_VERSION: u64 = 41;
/// The data source every panel and query uses: the `datasource` template variable.
const DS_VAR: &str = "${datasource}";
/// The import input for the Prometheus data source.
const DS_INPUT: &str = "DS_PROMETHEUS";
const SERVICE_QUERY: &str = "label_values(toolsize_tool_calls_total, service)";
const TOOL_QUERY: &str = r#"label_values(toolsize_tool_calls_total{service=~"$service"}, tool)"#;
const SERVICE_FILTER: &str = r#"service=~"$service""#;
const TOOL_FILTER: &str = r#"tool=~"$tool""#;
/// Metrics with `service` and `tool` labels (the daemon's per-tool series) start with this.
const PER_TOOL_PREFIX: &str = "toolsize_tool_";
/// Range selectors Grafana sizes: `$__rate_interval` (at least four scrapes, never shorter than
/// the step) for graphs, `$__range` (the dashboard's time range) for whole-range tables.
const RANGES: [&str; 2] = ["$__rate_interval", "$__range"];
/// Grafana's built-in variables a query may use.
const BUILTIN_VARIABLES: [&str; 6] = [
    "__rate_interval",
    "__range",
    "__range_s",
    "__range_ms",
    "__interval",
    "__interval_ms",
];
/// Legend of each tool's ceiling on the p95 panel.
const CEILING_LEGEND: &str = "ceiling {{tool}}";

/// The ceiling each tool's series are held to (the weakest layer of its own stack), not the
/// smallest limit of every stack the daemon knows.
const CEILING_EXPR: &str =
    r#"min by (tool) (toolsize_tool_result_ceiling_bytes{service=~"$service", tool=~"$tool"})"#;

type Check = Result<(), String>;

fn verdict(problems: Vec<String>) -> Check {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn panel_name(p: &Value) -> String {
    format!("panel {} ({:?})", p["id"], title(p))
}

// ---- PromQL scanning ---------------------------------------------------------------------

/// `expr` with the contents of its string literals blanked (same byte offsets), so that
/// brackets, braces and names inside label values are not taken for syntax.
fn mask_strings(expr: &str) -> String {
    let mut out = Vec::with_capacity(expr.len());
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for &b in expr.as_bytes() {
        match quote {
            None => {
                if matches!(b, b'"' | b'\'' | b'`') {
                    quote = Some(b);
                }
                out.push(b);
            }
            Some(q) => {
                if escaped {
                    escaped = false;
                    out.push(b' ');
                } else if b == b'\\' && q != b'`' {
                    escaped = true;
                    out.push(b' ');
                } else if b == q {
                    quote = None;
                    out.push(b);
                } else {
                    out.push(b' ');
                }
            }
        }
    }
    String::from_utf8(out).expect("masking keeps ASCII bytes and blanks the rest")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

/// (start, name) of every identifier of a masked expression.
fn identifiers(masked: &str) -> Vec<(usize, &str)> {
    let bytes = masked.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let at_boundary = i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == b'$');
        if is_ident(bytes[i]) && at_boundary && !bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            out.push((start, &masked[start..i]));
        } else {
            i += 1;
        }
    }
    out
}

/// The offset of the bracket closing the one at `open`, in a masked expression.
fn closing(masked: &str, open: usize) -> Option<usize> {
    let bytes = masked.as_bytes();
    let (o, c) = match bytes[open] {
        b'(' => (b'(', b')'),
        b'{' => (b'{', b'}'),
        b'[' => (b'[', b']'),
        _ => return None,
    };
    let mut depth = 0;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if b == o {
            depth += 1;
        } else if b == c {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The first non-blank offset at or after `i`.
fn skip_blanks(masked: &str, mut i: usize) -> usize {
    let bytes = masked.as_bytes();
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The per-tool metrics of `expr` whose selector lacks the service or tool filter.
fn unfiltered_per_tool_metrics(expr: &str) -> Vec<String> {
    let masked = mask_strings(expr);
    let mut out = Vec::new();
    for (start, name) in identifiers(&masked) {
        if !name.starts_with(PER_TOOL_PREFIX) {
            continue;
        }
        let after = skip_blanks(&masked, start + name.len());
        let selector = match masked.as_bytes().get(after) {
            Some(b'{') => closing(&masked, after).map(|end| &expr[after..=end]),
            _ => None,
        };
        match selector {
            Some(s) if s.contains(SERVICE_FILTER) && s.contains(TOOL_FILTER) => {}
            Some(s) => out.push(format!("{name}{s}")),
            None => out.push(name.to_string()),
        }
    }
    out
}

/// The problems with the range selectors of `expr`: a range other than [`RANGES`], or a
/// `rate`/`irate`/`increase` without a range.
fn range_problems(expr: &str) -> Vec<String> {
    let masked = mask_strings(expr);
    let mut out = Vec::new();
    for (i, b) in masked.bytes().enumerate() {
        if b == b'[' {
            let range = closing(&masked, i).map(|end| expr[i + 1..end].trim());
            match range {
                Some(r) if RANGES.contains(&r) => {}
                Some(r) => out.push(format!("range [{r}] is neither of {RANGES:?}")),
                None => out.push("unclosed range selector".to_string()),
            }
        }
    }
    for (start, name) in identifiers(&masked) {
        if !matches!(name, "rate" | "irate" | "increase") {
            continue;
        }
        let open = skip_blanks(&masked, start + name.len());
        if masked.as_bytes().get(open) != Some(&b'(') {
            continue;
        }
        match closing(&masked, open) {
            Some(end) if masked[open..end].contains('[') => {}
            _ => out.push(format!("{name}( has no range selector")),
        }
    }
    out
}

/// The names of the variables `expr` uses (`$name` and `${name}` / `${name:format}`).
fn used_variables(expr: &str) -> Vec<String> {
    let bytes = expr.as_bytes();
    let mut out = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        if b != b'$' {
            continue;
        }
        if bytes.get(i + 1) == Some(&b'{') {
            let end = expr[i..].find('}').map_or(expr.len(), |e| i + e);
            let inner = &expr[i + 2..end];
            out.push(inner.split(':').next().unwrap_or("").to_string());
        } else {
            let name: String = expr[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

// ---- the checks --------------------------------------------------------------------------

fn check_schema_version(d: &Value) -> Check {
    match d["schemaVersion"].as_u64() {
        Some(SCHEMA_VERSION) => Ok(()),
        other => Err(format!(
            "schemaVersion is {other:?}, expected {SCHEMA_VERSION}"
        )),
    }
}

fn check_identity(d: &Value) -> Check {
    let mut problems = Vec::new();
    if d["uid"] != "toolsize" {
        problems.push(format!("uid is {}, expected \"toolsize\"", d["uid"]));
    }
    if d["title"] != "toolsize" {
        problems.push(format!("title is {}, expected \"toolsize\"", d["title"]));
    }
    verdict(problems)
}

/// `__inputs` declares the Prometheus input, the dashboard uses it, every `${DS_…}` placeholder
/// is declared, and `__requires` names the data source and every panel type.
fn check_inputs(d: &Value) -> Check {
    let mut problems = Vec::new();
    let inputs: Vec<&Value> = d["__inputs"].as_array().into_iter().flatten().collect();
    let declared: HashSet<&str> = inputs.iter().filter_map(|i| i["name"].as_str()).collect();
    match inputs.iter().find(|i| i["name"] == DS_INPUT) {
        Some(i) if i["type"] == "datasource" && i["pluginId"] == "prometheus" => {}
        Some(i) => problems.push(format!(
            "input {DS_INPUT} must be a prometheus datasource input: {i}"
        )),
        None => problems.push(format!("__inputs has no {DS_INPUT}")),
    }
    let placeholder = format!("${{{DS_INPUT}}}");
    let datasource_default = variable(d, "datasource").map(|v| &v["current"]["value"]);
    if datasource_default.and_then(Value::as_str) != Some(placeholder.as_str()) {
        problems.push(format!(
            "the datasource variable's current value must be {placeholder}, so an import sets it \
             to the data source picked for the input (found {datasource_default:?})"
        ));
    }
    let text = d.to_string();
    for (at, _) in text.match_indices("${DS_") {
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !declared.contains(name.as_str()) {
            problems.push(format!("${{{name}}} is used but not declared in __inputs"));
        }
    }

    let requires: Vec<&Value> = d["__requires"].as_array().into_iter().flatten().collect();
    let required =
        |kind: &str, id: &str| requires.iter().any(|r| r["type"] == kind && r["id"] == id);
    if !required("grafana", "grafana") {
        problems.push("__requires does not name grafana".to_string());
    }
    if !required("datasource", "prometheus") {
        problems.push("__requires does not name the prometheus datasource".to_string());
    }
    let kinds: HashSet<&str> = panels(d)
        .iter()
        .filter_map(|p| p["type"].as_str())
        .collect();
    for kind in kinds {
        if !required("panel", kind) {
            problems.push(format!("__requires does not name the panel type {kind:?}"));
        }
    }
    verdict(problems)
}

fn check_query_variable(d: &Value, name: &str, query: &str, problems: &mut Vec<String>) {
    let Some(v) = variable(d, name) else {
        problems.push(format!("no {name:?} variable"));
        return;
    };
    if v["type"] != "query" {
        problems.push(format!("{name}: type is {}, expected \"query\"", v["type"]));
    }
    if dashboard::variable_query(v) != query {
        problems.push(format!(
            "{name}: query is {:?}, expected {query:?}",
            dashboard::variable_query(v)
        ));
    }
    if let Some(definition) = v["definition"].as_str() {
        if definition != query {
            problems.push(format!(
                "{name}: definition {definition:?} differs from the query"
            ));
        }
    }
    if v["datasource"]["uid"] != DS_VAR {
        problems.push(format!(
            "{name}: datasource is {}, expected {DS_VAR}",
            v["datasource"]
        ));
    }
    if v["multi"] != true || v["includeAll"] != true {
        problems.push(format!("{name}: must be multi-valued with an All option"));
    }
    if v["allValue"] != ".*" {
        problems.push(format!(
            "{name}: allValue is {}, expected \".*\" (a regex matching every value, so that \
             All is one short selector)",
            v["allValue"]
        ));
    }
}

fn check_variables(d: &Value) -> Check {
    let mut problems = Vec::new();
    match variable(d, "datasource") {
        Some(v) if v["type"] == "datasource" && v["query"] == "prometheus" => {
            if v["multi"] == true || v["includeAll"] == true {
                problems.push("datasource: must select exactly one data source".to_string());
            }
        }
        Some(v) => problems.push(format!(
            "datasource: must be a datasource variable over prometheus: type {}, query {}",
            v["type"], v["query"]
        )),
        None => problems.push("no \"datasource\" variable".to_string()),
    }
    check_query_variable(d, "service", SERVICE_QUERY, &mut problems);
    check_query_variable(d, "tool", TOOL_QUERY, &mut problems);
    // Grafana resolves variables in list order; `tool` depends on `service`, both on `datasource`.
    let order: Vec<String> = variables(d)
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect();
    let position = |n: &str| order.iter().position(|o| o == n);
    if !(position("datasource") < position("service") && position("service") < position("tool")) {
        problems.push(format!(
            "variables must come in the order datasource, service, tool: {order:?}"
        ));
    }
    verdict(problems)
}

/// Every panel (rows and panels of collapsed rows included) has an id, and no two share one.
fn check_panel_ids(d: &Value) -> Check {
    let mut problems = Vec::new();
    let mut seen: HashMap<u64, String> = HashMap::new();
    for p in all_panels(d) {
        match p["id"].as_u64() {
            None => problems.push(format!("{} has no numeric id", panel_name(p))),
            Some(id) => {
                if let Some(other) = seen.insert(id, title(p).to_string()) {
                    problems.push(format!("id {id} is used by {other:?} and {:?}", title(p)));
                }
            }
        }
    }
    verdict(problems)
}

/// Every panel and every query uses the `datasource` variable; every panel has queries, each
/// with an expression and a refId unique in its panel.
fn check_queries(d: &Value) -> Check {
    let mut problems = Vec::new();
    for p in panels(d) {
        let name = panel_name(p);
        if p["datasource"]["uid"] != DS_VAR || p["datasource"]["type"] != "prometheus" {
            problems.push(format!(
                "{name}: datasource is {}, expected {{type: prometheus, uid: {DS_VAR}}}",
                p["datasource"]
            ));
        }
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if targets.is_empty() {
            problems.push(format!("{name}: no targets"));
        }
        let mut refs = HashSet::new();
        for t in targets {
            let ref_id = t["refId"].as_str().unwrap_or("");
            if ref_id.is_empty() {
                problems.push(format!("{name}: a target has no refId"));
            } else if !refs.insert(ref_id) {
                problems.push(format!("{name}: refId {ref_id} is used twice"));
            }
            if t["expr"].as_str().unwrap_or("").trim().is_empty() {
                problems.push(format!("{name}: target {ref_id:?} has no expr"));
            }
            if t["datasource"]["uid"] != DS_VAR {
                problems.push(format!(
                    "{name}: target {ref_id:?} datasource is {}, expected {DS_VAR}",
                    t["datasource"]
                ));
            }
        }
    }
    verdict(problems)
}

type Rect = (i64, i64, i64, i64);

fn grid_rect(p: &Value) -> Result<Rect, String> {
    let g = &p["gridPos"];
    let field = |k: &str| {
        g[k].as_i64()
            .ok_or_else(|| format!("{}: gridPos.{k} is not an integer", panel_name(p)))
    };
    let (x, y, w, h) = (field("x")?, field("y")?, field("w")?, field("h")?);
    if x < 0 || y < 0 || w <= 0 || h <= 0 || x + w > 24 {
        return Err(format!(
            "{}: gridPos x={x} y={y} w={w} h={h} is outside the 24-column grid",
            panel_name(p)
        ));
    }
    Ok((x, y, w, h))
}

fn overlaps(a: Rect, b: Rect) -> bool {
    let ((ax, ay, aw, ah), (bx, by, bw, bh)) = (a, b);
    ax < bx + bw && bx < ax + aw && ay < by + bh && by < ay + ah
}

fn check_overlaps(group: &[&Value], problems: &mut Vec<String>) {
    let mut placed: Vec<(&Value, Rect)> = Vec::new();
    for p in group {
        match grid_rect(p) {
            Err(e) => problems.push(e),
            Ok(r) => {
                for (q, s) in &placed {
                    if overlaps(r, *s) {
                        problems.push(format!("{} overlaps {}", panel_name(p), panel_name(q)));
                    }
                }
                placed.push((p, r));
            }
        }
    }
}

/// Panels lie within the 24 columns and do not overlap: the top-level panels together, and the
/// panels of each collapsed row together (they are laid out when the row opens, below it). An
/// open row keeps no panels of its own: Grafana expects them at the top level.
fn check_grid(d: &Value) -> Check {
    let mut problems = Vec::new();
    let top: Vec<&Value> = d["panels"].as_array().into_iter().flatten().collect();
    check_overlaps(&top, &mut problems);
    for row in top.iter().filter(|p| is_row(p)) {
        let nested: Vec<&Value> = row["panels"].as_array().into_iter().flatten().collect();
        if row["collapsed"] != true {
            if !nested.is_empty() {
                problems.push(format!(
                    "{} is open but holds panels; an open row's panels belong at the top level",
                    panel_name(row)
                ));
            }
            continue;
        }
        check_overlaps(&nested, &mut problems);
        let row_y = row["gridPos"]["y"].as_i64().unwrap_or(0);
        for p in &nested {
            if p["gridPos"]["y"].as_i64().unwrap_or(0) <= row_y {
                problems.push(format!("{} is not below its row", panel_name(p)));
            }
        }
    }
    verdict(problems)
}

fn for_each_target(d: &Value, mut f: impl FnMut(&Value, &Value, &str)) {
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            f(p, t, t["expr"].as_str().unwrap_or(""));
        }
    }
}

/// Every selector of a per-tool metric filters on the selected services and tools.
fn check_per_tool_filters(d: &Value) -> Check {
    let mut problems = Vec::new();
    for_each_target(d, |p, t, expr| {
        for m in unfiltered_per_tool_metrics(expr) {
            problems.push(format!(
                "{} {}: {m} lacks {SERVICE_FILTER} and {TOOL_FILTER}",
                panel_name(p),
                t["refId"]
            ));
        }
    });
    verdict(problems)
}

/// Every range is `$__rate_interval` or `$__range`, and every rate or increase has one.
fn check_ranges(d: &Value) -> Check {
    let mut problems = Vec::new();
    for_each_target(d, |p, t, expr| {
        for e in range_problems(expr) {
            problems.push(format!("{} {}: {e}", panel_name(p), t["refId"]));
        }
    });
    verdict(problems)
}

/// Every variable a query uses is a template variable or a Grafana built-in.
fn check_variables_defined(d: &Value) -> Check {
    let mut known: HashSet<String> = BUILTIN_VARIABLES.iter().map(|s| s.to_string()).collect();
    known.extend(
        variables(d)
            .iter()
            .filter_map(|v| v["name"].as_str().map(str::to_string)),
    );
    let mut problems = Vec::new();
    let mut exprs: Vec<(String, String)> = Vec::new();
    for_each_target(d, |p, t, expr| {
        exprs.push((
            format!("{} {}", panel_name(p), t["refId"]),
            expr.to_string(),
        ));
    });
    exprs.extend(
        variable_queries(d)
            .into_iter()
            .map(|(name, q)| (format!("variable {name}"), q)),
    );
    for (at, expr) in exprs {
        for v in used_variables(&expr) {
            if !known.contains(&v) {
                problems.push(format!("{at}: ${v} is not a variable of the dashboard"));
            }
        }
    }
    verdict(problems)
}

/// Every panel says what it shows and what to do (a description), graphs have a unit, and
/// series have legends.
fn check_descriptions(d: &Value) -> Check {
    let mut problems = Vec::new();
    for p in panels(d) {
        let name = panel_name(p);
        if title(p).trim().is_empty() {
            problems.push(format!("{name}: no title"));
        }
        if p["description"].as_str().unwrap_or("").trim().len() < 40 {
            problems.push(format!(
                "{name}: no description of what it shows and what to do"
            ));
        }
        let unit = match p["type"].as_str() {
            Some("heatmap") => &p["options"]["yAxis"]["unit"],
            _ => &p["fieldConfig"]["defaults"]["unit"],
        };
        if p["type"] != "table" && unit.as_str().unwrap_or("").is_empty() {
            problems.push(format!("{name}: no unit"));
        }
        if matches!(p["type"].as_str(), Some("timeseries" | "stat")) {
            for t in p["targets"].as_array().into_iter().flatten() {
                if t["legendFormat"].as_str().unwrap_or("").is_empty() {
                    problems.push(format!("{name}: target {} has no legend", t["refId"]));
                }
            }
        }
    }
    verdict(problems)
}

/// Tables are instant queries formatted as tables, over the whole range, merged on their labels
/// and organized into named columns.
fn check_tables(d: &Value) -> Check {
    let mut problems = Vec::new();
    for p in panels(d).into_iter().filter(|p| p["type"] == "table") {
        let name = panel_name(p);
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        for t in targets {
            if t["instant"] != true || t["format"] != "table" {
                problems.push(format!(
                    "{name}: target {} must be instant with format table",
                    t["refId"]
                ));
            }
            if t["expr"]
                .as_str()
                .unwrap_or("")
                .contains("$__rate_interval")
            {
                problems.push(format!(
                    "{name}: target {} covers $__rate_interval, not the range ($__range)",
                    t["refId"]
                ));
            }
        }
        let transformations: Vec<&str> = p["transformations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["id"].as_str())
            .collect();
        if targets.len() > 1 && !transformations.contains(&"merge") {
            problems.push(format!(
                "{name}: several queries but no merge transformation"
            ));
        }
        if !transformations.contains(&"organize") {
            problems.push(format!(
                "{name}: no organize transformation naming the columns"
            ));
        }
    }
    verdict(problems)
}

/// The panels the dashboard exists for, each found by its type and a query it runs.
fn check_required_panels(d: &Value) -> Check {
    let required: [(&str, &str); 12] = [
        ("timeseries", "histogram_quantile(0.95, sum by (le, tool) (rate(toolsize_tool_result_size_bytes_bucket{"),
        ("heatmap", "sum by (le) (increase(toolsize_tool_result_size_bytes_bucket{"),
        ("table", "toolsize_tool_result_size_max_bytes{"),
        ("timeseries", "toolsize_tool_results_truncated_total{"),
        ("timeseries", "toolsize_tool_results_over_ceiling_total{"),
        ("timeseries", "histogram_quantile(0.95, sum by (le, tool) (rate(toolsize_tool_call_duration_seconds_bucket{"),
        ("timeseries", "toolsize_spans_refused_total["),
        ("timeseries", "toolsize_spans_dropped_total["),
        ("timeseries", "toolsize_otlp_requests_refused_total["),
        ("timeseries", "toolsize_series_limit"),
        ("table", r#"ALERTS{alertstate="firing", alertname=~"Toolsize.*"}"#),
        ("stat", "sum by (alertname, severity) (toolsize_alerts_firing)"),
    ];
    let mut problems = Vec::new();
    let find = |kind: &str, needle: &str| {
        panels(d).into_iter().find(|p| {
            p["type"] == kind
                && p["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["expr"].as_str().unwrap_or("").contains(needle))
        })
    };
    for (kind, needle) in required {
        if find(kind, needle).is_none() {
            problems.push(format!("no {kind} panel runs {needle}"));
        }
    }
    // The p95 size panel draws each tool's ceiling as a dashed red series.
    if let Some(p) = find("timeseries", required[0].1) {
        let targets: Vec<&Value> = p["targets"].as_array().into_iter().flatten().collect();
        match targets
            .iter()
            .find(|t| t["expr"] == CEILING_EXPR && t["legendFormat"] == CEILING_LEGEND)
        {
            None => problems.push(format!(
                "{}: no {CEILING_EXPR} target with legend {CEILING_LEGEND:?}",
                panel_name(p)
            )),
            Some(t) => {
                let style = p["fieldConfig"]["overrides"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|o| {
                        o["matcher"]["id"] == "byFrameRefID"
                            && o["matcher"]["options"] == t["refId"]
                    })
                    .map(|o| o["properties"].to_string())
                    .unwrap_or_default();
                if !(style.contains("\"dash\"") && style.contains("\"red\"")) {
                    problems.push(format!(
                        "{}: the ceiling series must be drawn dashed and red",
                        panel_name(p)
                    ));
                }
            }
        }
        if p["fieldConfig"]["defaults"]["unit"] != "bytes" {
            problems.push(format!("{}: unit must be bytes", panel_name(p)));
        }
    }
    if let Some(p) = find("heatmap", required[1].1) {
        let heatmap_format = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|t| t["format"] == "heatmap");
        if !heatmap_format || p["options"]["yAxis"]["unit"] != "bytes" {
            problems.push(format!(
                "{}: targets must have format heatmap and the y axis unit bytes",
                panel_name(p)
            ));
        }
    }
    verdict(problems)
}

/// The values of `key` in a YAML file, line by line (`key: value` at any indentation or after
/// a list dash; quotes and trailing comments removed). Enough for the flat provisioning files.
fn yaml_values(text: &str, key: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let l = line.trim_start();
            let l = l.strip_prefix("- ").unwrap_or(l).trim_start();
            let rest = l.strip_prefix(key)?.strip_prefix(':')?;
            let value = rest.split(" #").next().unwrap_or("").trim();
            Some(value.trim_matches(|c| c == '"' || c == '\'').to_string())
        })
        .collect()
}

fn single(values: Vec<String>, what: &str, problems: &mut Vec<String>) -> String {
    match values.as_slice() {
        [v] => v.clone(),
        _ => {
            problems.push(format!("{what}: expected one value, found {values:?}"));
            String::new()
        }
    }
}

/// The provisioning files agree with the dashboard and the README: the data source is a
/// Prometheus whose name is the datasource variable's saved text (a provisioned dashboard keeps
/// `${DS_PROMETHEUS}` as the saved value, matches no uid, and Grafana falls back to the data
/// source of that name) and whose uid is the same string; the provider reads files from the
/// directory the README says to copy the dashboard into.
fn check_provisioning(d: &Value, datasources: &str, providers: &str, readme: &str) -> Check {
    let mut problems = Vec::new();
    for (file, text) in [("datasources", datasources), ("providers", providers)] {
        if yaml_values(text, "apiVersion") != ["1"] {
            problems.push(format!("{file}: apiVersion must be 1"));
        }
    }
    let name = single(
        yaml_values(datasources, "name"),
        "datasource name",
        &mut problems,
    );
    let uid = single(
        yaml_values(datasources, "uid"),
        "datasource uid",
        &mut problems,
    );
    let kind = single(
        yaml_values(datasources, "type"),
        "datasource type",
        &mut problems,
    );
    if kind != "prometheus" {
        problems.push(format!("datasource type is {kind:?}, expected prometheus"));
    }
    let saved_text = variable(d, "datasource").and_then(|v| v["current"]["text"].as_str());
    if saved_text != Some(name.as_str()) {
        problems.push(format!(
            "the datasource variable's saved text {saved_text:?} is not the provisioned data \
             source name {name:?}: a provisioned dashboard would pick another data source"
        ));
    }
    if uid != name {
        problems.push(format!(
            "datasource uid {uid:?} differs from its name {name:?}"
        ));
    }
    if uid.is_empty()
        || uid.len() > 40
        || !uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        problems.push(format!("datasource uid {uid:?} is not a valid Grafana uid"));
    }
    if !readme.contains(&uid) {
        problems.push(format!(
            "the README does not name the datasource uid {uid:?}"
        ));
    }

    let provider_type = single(
        yaml_values(providers, "type"),
        "provider type",
        &mut problems,
    );
    if provider_type != "file" {
        problems.push(format!("provider type is {provider_type:?}, expected file"));
    }
    let path = single(
        yaml_values(providers, "path"),
        "provider path",
        &mut problems,
    );
    if !path.starts_with('/') {
        problems.push(format!("provider path {path:?} is not absolute"));
    }
    if !readme.contains(&path) {
        problems.push(format!(
            "the README does not say to put the dashboard in the provider path {path:?}"
        ));
    }
    verdict(problems)
}

/// Exemplars reach a trace: every graph of the size histogram's buckets over
/// `$__rate_interval` asks for exemplars, and the data source links their `trace_id` label (the
/// one the daemon writes) to a trace data source.
fn check_exemplars(d: &Value, datasources: &str) -> Check {
    let mut problems = Vec::new();
    let mut graphs = 0;
    for_each_target(d, |panel, target, expr| {
        if expr.contains("toolsize_tool_result_size_bytes_bucket")
            && expr.contains("$__rate_interval")
        {
            graphs += 1;
            if target["exemplar"] != true {
                problems.push(format!("{}: exemplar is not on", panel_name(panel)));
            }
        }
    });
    if graphs == 0 {
        problems.push("no graph of toolsize_tool_result_size_bytes_bucket".into());
    }
    let dest = single(
        yaml_values(datasources, "exemplarTraceIdDestinations"),
        "exemplarTraceIdDestinations",
        &mut problems,
    );
    if !dest.contains("name: trace_id") || !dest.contains("datasourceUid:") {
        problems.push(format!(
            "exemplarTraceIdDestinations must link the trace_id label to a data source: {dest:?}"
        ));
    }
    verdict(problems)
}

#[test]
fn exemplars_link_to_traces() {
    let (datasources, _, _) = provisioning_files();
    pass(check_exemplars(&dashboard::load(), &datasources));
}

// ---- the dashboard passes every check ----------------------------------------------------

fn read(relative: &str) -> String {
    let p = dashboard::dir().join(relative);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

fn provisioning_files() -> (String, String, String) {
    (
        read("provisioning/datasources/toolsize.yml"),
        read("provisioning/dashboards/toolsize.yml"),
        read("README.md"),
    )
}

/// Panel and row titles that `docs/runbook.md` quotes on its "The dashboard's …" lines exist.
fn check_runbook_titles(d: &Value, runbook: &str) -> Check {
    let titles: HashSet<&str> = all_panels(d).into_iter().map(title).collect();
    let mut problems = Vec::new();
    // A bullet may wrap: join each bullet's lines before looking for quoted titles.
    for bullet in runbook
        .split("\n- ")
        .filter(|b| b.starts_with("The dashboard's"))
    {
        let text = bullet
            .split("\n\n")
            .next()
            .unwrap_or("")
            .replace("\n  ", " ");
        for quoted in text.split('"').skip(1).step_by(2) {
            if !titles.contains(quoted) {
                problems.push(format!(
                    "runbook names a panel {quoted:?} the dashboard lacks"
                ));
            }
        }
    }
    verdict(problems)
}

fn runbook() -> String {
    std::fs::read_to_string(dashboard::dir().join("../docs/runbook.md")).unwrap()
}

#[test]
fn the_runbook_names_panels_that_exist() {
    let r = runbook();
    assert!(
        r.matches("The dashboard's \"").count() >= 4,
        "no quoted panel found"
    );
    pass(check_runbook_titles(&dashboard::load(), &r));
}

fn pass(check: Check) {
    if let Err(e) = check {
        panic!("{}:\n{e}", dashboard::path().display());
    }
}

#[test]
fn dashboard_is_valid_json() {
    let text = std::fs::read_to_string(dashboard::path()).unwrap();
    pass(dashboard::parse(&text).map(drop));
}

#[test]
fn schema_version_is_current() {
    pass(check_schema_version(&dashboard::load()));
}

#[test]
fn uid_and_title() {
    pass(check_identity(&dashboard::load()));
}

#[test]
fn import_inputs_and_requirements() {
    pass(check_inputs(&dashboard::load()));
}

#[test]
fn template_variables() {
    pass(check_variables(&dashboard::load()));
}

#[test]
fn panel_ids_are_unique() {
    pass(check_panel_ids(&dashboard::load()));
}

#[test]
fn every_panel_and_query_uses_the_datasource_variable() {
    pass(check_queries(&dashboard::load()));
}

#[test]
fn panels_fit_the_grid_without_overlapping() {
    pass(check_grid(&dashboard::load()));
}

#[test]
fn per_tool_metrics_filter_on_service_and_tool() {
    pass(check_per_tool_filters(&dashboard::load()));
}

#[test]
fn ranges_come_from_grafana() {
    pass(check_ranges(&dashboard::load()));
}

#[test]
fn queries_use_only_defined_variables() {
    pass(check_variables_defined(&dashboard::load()));
}

#[test]
fn panels_have_descriptions_units_and_legends() {
    pass(check_descriptions(&dashboard::load()));
}

#[test]
fn tables_are_instant_queries_over_the_range() {
    pass(check_tables(&dashboard::load()));
}

#[test]
fn required_panels_are_present() {
    pass(check_required_panels(&dashboard::load()));
}

#[test]
fn provisioning_files_agree_with_the_dashboard() {
    let (datasources, providers, readme) = provisioning_files();
    pass(check_provisioning(
        &dashboard::load(),
        &datasources,
        &providers,
        &readme,
    ));
}

#[test]
fn shared_helpers_see_every_panel_query_and_variable() {
    let d = dashboard::load();
    let nested = all_panels(&d).len() - d["panels"].as_array().unwrap().len();
    assert!(nested > 0, "a collapsed row's panels are walked");
    let targets = dashboard::targets(&d);
    let expected: usize = panels(&d)
        .iter()
        .map(|p| p["targets"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(targets.len(), expected);
    assert!(targets.iter().any(|(_, _, _, instant)| *instant));
    assert!(targets.iter().any(|(_, _, _, instant)| !*instant));
    assert_eq!(
        variable_queries(&d),
        vec![
            ("service".to_string(), SERVICE_QUERY.to_string()),
            ("tool".to_string(), TOOL_QUERY.to_string()),
        ]
    );
    for (panel, ref_id, expr, _) in &targets {
        let e = dashboard::interpolate(expr, "1m", "1h");
        assert!(!e.contains('$'), "{panel} {ref_id}: {e} keeps a variable");
    }
}

// ---- each check fails on a broken copy ---------------------------------------------------

mod broken {
    use super::*;

    /// A copy of the dashboard with `f` applied.
    fn broken(f: impl FnOnce(&mut Value)) -> Value {
        let mut d = dashboard::load();
        f(&mut d);
        d
    }

    /// Asserts `check` failed, for a reason mentioning `needle`.
    fn fails(check: Check, needle: &str) {
        match check {
            Ok(()) => panic!("the check passed a broken copy (expected a problem with {needle:?})"),
            Err(e) => assert!(e.contains(needle), "expected {needle:?} in:\n{e}"),
        }
    }

    #[test]
    fn exemplars_off_is_caught() {
        let d = broken(|d| {
            for p in d["panels"].as_array_mut().unwrap() {
                for t in p["targets"].as_array_mut().into_iter().flatten() {
                    if let Some(o) = t.as_object_mut() {
                        o.remove("exemplar");
                    }
                }
            }
        });
        let (datasources, _, _) = provisioning_files();
        fails(check_exemplars(&d, &datasources), "exemplar is not on");
        let no_link = datasources.replace("exemplarTraceIdDestinations", "x");
        fails(
            check_exemplars(&dashboard::load(), &no_link),
            "exemplarTraceIdDestinations",
        );
    }

    /// The `i`th top-level panel that is not a row.
    fn top_panel(d: &mut Value, i: usize) -> &mut Value {
        d["panels"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .filter(|p| p["type"] != "row")
            .nth(i)
            .unwrap()
    }

    /// The panels of the first collapsed row.
    fn nested(d: &mut Value) -> &mut Vec<Value> {
        d["panels"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|p| p["collapsed"] == true)
            .expect("the dashboard has a collapsed row")["panels"]
            .as_array_mut()
            .unwrap()
    }

    fn first_of_type<'a>(d: &'a mut Value, kind: &str) -> &'a mut Value {
        d["panels"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|p| p["type"] == kind)
            .unwrap()
    }

    /// The table of tools (the table with several queries).
    fn tools_table(d: &mut Value) -> &mut Value {
        d["panels"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|p| p["type"] == "table" && p["targets"].as_array().unwrap().len() > 1)
            .unwrap()
    }

    fn variable_mut<'a>(d: &'a mut Value, name: &str) -> &'a mut Value {
        d["templating"]["list"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|v| v["name"] == name)
            .unwrap()
    }

    fn replace_expr(p: &mut Value, from: &str, to: &str) {
        let t = &mut p["targets"][0];
        let e = t["expr"].as_str().unwrap().to_string();
        assert!(e.contains(from), "{e} does not contain {from}");
        t["expr"] = Value::from(e.replacen(from, to, 1));
    }

    #[test]
    fn invalid_json() {
        let text = std::fs::read_to_string(dashboard::path()).unwrap();
        assert!(dashboard::parse(&text[..text.len() / 2]).is_err());
        assert!(dashboard::parse(&text.replacen(
            "\"uid\": \"toolsize\"",
            "\"uid\" \"toolsize\"",
            1
        ))
        .is_err());
    }

    #[test]
    fn schema_version() {
        fails(
            check_schema_version(&broken(|d| d["schemaVersion"] = 39.into())),
            "schemaVersion",
        );
        fails(
            check_schema_version(&broken(|d| d["schemaVersion"] = Value::Null)),
            "schemaVersion",
        );
    }

    #[test]
    fn identity() {
        fails(
            check_identity(&broken(|d| d["uid"] = "tool-size".into())),
            "uid",
        );
        fails(
            check_identity(&broken(|d| d["title"] = "Toolsize".into())),
            "title",
        );
    }

    #[test]
    fn inputs() {
        fails(
            check_inputs(&broken(|d| d["__inputs"] = Value::Array(vec![]))),
            "__inputs has no",
        );
        fails(
            check_inputs(&broken(|d| d["__inputs"][0]["pluginId"] = "loki".into())),
            "prometheus datasource input",
        );
        fails(
            check_inputs(&broken(|d| {
                variable_mut(d, "datasource")["current"]["value"] = "prometheus".into()
            })),
            "current value",
        );
        fails(
            check_inputs(&broken(|d| {
                top_panel(d, 0)["datasource"]["uid"] = "${DS_LOKI}".into()
            })),
            "${DS_LOKI} is used but not declared",
        );
        fails(
            check_inputs(&broken(|d| top_panel(d, 0)["type"] = "barchart".into())),
            "\"barchart\"",
        );
        fails(
            check_inputs(&broken(|d| d["__requires"] = Value::Array(vec![]))),
            "grafana",
        );
    }

    #[test]
    fn variables() {
        fails(
            check_variables(&broken(|d| {
                variable_mut(d, "tool")["query"]["query"] =
                    "label_values(toolsize_tool_calls_total, tool)".into()
            })),
            "tool: query",
        );
        fails(
            check_variables(&broken(|d| {
                variable_mut(d, "service")["definition"] = "label_values(up, job)".into()
            })),
            "definition",
        );
        fails(
            check_variables(&broken(|d| {
                variable_mut(d, "service")
                    .as_object_mut()
                    .unwrap()
                    .remove("allValue");
            })),
            "service: allValue",
        );
        fails(
            check_variables(&broken(|d| variable_mut(d, "tool")["multi"] = false.into())),
            "tool: must be multi",
        );
        fails(
            check_variables(&broken(|d| {
                variable_mut(d, "service")["datasource"]["uid"] = "prometheus".into()
            })),
            "service: datasource",
        );
        fails(
            check_variables(&broken(|d| {
                variable_mut(d, "datasource")["type"] = "custom".into()
            })),
            "datasource:",
        );
        fails(
            check_variables(&broken(|d| {
                d["templating"]["list"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|v| v["name"] != "tool")
            })),
            "no \"tool\" variable",
        );
        fails(
            check_variables(&broken(|d| {
                d["templating"]["list"].as_array_mut().unwrap().reverse()
            })),
            "order",
        );
    }

    #[test]
    fn panel_ids() {
        fails(
            check_panel_ids(&broken(|d| {
                let id = top_panel(d, 0)["id"].clone();
                nested(d)[0]["id"] = id;
            })),
            "is used by",
        );
        fails(
            check_panel_ids(&broken(|d| {
                nested(d)[0].as_object_mut().unwrap().remove("id");
            })),
            "no numeric id",
        );
    }

    #[test]
    fn queries() {
        fails(
            check_queries(&broken(|d| {
                nested(d)[0]["targets"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("datasource");
            })),
            "target \"A\" datasource",
        );
        fails(
            check_queries(&broken(|d| {
                nested(d)[0]["datasource"]["uid"] = "prometheus".into()
            })),
            "datasource is",
        );
        fails(
            check_queries(&broken(|d| {
                top_panel(d, 0)["targets"] = Value::Array(vec![])
            })),
            "no targets",
        );
        fails(
            check_queries(&broken(|d| {
                let p = tools_table(d);
                p["targets"][1]["refId"] = p["targets"][0]["refId"].clone();
            })),
            "used twice",
        );
        fails(
            check_queries(&broken(|d| {
                top_panel(d, 0)["targets"][0]["expr"] = " ".into()
            })),
            "has no expr",
        );
        fails(
            check_queries(&broken(|d| {
                top_panel(d, 0)["targets"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("refId");
            })),
            "no refId",
        );
    }

    #[test]
    fn grid() {
        fails(
            check_grid(&broken(|d| {
                let pos = top_panel(d, 0)["gridPos"].clone();
                top_panel(d, 1)["gridPos"] = pos;
            })),
            "overlaps",
        );
        fails(
            check_grid(&broken(|d| {
                let p = top_panel(d, 0);
                p["gridPos"]["x"] = 20.into();
                p["gridPos"]["w"] = 10.into();
            })),
            "24-column",
        );
        fails(
            check_grid(&broken(|d| {
                let n = nested(d);
                n[1]["gridPos"] = n[0]["gridPos"].clone();
            })),
            "overlaps",
        );
        fails(
            check_grid(&broken(|d| nested(d)[0]["gridPos"]["y"] = 0.into())),
            "not below its row",
        );
        fails(
            check_grid(&broken(|d| {
                d["panels"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .find(|p| p["collapsed"] == true)
                    .unwrap()["collapsed"] = false.into();
            })),
            "is open but holds panels",
        );
    }

    #[test]
    fn per_tool_filters() {
        fails(
            check_per_tool_filters(&broken(|d| {
                replace_expr(first_of_type(d, "timeseries"), r#", tool=~"$tool""#, "")
            })),
            "toolsize_tool_result_size_bytes_bucket",
        );
        fails(
            check_per_tool_filters(&broken(|d| {
                first_of_type(d, "timeseries")["targets"][0]["expr"] =
                    "sum(rate(toolsize_tool_calls_total[$__rate_interval]))".into()
            })),
            "toolsize_tool_calls_total lacks",
        );
        // Names in label values are not metrics.
        assert!(unfiltered_per_tool_metrics(r#"count(up{job="toolsize_tool_x"})"#).is_empty());
    }

    #[test]
    fn ranges() {
        fails(
            check_ranges(&broken(|d| {
                replace_expr(first_of_type(d, "timeseries"), "$__rate_interval", "5m")
            })),
            "range [5m]",
        );
        fails(
            check_ranges(&broken(|d| {
                replace_expr(tools_table(d), "$__range", "$__interval")
            })),
            "range [$__interval]",
        );
        fails(
            check_ranges(&broken(|d| {
                nested(d)[0]["targets"][0]["expr"] =
                    "sum(rate(toolsize_spans_accepted_total))".into()
            })),
            "rate( has no range selector",
        );
        // Brackets in label values are not ranges.
        assert!(range_problems(r#"up{job=~"[a-z]+"}"#).is_empty());
    }

    #[test]
    fn undefined_variables() {
        fails(
            check_variables_defined(&broken(|d| {
                replace_expr(first_of_type(d, "timeseries"), "$service", "$job")
            })),
            "$job is not a variable",
        );
        fails(
            check_variables_defined(&broken(|d| {
                variable_mut(d, "tool")["query"]["query"] =
                    r#"label_values(toolsize_tool_calls_total{service=~"${svc}"}, tool)"#.into()
            })),
            "$svc is not a variable",
        );
    }

    #[test]
    fn descriptions() {
        fails(
            check_descriptions(&broken(|d| {
                nested(d)[0].as_object_mut().unwrap().remove("description");
            })),
            "no description",
        );
        fails(
            check_descriptions(&broken(|d| {
                first_of_type(d, "timeseries")["fieldConfig"]["defaults"]["unit"] = "".into()
            })),
            "no unit",
        );
        fails(
            check_descriptions(&broken(|d| {
                first_of_type(d, "heatmap")["options"]["yAxis"]["unit"] = Value::Null
            })),
            "no unit",
        );
        fails(
            check_descriptions(&broken(|d| {
                first_of_type(d, "timeseries")["targets"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("legendFormat");
            })),
            "has no legend",
        );
    }

    #[test]
    fn tables() {
        fails(
            check_tables(&broken(|d| {
                first_of_type(d, "table")["targets"][0]["instant"] = false.into()
            })),
            "must be instant",
        );
        fails(
            check_tables(&broken(|d| {
                first_of_type(d, "table")["targets"][0]["format"] = "time_series".into()
            })),
            "must be instant",
        );
        fails(
            check_tables(&broken(|d| {
                tools_table(d)["transformations"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|t| t["id"] != "merge");
            })),
            "no merge",
        );
        fails(
            check_tables(&broken(|d| {
                replace_expr(tools_table(d), "$__range", "$__rate_interval")
            })),
            "not the range",
        );
    }

    #[test]
    fn required_panels() {
        fails(
            check_required_panels(&broken(|d| {
                first_of_type(d, "timeseries")["targets"]
                    .as_array_mut()
                    .unwrap()
                    .truncate(1);
            })),
            "toolsize_tool_result_ceiling_bytes",
        );
        fails(
            check_required_panels(&broken(|d| {
                first_of_type(d, "timeseries")["fieldConfig"]["overrides"] = Value::Array(vec![]);
            })),
            "dashed and red",
        );
        fails(
            check_required_panels(&broken(|d| {
                first_of_type(d, "heatmap")["targets"][0]["format"] = "time_series".into()
            })),
            "format heatmap",
        );
        fails(
            check_required_panels(&broken(|d| {
                d["panels"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|p| p["type"] != "stat");
            })),
            "toolsize_alerts_firing",
        );
    }

    #[test]
    fn runbook_titles() {
        fails(
            check_runbook_titles(
                &dashboard::load(),
                &runbook().replace("\"Truncated results per tool\"", "\"Truncations\""),
            ),
            "\"Truncations\"",
        );
    }

    #[test]
    fn provisioning() {
        let d = dashboard::load();
        let (datasources, providers, readme) = provisioning_files();
        let with = |text: &str, from: &str, to: &str| {
            assert!(text.contains(from), "{from} not found");
            text.replacen(from, to, 1)
        };
        fails(
            check_provisioning(
                &d,
                &with(
                    &datasources,
                    "name: toolsize-prometheus",
                    "name: Prometheus",
                ),
                &providers,
                &readme,
            ),
            "saved text",
        );
        fails(
            check_provisioning(
                &d,
                &with(&datasources, "uid: toolsize-prometheus", "uid: prom"),
                &providers,
                &readme,
            ),
            "uid \"prom\" differs",
        );
        fails(
            check_provisioning(
                &d,
                &with(&datasources, "type: prometheus", "type: loki"),
                &providers,
                &readme,
            ),
            "expected prometheus",
        );
        fails(
            check_provisioning(
                &d,
                &datasources,
                &with(
                    &providers,
                    "path: /var/lib/grafana/dashboards/toolsize",
                    "path: /srv/dash",
                ),
                &readme,
            ),
            "provider path \"/srv/dash\"",
        );
        fails(
            check_provisioning(
                &d,
                &datasources,
                &with(&providers, "type: file", "type: git"),
                &readme,
            ),
            "expected file",
        );
        fails(
            check_provisioning(
                &d,
                &datasources,
                &providers,
                &readme.replace("/var/lib/grafana/dashboards/toolsize", "/x"),
            ),
            "README does not say",
        );
        fails(
            check_provisioning(
                &broken(|d| variable_mut(d, "datasource")["current"]["text"] = "Prometheus".into()),
                &datasources,
                &providers,
                &readme,
            ),
            "saved text",
        );
    }
}
