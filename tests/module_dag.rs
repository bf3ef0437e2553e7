//! The collector's modules form a DAG: no file imports, directly or through others, a module
//! that imports it back. Read from the sources (test code excluded), so a new cycle fails here.
#![cfg(feature = "collector")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `src/collector/a.rs` is `a`, `src/collector/x/mod.rs` is `x`, `src/collector/x/b.rs` is
/// `x/b`.
fn node(path: &Path, root: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap().with_extension("");
    let s = rel.to_string_lossy().replace('\\', "/");
    s.strip_suffix("/mod").map(str::to_string).unwrap_or(s)
}

/// The module a path like `receiver::wire::SpanView` names, as a node that exists: the
/// longest one (`ingest::recognize::emitters::Emitter` is `ingest/recognize/emitters`, a file
/// of its own, not its folder's `mod.rs`).
fn target(segments: &[&str], nodes: &BTreeSet<String>) -> Option<String> {
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("/"))
        .find(|path| nodes.contains(path))
}

/// `text` without its test modules: from a `#[cfg(test)]` line followed by a `mod` line to the
/// line that closes that module at its indentation (rustfmt's layout). A test-only item that is
/// not a module is read like the rest of the file, and so is code after a test module.
fn without_test_modules(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let next = lines.get(i + 1).copied().unwrap_or("");
        let item = next.trim_start();
        let is_mod = ["mod ", "pub mod ", "pub(crate) mod "]
            .iter()
            .any(|p| item.starts_with(p));
        if lines[i].trim() == "#[cfg(test)]" && is_mod {
            let close = format!("{}}}", &next[..next.len() - item.len()]);
            i = if item.trim_end().ends_with(';') {
                i + 2
            } else {
                lines[i + 1..]
                    .iter()
                    .position(|l| *l == close)
                    .map_or(lines.len(), |p| i + p + 2)
            };
            continue;
        }
        out.push_str(lines[i]);
        out.push('\n');
        i += 1;
    }
    out
}

fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let nodes: BTreeSet<String> = files.iter().map(|f| node(f, root)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let from = node(f, root);
        let text = std::fs::read_to_string(f).unwrap();
        let code = without_test_modules(&text);
        // Where `super` points: the collector for its own files and for `x/mod.rs`.
        let depth = f.strip_prefix(root).unwrap().components().count();
        let in_dir_mod = f.file_name().is_some_and(|n| n == "mod.rs");
        let supers_to_collector = if in_dir_mod { depth - 1 } else { depth };
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut rest = line;
            while let Some(i) = rest
                .find("super::")
                .or_else(|| rest.find("crate::collector::"))
            {
                let tail = &rest[i..];
                let (path, n_super) = if let Some(t) = tail.strip_prefix("crate::collector::") {
                    (t, supers_to_collector)
                } else {
                    let mut t = tail;
                    let mut n = 0;
                    while let Some(x) = t.strip_prefix("super::") {
                        t = x;
                        n += 1;
                    }
                    (t, n)
                };
                rest = &tail[1..];
                if n_super != supers_to_collector {
                    continue;
                }
                let segments: Vec<&str> = path
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap_or("")
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .collect();
                if let Some(to) = target(&segments, &nodes) {
                    let parent = from.split('/').next().unwrap().to_string();
                    if to != from && to != parent && !to.starts_with(&format!("{from}/")) {
                        edges.entry(from.clone()).or_default().insert(to);
                    }
                }
            }
        }
    }
    edges
}

fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

/// The stage a module lives in: its folder, or the file itself at the collector's root.
fn stage(node: &str) -> &str {
    node.split('/').next().unwrap()
}

/// Edges between stages (`ingest/recognize → state` is `ingest → state`).
fn stages(edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in edges {
        for to in tos {
            if stage(from) != stage(to) {
                out.entry(stage(from).to_string())
                    .or_default()
                    .insert(stage(to).to_string());
            }
        }
    }
    out
}

#[test]
fn the_collector_modules_form_a_dag() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/collector");
    let edges = graph(&root);
    assert!(edges["aggregator"].contains("state"), "{edges:?}");
    assert!(edges["persist/snapshot"].contains("state"), "{edges:?}");
    if let Some(c) = cycle(&edges) {
        panic!(
            "the collector's modules import each other in a circle: {}",
            c.join(" → ")
        );
    }
}

/// The pipeline's stages, in order: each may use the ones before it and none after. `hash` is
/// the keyed hasher and key compare every stage may use; `clock` is
/// the one Unix-time conversion; `stats`
/// holds the daemon's lock-free counters, shared from the edge inwards; the aggregator task
/// wires state, readers, alerts and the store; the daemon binds the listeners over it all.
const STAGES: [&str; 13] = [
    "hash",
    "clock",
    "net",
    "config",
    "stats",
    "forward",
    "ingest",
    "state",
    "alerts",
    "persist",
    "read",
    "aggregator",
    "daemon",
];

#[test]
fn the_stages_follow_the_pipeline() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/collector");
    let by_stage = stages(&graph(&root));
    let order = |s: &str| {
        STAGES
            .iter()
            .position(|x| *x == s)
            .unwrap_or_else(|| panic!("{s} is a stage of the collector not listed in STAGES"))
    };
    for (from, tos) in &by_stage {
        for to in tos {
            assert!(
                order(to) < order(from),
                "{from} uses {to}, a later stage: the pipeline is {}",
                STAGES.join(" → ")
            );
        }
    }
    if let Some(c) = cycle(&by_stage) {
        panic!(
            "the collector's stages use each other in a circle: {}",
            c.join(" → ")
        );
    }
    // The owner of the state knows nothing of its readers, its alerts or its store.
    for later in ["read", "alerts", "persist", "aggregator"] {
        assert!(
            !by_stage.get("state").is_some_and(|s| s.contains(later)),
            "state uses {later}"
        );
    }
}

#[test]
fn the_stage_check_sees_through_files() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges
        .entry("ingest/recognize".into())
        .or_default()
        .insert("state/histogram".into());
    edges
        .entry("ingest/decode".into())
        .or_default()
        .insert("ingest/wire".into());
    let s = stages(&edges);
    assert_eq!(s.len(), 1);
    assert!(s["ingest"].contains("state"));
}

#[test]
fn the_check_finds_a_cycle() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&edges), None);
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        cycle(&edges).unwrap(),
        ["a", "b", "c", "a"].map(String::from).to_vec()
    );
}

#[test]
fn a_path_names_its_longest_module() {
    let nodes: BTreeSet<String> = ["ingest", "ingest/recognize", "ingest/recognize/emitters"]
        .map(String::from)
        .into();
    let t = |p: &str| target(&p.split("::").collect::<Vec<_>>(), &nodes);
    assert_eq!(
        t("ingest::recognize::emitters::Emitter").as_deref(),
        Some("ingest/recognize/emitters")
    );
    assert_eq!(
        t("ingest::recognize::Recognizer").as_deref(),
        Some("ingest/recognize")
    );
    assert_eq!(t("ingest::Ingest").as_deref(), Some("ingest"));
    assert_eq!(t("Config"), None);
}
