//! `CacheKey`: what a call is cached under — its key words and the static values whose hashes
//! the words hold — and `KeyRef`, a key with the field names that label its parts, for
//! reading it back.

use super::statics::{StaticValue, Statics};
use super::words::KeyWords;
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

/// Key words plus static values. Hashes by the words alone (they hold each static value's
/// hash); equal when the words are equal and each static value is `Eq` to the other's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CacheKey {
    pub(crate) words: KeyWords,
    pub(crate) statics: Statics,
}

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.words.hash(state);
    }
}

/// Field scopes: (word position, `Some(name)` entering a field or `None` leaving one).
pub(crate) type Fields = SmallVec<[(u16, Option<&'static str>); 16]>;

/// Key words, the static values they refer to, and the field scopes that name their parts.
#[derive(Clone, Copy)]
pub(crate) struct KeyRef<'a> {
    pub(crate) words: &'a [u64],
    pub(crate) statics: &'a [StaticValue],
    pub(crate) fields: &'a [(u16, Option<&'static str>)],
}

impl<'a> KeyRef<'a> {
    pub(crate) fn new(key: &'a CacheKey, fields: &'a [(u16, Option<&'static str>)]) -> KeyRef<'a> {
        KeyRef { words: &key.words, statics: &key.statics, fields }
    }
}

/// The fields enclosing the word at `pos`, outermost first.
pub(super) fn field_path(fields: &[(u16, Option<&'static str>)], pos: usize) -> Vec<&'static str> {
    let mut path = Vec::new();
    for &(_, event) in fields.iter().take_while(|(at, _)| *at as usize <= pos) {
        match event {
            Some(name) => path.push(name),
            None => drop(path.pop()),
        }
    }
    path
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
        let key = |v: i32| CacheKey { words: KeyWords::from_slice(&[1, 2]), statics: vec![StaticValue::new(v)] };
        assert_eq!(hash(&key(1)), hash(&key(2)), "the words alone are hashed");
        assert_ne!(key(1), key(2));
        assert_eq!(key(1), key(1));
    }
}
