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

/// Every `expr` of every target of every panel, rows' nested panels included.
fn exprs(d: &Value) -> Vec<String> {
    fn walk(panels: &Value, out: &mut Vec<String>) {
        for p in panels.as_array().into_iter().flatten() {
            walk(&p["panels"], out);
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push(e.to_string());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&d["panels"], &mut out);
    out
}

/// The dashboard's fleet p95 result size per tool: the one query taking the 0.95 quantile of
/// the summed `toolsize_tool_result_size_bytes_bucket` rates by `le` and `tool`.
pub fn p95_size_query(d: &Value) -> String {
    let found: Vec<String> = exprs(d)
        .into_iter()
        .filter(|e| {
            let flat: String = e.split_whitespace().collect();
            flat.starts_with("histogram_quantile(0.95,sumby(le,tool)(rate(toolsize_tool_result_size_bytes_bucket")
        })
        .collect();
    assert!(
        !found.is_empty(),
        "the dashboard has no fleet p95 size query by tool"
    );
    found[0].clone()
}
