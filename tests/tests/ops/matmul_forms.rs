//! matmul as NumPy and PyTorch define it: matrix × vector, vector × matrix, vector · vector
//! and batched operands with broadcast batch dims — values, shapes, eager == graph bit for
//! bit (gradients included), and errors.

use tensor_core::function::ConcreteFunction;
use tensor_core::prelude::*;
use tests::{as_f64, assert_bits_eq};

fn t(v: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), dims).unwrap()
}

#[test]
fn vector_forms_values_and_shapes() -> Result<()> {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let v3 = t(&[1.0, 0.0, -1.0], &[3]);
    let v2 = t(&[1.0, 2.0], &[2]);
    let mv = a.matmul(&v3)?;
    assert_eq!((mv.dims().to_vec(), mv.to_vec::<f32>()?), (vec![2], vec![-2.0, -2.0]));
    let vm = v2.matmul(&a)?;
    assert_eq!((vm.dims().to_vec(), vm.to_vec::<f32>()?), (vec![3], vec![9.0, 12.0, 15.0]));
    let dot = v3.matmul(&v3)?;
    assert_eq!((dot.dims().to_vec(), dot.item::<f32>()?), (vec![], 2.0));
    // A batch of matrices times a vector, and a vector times a batch of matrices.
    let batch = Tensor::arange(0.0f32, 12.0).reshape([2, 2, 3])?;
    let bv = batch.matmul(&v3)?;
    assert_eq!((bv.dims().to_vec(), bv.to_vec::<f32>()?), (vec![2, 2], vec![-2.0, -2.0, -2.0, -2.0]));
    let vb = v2.matmul(&batch)?;
    assert_eq!(vb.dims(), vec![2, 3]);
    assert_eq!(vb.to_vec::<f32>()?, vec![6.0, 9.0, 12.0, 24.0, 27.0, 30.0]);
    Ok(())
}

#[test]
fn batched_operands_broadcast_their_batch_dims() -> Result<()> {
    let a = Tensor::randn(&[2, 1, 3, 4], DType::F32, 1);
    let b = Tensor::randn(&[5, 4, 2], DType::F32, 2);
    let y = a.matmul(&b)?;
    assert_eq!(y.dims(), vec![2, 5, 3, 2]);
    // Element [1, 3] is a[1, 0] @ b[3].
    let want = a.select(0, 1)?.select(0, 0)?.matmul(&b.select(0, 3)?)?;
    assert_bits_eq(&y.select(0, 1)?.select(0, 3)?, &want);
    Ok(())
}

#[test]
fn vector_forms_in_a_graph_match_eager_bit_for_bit_with_gradients() -> Result<()> {
    let cases: [(&[usize], &[usize]); 6] =
        [(&[3, 4], &[4]), (&[4], &[4, 5]), (&[4], &[4]), (&[2, 3, 4], &[4]), (&[4], &[2, 4, 3]), (&[2, 1, 3, 4], &[3, 4, 2])];
    for (i, (sa, sb)) in cases.into_iter().enumerate() {
        let run = |a: &Tensor, b: &Tensor| -> Result<Vec<Tensor>> {
            let y = a.matmul(b)?;
            let (ga, gb) = {
                let g = tensor_core::grad(&[&y.tanh()?.sum()?], &[a, b], false)?;
                (g[0].clone(), g[1].clone())
            };
            Ok(vec![y, ga, gb])
        };
        let a = Tensor::randn(sa, DType::F32, 10 + i as u64).requires_grad_(true)?;
        let b = Tensor::randn(sb, DType::F32, 20 + i as u64).requires_grad_(true)?;
        let eager = run(&a, &b)?;
        let f = ConcreteFunction::trace("mm", &[("a", &a), ("b", &b)], || run(&a, &b))?;
        let graph = f.call(&[&a, &b])?;
        for (e, g) in eager.iter().zip(&graph) {
            assert_bits_eq(e, g);
        }
        assert_eq!(eager[1].dims(), sa.to_vec());
        assert_eq!(eager[2].dims(), sb.to_vec());
    }
    Ok(())
}

#[test]
fn vector_gradients_are_the_outer_products() -> Result<()> {
    // d(v·w)/dv = w; d(A v)/dA summed = outer(1, v).
    let v = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3])?.requires_grad_(true)?;
    let w = Tensor::from_vec(vec![4.0f64, 5.0, 6.0], &[3])?.requires_grad_(true)?;
    v.matmul(&w)?.backward()?;
    assert_eq!(as_f64(&v.grad().unwrap()), vec![4.0, 5.0, 6.0]);
    assert_eq!(as_f64(&w.grad().unwrap()), vec![1.0, 2.0, 3.0]);
    let a = Tensor::ones(&[2, 3], DType::F64).requires_grad_(true)?;
    a.matmul(&w)?.sum()?.backward()?;
    assert_eq!(as_f64(&a.grad().unwrap()), vec![4.0, 5.0, 6.0, 4.0, 5.0, 6.0]);
    Ok(())
}

#[test]
fn vector_forms_name_the_users_operands_in_errors() {
    let e = Tensor::zeros(&[3], DType::F32).matmul(&Tensor::zeros(&[4, 2], DType::F32)).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("[3]") && text.contains("[4, 2]") && text.contains("inner dims differ (3 vs 4)"), "{text}");
    let e = Tensor::scalar(2.0f32).matmul(&Tensor::zeros(&[2], DType::F32)).unwrap_err();
    assert!(e.to_string().contains("at least 1 dim"), "{e}");
}
