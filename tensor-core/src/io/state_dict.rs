//! State dicts: the named tensors of a `GraphArg` value, named as its signature names its
//! leaves, and loading named tensors into it — all checked first, then all replaced.

use crate::error::{Error, Result};
use crate::function::{Flattener, GraphArg};
use crate::tensor::{Tensor, Value};
use std::collections::HashMap;

/// Named tensors of a model: what it saves and loads (PyTorch's `state_dict()`).
///
/// Implemented for every [`GraphArg`] type: the names are the label paths its flattening
/// gives each tensor leaf — struct fields by name, `Vec`, array and tuple elements by index
/// (`layers.0.weight`), an `Option` that is `None` contributing nothing — the same names a
/// graph function's signature gives its arguments' leaves. Two leaves under one name get
/// `_0`, `_1` appended. Fields marked `#[graph_arg(skip)]` or `static` hold no entries.
///
/// Optimizers have state dicts of their own (`Adam::state_dict`), inherent methods that
/// take precedence over this trait's for them.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::io::StateDict;
/// #[derive(GraphArg)]
/// struct Net {
///     layers: Vec<Tensor>,
///     scale: Tensor,
/// }
/// let mut net = Net { layers: vec![Tensor::ones(&[2], DType::F32), Tensor::ones(&[3], DType::F32)], scale: Tensor::scalar(2.0f32) };
/// let saved = net.state_dict();
/// let names: Vec<&str> = saved.iter().map(|(n, _)| n.as_str()).collect();
/// assert_eq!(names, ["layers.0", "layers.1", "scale"]);
///
/// net.scale.mul_(5.0)?;
/// net.load_state_dict(&saved)?; // back to the saved values, in place
/// assert_eq!(net.scale.item::<f32>()?, 2.0);
///
/// let wrong = vec![("scale".to_string(), Tensor::scalar(1.0f64))];
/// let err = net.load_state_dict(&wrong).unwrap_err();
/// assert!(err.to_string().contains("layers.0"), "{err}"); // the first problem: a missing name
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait StateDict {
    /// The named tensors: snapshots of the values (copy-on-write, so later updates of the
    /// model do not change them), in flattening order.
    fn state_dict(&self) -> Vec<(String, Tensor)>;

    /// Replaces the values of this value's tensors by those of `named`, matched by name.
    /// Every name, dtype and shape is checked first: a missing or unexpected name, or
    /// another dtype or shape, is an `Err` naming the first mismatch, and nothing changes.
    /// The tensors keep their identity (handles to them stay valid, `requires_grad` and
    /// `.grad` are untouched); like an in-place update, each one's version counter moves.
    fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()>;
}

impl<T: GraphArg + ?Sized> StateDict for T {
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        named_leaves(self).into_iter().map(|(name, t)| (name, t.detach())).collect()
    }

    fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        assign_named("load_state_dict", &named_leaves(self), named)
    }
}

/// The tensor leaves of `value` with their names (live handles).
fn named_leaves<T: GraphArg + ?Sized>(value: &T) -> Vec<(String, Tensor)> {
    let mut f = Flattener::new();
    value.flatten(&mut f);
    let sig = f.finish();
    sig.leaf_paths().into_iter().zip(sig.leaves.iter().cloned()).collect()
}

/// Loads `named` into `targets` (live handles with their names): checks every target has
/// an entry of its dtype and shape and that there are no others, then replaces the values.
pub(crate) fn assign_named(op: &'static str, targets: &[(String, Tensor)], named: &[(String, Tensor)]) -> Result<()> {
    if crate::trace::is_active() {
        return Err(Error::invalid(op, "self", "cannot load tensors while a graph function is being traced; load them before calling it"));
    }
    let mut given: HashMap<&str, &Tensor> = HashMap::with_capacity(named.len());
    for (name, t) in named {
        if given.insert(name.as_str(), t).is_some() {
            return Err(mismatch(op, name, " is given twice".into()));
        }
    }
    let mut values = Vec::with_capacity(targets.len());
    for (name, target) in targets {
        let Some(source) = given.remove(name.as_str()) else {
            return Err(mismatch(op, name, " is missing (the model has it, the tensors to load do not)".into()));
        };
        if source.dtype() != target.dtype() || source.shape() != target.0.shape {
            let (want, have) = (format!("{}{}", target.dtype(), target.0.shape), format!("{}{}", source.dtype(), source.shape()));
            return Err(mismatch(op, name, format!(": the model has {want}, the tensor to load is {have}")));
        }
        values.push(source.storage(op)?);
    }
    if let Some((name, _)) = named.iter().find(|(name, _)| given.contains_key(name.as_str())) {
        return Err(mismatch(op, name, " is not a tensor of the model (unexpected name)".into()));
    }
    for ((_, target), value) in targets.iter().zip(values) {
        target.set_value(Value::Concrete(value));
    }
    Ok(())
}

fn mismatch(op: &'static str, name: &str, problem: String) -> Error {
    Error::StateDict { op, name: name.to_string(), problem }
}

/// The entries with `prefix.` put before their names: to keep several state dicts in one
/// checkpoint.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::io::{prefixed, unprefixed};
/// let named = prefixed("model", vec![("w".into(), Tensor::scalar(1.0f32))]);
/// assert_eq!(named[0].0, "model.w");
/// assert_eq!(unprefixed("model", &named)[0].0, "w");
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn prefixed(prefix: &str, named: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    named.into_iter().map(|(name, t)| (format!("{prefix}.{name}"), t)).collect()
}

/// The entries whose names start with `prefix.`, with it removed (the others are left out).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::io::unprefixed;
/// let named = vec![("model.w".to_string(), Tensor::scalar(1.0f32)), ("optimizer.state.0.step".to_string(), Tensor::scalar(3.0f64))];
/// let model = unprefixed("model", &named);
/// assert_eq!((model.len(), model[0].0.as_str()), (1, "w"));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub fn unprefixed(prefix: &str, named: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    let start = format!("{prefix}.");
    named.iter().filter_map(|(name, t)| name.strip_prefix(&start).map(|rest| (rest.to_string(), t.clone()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    #[derive(GraphArg)]
    struct Block {
        weight: Tensor,
        bias: Option<Tensor>,
    }

    #[derive(GraphArg)]
    struct Model {
        blocks: Vec<Block>,
        head: (Tensor, Tensor),
        #[graph_arg(static)]
        name: String,
    }

    fn model(seed: u64) -> Model {
        let block =
            |s: u64, bias: bool| Block { weight: Tensor::randn(&[2, 3], DType::F32, s), bias: bias.then(|| Tensor::randn(&[3], DType::F32, s + 1)) };
        Model {
            blocks: vec![block(seed, true), block(seed + 2, false)],
            head: (Tensor::randn(&[3], DType::F64, seed + 4), Tensor::from_vec(vec![seed as i64], &[1]).unwrap()),
            name: "m".into(),
        }
    }

    #[test]
    fn names_follow_fields_elements_and_options() {
        let names: Vec<String> = model(0).state_dict().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "head.0", "head.1"]);
    }

    #[test]
    fn loading_replaces_values_in_place_and_keeps_handles() -> Result<()> {
        let (mut a, b) = (model(0), model(10));
        let handle = a.blocks[1].weight.clone();
        let version = handle.version();
        a.load_state_dict(&b.state_dict())?;
        assert!(handle.same_as(&a.blocks[1].weight));
        assert!(handle.to_storage()?.bit_eq(&b.blocks[1].weight.to_storage()?));
        assert_eq!(a.head.1.to_vec::<i64>()?, vec![10]);
        assert!(handle.version() > version, "a load counts as an in-place update");
        Ok(())
    }

    #[test]
    fn a_snapshot_does_not_follow_later_updates() -> Result<()> {
        let m = model(0);
        let saved = m.state_dict();
        m.head.0.add_(1.0)?;
        assert!(!saved[3].1.to_storage()?.bit_eq(&m.head.0.to_storage()?));
        Ok(())
    }

    #[test]
    fn every_mismatch_is_an_error_that_changes_nothing() {
        let mut a = model(0);
        let before: Vec<Storage> = a.state_dict().iter().map(|(_, t)| t.to_storage().unwrap()).collect();
        let good = model(5).state_dict();
        let replace = |i: usize, t: Tensor| {
            let mut named = good.clone();
            named[i].1 = t;
            named
        };
        let cases: Vec<(Vec<(String, Tensor)>, &str)> = vec![
            (good[1..].to_vec(), "`blocks.0.weight` is missing"),
            (replace(2, Tensor::zeros(&[3, 2], DType::F32)), "`blocks.1.weight`: the model has f32[2, 3], the tensor to load is f32[3, 2]"),
            (replace(3, Tensor::zeros(&[3], DType::F32)), "`head.0`: the model has f64[3], the tensor to load is f32[3]"),
            ([good.clone(), vec![("extra".into(), Tensor::scalar(1.0f32))]].concat(), "`extra` is not a tensor of the model"),
            ([good.clone(), vec![good[0].clone()]].concat(), "`blocks.0.weight` is given twice"),
        ];
        for (named, expected) in cases {
            let err = a.load_state_dict(&named).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}\nexpected: {expected}");
            let after: Vec<Storage> = a.state_dict().iter().map(|(_, t)| t.to_storage().unwrap()).collect();
            assert!(before.iter().zip(&after).all(|(x, y)| x.bit_eq(y)), "nothing changed after: {err}");
        }
    }

    use crate::storage::Storage;
}
