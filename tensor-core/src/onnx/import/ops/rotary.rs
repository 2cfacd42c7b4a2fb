//! ONNX `RotaryEmbedding` (opset 23), composed: the first `rotary_embedding_dim` features of
//! each head, as pairs `(x1, x2)` (the two halves, or even and odd features when
//! `interleaved`), are rotated to `(cos x1 - sin x2, sin x1 + cos x2)` by the cached angles
//! of each position; the other features pass through.

use super::{known_dims, one, Ctx};
use crate::error::Result;
use crate::tensor::Tensor;

pub(super) fn rotary_embedding(c: &Ctx) -> Result<Vec<Tensor>> {
    let x = c.x(0)?;
    let dims = known_dims(c, &x)?;
    // As [batch, seq, heads, head_size].
    let x = match dims.len() {
        4 => x.permute(&[0, 2, 1, 3])?,
        3 => {
            let heads = c.size(c.int("num_heads", 0), "num_heads")?;
            if heads == 0 || dims[2] % heads != 0 {
                return Err(c.err(format!("a 3-D input needs `num_heads` dividing its hidden size {} (it is {heads})", dims[2])));
            }
            x.reshape(vec![dims[0], dims[1], heads, dims[2] / heads])?
        }
        r => return Err(c.err(format!("input of rank {r}; it must be 3 or 4"))),
    };
    let head_size = known_dims(c, &x)?[3];
    let rotated = match c.size(c.int("rotary_embedding_dim", 0), "rotary_embedding_dim")? {
        0 => head_size,
        d if d <= head_size && d % 2 == 0 => d,
        d => return Err(c.err(format!("rotary_embedding_dim {d} must be even and at most the head size {head_size}"))),
    };
    let (cos, sin) = (angles(c, 1)?, angles(c, 2)?);
    let half = rotated / 2;
    let interleaved = c.int("interleaved", 0) != 0;
    let part = x.narrow(-1, 0, rotated)?;
    let (x1, x2) = if interleaved {
        let every_other = |start: usize| Tensor::from_vec((start..rotated).step_by(2).map(|i| i as i64).collect(), &[half]);
        (part.index_select(-1, &every_other(0)?)?, part.index_select(-1, &every_other(1)?)?)
    } else {
        (part.narrow(-1, 0, half)?, part.narrow(-1, half, half)?)
    };
    let real = cos.mul(&x1)?.sub(&sin.mul(&x2)?)?;
    let imag = sin.mul(&x1)?.add(&cos.mul(&x2)?)?;
    let part = if interleaved {
        let pairs = Tensor::stack(&[&real, &imag], -1)?;
        let mut shape = known_dims(c, &pairs)?;
        shape.pop();
        *shape.last_mut().expect("rank 5") = rotated;
        pairs.reshape(shape)?
    } else {
        Tensor::concat(&[&real, &imag], -1)?
    };
    let y = if rotated < head_size { Tensor::concat(&[&part, &x.narrow(-1, rotated, head_size - rotated)?], -1)? } else { part };
    one(if dims.len() == 3 { y.reshape(dims)? } else { y.permute(&[0, 2, 1, 3])? })
}

/// The cos or sin cache (input `i`) per batch and position, `[batch, seq, 1, rotated / 2]`:
/// rows picked by `position_ids` when given, else the cache is already per batch and position.
fn angles(c: &Ctx, i: usize) -> Result<Tensor> {
    let cache = c.x(i)?;
    let per_position = match c.opt(3) {
        Some(ids) => {
            let id_dims = known_dims(c, &ids)?;
            let cd = known_dims(c, &cache)?;
            let picked = cache.index_select(0, &ids.reshape(vec![ids.numel()])?)?;
            let mut shape = id_dims;
            shape.extend_from_slice(&cd[1..]);
            picked.reshape(shape)?
        }
        None => cache,
    };
    per_position.unsqueeze(2)
}
