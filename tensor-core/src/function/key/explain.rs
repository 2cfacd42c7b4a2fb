//! Explaining a cache miss: why a call with a new key retraced, compared with the last traced
//! key (`arg x: shape [2] -> [3]`, `arg n: 1 -> 2`, `arg x: type Tensor -> i32`,
//! `grad mode: enabled -> disabled`).

use super::cache_key::KeyRef;
use super::decode::{decode, Labeled, Part};
use super::describe::join;
use super::settings::Settings;

/// Why a call with `new` retraced, compared with the last traced signature `old`:
/// `arg x: shape [2] -> [3]`, `arg n: 1 -> 2`, `arg x: dtype i32 -> f32`, then a changed
/// setting (`grad mode: enabled -> disabled`). Empty when the keys are equal (the entry had
/// been evicted or cleared).
pub(crate) fn explain(names: &[&str], types: &[(u64, &str)], old: KeyRef, new: KeyRef) -> Vec<String> {
    let mut reasons = argument_changes(names, types, old, new);
    reasons.extend(Settings::changes(old.settings, new.settings));
    reasons
}

/// What changed in the arguments: each one's parts, else the aliasing, else the
/// instantiation.
fn argument_changes(names: &[&str], types: &[(u64, &str)], old: KeyRef, new: KeyRef) -> Vec<String> {
    let (old, new) = (decode(old), decode(new));
    let aliasing = (old.aliases != new.aliases).then(|| format!("aliasing ({}) -> ({})", old.alias_text(names), new.alias_text(names)));
    let mut reasons: Vec<String> = old.args.iter().zip(&new.args).enumerate().flat_map(|(k, (o, n))| arg_changes(names, types, k, o, n)).collect();
    if reasons.is_empty() {
        reasons.extend(aliasing);
    }
    if reasons.is_empty() && old.instantiation != new.instantiation {
        let full = |h: &u64| types.iter().find(|(k, _)| k == h).map_or_else(|| format!("#{h:016x}"), |(_, n)| short_type(&instantiation_name(n)));
        let show = |t: Option<u64>| t.as_ref().map_or_else(|| "?".to_string(), full);
        reasons.push(format!("instantiation {} -> {}", show(old.instantiation), show(new.instantiation)));
    }
    reasons
}

/// What changed in argument `k`: a type in it (the argument's own, or a part's, such as a
/// `Sequential`'s layer), its structure, or the parts that differ.
fn arg_changes(names: &[&str], types: &[(u64, &str)], k: usize, old: &[Labeled], new: &[Labeled]) -> Vec<String> {
    let name = names.get(k).copied().unwrap_or("(extra)");
    let at = |path: &str| if path.is_empty() { name.to_string() } else { format!("{name}.{path}") };
    if let Some(change) = type_change(types, old, new) {
        let (path, from, to) = change;
        return vec![format!("arg {}: type {from} -> {to}", at(&path))];
    }
    let (o, n) = (untyped(old), untyped(new));
    if o.len() != n.len() || o.iter().zip(&n).any(|(a, b)| a.0 != b.0) {
        return vec![format!("arg {name}: structure ({}) -> ({})", join(&o), join(&n))];
    }
    let changed = o.iter().zip(&n).filter(|(a, b)| a.1 != b.1);
    let mut reasons: Vec<String> = changed.map(|((path, po), (_, pn))| format!("arg {}: {}", at(path), part_change(po, pn))).collect();
    reasons.extend(
        identity_changes(old, new)
            .into_iter()
            .map(|path| format!("arg {}: holds other tensors (a #[graph_arg(skip)] field is read as captures, bound when traced)", at(&path))),
    );
    reasons
}

/// The skipped fields whose tensors are other tensors than the old key's (by field path,
/// each once).
fn identity_changes(old: &[Labeled], new: &[Labeled]) -> Vec<String> {
    let ids = |parts: &[Labeled]| parts.iter().filter(|p| matches!(p.1, Part::Identity(_))).cloned().collect::<Vec<Labeled>>();
    let (o, n) = (ids(old), ids(new));
    let mut paths: Vec<String> = Vec::new();
    for (path, _) in n.iter().filter(|p| !o.contains(p)).chain(o.iter().filter(|p| !n.contains(p))) {
        if !paths.contains(path) {
            paths.push(path.clone());
        }
    }
    paths
}

/// The first type that differs between two decodings of an argument, in order: its field
/// path (`body.1` for a `Sequential`'s second layer) and the two short type names. Types
/// added or dropped at the end (a longer chain) are a change of structure instead.
fn type_change(types: &[(u64, &str)], old: &[Labeled], new: &[Labeled]) -> Option<(String, String, String)> {
    let type_name = |h: u64| types.iter().find(|(k, _)| *k == h).map_or_else(|| format!("#{h:016x}"), |(_, n)| short_type(n));
    let typed = |parts: &[Labeled]| parts.iter().filter_map(|(path, p)| p.type_hash().map(|h| (path.clone(), h))).collect::<Vec<_>>();
    let (ot, nt) = (typed(old), typed(new));
    ot.iter().zip(&nt).find(|(o, n)| o.1 != n.1).map(|(o, n)| (o.0.clone(), type_name(o.1), type_name(n.1)))
}

/// The parts that are not type names or identities.
fn untyped(parts: &[Labeled]) -> Vec<&Labeled> {
    parts.iter().filter(|p| p.1.is_shown()).collect()
}

fn part_change(old: &Part, new: &Part) -> String {
    match (old, new) {
        (
            Part::Tensor { dtype: a, shape: sa, requires_grad: ra, device: da },
            Part::Tensor { dtype: b, shape: sb, requires_grad: rb, device: db },
        ) => {
            let mut what = Vec::new();
            if da != db {
                what.push(format!("device {da} -> {db}"));
            }
            if a != b {
                what.push(format!("dtype {a} -> {b}"));
            }
            if sa != sb {
                what.push(format!("shape {sa} -> {sb}"));
            }
            if ra != rb {
                what.push(format!("requires_grad {ra} -> {rb}"));
            }
            what.join(", ")
        }
        // Unequal values whose `Debug` text is the same (or the same once cut).
        (Part::Static(a), Part::Static(b)) if a.text() == b.text() => format!("{a} -> a different value with the same Debug text"),
        _ => format!("{old} -> {new}"),
    }
}

/// `step<f32>::{{closure}}::{{closure}}` as `step<f32>`.
fn instantiation_name(mut name: &str) -> String {
    while let Some(rest) = name.strip_suffix("::{{closure}}") {
        name = rest;
    }
    name.to_string()
}

/// `alloc::vec::Vec<tensor_core::Tensor>` as `Vec<Tensor>` (and `<a::M as a::Tr<f32>>::m`
/// as `<M as Tr<f32>>::m`).
fn short_type(full: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for c in full.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            if word.starts_with("::") {
                out.push_str("::");
            }
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            if c != ' ' || !out.is_empty() {
                out.push(c);
            }
        }
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::super::describe::describe;
    use super::super::flattener::Flattener;
    use super::super::signature::Signature;
    use super::*;
    use crate::dtype::DType;
    use crate::tensor::Tensor;

    #[test]
    fn a_change_of_device_is_named() {
        use crate::device::Device;
        let on = |device| Part::Tensor { dtype: DType::F32, shape: crate::shape::Shape::from(vec![2]), requires_grad: false, device };
        assert_eq!(part_change(&on(Device::Cpu), &on(Device::Cuda(0))), "device cpu -> cuda:0");
        assert_eq!(on(Device::Cuda(1)).to_string(), "f32[2] on cuda:1");
    }

    fn sig(f: impl FnOnce(&mut Flattener)) -> Signature {
        let mut fl = Flattener::new();
        f(&mut fl);
        fl.finish()
    }

    #[test]
    fn decodes_and_explains_changes() {
        let a = sig(|f| {
            f.arg();
            f.tensor(&Tensor::zeros(&[2], DType::I32));
            f.arg();
            f.int(1);
            f.arg();
            f.str("relu");
        });
        let b = sig(|f| {
            f.arg();
            f.tensor(&Tensor::zeros(&[3], DType::F32));
            f.arg();
            f.int(2);
            f.arg();
            f.str("tanh");
        });
        let reasons = explain(&["x", "n", "act"], &[], a.key_ref(), b.key_ref());
        assert_eq!(reasons, vec!["arg x: dtype i32 -> f32, shape [2] -> [3]", "arg n: 1 -> 2", "arg act: \"relu\" -> \"tanh\""]);
        assert_eq!(describe(&["x", "n", "act"], a.key_ref()), "x: i32[2], n: 1, act: \"relu\"");
    }

    #[test]
    fn fields_name_leaves_and_reasons() {
        let batch = |step: i64| {
            sig(|f| {
                f.arg();
                f.field("x");
                f.tensor(&Tensor::zeros(&[2], DType::F32));
                f.end_field();
                f.field("inner");
                f.field("step");
                f.int(step);
                f.end_field();
                f.field("w");
                f.tensor(&Tensor::zeros(&[2], DType::F32));
                f.end_field();
                f.end_field();
                f.arg();
                f.tensor(&Tensor::zeros(&[1], DType::F32));
                f.tensor(&Tensor::zeros(&[1], DType::F32));
            })
        };
        let (a, b) = (batch(1), batch(2));
        assert_eq!(a.leaf_names(&["batch", "xs"]), ["batch.x", "batch.inner.w", "xs_0", "xs_1"]);
        assert_eq!(explain(&["batch", "xs"], &[], a.key_ref(), b.key_ref()), ["arg batch.inner.step: 1 -> 2"]);
        assert_eq!(describe(&["batch", "xs"], a.key_ref()), "batch: (x: f32[2], inner.step: 1, inner.w: f32[2]), xs: (f32[1], f32[1])");
    }

    #[test]
    fn type_changes_are_reported_by_short_name() {
        let a = sig(|f| {
            f.arg();
            f.type_name("tensor_core::tensor::Tensor");
            f.tensor(&Tensor::zeros(&[], DType::I32));
        });
        let b = sig(|f| {
            f.arg();
            f.type_name("i32");
            f.int(1);
        });
        let types = [a.type_names[0], b.type_names[0]];
        assert_eq!(explain(&["x"], &types, a.key_ref(), b.key_ref()), vec!["arg x: type Tensor -> i32"]);
        assert_eq!(short_type("alloc::vec::Vec<tensor_core::tensor::Tensor>"), "Vec<Tensor>");
        assert_eq!(short_type(&instantiation_name("t::foo<i32, 4>::{{closure}}::{{closure}}")), "foo<i32, 4>");
        assert_eq!(short_type(&instantiation_name("<t::M as t::Tr<f32>>::m::{{closure}}")), "<M as Tr<f32>>::m");
    }

    /// A value whose `Hash` ignores it: every value hashes alike.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Colliding(u32, &'static str);

    impl std::hash::Hash for Colliding {
        fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
    }

    #[test]
    fn static_values_are_shown_and_compared_by_value() {
        let with = |v: Colliding| {
            sig(|f| {
                f.arg();
                f.field("mode");
                f.static_value(&v);
                f.end_field();
            })
        };
        let (a, b) = (with(Colliding(1, "x")), with(Colliding(2, "x")));
        assert_eq!(a.key.words, b.key.words, "the hashes collide");
        assert_eq!(explain(&["cfg"], &[], a.key_ref(), b.key_ref()), ["arg cfg.mode: Colliding(1, \"x\") -> Colliding(2, \"x\")"]);
        assert_eq!(describe(&["cfg"], a.key_ref()), "cfg: (mode: Colliding(1, \"x\"))");
        assert!(explain(&["cfg"], &[], a.key_ref(), with(Colliding(1, "x")).key_ref()).is_empty());
    }

    #[test]
    fn unequal_values_with_one_debug_text_still_read_as_a_change() {
        #[derive(Clone, PartialEq, Eq, Hash)]
        struct Opaque(u8);
        impl std::fmt::Debug for Opaque {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("Opaque")
            }
        }
        let (a, b) = (sig(|f| f.static_value(&Opaque(1))), sig(|f| f.static_value(&Opaque(2))));
        assert_eq!(explain(&["o"], &[], a.key_ref(), b.key_ref()), ["arg o: Opaque -> a different value with the same Debug text"]);
    }

    #[test]
    fn a_changed_grad_mode_is_named_after_the_arguments() {
        let x = |n: usize| {
            move |f: &mut Flattener| {
                f.arg();
                f.tensor(&Tensor::zeros(&[n], DType::F32));
            }
        };
        let (on, off) = (sig(x(2)), crate::autograd::no_grad(|| sig(x(2))));
        assert_eq!(explain(&["x"], &[], on.key_ref(), off.key_ref()), ["grad mode: enabled -> disabled"]);
        assert_eq!(explain(&["x"], &[], off.key_ref(), on.key_ref()), ["grad mode: disabled -> enabled"]);
        let wider = crate::autograd::no_grad(|| sig(x(3)));
        assert_eq!(explain(&["x"], &[], on.key_ref(), wider.key_ref()), ["arg x: shape [2] -> [3]", "grad mode: enabled -> disabled"]);
        assert!(explain(&["x"], &[], off.key_ref(), off.key_ref()).is_empty());
        assert_eq!(describe(&["x"], on.key_ref()), "x: f32[2]");
        assert_eq!(describe(&["x"], off.key_ref()), "x: f32[2] (grad mode disabled)");
        assert!(on.erased() != off.erased() && on.rank_erased() != off.rank_erased(), "a relaxed trace serves its own grad mode only");
    }
}
