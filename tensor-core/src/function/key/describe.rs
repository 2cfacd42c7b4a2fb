//! The text of a signature: `x: f32[2, 3], lr: 0.01, batch: (x: f32[4], mode: Train)`, with
//! the settings that are not the defaults after it (`x: f32[2] (grad mode disabled)`).

use super::cache_key::KeyRef;
use super::decode::{decode, Labeled};

/// The signature text of a key: `x: f32[2, 3], lr: 0.01`, then its aliasing and its
/// settings when not the defaults (`x: f32[2] (grad mode disabled)`).
pub(crate) fn describe(names: &[&str], key: KeyRef) -> String {
    let text = describe_args(names, key);
    format!("{text}{}", key.settings.suffix()).trim_start().to_string()
}

/// The arguments' text, and which of them are one tensor.
fn describe_args(names: &[&str], key: KeyRef) -> String {
    let decoded = decode(key);
    let args = decoded
        .args
        .iter()
        .enumerate()
        .map(|(k, parts)| {
            let name = names.get(k).copied().unwrap_or("(extra)");
            let parts: Vec<_> = parts.iter().filter(|p| p.1.is_shown()).collect();
            match (parts.len(), parts.first()) {
                (1, Some((path, part))) if path.is_empty() => format!("{name}: {part}"),
                _ => format!("{name}: ({})", join(&parts)),
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    match decoded.aliases.is_empty() {
        true => args,
        false => format!("{args} ({})", decoded.alias_text(names)),
    }
}

/// Parts as text, each with its field path (`x: f32[2], step: 1`, `body.0.bias: Some`). A
/// path of element indices alone is left out: a sequence's parts are already in order
/// (`(f32[1], f32[1])`); one with a field name keeps its indices, which tell the layers of a
/// `Sequential` or a `Vec` of structs apart.
pub(super) fn join(parts: &[&Labeled]) -> String {
    let text = |(path, part): &Labeled| {
        if path.split('.').all(|s| s.bytes().all(|b| b.is_ascii_digit())) {
            part.to_string()
        } else {
            format!("{path}: {part}")
        }
    };
    parts.iter().map(|p| text(p)).collect::<Vec<_>>().join(", ")
}
