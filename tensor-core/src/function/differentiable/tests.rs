//! What a call's node keeps for its backward is freed as an eager body's saved tensors are.

use crate::function::ConcreteFunction;
use crate::storage::Storage;
use crate::tensor::{Tensor, Value};
use std::sync::Arc;

/// Whether `t`'s data has no other holder (a residual kept by a node is one).
fn data_is_unshared(t: &Tensor) -> bool {
    match &*t.read_value() {
        Value::Concrete(Storage::F64(a)) => a.is_unique(),
        _ => panic!("an f64 tensor"),
    }
}

#[test]
fn a_backward_without_retain_graph_frees_the_slots_and_residuals_a_call_kept() -> crate::error::Result<()> {
    let x = Tensor::from_vec(vec![0.5f64, -1.0], &[2])?.requires_grad_(true)?;
    let h = x.mul(2.0)?;
    let f = ConcreteFunction::trace("scaled_exp", &[("h", &h)], || Ok(vec![h.mul(&h)?.exp()?]))?;
    let run = |retain: bool| -> crate::error::Result<(bool, bool)> {
        let h = x.mul(2.0)?;
        let y = f.call(&[&h])?.remove(0);
        let slot = Arc::downgrade(&h.0);
        drop(h);
        // `exp` saves its output: the node keeps y's data as a residual, and `mul` reads h.
        assert!(!data_is_unshared(&y) && slot.upgrade().is_some());
        let opts = crate::autograd::BackwardOptions { retain_graph: Some(retain), create_graph: false };
        y.backward_opts(Some(&Tensor::ones(&[2], crate::dtype::DType::F64)), opts)?;
        Ok((data_is_unshared(&y), slot.upgrade().is_none()))
    };
    assert_eq!(run(false)?, (true, true));
    assert_eq!(run(true)?, (false, false));
    // d/dx exp((2x)^2) = 8x exp(4x^2), summed over both runs.
    let want: Vec<f64> = [0.5f64, -1.0].iter().map(|v| 2.0 * 8.0 * v * (4.0 * v * v).exp()).collect();
    let got = x.grad().unwrap().to_vec::<f64>()?;
    assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-12 * w.abs()), "{got:?} vs {want:?}");
    Ok(())
}
