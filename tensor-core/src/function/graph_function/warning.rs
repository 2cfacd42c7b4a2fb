//! How warnings reach the user: as `tracing` events (target `tensor_core::graph_fn`), and —
//! when no `tracing` subscriber is installed, so the event would go nowhere — also on
//! standard error, as logging facades commonly fall back. A program that installs a
//! subscriber (and so chooses where warnings go, or filters them out) gets no stderr copy.

/// Logs `message`, a warning about function `function` after its trace `traces`.
pub(super) fn warn(function: &str, traces: usize, message: &str) {
    tracing::warn!(target: "tensor_core::graph_fn", function, traces, "{message}");
    if !subscriber_installed() {
        eprintln!("{}", stderr_line(message));
    }
}

/// True when a `tracing` subscriber (global, or scoped to this thread) receives events.
fn subscriber_installed() -> bool {
    tracing::dispatcher::get_default(|d| !d.is::<tracing::subscriber::NoSubscriber>())
}

/// The line written to standard error: what a plain `tracing` formatter would print.
fn stderr_line(message: &str) -> String {
    format!("WARN tensor_core::graph_fn: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata};

    /// A subscriber that takes everything and keeps nothing.
    struct Sink;

    impl tracing::Subscriber for Sink {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn stderr_is_the_fallback_only_without_a_subscriber() {
        // No unit test installs a global subscriber, so only the scoped one counts here.
        assert!(!subscriber_installed());
        assert!(tracing::subscriber::with_default(Sink, subscriber_installed));
        assert!(!subscriber_installed(), "the scoped subscriber has ended");
        assert_eq!(stderr_line("`f` traced 5 times"), "WARN tensor_core::graph_fn: `f` traced 5 times");
    }
}
