//! Shapes computed at run time: in a trace with relaxed dims, a shape-taking op given a
//! symbolic dim (`reshape((n * 2, -1))`, `zeros([n, 4])`, `narrow(0, 0, n - 1)`, `split(n -
//! 1)`, an `arange(n)` causal mask) keeps the expression in the graph and evaluates it from
//! each call's argument dims, so one trace serves every size with no guard. Each test runs
//! several sizes through one relaxed trace and compares the bits with the same body run
//! eagerly.

use tensor_core::function::{lookup, GraphFunction};
use tensor_core::graph::NodeKind;
use tensor_core::ops::{AttentionOptions, Op};
use tensor_core::prelude::*;

fn function(name: &str) -> &'static GraphFunction {
    lookup(name).unwrap_or_else(|| panic!("`{name}` is registered once called"))
}

/// `[n, cols]` of distinct values (negative ones too), a different pattern per size.
fn data(n: usize, cols: usize) -> Tensor {
    let values: Vec<f32> = (0..n * cols).map(|i| ((i * 7 + n) % 11) as f32 * 0.37 - 1.5).collect();
    Tensor::from_vec(values, &[n, cols]).expect("data matches shape")
}

fn bits(t: &Tensor) -> Result<Vec<u32>> {
    Ok(t.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect())
}

/// Runs `f` on `x` in graph mode and eagerly and checks both give the same dims and bits;
/// returns the graph result.
fn same_as_eager(f: impl Fn(&Tensor) -> Result<Tensor>, x: &Tensor) -> Result<Tensor> {
    let graph = f(x)?;
    run_functions_eagerly(true);
    let eager = f(x);
    run_functions_eagerly(false);
    let eager = eager?;
    assert_eq!(graph.dims(), eager.dims(), "dims for input {}", x.shape());
    assert_eq!(bits(&graph)?, bits(&eager)?, "bits for input {}", x.shape());
    Ok(graph)
}

/// The relaxed trace of `name` (its last): no guards, and a node whose sizes are computed
/// at run time; its text.
fn relaxed_text(name: &str) -> String {
    let f = function(name);
    let c = f.concrete_functions().last().cloned().expect("traced");
    assert_eq!(c.guards(), Vec::<String>::new(), "{name}: nothing specialized");
    let computed = c.graph().nodes.iter().any(|n| matches!(n.kind, NodeKind::Op(Op::SymShape(_))));
    assert!(computed, "{name}: a shape computed at run time\n{}", c.to_text());
    c.to_text()
}

#[graph_fn(reduce_retracing)]
fn pairs(x: &Tensor) -> Result<Tensor> {
    let n = x.dim(0);
    x.reshape((n * 2, -1))?.mul(3.0)
}

#[test]
fn a_reshape_to_a_symbolic_size_is_computed_at_each_call() -> Result<()> {
    for n in [3, 5, 8, 1] {
        let y = same_as_eager(pairs, &data(n, 6))?;
        assert_eq!(y.dims(), vec![n * 2, 3]);
    }
    assert_eq!(function("pairs").trace_count(), 2, "[3] exactly, then one relaxed trace");
    let text = relaxed_text("pairs");
    assert!(text.contains("graph pairs(x: f32[n0, 6])"), "{text}");
    assert!(text.contains(": f32[n0 * 2, ?] = reshape[shape=[n0 * 2, -1]](x)"), "{text}");
    Ok(())
}

#[graph_fn(input_signature(x: f32[?, 4]))]
fn plus_zeros(x: &Tensor) -> Result<Tensor> {
    let n = x.dim(0);
    let zeros = Tensor::zeros([n, 4.into()], DType::F32);
    let halves = Tensor::full([n, Dim::from(4)], 0.5, DType::F32);
    x.add(&zeros)?.mul(&halves)
}

#[test]
fn zeros_and_full_of_a_symbolic_size_are_made_at_each_call() -> Result<()> {
    for n in [3, 5, 8, 1] {
        let y = same_as_eager(plus_zeros, &data(n, 4))?;
        assert_eq!(y.to_vec::<f32>()?, data(n, 4).mul(0.5)?.to_vec::<f32>()?, "x * 0.5 for size {n}");
    }
    assert_eq!(function("plus_zeros").trace_count(), 1, "one trace for the signature");
    let text = relaxed_text("plus_zeros");
    assert!(text.contains(": f32[n0, 4] = broadcast_to[shape=[n0, 4]]"), "{text}");
    Ok(())
}

fn masked_softmax_body(q: &Tensor) -> Result<Tensor> {
    let n = q.dim(0);
    let scores = q.matmul(&q.t()?)?;
    let positions = Tensor::arange_len(n, DType::I64)?;
    let later = positions.reshape((1, n))?.gt(&positions.reshape((n, 1))?)?;
    scores.masked_fill(&later, f32::NEG_INFINITY)?.softmax(-1)
}

#[graph_fn(reduce_retracing)]
fn masked_softmax(q: &Tensor) -> Result<Tensor> {
    masked_softmax_body(q)
}

#[test]
fn a_causal_mask_of_size_n_from_arange_is_computed_at_each_call() -> Result<()> {
    for n in [3, 5, 8, 1] {
        let y = same_as_eager(masked_softmax, &data(n, 4))?;
        // Row 0 sees only position 0: weight 1 there, exactly 0 after it.
        let row0 = y.narrow(0, 0, 1)?.to_vec::<f32>()?;
        assert_eq!(row0[0], 1.0, "size {n}");
        assert!(row0[1..].iter().all(|&w| w == 0.0), "size {n}: {row0:?}");
    }
    assert_eq!(function("masked_softmax").trace_count(), 2);
    let text = relaxed_text("masked_softmax");
    assert!(text.contains("arange[len=n0]"), "{text}");
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn causal_attention(q: &Tensor) -> Result<Tensor> {
    let options = AttentionOptions { causal: true, ..Default::default() };
    q.scaled_dot_product_attention(&q.mul(0.5)?, &q.add(1.0)?, options)
}

#[test]
fn causal_attention_over_a_relaxed_length_matches_eager() -> Result<()> {
    for n in [3, 5, 8, 1] {
        same_as_eager(causal_attention, &data(n, 4))?;
    }
    assert_eq!(function("causal_attention").trace_count(), 2);
    relaxed_text("causal_attention");
    // The mask of size n is the host's causal mask, whatever the size.
    assert_eq!(Tensor::causal_mask_dim(4)?.to_vec::<bool>()?, Tensor::causal_mask(4).to_vec::<bool>()?);
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn all_but_last(x: &Tensor) -> Result<Tensor> {
    let n = x.dim(0);
    x.narrow(0, 0, n - 1)?.add(&x.narrow(0, 1, n - 1)?)
}

#[test]
fn a_narrow_of_a_symbolic_length_is_computed_at_each_call() -> Result<()> {
    for n in [3, 5, 8, 1] {
        let y = same_as_eager(all_but_last, &data(n, 3))?;
        assert_eq!(y.dims(), vec![n - 1, 3]);
    }
    assert_eq!(function("all_but_last").trace_count(), 2);
    let text = relaxed_text("all_but_last");
    assert!(text.contains(": f32[n0 - 1, 3] = narrow[axis=0 start=0 len=n0 - 1](x)"), "{text}");
    Ok(())
}

fn split_body(x: &Tensor) -> Result<Tensor> {
    let n = x.dim(0);
    let pieces = x.split(n - 1, 0)?; // [n - 1, 1] rows for every n >= 2
    assert_eq!(pieces.len(), 2);
    let sizes = x.split_sizes([Dim::from(1), n - 1], 0)?;
    pieces[0].sum_axes(&[0], false)?.mul(&pieces[1].sum_axes(&[0], false)?)?.add(&sizes[1].sum_axes(&[0], false)?)
}

#[graph_fn(reduce_retracing)]
fn split_rows(x: &Tensor) -> Result<Tensor> {
    split_body(x)
}

#[test]
fn a_split_by_a_symbolic_size_is_computed_at_each_call() -> Result<()> {
    for n in [3, 5, 8, 2] {
        same_as_eager(split_rows, &data(n, 2))?;
    }
    let f = function("split_rows");
    assert_eq!(f.trace_count(), 2, "{:?}", f.traces());
    // The number of pieces is host data: a guard that holds for every n >= 2.
    let c = &f.concrete_functions()[1];
    assert!(c.guards().iter().any(|g| g.contains("== 2")), "{:?}", c.guards());
    assert!(c.graph().nodes.iter().any(|n| matches!(n.kind, NodeKind::Op(Op::SymShape(_)))));
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn stretched(x: &Tensor) -> Result<Tensor> {
    let n = x.dim(0);
    // (The reshape's inferred dim is not named by the trace: reading it would specialize.)
    x.reshape((n * 3, -1))?.mul(&Tensor::ones([n * 3, Dim::from(2)], DType::F32))?.sum()
}

#[test]
fn the_gradient_through_shapes_computed_at_run_time_is_eager_s() -> Result<()> {
    for n in [2, 4, 7] {
        let values = data(n, 6);
        let grads = |eager: bool| -> Result<Vec<u32>> {
            let x = values.detach().requires_grad_(true)?;
            run_functions_eagerly(eager);
            let y = stretched(&x);
            run_functions_eagerly(false);
            y?.backward()?;
            bits(&x.grad().expect("x requires grad"))
        };
        assert_eq!(grads(false)?, grads(true)?, "size {n}");
        // d(sum x)/dx is 1 everywhere.
        assert_eq!(grads(false)?, vec![1.0f32.to_bits(); n * 6]);
    }
    assert_eq!(function("stretched").trace_count(), 2);
    Ok(())
}
