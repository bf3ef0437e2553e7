//! The running daemon ([`Daemon`]): the three listeners (OTLP/gRPC, OTLP/HTTP, admin) bound
//! and served over the [`Pipeline`], reloaded in place ([`reload`]) and shut down.
//!
//! Start ([`Daemon::start`]): the data directory is probed before any listener binds, so an
//! unwritable one stops the start; a listener that cannot bind names the flag, variable and key
//! of its address. Connection caps above what the open-file limit allows are lowered, with a
//! warning. Under load each listener holds its connection cap, header-read and idle timeouts
//! ([`net::listener`]). Shutdown stops accepting, lets in-flight requests finish (at most 5 s
//! per server), then drains the aggregator and writes the final snapshot.

mod pipeline;
mod reload;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::collector::net::listener::{Budget, Listener};
use crate::collector::persist::store::Store;
use crate::collector::{
    config, ingest, net, read, CollectorError, Config, Fault, SelfStats, Stopped,
};

pub use pipeline::Pipeline;
pub use reload::Reloaded;

/// A running daemon: three listeners and the pipeline.
#[derive(Debug)]
pub struct Daemon {
    /// Bound OTLP/gRPC address.
    pub otlp_grpc_addr: SocketAddr,
    /// Bound OTLP/HTTP address.
    pub otlp_http_addr: SocketAddr,
    /// Bound admin address.
    pub admin_addr: SocketAddr,
    pipeline: Pipeline,
    stop: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
}

async fn bind(
    what: &'static str,
    key: &'static str,
    addr: SocketAddr,
) -> Result<TcpListener, CollectorError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| CollectorError::Bind {
            what,
            addr,
            key,
            source,
        })
}

impl Daemon {
    /// Binds the listeners (port 0 picks a free port) and starts serving.
    pub async fn start(config: &Config) -> Result<Self, CollectorError> {
        // The data directory first: a start that cannot snapshot stops before it listens.
        if let Some(dir) = &config.store.data_dir {
            Store::open(dir).map_err(|source| CollectorError::DataDir { source })?;
        }
        let (listeners, bound) = Listeners::bind(config).await?;
        let pipeline = Pipeline::spawn(&bound)?;
        let (stop, _) = watch::channel(false);
        let servers = listeners.serve(config, &pipeline, &stop)?;
        let (otlp_grpc_addr, otlp_http_addr, admin_addr) = (
            bound.otlp.grpc_addr.0,
            bound.otlp.http_addr.0,
            bound.admin.addr.0,
        );
        tracing::info!(
            otlp_grpc = %otlp_grpc_addr,
            otlp_http = %otlp_http_addr,
            admin = %admin_addr,
            "Collector listening."
        );
        Ok(Self {
            otlp_grpc_addr,
            otlp_http_addr,
            admin_addr,
            pipeline,
            stop,
            servers,
        })
    }

    /// Self-metrics.
    pub fn stats(&self) -> &SelfStats {
        &self.pipeline.stats
    }

    /// Injects `fault` (see [`Pipeline::inject`]).
    #[doc(hidden)]
    pub async fn inject(&self, fault: Fault) {
        self.pipeline.inject(fault).await;
    }

    /// Stops accepting, lets in-flight requests finish (at most 5 s), drains the aggregator and
    /// writes the final snapshot.
    pub async fn shutdown(self) -> Stopped {
        let _ = self.stop.send(true);
        for s in self.servers {
            let abort = s.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), s)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        let stopped = self.pipeline.shutdown().await;
        if stopped.final_snapshot_failed {
            tracing::error!("Collector stopped; the final snapshot could not be written.");
        } else {
            tracing::info!("Collector stopped.");
        }
        stopped
    }
}

/// The three listeners, bound.
struct Listeners {
    grpc: TcpListener,
    http: TcpListener,
    admin: TcpListener,
}

impl Listeners {
    /// Binds the three addresses of `config`; the configuration with the addresses actually
    /// bound (port 0 resolved): alerts link back to the admin address, the status page names
    /// the OTLP addresses.
    async fn bind(config: &Config) -> Result<(Self, Config), CollectorError> {
        let grpc = bind("otlp grpc", "otlp.grpc_addr", config.otlp.grpc_addr.0).await?;
        let http = bind("otlp http", "otlp.http_addr", config.otlp.http_addr.0).await?;
        let admin = bind("admin", "admin.addr", config.admin.addr.0).await?;
        let local = |l: &TcpListener, a: config::ListenAddr| l.local_addr().unwrap_or(a.0);
        let mut bound = config.clone();
        bound.admin.addr = local(&admin, config.admin.addr).into();
        bound.otlp.grpc_addr = local(&grpc, config.otlp.grpc_addr).into();
        bound.otlp.http_addr = local(&http, config.otlp.http_addr).into();
        Ok((Self { grpc, http, admin }, bound))
    }

    /// Serves each listener over the pipeline until `stop` says so: its budget, its router.
    fn serve(
        self,
        config: &Config,
        pipeline: &Pipeline,
        stop: &watch::Sender<bool>,
    ) -> Result<Vec<JoinHandle<()>>, CollectorError> {
        let [grpc, http, admin] = budgets(config)?;
        let conns = pipeline.stats.listeners.clone();
        Ok(vec![
            tokio::spawn(net::listener::serve_http(
                self.http,
                ingest::http::router(pipeline.ingest.clone()),
                http,
                conns.clone(),
                stop.subscribe(),
            )),
            tokio::spawn(net::listener::serve_http(
                self.admin,
                read::api::router(pipeline.api.clone()),
                admin,
                conns.clone(),
                stop.subscribe(),
            )),
            serve_grpc(self.grpc, grpc, config, pipeline, stop),
        ])
    }
}

/// The budgets of the OTLP/gRPC, OTLP/HTTP and admin listeners: their connection caps (lowered
/// to fit the open-file limit, with a warning), timeouts and TLS acceptors.
fn budgets(config: &Config) -> Result<[Budget; 3], CollectorError> {
    let l = &config.listeners;
    let configured = [
        l.otlp_max_connections,
        l.otlp_max_connections,
        l.admin_max_connections,
    ];
    let nofile = net::listener::open_file_limit();
    let (caps, lowered) = net::listener::fit_caps(configured, nofile);
    if lowered {
        tracing::warn!(
            open_file_limit = nofile.unwrap_or(0),
            otlp_max_connections = caps[0],
            admin_max_connections = caps[2],
            configured_otlp = configured[0],
            configured_admin = configured[2],
            "Open-file limit too low for the connection caps; caps lowered (raise ulimit -n)."
        );
    }
    #[cfg(feature = "tls")]
    let tls = match (&config.tls.cert_file, &config.tls.key_file) {
        (Some(c), Some(k)) => Some(
            net::tls::acceptors(c, k).map_err(|e| CollectorError::Security(format!("tls: {e}")))?,
        ),
        _ => None,
    };
    let budget = |which: Listener, max_connections| Budget {
        listener: which,
        max_connections,
        header_read_timeout: l.header_read_timeout.0,
        idle_timeout: l.idle_timeout.0,
        #[cfg(feature = "tls")]
        tls: tls.as_ref().map(|t| match which {
            Listener::OtlpGrpc => t.grpc.clone(),
            _ => t.http.clone(),
        }),
        #[cfg(not(feature = "tls"))]
        tls: None,
    };
    Ok([
        budget(Listener::OtlpGrpc, caps[0]),
        budget(Listener::OtlpHttp, caps[1]),
        budget(Listener::Admin, caps[2]),
    ])
}

/// Serves OTLP/gRPC on `listener` until `stop` says so. Every path reaches the receiver, so
/// calls to other services are answered and counted there too (tonic's own fallback would
/// answer without counting); each call is in flight on its connection until answered
/// (admission at the cap).
fn serve_grpc(
    listener: TcpListener,
    budget: Budget,
    config: &Config,
    pipeline: &Pipeline,
    stop: &watch::Sender<bool>,
) -> JoinHandle<()> {
    let l = &config.listeners;
    let grpc = ingest::grpc::service(pipeline.ingest.clone());
    let mut stopped = stop.subscribe();
    let sig = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let incoming = net::listener::grpc_incoming(
        listener,
        budget,
        pipeline.stats.listeners.clone(),
        stop.subscribe(),
    );
    let mut server = tonic::transport::Server::builder()
        .max_concurrent_streams(l.grpc_max_concurrent_streams)
        .http2_keepalive_interval(Some(l.grpc_keepalive_interval.0))
        .http2_keepalive_timeout(Some(l.grpc_keepalive_timeout.0))
        .http2_max_header_list_size(64 * 1024)
        .http2_max_pending_accept_reset_streams(Some(64));
    tokio::spawn(async move {
        let routes = tonic::service::Routes::from(
            axum::Router::new()
                .fallback_service(grpc)
                .layer(axum::middleware::from_fn(net::evict::in_flight)),
        );
        if let Err(e) = server
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, sig)
            .await
        {
            tracing::error!(error = %e, "OTLP/gRPC server failed.");
        }
    })
}
