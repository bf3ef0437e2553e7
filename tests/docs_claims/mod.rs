//! Numbers and lists the docs state, compared with the constants and files they describe: a
//! default, a bound or a list changed in the code fails here until the docs say the same.
//!
//! Each check reads the documents and the crate's public constants only (the emitters' reading
//! order, internal to the crate, is read from its source: `reading_order.rs`); none starts a
//! process. The claims held elsewhere stay there (the per-series `/metrics` bound in
//! `src/collector/read/exposition.rs`, the catalog's size in `src/layers/catalog.rs`, the
//! refusal reasons in `src/collector/stats.rs`).

mod reading_order;

use std::path::Path;

use toolsize::guard::ceiling::MIN_PROXY_LIMIT;
use toolsize::guard::json_truncate::DEFAULT_MIN_STRING_CHARS;
use toolsize::layers::convert::{BYTES_PER_LINE, BYTES_PER_TOKEN};
use toolsize::layers::DEFAULT_CEILING_BYTES;
use toolsize::mcp::host::HOSTS;
use toolsize::mcp::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_MESSAGE_BYTES, MAX_ID_BYTES, MAX_IN_FLIGHT,
    MIN_MAX_MESSAGE_BYTES,
};

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `n` as the docs write numbers: `16,384`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The texts of `claims` that `doc` does not contain (line breaks read as spaces), as
/// problems.
fn missing(doc: &str, text: &str, claims: &[String]) -> Vec<String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    claims
        .iter()
        .filter(|c| !text.contains(c.as_str()))
        .map(|c| format!("{doc} must say {c:?}"))
        .collect()
}

#[test]
fn the_numbers_the_docs_give_are_the_constants() {
    let mut problems = Vec::new();
    let mcp = read("docs/mcp.md");
    let timeout = DEFAULT_CALL_TIMEOUT.as_secs();
    problems.extend(missing(
        "docs/mcp.md",
        &mcp,
        &[
            format!(
                "| `--max-message-bytes BYTES` | {DEFAULT_MAX_MESSAGE_BYTES} ({} MiB) | largest message read whole, either way, at least {MIN_MAX_MESSAGE_BYTES} ",
                DEFAULT_MAX_MESSAGE_BYTES >> 20
            ),
            format!("| `--call-timeout SECONDS` | {timeout} |"),
            format!("| `--max-output BYTES` | see below | limit of each result's `result` object, at least {MIN_PROXY_LIMIT} |"),
            format!("a limit below {MIN_PROXY_LIMIT}"),
            format!("({} in flight, ids up to {MAX_ID_BYTES} bytes)", grouped(MAX_IN_FLIGHT as u64)),
            format!("serves at most {} connections at once", grouped(toolsize::mcp::http::MAX_CONNECTIONS as u64)),
            format!("--max-message-bytes` ({} MiB)", DEFAULT_MAX_MESSAGE_BYTES >> 20),
        ],
    ));
    let readme = read("README.md");
    problems.extend(missing(
        "README.md",
        &readme,
        &[
            format!(
                "`--max-message-bytes` ({} MiB",
                DEFAULT_MAX_MESSAGE_BYTES >> 20
            ),
            format!("`--call-timeout` ({timeout} s)"),
            format!(
                "returning pages over the {} KiB ceiling",
                DEFAULT_CEILING_BYTES >> 10
            ),
        ],
    ));
    let guard = read("docs/guard.md");
    problems.extend(missing(
        "docs/guard.md",
        &guard,
        &[
            format!("> {} KiB; logged once", DEFAULT_CEILING_BYTES >> 10),
            format!("at least {DEFAULT_MIN_STRING_CHARS} chars"),
            format!("must be at least {MIN_PROXY_LIMIT}"),
        ],
    ));
    let layers = read("docs/layers.md");
    problems.extend(missing(
        "docs/layers.md",
        &layers,
        &[
            format!(
                "one `default` layer: {} KiB (`DEFAULT_CEILING_BYTES`)",
                DEFAULT_CEILING_BYTES >> 10
            ),
            format!("| `tokens` | `{BYTES_PER_TOKEN} L`"),
            format!("| `lines` | `{BYTES_PER_LINE} L`"),
            format!("`ceil(bytes / {BYTES_PER_TOKEN})`"),
            format!("`ceil(bytes / {BYTES_PER_LINE})`"),
        ],
    ));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The host presets table of docs/mcp.md: one row per preset, with the limit, the layer that
/// sets it and the warning threshold that `HostPreset::limits` resolves from the catalog.
#[test]
fn the_host_presets_table_is_what_the_presets_resolve_to() {
    let mcp = read("docs/mcp.md");
    let mut problems = Vec::new();
    for preset in HOSTS {
        let l = preset.limits(&|_| None);
        let start = format!("| `{}` | {} B", preset.name, grouped(l.limit_bytes));
        let Some(row) = mcp.lines().find(|r| r.starts_with(&start)) else {
            problems.push(format!("docs/mcp.md: no host row starting {start:?}"));
            continue;
        };
        if !row.contains(&format!("`{}`", l.limit_layer)) {
            problems.push(format!(
                "docs/mcp.md: the {} row must name {}",
                preset.name, l.limit_layer
            ));
        }
        if l.estimated != row.contains("(estimated)") {
            problems.push(format!(
                "docs/mcp.md: the {} row must say whether it is estimated ({})",
                preset.name, l.estimated
            ));
        }
        if let Some(w) = l.warn_bytes {
            if !row.contains(&format!("{} B", grouped(w))) {
                problems.push(format!(
                    "docs/mcp.md: the {} row must give its warning, {w} B",
                    preset.name
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// CONTRIBUTING.md names every bench of Cargo.toml.
#[test]
fn contributing_names_every_bench() {
    let manifest = read("Cargo.toml");
    let contributing = read("CONTRIBUTING.md");
    let sentence = contributing
        .split("The benches are criterion benches in `benches/`")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .expect("CONTRIBUTING.md: the benches sentence");
    let benches: Vec<&str> = manifest
        .split("[[bench]]")
        .skip(1)
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("name = ")))
        .map(|n| n.trim_matches('"'))
        .collect();
    assert!(!benches.is_empty());
    for b in benches {
        assert!(
            sentence.contains(&format!("`{b}`")),
            "CONTRIBUTING.md does not name the bench `{b}`"
        );
    }
}

/// README.md's Layout names every public module of the crate.
#[test]
fn the_readme_layout_names_every_public_module() {
    let lib = read("src/lib.rs");
    let readme = read("README.md");
    let layout = readme
        .split("## Layout")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README.md: a Layout section");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(modules.len() > 5, "{modules:?}");
    for m in modules {
        let named =
            layout.contains(&format!("src/{m}.rs")) || layout.contains(&format!("src/{m}/"));
        assert!(named, "README.md's Layout does not name src/{m}");
    }
}

/// The helpers find a number that changed: a check that cannot fail fails here.
#[test]
fn the_checks_catch_a_changed_number() {
    assert_eq!(grouped(16_384), "16,384");
    assert_eq!(grouped(999), "999");
    assert_eq!(grouped(1_000_000), "1,000,000");
    let doc = "| `--call-timeout SECONDS` | 300 |";
    assert!(missing("d", doc, &["| `--call-timeout SECONDS` | 300 |".into()]).is_empty());
    assert_eq!(
        missing("d", doc, &["| `--call-timeout SECONDS` | 600 |".into()]).len(),
        1
    );
}

/// The top-level directories whose paths the docs name.
const PATH_ROOTS: &[&str] = &[
    "tests/",
    "scripts/",
    "src/",
    "examples/",
    "dist/",
    "benches/",
    "alerts/",
    "dashboards/",
    "fuzz/",
    "docs/",
    ".ci/",
];

/// The repository paths `text` names: words starting with one of [`PATH_ROOTS`], up to the
/// first character no path here has, trailing punctuation dropped; patterns (`*`, `{}`, `<>`)
/// left out.
fn named_paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-*{}<>".contains(c);
    let mut out = Vec::new();
    for (i, _) in text.char_indices() {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| is_path_char(c) || c == '/') {
            continue;
        }
        let rest = &text[i..];
        if !PATH_ROOTS.iter().any(|r| rest.starts_with(r)) {
            continue;
        }
        let end = rest.find(|c: char| !is_path_char(c)).unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(['.', ',', ':', ';']);
        if !path.contains(['*', '{', '}', '<', '>']) {
            out.push(path.to_string());
        }
    }
    out
}

/// Every file or directory of the repository a document names exists.
#[test]
fn every_path_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec!["README.md".to_string(), "CONTRIBUTING.md".to_string()];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(p.strip_prefix(root).unwrap().display().to_string());
        }
    }
    let mut problems = Vec::new();
    for doc in &docs {
        for path in named_paths(&read(doc)) {
            if !root.join(&path).exists() {
                problems.push(format!("{doc} names {path}, which does not exist"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_path_check_finds_a_path_that_moved() {
    let text = "see `tests/docs_executed.rs`, then tests/no_such_test.rs. A pattern: tests/*.rs; \
                a URL: https://example.com/tests/x.rs; src/cli/ too";
    assert_eq!(
        named_paths(text),
        [
            "tests/docs_executed.rs",
            "tests/no_such_test.rs",
            "src/cli/"
        ]
    );
}

/// The version a `package.json` or `package-lock.json` pins for `package`.
fn npm_version(file: &str, package: &str) -> String {
    let json: serde_json::Value = serde_json::from_str(&read(file)).unwrap();
    let v = match json.get("packages") {
        Some(p) => &p[format!("node_modules/{package}")]["version"],
        None => &json["dependencies"][package],
    };
    v.as_str()
        .unwrap_or_else(|| panic!("{file}: no {package}"))
        .to_string()
}

/// The releases the docs say were tested are the ones the test command pins.
#[test]
fn the_tested_releases_the_docs_name_are_the_pinned_ones() {
    let python_mcp = read("tests/requirements.txt")
        .lines()
        .find_map(|l| l.strip_prefix("mcp==").map(str::to_string))
        .expect("tests/requirements.txt pins mcp");
    let lock = "tests/npm/package-lock.json";
    let agents = "tests/agents/npm/package.json";
    let mut problems = missing(
        "docs/mcp.md",
        &read("docs/mcp.md"),
        &[
            format!("the official Python SDK {python_mcp}"),
            format!(
                "`@modelcontextprotocol/server-everything` {} (TypeScript SDK {})",
                npm_version(lock, "@modelcontextprotocol/server-everything"),
                npm_version(lock, "@modelcontextprotocol/sdk")
            ),
            format!(
                "the MCP Inspector {}",
                npm_version(lock, "@modelcontextprotocol/inspector")
            ),
        ],
    );
    problems.extend(missing(
        "docs/agents.md",
        &read("docs/agents.md"),
        &[
            format!(
                "`@anthropic-ai/claude-code` {}",
                npm_version(agents, "@anthropic-ai/claude-code")
            ),
            format!("`@openai/codex` {}", npm_version(agents, "@openai/codex")),
            format!(
                "The payload of {} shares",
                npm_version(agents, "@google/gemini-cli")
            ),
        ],
    ));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each fleet rule's hold (`for:` in `alerts/toolsize.rules.yml`) is the one its runbook
/// section gives, in minutes.
#[test]
fn each_fleet_rule_holds_as_long_as_its_runbook_says() {
    let rules = read("alerts/toolsize.rules.yml");
    let runbook = read("docs/runbook.md");
    let mut problems = Vec::new();
    let mut alert = None;
    let mut checked = 0;
    for line in rules.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert: ") {
            alert = Some(name.to_string());
        } else if let (Some(hold), Some(name)) = (line.strip_prefix("for: "), alert.as_deref()) {
            let minutes: u64 = hold
                .strip_suffix('m')
                .and_then(|m| m.parse().ok())
                .unwrap_or_else(|| panic!("{name}: `for: {hold}` is not in minutes"));
            let section = runbook
                .split(&format!("## {name}\n"))
                .nth(1)
                .and_then(|s| s.split("\n## ").next())
                .unwrap_or_else(|| panic!("docs/runbook.md: no section {name}"));
            let meaning = section.split("**Check.**").next().unwrap_or(section);
            problems.extend(missing(
                &format!("docs/runbook.md ({name})"),
                meaning,
                &[format!("{minutes} minutes")],
            ));
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} rules with a hold");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The `/metrics` families `text` names: each backquoted `toolsize_…` name (its labels, `{…}`,
/// left out), and each `_…` shorthand after one on the same line, read as that name with its
/// last segments replaced (`toolsize_tool_result_size_p50_bytes`, `_p95_bytes`).
fn documented_families(text: &str) -> std::collections::BTreeSet<String> {
    let mut named = std::collections::BTreeSet::new();
    for line in text.lines() {
        let mut last: Option<&str> = None;
        for code in line.split('`').skip(1).step_by(2) {
            let code = code.split('{').next().unwrap_or(code);
            if code.starts_with("toolsize_") {
                named.insert(code.to_string());
                last = Some(code);
            } else if let (Some(tail), Some(full)) = (code.strip_prefix('_'), last) {
                let segments: Vec<&str> = full.split('_').collect();
                let kept = segments.len().saturating_sub(tail.split('_').count());
                named.insert(format!("{}_{tail}", segments[..kept].join("_")));
            }
        }
    }
    named
}

/// Every family `/metrics` can show is named in `docs/collector.md`, where an operator looks it
/// up.
#[test]
fn every_metric_family_is_documented() {
    let named = documented_families(&read("docs/collector.md"));
    let missing: Vec<&&str> = toolsize::collector::read::names::FAMILIES
        .iter()
        .filter(|f| !named.contains(**f))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/collector.md does not name these /metrics families: {missing:?}"
    );
}

#[test]
fn the_family_check_reads_the_shorthand_and_finds_a_missing_one() {
    let named = documented_families(
        "| `toolsize_tool_result_size_p50_bytes`, `_p95_bytes` | gauge |\n`toolsize_x_total{a}`\n",
    );
    assert!(
        named.contains("toolsize_tool_result_size_p95_bytes"),
        "{named:?}"
    );
    assert!(named.contains("toolsize_x_total"), "{named:?}");
    assert!(!named.contains("toolsize_tool_toy_total"), "{named:?}");
}
