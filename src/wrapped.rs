//! The wrapper type the framework features share: a tool of rig or swiftide whose calls are
//! measured, and guarded when a guard is given. Each feature implements its framework's tool
//! trait for it (`crate::rig`, `crate::swiftide`); this holds what is the same in both.

use crate::guard::ceiling::CeilingGuard;

/// A framework's tool whose calls are measured (and guarded, with [`guard`](Self::guard)). Built
/// by `toolsize::rig::sized` or `toolsize::swiftide::sized`; the framework sees the tool's own
/// name, description and parameters.
#[derive(Debug, Clone)]
pub struct Sized<T> {
    pub(crate) inner: T,
    pub(crate) guard: Option<CeilingGuard>,
}

impl<T> Sized<T> {
    /// Holds every result to `guard`'s limit and policy before the model is handed it.
    pub fn guard(mut self, guard: CeilingGuard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

/// Whether the current span is one `is` tells (the framework's own tool span), read without
/// taking a handle to it: a handle is a reference count taken and given back through the
/// subscriber, two trips a call outside the framework's span would pay for nothing.
#[inline]
pub(crate) fn in_span(is: impl Fn(&tracing::Metadata<'_>) -> bool) -> bool {
    tracing::dispatcher::get_default(|d| d.current_span().metadata().is_some_and(&is))
}
