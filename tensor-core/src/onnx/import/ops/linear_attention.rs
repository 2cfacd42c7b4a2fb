//! ONNX `LinearAttention` (opset 27), unrolled over the sequence as onnx's reference runs it:
//! a state `S` of `[batch, kv_heads, d_k, d_v]` per step decays by `exp(decay)` (gated
//! rules), is corrected by `beta (v - Sᵀk)` (delta rules), gains `k vᵀ`, and each query head
//! reads `scale · qᵀS` from its key/value head's state.

use super::{known_dims, Ctx};
use crate::error::Result;
use crate::tensor::Tensor;

pub(super) fn linear_attention(c: &Ctx) -> Result<Vec<Tensor>> {
    let (q, k, v) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let rule = c.string("update_rule", "gated_delta");
    let (gated, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => return Err(c.err(format!("update_rule `{r}`; it must be linear, gated, delta or gated_delta"))),
    };
    let (q_heads, kv_heads) = (c.size(c.int_req("q_num_heads")?, "q_num_heads")?, c.size(c.int_req("kv_num_heads")?, "kv_num_heads")?);
    if kv_heads == 0 || q_heads % kv_heads != 0 {
        return Err(c.err(format!("q_num_heads {q_heads} must be a positive multiple of kv_num_heads {kv_heads}")));
    }
    let (decay, beta) = (c.opt(4), c.opt(5));
    if gated != decay.is_some() || delta != beta.is_some() {
        return Err(c.err(format!("update_rule `{rule}` needs decay {} and beta {}", given(gated), given(delta))));
    }
    let qd = known_dims(c, &q)?;
    if qd.len() != 3 || k.rank() != 3 || v.rank() != 3 {
        return Err(c.err("query, key and value must be rank 3 [batch, seq, heads * size]"));
    }
    let (b, t) = (qd[0], qd[1]);
    let (q4, k4, v4) = (heads_first(c, &q, q_heads)?, heads_first(c, &k, kv_heads)?, heads_first(c, &v, kv_heads)?);
    let (d_k, d_v) = (known_dims(c, &k4)?[3], known_dims(c, &v4)?[3]);
    let per_step = |x: &Tensor, heads: usize| -> Result<Tensor> {
        // [b, t, heads * n] -> [b, heads, t, n], or [b, t, heads] -> [b, heads, t, 1].
        let last = known_dims(c, x)?[2];
        x.reshape(vec![b, t, heads, last / heads])?.permute(&[0, 2, 1, 3])
    };
    let decay = decay.map(|d| per_step(&d, kv_heads)).transpose()?;
    let beta = match beta {
        Some(beta) => {
            let heads = known_dims(c, &beta)?[2];
            Some(per_step(&beta, heads)?)
        }
        None => None,
    };
    let mut state = match c.opt(3) {
        Some(s) => s,
        None => Tensor::zeros(&[b, kv_heads, d_k, d_v], q.dtype()),
    };
    let scale = c.float("scale", 0.0) as f64;
    let scale = if scale == 0.0 { 1.0 / (d_k as f64).sqrt() } else { scale };
    let group: Vec<i64> = (0..q_heads).map(|h| (h / (q_heads / kv_heads)) as i64).collect();
    let group = Tensor::from_vec(group, &[q_heads])?;
    let mut outputs = Vec::with_capacity(t);
    for i in 0..t {
        let (q_t, k_t, mut v_t) = (q4.select(2, i)?, k4.select(2, i)?, v4.select(2, i)?);
        if let Some(decay) = &decay {
            state = state.mul(&decay.select(2, i)?.exp()?.unsqueeze(-1)?)?;
        }
        if let Some(beta) = &beta {
            let retrieved = k_t.unsqueeze(-2)?.matmul(&state)?.squeeze(-2)?;
            v_t = beta.select(2, i)?.mul(&v_t.sub(&retrieved)?)?;
        }
        state = state.add(&k_t.unsqueeze(-1)?.mul(&v_t.unsqueeze(-2)?)?)?;
        let read = if q_heads == kv_heads { state.clone() } else { state.index_select(1, &group)? };
        outputs.push(q_t.unsqueeze(-2)?.matmul(&read)?.squeeze(-2)?.mul(scale)?);
    }
    let out = Tensor::stack(&outputs.iter().collect::<Vec<_>>(), 2)?;
    Ok(vec![out.permute(&[0, 2, 1, 3])?.reshape(vec![b, t, q_heads * d_v])?, state])
}

fn given(yes: bool) -> &'static str {
    if yes {
        "given"
    } else {
        "absent"
    }
}

/// `[batch, seq, heads * size]` as `[batch, heads, seq, size]`.
fn heads_first(c: &Ctx, x: &Tensor, heads: usize) -> Result<Tensor> {
    let d = known_dims(c, x)?;
    if d[2] % heads != 0 {
        return Err(c.err(format!("a hidden size of {} does not split into {heads} heads", d[2])));
    }
    x.reshape(vec![d[0], d[1], heads, d[2] / heads])?.permute(&[0, 2, 1, 3])
}
