//! chunk, split, boolean masks and integer-array indexing: values, eager == graph bit for bit
//! (gradients included), how masked_select traces, and errors. Gradients against finite
//! differences are in the autograd gradchecks.

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;
use tests::assert_bits_eq;

#[test]
fn chunk_and_split_values() -> Result<()> {
    let x = Tensor::arange(0.0f32, 12.0).reshape([2, 6])?;
    let c = x.chunk(4, 1)?; // ceil(6 / 4) = 2: three pieces of 2
    assert_eq!(c.iter().map(|p| p.dims()).collect::<Vec<_>>(), vec![vec![2, 2]; 3]);
    assert_eq!(c[1].to_vec::<f32>()?, vec![2.0, 3.0, 8.0, 9.0]);
    let s = x.split(4, -1)?;
    assert_eq!((s[0].dims().to_vec(), s[1].to_vec::<f32>()?), (vec![2, 4], vec![4.0, 5.0, 10.0, 11.0]));
    let rows = x.split_sizes(&[2, 0], 0)?;
    assert_eq!((rows[0].dims().to_vec(), rows[1].dims().to_vec()), (vec![2, 6], vec![0, 6]));
    Ok(())
}

#[test]
fn masks_and_integer_arrays_values() -> Result<()> {
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], &[2, 3])?;
    // A mask that broadcasts: a column per row.
    let cols = Tensor::from_vec(vec![true, false, true], &[3])?;
    assert_eq!(x.masked_select(&cols)?.to_vec::<f32>()?, vec![1.0, 3.0, -4.0, -6.0]);
    assert_eq!(x.masked_select(&x.gt(10.0f32)?)?.dims(), vec![0]);
    let y = x.mul(1.0)?;
    y.masked_fill_(&x.lt(0.0f32)?, 0.0f32)?;
    assert_eq!(y.to_vec::<f32>()?, vec![1.0, 0.0, 3.0, 0.0, 5.0, 0.0]);
    y.masked_assign_(&cols, &Tensor::from_vec(vec![7.0f32, 8.0], &[2, 1])?)?;
    assert_eq!((y.to_vec::<f32>()?, y.version()), (vec![7.0, 0.0, 7.0, 8.0, 5.0, 8.0], 2));
    let i = Tensor::from_vec(vec![1i32, 1, 0], &[3])?;
    assert_eq!(x.index(&i)?.to_vec::<f32>()?, vec![-4.0, 5.0, -6.0, -4.0, 5.0, -6.0, 1.0, -2.0, 3.0]);
    Ok(())
}

/// Everything of this file in one function: the pieces, the selections, and the gradient.
fn program(x: &Tensor, state: &Tensor) -> Result<Vec<Tensor>> {
    let parts = x.chunk(2, 1)?;
    let split = x.split(1, 0)?;
    let picked = x.index(&Tensor::from_vec(vec![1i64, 1, 0], &[3, 1])?)?;
    // A constant mask is known while tracing: masked_select traces with a fixed length.
    let constant = Tensor::from_vec(vec![true, false, false, true, true, false, true, true], &[2, 4])?;
    let selected = x.masked_select(&constant)?;
    let y = x.mul(2.0)?;
    y.masked_fill_(&x.gt(0.5f32)?, -1.0f32)?;
    y.masked_assign_(&constant, &parts[1].sum_axes(&[1], true)?)?;
    let loss = y.tanh()?.sum()?.add(&picked.exp()?.sum()?)?.add(&selected.mul(&selected)?.sum()?)?.add(&split[1].sum()?)?;
    let g = tensor_core::grad(&[&loss], &[x], false)?.remove(0);
    // An argument's state updated through a mask computed in the graph.
    no_grad(|| state.masked_fill_(&state.lt(0.0f32)?, 0.0f32))?;
    Ok(vec![parts[0].clone(), picked, selected, y, g])
}

#[test]
fn in_a_graph_they_match_eager_bit_for_bit() -> Result<()> {
    let x = Tensor::randn(&[2, 4], DType::F32, 3).requires_grad_(true)?;
    let (se, sg) = (Tensor::randn(&[5], DType::F32, 4), Tensor::randn(&[5], DType::F32, 4));
    let eager = program(&x, &se)?;
    let f = ConcreteFunction::trace("indexing", &[("x", &x), ("state", &sg)], || program(&x, &sg))?;
    let graph = f.call(&[&x, &sg])?;
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
    }
    assert_bits_eq(&se, &sg);
    // Another input: the traced graph still agrees.
    let x2 = Tensor::randn(&[2, 4], DType::F32, 5).requires_grad_(true)?;
    let s2 = Tensor::randn(&[5], DType::F32, 6);
    let (eager, graph) = (program(&x2, &s2.detach())?, f.call(&[&x2, &s2])?);
    for (e, g) in eager.iter().zip(&graph) {
        assert_bits_eq(e, g);
    }
    Ok(())
}

#[test]
fn masked_select_on_a_mask_computed_in_a_trace_is_an_error_saying_what_to_do() -> Result<()> {
    let x = Tensor::randn(&[4], DType::F32, 1);
    let e = ConcreteFunction::trace("sel", &[("x", &x)], || Ok(vec![x.masked_select(&x.gt(0.0f32)?)?])).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("masked_select") && text.contains("depends on the mask's values") && text.contains("masked_fill"), "{text}");
    // Eagerly the same call works.
    assert_eq!(x.masked_select(&x.gt(0.0f32)?)?.numel(), x.to_vec::<f32>()?.iter().filter(|v| **v > 0.0).count());
    Ok(())
}

#[test]
fn bad_arguments_are_errors_naming_them() {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let says = |r: Result<Vec<Tensor>>, words: &[&str]| {
        let e = r.unwrap_err().to_string();
        assert!(words.iter().all(|w| e.contains(w)), "{e}");
    };
    says(x.chunk(0, 0), &["chunk", "at least 1"]);
    says(x.split(0, 0), &["split", "at least 1"]);
    says(x.split_sizes(&[1, 1], 1), &["split_sizes", "[1, 1]", "add up to 2", "length 3"]);
    says(x.chunk(2, 2), &["chunk", "axis 2"]);
    let one = |r: Result<Tensor>, words: &[&str]| says(r.map(|t| vec![t]), words);
    one(x.masked_select(&Tensor::ones(&[3], DType::F32)), &["masked_select", "bool"]);
    one(x.masked_select(&Tensor::ones(&[4], DType::Bool)), &["masked_select", "broadcast"]);
    one(Tensor::scalar(1.0f32).index(&Tensor::zeros(&[1], DType::I64)), &["index", "scalar"]);
    let w = Tensor::ones(&[2], DType::F32).requires_grad_(true).unwrap();
    assert!(matches!(w.masked_fill_(&Tensor::ones(&[2], DType::Bool), 0.0f32), Err(Error::InPlaceOnLeaf { .. })));
    assert!(x.masked_assign_(&Tensor::ones(&[2, 3], DType::Bool), &Tensor::ones(&[4], DType::F32)).is_err());
}
