//! Symbolic dims: in a trace with relaxed dims, reading a dim gives a symbol; a comparison
//! that decides host control flow records a guard, a later call reuses the trace only when
//! its guards hold, and one that fails a guard traces again, the reason naming the guard.
//! Each test compares the graph's results with the same body run eagerly.

use tensor_core::function::{lookup, GraphFunction};
use tensor_core::prelude::*;

fn function(name: &str) -> &'static GraphFunction {
    lookup(name).unwrap_or_else(|| panic!("`{name}` is registered once called"))
}

fn iota(n: usize) -> Tensor {
    Tensor::from_vec((0..n).map(|i| i as f32).collect::<Vec<_>>(), &[n]).expect("data matches shape")
}

/// Runs `f` in graph mode and eagerly on `x`; both results' values.
fn both(f: impl Fn(&Tensor) -> Result<Tensor>, x: &Tensor) -> Result<(Vec<f32>, Vec<f32>)> {
    let graph = f(x)?.to_vec::<f32>()?;
    run_functions_eagerly(true);
    let eager = f(x).and_then(|y| y.to_vec::<f32>());
    run_functions_eagerly(false);
    Ok((graph, eager?))
}

fn branch_body(x: &Tensor) -> Result<Tensor> {
    if x.dims()[0] < 10 {
        x.mul(1.0)?.add(100.0)
    } else {
        x.add(10.0)
    }
}

#[graph_fn(reduce_retracing)]
fn branch_on_size(x: &Tensor) -> Result<Tensor> {
    branch_body(x)
}

#[test]
fn a_branch_on_a_relaxed_dim_is_guarded_and_matches_eager() -> Result<()> {
    for n in [3, 2, 1, 0] {
        let (graph, eager) = both(branch_on_size, &iota(n))?;
        assert_eq!(graph, eager, "size {n}");
        assert_eq!(graph, branch_body(&iota(n))?.to_vec::<f32>()?, "size {n}");
    }
    let f = function("branch_on_size");
    assert_eq!(f.trace_count(), 2, "{:?}", f.traces());
    let traces = f.concrete_functions();
    assert_eq!(traces[0].guards(), Vec::<String>::new(), "the first trace is exact");
    assert_eq!(traces[1].guards(), ["n0 < 10"]);
    assert_eq!(traces[1].symbols(), ["n0 = x dim 0"]);
    // A size the guard refuses traces once more, and that trace serves the larger sizes.
    for n in [12, 15, 10] {
        let (graph, eager) = both(branch_on_size, &iota(n))?;
        assert_eq!(graph, eager, "size {n}");
    }
    assert_eq!(f.trace_count(), 3, "{:?}", f.traces());
    assert_eq!(f.traces()[2].reason, "arg x dim 0 = 12 fails n0 < 10");
    assert_eq!(f.concrete_functions()[2].guards(), ["n0 >= 10"]);
    // Both relaxed traces keep serving their sizes.
    for n in [4, 9, 11, 30] {
        let (graph, eager) = both(branch_on_size, &iota(n))?;
        assert_eq!(graph, eager, "size {n}");
    }
    assert_eq!(f.trace_count(), 3);
    Ok(())
}

#[graph_fn(input_signature(x: f32[?]))]
fn fixed_branch_on_size(x: &Tensor) -> Result<Tensor> {
    branch_body(x)
}

#[test]
fn a_fixed_signature_with_unknown_dims_guards_too() -> Result<()> {
    for n in [3, 2, 0, 12, 20, 5] {
        let (graph, eager) = both(fixed_branch_on_size, &iota(n))?;
        assert_eq!(graph, eager, "size {n}");
    }
    let f = function("fixed_branch_on_size");
    assert_eq!(f.trace_count(), 2, "{:?}", f.traces());
    assert_eq!(f.traces()[1].reason, "arg x dim 0 = 12 fails n0 < 10");
    let guards: Vec<Vec<String>> = f.concrete_functions().iter().map(|c| c.guards()).collect();
    assert_eq!(guards, [vec!["n0 < 10".to_string()], vec!["n0 >= 10".to_string()]]);
    Ok(())
}

fn divisible_body(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let (n, m) = (x.dim(0), y.dim(0));
    if n == m && n % 4 == 0 {
        x.add(y)
    } else {
        x.sum()?.add(&y.sum()?)
    }
}

#[graph_fn(reduce_retracing)]
fn divisible(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    divisible_body(x, y)
}

#[test]
fn equality_between_dims_and_arithmetic_on_them_are_guards() -> Result<()> {
    let run = |n: usize, m: usize| -> Result<()> {
        let (x, y) = (iota(n), iota(m).mul(2.0)?);
        let graph = divisible(&x, &y)?.to_vec::<f32>()?;
        assert_eq!(graph, divisible_body(&x, &y)?.to_vec::<f32>()?, "sizes {n}, {m}");
        Ok(())
    };
    run(4, 4)?; // exact
    run(8, 8)?; // relaxed: n0 == n1, n0 % 4 == 0
    let f = function("divisible");
    assert_eq!(f.concrete_functions()[1].guards(), ["n0 == n1", "n0 % 4 == 0"]);
    run(12, 12)?;
    run(16, 16)?;
    assert_eq!(f.trace_count(), 2, "{:?}", f.traces());
    run(6, 6)?; // n0 % 4 fails
    assert_eq!(f.traces()[2].reason, "arg x dim 0 = 6 fails n0 % 4 == 0");
    run(8, 5)?; // n0 == n1 fails: a third relaxed trace
    assert_eq!(f.trace_count(), 4, "{:?}", f.traces());
    Ok(())
}

fn specialize_body(x: &Tensor) -> Result<Tensor> {
    let n: usize = x.dim(0).into();
    x.mul(n as f32)
}

#[graph_fn(reduce_retracing)]
fn specialized(x: &Tensor) -> Result<Tensor> {
    specialize_body(x)
}

#[test]
fn converting_a_symbolic_dim_to_usize_specializes_on_its_value() -> Result<()> {
    for n in [2, 3, 3, 4, 3, 4] {
        let x = iota(n);
        assert_eq!(specialized(&x)?.to_vec::<f32>()?, specialize_body(&x)?.to_vec::<f32>()?, "size {n}");
    }
    let f = function("specialized");
    assert_eq!(f.trace_count(), 3, "{:?}", f.traces());
    assert_eq!(f.concrete_functions()[1].guards(), ["n0 == 3"]);
    assert_eq!(f.traces()[2].reason, "arg x dim 0 = 4 fails n0 == 3");
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn read_dims(x: &Tensor) -> Result<Tensor> {
    // No sentinel reaches host code: the dims read here are the call's.
    let (rows, cols) = (x.dim(0), x.dim(1));
    assert!(rows < 1000 && cols == 3, "rows {rows}, cols {cols}");
    let relu = x.relu()?;
    assert!(relu.dim(0) == rows, "an elementwise result keeps the symbol");
    assert_eq!(relu.dim(0).to_string(), rows.to_string());
    x.sum_axes(&[1], false)
}

#[test]
fn dims_read_while_tracing_relaxed_shapes_are_never_sentinels() -> Result<()> {
    for n in [2, 5, 7] {
        let x = Tensor::ones(&[n, 3], DType::F32);
        assert_eq!(read_dims(&x)?.to_vec::<f32>()?, vec![3.0; n]);
    }
    let f = function("read_dims");
    assert_eq!(f.trace_count(), 2);
    assert_eq!(f.concrete_functions()[1].guards(), ["n0 < 1000"]);
    Ok(())
}

#[graph_fn(reduce_retracing)]
fn shown(x: &Tensor) -> Result<Tensor> {
    if x.dim(0) < 10 {
        x.relu()
    } else {
        x.exp()
    }
}

#[test]
fn guards_show_beside_signatures_and_in_text_and_dot() -> Result<()> {
    shown(&Tensor::ones(&[2, 784], DType::F32))?;
    shown(&Tensor::ones(&[3, 784], DType::F32))?;
    let f = function("shown");
    assert_eq!(f.traces()[1].signature, "x: f32[?, 784] where n0 < 10");
    assert!(f.cached_signatures().contains(&"x: f32[?, 784] where n0 < 10".to_string()), "{:?}", f.cached_signatures());
    let c = &f.concrete_functions()[1];
    let text = c.to_text();
    assert!(text.starts_with("graph shown(x: f32[n0, 784]) {\n  guard n0 < 10\n"), "{text}");
    let dot = c.to_dot();
    assert!(dot.contains("x\\ninput\\nf32[n0, 784]") && dot.contains("guards\\nn0 < 10"), "{dot}");
    assert!(format!("{f:?}").contains("where n0 < 10"), "{f:?}");
    Ok(())
}
