//! Gradients through `cond` and `while_loop` inside a traced function have the eager bits,
//! signs included. For a `cond`: each use of a value inside a branch is an edge of its grad
//! node (the engine adds them in the eager order), an output nothing used sends no gradient
//! back, and a value neither branch's product reaches gets none (where `-0.0`s flowing on into
//! its node could turn into `+0.0`). For a loop: a variable no used output is computed from
//! sends nothing back, and a missing gradient starts as `-0.0`, which sums leave alone.

use tensor_core::control::{cond, while_loop};
use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;
use tests::assert_bits_eq;

/// The gradients of `loss` at `inputs`, eagerly and from a traced function, compared bit for
/// bit; returns the eager ones.
fn same_gradients(name: &str, inputs: &[&Tensor], loss: impl Fn(&[Tensor]) -> Result<Tensor>) -> Result<Vec<Tensor>> {
    let leaves: Vec<Tensor> = inputs.iter().map(|t| t.detach().requires_grad_(true)).collect::<Result<_>>()?;
    let grads = |xs: &[Tensor]| -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = xs.iter().collect();
        tensor_core::grad(&[&loss(xs)?], &refs, false)
    };
    let eager = grads(&leaves)?;
    let args: Vec<(String, &Tensor)> = leaves.iter().enumerate().map(|(i, t)| (format!("x{i}"), t)).collect();
    let arg_refs: Vec<(&str, &Tensor)> = args.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let f = ConcreteFunction::trace(name, &arg_refs, || grads(&leaves))?;
    let refs: Vec<&Tensor> = leaves.iter().collect();
    let graph = f.call(&refs)?;
    for (g, e) in graph.iter().zip(&eager) {
        assert_bits_eq(g, e);
    }
    Ok(eager)
}

#[test]
fn a_value_a_branch_reads_several_times_and_uses_elsewhere_gets_the_eager_sum() -> Result<()> {
    // Branch uses of x: sigmoid(x) * x (two), then y * x and exp(x) outside; x < 0 takes it.
    for xv in [[0.7f32, -0.2, 1.3], [-0.7, 0.2, -1.3]] {
        let (x, w) = (Tensor::from_vec(xv.to_vec(), &[3])?, Tensor::from_vec(vec![0.3f32, 1.7, -0.9], &[3])?);
        same_gradients("several_uses", &[&x], |v| {
            let x = &v[0];
            let p = x.sum()?.gt(0.0)?;
            let y = cond(&p, || x.mul(&w)?.tanh(), || x.sigmoid()?.mul(x))?;
            y.mul(x)?.add(&x.exp()?)?.sum()
        })?;
    }
    Ok(())
}

#[test]
fn an_unused_output_sends_no_gradient_back_through_its_branch() -> Result<()> {
    // log'(0) is inf: a zero gradient from the unused second output would make NaN (0 * inf).
    let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0], &[3])?;
    let eager = same_gradients("unused_output", &[&x], |v| {
        let x = &v[0];
        let (a, _unused) = cond(&x.sum()?.gt(0.0)?, || Ok((x.exp()?, x.log()?)), || Ok((x.neg()?, x.clone())))?;
        a.sum()
    })?;
    assert_eq!(eager[0].to_vec::<f32>()?, vec![1.0, 1.0f32.exp(), 2.0f32.exp()]);
    Ok(())
}

#[test]
fn a_value_neither_branch_differentiates_gets_no_gradient_through_the_cond() -> Result<()> {
    // The then branch runs and x's gradient is -0.0 (from x * -0.0). b = x * -2 is read by the
    // else branch only for a value it drops; a -0.0 sent to b would come back to x as +0.0
    // and flip the sign.
    let x = Tensor::from_vec(vec![1.5f32, -0.5], &[2])?;
    let eager = same_gradients("unreached", &[&x], |v| {
        let x = &v[0];
        let b = x.mul(-2.0)?;
        cond(
            &x.sum()?.gt(0.0)?,
            || x.mul(-0.0)?.sum(),
            || {
                let _dropped = b.softmax(0)?;
                x.sum()
            },
        )
    })?;
    assert_eq!(eager[0].to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), vec![(-0.0f32).to_bits(); 2]);
    Ok(())
}

#[test]
fn a_loop_variable_nothing_used_sends_no_gradient_back() -> Result<()> {
    // a <- softmax(a) / c with c = 0 somewhere: a zero gradient for the unused `a` would make
    // 0 * inf = NaN and reach x through a's initial value; eagerly only `b`'s chain runs.
    let x = Tensor::from_vec(vec![0.5f64, -1.0, 2.0], &[3])?;
    let c = Tensor::from_vec(vec![1.0f64, 0.0, 2.0], &[3])?;
    let eager = same_gradients("unused_loop_output", &[&x], |v| {
        let x = &v[0];
        let (_, _a, b) = while_loop(
            |(i, _, _): &(Tensor, Tensor, Tensor)| i.lt(2i64),
            |(i, a, b)| Ok((&i + 1i64, a.softmax(0)?.div(&c)?, b.relu()?.mul(3.0)?)),
            (Tensor::scalar(0i64), x.clone(), x.clone()),
        )?;
        b.sum()
    })?;
    // d/dx sum(9 relu(relu(x))) = 9 where x > 0.
    assert_eq!(eager[0].to_vec::<f64>()?, vec![9.0, 0.0, 9.0]);
    Ok(())
}

#[test]
fn a_loop_variable_without_an_output_gradient_starts_from_minus_zero() -> Result<()> {
    // `b` is unused after the loop but `a` is computed from it, so its gradient is a root
    // from the first step back: as `-0.0` it adds nothing to b's eager gradient (-0.0 here:
    // the loss scales a by -0.0), where `+0.0` would flip its sign.
    let x = Tensor::from_vec(vec![1.5f32, 0.25], &[2])?;
    let eager = same_gradients("minus_zero_start", &[&x], |v| {
        let x = &v[0];
        let (_, a, _b) = while_loop(
            |(i, _, _): &(Tensor, Tensor, Tensor)| i.lt(1i64),
            |(i, a, b)| Ok((&i + 1i64, a.mul(&b)?, b.clamp(-1.0, 2.0)?)),
            (Tensor::scalar(0i64), Tensor::ones(&[2], DType::F32), x.clone()),
        )?;
        a.mul(-0.0)?.sum()
    })?;
    assert_eq!(eager[0].to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), vec![(-0.0f32).to_bits(); 2]);
    Ok(())
}
