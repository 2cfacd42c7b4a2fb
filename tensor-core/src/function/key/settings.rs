//! `Settings`: the thread- and process-wide settings a body can read while it is traced and
//! that change the graph it makes, taken at every call and kept in the call's key. A call
//! under another setting is a new key, so it traces again, and its retrace reason names the
//! setting (`grad mode: enabled -> disabled`), as torch.compile guards on grad mode.
//!
//! Grad mode is the one such setting: a body traced with it on records grad nodes, so a
//! traced `backward()` becomes graph nodes, a `while_loop` keeps its iterations and an
//! in-place update of a leaf that requires grad is `Error::InPlaceOnLeaf`; with it off none
//! of that happens, and a body may also branch on `is_grad_enabled()` itself. Replaying one
//! mode's graph in the other would run what the eager body would not (or refuse what it
//! would run). The other settings a body could observe are listed with the reason each is
//! not keyed in the guide (`guide.rs`, "Grad mode, and what else a body reads while tracing").

use crate::autograd::is_grad_enabled;

/// The settings of the thread a call is made on that a trace reads (see the module docs).
/// Small and `Copy`, so keying it costs a cache hit one thread-local read and no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Settings {
    grad_enabled: bool,
}

impl Default for Settings {
    /// The settings of a thread that changed nothing: grad mode on.
    fn default() -> Settings {
        Settings { grad_enabled: true }
    }
}

impl Settings {
    /// This thread's settings now.
    #[inline]
    pub(crate) fn current() -> Settings {
        Settings { grad_enabled: is_grad_enabled() }
    }

    /// What changed from `old` to `new`, one text per setting: `grad mode: enabled ->
    /// disabled`. Empty when they are equal.
    pub(crate) fn changes(old: Settings, new: Settings) -> Vec<String> {
        let mut changes = Vec::new();
        if old.grad_enabled != new.grad_enabled {
            changes.push(format!("grad mode: {} -> {}", on_off(old.grad_enabled), on_off(new.grad_enabled)));
        }
        changes
    }

    /// The settings as signature text shows them: nothing for the defaults, else
    /// ` (grad mode disabled)`.
    pub(crate) fn suffix(self) -> &'static str {
        match self.grad_enabled {
            true => "",
            false => " (grad mode disabled)",
        }
    }
}

fn on_off(enabled: bool) -> &'static str {
    match enabled {
        true => "enabled",
        false => "disabled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd::no_grad;

    #[test]
    fn grad_mode_is_read_from_the_thread() {
        assert_eq!(Settings::current(), Settings::default());
        let off = no_grad(Settings::current);
        assert_ne!(off, Settings::default());
        assert_eq!(crate::autograd::enable_grad(Settings::current), Settings::default());
        assert_eq!(no_grad(|| crate::autograd::enable_grad(Settings::current)), Settings::default(), "enable_grad inside no_grad");
        assert_eq!(Settings::changes(Settings::default(), off), ["grad mode: enabled -> disabled"]);
        assert_eq!(Settings::changes(off, Settings::default()), ["grad mode: disabled -> enabled"]);
        assert!(Settings::changes(off, off).is_empty());
        assert_eq!((Settings::default().suffix(), off.suffix()), ("", " (grad mode disabled)"));
    }
}
