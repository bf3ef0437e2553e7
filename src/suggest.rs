//! "Did you mean": the one place that picks the known name a mistyped one was meant to be.
//!
//! Every part of toolsize that refuses a name (an argument key, an `enum` value, a configuration
//! key, an environment variable, a layer id, a tool name behind the MCP proxy) asks
//! [`did_you_mean`], so the answer is the same everywhere:
//!
//! 1. names are compared *normalised*: lower case, letters and digits only, so
//!    `TimeoutSeconds`, `timeout-seconds` and `_timeout_seconds` are all `timeoutseconds`; an exact
//!    normalised match wins at once;
//! 2. otherwise the closest candidate by edit distance on the normalised forms, a swap of two
//!    neighbours counting as one edit (optimal string alignment: `opne` is one edit from `open`);
//!    for dotted names the last segments are compared too, one edit dearer, so a key put in the
//!    wrong section (`otlp.max_series`) still finds `aggregation.max_series`; among candidates
//!    as close as each other, the one nearest on the whole name wins, so a mistyped dotted id
//!    stays within its own prefix (`codx.tool-output.tokens` finds `codex.tool-output.tokens`,
//!    not another agent's `claude-code.read.tokens`, whose last segment matches as well);
//! 3. a candidate is only offered when it is within a third of the longer name's length, at
//!    least 1 and at most 3 edits: past that it is a different name, not a typo.
//!
//! Ties go to the first candidate, so answers are deterministic. The work is quadratic in the
//! names' lengths, and inputs are cut to [`MAX_COMPARED_CHARS`] first, so a client-supplied key of
//! any length costs a bounded amount; nothing allocates more than two rows of the distance table
//! per candidate, and nothing panics.

/// Names are compared on at most this many normalised chars (longer inputs are cut first, so a
/// hostile key cannot make the comparison expensive).
pub const MAX_COMPARED_CHARS: usize = 128;

/// Lower-cases and drops everything but letters and digits: `TimeoutSeconds`, `timeout-seconds`
/// and `_timeout_seconds` all become `timeoutseconds`. At most [`MAX_COMPARED_CHARS`] chars.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .take(MAX_COMPARED_CHARS)
        .collect()
}

/// Edit distance in chars, a swap of two neighbours counting as one edit (optimal string
/// alignment), so `opne` is one edit from `open`.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: the one before the previous (for swaps), the previous, the current.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            cur[j] = best;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The last dotted segment of `name` (`aggregation.max_series` → `max_series`).
fn leaf(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The candidate `name` most likely meant, if one is close enough to be a typo (see the
/// [module docs](self)).
///
/// ```
/// use toolsize::suggest::did_you_mean;
/// let known = ["timeout_seconds", "command", "background"];
/// assert_eq!(did_you_mean("TimeoutSeconds", known), Some("timeout_seconds"));
/// assert_eq!(did_you_mean("comand", known), Some("command"));
/// assert_eq!(did_you_mean("zzz", known), None);
/// ```
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let norm = normalize(name);
    let norm_leaf = normalize(leaf(name));
    let dotted = name.contains('.');
    // Ranked by (distance, distance on the whole name): the second breaks ties in favour of the
    // candidate sharing the mistyped name's prefix.
    let mut best: Option<((usize, usize), &'a str)> = None;
    for cand in candidates {
        let cn = normalize(cand);
        if cn == norm {
            return Some(cand);
        }
        let whole = edit_distance(&norm, &cn);
        let mut d = whole;
        if dotted || cand.contains('.') {
            d = d.min(edit_distance(&norm_leaf, &normalize(leaf(cand))) + 1);
        }
        let longer = norm.chars().count().max(cn.chars().count());
        let allowed = (longer / 3).clamp(1, 3);
        let rank = (d, whole);
        if d <= allowed && best.is_none_or(|(br, _)| rank < br) {
            best = Some((rank, cand));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_of_every_kind() {
        let known = ["timeout_seconds", "command", "background"];
        assert_eq!(
            did_you_mean("_timeout-seconds", known),
            Some("timeout_seconds")
        );
        assert_eq!(
            did_you_mean("timout_seconds", known),
            Some("timeout_seconds")
        );
        assert_eq!(did_you_mean("comand", known), Some("command"));
        assert_eq!(did_you_mean("zzz", known), None);
        assert_eq!(did_you_mean("opne", ["open", "closed"]), Some("open"));
        assert_eq!(
            did_you_mean("cline.mesage-builder", ["cline.message-builder", "default"]),
            Some("cline.message-builder")
        );
        assert_eq!(
            did_you_mean("defualt", ["cline.message-builder", "default"]),
            Some("default")
        );
        // A key in the wrong section finds its leaf, one edit dearer than an exact leaf.
        assert_eq!(
            did_you_mean(
                "otlp.max_series",
                ["otlp.grpc_addr", "aggregation.max_series"]
            ),
            Some("aggregation.max_series")
        );
        assert_eq!(did_you_mean("", known), None);
    }

    #[test]
    fn distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("opne", "open"), 1);
        assert_eq!(edit_distance("ca", "abc"), 3);
    }

    #[test]
    fn long_inputs_are_bounded() {
        let long = "x".repeat(1_000_000);
        assert_eq!(normalize(&long).len(), MAX_COMPARED_CHARS);
        assert_eq!(did_you_mean(&long, ["command"]), None);
    }

    #[test]
    fn a_dotted_typo_stays_within_its_prefix() {
        // Both candidates match the last segment; the whole name decides.
        let ids = ["claude-code.read.tokens", "codex.tool-output.tokens"];
        assert_eq!(
            did_you_mean("codx.tool-output.tokens", ids),
            Some("codex.tool-output.tokens")
        );
        let ids = ["gemini-cli.tool-output", "qwen-code.tool-output"];
        assert_eq!(
            did_you_mean("qwen-cod.tool-output", ids),
            Some("qwen-code.tool-output")
        );
    }

    #[test]
    fn ties_go_to_the_first() {
        assert_eq!(did_you_mean("cat", ["bat", "hat"]), Some("bat"));
    }
}
