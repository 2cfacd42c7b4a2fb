//! Grad nodes free what they saved: the data's reference counts, visible only inside the
//! crate (the public API does not expose the arrays).

use crate::prelude::*;
use crate::storage::Array;

fn leaf_vec(v: &[f64], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), dims).unwrap().requires_grad_(true).unwrap()
}

/// Another handle to the data of `t` (an `Arc`): `is_unique()` says whether anything else
/// still holds that data.
fn data_of(t: &Tensor) -> Array<f64> {
    t.to_storage().unwrap().array::<f64>().unwrap().clone()
}

#[test]
fn dropping_the_output_frees_the_graph() {
    let x = leaf_vec(&[1.0, 2.0, 3.0], &[3]);
    let c = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    let c_data = data_of(&c);
    let y = (&x * &c).tanh().unwrap().add(1.0).unwrap().sum().unwrap();
    drop(c);
    assert!(!c_data.is_unique(), "MulBackward keeps the tensor it saved");
    drop(y);
    assert!(c_data.is_unique(), "dropping the output frees its grad nodes and what they saved");
}

#[test]
fn a_grad_fn_does_not_keep_its_tensor_alive() {
    let x = leaf_vec(&[1.0, 2.0, 3.0], &[3]);
    let c = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    let c_data = data_of(&c);
    let y = &x * &c;
    drop(c);
    let y_data = data_of(&y);
    let f = y.grad_fn().unwrap();
    drop(y);
    assert!(y_data.is_unique(), "the grad node must not hold its output (no Arc cycle)");
    assert_eq!(f.name(), "MulBackward");
    assert!(!c_data.is_unique(), "the handle keeps the node, and the node what it saved");
    drop(f);
    assert!(c_data.is_unique());

    // An op that saves its output keeps the output's data, not the tensor.
    let y = x.exp().unwrap();
    let y_data = data_of(&y);
    let f = y.grad_fn().unwrap();
    drop(y);
    assert!(!y_data.is_unique());
    drop(f);
    assert!(y_data.is_unique());

    // Nor after an in-place op that reads the target twice.
    let y = &x * 2.0;
    y.mul_(&y).unwrap();
    let y_data = data_of(&y);
    drop(y);
    assert!(y_data.is_unique(), "y.mul_(&y) must not make y's grad node hold y");
}

#[test]
fn backward_frees_saved_tensors_unless_retain_graph() {
    let x = leaf_vec(&[1.0, 2.0, 3.0], &[3]);
    let c = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    let c_data = data_of(&c);
    let y = (&x * &c).sum().unwrap();
    drop(c);
    y.backward_opts(None, crate::autograd::BackwardOptions { retain_graph: Some(true), create_graph: false }).unwrap();
    assert!(!c_data.is_unique(), "retain_graph keeps the saved tensors");
    y.backward().unwrap();
    assert!(c_data.is_unique(), "backward frees the saved tensors while the output lives on");
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![1.0, -2.0, 4.0]);
}
