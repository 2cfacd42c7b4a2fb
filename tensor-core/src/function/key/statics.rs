//! Static values in keys: a `#[graph_arg(static)]` field is kept in the key by value. Its
//! hash goes into the key words (for the map's lookup); the value itself sits beside them and
//! is compared with `Eq`, so two different values whose hashes collide get two traces.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A value a key can hold: compared with `Eq` across types (values of different types are
/// different), and shown with `Debug` in signatures and retrace reasons.
pub(crate) trait StaticKey: Any + fmt::Debug + Send + Sync {
    /// `self == other`, false when `other` is of another type.
    fn eq_dyn(&self, other: &dyn StaticKey) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<T: Eq + fmt::Debug + Send + Sync + 'static> StaticKey for T {
    fn eq_dyn(&self, other: &dyn StaticKey) -> bool {
        other.as_any().downcast_ref::<T>().is_some_and(|o| o == self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One static value of a key (shared: cloning a key does not clone the value).
#[derive(Clone)]
pub(crate) struct StaticValue(Arc<dyn StaticKey>);

/// The static values of a key, in the order flattened. Empty for most keys, so cloning one
/// allocates nothing.
pub(crate) type Statics = Vec<StaticValue>;

/// How long a value's `Debug` text may be in a signature or a retrace reason.
const MAX_TEXT: usize = 80;

impl StaticValue {
    pub(crate) fn new<T: Eq + fmt::Debug + Send + Sync + 'static>(value: T) -> StaticValue {
        StaticValue(Arc::new(value))
    }

    /// The value's `Debug` text, cut to `MAX_TEXT` characters.
    pub(crate) fn text(&self) -> String {
        let full = format!("{:?}", self.0);
        match full.char_indices().nth(MAX_TEXT) {
            Some((cut, _)) => format!("{}…", &full[..cut]),
            None => full,
        }
    }
}

impl PartialEq for StaticValue {
    fn eq(&self, other: &StaticValue) -> bool {
        self.0.eq_dyn(&*other.0)
    }
}

impl Eq for StaticValue {}

impl fmt::Debug for StaticValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for StaticValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_by_eq_and_type() {
        assert_eq!(StaticValue::new(3i32), StaticValue::new(3i32));
        assert_ne!(StaticValue::new(3i32), StaticValue::new(4i32));
        assert_ne!(StaticValue::new(3i32), StaticValue::new(3i64), "another type is another value");
        assert_eq!(StaticValue::new("relu".to_string()).to_string(), "\"relu\"");
    }

    #[test]
    fn long_values_are_cut_in_text() {
        let text = StaticValue::new(vec![0u8; 100]).text();
        assert_eq!(text.chars().count(), MAX_TEXT + 1);
        assert!(text.ends_with('…'), "{text}");
    }
}
