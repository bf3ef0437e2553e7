//! `toolsize serve` (the collector daemon) and `toolsize gen-config`.
//!
//! `serve` reads the configuration (flags > `TOOLSIZE_*` environment > `--config` file >
//! defaults), starts the daemon, prints one JSON line on standard output once listening
//! (`{"event":"listening","otlp_grpc":..,"otlp_http":..,"admin":..}`, useful with port 0), and
//! stops gracefully on SIGINT or SIGTERM: in-flight requests finish, the queue drains and a final
//! snapshot is written. SIGHUP reads the configuration again and takes what can change without
//! a restart (the alert sinks, the rules' settings and the layer stacks, [`Daemon::reload`]); a
//! file that does not load is logged and the running configuration kept. Logs go to standard error (`RUST_LOG` overrides the `info` level), as
//! text or, with `--log-format json`, one JSON object per line ([`super::log`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::CliError;
use crate::collector::config::{
    generated_config, unknown_env_warnings, Config, ConfigError, Flags,
};
use crate::collector::Daemon;
use crate::layers::{Stack, StackError};

/// Flags of `toolsize serve`: `--config`, and one flag per configuration key that has one
/// ([`Flags`], derived from the keys' declaration).
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// TOML configuration file (`toolsize gen-config` prints a complete one).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The flags setting configuration keys.
    #[command(flatten)]
    pub settings: Flags,
}

/// Flags of `toolsize demo`: those of `serve`, and when the synthetic agent's deploy happens.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The flags of `serve`.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// When `search_orders` starts returning about 13 times more (the p95 jump the history and
    /// the size alerts show), after start, e.g. 30s or 5m.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub deploy_after: crate::collector::config::Interval,
}

/// The windows of `toolsize demo` unless a flag, variable or file sets them: the recent window
/// and the baseline the p95-jump alert compares are then short enough for the alert to fire
/// within seconds of the deploy (`--deploy-after`, 60 s by default), where the daemon's
/// defaults (5m, 1h) would take over an hour.
pub const DEMO_WINDOWS: [&str; 2] = ["10s", "2m"];

/// The key the demo's windows replace when unset (also the id of its flag, `--window`).
pub(crate) const WINDOWS_KEY: &str = "aggregation.windows";

/// The help of the demo's `--window`: the demo's own default, not the daemon's.
pub(crate) fn demo_window_help() -> String {
    format!(
        "Sliding windows for quantiles and counts (units: s, m, h, d), the flag repeatable. \
         [default: {}]",
        DEMO_WINDOWS.join(", ")
    )
}

/// Prints the complete commented configuration file.
pub fn gen_config() -> ExitCode {
    print!("{}", generated_config());
    ExitCode::SUCCESS
}

/// Runs the daemon until SIGINT or SIGTERM.
pub fn serve(args: ServeArgs) -> ExitCode {
    run(args, None)
}

/// Runs the daemon and the synthetic agent of [`super::demo`] until SIGINT or SIGTERM.
pub fn demo(args: DemoArgs) -> ExitCode {
    run(args.serve, Some(args.deploy_after.0))
}

/// Runs the daemon; with `demo` (the deploy's delay), the synthetic agent too.
fn run(args: ServeArgs, demo: Option<std::time::Duration>) -> ExitCode {
    let env = std::env::vars().filter(|(k, _)| k.starts_with("TOOLSIZE_"));
    let demo_windows = |c: &mut Config, unset: &dyn Fn(&str) -> bool| {
        if demo.is_some() && unset(WINDOWS_KEY) {
            c.aggregation.windows = DEMO_WINDOWS
                .iter()
                .map(|w| w.parse().expect("valid demo window"))
                .collect();
        }
    };
    let config = match Config::load_with(args.config.as_deref(), env, &args.settings, demo_windows)
    {
        Ok(c) => c,
        Err(e @ ConfigError::Stack { .. }) => return stack_error(&e).report(),
        Err(e) => return CliError::new("CONFIG", e.to_string()).report(),
    };
    if demo.is_some() && config.tls.cert_file.is_some() {
        return CliError::new(
            "CONFIG",
            "toolsize demo feeds its own OTLP/HTTP listener in plain text: start it without TLS",
        )
        .report();
    }
    let token = match config.auth.token() {
        Ok(t) => t,
        Err(e) => return CliError::new("CONFIG", e).report(),
    };
    super::log::init(config.log.format);
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    for w in unknown_env_warnings(names.iter().map(String::as_str)) {
        tracing::warn!(warning = %w, "Unknown TOOLSIZE_ variable.");
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.listeners.workers > 0 {
        builder.worker_threads(config.listeners.workers);
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => return CliError::new("RUNTIME", e.to_string()).report(),
    };
    runtime.block_on(async move {
        // Before the listeners: a SIGTERM sent once /healthz answers stops the daemon gracefully,
        // and a SIGHUP reloads rather than kills.
        let signal = shutdown_signal();
        let mut hangups = hangup_signal();
        let daemon = match Daemon::start(&config).await {
            Ok(d) => d,
            Err(e) => return CliError::new("START", e.to_string()).report(),
        };
        tracing::info!(
            windows = ?config
                .aggregation
                .windows
                .iter()
                .map(|w| w.label.as_str())
                .collect::<Vec<_>>(),
            max_series = config.aggregation.max_series,
            workers = tokio::runtime::Handle::current().metrics().num_workers(),
            max_request_bytes = config.otlp.max_request_bytes,
            data_dir = ?config.store.data_dir,
            snapshot_interval = %config.store.snapshot_interval,
            "Effective configuration."
        );
        log_stack(&config.stack);
        println!(
            "{}",
            serde_json::json!({
                "event": "listening",
                "otlp_grpc": daemon.otlp_grpc_addr.to_string(),
                "otlp_http": daemon.otlp_http_addr.to_string(),
                "admin": daemon.admin_addr.to_string(),
            })
        );
        let agent = demo.map(|deploy_after| {
            tracing::info!(
                status_page = %format!("http://{}/", daemon.admin_addr),
                "Demo agent started: open the status page."
            );
            tokio::spawn(super::demo::agent(
                daemon.otlp_http_addr,
                token,
                deploy_after,
            ))
        });
        tokio::pin!(signal);
        let mut running = config.clone();
        loop {
            tokio::select! {
                _ = &mut signal => break,
                Some(()) = next_hangup(&mut hangups) => {
                    reload(&daemon, &args, &mut running).await;
                }
            }
        }
        if let Some(a) = agent {
            a.abort();
        }
        tracing::info!("Shutting down.");
        if daemon.shutdown().await.final_snapshot_failed {
            // Exit 1, not 2: the command was right, the data directory failed it.
            CliError::new(
                "SNAPSHOT",
                "the final snapshot could not be written (see the log); what was received since \
                 the last successful snapshot is lost",
            )
            .report_with(ExitCode::FAILURE)
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// SIGHUP: reads the configuration again (the file, the environment, the flags given at
/// start) and hands it to [`Daemon::reload`]; logs which keys changed, which are in effect and
/// which wait for a restart (names only). A configuration that does not load is logged and the
/// running one kept.
async fn reload(daemon: &Daemon, args: &ServeArgs, running: &mut Config) {
    let env = std::env::vars().filter(|(k, _)| k.starts_with("TOOLSIZE_"));
    let new = match Config::load(args.config.as_deref(), env, &args.settings) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                error = %e,
                "Configuration not reloaded (SIGHUP): the running one is kept."
            );
            return;
        }
    };
    let (effective, done) = daemon.reload(running, &new).await;
    *running = effective;
    if done.changed.is_empty() {
        tracing::info!("Configuration reloaded (SIGHUP): nothing changed.");
        return;
    }
    tracing::info!(
        changed = ?done.changed,
        applied = ?done.applied,
        restart_needed = ?done.restart,
        "Configuration reloaded (SIGHUP)."
    );
    if let Some(r) = &done.restacked {
        log_stack(&running.stack);
        let dropped: Vec<String> = r
            .dropped
            .iter()
            .map(|(layer, milli)| format!("{layer}={}", milli.div_ceil(1000)))
            .collect();
        tracing::info!(
            series_moved = r.series_moved,
            dropped = ?dropped,
            "Layer stack reloaded: each series is held to its new stack; the over-ceiling counts \
             of layers a series is no longer held to are dropped (layer=results)."
        );
    }
    if !done.restart.is_empty() {
        tracing::warn!(
            keys = ?done.restart,
            "These changed keys take effect at the next restart; the running values are kept."
        );
    }
}

/// The SIGHUP stream (nothing where there are no signals).
#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = ();

/// SIGHUP, installed when called (a signal sent as soon as the ready line is out is not lost,
/// and the default action, which ends the process without a final snapshot, never applies).
#[cfg(unix)]
fn hangup_signal() -> Hangups {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "SIGHUP handler not installed; reload by restarting.");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangup_signal() -> Hangups {}

/// The next SIGHUP; never, without a handler.
#[cfg(unix)]
async fn next_hangup(hangups: &mut Hangups) -> Option<()> {
    match hangups {
        Some(h) => h.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangups) -> Option<()> {
    std::future::pending().await
}

/// A stack that does not resolve: `UNKNOWN_LAYER` (with its "did you mean") or `INVALID_STACK`.
fn stack_error(e: &ConfigError) -> CliError {
    let code = match e {
        ConfigError::Stack {
            error: StackError::UnknownId { .. },
            ..
        } => "UNKNOWN_LAYER",
        _ => "INVALID_STACK",
    };
    CliError::new(code, e.to_string())
}

/// Logs the effective stack once: every layer with its limit and source, then the ceiling.
fn log_stack(stack: &Stack) {
    for l in stack.layers() {
        tracing::info!(
            layer = l.id(),
            limit = l.limit,
            unit = l.layer.unit.as_str(),
            scope = l.layer.scope.as_str(),
            limit_bytes = ?l.limit_bytes.map(|b| b.bytes),
            estimated = l.limit_bytes.is_some_and(|b| b.estimated),
            source = l.source.as_str(),
            "Effective layer."
        );
    }
    if let Some(c) = stack.ceiling_bytes() {
        tracing::info!(
            layer = c.layer_id,
            bytes = c.bytes,
            estimated = c.estimated,
            source = c.source.as_str(),
            "Effective ceiling."
        );
    }
}

/// SIGTERM or SIGINT. The handlers are installed when this is called, not when the future is
/// first polled, so a signal sent as soon as the ready line is out is not lost (the default
/// action would kill the process without a final snapshot).
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
