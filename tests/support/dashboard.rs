//! Reading the Grafana dashboard `dashboards/toolsize.json`: every panel (collapsed rows
//! flattened), every query, every template variable query, and the values a query's variables
//! take when everything is selected. Shared by the structure test and the test that runs every
//! query against a real Prometheus.

use std::path::PathBuf;

use serde_json::Value;

/// The directory holding the dashboards and their provisioning files.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dashboards")
}

/// The dashboard file.
pub fn path() -> PathBuf {
    dir().join("toolsize.json")
}

/// Parses dashboard JSON text.
pub fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("dashboard is not valid JSON: {e}"))
}

/// The dashboard, parsed. Panics with the reason when the file is missing or not JSON.
pub fn load() -> Value {
    let p = path();
    let text =
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every panel, rows included, in file order: top-level panels, and after each row the panels
/// nested in it (a collapsed row keeps its panels in its own `panels` list).
pub fn all_panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().into_iter().flatten() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

/// Whether `p` is a row.
pub fn is_row(p: &Value) -> bool {
    p["type"] == "row"
}

/// Every panel that shows data (rows excluded), collapsed rows flattened.
pub fn panels(d: &Value) -> Vec<&Value> {
    all_panels(d).into_iter().filter(|p| !is_row(p)).collect()
}

/// A panel's title, or `""`.
pub fn title(p: &Value) -> &str {
    p["title"].as_str().unwrap_or("")
}

/// Every query of every panel: (panel title, refId, expr, instant). A missing refId or expr is
/// `""`, so checks can report it.
pub fn targets(d: &Value) -> Vec<(String, String, String, bool)> {
    panels(d)
        .into_iter()
        .flat_map(|p| {
            p["targets"].as_array().into_iter().flatten().map(move |t| {
                (
                    title(p).to_string(),
                    t["refId"].as_str().unwrap_or("").to_string(),
                    t["expr"].as_str().unwrap_or("").to_string(),
                    t["instant"].as_bool().unwrap_or(false),
                )
            })
        })
        .collect()
}

/// The template variables.
pub fn variables(d: &Value) -> Vec<&Value> {
    d["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .collect()
}

/// The template variable called `name`.
pub fn variable<'a>(d: &'a Value, name: &str) -> Option<&'a Value> {
    variables(d).into_iter().find(|v| v["name"] == name)
}

/// The query text of a query variable: Grafana saves it either as a string or, from the
/// Prometheus variable editor, as `{"query": "...", "refId": ...}`.
pub fn variable_query(v: &Value) -> &str {
    v["query"]
        .as_str()
        .or_else(|| v["query"]["query"].as_str())
        .unwrap_or("")
}

/// (name, query) of every query variable (`label_values(...)` queries; the data source variable
/// is not a query and is left out).
pub fn variable_queries(d: &Value) -> Vec<(String, String)> {
    variables(d)
        .into_iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            (
                v["name"].as_str().unwrap_or("").to_string(),
                variable_query(v).to_string(),
            )
        })
        .collect()
}

/// `expr` as Prometheus receives it with every service and tool selected (their "All" value is
/// `.*`), `$__rate_interval` = `rate_interval` and `$__range` = `range`, e.g. `"1m"` and `"1h"`.
pub fn interpolate(expr: &str, rate_interval: &str, range: &str) -> String {
    super::queries::fill(
        expr,
        &[
            ("$__rate_interval", rate_interval),
            ("$__range", range),
            ("$service", ".*"),
            ("$tool", ".*"),
        ],
    )
}
