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
/// (`layers.0.weight`), the layers of an [`nn::Sequential`](crate::nn::Sequential) by
/// position (`body.0.weight`, `body.2.bias`), an `Option` that is `None` contributing
/// nothing — the same names a graph function's signature gives its arguments' leaves. Two
/// leaves under one name get `_0`, `_1` appended. Fields marked `#[graph_arg(static)]` hold no
/// entries, nor do `#[graph_arg(skip)]` fields — but a skipped field holding tensors that
/// require grad which no other field holds is an `Err` ([`Error::SkippedParameters`]): those
/// parameters would be missing from every checkpoint.
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
/// let saved = net.state_dict()?;
/// let names: Vec<&str> = saved.iter().map(|(n, _)| n.as_str()).collect();
/// assert_eq!(names, ["layers.0", "layers.1", "scale"]);
///
/// net.scale.mul_(5.0)?;
/// net.load_state_dict(&saved)?; // back to the saved values, in place
/// assert_eq!(net.scale.item::<f32>()?, 2.0);
///
/// let partial = vec![("scale".to_string(), Tensor::scalar(7.0f32))];
/// let err = net.load_state_dict(&partial).unwrap_err(); // strict: every name must be there
/// assert!(err.to_string().contains("2 missing keys: `layers.0`, `layers.1`"), "{err}");
/// let keys = net.load_state_dict_non_strict(&partial)?; // loads `scale`, returns the rest
/// assert_eq!((keys.missing, net.scale.item::<f32>()?), (vec!["layers.0".to_string(), "layers.1".to_string()], 7.0));
/// # Ok::<(), tensor_core::Error>(())
/// ```
pub trait StateDict {
    /// The named tensors: snapshots of the values (copy-on-write, so later updates of the
    /// model do not change them), in flattening order. `Err` only for a skipped field that
    /// holds parameters (see above).
    fn state_dict(&self) -> Result<Vec<(String, Tensor)>>;

    /// Replaces the values of this value's tensors by those of `named`, matched by name.
    /// Strict, as PyTorch's default: every tensor of the model must have an entry and every
    /// entry must name one — else an `Err` listing every missing and unexpected name
    /// ([`Error::StateDictKeys`]) — and each must have its tensor's dtype and shape (an `Err`
    /// naming the first that does not). Everything is checked first: after an `Err`
    /// nothing has changed. The tensors keep their identity (handles to them stay valid,
    /// `requires_grad` and `.grad` are untouched); like an in-place update, each one's
    /// version counter moves.
    fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()>;

    /// Loads the entries of `named` whose names are the model's and returns the names that
    /// did not match, as PyTorch's `load_state_dict(strict=False)`: the model's tensors
    /// without an entry keep their values. A matched entry of another dtype or shape is
    /// still an `Err`, and nothing changes then.
    fn load_state_dict_non_strict(&mut self, named: &[(String, Tensor)]) -> Result<IncompatibleKeys>;
}

/// The names a non-strict load did not match (PyTorch's `_IncompatibleKeys`).
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::io::{IncompatibleKeys, StateDict};
/// let mut w = Tensor::zeros(&[2], DType::F32);
/// let keys = w.load_state_dict_non_strict(&[("bias".to_string(), Tensor::ones(&[2], DType::F32))])?;
/// assert_eq!(keys, IncompatibleKeys { missing: vec!["".to_string()], unexpected: vec!["bias".to_string()] });
/// assert!(!keys.is_empty());
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncompatibleKeys {
    /// The model's tensors that had no entry (left as they were), in flattening order.
    pub missing: Vec<String>,
    /// The entries that name no tensor of the model (not loaded), in the order given.
    pub unexpected: Vec<String>,
}

impl IncompatibleKeys {
    /// True when every name matched.
    ///
    /// ```
    /// assert!(tensor_core::io::IncompatibleKeys::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty()
    }
}

impl<T: GraphArg + ?Sized> StateDict for T {
    fn state_dict(&self) -> Result<Vec<(String, Tensor)>> {
        Ok(named_leaves("state_dict", self)?.into_iter().map(|(name, t)| (name, t.detach())).collect())
    }

    fn load_state_dict(&mut self, named: &[(String, Tensor)]) -> Result<()> {
        assign_named("load_state_dict", &named_leaves("load_state_dict", self)?, named)
    }

    fn load_state_dict_non_strict(&mut self, named: &[(String, Tensor)]) -> Result<IncompatibleKeys> {
        const OP: &str = "load_state_dict_non_strict";
        assign(OP, &named_leaves(OP, self)?, named, false)
    }
}

/// The tensor leaves of `value` with their names (live handles); `Err` when a skipped field
/// holds parameters that would be left out.
fn named_leaves<T: GraphArg + ?Sized>(op: &'static str, value: &T) -> Result<Vec<(String, Tensor)>> {
    let mut f = Flattener::new();
    value.flatten(&mut f);
    let sig = f.finish();
    let hidden = sig.hidden_fields(None);
    if !hidden.is_empty() {
        return Err(Error::SkippedParameters { op: op.to_string(), fields: hidden });
    }
    Ok(sig.leaf_paths().into_iter().zip(sig.leaves.iter().cloned()).collect())
}

/// Loads `named` into `targets` (live handles with their names), strictly: see
/// [`StateDict::load_state_dict`].
pub(crate) fn assign_named(op: &'static str, targets: &[(String, Tensor)], named: &[(String, Tensor)]) -> Result<()> {
    assign(op, targets, named, true).map(drop)
}

/// Loads the entries of `named` that name a target: checks them all (names given once, the
/// target's dtype and shape; under `strict`, no name missing or unexpected), then replaces
/// the values; returns the names that did not match.
fn assign(op: &'static str, targets: &[(String, Tensor)], named: &[(String, Tensor)], strict: bool) -> Result<IncompatibleKeys> {
    if crate::trace::is_active() {
        return Err(Error::invalid(op, "self", "cannot load tensors while a graph function is being traced; load them before calling it"));
    }
    let mut given: HashMap<&str, &Tensor> = HashMap::with_capacity(named.len());
    for (name, t) in named {
        if given.insert(name.as_str(), t).is_some() {
            return Err(mismatch(op, name, " is given twice".into()));
        }
    }
    let mut keys = IncompatibleKeys::default();
    let mut loads = Vec::with_capacity(targets.len());
    for (name, target) in targets {
        match given.remove(name.as_str()) {
            Some(source) => loads.push((name, target, source)),
            None => keys.missing.push(name.clone()),
        }
    }
    keys.unexpected = named.iter().filter(|(name, _)| given.contains_key(name.as_str())).map(|(name, _)| name.clone()).collect();
    if strict && !keys.is_empty() {
        return Err(Error::StateDictKeys { op, missing: keys.missing, unexpected: keys.unexpected });
    }
    let mut values = Vec::with_capacity(loads.len());
    for &(name, target, source) in &loads {
        if source.dtype() != target.dtype() || source.raw_shape() != target.0.shape {
            let (want, have) = (format!("{}{}", target.dtype(), target.0.shape), format!("{}{}", source.dtype(), source.raw_shape()));
            return Err(mismatch(op, name, format!(": the model has {want}, the tensor to load is {have}")));
        }
        values.push(source.storage(op)?);
    }
    for ((_, target, _), value) in loads.into_iter().zip(values) {
        target.set_value(Value::Concrete(value));
    }
    Ok(keys)
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
    fn names_follow_fields_elements_and_options() -> Result<()> {
        let names: Vec<String> = model(0).state_dict()?.into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "head.0", "head.1"]);
        Ok(())
    }

    #[test]
    fn loading_replaces_values_in_place_and_keeps_handles() -> Result<()> {
        let (mut a, b) = (model(0), model(10));
        let handle = a.blocks[1].weight.clone();
        let version = handle.version();
        a.load_state_dict(&b.state_dict()?)?;
        assert!(handle.same_as(&a.blocks[1].weight));
        assert!(handle.to_storage()?.bit_eq(&b.blocks[1].weight.to_storage()?));
        assert_eq!(a.head.1.to_vec::<i64>()?, vec![10]);
        assert!(handle.version() > version, "a load counts as an in-place update");
        Ok(())
    }

    #[test]
    fn a_snapshot_does_not_follow_later_updates() -> Result<()> {
        let m = model(0);
        let saved = m.state_dict()?;
        m.head.0.add_(1.0)?;
        assert!(!saved[3].1.to_storage()?.bit_eq(&m.head.0.to_storage()?));
        Ok(())
    }

    fn storages(m: &Model) -> Vec<Storage> {
        m.state_dict().unwrap().iter().map(|(_, t)| t.to_storage().unwrap()).collect()
    }

    #[test]
    fn every_mismatch_is_an_error_that_changes_nothing() {
        let mut a = model(0);
        let before = storages(&a);
        let good = model(5).state_dict().unwrap();
        let replace = |i: usize, t: Tensor| {
            let mut named = good.clone();
            named[i].1 = t;
            named
        };
        let extra = ("extra".to_string(), Tensor::scalar(1.0f32));
        let cases: Vec<(Vec<(String, Tensor)>, &str)> = vec![
            (good[1..].to_vec(), "1 missing key: `blocks.0.weight`; nothing was loaded"),
            ([&good[..1], &good[3..]].concat(), "2 missing keys: `blocks.0.bias`, `blocks.1.weight`; nothing"),
            (replace(2, Tensor::zeros(&[3, 2], DType::F32)), "`blocks.1.weight`: the model has f32[2, 3], the tensor to load is f32[3, 2]"),
            (replace(3, Tensor::zeros(&[3], DType::F32)), "`head.0`: the model has f64[3], the tensor to load is f32[3]"),
            ([good.clone(), vec![extra.clone()]].concat(), "load_state_dict: 1 unexpected key: `extra`; nothing"),
            ([&good[1..], &[extra]].concat(), "1 missing key: `blocks.0.weight`; 1 unexpected key: `extra`; nothing"),
            ([good.clone(), vec![good[0].clone()]].concat(), "`blocks.0.weight` is given twice"),
        ];
        for (named, expected) in cases {
            let err = a.load_state_dict(&named).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}\nexpected: {expected}");
            assert!(before.iter().zip(&storages(&a)).all(|(x, y)| x.bit_eq(y)), "nothing changed after: {err}");
        }
    }

    #[test]
    fn a_non_strict_load_takes_the_names_that_match_and_returns_the_others() -> Result<()> {
        let (mut a, b) = (model(0), model(5));
        let (before, wanted) = (storages(&a), storages(&b));
        let good = b.state_dict()?;
        let named = [&good[..2], &good[3..], &[("extra".to_string(), Tensor::scalar(1.0f32))]].concat();
        let keys = a.load_state_dict_non_strict(&named)?;
        assert_eq!(keys, IncompatibleKeys { missing: vec!["blocks.1.weight".into()], unexpected: vec!["extra".into()] });
        let after = storages(&a);
        for i in [0, 1, 3, 4] {
            assert!(after[i].bit_eq(&wanted[i]), "entry {i} is loaded");
        }
        assert!(after[2].bit_eq(&before[2]), "the missing one keeps its value");
        // A matched entry of another shape is still an error, and changes nothing.
        let wrong = vec![good[0].clone(), ("blocks.0.bias".to_string(), Tensor::zeros(&[4], DType::F32))];
        let err = a.load_state_dict_non_strict(&wrong).unwrap_err();
        assert!(err.to_string().contains("`blocks.0.bias`: the model has f32[3], the tensor to load is f32[4]"), "{err}");
        assert!(after.iter().zip(&storages(&a)).all(|(x, y)| x.bit_eq(y)));
        Ok(())
    }

    /// A model that skips a field holding parameters no other field holds.
    #[derive(GraphArg)]
    struct Hiding {
        w: Tensor,
        #[graph_arg(skip)]
        head: Block,
        #[graph_arg(skip)]
        again: Vec<Tensor>,
        #[graph_arg(skip)]
        count: usize,
    }

    #[test]
    fn a_skipped_field_holding_parameters_is_an_error_not_an_omission() -> Result<()> {
        let param = |s| Tensor::randn(&[2], DType::F32, s).requires_grad_(true).unwrap();
        let w = param(0);
        let hiding = |head_weight: Tensor| Hiding { w: w.clone(), head: Block { weight: head_weight, bias: None }, again: vec![w.clone()], count: 3 };
        // `head.weight` requires grad and no other field holds it: an error for every state dict use.
        let mut m = hiding(param(1));
        let expected = "field `head` is #[graph_arg(skip)] but holds tensors that require grad";
        let err = m.state_dict().unwrap_err();
        assert!(err.to_string().starts_with(&format!("state_dict: {expected}")), "{err}");
        let err = m.load_state_dict(&[("w".to_string(), param(2))]).unwrap_err();
        assert!(err.to_string().starts_with(&format!("load_state_dict: {expected}")), "{err}");
        assert!(m.load_state_dict_non_strict(&[]).is_err());
        // Tensors that do not require grad, and parameters another field holds (`again` holds
        // `w`, as an optimizer field holds the model's parameters), are fine to skip.
        let m = hiding(Tensor::zeros(&[2], DType::F32));
        assert_eq!(m.state_dict()?.len(), 1);
        Ok(())
    }

    use crate::storage::Storage;
}
