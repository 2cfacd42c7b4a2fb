//! Process-wide on/off settings, each read once from an environment variable, with an
//! override for the checks that compare both settings in one process (`set_cuda_batching`
//! and its kind). A switch on by default is off only for `0`; one off by default is on only
//! for `1` (surrounding whitespace ignored; anything else keeps the default).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

pub(crate) struct Switch {
    var: &'static str,
    on_by_default: bool,
    from_env: OnceLock<bool>,
    /// 0: as the environment says; 1: off; 2: on.
    set: AtomicU8,
}

impl Switch {
    pub(crate) const fn new(var: &'static str, on_by_default: bool) -> Switch {
        Switch { var, on_by_default, from_env: OnceLock::new(), set: AtomicU8::new(0) }
    }

    /// Whether it is on: the override when one is set, else the environment (read once).
    pub(crate) fn on(&self) -> bool {
        match self.set.load(Ordering::Relaxed) {
            1 => false,
            2 => true,
            _ => *self.from_env.get_or_init(|| from_value(std::env::var(self.var).ok().as_deref(), self.on_by_default)),
        }
    }

    /// Overrides the environment for this process (`None`: as the environment says).
    pub(crate) fn set(&self, on: Option<bool>) {
        self.set.store(on.map_or(0, |on| if on { 2 } else { 1 }), Ordering::Relaxed);
    }
}

/// The setting a variable's value gives.
fn from_value(value: Option<&str>, on_by_default: bool) -> bool {
    match (value.map(str::trim), on_by_default) {
        (Some("0"), true) => false,
        (Some("1"), false) => true,
        _ => on_by_default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_other_value_changes_a_default() {
        for v in [None, Some("1"), Some(""), Some("false"), Some("2")] {
            assert!(from_value(v, true), "{v:?}");
        }
        assert!(!from_value(Some("0"), true));
        assert!(!from_value(Some(" 0\n"), true));
        for v in [None, Some("0"), Some(""), Some("true"), Some("2")] {
            assert!(!from_value(v, false), "{v:?}");
        }
        assert!(from_value(Some("1"), false));
        assert!(from_value(Some(" 1\n"), false));
    }

    #[test]
    fn the_override_wins_and_none_returns_to_the_environment() {
        static S: Switch = Switch::new("TENSOR_CORE_TEST_SWITCH_NEVER_SET", true);
        assert!(S.on());
        S.set(Some(false));
        assert!(!S.on());
        S.set(Some(true));
        assert!(S.on());
        S.set(None);
        assert!(S.on());
    }
}
