//! `matmul_t`: products reading an operand transposed without copying it — values against
//! hand-computed ones for each flag combination (2-d and batched with broadcast batch dims),
//! the same values as an explicit transpose, eager == graph bit for bit (gradients included),
//! the graph holding one flagged node and no transpose, and errors.

use tensor_core::function::ConcreteFunction;
use tensor_core::graph::NodeKind;
use tensor_core::ops::{LinalgOp, Op};
use tensor_core::prelude::*;
use tests::{as_f64, assert_bits_eq};

/// A product: a's batch dims, b's, and (m, k, n).
type Case = (&'static [usize], &'static [usize], (usize, usize, usize));

const FLAGS: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

/// `x` (2-d) as stored for a flag: itself, or its transpose made row-major.
fn stored(x: &[f64], rows: usize, cols: usize, transposed: bool) -> Tensor {
    let data = if transposed { (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect() } else { x.to_vec() };
    let dims = if transposed { [cols, rows] } else { [rows, cols] };
    Tensor::from_vec(data, &dims).unwrap()
}

// A = [[1, 2, 3], [4, 5, 6]], B = [[1, 0], [0, 1], [1, 1]]: A @ B = [[4, 5], [10, 11]].
const A: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
const B: [f64; 6] = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
const AB: [f64; 4] = [4.0, 5.0, 10.0, 11.0];

#[test]
fn each_flag_combination_gives_the_hand_computed_product() -> Result<()> {
    for (ta, tb) in FLAGS {
        let (a, b) = (stored(&A, 2, 3, ta), stored(&B, 3, 2, tb));
        let y = a.matmul_t(&b, ta, tb)?;
        assert_eq!((y.dims().to_vec(), as_f64(&y)), (vec![2, 2], AB.to_vec()), "flags ({ta}, {tb})");
    }
    Ok(())
}

#[test]
fn batched_flags_broadcast_their_batch_dims() -> Result<()> {
    // a[i, 0] = (i + 1) A for i < 2, b[j] = (j + 1) B for j < 3: y[i, j] = (i + 1)(j + 1) A @ B.
    for (ta, tb) in FLAGS {
        let a = Tensor::stack(&[&stored(&A, 2, 3, ta), &stored(&A, 2, 3, ta).mul(2.0)?], 0)?.unsqueeze(1)?;
        let b0 = stored(&B, 3, 2, tb);
        let b = Tensor::stack(&[&b0, &b0.mul(2.0)?, &b0.mul(3.0)?], 0)?;
        let y = a.matmul_t(&b, ta, tb)?;
        assert_eq!(y.dims(), vec![2, 3, 2, 2], "flags ({ta}, {tb})");
        let want: Vec<f64> = (0..2).flat_map(|i| (0..3).flat_map(move |j| AB.map(|v| v * ((i + 1) * (j + 1)) as f64))).collect();
        assert_eq!(as_f64(&y), want, "flags ({ta}, {tb})");
    }
    Ok(())
}

#[test]
fn flags_give_the_values_of_an_explicit_transpose() -> Result<()> {
    // 2-d, batched with broadcast, and a 2-d right operand under a batched left one (its rows
    // folded into one product), with sizes past gemm's small-product kernels, and one row (the
    // one-row kernel takes unflagged operands only).
    let cases: [Case; 5] =
        [(&[], &[], (33, 70, 17)), (&[2, 1], &[3], (5, 9, 4)), (&[4], &[], (40, 24, 36)), (&[], &[2], (3, 300, 1)), (&[], &[], (1, 40, 64))];
    for (i, (ba, bb, (m, k, n))) in cases.into_iter().enumerate() {
        for (ta, tb) in FLAGS {
            let dims = |batch: &[usize], r, c, t| batch.iter().copied().chain(if t { [c, r] } else { [r, c] }).collect::<Vec<_>>();
            let a = Tensor::randn(&dims(ba, m, k, ta), DType::F64, 2 * i as u64);
            let b = Tensor::randn(&dims(bb, k, n, tb), DType::F64, 2 * i as u64 + 1);
            let explicit = |x: &Tensor, t| if t { x.t() } else { Ok(x.clone()) };
            let want = explicit(&a, ta)?.matmul(&explicit(&b, tb)?)?;
            let got = a.matmul_t(&b, ta, tb)?;
            assert_eq!(got.dims(), want.dims());
            for (x, y) in as_f64(&got).iter().zip(as_f64(&want)) {
                assert!((x - y).abs() < 1e-12 * k as f64, "case {i} flags ({ta}, {tb}): {x} vs {y}");
            }
        }
    }
    Ok(())
}

#[test]
fn flagged_products_in_a_graph_match_eager_bit_for_bit_with_gradients() -> Result<()> {
    let cases: [Case; 4] = [(&[], &[], (6, 5, 7)), (&[2, 1], &[3], (4, 3, 5)), (&[3], &[], (8, 70, 20)), (&[], &[2], (1, 9, 1))];
    for (i, (ba, bb, (m, k, n))) in cases.into_iter().enumerate() {
        for (ta, tb) in FLAGS {
            let dims = |batch: &[usize], r, c, t| batch.iter().copied().chain(if t { [c, r] } else { [r, c] }).collect::<Vec<_>>();
            let run = |a: &Tensor, b: &Tensor| -> Result<Vec<Tensor>> {
                let y = a.matmul_t(b, ta, tb)?;
                let g = tensor_core::grad(&[&y.tanh()?.sum()?], &[a, b], false)?;
                Ok(vec![y, g[0].clone(), g[1].clone()])
            };
            let a = Tensor::randn(&dims(ba, m, k, ta), DType::F32, 10 + i as u64).requires_grad_(true)?;
            let b = Tensor::randn(&dims(bb, k, n, tb), DType::F32, 20 + i as u64).requires_grad_(true)?;
            let eager = run(&a, &b)?;
            let f = ConcreteFunction::trace("mm_t", &[("a", &a), ("b", &b)], || run(&a, &b))?;
            let graph = f.call(&[&a, &b])?;
            for (e, g) in eager.iter().zip(&graph) {
                assert_bits_eq(e, g);
            }
            assert_eq!((eager[1].dims(), eager[2].dims()), (a.dims(), b.dims()), "gradient shapes, flags ({ta}, {tb})");
        }
    }
    Ok(())
}

#[test]
fn the_graph_holds_one_flagged_product_and_no_transpose() -> Result<()> {
    let (q, k) = (Tensor::randn(&[2, 4, 8], DType::F32, 1), Tensor::randn(&[2, 4, 8], DType::F32, 2));
    let f = ConcreteFunction::trace("scores", &[("q", &q), ("k", &k)], || Ok(vec![q.matmul_t(&k, false, true)?]))?;
    let nodes = &f.graph().nodes;
    assert_eq!(nodes.len(), 1);
    assert!(matches!(nodes[0].kind, NodeKind::Op(Op::Linalg(LinalgOp::Matmul { transpose_a: false, transpose_b: true }))));
    assert!(f.graph().to_text().contains("transpose_a=false transpose_b=true"), "{}", f.graph().to_text());
    Ok(())
}

#[test]
fn gradients_of_flagged_products_are_flagged_products() -> Result<()> {
    // The backward of q @ kᵀ reads its operands through flags too: no permute in the graph.
    let q = Tensor::randn(&[2, 4, 8], DType::F32, 1).requires_grad_(true)?;
    let k = Tensor::randn(&[2, 4, 8], DType::F32, 2).requires_grad_(true)?;
    let f = ConcreteFunction::trace("grads", &[("q", &q), ("k", &k)], || {
        let y = q.matmul_t(&k, false, true)?;
        tensor_core::grad(&[&y.sum()?], &[&q, &k], false)
    })?;
    let text = f.graph().to_text();
    assert!(!text.contains("permute"), "{text}");
    assert!(text.contains("matmul"), "{text}");
    Ok(())
}

#[test]
fn errors_name_the_operands_and_the_flags() {
    let (a, b) = (Tensor::zeros(&[2, 3], DType::F32), Tensor::zeros(&[2, 3], DType::F32));
    // [2, 3] @ [2, 3]ᵀ is fine; [2, 3]ᵀ @ [2, 3]ᵀ is [3, 2] @ [3, 2]: the inner dims differ.
    assert!(a.matmul_t(&b, false, true).is_ok());
    let msg = a.matmul_t(&b, true, true).unwrap_err().to_string();
    assert!(msg.contains("matmul") && msg.contains("[2, 3]") && msg.contains("aᵀ @ bᵀ"), "{msg}");
    // A vector has no transpose.
    let v = Tensor::zeros(&[3], DType::F32);
    let msg = a.matmul_t(&v, false, true).unwrap_err().to_string();
    assert!(msg.contains("1-d operand"), "{msg}");
    assert!(v.matmul_t(&b, true, false).is_err());
    // A vector beside a flagged matrix is fine: v @ bᵀ is [3] @ [3, 2].
    assert_eq!(v.matmul_t(&b, false, true).unwrap().dims(), vec![2]);
}
