//! `toolsize top`: a terminal UI on a running daemon's JSON API.
//!
//! Every 2 s it reads `GET /api/v1/tools?window=W` (`W` the daemon's shortest window, 5m by
//! default, learned from its first answer), `GET /api/v1/alerts` and the history of
//! the tools on screen (`GET /api/v1/tools/{tool}/history?service=S`) with a small blocking
//! HTTP/1.1 client (hyper's, the one the daemon posts alerts with: `http://`, or `https://` checked
//! against Mozilla's roots and the system's or `SSL_CERT_FILE`; one connection per request, a
//! 2 s timeout and a 16 MiB cap per answer), and draws the tools table (p95, over-ceiling count, call rate, a p95 sparkline), the
//! firing alerts and a status line. Keys: `p`, `o`, `r` sort by p95, over-ceiling count or call
//! rate; arrows move; `/` filters tools by name (Enter keeps the filter, Esc clears it); `q` or
//! Ctrl-C quits. With the daemon's token (`--token-file`, or the daemon's own
//! `TOOLSIZE_AUTH_TOKEN_FILE` / `TOOLSIZE_AUTH_TOKEN`) every request carries `Authorization:
//! Bearer`; a 401 says which of them to set. A daemon that stops answering leaves the last data on screen with the error in
//! the status line; the next refresh tries again.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table, TableState};
use serde_json::Value;

use super::CliError;
use crate::collector::net::client::Target;

/// Arguments of `toolsize top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// The daemon's admin address.
    #[arg(long, default_value = "http://127.0.0.1:9464")]
    pub url: String,
    /// A file whose first line is the daemon's token (auth.token), sent as `Authorization:
    /// Bearer`; without it, `TOOLSIZE_AUTH_TOKEN_FILE`, then `TOOLSIZE_AUTH_TOKEN` (the
    /// daemon's own variables).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

/// The token to send: `--token-file`, else the file `TOOLSIZE_AUTH_TOKEN_FILE` names, else
/// `TOOLSIZE_AUTH_TOKEN`; `None` when none is set. A file that cannot be read, or a token that
/// is empty or not printable ASCII, is an error naming its origin (never the token).
pub(crate) fn token(
    flag: Option<&std::path::Path>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let from_file = |origin: &str, path: &std::path::Path| {
        std::fs::read_to_string(path)
            .map_err(|e| format!("{origin} {}: {e}", path.display()))
            .map(|t| {
                (
                    origin.to_owned(),
                    t.lines().next().unwrap_or("").trim().to_owned(),
                )
            })
    };
    let (origin, token) = if let Some(path) = flag {
        from_file("--token-file", path)?
    } else if let Some(path) = env("TOOLSIZE_AUTH_TOKEN_FILE").filter(|p| !p.is_empty()) {
        from_file("TOOLSIZE_AUTH_TOKEN_FILE", std::path::Path::new(&path))?
    } else if let Some(t) = env("TOOLSIZE_AUTH_TOKEN").filter(|t| !t.is_empty()) {
        ("TOOLSIZE_AUTH_TOKEN".to_owned(), t.trim().to_owned())
    } else {
        return Ok(None);
    };
    if token.is_empty() || token.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
        return Err(format!(
            "{origin}: the token must be printable ASCII without spaces, and not empty"
        ));
    }
    Ok(Some(token))
}

const REFRESH: Duration = Duration::from_secs(2);
const TIMEOUT: Duration = Duration::from_secs(2);
const MAX_BODY: usize = 16 << 20;
/// The longest `--url` taken.
const MAX_URL_BYTES: usize = 2048;
/// History is fetched for at most this many rows per refresh.
const SPARK_ROWS: usize = 60;
/// The longest filter accepted.
const MAX_FILTER: usize = 200;

/// How the table is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    P95,
    OverCeiling,
    Rate,
}

/// One row of the tools table.
#[derive(Debug, Clone, Default)]
struct ToolLine {
    service: String,
    tool: String,
    count: u64,
    p95: u64,
    max: u64,
    over_ceiling: u64,
    per_min: f64,
    spark: String,
}

/// Calls per minute of `count` calls in a window of `window_secs`: over the shorter of the
/// window and the daemon's uptime (a daemon up one minute holds one minute of a 5-minute
/// window), at least one second. A daemon that does not say its uptime is taken as up the
/// whole window.
fn calls_per_minute(count: u64, window_secs: u64, uptime_secs: Option<u64>) -> f64 {
    let covered = uptime_secs
        .map_or(window_secs, |u| u.min(window_secs))
        .max(1);
    count as f64 * 60.0 / covered as f64
}

/// The daemon `--url` names (`http://` or, built with `tls`, `https://`, with an optional path
/// prefix), read with the crate's HTTP client ([`Target`]).
#[derive(Debug, Clone)]
pub(crate) struct Daemon {
    target: Target,
    /// Sent as `Authorization: Bearer`.
    pub(crate) token: Option<String>,
}

impl Daemon {
    /// The daemon `--url` names, with the token `--token-file` or the environment gives
    /// ([`token`]); either's error as a usage error.
    pub(crate) fn from_flags(
        url: &str,
        token_file: Option<&std::path::Path>,
    ) -> Result<Self, CliError> {
        let mut daemon = Self::parse(url).map_err(|e| CliError::new("USAGE", e))?;
        daemon.token =
            token(token_file, |v| std::env::var(v).ok()).map_err(|e| CliError::new("USAGE", e))?;
        Ok(daemon)
    }

    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        if url.len() > MAX_URL_BYTES {
            return Err(format!("--url: longer than {MAX_URL_BYTES} bytes"));
        }
        let target = Target::parse(url).map_err(|e| format!("--url {e}"))?;
        Ok(Self {
            target,
            token: None,
        })
    }

    /// `scheme://host:port`, for the status line.
    fn origin(&self) -> String {
        self.target.origin()
    }

    /// `GET path` as JSON, within [`TIMEOUT`] (connection and TLS handshake included).
    pub(crate) fn get(&self, path: &str) -> Result<Value, String> {
        let target = self.target.clone().with_path(path);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let answer = runtime.block_on(async {
            tokio::time::timeout(
                TIMEOUT,
                target.get("application/json", self.token.as_deref(), MAX_BODY),
            )
            .await
        });
        let (status, body) = match answer {
            Ok(Ok(a)) => a,
            // The hint only where it helps: nothing answered at the address, not a TLS
            // handshake refused or a broken answer.
            Ok(Err(e)) if e.unreachable() => {
                return Err(format!(
                    "{}: {e} (is toolsize serve running?)",
                    self.origin()
                ))
            }
            Ok(Err(e)) => return Err(format!("{}: {e}", self.origin())),
            Err(_) => return Err(format!("{}: no answer within {TIMEOUT:?}", self.origin())),
        };
        match (status.as_u16(), &self.token) {
            (200, _) => {}
            (401, None) => {
                return Err(format!(
                    "{path}: HTTP 401: the daemon wants its token (--token-file, \
                     TOOLSIZE_AUTH_TOKEN_FILE or TOOLSIZE_AUTH_TOKEN)"
                ))
            }
            (401, Some(_)) => return Err(format!("{path}: HTTP 401: the token was refused")),
            (n, _) => return Err(format!("{path}: HTTP {n}")),
        }
        serde_json::from_slice(&body).map_err(|e| format!("{path}: {e}"))
    }
}

/// `s` percent-encoded for a path segment or a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A sparkline of `values` in block characters, scaled to their maximum.
fn sparkline(values: &[u64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let top = values.iter().copied().max().unwrap_or(0).max(1);
    values
        .iter()
        .map(|&v| BARS[((v * 7 + top / 2) / top).min(7) as usize])
        .collect()
}

/// Bytes for people.
fn human(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    for unit in ["KiB", "MiB", "GiB"] {
        if v < 1024.0 {
            return format!("{v:.1} {unit}");
        }
        v /= 1024.0;
    }
    format!("{v:.1} TiB")
}

/// What the screen shows.
#[derive(Debug)]
struct App {
    daemon: Daemon,
    lines: Vec<ToolLine>,
    alerts: Vec<String>,
    sort: Sort,
    filter: String,
    editing: bool,
    state: TableState,
    status: String,
    /// The daemon's shortest window: its label and length in seconds, once known.
    window: Option<(String, u64)>,
}

impl App {
    fn refresh(&mut self) {
        match self.fetch() {
            Ok(()) => {
                self.status = format!(
                    "{} · {} tools · refreshed every 2 s",
                    self.daemon.origin(),
                    self.lines.len()
                )
            }
            Err(e) => self.status = format!("error: {e} (retrying)"),
        }
    }

    fn fetch(&mut self) -> Result<(), String> {
        let (window, window_secs) = match &self.window {
            Some(w) => w.clone(),
            None => {
                let v = self.daemon.get("/api/v1/tools?window=all")?;
                let label = v["windows"][0]
                    .as_str()
                    .ok_or("the daemon lists no window")?
                    .to_owned();
                let secs = crate::collector::config::parse_duration(&label)?
                    .as_secs()
                    .max(1);
                self.window.insert((label, secs)).clone()
            }
        };
        let v = self
            .daemon
            .get(&format!("/api/v1/tools?window={}", encode(&window)))?;
        let uptime = v["uptime_secs"].as_u64();
        let mut lines: Vec<ToolLine> = v["tools"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|t| ToolLine {
                service: t["service"].as_str().unwrap_or("").to_owned(),
                tool: t["tool"].as_str().unwrap_or("").to_owned(),
                count: t["count"].as_u64().unwrap_or(0),
                p95: t["p95"].as_u64().unwrap_or(0),
                max: t["max"].as_u64().unwrap_or(0),
                per_min: calls_per_minute(t["count"].as_u64().unwrap_or(0), window_secs, uptime),
                ..ToolLine::default()
            })
            .collect();
        self.sort_lines(&mut lines);
        for line in lines.iter_mut().take(SPARK_ROWS) {
            let path = format!(
                "/api/v1/tools/{}/history?service={}",
                encode(&line.tool),
                encode(&line.service)
            );
            if let Ok(h) = self.daemon.get(&path) {
                let points = h["series"][0]["points"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let p95: Vec<u64> = points
                    .iter()
                    .rev()
                    .take(30)
                    .rev()
                    .map(|p| p["p95"].as_u64().unwrap_or(0))
                    .collect();
                line.spark = sparkline(&p95);
                // The slots of the table's window.
                let slot = h["resolution_secs"].as_u64().unwrap_or(60).max(1);
                line.over_ceiling = points
                    .iter()
                    .rev()
                    .take(window_secs.div_ceil(slot) as usize)
                    .map(|p| p["over_ceiling"].as_u64().unwrap_or(0))
                    .sum();
            }
        }
        self.sort_lines(&mut lines);
        let a = self.daemon.get("/api/v1/alerts")?;
        self.alerts = a["firing"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|a| {
                let l = &a["labels"];
                format!(
                    "{} {} {}/{}",
                    l["severity"].as_str().unwrap_or("-"),
                    a["name"].as_str().unwrap_or("?"),
                    l["service"].as_str().unwrap_or("-"),
                    l["tool"].as_str().unwrap_or("-"),
                )
            })
            .collect();
        self.lines = lines;
        Ok(())
    }

    fn sort_lines(&self, lines: &mut [ToolLine]) {
        lines.sort_by(|a, b| {
            let key = match self.sort {
                Sort::P95 => b.p95.cmp(&a.p95),
                Sort::OverCeiling => b.over_ceiling.cmp(&a.over_ceiling),
                Sort::Rate => b.count.cmp(&a.count),
            };
            key.then_with(|| b.p95.cmp(&a.p95))
                .then_with(|| a.service.cmp(&b.service))
                .then_with(|| a.tool.cmp(&b.tool))
        });
    }

    fn visible(&self) -> Vec<&ToolLine> {
        let f = self.filter.to_lowercase();
        self.lines
            .iter()
            .filter(|l| f.is_empty() || l.tool.to_lowercase().contains(&f))
            .collect()
    }

    /// Handles a key; false to quit.
    fn key(&mut self, code: KeyCode, mods: KeyModifiers) -> bool {
        if mods.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
            return false;
        }
        if self.editing {
            match code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) if self.filter.len() < MAX_FILTER && !c.is_control() => {
                    self.filter.push(c)
                }
                _ => {}
            }
            self.state.select(Some(0));
            return true;
        }
        let n = self.visible().len();
        match code {
            KeyCode::Char('q') => return false,
            KeyCode::Char('p') => self.sort = Sort::P95,
            KeyCode::Char('o') => self.sort = Sort::OverCeiling,
            KeyCode::Char('r') => self.sort = Sort::Rate,
            KeyCode::Char('/') => {
                self.editing = true;
                self.filter.clear();
            }
            KeyCode::Esc => self.filter.clear(),
            KeyCode::Down | KeyCode::Char('j') => {
                let i = self.state.selected().map_or(0, |i| i + 1);
                self.state.select(Some(i.min(n.saturating_sub(1))));
            }
            KeyCode::Up | KeyCode::Char('k') => {
                let i = self.state.selected().unwrap_or(0);
                self.state.select(Some(i.saturating_sub(1)));
            }
            _ => {}
        }
        let mut lines = std::mem::take(&mut self.lines);
        self.sort_lines(&mut lines);
        self.lines = lines;
        true
    }

    fn draw(&mut self, f: &mut ratatui::Frame) {
        let alerts_h = (self.alerts.len().min(8) as u16) + 2;
        let [head, body, alerts, foot] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(4),
            Constraint::Length(alerts_h),
            Constraint::Length(1),
        ])
        .areas(f.area());
        let sort = match self.sort {
            Sort::P95 => "p95",
            Sort::OverCeiling => "over ceiling",
            Sort::Rate => "call rate",
        };
        let filter = if self.editing {
            format!(" · filter: /{}_", self.filter)
        } else if !self.filter.is_empty() {
            format!(" · filter: {}", self.filter)
        } else {
            String::new()
        };
        f.render_widget(
            Paragraph::new(format!(
                "toolsize top · window {window} · sorted by {sort}{filter} · p o r sort, ↑↓ move, / filter, q quit",
                window = self.window.as_ref().map_or("…", |w| w.0.as_str()),
            ))
            .style(Style::new().add_modifier(Modifier::BOLD)),
            head,
        );
        let rows: Vec<Row> = self
            .visible()
            .into_iter()
            .map(|l| {
                let style = if l.over_ceiling > 0 {
                    Style::new().fg(Color::Red)
                } else {
                    Style::new()
                };
                Row::new(vec![
                    l.service.clone(),
                    l.tool.clone(),
                    l.count.to_string(),
                    format!("{:.1}", l.per_min),
                    human(l.p95),
                    human(l.max),
                    l.over_ceiling.to_string(),
                    l.spark.clone(),
                ])
                .style(style)
            })
            .collect();
        let table = Table::new(
            rows,
            [
                Constraint::Length(14),
                Constraint::Min(16),
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(6),
                Constraint::Length(30),
            ],
        )
        .header(
            Row::new(vec![
                "SERVICE",
                "TOOL",
                "CALLS",
                "CALLS/M",
                "P95",
                "MAX",
                "OVER",
                "P95 HISTORY",
            ])
            .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(Block::bordered().title("tools"))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
        f.render_stateful_widget(table, body, &mut self.state);
        let lines: Vec<Line> = if self.alerts.is_empty() {
            vec![Line::from("no alert firing")]
        } else {
            self.alerts.iter().map(|a| Line::from(a.as_str())).collect()
        };
        f.render_widget(
            Paragraph::new(lines)
                .block(Block::bordered().title(format!("firing alerts ({})", self.alerts.len()))),
            alerts,
        );
        f.render_widget(Paragraph::new(self.status.as_str()), foot);
    }
}

/// Runs `toolsize top` until `q`.
pub fn run(args: TopArgs) -> ExitCode {
    let daemon = match Daemon::from_flags(&args.url, args.token_file.as_deref()) {
        Ok(d) => d,
        Err(e) => return e.report(),
    };
    let mut app = App {
        daemon,
        lines: Vec::new(),
        alerts: Vec::new(),
        sort: Sort::P95,
        filter: String::new(),
        editing: false,
        state: TableState::default().with_selected(Some(0)),
        status: "connecting…".into(),
        window: None,
    };
    let mut terminal = ratatui::init();
    let result = (|| -> std::io::Result<()> {
        let mut next = Instant::now();
        loop {
            if Instant::now() >= next {
                app.refresh();
                next = Instant::now() + REFRESH;
            }
            terminal.draw(|f| app.draw(f))?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait)? {
                if let Event::Key(k) = event::read()? {
                    if k.kind == KeyEventKind::Press && !app.key(k.code, k.modifiers) {
                        return Ok(());
                    }
                }
            }
        }
    })();
    ratatui::restore();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => CliError::new("TERMINAL", format!("terminal: {e}")).report(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing listening: the error suggests starting the daemon.
    #[test]
    fn an_unreachable_daemon_is_said_to_be_perhaps_not_running() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = Daemon::parse(&format!("http://127.0.0.1:{port}"))
            .unwrap()
            .get("/api/v1/tools")
            .unwrap_err();
        assert!(e.ends_with("(is toolsize serve running?)"), "{e}");
    }

    /// A daemon that answers, but not in TLS: the handshake fails, and the error does not
    /// suggest that nothing runs.
    #[cfg(feature = "tls")]
    #[test]
    fn a_failed_tls_handshake_does_not_ask_whether_the_daemon_runs() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        });
        let e = Daemon::parse(&format!("https://127.0.0.1:{port}"))
            .unwrap()
            .get("/api/v1/tools")
            .unwrap_err();
        server.join().unwrap();
        assert!(e.contains("TLS handshake"), "{e}");
        assert!(!e.contains("is toolsize serve running"), "{e}");
    }

    #[test]
    fn calls_per_minute_counts_over_the_time_the_window_holds() {
        // 120 calls in a 5-minute window of a daemon up one minute: 120 a minute, not 24.
        assert_eq!(calls_per_minute(120, 300, Some(60)), 120.0);
        // Up longer than the window: over the window.
        assert_eq!(calls_per_minute(600, 300, Some(3_600)), 120.0);
        // Up less than a second, or an older daemon that does not say.
        assert_eq!(calls_per_minute(3, 300, Some(0)), 180.0);
        assert_eq!(calls_per_minute(600, 300, None), 120.0);
    }

    #[test]
    fn the_token_comes_from_the_flag_then_the_file_variable_then_the_variable() {
        let dir = std::env::temp_dir().join(format!("toolsize-top-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "fl4g-token\nsecond line\n").unwrap();
        let env_file = dir.join("env-token");
        std::fs::write(&env_file, "f1le-token\n").unwrap();
        let env_file_s = env_file.to_string_lossy().into_owned();
        let env = |file: bool, var: bool| {
            let f = env_file_s.clone();
            move |k: &str| match k {
                "TOOLSIZE_AUTH_TOKEN_FILE" if file => Some(f.clone()),
                "TOOLSIZE_AUTH_TOKEN" if var => Some("v4r-token".to_string()),
                _ => None,
            }
        };
        let t = |flag: Option<&std::path::Path>, file, var| token(flag, env(file, var));
        assert_eq!(
            t(Some(&file), true, true).unwrap().as_deref(),
            Some("fl4g-token")
        );
        assert_eq!(t(None, true, true).unwrap().as_deref(), Some("f1le-token"));
        assert_eq!(t(None, false, true).unwrap().as_deref(), Some("v4r-token"));
        assert_eq!(t(None, false, false).unwrap(), None);
        let e = t(Some(&dir.join("missing")), false, false).unwrap_err();
        assert!(e.starts_with("--token-file "), "{e}");
        std::fs::write(&file, "has space\n").unwrap();
        let e = t(Some(&file), false, false).unwrap_err();
        assert!(
            e.contains("printable ASCII") && !e.contains("has space"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn urls_and_sparklines() {
        let d = Daemon::parse("http://127.0.0.1:9464/").unwrap();
        assert_eq!(d.origin(), "http://127.0.0.1:9464");
        let d = Daemon::parse("http://h/x").unwrap();
        assert_eq!(d.origin(), "http://h:80");
        assert_eq!(d.target.with_path("/api/v1/tools").path, "/x/api/v1/tools");
        assert!(Daemon::parse("ftp://h").is_err());
        assert!(Daemon::parse(&format!("http://h/{}", "x".repeat(MAX_URL_BYTES))).is_err());
        assert_eq!(sparkline(&[0, 50, 100]), "▁▅█");
        assert_eq!(encode("a b/<"), "a%20b%2F%3C");
    }
}
