//! `CacheKey`: what a call is cached under — its key words, the static values whose hashes
//! the words hold, and the thread's settings a trace reads (grad mode) — and `KeyRef`, a key
//! with the field names that label its parts, for reading it back.

use super::settings::Settings;
use super::statics::{StaticValue, Statics};
use super::words::KeyWords;
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

/// Key words plus static values plus the settings the call was made under. Hashes by the
/// words (they hold each static value's hash) and the settings; equal when the words and the
/// settings are equal and each static value is `Eq` to the other's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CacheKey {
    pub(crate) words: KeyWords,
    pub(crate) statics: Statics,
    /// Outside the words: a copy, so keying it allocates nothing, even for a key whose words
    /// fill their inline space.
    pub(crate) settings: Settings,
}

impl CacheKey {
    /// A key derived from this one (without dims, with other shapes): `words`, with the same
    /// static values and settings.
    pub(crate) fn with_words(&self, words: KeyWords) -> CacheKey {
        CacheKey { words, statics: self.statics.clone(), settings: self.settings }
    }
}

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.words.hash(state);
        self.settings.hash(state);
    }
}

/// What labels a part of an argument: a struct field's name, or an element's index in a
/// collection (so leaves are named `layers.0.weight`); or the name of the enum variant whose
/// key word is at that position (`Some`, `Relu`), which names that word and opens no scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Label {
    Field(&'static str),
    Index(u32),
    Variant(&'static str),
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Field(name) | Label::Variant(name) => f.write_str(name),
            Label::Index(i) => write!(f, "{i}"),
        }
    }
}

/// Label scopes: (word position, `Some(label)` entering a field or element, `None` leaving
/// one).
pub(crate) type Fields = SmallVec<[(u16, Option<Label>); 16]>;

/// Key words, the static values they refer to, the settings, and the field scopes that name
/// their parts.
#[derive(Clone, Copy)]
pub(crate) struct KeyRef<'a> {
    pub(crate) words: &'a [u64],
    pub(crate) statics: &'a [StaticValue],
    pub(crate) settings: Settings,
    pub(crate) fields: &'a [(u16, Option<Label>)],
}

impl<'a> KeyRef<'a> {
    pub(crate) fn new(key: &'a CacheKey, fields: &'a [(u16, Option<Label>)]) -> KeyRef<'a> {
        KeyRef { words: &key.words, statics: &key.statics, settings: key.settings, fields }
    }
}

/// The labels enclosing the word at `pos`, outermost first.
pub(super) fn field_path(fields: &[(u16, Option<Label>)], pos: usize) -> Vec<Label> {
    let mut path = Vec::new();
    for &(_, event) in fields.iter().take_while(|(at, _)| *at as usize <= pos) {
        match event {
            Some(Label::Variant(_)) => {}
            Some(label) => path.push(label),
            None => drop(path.pop()),
        }
    }
    path
}

/// The name of the enum variant whose key word is at `pos`, if it was given one.
pub(super) fn variant_name(fields: &[(u16, Option<Label>)], pos: usize) -> Option<&'static str> {
    fields.iter().find_map(|&(at, label)| match label {
        Some(Label::Variant(name)) if at as usize == pos => Some(name),
        _ => None,
    })
}

/// The labels enclosing the word at `pos` as one name: `layers.0.weight`.
pub(super) fn field_path_text(fields: &[(u16, Option<Label>)], pos: usize) -> String {
    field_path(fields, pos).iter().map(Label::to_string).collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash(k: &CacheKey) -> u64 {
        let mut h = DefaultHasher::new();
        k.hash(&mut h);
        h.finish()
    }

    #[test]
    fn keys_with_equal_words_differ_by_their_static_values() {
        let key = |v: i32| CacheKey { words: KeyWords::from_slice(&[1, 2]), statics: vec![StaticValue::new(v)], settings: Settings::default() };
        assert_eq!(hash(&key(1)), hash(&key(2)), "the words alone are hashed");
        assert_ne!(key(1), key(2));
        assert_eq!(key(1), key(1));
    }

    #[test]
    fn keys_with_equal_words_differ_by_their_settings() {
        let on = CacheKey { words: KeyWords::from_slice(&[1, 2]), ..CacheKey::default() };
        let off = CacheKey { settings: crate::autograd::no_grad(Settings::current), ..on.clone() };
        assert_ne!(on, off);
        assert_ne!(hash(&on), hash(&off), "the settings are hashed too");
        assert_eq!(on.with_words(KeyWords::from_slice(&[3])).settings, on.settings);
        assert_eq!(off.with_words(KeyWords::from_slice(&[3])).settings, off.settings);
    }
}
