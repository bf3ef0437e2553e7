//! The ceiling guard: what to do with a tool result over the output limit (reject, truncate or
//! spill), how the limit is resolved, and where spilled results go.
//!
//! The limit resolves `explicit > config > environment (TOOLSIZE_MAX_TOOL_OUTPUT) > 16 KiB`
//! ([`resolve_limit`]); a value that is present but not a positive integer is an error, never a
//! silent fall back to the next source. Building a guard logs the effective limit, its source and
//! the policy once per process for each distinct (limit, source, policy), as structured
//! `tracing` fields.
//!
//! Under load the guard costs one length check per result when it fits; cutting is linear in the
//! result. When it cuts or spills, it tells the tool call in progress on this thread
//! ([`crate::instrument::record_cut`]), so that call's span records `tool.result.truncated` and
//! `tool.result.original_bytes` by itself. A spill that fails (disk full, unwritable directory)
//! is an error ([`GuardError::Spill`]): the guard never silently falls back to handing over a cut
//! result as if it were whole.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use sha1::{Digest, Sha1};

use crate::guard::envelope::{coalesce, Envelope, EnvelopeError, Phase, Unit, Warning};
use crate::guard::json_truncate::JsonTruncator;
use crate::guard::truncate::{floor_char_boundary, TextTruncator, DEFAULT_HEAD_RATIO};
use crate::origin::Origin;

/// Output limit used when nothing else sets one: the default layer's ceiling,
/// [`DEFAULT_CEILING_BYTES`](crate::layers::DEFAULT_CEILING_BYTES) (16 KiB), so that the guard
/// cuts where the collector counts a result over the ceiling.
pub const DEFAULT_MAX_TOOL_OUTPUT: u64 = crate::layers::DEFAULT_CEILING_BYTES;
/// Environment variable holding the output limit in bytes.
pub const ENV_MAX_TOOL_OUTPUT: &str = "TOOLSIZE_MAX_TOOL_OUTPUT";
/// Environment variable naming the directory of the filesystem spill store.
pub const ENV_SPILL_DIR: &str = "TOOLSIZE_SPILL_DIR";
/// Name of the spill directory under the system temporary directory, by default.
pub const DEFAULT_SPILL_DIR_NAME: &str = "toolsize-spill";

/// The policy used when none is given: cut, marked.
pub const DEFAULT_POLICY: Policy = Policy::Truncate;

/// What the guard does with a result over the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Refuse it: a structured `RESULT_TOO_LARGE` error with a hint to ask for less.
    Reject,
    /// Cut it, marked: head+tail for text, JSON-aware for JSON.
    #[default]
    Truncate,
    /// Store it whole and hand over a summary with a handle to fetch it.
    Spill,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Reject => "reject",
            Policy::Truncate => "truncate",
            Policy::Spill => "spill",
        })
    }
}

/// A policy name that is not `reject`, `truncate` or `spill`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown policy {:?}: expected reject, truncate or spill",
            self.0
        )
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reject" => Ok(Policy::Reject),
            "truncate" => Ok(Policy::Truncate),
            "spill" => Ok(Policy::Spill),
            other => Err(UnknownPolicy(other.to_owned())),
        }
    }
}

/// The effective output limit and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    /// The limit in bytes.
    pub bytes: u64,
    /// Its source.
    pub source: Origin,
}

/// A limit that is present but unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    /// Which source held the bad value.
    pub source: Origin,
    /// The value as given.
    pub value: String,
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from = match self.source {
            Origin::Env => format!("{ENV_MAX_TOOL_OUTPUT} (environment)"),
            other => format!("the {other} limit"),
        };
        write!(
            f,
            "{from} is {:?}: expected a positive integer number of bytes",
            self.value
        )
    }
}

impl std::error::Error for LimitError {}

/// Resolves the output limit: `explicit > config > env > DEFAULT_MAX_TOOL_OUTPUT`. `env` is the
/// raw value of [`ENV_MAX_TOOL_OUTPUT`] (pass `std::env::var(..).ok()`). Zero, or an environment
/// value that is not a positive integer, is an error.
pub fn resolve_limit(
    explicit: Option<u64>,
    config: Option<u64>,
    env: Option<&str>,
) -> Result<Limit, LimitError> {
    let checked = |bytes: u64, source| {
        if bytes == 0 {
            Err(LimitError {
                source,
                value: "0".to_owned(),
            })
        } else {
            Ok(Limit { bytes, source })
        }
    };
    if let Some(bytes) = explicit {
        return checked(bytes, Origin::Explicit);
    }
    if let Some(bytes) = config {
        return checked(bytes, Origin::Config);
    }
    if let Some(raw) = env {
        return match raw.trim().parse::<u64>() {
            Ok(bytes) => checked(bytes, Origin::Env),
            Err(_) => Err(LimitError {
                source: Origin::Env,
                value: raw.to_owned(),
            }),
        };
    }
    Ok(Limit {
        bytes: DEFAULT_MAX_TOOL_OUTPUT,
        source: Origin::Default,
    })
}

/// Logs the effective limit once per distinct (limit, source, policy) in this process.
fn log_limit_once(limit: Limit, policy: Policy) {
    static LOGGED: Mutex<Vec<(Limit, Policy)>> = Mutex::new(Vec::new());
    let mut logged = match LOGGED.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    if logged.contains(&(limit, policy)) {
        return;
    }
    // Bounded: past this many distinct settings, keep logging rather than growing.
    if logged.len() < 64 {
        logged.push((limit, policy));
    }
    tracing::info!(
        limit_bytes = limit.bytes,
        source = %limit.source,
        policy = %policy,
        "Tool output limit resolved."
    );
}

/// Tells the tool call in progress on this thread that its result was cut from
/// `original_bytes`.
fn note_cut(original_bytes: u64) {
    let _in_a_call = crate::instrument::record_cut(original_bytes);
}

/// A failure of a [`SpillStore`].
#[derive(Debug)]
pub enum SpillError {
    /// Reading or writing the store failed.
    Io {
        /// What was being done, e.g. `write`.
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The id is not one this store hands out.
    InvalidId(String),
    /// No payload is stored under this id.
    NotFound(String),
}

impl fmt::Display for SpillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpillError::Io { op, path, source } => {
                write!(f, "spill store: {op} {} failed: {source}", path.display())
            }
            SpillError::InvalidId(id) => write!(f, "spill store: {id:?} is not a payload id"),
            SpillError::NotFound(id) => write!(f, "spill store: no payload stored as {id:?}"),
        }
    }
}

impl std::error::Error for SpillError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpillError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Where spilled results are kept. Implement it to spill to object storage, a database, etc.
pub trait SpillStore: Send + Sync + fmt::Debug {
    /// Stores `payload` (the full result of `tool`) and returns its `full_payload_id`.
    fn put(&self, tool: &str, payload: &[u8]) -> Result<String, SpillError>;
    /// Returns the payload stored as `id`.
    fn get(&self, id: &str) -> Result<Vec<u8>, SpillError>;
    /// One sentence telling the model how to fetch the payload stored as `id`.
    fn fetch_hint(&self, id: &str) -> String;
}

/// The default [`SpillStore`]: one file per payload in a directory, named by the payload's
/// SHA-1 (so the same result spilled twice is stored once). Files are written to a temporary
/// name and renamed, so a reader never sees half a payload; on Unix the directory is created
/// `0700` and files `0600`, since tool output may be private.
#[derive(Debug, Clone)]
pub struct FsSpillStore {
    dir: PathBuf,
}

impl FsSpillStore {
    /// A store in `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// A store in `$TOOLSIZE_SPILL_DIR`, else `<temp dir>/toolsize-spill`.
    pub fn from_env() -> Self {
        match std::env::var_os(ENV_SPILL_DIR) {
            Some(dir) if !dir.is_empty() => Self::new(dir),
            _ => Self::new(std::env::temp_dir().join(DEFAULT_SPILL_DIR_NAME)),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file holding payload `id`.
    pub fn path_of(&self, id: &str) -> Result<PathBuf, SpillError> {
        if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SpillError::InvalidId(id.to_owned()));
        }
        Ok(self.dir.join(format!("{id}.out")))
    }

    fn create_dir(&self) -> Result<(), SpillError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(&self.dir).map_err(|source| SpillError::Io {
            op: "create directory",
            path: self.dir.clone(),
            source,
        })
    }
}

impl SpillStore for FsSpillStore {
    fn put(&self, _tool: &str, payload: &[u8]) -> Result<String, SpillError> {
        let id = crate::hex::encode(&Sha1::digest(payload));
        let path = self.path_of(&id)?;
        if path.is_file() {
            return Ok(id);
        }
        self.create_dir()?;
        // Unique per process and per write, so concurrent spills of one payload never share a
        // temporary file.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!("{id}.tmp-{}-{n}", std::process::id()));
        let io_err = |op, path: &Path| {
            let path = path.to_path_buf();
            move |source| SpillError::Io { op, path, source }
        };
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp).map_err(io_err("create", &tmp))?;
        file.write_all(payload)
            .and_then(|()| file.sync_all())
            .map_err(io_err("write", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io_err("rename", &path))?;
        Ok(id)
    }

    fn get(&self, id: &str) -> Result<Vec<u8>, SpillError> {
        let path = self.path_of(id)?;
        std::fs::read(&path).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                SpillError::NotFound(id.to_owned())
            } else {
                SpillError::Io {
                    op: "read",
                    path,
                    source,
                }
            }
        })
    }

    fn fetch_hint(&self, id: &str) -> String {
        match self.path_of(id) {
            Ok(path) => format!(
                "The full output is in the file {}; read it a slice at a time (by line or byte range) rather than whole.",
                path.display()
            ),
            Err(_) => "The payload id is not valid.".to_owned(),
        }
    }
}

/// A result refused by [`Policy::Reject`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultTooLarge {
    /// The tool.
    pub tool: String,
    /// The result's size in bytes.
    pub size: u64,
    /// The limit in bytes.
    pub limit: u64,
}

impl ResultTooLarge {
    /// How to ask for a result that fits.
    pub fn hint(&self) -> String {
        format!(
            "Ask {} for less: request one page at a time (pass a small `limit` and then the returned `cursor`), or narrow the filter (a smaller date range, a specific path or id, fewer fields).",
            self.tool
        )
    }

    /// The envelope error: code `RESULT_TOO_LARGE`, phase execution, field `result`, limit,
    /// actual size, tool and hint.
    pub fn to_envelope_error(&self) -> EnvelopeError {
        let mut err = EnvelopeError::new("RESULT_TOO_LARGE", self.to_string(), Phase::Execution)
            .with_size("result", self.limit, self.size, Unit::Bytes)
            .with_hint(self.hint());
        err.tool = Some(self.tool.clone());
        err
    }
}

impl fmt::Display for ResultTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "result of {} is {} bytes, over the {}-byte limit",
            self.tool, self.size, self.limit
        )
    }
}

impl std::error::Error for ResultTooLarge {}

/// Why the guard did not hand over a result.
#[derive(Debug)]
pub enum GuardError {
    /// Over the limit under [`Policy::Reject`].
    TooLarge(ResultTooLarge),
    /// Over the limit under [`Policy::Spill`], and storing it failed.
    Spill(SpillError),
}

impl GuardError {
    /// The envelope error for this failure.
    pub fn to_envelope_error(&self) -> EnvelopeError {
        match self {
            GuardError::TooLarge(e) => e.to_envelope_error(),
            GuardError::Spill(e) => {
                EnvelopeError::new("SPILL_FAILED", e.to_string(), Phase::Execution)
            }
        }
    }
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardError::TooLarge(e) => e.fmt(f),
            GuardError::Spill(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for GuardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GuardError::TooLarge(e) => Some(e),
            GuardError::Spill(e) => Some(e),
        }
    }
}

/// What the guard did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The result fit; it is handed over unchanged.
    Fits,
    /// The result was cut (marked).
    Truncated,
    /// The result was stored; a summary with its handle is handed over.
    Spilled {
        /// The handle.
        full_payload_id: String,
    },
}

/// A guarded result: what to hand to the model, and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded<T> {
    /// The result to hand over.
    pub output: T,
    /// What the guard did.
    pub outcome: Outcome,
    /// Size of the result before the guard, in bytes (serialized, for JSON).
    pub original_bytes: u64,
    /// Warnings to put in the envelope (one per cut, or `RESULT_SPILLED`).
    pub warnings: Vec<Warning>,
}

impl<T> Guarded<T> {
    /// Whether the guard cut or spilled.
    pub fn truncated(&self) -> bool {
        self.outcome != Outcome::Fits
    }
}

/// Serializes as the output alone, so that `tool_call(..).run(|| guard.json(..))` measures what
/// is handed over.
impl<T: serde::Serialize> serde::Serialize for Guarded<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.output.serialize(serializer)
    }
}

/// The output's bytes, so that `tool_call(..).run_text(|| guard.text(..))` measures what is
/// handed over.
impl AsRef<[u8]> for Guarded<String> {
    fn as_ref(&self) -> &[u8] {
        self.output.as_bytes()
    }
}

/// Applies the output limit to tool results. Build with [`CeilingGuard::builder`].
#[derive(Debug, Clone)]
pub struct CeilingGuard {
    limit: Limit,
    policy: Policy,
    head_ratio: f64,
    inspect_wrapper: bool,
    store: Arc<dyn SpillStore>,
}

/// Builder of a [`CeilingGuard`], by value.
#[derive(Debug, Clone)]
pub struct CeilingGuardBuilder {
    explicit: Option<u64>,
    config: Option<u64>,
    env: Option<Option<String>>,
    policy: Policy,
    head_ratio: f64,
    inspect_wrapper: bool,
    store: Option<Arc<dyn SpillStore>>,
}

impl CeilingGuardBuilder {
    /// The explicit limit (highest precedence).
    pub fn max_output(mut self, bytes: u64) -> Self {
        self.explicit = Some(bytes);
        self
    }

    /// Sets the explicit limit if `bytes` is `Some`.
    pub fn max_output_opt(mut self, bytes: Option<u64>) -> Self {
        self.explicit = bytes.or(self.explicit);
        self
    }

    /// The limit from a configuration file.
    pub fn config_max_output(mut self, bytes: Option<u64>) -> Self {
        self.config = bytes;
        self
    }

    /// Uses `value` as the environment value instead of reading [`ENV_MAX_TOOL_OUTPUT`] (tests,
    /// embedding).
    pub fn env_value(mut self, value: Option<String>) -> Self {
        self.env = Some(value);
        self
    }

    /// The policy ([`Policy::Truncate`] by default).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Share of a text cut kept from the head ([`DEFAULT_HEAD_RATIO`] by default).
    pub fn head_ratio(mut self, ratio: f64) -> Self {
        self.head_ratio = ratio;
        self
    }

    /// Wraps cut text in Inspect's `<START_TOOL_OUTPUT>` / `<END_TOOL_OUTPUT>` envelope.
    pub fn inspect_wrapper(mut self, on: bool) -> Self {
        self.inspect_wrapper = on;
        self
    }

    /// Where spilled results go ([`FsSpillStore::from_env`] by default).
    pub fn store(mut self, store: Arc<dyn SpillStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Spills to files in `dir` when it is `Some` (else [`FsSpillStore::from_env`]).
    pub fn spill_dir(self, dir: Option<&std::path::Path>) -> Self {
        match dir {
            Some(d) => self.store(Arc::new(FsSpillStore::new(d))),
            None => self,
        }
    }

    /// [`CeilingGuardBuilder::build`] for a proxy that stands between a tool and the model
    /// (`toolsize wrap`, `toolsize mcp`): the limit must leave room for the refusal or notice the
    /// proxy writes in place of a result ([`MIN_PROXY_LIMIT`] bytes).
    pub fn build_for_proxy(self) -> Result<CeilingGuard, ProxyGuardError> {
        let guard = self.build().map_err(ProxyGuardError::Limit)?;
        match guard.limit() {
            l if l.bytes < MIN_PROXY_LIMIT => Err(ProxyGuardError::TooSmall(l)),
            _ => Ok(guard),
        }
    }

    /// Resolves the limit, logs it (once) with its source, and builds the guard.
    pub fn build(self) -> Result<CeilingGuard, LimitError> {
        let env = match self.env {
            Some(v) => v,
            None => std::env::var(ENV_MAX_TOOL_OUTPUT).ok(),
        };
        let limit = resolve_limit(self.explicit, self.config, env.as_deref())?;
        log_limit_once(limit, self.policy);
        Ok(CeilingGuard {
            limit,
            policy: self.policy,
            head_ratio: self.head_ratio,
            inspect_wrapper: self.inspect_wrapper,
            store: self
                .store
                .unwrap_or_else(|| Arc::new(FsSpillStore::from_env())),
        })
    }
}

/// Smallest limit a proxy accepts, in bytes: room for its refusal or notice, so that what it
/// writes is never over the limit, whatever happens.
pub const MIN_PROXY_LIMIT: u64 = 1024;

/// A proxy's guard that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyGuardError {
    /// A limit that is present but unusable.
    Limit(LimitError),
    /// A limit below [`MIN_PROXY_LIMIT`].
    TooSmall(Limit),
}

impl fmt::Display for ProxyGuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyGuardError::Limit(e) => write!(f, "{e}"),
            ProxyGuardError::TooSmall(l) => write!(
                f,
                "the {} output limit is {} bytes: at least {MIN_PROXY_LIMIT} are needed for a refusal or a notice to fit",
                l.source, l.bytes
            ),
        }
    }
}

impl std::error::Error for ProxyGuardError {}

/// Keeps at least this much room for the summary when spilling text.
const MIN_PREVIEW_ROOM: usize = 64;

impl CeilingGuard {
    /// A builder with nothing set: the limit comes from the environment or the default.
    pub fn builder() -> CeilingGuardBuilder {
        CeilingGuardBuilder {
            explicit: None,
            config: None,
            env: None,
            policy: DEFAULT_POLICY,
            head_ratio: DEFAULT_HEAD_RATIO,
            inspect_wrapper: false,
            store: None,
        }
    }

    /// The effective limit and its source.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The spill store.
    pub fn store(&self) -> &Arc<dyn SpillStore> {
        &self.store
    }

    fn reject(&self, tool: &str, size: u64) -> GuardError {
        tracing::warn!(
            tool,
            result_bytes = size,
            limit_bytes = self.limit.bytes,
            "Tool result over the output limit rejected."
        );
        GuardError::TooLarge(ResultTooLarge {
            tool: tool.to_owned(),
            size,
            limit: self.limit.bytes,
        })
    }

    fn spill(&self, tool: &str, payload: &[u8]) -> Result<(String, String, Warning), GuardError> {
        let id = self.store.put(tool, payload).map_err(|e| {
            tracing::error!(tool, result_bytes = payload.len(), error = %e, "Spilling a tool result failed.");
            GuardError::Spill(e)
        })?;
        let fetch = self.store.fetch_hint(&id);
        tracing::info!(
            tool,
            result_bytes = payload.len(),
            limit_bytes = self.limit.bytes,
            full_payload_id = %id,
            "Tool result over the output limit spilled."
        );
        let warning = Warning::ResultSpilled {
            full_payload_id: id.clone(),
            original_bytes: payload.len() as u64,
            fetch: fetch.clone(),
        };
        Ok((id, fetch, warning))
    }

    /// Guards a text result of `tool`. `field` names it in warnings (e.g. `data` or `result`).
    pub fn text(&self, tool: &str, field: &str, text: &str) -> Result<Guarded<String>, GuardError> {
        self.text_within(tool, field, text, self.limit.bytes)
    }

    /// Like [`CeilingGuard::text`], against `budget` bytes instead of the limit: for text that is
    /// one part of a larger output (the `data` of an envelope, whose other members take the rest
    /// of the limit).
    pub fn text_within(
        &self,
        tool: &str,
        field: &str,
        text: &str,
        budget: u64,
    ) -> Result<Guarded<String>, GuardError> {
        let size = text.len() as u64;
        let budget_bytes = usize::try_from(budget).unwrap_or(usize::MAX);
        if size <= budget {
            return Ok(Guarded {
                output: text.to_owned(),
                outcome: Outcome::Fits,
                original_bytes: size,
                warnings: Vec::new(),
            });
        }
        match self.policy {
            Policy::Reject => Err(self.reject(tool, size)),
            Policy::Truncate => {
                let mut truncator = TextTruncator::new(budget_bytes).head_ratio(self.head_ratio);
                if self.inspect_wrapper {
                    truncator = truncator.inspect_wrapper(tool);
                }
                let cut = truncator.truncate(text);
                note_cut(size);
                tracing::info!(
                    tool,
                    result_bytes = size,
                    limit_bytes = self.limit.bytes,
                    kept_bytes = cut.head_bytes + cut.tail_bytes,
                    "Tool result over the output limit truncated."
                );
                Ok(Guarded {
                    warnings: cut.warning(field).into_iter().collect(),
                    output: cut.text,
                    outcome: Outcome::Truncated,
                    original_bytes: size,
                })
            }
            Policy::Spill => {
                let (id, fetch, warning) = self.spill(tool, text.as_bytes())?;
                note_cut(size);
                let summary = format!(
                    "\n[... toolsize: the output of {tool} was {size} bytes, over the {}-byte limit; the first part is above. full_payload_id={id}. {fetch} ...]",
                    self.limit.bytes
                );
                let room = budget_bytes.saturating_sub(summary.len());
                let preview_len = if room >= MIN_PREVIEW_ROOM {
                    floor_char_boundary(text, room)
                } else {
                    0
                };
                let mut output = String::with_capacity(preview_len + summary.len());
                output.push_str(&text[..preview_len]);
                output.push_str(&summary);
                Ok(Guarded {
                    output,
                    outcome: Outcome::Spilled {
                        full_payload_id: id,
                    },
                    original_bytes: size,
                    warnings: vec![warning],
                })
            }
        }
    }

    /// Guards a JSON result of `tool`, measured as compact JSON. `field` is the path of the value
    /// in warnings (e.g. `data`). Truncation is JSON-aware; when even that cannot reach the
    /// limit, the serialized value is cut as text and handed over as a JSON string.
    pub fn json(
        &self,
        tool: &str,
        field: &str,
        value: &Value,
    ) -> Result<Guarded<Value>, GuardError> {
        self.json_within(tool, field, value, self.limit.bytes)
    }

    /// Like [`CeilingGuard::json`], against `budget` bytes instead of the limit: for a value that
    /// is one part of a larger result (the `data` of an envelope, whose other members take the
    /// rest of the limit).
    pub fn json_within(
        &self,
        tool: &str,
        field: &str,
        value: &Value,
        budget: u64,
    ) -> Result<Guarded<Value>, GuardError> {
        let serialized = serde_json::to_string(value).unwrap_or_default();
        let size = serialized.len() as u64;
        if size <= budget {
            return Ok(Guarded {
                output: value.clone(),
                outcome: Outcome::Fits,
                original_bytes: size,
                warnings: Vec::new(),
            });
        }
        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
        match self.policy {
            Policy::Reject => Err(self.reject(tool, size)),
            Policy::Truncate => {
                note_cut(size);
                let (output, warnings) =
                    match JsonTruncator::new(budget).root(field).truncate(value) {
                        Ok(cut) => (cut.value, coalesce(cut.warnings)),
                        Err(_) => {
                            let (text, warning) = cut_to_json_string(&serialized, budget, field);
                            (Value::String(text), warning.into_iter().collect())
                        }
                    };
                tracing::info!(
                    tool,
                    result_bytes = size,
                    limit_bytes = self.limit.bytes,
                    cuts = warnings.len(),
                    "Tool result over the output limit truncated."
                );
                Ok(Guarded {
                    output,
                    outcome: Outcome::Truncated,
                    original_bytes: size,
                    warnings,
                })
            }
            Policy::Spill => {
                let (id, fetch, warning) = self.spill(tool, serialized.as_bytes())?;
                note_cut(size);
                let mut summary = json!({
                    "full_payload_id": id,
                    "original_bytes": size,
                    "limit_bytes": self.limit.bytes,
                    "fetch": fetch,
                    "preview": null,
                });
                let skeleton = serde_json::to_string(&summary)
                    .map(|s| s.len())
                    .unwrap_or(0);
                let room = budget.saturating_sub(skeleton);
                if room >= MIN_PREVIEW_ROOM {
                    if let Ok(cut) = JsonTruncator::new(room).truncate(value) {
                        summary["preview"] = cut.value;
                    }
                }
                Ok(Guarded {
                    output: summary,
                    outcome: Outcome::Spilled {
                        full_payload_id: id,
                    },
                    original_bytes: size,
                    warnings: vec![warning],
                })
            }
        }
    }
}

/// Rounds of fitting an output under the limit before giving up.
const MAX_FIT_ROUNDS: usize = 12;

/// Bytes kept free for `meta.duration_ms`, set after an envelope is fitted.
pub const DURATION_ROOM: u64 = 16;

/// One attempt at an output within the limit: the output, its length, how much of it its data
/// takes, and the data's budget in this attempt.
pub(crate) struct Attempt<T> {
    pub(crate) out: T,
    pub(crate) len: u64,
    pub(crate) data_len: u64,
    pub(crate) budget: u64,
}

/// Fits an output whose data is cut to a budget, and whose other parts (envelope, warnings)
/// take the rest, under `limit`: tries `first_budget`, then budgets aimed at the room the other
/// parts leave (in proportion to how the data's bytes follow its budget, so escaping is
/// accounted for), at least one byte lower each round. `None` when nothing fits.
pub(crate) fn fit<T, E>(
    limit: u64,
    first_budget: u64,
    mut attempt: impl FnMut(u64) -> Result<Attempt<T>, E>,
) -> Result<Option<T>, E> {
    let mut budget = first_budget;
    for _ in 0..MAX_FIT_ROUNDS {
        let a = attempt(budget)?;
        if a.len <= limit {
            return Ok(Some(a.out));
        }
        budget = a.budget;
        if budget == 0 {
            break;
        }
        let others = a.len.saturating_sub(a.data_len);
        let room = limit.saturating_sub(others);
        let aimed = u128::from(room) * u128::from(budget) / u128::from(a.data_len.max(1));
        // Never above the room itself: data that came out shorter than its budget (a preview
        // cut at an item's end, a fixed summary) would otherwise be aimed at the same size
        // again, and the rounds would run out a byte at a time.
        budget = u64::try_from(aimed).unwrap_or(0).min(room).min(budget - 1);
    }
    Ok(None)
}

impl CeilingGuard {
    /// Guards a JSON result and puts it in an envelope whose *whole* JSON (data, warnings and
    /// meta, with [`DURATION_ROOM`] kept for `meta.duration_ms`) is at most the limit: `data`
    /// gets what the rest leaves, and same-shape cuts are one warning ([`coalesce`]). When
    /// nothing fits, or under [`Policy::Reject`] when the data does not, the result is refused.
    pub fn json_envelope(
        &self,
        tool: &str,
        value: &Value,
    ) -> Result<Guarded<Envelope>, GuardError> {
        let limit = self.limit.bytes.saturating_sub(DURATION_ROOM);
        let skeleton = Envelope::ok(Value::Null).to_json().len() as u64;
        let fitted = fit(limit, limit.saturating_sub(skeleton), |budget| {
            let g = self.json_within(tool, "data", value, budget)?;
            let mut env = Envelope::ok(g.output).with_warnings(g.warnings.iter().cloned());
            if g.outcome != Outcome::Fits {
                env.mark_truncated(Some(g.original_bytes));
            }
            let len = env.to_json().len() as u64;
            let data_len = serde_json::to_string(env.data()).map_or(0, |s| s.len() as u64);
            Ok(Attempt {
                out: Guarded {
                    output: env,
                    outcome: g.outcome,
                    original_bytes: g.original_bytes,
                    warnings: g.warnings,
                },
                len,
                data_len,
                budget,
            })
        })?;
        fitted.ok_or_else(|| {
            GuardError::TooLarge(ResultTooLarge {
                tool: tool.to_owned(),
                size: serde_json::to_string(value).map_or(0, |s| s.len() as u64),
                limit: self.limit.bytes,
            })
        })
    }
}

/// Cuts `text` so that, as a JSON string, it takes at most `budget` bytes.
pub(crate) fn cut_to_json_string(
    text: &str,
    budget: usize,
    field: &str,
) -> (String, Option<Warning>) {
    let mut inner = budget.saturating_sub(2);
    loop {
        let cut = TextTruncator::new(inner).truncate(text);
        let encoded = serde_json::to_string(&cut.text)
            .map(|s| s.len())
            .unwrap_or(usize::MAX);
        if encoded <= budget || inner == 0 {
            let warning = cut.warning(field);
            return (cut.text, warning);
        }
        inner = inner.saturating_sub((encoded - budget).max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(policy: Policy, limit: u64) -> CeilingGuard {
        CeilingGuard::builder()
            .max_output(limit)
            .env_value(None)
            .policy(policy)
            .build()
            .unwrap()
    }

    #[test]
    fn limit_precedence() {
        let l = resolve_limit(Some(1), Some(2), Some("3")).unwrap();
        assert_eq!((l.bytes, l.source), (1, Origin::Explicit));
        let l = resolve_limit(None, Some(2), Some("3")).unwrap();
        assert_eq!((l.bytes, l.source), (2, Origin::Config));
        let l = resolve_limit(None, None, Some("3")).unwrap();
        assert_eq!((l.bytes, l.source), (3, Origin::Env));
        let l = resolve_limit(None, None, None).unwrap();
        assert_eq!((l.bytes, l.source), (16_384, Origin::Default));
    }

    #[test]
    fn bad_limits_are_errors_not_fallbacks() {
        let err = resolve_limit(None, None, Some("16k")).unwrap_err();
        assert_eq!(err.source, Origin::Env);
        assert!(err.to_string().contains(ENV_MAX_TOOL_OUTPUT));
        assert!(resolve_limit(Some(0), None, None).is_err());
        assert!(resolve_limit(None, Some(0), None).is_err());
    }

    #[test]
    fn builder_reads_env_value() {
        let g = CeilingGuard::builder()
            .env_value(Some("4096".into()))
            .build()
            .unwrap();
        assert_eq!(g.limit().bytes, 4096);
        assert_eq!(g.limit().source, Origin::Env);
    }

    #[test]
    fn reject_carries_tool_size_limit_hint() {
        let err = guard(Policy::Reject, 10)
            .text("search", "result", &"x".repeat(100))
            .unwrap_err();
        let env = err.to_envelope_error();
        assert_eq!(env.code, "RESULT_TOO_LARGE");
        assert_eq!(env.tool.as_deref(), Some("search"));
        assert_eq!((env.limit, env.actual), (Some(10), Some(100)));
        assert!(env.hint.unwrap().contains("cursor"));
    }

    #[test]
    fn truncate_text_fits_and_warns() {
        let g = guard(Policy::Truncate, 200);
        let out = g.text("bash", "result", &"z".repeat(5000)).unwrap();
        assert!(out.output.len() <= 200);
        assert_eq!(out.outcome, Outcome::Truncated);
        assert_eq!(out.warnings.len(), 1);
        assert!(out.truncated());
    }

    #[test]
    fn fit_aims_at_the_room_when_the_data_falls_short_of_its_budget() {
        // Data in steps (a fixed summary and whole items of 95 bytes), beside parts of a fixed
        // size: each attempt's data is well under its budget. Aimed in proportion alone, the
        // budget fell a byte a round and the rounds ran out: `toolsize wrap --policy spill`
        // refused an envelope whose bare summary fits (exit 2), depending on where the first
        // budget fell (it moves with the digits of `duration_ms` and the spill path's length;
        // `tests/cli_wrap.rs` failed so once under load). Every `others` up to what leaves room
        // for the bare summary must fit.
        for others in 0..=700u64 {
            let out = fit(1024, 1024, |budget| {
                let items = budget.saturating_sub(300) / 95;
                let data_len = 300 + items * 95;
                Ok::<_, ()>(Attempt {
                    out: data_len,
                    len: others + data_len,
                    data_len,
                    budget,
                })
            })
            .unwrap();
            assert!(
                out.is_some_and(|d| others + d <= 1024),
                "others {others}: {out:?}"
            );
        }
    }

    #[test]
    fn fitting_results_pass() {
        let g = guard(Policy::Reject, 200);
        let out = g.json("t", "data", &json!({"a": 1})).unwrap();
        assert_eq!(out.outcome, Outcome::Fits);
    }

    #[test]
    fn truncate_json_keeps_json_within_limit() {
        let g = guard(Policy::Truncate, 300);
        let v = json!({"rows": (0..200).map(|i| json!({"id": i, "name": "n".repeat(40)})).collect::<Vec<_>>()});
        let out = g.json("db", "data", &v).unwrap();
        assert!(serde_json::to_string(&out.output).unwrap().len() <= 300);
        assert!(!out.warnings.is_empty());
    }

    #[test]
    fn spill_stores_and_returns_handle() {
        let dir = std::env::temp_dir().join(format!("toolsize-spill-test-{}", std::process::id()));
        let store = Arc::new(FsSpillStore::new(&dir));
        let g = CeilingGuard::builder()
            .max_output(400)
            .env_value(None)
            .policy(Policy::Spill)
            .store(store.clone())
            .build()
            .unwrap();
        let text = "line of output\n".repeat(1000);
        let out = g.text("grep", "result", &text).unwrap();
        let Outcome::Spilled { full_payload_id } = &out.outcome else {
            panic!("not spilled");
        };
        assert!(out.output.len() <= 400, "{}", out.output.len());
        assert!(out.output.contains(full_payload_id.as_str()));
        assert_eq!(store.get(full_payload_id).unwrap(), text.as_bytes());
        let v = json!({"big": "q".repeat(3000)});
        let out = g.json("grep", "data", &v).unwrap();
        let id = out.output["full_payload_id"].as_str().unwrap();
        let back: Value = serde_json::from_slice(&store.get(id).unwrap()).unwrap();
        assert_eq!(back, v);
        assert!(matches!(
            store.get("../../etc/passwd"),
            Err(SpillError::InvalidId(_))
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_whole_envelope_fits_the_limit() {
        let rows: Vec<Value> = (0..3000)
            .map(|i| json!({"id": i, "body": "lorem ipsum ".repeat(10)}))
            .collect();
        let v = json!({ "rows": rows });
        for limit in [1024u64, 4096, 20_000] {
            let g = guard(Policy::Truncate, limit)
                .json_envelope("db", &v)
                .unwrap();
            let env = g
                .output
                .with_duration(std::time::Duration::from_secs(86_400));
            let json = env.to_json();
            assert!(json.len() as u64 <= limit, "{limit}: {}", json.len());
            assert!(env.is_truncated());
            // 3000 cut bodies are one warning, not one each.
            assert!(env.warnings().len() <= 2, "{:?}", env.warnings());
        }
        let small = guard(Policy::Reject, 4096)
            .json_envelope("db", &json!({"a": 1}))
            .unwrap();
        assert!(!small.output.is_truncated());
        assert!(guard(Policy::Reject, 4096).json_envelope("db", &v).is_err());
    }

    #[test]
    fn json_that_cannot_shrink_becomes_a_marked_string() {
        let mut map = serde_json::Map::new();
        for i in 0..200 {
            map.insert(format!("k{i}"), json!(i));
        }
        let g = guard(Policy::Truncate, 120);
        let out = g.json("t", "data", &Value::Object(map)).unwrap();
        assert!(out.output.is_string());
        assert!(serde_json::to_string(&out.output).unwrap().len() <= 120);
        assert_eq!(out.warnings.len(), 1);
    }
}
