//! No production function in `src/` is longer than [`MAX_LINES`] lines, and no file of
//! `src/collector` holds more than [`MAX_FILE_LINES`] lines before its tests.
//!
//! A function's length is its lines from `fn` to its closing brace, blank lines and comment-only
//! lines left out (a long doc or comment is not a long function). Tests (`#[test]` functions and
//! `#[cfg(test)]` modules) are not counted. The functions in [`KNOWN`] are over the bound today,
//! each with the reason it waits: the test fails when another function passes the bound, and
//! when a known one is no longer over it (so the list only shrinks).

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Longest production function, in counted lines.
const MAX_LINES: usize = 120;

/// Functions over [`MAX_LINES`] today: (file, function, why it waits).
const KNOWN: &[(&str, &str, &str)] = &[];

/// Most lines of a file in `src/collector` before its `#[cfg(test)]` module (all of them when
/// it has none): a file past it holds several rooms.
const MAX_FILE_LINES: usize = 700;

/// Files of `src/collector` over [`MAX_FILE_LINES`] today: (file, why it waits).
const KNOWN_FILES: &[(&str, &str)] = &[];

/// One function: file, name, counted lines.
type Length = (String, String, usize);

struct Lengths<'a> {
    file: String,
    lines: &'a [&'a str],
    out: Vec<Length>,
}

/// Whether the attributes hold `#[test]` or `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
    })
}

impl Lengths<'_> {
    fn count(&mut self, name: &syn::Ident, start: proc_macro2::Span, body: &syn::Block) {
        let (from, to) = (start.start().line, body.brace_token.span.close().end().line);
        let counted = self.lines[from - 1..to]
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .count();
        self.out
            .push((self.file.clone(), name.to_string(), counted));
    }
}

impl<'ast> Visit<'ast> for Lengths<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            self.count(&f.sig.ident, f.sig.fn_token.span, &f.block);
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            self.count(&f.sig.ident, f.sig.fn_token.span, &f.block);
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.count(&f.sig.ident, f.sig.fn_token.span, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every production function of `src/`, longest first.
fn lengths() -> Vec<Length> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut all = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let lines: Vec<&str> = text.lines().collect();
        let file = path.strip_prefix(root).unwrap().display().to_string();
        let mut v = Lengths {
            file,
            lines: &lines,
            out: Vec::new(),
        };
        v.visit_file(&ast);
        all.extend(v.out);
    }
    all.sort_by_key(|l| std::cmp::Reverse(l.2));
    all
}

#[test]
fn no_production_function_is_over_the_bound() {
    let all = lengths();
    assert!(all.len() > 500, "the walk found {} functions", all.len());
    let median = all[all.len() / 2].2;
    let p99 = all[all.len() / 100].2;
    eprintln!(
        "{} functions: median {median} lines, p99 {p99}, longest {:?}",
        all.len(),
        &all[..5]
    );
    let over: Vec<&Length> = all.iter().filter(|l| l.2 > MAX_LINES).collect();
    for (file, name, lines) in &over {
        assert!(
            KNOWN.iter().any(|(f, n, _)| f == file && n == name),
            "{file}: fn {name} is {lines} lines, over {MAX_LINES}: split it into the steps it takes"
        );
    }
    for (file, name, _) in KNOWN {
        assert!(
            over.iter().any(|(f, n, _)| f == file && n == name),
            "{file}: fn {name} is no longer over {MAX_LINES} lines: take it off KNOWN"
        );
    }
}

/// Lines of `text` before its test module: a `#[cfg(test)]` line at the top level followed by
/// a `mod` line (rustfmt's layout); every line when there is none.
fn lines_before_tests(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let is_mod = |l: &str| {
        ["mod ", "pub mod ", "pub(crate) mod "]
            .iter()
            .any(|p| l.starts_with(p))
    };
    lines
        .windows(2)
        .position(|w| w[0] == "#[cfg(test)]" && is_mod(w[1]))
        .unwrap_or(lines.len())
}

#[test]
fn no_collector_file_is_over_the_bound_before_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/collector"), &mut files);
    assert!(files.len() > 50, "the walk found {} files", files.len());
    let mut over = Vec::new();
    for path in files {
        let lines = lines_before_tests(&std::fs::read_to_string(&path).unwrap());
        let file = path.strip_prefix(root).unwrap().display().to_string();
        if lines > MAX_FILE_LINES {
            assert!(
                KNOWN_FILES.iter().any(|(f, _)| *f == file),
                "{file}: {lines} lines before its tests, over {MAX_FILE_LINES}: split it into \
                 the rooms it holds"
            );
            over.push(file);
        }
    }
    for (file, _) in KNOWN_FILES {
        assert!(
            over.contains(&file.to_string()),
            "{file} is no longer over {MAX_FILE_LINES} lines before its tests: take it off \
             KNOWN_FILES"
        );
    }
}

#[test]
fn a_file_is_counted_up_to_its_test_module() {
    let code = "fn a() {}\n".repeat(3);
    let tests = "#[cfg(test)]\nmod tests {\n    #[cfg(test)]\n    fn b() {}\n}\n";
    assert_eq!(lines_before_tests(&format!("{code}{tests}")), 3);
    let shared = "#[cfg(test)]\npub(crate) mod tests {\n}\n";
    assert_eq!(lines_before_tests(&format!("{code}{shared}")), 3);
    assert_eq!(lines_before_tests(&code), 3);
    // A test-only item that is no module is counted with the code.
    let item = "#[cfg(test)]\nfn helper() {}\n";
    assert_eq!(lines_before_tests(&format!("{code}{item}{tests}")), 5);
}

#[test]
fn a_long_function_is_counted_and_a_test_is_not() {
    let body = "    let x = 1;\n".repeat(130);
    let text = format!(
        "fn long() {{\n{body}\n    // a comment\n\n}}\n#[cfg(test)]\nmod tests {{\n    fn helper() {{\n{body}}}\n}}\n#[test]\nfn t() {{\n{body}}}\n"
    );
    let ast = syn::parse_file(&text).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut v = Lengths {
        file: "x.rs".into(),
        lines: &lines,
        out: Vec::new(),
    };
    v.visit_file(&ast);
    assert_eq!(v.out, vec![("x.rs".to_string(), "long".to_string(), 132)]);
}
