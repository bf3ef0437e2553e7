//! The fleet alerting rules of `alerts/`: the real `promtool` loads them and passes their unit
//! tests, the real `amtool` loads and routes the example Alertmanager configuration, and rules,
//! unit tests, runbook and `/metrics` agree: every rule has its labels and links, is tested firing
//! and quiet, has a runbook section, and reads only metrics the daemon exports.
#![cfg(feature = "collector")]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use support::collector::require;
use toolsize::collector::alerts as daemon;
use toolsize::collector::read::names;

const RULES: &str = "alerts/toolsize.rules.yml";
const TESTS: &str = "alerts/tests";
const ALERTMANAGER: &str = "alerts/alertmanager.example.yml";
const RUNBOOK: &str = "docs/runbook.md";
const RUNBOOK_BASE: &str = "http://localhost:9464/runbook#";
const DASHBOARD_BASE: &str = "http://localhost:3000/d/toolsize/toolsize";

/// The rules the fleet needs; others may join them.
const REQUIRED: [&str; 6] = [
    "ToolsizeResultOverCeiling",
    "ToolsizeResultSizeP95Jump",
    "ToolsizeTruncationRateHigh",
    "ToolsizeSpansRefused",
    "ToolsizeSnapshotsFailing",
    "ToolsizeDaemonDown",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `program` in the repository and returns its output; fails the test, with the output,
/// when it does not succeed.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}):\n{text}",
        args.join(" "),
        out.status
    );
    text
}

/// The unit test files, relative to the repository.
fn test_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(root().join(TESTS))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
        .map(|n| format!("{TESTS}/{n}"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no unit tests in {TESTS}");
    files
}

#[test]
fn promtool_loads_the_rules() {
    if !require("promtool", &["--version"]) {
        return;
    }
    let out = run("promtool", &["check", "rules", RULES]);
    assert!(out.contains("SUCCESS"), "{out}");
}

#[test]
fn promtool_unit_tests_pass() {
    if !require("promtool", &["--version"]) {
        return;
    }
    for file in test_files() {
        let out = run("promtool", &["test", "rules", &file]);
        assert!(out.contains("SUCCESS"), "{file}: {out}");
    }
}

#[test]
fn alertmanager_example_loads_and_routes_by_severity() {
    if !require("amtool", &["--version"]) {
        return;
    }
    run("amtool", &["check-config", ALERTMANAGER]);
    let config = format!("--config.file={ALERTMANAGER}");
    for (labels, receiver) in [
        ("alertname=ToolsizeDaemonDown severity=critical", "pager"),
        ("alertname=ToolResultOverCeiling severity=page", "pager"),
        ("alertname=ToolsizeSpansRefused severity=warning", "ticket"),
        ("alertname=ToolsizeTargetsAbsent", "ticket"),
    ] {
        let verify = format!("--verify.receivers={receiver}");
        let mut args = vec!["config", "routes", "test", &config, &verify];
        args.extend(labels.split(' '));
        run("amtool", &args);
    }
}

// A subset of YAML, enough for the files of `alerts/`: block maps and sequences, plain and quoted
// scalars, block scalars and `[]`. Anything else fails the test, so no check passes on a file it
// could not read.

#[derive(Debug, Clone, PartialEq)]
enum Yaml {
    Map(Vec<(String, Yaml)>),
    Seq(Vec<Yaml>),
    Str(String),
}

impl Yaml {
    fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Yaml::Str(s) => Some(s),
            _ => None,
        }
    }
    fn seq(&self, key: &str) -> &[Yaml] {
        match self.get(key) {
            Some(Yaml::Seq(s)) => s,
            _ => &[],
        }
    }
    fn map(&self, key: &str) -> &[(String, Yaml)] {
        match self.get(key) {
            Some(Yaml::Map(m)) => m,
            _ => &[],
        }
    }
}

struct Parser {
    name: String,
    lines: Vec<String>,
    i: usize,
}

impl Parser {
    fn parse(name: &str, text: &str) -> Yaml {
        let mut p = Parser {
            name: name.to_string(),
            lines: text.lines().map(str::to_string).collect(),
            i: 0,
        };
        let doc = match p.peek() {
            Some((0, _)) => p.block(0),
            _ => p.fail("expected a document at column 0"),
        };
        if p.peek().is_some() {
            p.fail("unexpected indentation");
        }
        doc
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "{}:{}: {what}: {:?}",
            self.name,
            self.i + 1,
            self.lines.get(self.i)
        )
    }

    /// The next significant line: (indent, content).
    fn peek(&mut self) -> Option<(usize, String)> {
        while let Some(l) = self.lines.get(self.i) {
            let t = l.trim_start();
            if !(t.is_empty() || t.starts_with('#')) {
                if l.starts_with('\t') {
                    self.fail("tab indentation");
                }
                return Some((l.len() - t.len(), t.to_string()));
            }
            self.i += 1;
        }
        None
    }

    fn block(&mut self, indent: usize) -> Yaml {
        match self.peek() {
            Some((_, t)) if t == "-" || t.starts_with("- ") => self.seq(indent),
            _ => self.map(indent),
        }
    }

    fn seq(&mut self, indent: usize) -> Yaml {
        let mut items = Vec::new();
        while let Some((n, t)) = self.peek() {
            if n != indent || !(t == "-" || t.starts_with("- ")) {
                break;
            }
            let rest = t[1..].trim_start();
            if rest.is_empty() || rest.starts_with('#') {
                self.fail("empty sequence item");
            }
            if key_value(rest).is_some() {
                // `- key: value`: the item is a map whose first line starts after the dash.
                let line = &mut self.lines[self.i];
                *line = line.replacen('-', " ", 1);
                let at = indent + (t.len() - rest.len());
                items.push(self.map(at));
            } else {
                items.push(Yaml::Str(self.scalar(rest)));
                self.i += 1;
            }
        }
        Yaml::Seq(items)
    }

    fn map(&mut self, indent: usize) -> Yaml {
        let mut entries = Vec::new();
        while let Some((n, t)) = self.peek() {
            if n < indent || t.starts_with("- ") {
                break;
            }
            if n > indent {
                self.fail("unexpected indentation");
            }
            let Some((key, value)) = key_value(&t) else {
                self.fail("expected `key: value`");
            };
            if entries.iter().any(|(k, _)| k == &key) {
                self.fail("duplicate key");
            }
            self.i += 1;
            let node = match value.as_str() {
                "" => match self.peek() {
                    Some((m, _)) if m > indent => self.block(m),
                    Some((m, t)) if m == indent && t.starts_with("- ") => self.seq(m),
                    _ => Yaml::Str(String::new()),
                },
                "|" | "|-" | ">" | ">-" => Yaml::Str(self.block_scalar(indent)),
                "[]" => Yaml::Seq(Vec::new()),
                v if v.starts_with('[') || v.starts_with('{') => self.fail("flow collection"),
                v => Yaml::Str(self.scalar(v)),
            };
            entries.push((key, node));
        }
        Yaml::Map(entries)
    }

    /// The lines of a block scalar (deeper than its key), joined with newlines.
    fn block_scalar(&mut self, indent: usize) -> String {
        let mut out = Vec::new();
        while let Some(l) = self.lines.get(self.i) {
            let t = l.trim_start();
            if !t.is_empty() && l.len() - t.len() <= indent {
                break;
            }
            out.push(t.to_string());
            self.i += 1;
        }
        out.join("\n").trim().to_string()
    }

    fn scalar(&self, v: &str) -> String {
        if let Some(inner) = v.strip_prefix('"') {
            let Some(inner) = inner.strip_suffix('"') else {
                self.fail("unterminated double-quoted string");
            };
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some('n') => out.push('\n'),
                        Some(e @ ('"' | '\\' | '/')) => out.push(e),
                        _ => self.fail("unsupported escape"),
                    },
                    '"' => self.fail("unescaped quote"),
                    c => out.push(c),
                }
            }
            out
        } else if let Some(inner) = v.strip_prefix('\'') {
            let Some(inner) = inner.strip_suffix('\'') else {
                self.fail("unterminated single-quoted string");
            };
            inner.replace("''", "'")
        } else {
            if v.contains(" #") {
                self.fail("comment after a plain scalar");
            }
            v.to_string()
        }
    }
}

/// `key: value` or `key:` with a plain key.
fn key_value(t: &str) -> Option<(String, String)> {
    let end = t.find(':')?;
    let key = &t[..end];
    let rest = &t[end + 1..];
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    (plain && (rest.is_empty() || rest.starts_with(' ')))
        .then(|| (key.to_string(), rest.trim().to_string()))
}

/// One alerting rule: its name, labels, annotations and the text it queries.
struct Rule {
    name: String,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
    expr: String,
}

fn strings(m: &[(String, Yaml)]) -> Vec<(String, String)> {
    m.iter()
        .map(|(k, v)| match v {
            Yaml::Str(s) => (k.clone(), s.clone()),
            other => panic!("{k} is not a string: {other:?}"),
        })
        .collect()
}

fn rules() -> Vec<Rule> {
    let doc = Parser::parse(RULES, &read(RULES));
    let mut out = Vec::new();
    for group in doc.seq("groups") {
        for rule in group.seq("rules") {
            let Some(name) = rule.str("alert") else {
                continue;
            };
            out.push(Rule {
                name: name.to_string(),
                labels: strings(rule.map("labels")),
                annotations: strings(rule.map("annotations")),
                expr: rule.str("expr").unwrap_or_default().to_string(),
            });
        }
    }
    out
}

fn value<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The `## ` headings of the runbook.
fn runbook_sections() -> Vec<String> {
    read(RUNBOOK)
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_string())
        .collect()
}

#[test]
fn every_rule_has_severity_summary_description_and_links() {
    let rules = rules();
    let found: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    for name in REQUIRED {
        assert!(
            found.contains(&name),
            "{name} missing from {RULES}: {found:?}"
        );
    }
    let mut seen = BTreeSet::new();
    for r in &rules {
        let n = &r.name;
        assert!(seen.insert(n), "{n} defined twice");
        assert!(
            n.starts_with("Toolsize") && n.chars().all(|c| c.is_ascii_alphanumeric()),
            "{n}: CamelCase with the Toolsize prefix"
        );
        assert!(!r.expr.trim().is_empty(), "{n}: no expr");
        let severity = value(&r.labels, "severity");
        assert!(
            matches!(severity, Some("critical" | "warning" | "info")),
            "{n}: severity {severity:?}"
        );
        for key in ["summary", "description", "runbook_url", "dashboard_url"] {
            assert!(
                value(&r.annotations, key).is_some_and(|v| !v.trim().is_empty()),
                "{n}: annotation {key} missing or empty"
            );
        }
        assert_eq!(
            value(&r.annotations, "runbook_url"),
            Some(format!("{RUNBOOK_BASE}{}", n.to_lowercase()).as_str()),
            "{n}: runbook_url"
        );
        dashboard_vars(r);
    }
}

/// The dashboard variables of a rule's `dashboard_url`, each set from the label of its name.
fn dashboard_vars(r: &Rule) -> BTreeSet<String> {
    let n = &r.name;
    let url = value(&r.annotations, "dashboard_url").unwrap_or_default();
    let query = url
        .strip_prefix(DASHBOARD_BASE)
        .unwrap_or_else(|| panic!("{n}: dashboard_url {url:?} is not under {DASHBOARD_BASE}"));
    let query = query.strip_prefix('?').unwrap_or(query);
    let mut vars = BTreeSet::new();
    for param in query.split('&').filter(|p| !p.is_empty()) {
        let (var, template) = param
            .strip_prefix("var-")
            .and_then(|p| p.split_once('='))
            .unwrap_or_else(|| panic!("{n}: dashboard parameter {param:?}"));
        assert_eq!(
            template,
            format!("{{{{ $labels.{var} }}}}"),
            "{n}: dashboard variable {var}"
        );
        vars.insert(var.to_string());
    }
    vars
}

#[test]
fn every_runbook_url_has_a_section_and_every_section_an_alert() {
    let sections = runbook_sections();
    let anchors: Vec<String> = sections.iter().map(|h| h.to_lowercase()).collect();
    let rules = rules();
    assert!(!rules.is_empty());
    for r in &rules {
        let url = value(&r.annotations, "runbook_url").unwrap_or_default();
        let anchor = url.split_once('#').map(|(_, a)| a).unwrap_or_default();
        assert!(
            anchors.iter().any(|a| a == anchor),
            "{}: runbook anchor #{anchor} is no `## ` heading of {RUNBOOK}",
            r.name
        );
    }
    let builtin = daemon::BUILT_IN;
    for name in builtin {
        assert!(
            sections.iter().any(|s| s == name),
            "{RUNBOOK} has no section for the daemon's {name}"
        );
    }
    for s in &sections {
        assert!(
            rules.iter().any(|r| &r.name == s) || builtin.contains(&s.as_str()),
            "{RUNBOOK}: `## {s}` is not an alert (only alerts get `## ` headings)"
        );
        assert!(
            s.chars().all(|c| c.is_ascii_alphanumeric()),
            "{RUNBOOK}: `## {s}` would not give the anchor #{}",
            s.to_lowercase()
        );
    }
}

/// For every alert name: whether a unit test expects it firing (with labels and annotations)
/// and whether one expects it quiet.
#[test]
fn every_rule_is_tested_firing_and_quiet() {
    // Alert name -> the labels of its expected firing alerts.
    let mut firing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut quiet = BTreeSet::new();
    for file in test_files() {
        let doc = Parser::parse(&file, &read(&file));
        let rule_files: Vec<PathBuf> = doc
            .seq("rule_files")
            .iter()
            .map(|f| match f {
                Yaml::Str(s) => root().join(TESTS).join(s),
                other => panic!("{file}: rule_files entry {other:?}"),
            })
            .collect();
        assert!(
            rule_files
                .iter()
                .any(|f| f.canonicalize().ok() == root().join(RULES).canonicalize().ok()),
            "{file} does not test {RULES}: {rule_files:?}"
        );
        for test in doc.seq("tests") {
            for case in test.seq("alert_rule_test") {
                let name = case
                    .str("alertname")
                    .unwrap_or_else(|| panic!("{file}: a case without alertname"));
                match case.get("exp_alerts") {
                    Some(Yaml::Seq(alerts)) if alerts.is_empty() => {
                        quiet.insert(name.to_string());
                    }
                    Some(Yaml::Seq(alerts)) => {
                        let checked = alerts.iter().all(|a| {
                            !a.map("exp_labels").is_empty() && !a.map("exp_annotations").is_empty()
                        });
                        assert!(
                            checked,
                            "{file}: {name}: every expected alert needs exp_labels and exp_annotations"
                        );
                        let labels = firing.entry(name.to_string()).or_default();
                        for a in alerts {
                            labels.extend(a.map("exp_labels").iter().map(|(k, _)| k.clone()));
                        }
                    }
                    other => panic!("{file}: {name}: exp_alerts {other:?}"),
                }
            }
        }
    }
    for r in rules() {
        let Some(labels) = firing.get(&r.name) else {
            panic!("{}: no unit test in {TESTS} where it fires", r.name);
        };
        // The dashboard link sets the service and tool variables exactly when the alert has
        // those labels.
        let carried: BTreeSet<String> = ["service", "tool"]
            .into_iter()
            .filter(|l| labels.contains(*l))
            .map(String::from)
            .collect();
        assert_eq!(
            dashboard_vars(&r),
            carried,
            "{}: dashboard variables against the labels of its firing alerts",
            r.name
        );
        assert!(
            quiet.contains(&r.name),
            "{}: no unit test in {TESTS} where it must not fire (exp_alerts: [])",
            r.name
        );
    }
}

/// Every `toolsize_*` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut rest = text;
    while let Some(at) = rest.find("toolsize_") {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at..];
        let end = tail.find(|c: char| !ident(c)).unwrap_or(tail.len());
        if !before.is_some_and(ident) {
            out.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    out
}

/// Every series name `/metrics` can show.
fn exported() -> BTreeSet<String> {
    let mut out: BTreeSet<String> = names::FAMILIES.iter().map(|s| s.to_string()).collect();
    for h in names::HISTOGRAMS {
        for suffix in ["_bucket", "_count", "_sum"] {
            out.insert(format!("{h}{suffix}"));
        }
        // The native histogram, where Prometheus keeps it.
        out.insert(h.to_string());
    }
    out
}

#[test]
fn rules_and_unit_tests_use_only_exported_metrics() {
    let exported = exported();
    let mut used = BTreeSet::new();
    for r in rules() {
        let mut text = r.expr.clone();
        for (_, v) in &r.annotations {
            text.push('\n');
            text.push_str(v);
        }
        let names = metric_names(&text);
        assert!(
            !names.is_empty() || r.expr.contains("up{"),
            "{}: reads no toolsize metric: {}",
            r.name,
            r.expr
        );
        for m in names {
            assert!(
                exported.contains(&m),
                "{}: {m} is not a metric the daemon exports",
                r.name
            );
            used.insert(m);
        }
    }
    assert!(used.len() >= 5, "{used:?}");
    // A quiet case fed a misspelt series would pass for the wrong reason.
    for file in test_files() {
        let doc = Parser::parse(&file, &read(&file));
        for test in doc.seq("tests") {
            for input in test.seq("input_series") {
                let series = input
                    .str("series")
                    .unwrap_or_else(|| panic!("{file}: input without series"));
                let name = series.split('{').next().unwrap_or_default();
                assert!(
                    name == "up" || exported.contains(name),
                    "{file}: input series {name} is not a metric the daemon exports"
                );
            }
        }
    }
}

#[test]
fn the_yaml_reader_reads_what_the_checks_need() {
    let doc = Parser::parse(
        "sample",
        "a:\n  - alert: X\n    expr: |\n      up\n      # kept\n    labels:\n      severity: \"crit\\\"ical\"\n  - 'two'\nb: []\n",
    );
    let a = doc.seq("a");
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].str("alert"), Some("X"));
    assert_eq!(a[0].str("expr"), Some("up\n# kept"));
    assert_eq!(
        a[0].map("labels"),
        &[("severity".to_string(), Yaml::Str("crit\"ical".into()))]
    );
    assert_eq!(a[1], Yaml::Str("two".into()));
    assert_eq!(doc.get("b"), Some(&Yaml::Seq(Vec::new())));
    for bad in [
        "a:\n   b: 1\n  c: 2\n",
        "a: {b: 1}\n",
        "a: \"x\n",
        "a: 1\na: 2\n",
        "a: x # comment\n",
    ] {
        assert!(
            std::panic::catch_unwind(|| Parser::parse("bad", bad)).is_err(),
            "{bad:?} should not parse"
        );
    }
}
