//! The three kinds of file `toolsize connect` edits, behind one set of operations on paths of
//! keys: JSON (Claude Code, Gemini CLI, Qwen Code, opencode), TOML (Codex) and an environment
//! file (`export NAME='value'` lines, for Copilot CLI).
//!
//! What is kept of the user's file:
//! - JSON: every key, in its order, and every value ([`J`] keeps objects as ordered pairs;
//!   numbers are kept as written by `serde_json`'s `Number`). The whitespace is not kept: a
//!   changed file is written indented by two spaces. A file with comments (JSONC) is refused,
//!   never rewritten without them: JSON has no comments, and no JSON crate in the build keeps
//!   them.
//! - TOML: everything, comments and formatting included (`toml_edit`); only the keys set are
//!   written, as inline tables where their value is a table.
//! - Environment file: every line but the `export NAME=` lines of the names set.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// A JSON value whose objects keep their keys' order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum J {
    Null,
    Bool(bool),
    Num(serde_json::Number),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Null => s.serialize_unit(),
            J::Bool(b) => s.serialize_bool(*b),
            J::Num(n) => n.serialize(s),
            J::Str(v) => s.serialize_str(v),
            J::Arr(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            J::Obj(o) => {
                let mut map = s.serialize_map(Some(o.len()))?;
                for (k, v) in o {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

struct JVisitor;

impl<'de> Visitor<'de> for JVisitor {
    type Value = J;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<J, E> {
        Ok(J::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<J, E> {
        Ok(J::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<J, E> {
        Ok(J::Num(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<J, E> {
        Ok(J::Num(v.into()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<J, E> {
        serde_json::Number::from_f64(v)
            .map(J::Num)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<J, E> {
        Ok(J::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<J, E> {
        Ok(J::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = a.next_element()? {
            out.push(v);
        }
        Ok(J::Arr(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
        let mut out: Vec<(String, J)> = Vec::new();
        while let Some((k, v)) = a.next_entry::<String, J>()? {
            // A repeated key: the last one wins, as in every JSON reader the agents use.
            match out.iter_mut().find(|(have, _)| *have == k) {
                Some(slot) => slot.1 = v,
                None => out.push((k, v)),
            }
        }
        Ok(J::Obj(out))
    }
}

impl<'de> Deserialize<'de> for J {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<J, D::Error> {
        d.deserialize_any(JVisitor)
    }
}

impl J {
    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(o) => o.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut J> {
        match self {
            J::Obj(o) => o.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// The format of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Toml,
    Env,
}

/// A parsed file.
#[derive(Debug, Clone)]
pub(crate) enum Doc {
    Json(J),
    Toml(toml_edit::DocumentMut),
    Env(Vec<String>),
}

/// The `export NAME=` prefix of a line, if it sets `NAME`.
fn env_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("export ").unwrap_or(rest);
    let (name, _) = rest.split_once('=')?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then_some(name)
}

/// `v` single-quoted for a POSIX shell.
fn sh_quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', r"'\''"))
}

/// The value of an `export NAME='value'` line written by [`sh_quote`], or a bare value.
fn sh_unquote(v: &str) -> String {
    let v = v.trim();
    match v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')) {
        Some(inner) => inner.replace(r"'\''", "'"),
        None => v.trim_matches('"').to_string(),
    }
}

fn to_toml(v: &J) -> toml_edit::Value {
    match v {
        J::Null => toml_edit::Value::from(""),
        J::Bool(b) => (*b).into(),
        J::Num(n) => n
            .as_i64()
            .map_or_else(|| n.as_f64().unwrap_or(0.0).into(), Into::into),
        J::Str(s) => s.as_str().into(),
        J::Arr(a) => {
            let mut arr = toml_edit::Array::new();
            for x in a {
                arr.push(to_toml(x));
            }
            arr.into()
        }
        J::Obj(o) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, x) in o {
                t.insert(k, to_toml(x));
            }
            t.into()
        }
    }
}

fn from_toml_value(v: &toml_edit::Value) -> J {
    match v {
        toml_edit::Value::String(s) => J::Str(s.value().clone()),
        toml_edit::Value::Integer(i) => J::Num((*i.value()).into()),
        toml_edit::Value::Float(f) => {
            serde_json::Number::from_f64(*f.value()).map_or(J::Null, J::Num)
        }
        toml_edit::Value::Boolean(b) => J::Bool(*b.value()),
        toml_edit::Value::Datetime(d) => J::Str(d.value().to_string()),
        toml_edit::Value::Array(a) => J::Arr(a.iter().map(from_toml_value).collect()),
        toml_edit::Value::InlineTable(t) => J::Obj(
            t.iter()
                .map(|(k, v)| (k.to_string(), from_toml_value(v)))
                .collect(),
        ),
    }
}

fn from_toml(item: &toml_edit::Item) -> Option<J> {
    match item {
        toml_edit::Item::None => None,
        toml_edit::Item::Value(v) => Some(from_toml_value(v)),
        toml_edit::Item::Table(t) => Some(J::Obj(
            t.iter()
                .filter_map(|(k, v)| Some((k.to_string(), from_toml(v)?)))
                .collect(),
        )),
        toml_edit::Item::ArrayOfTables(a) => Some(J::Arr(
            a.iter()
                .filter_map(|t| from_toml(&toml_edit::Item::Table(t.clone())))
                .collect(),
        )),
    }
}

impl Doc {
    /// `text` read as `format`; an empty file is an empty document. The error says what is
    /// wrong, for a message that names the file.
    pub(crate) fn parse(format: Format, text: &str) -> Result<Doc, String> {
        match format {
            Format::Json if text.trim().is_empty() => Ok(Doc::Json(J::Obj(vec![]))),
            Format::Json => match serde_json::from_str::<J>(text) {
                Ok(v @ J::Obj(_)) => Ok(Doc::Json(v)),
                Ok(_) => Err("not a JSON object".to_string()),
                Err(e) if text.contains("//") || text.contains("/*") => Err(format!(
                    "not JSON ({e}); if it has comments, toolsize cannot keep them: add the \
                     settings by hand (docs/agents.md) or remove the comments"
                )),
                Err(e) => Err(format!("not JSON: {e}")),
            },
            Format::Toml => text
                .parse::<toml_edit::DocumentMut>()
                .map(Doc::Toml)
                .map_err(|e| format!("not TOML: {}", e.to_string().trim())),
            Format::Env => Ok(Doc::Env(text.lines().map(str::to_string).collect())),
        }
    }

    /// The text of the document.
    pub(crate) fn render(&self) -> String {
        match self {
            Doc::Json(v) => {
                let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
                s.push('\n');
                s
            }
            Doc::Toml(d) => d.to_string(),
            Doc::Env(lines) => {
                let mut s = lines.join("\n");
                if !s.is_empty() {
                    s.push('\n');
                }
                s
            }
        }
    }

    /// The value at `path`, if there is one.
    pub(crate) fn get(&self, path: &[String]) -> Option<J> {
        match self {
            Doc::Json(root) => {
                let mut at = root;
                for k in path {
                    at = at.get(k)?;
                }
                Some(at.clone())
            }
            Doc::Toml(d) => {
                let mut at = d.as_item();
                for k in path {
                    at = at.as_table_like()?.get(k)?;
                }
                from_toml(at)
            }
            Doc::Env(lines) => {
                let name = path.first()?;
                lines.iter().rev().find_map(|l| {
                    let (_, v) = l.split_once('=')?;
                    (env_name(l)? == name).then(|| J::Str(sh_unquote(v)))
                })
            }
        }
    }

    /// Sets `path` to `value`, creating the objects (tables) on the way. A key on the way that
    /// holds something else than an object is an error: it is the user's, and not replaced.
    pub(crate) fn set(&mut self, path: &[String], value: &J) -> Result<(), String> {
        let (last, parents) = path.split_last().ok_or("an empty path")?;
        let shown = || path.join(".");
        match self {
            Doc::Json(root) => {
                let mut at = root;
                for k in parents {
                    let J::Obj(o) = at else {
                        return Err(format!("{} is not an object", shown()));
                    };
                    if !o.iter().any(|(have, _)| have == k) {
                        o.push((k.clone(), J::Obj(vec![])));
                    }
                    at = at.get_mut(k).ok_or("unreachable")?;
                }
                let J::Obj(o) = at else {
                    return Err(format!("{} is not an object", shown()));
                };
                match o.iter_mut().find(|(k, _)| k == last) {
                    Some(slot) => slot.1 = value.clone(),
                    None => o.push((last.clone(), value.clone())),
                }
            }
            Doc::Toml(d) => {
                let mut at: &mut dyn toml_edit::TableLike = d.as_table_mut();
                for k in parents {
                    if at.get(k).is_none() {
                        at.insert(k, toml_edit::table());
                    }
                    at = at
                        .get_mut(k)
                        .and_then(toml_edit::Item::as_table_like_mut)
                        .ok_or_else(|| format!("{} is not a table", shown()))?;
                }
                at.insert(last, toml_edit::value(to_toml(value)));
            }
            Doc::Env(lines) => {
                let J::Str(v) = value else {
                    return Err(format!("{}: not a string", shown()));
                };
                let line = format!("export {last}={}", sh_quote(v));
                lines.retain(|l| env_name(l) != Some(last));
                lines.push(line);
            }
        }
        Ok(())
    }

    /// Removes `path`; then the objects on the way that it leaves empty, up to `keep` keys from
    /// the root (those existed before and are the user's).
    pub(crate) fn remove(&mut self, path: &[String], keep: usize) {
        match self {
            Doc::Json(root) => remove_json(root, path, keep),
            Doc::Toml(d) => remove_toml(d.as_table_mut(), path, keep),
            Doc::Env(lines) => {
                if let Some(name) = path.first() {
                    lines.retain(|l| env_name(l) != Some(name.as_str()));
                }
            }
        }
    }

    /// How many keys of `path`, from the root, name an object (a table) that exists.
    pub(crate) fn existing_depth(&self, path: &[String]) -> usize {
        (0..path.len())
            .take_while(|&n| matches!(self.get(&path[..=n]), Some(J::Obj(_))))
            .count()
    }

    /// Whether the array at `path` holds `entry`.
    pub(crate) fn contains(&self, path: &[String], entry: &J) -> bool {
        matches!(self.get(path), Some(J::Arr(a)) if a.contains(entry))
    }

    /// Adds `entry` to the array at `path` (made when absent); an error when `path` holds
    /// something else.
    pub(crate) fn push(&mut self, path: &[String], entry: &J) -> Result<(), String> {
        let mut items = match self.get(path) {
            None => vec![],
            Some(J::Arr(a)) => a,
            Some(_) => return Err(format!("{} is not an array", path.join("."))),
        };
        items.push(entry.clone());
        self.set(path, &J::Arr(items))
    }

    /// Removes every `entry` from the array at `path`; the array too when it is left empty,
    /// and the objects it leaves empty, up to `keep` keys from the root.
    pub(crate) fn pull(&mut self, path: &[String], entry: &J, keep: usize) -> Result<(), String> {
        let Some(J::Arr(mut items)) = self.get(path) else {
            return Ok(());
        };
        items.retain(|e| e != entry);
        if items.is_empty() {
            self.remove(path, keep);
            Ok(())
        } else {
            self.set(path, &J::Arr(items))
        }
    }
}

fn remove_json(at: &mut J, path: &[String], keep: usize) {
    let J::Obj(o) = at else { return };
    match path {
        [] => {}
        [last] => o.retain(|(k, _)| k != last),
        [first, rest @ ..] => {
            if let Some(child) = at.get_mut(first) {
                remove_json(child, rest, keep.saturating_sub(1));
                if keep == 0 && matches!(child, J::Obj(c) if c.is_empty()) {
                    if let J::Obj(o) = at {
                        o.retain(|(k, _)| k != first);
                    }
                }
            }
        }
    }
}

fn remove_toml(at: &mut dyn toml_edit::TableLike, path: &[String], keep: usize) {
    match path {
        [] => {}
        [last] => {
            at.remove(last);
        }
        [first, rest @ ..] => {
            let empty = match at
                .get_mut(first)
                .and_then(toml_edit::Item::as_table_like_mut)
            {
                Some(child) => {
                    remove_toml(child, rest, keep.saturating_sub(1));
                    child.is_empty()
                }
                None => false,
            };
            if keep == 0 && empty {
                at.remove(first);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    #[test]
    fn json_keeps_the_users_keys_in_their_order() {
        let mut d =
            Doc::parse(Format::Json, r#"{"z": 1, "a": {"y": [1, 2.5]}, "m": null}"#).unwrap();
        d.set(&p("a.b"), &J::Bool(true)).unwrap();
        d.set(&p("n.o"), &J::Str("x".into())).unwrap();
        let text = d.render();
        let keys: Vec<usize> = ["\"z\"", "\"a\"", "\"y\"", "\"b\"", "\"m\"", "\"n\""]
            .iter()
            .map(|k| text.find(k).unwrap())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(text.contains("2.5"), "{text}");
        d.remove(&p("n.o"), 0);
        d.remove(&p("a.b"), 1);
        assert_eq!(
            Doc::parse(Format::Json, &d.render()).unwrap().get(&[]),
            Doc::parse(Format::Json, r#"{"z": 1, "a": {"y": [1, 2.5]}, "m": null}"#)
                .unwrap()
                .get(&[])
        );
    }

    #[test]
    fn json_with_comments_or_not_an_object_is_refused() {
        let e = Doc::parse(Format::Json, "{// mine\n\"a\": 1}").unwrap_err();
        assert!(e.contains("comments"), "{e}");
        assert!(Doc::parse(Format::Json, "[1]").is_err());
        assert!(Doc::parse(Format::Json, "").is_ok());
        let mut d = Doc::parse(Format::Json, r#"{"env": "x"}"#).unwrap();
        assert!(
            d.set(&p("env.A"), &J::Bool(true)).is_err(),
            "a user's value is not replaced"
        );
    }

    #[test]
    fn toml_keeps_comments_and_sets_inline_tables() {
        let text = "# mine\nmodel = \"m\" # the model\n\n[otel]\nenvironment = \"dev\"\n";
        let mut d = Doc::parse(Format::Toml, text).unwrap();
        let v = J::Obj(vec![(
            "otlp-http".into(),
            J::Obj(vec![("endpoint".into(), J::Str("e".into()))]),
        )]);
        d.set(&p("otel.exporter"), &v).unwrap();
        let out = d.render();
        assert!(
            out.starts_with("# mine\nmodel = \"m\" # the model\n"),
            "{out}"
        );
        assert!(
            out.contains("exporter = { otlp-http = { endpoint = \"e\" } }"),
            "{out}"
        );
        assert_eq!(d.get(&p("otel.exporter")), Some(v));
        d.remove(&p("otel.exporter"), 1);
        assert_eq!(d.render(), text);
        assert!(Doc::parse(Format::Toml, "a = [").is_err());
    }

    #[test]
    fn env_lines_are_replaced_by_name_and_quoted() {
        let mut d = Doc::parse(Format::Env, "# mine\nexport A=1\nexport B='x'\n").unwrap();
        d.set(&p("A"), &J::Str("it's".into())).unwrap();
        assert_eq!(d.get(&p("A")), Some(J::Str("it's".into())));
        assert_eq!(d.get(&p("B")), Some(J::Str("x".into())));
        assert_eq!(d.render(), "# mine\nexport B='x'\nexport A='it'\\''s'\n");
        d.remove(&p("A"), 0);
        assert_eq!(d.render(), "# mine\nexport B='x'\n");
    }
}
