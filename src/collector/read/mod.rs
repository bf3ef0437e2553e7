//! Readers of the aggregator's state: the admin HTTP API and pages ([`api`]), the computed views
//! ([`views`]) and the Prometheus exposition in text ([`exposition`]) and protobuf
//! ([`exposition_proto`]), both written from one description of the families in which each
//! owner of numbers writes its own (`families`; the daemon's own in `self_families`). They ask
//! the aggregator by command and render off it.

pub mod api;
pub mod exposition;
pub mod exposition_proto;
mod families;
mod health;
pub mod names;
mod pages;
mod self_families;
pub(crate) mod views;

use tokio::sync::oneshot;

use exposition::Frame;
use views::{HistoryView, ToolView, ToolsView};

/// A question for the aggregator.
#[derive(Debug)]
pub(crate) enum Command {
    /// `/api/v1/tools`.
    Tools {
        /// Window label.
        window: Option<String>,
        /// Service filter.
        service: Option<String>,
        /// Answer.
        reply: oneshot::Sender<Result<ToolsView, String>>,
    },
    /// `/api/v1/tools/{tool}`.
    Tool {
        /// Tool name.
        tool: String,
        /// Window label.
        window: Option<String>,
        /// Service filter.
        service: Option<String>,
        /// Answer.
        reply: oneshot::Sender<Result<Option<ToolView>, String>>,
    },
    /// `/api/v1/tools/{tool}/history`.
    History {
        /// Tool name.
        tool: String,
        /// Service filter.
        service: Option<String>,
        /// Answer.
        reply: oneshot::Sender<Option<HistoryView>>,
    },
    /// `/api/v1/sessions`.
    Sessions {
        /// Sessions shown at most.
        limit: usize,
        /// Service filter.
        service: Option<String>,
        /// Answer.
        reply: oneshot::Sender<crate::collector::state::context::SessionsView>,
    },
    /// `/metrics`: the numbers, to render elsewhere.
    Metrics {
        /// With each series' native histogram buckets (for the protobuf exposition).
        native: bool,
        /// Answer.
        reply: oneshot::Sender<Frame>,
    },
    /// Answer when the aggregator is running (readiness).
    Ping {
        /// Answer.
        reply: oneshot::Sender<()>,
    },
    /// An injected fault ([`crate::collector::Fault`]): take nothing until `after` fires or is
    /// dropped, then panic, as a bug in the aggregator would.
    Fail {
        /// Released by the test.
        after: oneshot::Receiver<()>,
    },
    /// A reload: the alert rules take the settings of `new` that differ from `old`
    /// ([`crate::collector::state::State::retune_observers`]).
    Retune {
        /// The running alert settings.
        old: Box<crate::collector::config::AlertsConfig>,
        /// The reloaded ones.
        new: Box<crate::collector::config::AlertsConfig>,
        /// Answer.
        reply: oneshot::Sender<crate::collector::state::Retune>,
    },
    /// A reload: every series is held to these stacks from now on
    /// ([`crate::collector::state::State::restack`]).
    Restack {
        /// The stacks of the reloaded configuration.
        stacks: std::sync::Arc<crate::collector::state::stacks::Stacks>,
        /// The classic size histogram's bounds for them.
        size_bounds: std::sync::Arc<[u64]>,
        /// Answer.
        reply: oneshot::Sender<crate::collector::state::Restacked>,
    },
    /// Drain the queue, write a final snapshot, stop.
    Shutdown {
        /// Answered once stopped.
        reply: oneshot::Sender<()>,
    },
}
