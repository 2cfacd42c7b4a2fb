//! Layout ops (reshape, permute/transpose/t, broadcast_to, squeeze/unsqueeze, flatten_from,
//! concat/stack, narrow/slice/select) and indexing ops (index_select, gather, one_hot)
//! against hand-computed values.

use tensor_core::prelude::*;
use tensor_core::Element;
use tests::{assert_bools, assert_tensor, per_dtype, tensor};

/// `0, 1, ..., n - 1` in `T`, with the given dims.
fn iota<T: Element>(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
    tensor::<T>(&v, dims)
}

// ------------------------------------------------------------------------------ reshape

fn reshape_values<T: Element>() -> Result<()> {
    let x = iota::<T>(&[6]);
    let all = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
    assert_tensor::<T>(&x.reshape([2, 3])?, &[2, 3], &all);
    assert_tensor::<T>(&x.reshape([2, -1])?, &[2, 3], &all);
    assert_tensor::<T>(&x.reshape([-1, 2])?, &[3, 2], &all);
    assert_tensor::<T>(&x.reshape([1, -1, 1])?, &[1, 6, 1], &all);
    assert_tensor::<T>(&x.reshape([3, 2])?.reshape([-1])?, &[6], &all);
    // To and from 0-d.
    let s = Tensor::scalar(T::from_f64(7.0));
    assert_tensor::<T>(&s.reshape([1, 1])?, &[1, 1], &[7.0]);
    assert_tensor::<T>(&s.reshape([-1])?, &[1], &[7.0]);
    assert_tensor::<T>(&s.reshape([1])?.reshape(())?, &[], &[7.0]);
    // A reshape of a transposed tensor reads it in its new row-major order.
    let t = x.reshape([2, 3])?.t()?;
    assert_tensor::<T>(&t.reshape([-1])?, &[6], &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // Empty tensors reshape too.
    assert_tensor::<T>(&iota::<T>(&[0, 3]).reshape([3, 0])?, &[3, 0], &[]);
    assert_tensor::<T>(&iota::<T>(&[0, 3]).reshape([-1])?, &[0], &[]);
    assert_tensor::<T>(&iota::<T>(&[0, 3]).reshape([-1, 3])?, &[0, 3], &[]);
    Ok(())
}
per_dtype!(reshape_values: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ permute

fn permute_transpose<T: Element>() -> Result<()> {
    let x = iota::<T>(&[2, 3, 4]); // x[i][j][k] = 12 i + 4 j + k
    let p = x.permute(&[2, 0, 1])?; // p[k][i][j] = x[i][j][k]
    let mut want = Vec::new();
    for k in 0..4 {
        for i in 0..2 {
            for j in 0..3 {
                want.push((12 * i + 4 * j + k) as f64);
            }
        }
    }
    assert_tensor::<T>(&p, &[4, 2, 3], &want);
    // Negative axes in the permutation.
    assert_tensor::<T>(&x.permute(&[-1, 0, -2])?, &[4, 2, 3], &want);
    // The inverse permutation restores x.
    assert_tensor::<T>(&p.permute(&[1, 2, 0])?, &[2, 3, 4], &(0..24).map(f64::from).collect::<Vec<_>>());
    // transpose(0, -1): y[k][j][i] = x[i][j][k]
    let mut want = Vec::new();
    for k in 0..4 {
        for j in 0..3 {
            for i in 0..2 {
                want.push((12 * i + 4 * j + k) as f64);
            }
        }
    }
    assert_tensor::<T>(&x.transpose(0, -1)?, &[4, 3, 2], &want);
    assert_tensor::<T>(&x.transpose(2, 0)?, &[4, 3, 2], &want);
    // t() swaps the last two dims.
    let m = iota::<T>(&[2, 3]);
    assert_tensor::<T>(&m.t()?, &[3, 2], &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_tensor::<T>(&m.t()?.t()?, &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let bt = x.t()?; // [2, 4, 3]: bt[i][k][j] = x[i][j][k]
    assert_eq!(bt.dims(), vec![2, 4, 3]);
    assert_tensor::<T>(&bt.narrow(0, 1, 1)?.narrow(1, 2, 1)?.reshape([-1])?, &[3], &[14.0, 18.0, 22.0]);
    Ok(())
}
per_dtype!(permute_transpose: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ broadcast_to

fn broadcast_to_values<T: Element>() -> Result<()> {
    let row = tensor::<T>(&[1.0, 2.0, 3.0], &[3]);
    assert_tensor::<T>(&row.broadcast_to(&[2, 3])?, &[2, 3], &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    let col = tensor::<T>(&[1.0, 2.0], &[2, 1]);
    assert_tensor::<T>(&col.broadcast_to(&[2, 3])?, &[2, 3], &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    assert_tensor::<T>(&col.broadcast_to(&[2, 2, 2])?, &[2, 2, 2], &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);
    let s = Tensor::scalar(T::from_f64(5.0));
    assert_tensor::<T>(&s.broadcast_to(&[2, 2])?, &[2, 2], &[5.0; 4]);
    assert_tensor::<T>(&s.broadcast_to(&[])?, &[], &[5.0]);
    let r = tensor::<T>(&[1.0, 2.0, 3.0], &[1, 3]);
    assert_tensor::<T>(&r.broadcast_to(&[2, 2, 3])?, &[2, 2, 3], &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    // The same shape is the identity; a broadcast result can be reduced again.
    assert_tensor::<T>(&row.broadcast_to(&[3])?, &[3], &[1.0, 2.0, 3.0]);
    assert_tensor::<T>(&row.broadcast_to(&[4, 3])?.sum_axes(&[0], false)?, &[3], &[4.0, 8.0, 12.0]);
    Ok(())
}
per_dtype!(broadcast_to_values: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ squeeze etc.

fn squeeze_unsqueeze_flatten<T: Element>() -> Result<()> {
    let x = iota::<T>(&[2, 1, 3]);
    let vals = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
    assert_tensor::<T>(&x.squeeze(1)?, &[2, 3], &vals);
    assert_tensor::<T>(&x.squeeze(-2)?, &[2, 3], &vals);
    assert_tensor::<T>(&x.unsqueeze(0)?, &[1, 2, 1, 3], &vals);
    assert_tensor::<T>(&x.unsqueeze(3)?, &[2, 1, 3, 1], &vals);
    assert_tensor::<T>(&x.unsqueeze(-1)?, &[2, 1, 3, 1], &vals);
    assert_tensor::<T>(&x.unsqueeze(-4)?, &[1, 2, 1, 3], &vals);
    assert_tensor::<T>(&x.unsqueeze(2)?, &[2, 1, 1, 3], &vals);
    let s = Tensor::scalar(T::from_f64(4.0));
    assert_tensor::<T>(&s.unsqueeze(0)?, &[1], &[4.0]);
    assert_tensor::<T>(&s.unsqueeze(-1)?.squeeze(0)?, &[], &[4.0]);

    let y = iota::<T>(&[2, 3, 4]);
    let all: Vec<f64> = (0..24).map(f64::from).collect();
    assert_tensor::<T>(&y.flatten_from(1)?, &[2, 12], &all);
    assert_tensor::<T>(&y.flatten_from(0)?, &[24], &all);
    assert_tensor::<T>(&y.flatten_from(-1)?, &[2, 3, 4], &all);
    assert_tensor::<T>(&y.flatten_from(-2)?, &[2, 12], &all);
    // Flattening a permuted tensor reads its new order.
    assert_tensor::<T>(&iota::<T>(&[2, 2]).t()?.flatten_from(0)?, &[4], &[0.0, 2.0, 1.0, 3.0]);
    Ok(())
}
per_dtype!(squeeze_unsqueeze_flatten: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ concat / stack

fn concat_stack<T: Element>() -> Result<()> {
    let a = iota::<T>(&[2, 2]); // [[0, 1], [2, 3]]
    let b = tensor::<T>(&[10.0, 11.0], &[1, 2]);
    let c = tensor::<T>(&[20.0, 21.0, 22.0, 23.0, 24.0, 25.0], &[2, 3]);
    assert_tensor::<T>(&Tensor::concat(&[&a, &b], 0)?, &[3, 2], &[0.0, 1.0, 2.0, 3.0, 10.0, 11.0]);
    assert_tensor::<T>(&Tensor::concat(&[&b, &a, &b], 0)?, &[4, 2], &[10.0, 11.0, 0.0, 1.0, 2.0, 3.0, 10.0, 11.0]);
    assert_tensor::<T>(&Tensor::concat(&[&a, &c], 1)?, &[2, 5], &[0.0, 1.0, 20.0, 21.0, 22.0, 2.0, 3.0, 23.0, 24.0, 25.0]);
    assert_tensor::<T>(&Tensor::concat(&[&c, &a], -1)?, &[2, 5], &[20.0, 21.0, 22.0, 0.0, 1.0, 23.0, 24.0, 25.0, 2.0, 3.0]);
    assert_tensor::<T>(&Tensor::concat(&[&a], 0)?, &[2, 2], &[0.0, 1.0, 2.0, 3.0]);
    // An empty part adds nothing.
    let empty = iota::<T>(&[0, 2]);
    assert_tensor::<T>(&Tensor::concat(&[&a, &empty], 0)?, &[2, 2], &[0.0, 1.0, 2.0, 3.0]);

    let d = tensor::<T>(&[4.0, 5.0, 6.0, 7.0], &[2, 2]);
    assert_tensor::<T>(&Tensor::stack(&[&a, &d], 0)?, &[2, 2, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    assert_tensor::<T>(&Tensor::stack(&[&a, &d], 1)?, &[2, 2, 2], &[0.0, 1.0, 4.0, 5.0, 2.0, 3.0, 6.0, 7.0]);
    assert_tensor::<T>(&Tensor::stack(&[&a, &d], -1)?, &[2, 2, 2], &[0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
    assert_tensor::<T>(&Tensor::stack(&[&a, &d], 2)?, &[2, 2, 2], &[0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
    let s1 = Tensor::scalar(T::from_f64(1.0));
    let s2 = Tensor::scalar(T::from_f64(2.0));
    assert_tensor::<T>(&Tensor::stack(&[&s1, &s2, &s1], 0)?, &[3], &[1.0, 2.0, 1.0]);
    Ok(())
}
per_dtype!(concat_stack: f32, f64, i32, i64);

#[test]
fn concat_and_stack_bools() -> Result<()> {
    let a = Tensor::from_vec(vec![true, false], &[2])?;
    let b = Tensor::from_vec(vec![false], &[1])?;
    assert_bools(&Tensor::concat(&[&a, &b], 0)?, &[3], &[true, false, false]);
    assert_bools(&Tensor::stack(&[&a, &a], 1)?, &[2, 2], &[true, true, false, false]);
    assert_bools(&a.reshape([1, 2])?.t()?, &[2, 1], &[true, false]);
    assert_bools(&a.broadcast_to(&[2, 2])?, &[2, 2], &[true, false, true, false]);
    Ok(())
}

// ------------------------------------------------------------------------------ narrow / slice / select

fn narrow_slice_select<T: Element>() -> Result<()> {
    let x = iota::<T>(&[3, 4]); // rows [0..4], [4..8], [8..12]
    assert_tensor::<T>(&x.narrow(1, 1, 2)?, &[3, 2], &[1.0, 2.0, 5.0, 6.0, 9.0, 10.0]);
    assert_tensor::<T>(&x.narrow(0, 2, 1)?, &[1, 4], &[8.0, 9.0, 10.0, 11.0]);
    assert_tensor::<T>(&x.narrow(-1, 3, 1)?, &[3, 1], &[3.0, 7.0, 11.0]);
    assert_tensor::<T>(&x.narrow(0, 1, 0)?, &[0, 4], &[]);
    assert_tensor::<T>(&x.narrow(0, 0, 3)?, &[3, 4], &(0..12).map(f64::from).collect::<Vec<_>>());

    assert_tensor::<T>(&x.slice(0, 1..)?, &[2, 4], &[4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
    assert_tensor::<T>(&x.slice(1, ..2)?, &[3, 2], &[0.0, 1.0, 4.0, 5.0, 8.0, 9.0]);
    assert_tensor::<T>(&x.slice(1, ..=1)?, &[3, 2], &[0.0, 1.0, 4.0, 5.0, 8.0, 9.0]);
    assert_tensor::<T>(&x.slice(-1, 2..4)?, &[3, 2], &[2.0, 3.0, 6.0, 7.0, 10.0, 11.0]);
    assert_tensor::<T>(&x.slice(0, ..)?, &[3, 4], &(0..12).map(f64::from).collect::<Vec<_>>());
    assert_tensor::<T>(&x.slice(0, 1..=1)?, &[1, 4], &[4.0, 5.0, 6.0, 7.0]);
    assert_tensor::<T>(&x.slice(1, 2..2)?, &[3, 0], &[]);

    assert_tensor::<T>(&x.select(0, 1)?, &[4], &[4.0, 5.0, 6.0, 7.0]);
    assert_tensor::<T>(&x.select(1, 3)?, &[3], &[3.0, 7.0, 11.0]);
    assert_tensor::<T>(&x.select(-1, 0)?, &[3], &[0.0, 4.0, 8.0]);
    assert_tensor::<T>(&x.select(-2, 2)?, &[4], &[8.0, 9.0, 10.0, 11.0]);
    assert_tensor::<T>(&x.select(0, 2)?.select(0, 1)?, &[], &[9.0]);
    // On a transposed tensor.
    assert_tensor::<T>(&x.t()?.narrow(0, 1, 2)?, &[2, 3], &[1.0, 5.0, 9.0, 2.0, 6.0, 10.0]);
    // The source is unchanged.
    assert_eq!(x.dims(), vec![3, 4]);
    Ok(())
}
per_dtype!(narrow_slice_select: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ index_select

fn index_select_values<T: Element>() -> Result<()> {
    let x = iota::<T>(&[3, 2]); // [[0, 1], [2, 3], [4, 5]]
    let i = Tensor::from_vec(vec![2i64, 0, 2], &[3])?;
    assert_tensor::<T>(&x.index_select(0, &i)?, &[3, 2], &[4.0, 5.0, 0.0, 1.0, 4.0, 5.0]);
    let j = Tensor::from_vec(vec![1i32, 1, 0, 1], &[4])?;
    assert_tensor::<T>(&x.index_select(1, &j)?, &[3, 4], &[1.0, 1.0, 0.0, 1.0, 3.0, 3.0, 2.0, 3.0, 5.0, 5.0, 4.0, 5.0]);
    assert_tensor::<T>(&x.index_select(-1, &j)?, &[3, 4], &[1.0, 1.0, 0.0, 1.0, 3.0, 3.0, 2.0, 3.0, 5.0, 5.0, 4.0, 5.0]);
    let none = Tensor::from_vec(Vec::<i64>::new(), &[0])?;
    assert_tensor::<T>(&x.index_select(0, &none)?, &[0, 2], &[]);
    // A 1-d table lookup (embedding style).
    let v = tensor::<T>(&[10.0, 20.0, 30.0], &[3]);
    assert_tensor::<T>(&v.index_select(0, &Tensor::from_vec(vec![2i64, 1], &[2])?)?, &[2], &[30.0, 20.0]);
    Ok(())
}
per_dtype!(index_select_values: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ gather

fn gather_values<T: Element>() -> Result<()> {
    // PyTorch's documentation example: out[i][j] = t[i][index[i][j]].
    let t = tensor::<T>(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let idx = Tensor::from_vec(vec![0i64, 0, 1, 0], &[2, 2])?;
    assert_tensor::<T>(&t.gather(1, &idx)?, &[2, 2], &[1.0, 1.0, 4.0, 3.0]);
    // Along axis 0: out[i][j] = t[index[i][j]][j].
    let idx0 = Tensor::from_vec(vec![1i64, 0, 1, 1], &[2, 2])?;
    assert_tensor::<T>(&t.gather(0, &idx0)?, &[2, 2], &[3.0, 2.0, 3.0, 4.0]);
    assert_tensor::<T>(&t.gather(-2, &idx0)?, &[2, 2], &[3.0, 2.0, 3.0, 4.0]);
    // The index may be shorter or longer along the gathered axis.
    let x = iota::<T>(&[2, 3]); // [[0, 1, 2], [3, 4, 5]]
    let pick = Tensor::from_vec(vec![2i32, 0], &[2, 1])?;
    assert_tensor::<T>(&x.gather(1, &pick)?, &[2, 1], &[2.0, 3.0]);
    let many = Tensor::from_vec(vec![0i64, 2, 1, 1, 1, 0, 2, 2], &[2, 4])?;
    assert_tensor::<T>(&x.gather(1, &many)?, &[2, 4], &[0.0, 2.0, 1.0, 1.0, 4.0, 3.0, 5.0, 5.0]);
    // 3-d along the middle axis: out[i][j][k] = y[i][idx[i][j][k]][k].
    let y = iota::<T>(&[2, 3, 2]);
    let idx = Tensor::from_vec(vec![2i64, 0, 1, 1], &[2, 1, 2])?;
    assert_tensor::<T>(&y.gather(1, &idx)?, &[2, 1, 2], &[4.0, 1.0, 8.0, 9.0]);
    Ok(())
}
per_dtype!(gather_values: f32, f64, i32, i64);

// ------------------------------------------------------------------------------ one_hot

fn one_hot_values<T: Element>() -> Result<()> {
    let labels = Tensor::from_vec(vec![0i64, 2, 1], &[3])?;
    let oh = labels.one_hot(3, T::DTYPE)?;
    assert_tensor::<T>(&oh, &[3, 3], &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
    // i32 labels, more classes than labels, a 2-d label tensor.
    let l2 = Tensor::from_vec(vec![3i32, 0, 0, 1], &[2, 2])?;
    let oh = l2.one_hot(4, T::DTYPE)?;
    let mut want = vec![0.0; 16];
    for (n, &c) in [3usize, 0, 0, 1].iter().enumerate() {
        want[n * 4 + c] = 1.0;
    }
    assert_tensor::<T>(&oh, &[2, 2, 4], &want);
    // A 0-d label gives a vector.
    assert_tensor::<T>(&Tensor::scalar(1i64).one_hot(2, T::DTYPE)?, &[2], &[0.0, 1.0]);
    Ok(())
}
per_dtype!(one_hot_values: f32, f64, i32, i64);

#[test]
fn one_hot_as_bool() -> Result<()> {
    let l = Tensor::from_vec(vec![1i64, 0], &[2])?;
    assert_bools(&l.one_hot(2, DType::Bool)?, &[2, 2], &[false, true, true, false]);
    Ok(())
}
