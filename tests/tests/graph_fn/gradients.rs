//! Gradients through graph calls: a `#[graph_fn]` (or `ConcreteFunction`) call whose inputs
//! require grad is differentiable from outside, with the bits the eager body gives; its
//! backward is a traced, cached graph; higher order, version counters, introspection, and a
//! graph forward inside an eager training loop.

use tensor_core::function::{lookup, ConcreteFunction};
use tensor_core::prelude::*;

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
}

fn param(dims: &[usize], seed: u64) -> Tensor {
    (Tensor::randn(dims, DType::F32, seed) * 0.5).requires_grad_(true).unwrap()
}

fn mlp_loss_eager(w1: &Tensor, w2: &Tensor, x: &Tensor) -> Result<Tensor> {
    x.matmul(w1)?.tanh()?.matmul(w2)?.exp()?.mul(&x.sum()?)?.mean()
}

#[graph_fn]
fn mlp_loss(w1: &Tensor, w2: &Tensor, x: &Tensor) -> Result<Tensor> {
    mlp_loss_eager(w1, w2, x)
}

#[test]
fn backward_through_a_graph_call_gives_the_eager_gradients_bit_for_bit() -> Result<()> {
    let (w1, w2, x) = (param(&[4, 8], 1), param(&[8, 3], 2), Tensor::randn(&[5, 4], DType::F32, 3));
    let eager = mlp_loss_eager(&w1, &w2, &x)?;
    eager.backward()?;
    let (g1, g2) = (w1.grad().unwrap(), w2.grad().unwrap());
    w1.zero_grad()?;
    w2.zero_grad()?;

    let loss = mlp_loss(&w1, &w2, &x)?;
    assert_eq!(bits(&loss), bits(&eager));
    assert!(loss.requires_grad() && !loss.is_leaf());
    assert_eq!(loss.grad_fn().unwrap().name(), "mlp_lossBackward");
    loss.backward()?;
    assert_eq!(bits(&w1.grad().unwrap()), bits(&g1));
    assert_eq!(bits(&w2.grad().unwrap()), bits(&g2));
    assert!(x.grad().is_none(), "x does not require grad");

    // Accumulation: a second call and backward add to .grad as eagerly.
    mlp_loss(&w1, &w2, &x)?.backward()?;
    let twice = g1.add(&g1)?;
    assert_eq!(bits(&w1.grad().unwrap()), bits(&twice));
    // The backward graph was traced once and reused.
    let f = lookup("mlp_loss").unwrap();
    let concrete = f.concrete_functions();
    assert_eq!(concrete[0].backward_functions().len(), 1);
    Ok(())
}

#[test]
fn grad_retain_grad_and_an_outside_use_of_the_input() -> Result<()> {
    let x = Tensor::from_vec(vec![0.5f32, -1.5, 2.0], &[3])?.requires_grad_(true)?;
    let w = param(&[3], 7);
    let (x_eager, w_eager) = (x.detach().requires_grad_(true)?, w.detach().requires_grad_(true)?);
    let run = |x: &Tensor, w: &Tensor, graph: bool| -> Result<(Tensor, Tensor)> {
        let y = if graph { mlp_like(x, w)? } else { mlp_like_eager(x, w)? };
        y.retain_grad()?;
        let loss = y.mul(x)?.sum()?; // x is also used outside the call
        Ok((y, loss))
    };
    let (ye, le) = run(&x_eager, &w_eager, false)?;
    le.backward()?;
    let (yg, lg) = run(&x, &w, true)?;
    assert_eq!(yg.grad_fn().unwrap().name(), "mlp_likeBackward");
    lg.backward()?;
    assert_eq!(bits(&yg.grad().unwrap()), bits(&ye.grad().unwrap()), "retain_grad on the call's output");
    // w is used inside the call only; x also outside it: the call hands on each inner use's
    // contribution apart, so the engine adds them in the eager order.
    assert_eq!(bits(&w.grad().unwrap()), bits(&w_eager.grad().unwrap()));
    assert_eq!(bits(&x.grad().unwrap()), bits(&x_eager.grad().unwrap()));

    // The functional grad(), with no .grad touched.
    w.zero_grad()?;
    let g = tensor_core::grad(&[&mlp_like(&x, &w)?.sum()?], &[&w], false)?;
    let ge = tensor_core::grad(&[&mlp_like_eager(&x, &w)?.sum()?], &[&w], false)?;
    assert_eq!(bits(&g[0]), bits(&ge[0]));
    assert!(w.grad().is_none());
    Ok(())
}

fn mlp_like_eager(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    x.mul(w)?.sigmoid()?.mul(x)
}

#[graph_fn]
fn mlp_like(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    mlp_like_eager(x, w)
}

#[test]
fn a_captured_parameter_gets_its_gradient() -> Result<()> {
    let w = param(&[3, 2], 11);
    let x = Tensor::randn(&[4, 3], DType::F32, 12);
    let f = ConcreteFunction::trace("affine", &[("x", &x)], || Ok(vec![x.matmul(&w)?.relu()?.sum()?]))?;
    let y = f.call(&[&x])?.remove(0);
    assert_eq!(y.grad_fn().unwrap().name(), "affineBackward");
    y.backward()?;
    let from_graph = w.grad().unwrap();
    w.zero_grad()?;
    x.matmul(&w)?.relu()?.sum()?.backward()?;
    assert_eq!(bits(&from_graph), bits(&w.grad().unwrap()));
    Ok(())
}

#[test]
fn no_grad_or_nothing_requiring_grad_records_nothing() -> Result<()> {
    let (w1, w2, x) = (param(&[4, 8], 21), param(&[8, 3], 22), Tensor::randn(&[5, 4], DType::F32, 23));
    let y = no_grad(|| mlp_loss(&w1, &w2, &x))?;
    assert!(!y.requires_grad() && y.grad_fn().is_none());
    assert!(matches!(y.backward(), Err(Error::NoGradFn { .. })));
    let (a, b) = (w1.detach(), w2.detach());
    let z = mlp_loss(&a, &b, &x)?;
    assert!(!z.requires_grad() && z.grad_fn().is_none());
    Ok(())
}

#[graph_fn]
fn cube(x: &Tensor) -> Result<Tensor> {
    x.mul(x)?.mul(x)
}

#[test]
fn second_derivative_of_x_cubed_through_a_graph_call() -> Result<()> {
    let x = Tensor::from_vec(vec![1.5f64, -2.0, 0.25], &[3])?.requires_grad_(true)?;
    let y = cube(&x)?.sum()?;
    let dy = tensor_core::grad(&[&y], &[&x], true)?.remove(0);
    assert_eq!(dy.to_vec::<f64>()?, vec![3.0 * 1.5 * 1.5, 3.0 * 4.0, 3.0 * 0.0625]);
    assert!(dy.requires_grad(), "create_graph: the gradient is differentiable");
    let d2 = tensor_core::grad(&[&dy.sum()?], &[&x], true)?.remove(0);
    assert_eq!(d2.to_vec::<f64>()?, vec![9.0, -12.0, 1.5]);
    let d3 = tensor_core::grad(&[&d2.sum()?], &[&x], false)?.remove(0);
    assert_eq!(d3.to_vec::<f64>()?, vec![6.0; 3]);
    // The same through eager code, bit for bit.
    let xe = x.detach().requires_grad_(true)?;
    let ye = xe.mul(&xe)?.mul(&xe)?.sum()?;
    let dye = tensor_core::grad(&[&ye], &[&xe], true)?.remove(0);
    let d2e = tensor_core::grad(&[&dye.sum()?], &[&xe], false)?.remove(0);
    assert_eq!(d2.to_vec::<f64>()?, d2e.to_vec::<f64>()?);
    Ok(())
}

#[graph_fn]
fn square_plus(x: &Tensor) -> Result<Tensor> {
    x.mul(x)?.sum()
}

#[graph_fn]
fn shifted_sum(x: &Tensor) -> Result<Tensor> {
    x.add(1.0)?.sum()
}

#[test]
fn an_input_changed_in_place_before_backward_is_the_eager_error() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
    let h = x.mul(2.0)?; // a non-leaf input, which may change in place
    let y = square_plus(&h)?;
    h.add_(1.0)?;
    let e = y.backward().unwrap_err();
    assert!(matches!(e, Error::SavedTensorModified { expected: 0, found: 1, .. }), "{e:?}");
    // Eagerly: the same error variant and versions.
    let he = x.mul(2.0)?;
    let ye = he.mul(&he)?.sum()?;
    he.add_(1.0)?;
    let ee = ye.backward().unwrap_err();
    assert!(matches!(ee, Error::SavedTensorModified { expected: 0, found: 1, .. }), "{ee:?}");
    assert!(x.grad().is_none(), "a failed backward changes no .grad");

    // A function whose backward does not read the input: fine both ways, as eagerly.
    let h = x.mul(2.0)?;
    let y = shifted_sum(&h)?;
    h.add_(1.0)?;
    y.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![2.0, 2.0]);
    Ok(())
}

#[test]
fn a_second_backward_without_retain_graph_is_the_released_error() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_(true)?;
    let y = square_plus(&x)?;
    y.backward()?;
    assert!(matches!(y.backward(), Err(Error::GraphReleased { .. })));
    let y = square_plus(&x)?;
    y.backward_opts(None, tensor_core::BackwardOptions { retain_graph: Some(true), create_graph: false })?;
    y.backward()?;
    Ok(())
}

#[graph_fn]
fn inner_layer(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    x.matmul(w)?.tanh()
}

#[graph_fn]
fn outer_net(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Result<Tensor> {
    let h = inner_layer(x, w1)?;
    inner_layer(&h, w2)?.sum()
}

#[test]
fn nested_graph_functions_inline_and_differentiate_as_one() -> Result<()> {
    let (w1, w2, x) = (param(&[3, 4], 31), param(&[4, 2], 32), Tensor::randn(&[2, 3], DType::F32, 33));
    let y = outer_net(&x, &w1, &w2)?;
    assert_eq!(y.grad_fn().unwrap().name(), "outer_netBackward");
    assert!(lookup("inner_layer").is_none_or(|f| f.trace_count() == 0), "the inner function was inlined");
    let g = lookup("outer_net").unwrap().concrete_functions()[0].traced_graph().count_op("matmul");
    assert_eq!(g, 2, "both inner calls are in the outer graph");
    y.backward()?;
    let (g1, g2) = (w1.grad().unwrap(), w2.grad().unwrap());
    w1.zero_grad()?;
    w2.zero_grad()?;
    x.matmul(&w1)?.tanh()?.matmul(&w2)?.tanh()?.sum()?.backward()?;
    assert_eq!(bits(&g1), bits(&w1.grad().unwrap()));
    assert_eq!(bits(&g2), bits(&w2.grad().unwrap()));
    Ok(())
}

#[derive(GraphArg)]
struct Net {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Net {
    fn new(seed: u64) -> Net {
        Net { w1: param(&[6, 16], seed), b1: param(&[16], seed + 1), w2: param(&[16, 3], seed + 2) }
    }

    fn loss_eager(&self, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
        x.matmul(&self.w1)?.add(&self.b1)?.relu()?.matmul(&self.w2)?.cross_entropy(labels)
    }

    #[graph_fn]
    fn loss(&self, x: &Tensor, labels: &Tensor) -> Result<Tensor> {
        self.loss_eager(x, labels)
    }

    fn params(&self) -> [&Tensor; 3] {
        [&self.w1, &self.b1, &self.w2]
    }
}

/// Eager backward and an eager SGD step after a forward computed by `forward`.
fn train(net: &Net, graph: bool, steps: usize) -> Result<Vec<u32>> {
    let mut losses = Vec::new();
    for step in 0..steps {
        let x = Tensor::randn(&[8, 6], DType::F32, 100 + step as u64);
        let labels = Tensor::from_vec((0..8).map(|i| ((i + step) % 3) as i64).collect(), &[8])?;
        let loss = if graph { net.loss(&x, &labels)? } else { net.loss_eager(&x, &labels)? };
        losses.push(loss.item::<f32>()?.to_bits());
        loss.backward()?;
        no_grad(|| -> Result<()> {
            for p in net.params() {
                p.sub_(&p.grad().unwrap().mul(0.1)?)?;
                p.zero_grad()?;
            }
            Ok(())
        })?;
    }
    Ok(losses)
}

#[test]
fn a_graph_forward_in_an_eager_training_loop_gives_the_eager_losses_bit_for_bit() -> Result<()> {
    let (eager, graph) = (Net::new(41), Net::new(41));
    let le = train(&eager, false, 6)?;
    let lg = train(&graph, true, 6)?;
    assert_eq!(le, lg);
    assert!(le[5] != le[0], "the loss changes as it trains");
    for (a, b) in eager.params().iter().zip(graph.params()) {
        assert_eq!(bits(a), bits(b));
    }
    let f = lookup("Net::loss").unwrap();
    assert_eq!(f.trace_count(), 1);
    assert_eq!(f.concrete_functions()[0].backward_functions().len(), 1, "one backward graph, reused by every step");
    Ok(())
}

#[graph_fn]
fn train_step_inside(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let loss = x.mul(w)?.sum()?;
    loss.backward()?;
    Ok(loss)
}

#[test]
fn a_graph_that_writes_a_grad_has_no_gradient_from_outside_and_says_so() -> Result<()> {
    let w = param(&[3], 51);
    let loss = train_step_inside(&w, &Tensor::ones(&[3], DType::F32))?;
    assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![1.0; 3], "the call accumulated into w.grad itself");
    // As eagerly the loss depends on w, so it requires grad; a backward from outside is an
    // error (eagerly too: the graph was released by the backward inside).
    assert!(loss.requires_grad());
    assert_eq!(loss.grad_fn().unwrap().name(), "train_step_insideBackward");
    let e = loss.backward().unwrap_err();
    assert!(matches!(e, Error::NotDifferentiable { .. }) && e.to_string().contains(".grad"), "{e}");
    assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![1.0; 3], "the failed backward changed nothing");
    let eager = train_step_inside_eager(&w, &Tensor::ones(&[3], DType::F32))?;
    assert!(matches!(eager.backward(), Err(Error::GraphReleased { .. })));
    // Under no_grad the step traces again and fails as eagerly: its loss has no history for
    // the backward() inside (grad mode is part of the key; see grad_mode.rs).
    let e = no_grad(|| train_step_inside(&w, &Tensor::ones(&[3], DType::F32))).unwrap_err();
    assert!(matches!(e, Error::NoGradFn { .. }), "{e:?}");
    assert_eq!(w.grad().unwrap().to_vec::<f32>()?, vec![2.0; 3], "the graph step and the eager one; the failed call added nothing");
    Ok(())
}

fn train_step_inside_eager(w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let loss = x.mul(w)?.sum()?;
    loss.backward()?;
    Ok(loss)
}
