//! Signatures: a call's arguments flattened into a key of typed 64-bit words (tensor dtype,
//! shape and requires_grad; Rust scalars and strings by value; static fields by hash, with
//! the value kept beside the words and compared by `Eq`) plus the tensor leaves, and the
//! thread's settings a trace reads (grad mode). The words are self-describing, so when a call
//! retraces, the reason ("arg x: shape [2] -> [3]", "grad mode: enabled -> disabled") is
//! decoded from the old and new keys — the cache-hit path builds no strings.
//!
//! `words.rs` is the encoding, `flattener.rs` writes it, `signature.rs` is the result and
//! `cache_key.rs` what the cache keys by; `statics.rs` holds static values, `settings.rs`
//! the settings; `decode.rs` reads a key back, for `describe.rs` (signature text) and
//! `explain.rs` (retrace reasons).

mod cache_key;
mod decode;
mod describe;
mod explain;
mod flattener;
mod settings;
mod signature;
mod statics;
mod words;

pub(crate) use cache_key::{CacheKey, Fields, KeyRef};
pub(crate) use describe::describe;
pub(crate) use explain::explain;
pub use flattener::Flattener;
pub(crate) use signature::Signature;
