//! The status page at `/`, rendered by a real headless Chromium against the real daemon: every
//! tool row with the p95 the API serves, sorted by p95, the row over the ceiling marked, the
//! firing alert with its runbook link, a tool name that is markup shown as text (nothing
//! injected, nothing run); the empty state naming the OTLP address; the error banner while the
//! daemon does not answer, cleared once it does; with a token, the sign-in box, the token given
//! in the fragment or typed into the box (DevTools input events driven by
//! `tests/pages/type_token.mjs` under Node), and the API still closed. Chromium and Node are
//! required peers (`scripts/test.sh` installs them).
#![cfg(feature = "collector")]

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode, Uri};
use axum::response::IntoResponse;
use support::collector::*;

/// A tool name that runs script if the page ever parses data as markup.
const XSS: &str = "<img src=x onerror=document.title='pwned'>";
/// The page's own title, which the probe would replace.
const TITLE: &str = "<title>toolsize status</title>";

/// Loads `url` in headless Chromium for 5 s of virtual time (two refreshes of the page, every
/// request answered before time moves on) and returns the DOM; writes a screenshot too when
/// asked.
async fn chromium_dom(url: &str, profile: &str, screenshot: Option<&Path>) -> String {
    let profile = temp_dir(profile);
    let mut cmd = tokio::process::Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=5000",
        "--dump-dom",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    if let Some(png) = screenshot {
        cmd.arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1280,900");
    }
    cmd.arg(url).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("chromium did not finish within 120 s")
        .expect("run chromium");
    let _ = std::fs::remove_dir_all(&profile);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    dom
}

/// Text as Chromium serializes it in a text node.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

/// `n` with thousands separators, as the page writes exact sizes.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The start tag of the element with this id.
fn start_tag<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom
        .find(&format!(" id=\"{id}\""))
        .unwrap_or_else(|| panic!("no element #{id} in the DOM:\n{dom}"));
    let open = dom[..at].rfind('<').unwrap();
    let close = at + dom[at..].find('>').unwrap();
    &dom[open..=close]
}

/// What lies between the start tag of the element with this id and the closing `</tag>`
/// (elements of the page's lists and tables hold no element of their own tag).
fn inner<'a>(dom: &'a str, id: &str, tag: &str) -> &'a str {
    let start = start_tag(dom, id);
    let from = start.as_ptr() as usize - dom.as_ptr() as usize + start.len();
    let to = from + dom[from..].find(&format!("</{tag}>")).unwrap();
    &dom[from..to]
}

/// The rows (`<tr …>…</tr>`) of a table body.
fn rows(tbody: &str) -> Vec<&str> {
    tbody
        .split("<tr")
        .skip(1)
        .map(|r| r.split("</tr>").next().unwrap())
        .collect()
}

/// The `<td>` of a row whose class list holds `class`: (its start tag, its content).
fn cell<'a>(row: &'a str, class: &str) -> (&'a str, &'a str) {
    let at = row
        .match_indices("<td class=\"")
        .map(|(i, _)| i)
        .find(|&i| {
            let classes = &row[i + 11..];
            classes[..classes.find('"').unwrap()]
                .split(' ')
                .any(|c| c == class)
        })
        .unwrap_or_else(|| panic!("no cell .{class} in row {row}"));
    let tag_end = at + row[at..].find('>').unwrap();
    let end = tag_end + row[tag_end..].find("</td>").unwrap();
    (&row[at..=tag_end], &row[tag_end + 1..end])
}

/// Markup without its tags: the serialized text.
fn text(markup: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in markup.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(&tag[at..at + tag[at..].find('"')?])
}

fn is_hidden(tag: &str) -> bool {
    tag.contains(" hidden")
}

async fn post_tools(daemon: &Binary) {
    // (tool, bytes of its calls): one over the 10,000-byte ceiling, one near it, small ones,
    // and the markup probe.
    let tools: [(&str, &[i64]); 5] = [
        ("web_fetch", &[30_000, 31_000, 29_500, 32_000]),
        ("grep", &[8_200, 8_400, 8_300]),
        ("read_file", &[1_200, 2_400, 3_600, 4_800, 900, 2_000]),
        (XSS, &[500, 520]),
        ("list_dir", &[120, 150, 90]),
    ];
    let mut n = 0;
    let mut spans = Vec::new();
    for (tool, sizes) in tools {
        for &b in sizes {
            spans.push(own_span(n, tool, b));
            n += 1;
        }
    }
    let r = post_proto(daemon.http, &request("agent", spans)).await;
    assert!(r.status().is_success(), "OTLP export: {}", r.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_in_chromium_shows_tools_ceiling_and_alerts() {
    if !require("chromium", &["--version"]) {
        return;
    }
    let daemon = Binary::start_quiet("codex.tool-output.bytes-fallback", &[], None);
    post_tools(&daemon).await;
    // A model request of 40,000 input tokens in the trace of web_fetch's first result (30,000
    // bytes: 7,500 tokens), after it: the context column shows 7.5k tokens, 19 % of the input.
    let first = own_span(0, "web_fetch", 30_000);
    let mut chat = span(
        1_000,
        "chat model",
        vec![
            s("gen_ai.operation.name", "chat"),
            i("gen_ai.usage.input_tokens", 40_000),
        ],
    );
    chat.trace_id = first.trace_id;
    chat.start_time_unix_nano = first.end_time_unix_nano + 1_000_000;
    let r = post_proto(daemon.http, &request("agent", vec![chat])).await;
    assert!(r.status().is_success(), "OTLP export: {}", r.status());
    let admin = daemon.admin;
    let api = wait_for("the five tools", Duration::from_secs(30), || async move {
        let v = tools(admin, "?window=5m").await;
        (v["tools"].as_array()?.len() == 5).then_some(v)
    })
    .await;
    let alerts = wait_for(
        "the over-ceiling alert",
        Duration::from_secs(30),
        || async move {
            let v = get_json(admin, "/api/v1/alerts").await;
            v["firing"]
                .as_array()?
                .iter()
                .any(|a| a["name"] == "ToolResultOverCeiling")
                .then_some(v)
        },
    )
    .await;
    let ceiling = get_json(admin, "/api/v1/layers").await["ceiling"]["bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(ceiling, 10_000);

    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status_page.png");
    let dom = chromium_dom(&format!("http://{admin}/"), "status-page", Some(&png)).await;
    eprintln!("screenshot: {}", png.display());

    // The three answers arrived and were drawn.
    assert!(
        dom.contains("<body data-state=\"ok\""),
        "the page did not render every answer:\n{dom}"
    );
    assert!(is_hidden(start_tag(&dom, "banner")), "error banner shown");
    assert!(is_hidden(start_tag(&dom, "empty")), "empty state shown");

    // Nothing injected, nothing run: the probe is text, no <img> exists, the title is intact.
    assert!(dom.contains(TITLE), "the title changed:\n{dom}");
    assert!(
        !dom.to_ascii_lowercase().contains("<img"),
        "an element was injected:\n{dom}"
    );
    assert!(dom.contains(&format!(">{}</a>", escaped(XSS))));

    // The ceiling and its layer.
    let c = start_tag(&dom, "ceiling-bytes");
    assert_eq!(attr(c, "data-bytes"), Some("10000"));
    assert_eq!(attr(c, "title"), Some("10,000 bytes"));
    assert!(text(inner(&dom, "layers-body", "tbody")).contains("codex.tool-output.bytes-fallback"));

    // Every row the API serves, with its p95, sorted by p95 descending; over the ceiling marked.
    let page_rows = rows(inner(&dom, "tools-body", "tbody"));
    let api_rows = api["tools"].as_array().unwrap();
    assert_eq!(page_rows.len(), api_rows.len(), "rows:\n{page_rows:#?}");
    let p95 = |row: &str| -> u64 {
        attr(cell(row, "c-p95").0, "data-bytes")
            .unwrap_or_else(|| panic!("no p95 in {row}"))
            .parse()
            .unwrap()
    };
    for want in api_rows {
        let (service, tool) = (
            want["service"].as_str().unwrap(),
            want["tool"].as_str().unwrap(),
        );
        let row = page_rows
            .iter()
            .find(|r| {
                cell(r, "c-tool")
                    .1
                    .contains(&format!(">{}</a>", escaped(tool)))
            })
            .unwrap_or_else(|| panic!("no row for {tool:?}:\n{page_rows:#?}"));
        assert_eq!(text(cell(row, "c-service").1), escaped(service));
        let want_p95 = want["p95"].as_u64().unwrap();
        assert_eq!(p95(row), want_p95, "p95 of {tool:?}");
        assert_eq!(
            attr(cell(row, "c-p95").0, "title"),
            Some(format!("{} bytes", group(want_p95)).as_str())
        );
        assert_eq!(
            text(cell(row, "c-calls").1),
            want["count"].as_u64().unwrap().to_string()
        );
        // What its results cost the context, as the API says.
        assert_eq!(
            attr(cell(row, "c-context").0, "data-context-tokens"),
            Some(want["context"]["context_tokens"].to_string().as_str()),
            "context of {tool:?}: {row}"
        );
        if tool == "web_fetch" {
            assert_eq!(text(cell(row, "c-context").1), "7.5k tok · 19 %");
        }
        let over = want_p95 > ceiling || want["max"].as_u64().unwrap() > ceiling;
        assert_eq!(
            row.starts_with(" class=\"over\""),
            over,
            "row of {tool:?}: {row}"
        );
        assert_eq!(
            text(cell(row, "c-mark").1) == "over ceiling",
            over,
            "mark of {tool:?}"
        );
    }
    assert!(
        page_rows
            .iter()
            .filter(|r| r.starts_with(" class=\"over\""))
            .count()
            == 1,
        "exactly web_fetch is over the ceiling"
    );
    let order: Vec<u64> = page_rows.iter().map(|r| p95(r)).collect();
    assert!(
        order.windows(2).all(|w| w[0] >= w[1]),
        "not sorted by p95: {order:?}"
    );
    assert!(page_rows[0].contains(">web_fetch</a>"));

    // The firing alert, its labels and its runbook section, which exists.
    let firing = inner(&dom, "alerts-firing", "ul");
    for a in alerts["firing"].as_array().unwrap() {
        let name = a["name"].as_str().unwrap();
        let link = format!(
            "<a class=\"alert-name\" href=\"runbook#{}\">{name}</a>",
            name.to_lowercase()
        );
        let item = firing
            .split("<li")
            .find(|li| li.contains(&link))
            .unwrap_or_else(|| panic!("no firing {name} with {link}:\n{firing}"));
        for (k, v) in a["labels"].as_object().unwrap() {
            if k != "alertname" && k != "severity" {
                let chip = format!("{k}=</span>{}</span>", escaped(v.as_str().unwrap()));
                assert!(item.contains(&chip), "label {chip} missing in {item}");
            }
        }
    }
    assert!(firing.contains("href=\"runbook#toolresultoverceiling\""));
    assert!(is_hidden(start_tag(&dom, "alerts-none")));
    let runbook = reqwest::get(format!("http://{admin}/runbook"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(runbook.contains("id=\"toolresultoverceiling\""));

    daemon.stop();
}

/// A tool name with bidi controls and quotes: shown as the same text, reordering nothing else.
const BIDI: &str = "rev\u{202e}txt.exe\u{2066}\"'";

/// A series counted from sampled spans (`TOOLSIZE_SAMPLING_RATES=sampled=0.1`: each span is 10
/// calls) shows "≈" before its count and a "sampled" mark naming the spans received; a series
/// of unsampled spans shows its count alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_marks_counts_extrapolated_from_sampled_spans() {
    if !require("chromium", &["--version"]) {
        return;
    }
    let daemon = Binary::start_with_env(
        &[],
        None,
        &[
            ("TOOLSIZE_SAMPLING_RATES", "sampled=0.1"),
            ("RUST_LOG", "error"),
        ],
    );
    let three = (0..3).map(|n| own_span(n, "fetch", 500)).collect();
    let two = (3..5).map(|n| own_span(n, "read", 500)).collect();
    for (service, spans) in [("sampled", three), ("plain", two)] {
        let r = post_proto(daemon.http, &request(service, spans)).await;
        assert!(r.status().is_success());
    }
    let v = tools(daemon.admin, "").await;
    let api = |s: &str| {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["service"] == s)
            .unwrap()
            .clone()
    };
    assert_eq!(
        (&api("sampled")["count"], &api("sampled")["extrapolated"]),
        (&30.into(), &true.into())
    );
    assert_eq!(
        (&api("plain")["count"], &api("plain")["extrapolated"]),
        (&2.into(), &false.into())
    );

    let dom = chromium_dom(&format!("http://{}/", daemon.admin), "status-sampled", None).await;
    assert!(
        dom.contains("<body data-state=\"ok\""),
        "not rendered:\n{dom}"
    );
    let page_rows = rows(inner(&dom, "tools-body", "tbody"));
    let row = |service: &str| {
        *page_rows
            .iter()
            .find(|r| text(cell(r, "c-service").1) == service)
            .unwrap_or_else(|| panic!("no row of {service}:\n{page_rows:#?}"))
    };
    let (td, calls) = cell(row("sampled"), "c-calls");
    assert_eq!(text(calls), "≈30sampled", "{calls}");
    assert!(
        attr(td, "title").is_some_and(|t| t.contains("extrapolated from 3 sampled spans")),
        "{td}"
    );
    assert_eq!(text(cell(row("plain"), "c-calls").1), "2");
}

/// `s` percent-encoded as a path segment (every byte but the unreserved ones).
fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The start tags of the elements `<tag` inside `markup`.
fn tags<'a>(markup: &'a str, tag: &str) -> Vec<&'a str> {
    markup
        .match_indices(&format!("<{tag} "))
        .map(|(i, _)| &markup[i..=i + markup[i..].find('>').unwrap()])
        .collect()
}

/// The start tags of the elements `<tag` inside `markup` whose class list holds `class`.
fn tags_with_class<'a>(markup: &'a str, tag: &str, class: &str) -> Vec<&'a str> {
    tags(markup, tag)
        .into_iter()
        .filter(|t| attr(t, "class").is_some_and(|c| c.split(' ').any(|c| c == class)))
        .collect()
}

/// Where a screenshot goes: `TOOLSIZE_SCREENSHOTS` (e.g. `docs`) when set, else the test's
/// temporary directory.
fn screenshot(name: &str) -> std::path::PathBuf {
    match std::env::var_os("TOOLSIZE_SCREENSHOTS") {
        Some(dir) => Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(name),
        None => Path::new(env!("CARGO_TARGET_TMPDIR")).join(name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_page_in_chromium_draws_history_distribution_and_sparklines() {
    if !require("chromium", &["--version"]) {
        return;
    }
    let daemon = Binary::start_quiet("codex.tool-output.bytes-fallback", &[], None);
    post_tools(&daemon).await;
    let r = post_proto(
        daemon.http,
        &request(
            "agent",
            vec![own_span(100, BIDI, 700), own_span(101, BIDI, 12_000)],
        ),
    )
    .await;
    assert!(r.status().is_success(), "OTLP export: {}", r.status());
    let admin = daemon.admin;
    let history = wait_for(
        "web_fetch's history",
        Duration::from_secs(30),
        || async move {
            let v = get_json(admin, "/api/v1/tools/web_fetch/history?service=agent").await;
            (v["series"][0]["points"]
                .as_array()?
                .iter()
                .map(|p| p["count"].as_u64().unwrap())
                .sum::<u64>()
                == 4)
                .then_some(v)
        },
    )
    .await;
    let listed = wait_for("six tools", Duration::from_secs(30), || async move {
        let v = tools(admin, "?window=5m").await;
        (v["tools"].as_array()?.len() == 6).then_some(v)
    })
    .await;
    // The bidi name as the daemon keeps it (it may make controls visible).
    let bidi = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool"].as_str().unwrap().to_owned())
        .find(|t| t.starts_with("rev"))
        .unwrap();
    assert!(bidi.contains("txt.exe"), "{bidi:?}");
    // The page shows the daemon's shortest window (5m) when the link names none, and says so.
    let detail = get_json(admin, "/api/v1/tools/web_fetch?window=5m&service=agent").await;
    assert_eq!(detail["window"], "5m");

    // The tool page: every history point drawn with its exact value, the ceiling marked.
    let png = screenshot("tool-page.png");
    let dom = chromium_dom(
        &format!("http://{admin}/tools/web_fetch?service=agent"),
        "tool-page",
        Some(&png),
    )
    .await;
    eprintln!("screenshot: {}", png.display());
    assert!(
        dom.contains("<body data-state=\"ok\""),
        "not rendered:\n{dom}"
    );
    assert!(is_hidden(start_tag(&dom, "banner")));
    assert!(
        dom.contains("<span id=\"dist-window\">results of the last 5m</span>"),
        "the distribution does not name its window:\n{dom}"
    );
    assert!(dom.contains("<span id=\"summary-window\">last 5m:</span>"));
    let sizes = inner(&dom, "sizes-chart", "div");
    let points = history["series"][0]["points"].as_array().unwrap();
    for k in ["p50", "p95", "p99"] {
        let g = sizes
            .split(&format!("data-series=\"{k}\""))
            .nth(1)
            .unwrap_or_else(|| panic!("no {k} series in {sizes}"));
        let g = &g[..g.find("</g>").unwrap()];
        let drawn: Vec<u64> = tags_with_class(g, "circle", "pt")
            .iter()
            .map(|t| attr(t, "data-value").unwrap().parse().unwrap())
            .collect();
        let want: Vec<u64> = points.iter().map(|p| p[k].as_u64().unwrap()).collect();
        assert_eq!(drawn, want, "{k} points");
        assert!(g.contains(&format!("<title>{k} {} bytes at ", group(want[0]))));
    }
    let ceil = tags_with_class(sizes, "line", "ceil");
    assert!(
        ceil.iter().any(|t| attr(t, "data-bytes") == Some("10000")),
        "no ceiling line in {sizes}"
    );
    let rates = inner(&dom, "rates-chart", "div");
    assert_eq!(
        tags_with_class(rates, "circle", "pt").len(),
        2 * points.len()
    );
    // The distribution: one bar per non-empty size bucket of the window with its count, bars
    // reaching past the ceiling (10,000 bytes) marked, the others not.
    let dist = inner(&dom, "dist-chart", "div");
    let largest = detail["series"][0]["largest"].as_array().unwrap();
    let bars = tags_with_class(dist, "rect", "bin");
    let drawn: Vec<(String, u64)> = bars
        .iter()
        .map(|t| {
            (
                attr(t, "data-le").unwrap().to_string(),
                attr(t, "data-value").unwrap().parse().unwrap(),
            )
        })
        .collect();
    let mut want = Vec::new();
    let mut over = Vec::new();
    for b in detail["series"][0]["size_distribution"].as_array().unwrap() {
        let le = b["le"].as_u64();
        let count = b["count"].as_u64().unwrap();
        if count > 0 {
            let label = le.map_or("+Inf".to_string(), |l| l.to_string());
            want.push((label, count));
            over.push(le.is_none_or(|l| l > 10_000));
        }
    }
    assert!(!want.is_empty(), "no sized result in {detail}");
    assert_eq!(drawn, want, "bars against size_distribution");
    for (t, over) in bars.iter().zip(over) {
        let class = attr(t, "class").unwrap();
        assert_eq!(class == "bin pt over", over, "{t}");
    }
    assert_eq!(
        want.iter().map(|(_, c)| c).sum::<u64>(),
        detail["series"][0]["sized"].as_u64().unwrap(),
        "every sized result of the window is in a bar"
    );
    assert!(!tags_with_class(dist, "line", "ceil").is_empty());
    // The largest results with their trace ids, the repeated argument hashes.
    let table = inner(&dom, "largest-body", "tbody");
    assert_eq!(rows(table).len(), largest.len());
    for l in largest {
        assert!(table.contains(l["trace_id"].as_str().unwrap()));
    }
    let top_args = detail["series"][0]["top_args"].as_array().unwrap();
    assert_eq!(
        rows(inner(&dom, "args-body", "tbody")).len(),
        top_args.len()
    );

    // Strange names: the markup probe and the bidi name are text, nothing injected.
    for (name, profile) in [(XSS, "tool-xss"), (bidi.as_str(), "tool-bidi")] {
        let url = format!("http://{admin}/tools/{}?service=agent", segment(name));
        let dom = chromium_dom(&url, profile, None).await;
        assert!(dom.contains("<body data-state=\"ok\""), "{name:?}:\n{dom}");
        assert!(
            !dom.to_ascii_lowercase().contains("<img"),
            "injected:\n{dom}"
        );
        assert_eq!(inner(&dom, "tool-name", "code"), escaped(name));
        assert!(!tags_with_class(inner(&dom, "sizes-chart", "div"), "circle", "pt").is_empty());
    }

    // The overview: each tool links to its page and has a p95 sparkline.
    let png = screenshot("status-page.png");
    let dom = chromium_dom(&format!("http://{admin}/"), "overview-sparks", Some(&png)).await;
    let page_rows = rows(inner(&dom, "tools-body", "tbody"));
    assert_eq!(page_rows.len(), 6);
    for row in &page_rows {
        let spark = cell(row, "c-spark").1;
        assert!(
            spark.contains("<svg class=\"spark\""),
            "no sparkline in {row}"
        );
        assert!(spark.contains("<polyline"), "no line in {row}");
    }
    let web = page_rows
        .iter()
        .find(|r| r.contains(">web_fetch</a>"))
        .unwrap();
    assert!(
        web.contains("href=\"tools/web_fetch?service=agent&amp;window=5m\""),
        "{web}"
    );
    assert!(dom.contains(&format!(">{}</a>", escaped(&bidi))));

    daemon.stop();
}

/// A front for the daemon, as a reverse proxy would be: serves `page` at `/`, forwards every
/// other GET to the daemon and answers 502 when the daemon does not answer or while
/// `fail_next` requests remain to be failed.
async fn front(page: String, daemon: SocketAddr, fail_next: Arc<AtomicUsize>) -> SocketAddr {
    let client = reqwest::Client::new();
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(move || {
                let page = page.clone();
                async move { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page) }
            }),
        )
        .fallback(move |uri: Uri| {
            let (client, fail_next) = (client.clone(), fail_next.clone());
            async move {
                let bad_gateway =
                    || (StatusCode::BAD_GATEWAY, "daemon unreachable").into_response();
                if fail_next
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    return bad_gateway();
                }
                match client.get(format!("http://{daemon}{uri}")).send().await {
                    Ok(r) => {
                        let status = StatusCode::from_u16(r.status().as_u16()).unwrap();
                        let body = r.bytes().await.unwrap_or_default();
                        let json = [(header::CONTENT_TYPE, "application/json")];
                        (status, json, body).into_response()
                    }
                    Err(_) => bad_gateway(),
                }
            }
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn banner_text(dom: &str) -> String {
    text(inner(dom, "banner", "div"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_empty_state_error_banner_and_recovery() {
    if !require("chromium", &["--version"]) {
        return;
    }
    let daemon = Binary::start_quiet("codex.tool-output.bytes-fallback", &[], None);
    let admin = daemon.admin;
    let page = reqwest::get(format!("http://{admin}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let fail_next = Arc::new(AtomicUsize::new(0));
    let url = format!("http://{}/", front(page, admin, fail_next.clone()).await);

    // No tool call yet: the page says where to send spans, the daemon's own OTLP address.
    let dom = chromium_dom(&url, "status-page-empty", None).await;
    assert!(dom.contains("<body data-state=\"ok\""), "{dom}");
    assert!(
        !is_hidden(start_tag(&dom, "empty")),
        "no empty state:\n{dom}"
    );
    assert!(is_hidden(start_tag(&dom, "tools")));
    let empty = text(inner(&dom, "empty", "div"));
    assert!(
        empty.contains("No tool calls in the last 5 minutes")
            && empty.contains(&format!(
                "OTEL_EXPORTER_OTLP_ENDPOINT=http://{}",
                daemon.http
            ))
            && empty.contains(&daemon.grpc.to_string()),
        "empty state: {empty}"
    );

    post_tools(&daemon).await;
    wait_for("the five tools", Duration::from_secs(30), || async move {
        (tools(admin, "?window=5m").await["tools"].as_array()?.len() == 5).then_some(())
    })
    .await;

    // The first refresh (three requests) fails, the next ones pass: the banner goes away and
    // the rows come.
    fail_next.store(3, Ordering::SeqCst);
    let dom = chromium_dom(&url, "status-page-recovers", None).await;
    assert_eq!(fail_next.load(Ordering::SeqCst), 0, "the page did not ask");
    assert!(dom.contains("<body data-state=\"ok\""), "{dom}");
    assert!(
        is_hidden(start_tag(&dom, "banner")),
        "{}",
        banner_text(&dom)
    );
    assert_eq!(rows(inner(&dom, "tools-body", "tbody")).len(), 5);

    // The daemon stops: every refresh fails, the banner says so and names what failed (here
    // with the window of the page's URL).
    daemon.stop();
    let dom = chromium_dom(&format!("{url}?window=1h"), "status-page-down", None).await;
    assert!(dom.contains("<body data-state=\"error\""), "{dom}");
    assert!(!is_hidden(start_tag(&dom, "banner")), "no banner:\n{dom}");
    let banner = banner_text(&dom);
    assert!(
        banner.contains("The daemon did not answer")
            && banner.contains("api/v1/tools?window=1h: HTTP 502")
            && banner.contains("api/v1/layers: HTTP 502")
            && banner.contains("api/v1/alerts: HTTP 502")
            && banner.contains("retrying every 2 s"),
        "banner: {banner}"
    );
    assert!(rows(inner(&dom, "tools-body", "tbody")).is_empty());
    assert!(
        dom.contains("data-window=\"1h\" aria-pressed=\"true\""),
        "{dom}"
    );
}

/// `toolsize demo` with short slots and an early deploy: the overview's sparklines and the tool
/// page draw the history the daemon kept, and both show `search_orders`' p95 jump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_history_in_chromium_shows_the_deploy_jump() {
    if !require("chromium", &["--version"]) {
        return;
    }
    let demo = Binary::start_command(
        "demo",
        &["--window", "5s", "--window", "2m", "--deploy-after", "15s"],
        None,
        &[("RUST_LOG", "error")],
    );
    let admin = demo.admin;
    let sized_p95 = |v: &serde_json::Value| -> Vec<u64> {
        v["series"][0]["points"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p["sized"].as_u64() > Some(0))
                    .map(|p| p["p95"].as_u64().unwrap())
                    .collect()
            })
            .unwrap_or_default()
    };
    let before_after = wait_for(
        "three slots before the deploy and two after",
        Duration::from_secs(60),
        || async move {
            // (404 until the first search_orders call arrives.)
            let r = reqwest::get(format!(
                "http://{admin}/api/v1/tools/search_orders/history?service=demo-agent"
            ))
            .await
            .ok()?;
            let body = r.error_for_status().ok()?.bytes().await.ok()?;
            let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
            let p95 = sized_p95(&v);
            let before = p95.iter().take_while(|&&p| p < 10_000).count();
            let after = p95.iter().filter(|&&p| p > 20_000).count();
            (before >= 3 && after >= 2).then_some((before, after))
        },
    )
    .await;
    eprintln!("search_orders history: {before_after:?} slots before and after the deploy");

    // The overview: every tool has a sparkline; search_orders' rises past 20 KB from under 10 KB.
    let dom = chromium_dom(&format!("http://{admin}/"), "demo-overview", None).await;
    let page_rows = rows(inner(&dom, "tools-body", "tbody"));
    assert_eq!(page_rows.len(), 4, "{dom}");
    // The window buttons are the daemon's windows, its shortest chosen.
    let buttons: Vec<&str> = tags(&dom, "button")
        .iter()
        .filter_map(|t| attr(t, "data-window"))
        .collect();
    assert_eq!(buttons, ["5s", "2m", "all"]);
    assert!(dom.contains("data-window=\"5s\" aria-pressed=\"true\""));
    for row in &page_rows {
        let spark = cell(row, "c-spark").1;
        assert!(spark.contains("<polyline"), "no sparkline in {row}");
    }
    let row = page_rows
        .iter()
        .find(|r| r.contains(">search_orders</a>"))
        .unwrap();
    let drawn: Vec<u64> = tags(cell(row, "c-spark").1, "circle")
        .iter()
        .map(|t| attr(t, "data-value").unwrap().parse().unwrap())
        .collect();
    assert!(drawn.len() >= 5, "{drawn:?}");
    assert!(
        drawn[0] < 10_000 && drawn.iter().any(|&p| p > 20_000),
        "{drawn:?}"
    );

    // The tool page: the p95 line crosses the 16 KiB ceiling drawn on the same chart.
    let dom = chromium_dom(
        &format!("http://{admin}/tools/search_orders?service=demo-agent"),
        "demo-tool",
        None,
    )
    .await;
    let sizes = inner(&dom, "sizes-chart", "div");
    let g = sizes.split("data-series=\"p95\"").nth(1).unwrap();
    let g = &g[..g.find("</g>").unwrap()];
    let p95: Vec<u64> = tags_with_class(g, "circle", "pt")
        .iter()
        .map(|t| attr(t, "data-value").unwrap().parse().unwrap())
        .collect();
    assert!(
        p95[0] < 10_000 && p95.iter().any(|&p| p > 20_000),
        "{p95:?}"
    );
    assert!(tags_with_class(sizes, "line", "ceil")
        .iter()
        .any(|t| attr(t, "data-bytes") == Some("16384")));
    demo.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_with_a_token_in_chromium_and_the_api_still_closed() {
    if !require("chromium", &["--version"]) {
        return;
    }
    const TOKEN: &str = "p4ge-t0ken";
    let daemon = Binary::start_with_env(
        &["--stack", "codex.tool-output.bytes-fallback"],
        None,
        &[("TOOLSIZE_AUTH_TOKEN", TOKEN), ("RUST_LOG", "error")],
    );
    use prost::Message;
    let spans = vec![own_span(1, "web_fetch", 30_000), own_span(2, "grep", 8_200)];
    let r = reqwest::Client::new()
        .post(format!("http://{}/v1/traces", daemon.http))
        .header("content-type", "application/x-protobuf")
        .bearer_auth(TOKEN)
        .body(request("agent", spans).encode_to_vec())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let admin = daemon.admin;
    let client = reqwest::Client::new();
    let get = |path: &str, token: Option<&str>| {
        let mut req = client.get(format!("http://{admin}{path}"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    wait_for("the two tools", Duration::from_secs(30), || async {
        let r = get("/api/v1/tools?window=5m", Some(TOKEN)).await.ok()?;
        let v: serde_json::Value = serde_json::from_slice(&r.bytes().await.ok()?).ok()?;
        (v["tools"].as_array()?.len() == 2).then_some(())
    })
    .await;

    // The API and /metrics are as closed as before; only the pages' HTML (no data) is open.
    for path in [
        "/metrics",
        "/api/v1/tools",
        "/api/v1/tools/web_fetch",
        "/api/v1/alerts",
        "/api/v1/layers",
        "/tools/web_fetch/history",
    ] {
        let r = get(path, None).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    for path in ["/", "/tools/web_fetch", "/runbook"] {
        let r = get(path, None).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let page = r.text().await.unwrap();
        assert!(!page.contains(TOKEN) && !page.contains("30000"), "{path}");
    }
    let r = get("/api/v1/tools", Some("wrong")).await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Without the token: the sign-in box, no data.
    let dom = chromium_dom(&format!("http://{admin}/"), "auth-none", None).await;
    assert!(dom.contains("id=\"signin\""), "no sign-in box:\n{dom}");
    assert!(dom.contains("This daemon requires its token"), "{dom}");
    assert!(
        !dom.contains(">web_fetch<"),
        "data without the token:\n{dom}"
    );

    // With it (a fragment: never sent to the server): the tools, no box.
    let png = screenshot("status_page_token.png");
    let dom = chromium_dom(
        &format!("http://{admin}/#token={TOKEN}"),
        "auth-ok",
        Some(&png),
    )
    .await;
    assert!(
        dom.contains("<body data-state=\"ok\""),
        "the page did not render every answer:\n{dom}"
    );
    assert!(!dom.contains("id=\"signin\""), "{dom}");
    let page_rows = rows(inner(&dom, "tools-body", "tbody"));
    assert_eq!(page_rows.len(), 2, "{page_rows:#?}");
    assert!(page_rows[0].contains(">web_fetch</a>"), "{}", page_rows[0]);

    // The tool page, the same way.
    let dom = chromium_dom(
        &format!("http://{admin}/tools/web_fetch?service=agent#token={TOKEN}"),
        "auth-tool",
        None,
    )
    .await;
    assert!(
        dom.contains("<body data-state=\"ok\""),
        "the tool page did not render:\n{dom}"
    );
    assert!(!dom.contains("id=\"signin\""), "{dom}");

    // A wrong token: refused, said so, forgotten.
    let dom = chromium_dom(&format!("http://{admin}/#token=wrong"), "auth-wrong", None).await;
    assert!(dom.contains("The daemon refused this token"), "{dom}");
    assert!(!dom.contains(">web_fetch<"), "{dom}");
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_typed_into_the_sign_in_box_opens_the_page() {
    let Some(v) = type_token(None).await else {
        return;
    };
    assert_eq!(v["kept"], serde_json::Value::Null, "{v}");
}

/// The answers (401) to a refresh asked before the token was typed come after it was typed and
/// before the page reloads (held so by the script): the typed token is not the one they refused,
/// so it is kept and the page opens with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_refusal_does_not_forget_the_token_typed_meanwhile() {
    let Some(v) = type_token(Some("late-401")).await else {
        return;
    };
    assert_eq!(v["kept"], true, "{v}");
}

/// Types a token into the sign-in box of a daemon that requires one (tests/pages/type_token.mjs,
/// in `mode`), asserts the page then opens with it, and returns what the script saw; `None`
/// when a peer is missing and that is allowed.
async fn type_token(mode: Option<&str>) -> Option<serde_json::Value> {
    if !require("chromium", &["--version"])
        || !require(
            "node",
            &[
                "--experimental-websocket",
                "-e",
                "typeof WebSocket === 'function' || process.exit(1)",
            ],
        )
    {
        return None;
    }
    const TOKEN: &str = "typ3d-t0ken";
    let daemon = Binary::start_with_env(
        &[],
        None,
        &[("TOOLSIZE_AUTH_TOKEN", TOKEN), ("RUST_LOG", "error")],
    );
    use prost::Message;
    let r = reqwest::Client::new()
        .post(format!("http://{}/v1/traces", daemon.http))
        .header("content-type", "application/x-protobuf")
        .bearer_auth(TOKEN)
        .body(request("agent", vec![own_span(1, "web_fetch", 3_000)]).encode_to_vec())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let profile = temp_dir(&format!("type-token-{}", mode.unwrap_or("plain")));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pages/type_token.mjs");
    // The script's deadlines follow what it measures (its first render); this one only stops a
    // hung script: past its start bound and ten times that for the rest.
    let out = tokio::time::timeout(
        Duration::from_secs(240 * 11 + 60),
        tokio::process::Command::new("node")
            .arg("--experimental-websocket")
            .arg(&script)
            .arg("chromium")
            .arg(&*profile)
            .arg(format!("http://{}/", daemon.admin))
            .arg(TOKEN)
            .args(mode)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the typing script hung past its own deadlines")
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!(
        "first render {} ms, after the token {} ms",
        v["first_ms"], v["after_ms"]
    );
    assert_eq!(v["box"], true, "{v}");
    assert_eq!(v["state"], "ok", "{v}");
    assert_eq!(v["rows"], 1, "{v}");
    assert_eq!(v["signin_after"], false, "{v}");
    assert!(!v["address"].as_str().unwrap().contains(TOKEN), "{v}");
    daemon.stop();
    Some(v)
}

/// With `--forward`, the status page shows a line per upstream: what was sent and queued, and
/// once the upstream lost requests, how many, in red. The upstream here is down, so the one
/// request offered to it is given up after `forward.retry_for`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_shows_each_forwarding_upstream() {
    if !require("chromium", &["--version"]) {
        return;
    }
    let dir = temp_dir("page-forward");
    let config = dir.join("forward.toml");
    std::fs::write(&config, "[forward]\nretry_for = \"1s\"\nconcurrency = 1\n").unwrap();
    let down = format!("grpc://127.0.0.1:{}", free_port());
    let d = Binary::start_with_env(
        &["--config", config.to_str().unwrap(), "--forward", &down],
        None,
        &[("RUST_LOG", "error")],
    );
    let r = post_proto(d.http, &request("agent", vec![own_span(1, "fetch", 900)])).await;
    assert_eq!(r.status(), 200);
    wait_for(
        "the request to be given up",
        Duration::from_secs(30),
        || async {
            let v = get_json(d.admin, "/api/v1/forward").await;
            (v["upstreams"][0]["gave_up"] == 1).then_some(())
        },
    )
    .await;
    let dom = chromium_dom(&format!("http://{}/", d.admin), "forward-page", None).await;
    let line = dom
        .split("data-upstream=\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no upstream line in {dom}"));
    assert!(line.starts_with(&format!("{down}\"")), "{line}");
    let line = &line[..line.find("</span>").unwrap_or(line.len())];
    assert!(text(line).contains("0 sent"), "{line}");
    assert!(text(line).contains("1 given up"), "{line}");
    // The line's own tag is marked: `<span class="upstream bad" data-upstream="…" …>`.
    let at = dom
        .find("class=\"upstream bad\"")
        .expect("the lost request marks the line");
    let tag = &dom[at..at + dom[at..].find('>').unwrap()];
    assert_eq!(attr(tag, "data-upstream"), Some(down.as_str()), "{tag}");
    d.stop();
}

/// Spans arrive but none is a tool call: the empty state names the service, the keys its spans
/// carried and the recipe, instead of telling the user to point an exporter at the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_page_shows_spans_that_are_no_tool_call() {
    if !require("chromium", &["--version"]) {
        return;
    }
    let daemon = Binary::start_with_env(&[], None, &[("RUST_LOG", "error")]);
    let fresh = chromium_dom(&format!("http://{}/", daemon.admin), "status-fresh", None).await;
    assert!(!is_hidden(start_tag(&fresh, "empty-point")), "{fresh}");
    assert!(is_hidden(start_tag(&fresh, "unrecognised")), "{fresh}");

    let spans = vec![span(0, "chat", vec![s("gen_ai.operation.name", "chat")])];
    let r = post_proto(daemon.http, &request("chatty-agent", spans)).await;
    assert!(r.status().is_success());
    let dom = chromium_dom(&format!("http://{}/", daemon.admin), "status-unrec", None).await;
    assert!(
        dom.contains("<body data-state=\"ok\""),
        "not rendered:\n{dom}"
    );
    assert!(
        is_hidden(start_tag(&dom, "empty-point")),
        "still pointing at an exporter"
    );
    assert!(!is_hidden(start_tag(&dom, "unrecognised")), "{dom}");
    let list = text(inner(&dom, "unrecognised-list", "ul"));
    assert!(
        list.starts_with(
            "chatty-agent: 1 span, 0 log records; keys gen_ai.operation.name. GenAI spans arrive"
        ),
        "{list}"
    );
    assert!(list.contains("docs/collector.md#the-recipe"), "{list}");
}
