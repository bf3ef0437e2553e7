//! Weakest-layer verdicts on real results, measured with `toolsize::measure`: every unit and scope,
//! non-ASCII and multi-line text, exact and estimated values.

use toolsize::layers::{
    Action, CustomLayer, Cut, ResultMeasures, Scope, Stack, StackConfig, Unit, Verdict,
};
use toolsize::{measure, Measures, Origin};

fn measured(text: &str) -> ResultMeasures {
    measure(text.as_bytes(), Measures::ALL)
}

fn bytes_only(text: &str) -> ResultMeasures {
    measure(text.as_bytes(), Measures::BYTES_ONLY)
}

fn custom(name: &str, limit: u64, unit: Unit, scope: Scope) -> CustomLayer {
    CustomLayer {
        name: name.to_owned(),
        limit,
        unit,
        scope,
        action: Action::TruncateSilent,
    }
}

/// The stack of `ids` then the `custom` layers (named after the ids: a custom layer is in a
/// named stack where the list names it).
fn stack(ids: &str, custom: Vec<CustomLayer>) -> Stack {
    let mut config = StackConfig::parse_list(ids).unwrap();
    if !config.ids.is_empty() {
        config.ids.extend(custom.iter().map(|c| c.name.clone()));
    }
    config.custom = custom;
    Stack::resolve(None, None, Some(&config)).unwrap()
}

fn cut<'a>(v: &'a Verdict<'_>, id: &str) -> Option<&'a Cut<'a>> {
    v.cuts.iter().find(|c| c.layer_id == id)
}

fn ids<'a>(v: &'a Verdict<'_>) -> Vec<&'a str> {
    v.cuts.iter().map(|c| c.layer_id).collect()
}

#[test]
fn emoji_heavy_result_against_chars_and_utf16_layers() {
    // 7,500 astral code points: 30,000 bytes, 7,500 chars, 15,000 UTF-16 units.
    let text = "\u{1F600}".repeat(7_500);
    let m = measured(&text);
    assert_eq!(
        (m.bytes, m.chars, m.utf16_units),
        (30_000, Some(7_500), Some(15_000))
    );
    let s = stack(
        "cline.message-builder,default",
        vec![
            custom("py-chars", 10_000, Unit::Chars, Scope::PerResult),
            custom("js-units", 10_000, Unit::Utf16Units, Scope::PerResult),
        ],
    );
    let v = s.verdict(&m, false);
    // Code points pass (7,500 <= 10,000); UTF-16 units do not (15,000): the same text passes a
    // Python layer and fails a JavaScript one.
    assert!(cut(&v, "py-chars").is_none());
    let js = cut(&v, "js-units").unwrap();
    assert_eq!((js.value, js.estimated, js.margin), (15_000, false, 5_000));
    let d = cut(&v, "default").unwrap();
    assert_eq!((d.value, d.estimated, d.unit), (30_000, false, Unit::Bytes));
    // The whole text is one string: Cline's per-string 8,000-unit cut, its UTF-16 length estimated
    // (7,500 code points plus at most one extra unit each).
    let cline = cut(&v, "cline.message-builder").unwrap();
    assert_eq!(
        (cline.value, cline.estimated, cline.scope),
        (15_000, true, Scope::PerString)
    );
    // Weakest first: 8,000 < 10,000 < 16,384 bytes.
    assert_eq!(ids(&v), ["cline.message-builder", "js-units", "default"]);
    assert_eq!(v.weakest.unwrap().layer_id, "cline.message-builder");
    let c = s.ceiling_bytes().unwrap();
    assert_eq!(
        (c.layer_id, c.bytes, c.source),
        ("cline.message-builder", 8_000, Origin::Catalog)
    );

    // Bytes only: code points and units are estimated as bytes (an upper bound), so the chars
    // layer now reports a cut, marked estimated.
    let v = s.verdict(&bytes_only(&text), false);
    let py = cut(&v, "py-chars").unwrap();
    assert_eq!((py.value, py.estimated), (30_000, true));
    assert!(cut(&v, "js-units").unwrap().estimated);
}

#[test]
fn non_ascii_text_under_a_chars_layer_over_a_bytes_layer() {
    // 6,000 two-byte code points: 12,000 bytes.
    let text = "\u{e9}".repeat(6_000);
    let s = stack(
        "",
        vec![
            custom("chars-8k", 8_000, Unit::Chars, Scope::PerResult),
            custom("bytes-8k", 8_000, Unit::Bytes, Scope::PerResult),
        ],
    );
    let v = s.verdict(&measured(&text), false);
    assert_eq!(ids(&v), ["bytes-8k"]);
    // Tie in bytes (8,000 each): stack order decides the ceiling.
    assert_eq!(s.ceiling_bytes().unwrap().layer_id, "chars-8k");
}

#[test]
fn three_thousand_lines_against_line_layers() {
    let text: String = (0..3_000).map(|i| format!("line {i}: ok\n")).collect();
    let m = measured(&text);
    assert_eq!(m.lines, Some(3_000));
    let s = stack("codex.legacy.lines,gemini-cli.read-file.lines", vec![]);
    let v = s.verdict(&m, false);
    let codex = cut(&v, "codex.legacy.lines").unwrap();
    assert_eq!(
        (codex.value, codex.estimated, codex.limit),
        (3_000, false, 256)
    );
    let gemini = cut(&v, "gemini-cli.read-file.lines").unwrap();
    assert_eq!((gemini.value, gemini.margin), (3_000, 1_000));
    assert_eq!(v.weakest.unwrap().layer_id, "codex.legacy.lines");
    // Not counted: ceil(bytes / 40) lines, estimated.
    let v = s.verdict(&bytes_only(&text), false);
    let est = cut(&v, "codex.legacy.lines").unwrap();
    assert_eq!(est.value, (text.len() as u64).div_ceil(40));
    assert!(est.estimated);
    assert!(cut(&v, "gemini-cli.read-file.lines").is_none());
    // Line limits in bytes are estimates: 256 lines = 10,240 bytes.
    let c = s.ceiling_bytes().unwrap();
    assert_eq!((c.bytes, c.estimated), (256 * 40, true));
}

#[test]
fn long_lines_against_a_per_line_layer() {
    let width = "gemini-cli.read-file.line-width";
    let s = stack(width, vec![]);
    // One line of 2,500 code points: exact, over 2,000.
    let one = "\u{e9}".repeat(2_500);
    let v = s.verdict(&measured(&one), false);
    let c = cut(&v, width).unwrap();
    assert_eq!(
        (c.value, c.estimated, c.scope),
        (2_500, false, Scope::PerLine)
    );
    // One line of 1,500: passes.
    assert!(s
        .verdict(&measured(&"x".repeat(1_500)), false)
        .cuts
        .is_empty());
    // Several lines: the longest line is bounded by the whole minus the other lines' newlines.
    let text = format!("{}\nshort\nshort\n", "\u{e9}".repeat(2_500));
    let v = s.verdict(&measured(&text), false);
    let c = cut(&v, width).unwrap();
    assert!(c.estimated);
    // 2,513 units in all, minus the newlines of the two other lines.
    assert_eq!(c.value, 2_513 - 2);
    // Many short lines, whose total is over 2,000: the bound still reports (estimated).
    let short: String = "abc\n".repeat(1_000);
    let v = s.verdict(&measured(&short), false);
    assert!(cut(&v, width).is_some_and(|c| c.estimated));
}

#[test]
fn deep_json_against_depth_layers() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let m = measured(&deep);
    assert_eq!(m.json_depth, Some(200));
    let s = stack(
        "serde-json.depth,elasticsearch.mapping-depth,jackson.depth,default",
        vec![],
    );
    let v = s.verdict(&m, false);
    // Depth layers have no byte limit: after the size layers, in stack order.
    assert_eq!(ids(&v), ["serde-json.depth", "elasticsearch.mapping-depth"]);
    let c = cut(&v, "serde-json.depth").unwrap();
    assert_eq!((c.value, c.estimated, c.limit_bytes), (200, false, None));
    // The ceiling ignores depth layers.
    assert_eq!(s.ceiling_bytes().unwrap().layer_id, "default");
    // Depth cannot be estimated from bytes: the layers are skipped.
    assert!(s.verdict(&bytes_only(&deep), false).cuts.is_empty());
    // Nor is a text result nested.
    assert!(s.verdict(&measured("[[[ not json"), false).cuts.is_empty());
    // A depth-only stack has no byte ceiling.
    assert!(stack("serde-json.depth", vec![]).ceiling_bytes().is_none());
}

#[test]
fn one_huge_string_against_a_per_string_layer() {
    let cline = "cline.message-builder";
    let s = stack(
        cline,
        vec![custom("chars-10k", 10_000, Unit::Chars, Scope::PerResult)],
    );
    // 9,000-char field in a 9,020-char result: Cline cuts the field, the whole passes 10,000.
    let one = format!(r#"{{"a":"{}","b":[1,2,3]}}"#, "x".repeat(9_000));
    let m = measured(&one);
    assert_eq!(m.max_string_chars, Some(9_000));
    let v = s.verdict(&m, false);
    assert_eq!(ids(&v), [cline]);
    let c = v.weakest.unwrap();
    // ASCII: no surplus of units over code points, so the estimate is the code point count.
    assert_eq!((c.value, c.estimated, c.margin), (9_000, true, 1_000));
    // Many small strings: the whole result is large, every string is short.
    let many = serde_json::to_string(&vec!["y".repeat(100); 150]).unwrap();
    let v = s.verdict(&measured(&many), false);
    assert_eq!(ids(&v), ["chars-10k"]);
    // Without the string measure the whole result stands in for its longest string.
    let v = s.verdict(&bytes_only(&many), false);
    assert!(cut(&v, cline).is_some_and(|c| c.estimated));
    // A per-string layer in code points is exact.
    let exact = stack("openai-api.tool-description", vec![]);
    let c = exact.verdict(&m, false).weakest.unwrap();
    assert_eq!((c.value, c.estimated), (9_000, false));
}

#[test]
fn per_string_bytes_and_tokens_on_non_ascii() {
    let s = stack(
        "",
        vec![
            custom("str-bytes", 5_000, Unit::Bytes, Scope::PerString),
            custom("str-tokens", 1_000, Unit::Tokens, Scope::PerString),
        ],
    );
    // 3,000 two-byte code points in one string: 6,000 bytes, at most ~1,500 tokens by bytes/4.
    let json = format!(r#"["{}","ok"]"#, "\u{e9}".repeat(3_000));
    let v = s.verdict(&measured(&json), false);
    let b = cut(&v, "str-bytes").unwrap();
    assert_eq!((b.value, b.estimated), (6_000, true));
    let t = cut(&v, "str-tokens").unwrap();
    assert_eq!((t.value, t.estimated), (1_500, true));
    // tokens (1,000 x 4 = 4,000 bytes) before bytes (5,000).
    assert_eq!(ids(&v), ["str-tokens", "str-bytes"]);
}

#[test]
fn tokens_are_estimated_as_bytes_over_four() {
    let text = "a".repeat(50_000);
    let s = stack("codex.tool-output.tokens,claude-code.mcp.max", vec![]);
    let v = s.verdict(&measured(&text), false);
    let c = cut(&v, "codex.tool-output.tokens").unwrap();
    assert_eq!(
        (c.value, c.estimated, c.limit_bytes),
        (12_500, true, Some(40_000))
    );
    assert!(cut(&v, "claude-code.mcp.max").is_none());
    let c = s.ceiling_bytes().unwrap();
    assert_eq!(
        (c.layer_id, c.bytes, c.estimated),
        ("codex.tool-output.tokens", 40_000, true)
    );
}

#[test]
fn attribute_layers_apply_only_to_results_sent_as_attributes() {
    let text = "z".repeat(3_000);
    let s = stack("tempo.attr-bytes,default", vec![]);
    assert!(s.verdict(&measured(&text), false).cuts.is_empty());
    let v = s.verdict(&measured(&text), true);
    let c = v.weakest.unwrap();
    assert_eq!(
        (c.layer_id, c.value, c.action, c.scope),
        (
            "tempo.attr-bytes",
            3_000,
            Action::TruncateSilent,
            Scope::PerAttribute
        )
    );
    // The ceiling counts the attribute layer: it is in the stack because results are exported.
    assert_eq!(s.ceiling_bytes().unwrap().bytes, 2_048);
}

#[test]
fn overrides_move_the_weakest_layer() {
    let text = "q".repeat(20_000);
    let flag = StackConfig::parse_list("cline.message-builder=30000,default").unwrap();
    let s = Stack::resolve(Some(&flag), None, None).unwrap();
    let v = s.verdict(&measured(&text), false);
    assert_eq!(ids(&v), ["default"]);
    let c = s.ceiling_bytes().unwrap();
    assert_eq!(
        (c.layer_id, c.bytes, c.source),
        ("default", 16_384, Origin::Default)
    );
}

#[test]
fn item_layers_need_the_item_count() {
    let s = stack("otel.attr-count,default", vec![]);
    let text = "{}";
    // Items are not measured from a result's text: the layer is skipped.
    assert!(s.verdict(&measured(text), false).cuts.is_empty());
    // A carrier that counts them (e.g. attributes on a span) supplies the count.
    let m = ResultMeasures {
        items: Some(200),
        ..measured(text)
    };
    let v = s.verdict(&m, false);
    let c = v.weakest.unwrap();
    assert_eq!(
        (c.layer_id, c.unit, c.value, c.estimated, c.limit_bytes),
        ("otel.attr-count", Unit::Items, 200, false, None)
    );
    assert_eq!(s.ceiling_bytes().unwrap().layer_id, "default");
}

#[test]
fn from_layers_keeps_byte_limits_consistent() {
    use toolsize::layers::{Layer, StackLayer};
    let layer = Layer::user("t", 100, Unit::Tokens, Scope::PerResult, Action::Reject);
    let mut l = StackLayer::new(layer, 100, Origin::Flag);
    l.limit = 50;
    let s = Stack::from_layers(vec![l]);
    assert_eq!(s.ceiling_bytes().unwrap().bytes, 200);
}

/// The stack `docs/layers.md` shows as a file resolves as it says: its custom layer is in the
/// stack because the list names it, after the catalog ids, and `ceiling_bytes` keeps `default`.
#[cfg(feature = "collector")]
#[test]
fn the_documented_stack_file_resolves_as_described() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/layers.md")).unwrap();
    let block = doc
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block");
    let config: StackConfig = toml::from_str(block).unwrap();
    let s = Stack::resolve(None, None, Some(&config)).unwrap();
    let ids: Vec<&str> = s.layers().iter().map(|l| l.id()).collect();
    assert_eq!(
        ids,
        [
            "codex.tool-output.tokens",
            "cline.message-builder",
            "tempo.attr-bytes",
            "my-proxy",
            "default"
        ]
    );
    let codex = &s.layers()[0];
    assert_eq!((codex.limit, codex.source), (8000, Origin::File));
    // Left out of the list, the same custom layer is not in the stack.
    let mut unnamed = config.clone();
    unnamed.ids.retain(|id| id != "my-proxy");
    let s = Stack::resolve(None, None, Some(&unnamed)).unwrap();
    assert!(s.layers().iter().all(|l| l.id() != "my-proxy"));
}
