//! ONNX `Attention` (opsets 23 to 25), composed from matmul, softmax and masks, as onnx's
//! reference computes it: `softmax(softcap(Q √s · (K √s)ᵀ) + bias) · V`, where the bias
//! adds the attention mask (bool or float, broadcast from the right, padded with -inf up to
//! the key length), the causal and sliding-window limits (bottom-right aligned by the past
//! length or by `nonpad_kv_seqlen`) and the padding of `nonpad_kv_seqlen`. A query row
//! whose bias is -inf everywhere attends nothing: its probabilities (and output) are 0.

use super::math::scalar;
use super::{known_dims, Ctx};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

/// What `qk_matmul_output_mode` exposes as the fourth output.
#[derive(Clone, Copy, PartialEq)]
enum QkOutput {
    /// The (softcapped) scores, modes 0 and 1.
    Scores,
    /// The scores plus the bias, mode 2.
    WithBias,
    /// The probabilities after softmax, mode 3.
    Probabilities,
}

pub(super) fn attention(c: &Ctx) -> Result<Vec<Tensor>> {
    let (q, k, v) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let three_d = match (q.rank(), k.rank(), v.rank()) {
        (3, 3, 3) => true,
        (4, 4, 4) => false,
        r => return Err(c.err(format!("Q, K and V have ranks {r:?}; they must all be 3 or all be 4"))),
    };
    let (q, k, v) = if three_d {
        (heads_first(c, &q, "q_num_heads")?, heads_first(c, &k, "kv_num_heads")?, heads_first(c, &v, "kv_num_heads")?)
    } else {
        (q, k, v)
    };
    let (qd, kd) = (known_dims(c, &q)?, known_dims(c, &k)?);
    let root_scale = root_scale(c, qd[3]);
    let (present_k, present_v, past_len) = match (c.opt(4), c.opt(5)) {
        (Some(pk), Some(pv)) => {
            let past_len = known_dims(c, &pk)?[2];
            (Tensor::concat(&[&pk, &k], 2)?, Tensor::concat(&[&pv, &v], 2)?, Some(past_len))
        }
        (None, None) => (k, v, None),
        _ => return Err(c.err("past_key and past_value must be given together")),
    };
    let kv_len = known_dims(c, &present_k)?[2];
    let bias = bias(c, &q, qd[0], qd[2], kv_len, past_len)?;

    // Grouped-query attention: each K/V head serves `q_heads / kv_heads` query heads in a
    // row ([h0, h0, h1, h1, ...], numpy's `repeat`).
    let (keys, values) = if qd[1] != kd[1] {
        if kd[1] == 0 || qd[1] % kd[1] != 0 {
            return Err(c.err(format!("{} query heads are not a multiple of {} key/value heads", qd[1], kd[1])));
        }
        let reps = qd[1] / kd[1];
        let index: Vec<i64> = (0..qd[1]).map(|h| (h / reps) as i64).collect();
        let index = Tensor::from_vec(index, &[qd[1]])?;
        (present_k.index_select(1, &index)?, present_v.index_select(1, &index)?)
    } else {
        (present_k.clone(), present_v.clone())
    };

    let s = scalar(root_scale, &q);
    let mut scores = q.mul(&s)?.matmul_t(&keys.mul(&s)?, false, true)?;
    let softcap = c.float("softcap", 0.0) as f64;
    if softcap > 0.0 {
        scores = scores.div(softcap)?.tanh()?.mul(softcap)?;
    }
    let with_bias = match &bias {
        Some(b) => scores.add(b)?,
        None => scores.clone(),
    };
    let probabilities = guarded_softmax(c, &with_bias, bias.as_ref(), q.dtype())?;
    let y = probabilities.matmul(&values)?;
    let y = if three_d { y.permute(&[0, 2, 1, 3])?.reshape(vec![qd[0] as i64, qd[2] as i64, -1])? } else { y };
    let qk = match qk_output(c)? {
        QkOutput::Scores => scores,
        QkOutput::WithBias => with_bias,
        QkOutput::Probabilities => probabilities,
    };
    Ok(vec![y, present_k, present_v, qk])
}

/// A 3-D `[batch, seq, heads * size]` input as 4-D `[batch, heads, seq, size]`.
fn heads_first(c: &Ctx, x: &Tensor, heads_attr: &str) -> Result<Tensor> {
    let d = known_dims(c, x)?;
    let heads = c.size(c.int_req(heads_attr)?, heads_attr)?;
    if heads == 0 || d[2] % heads != 0 {
        return Err(c.err(format!("a hidden size of {} does not split into `{heads_attr}` = {heads} heads", d[2])));
    }
    x.reshape(vec![d[0], d[1], heads, d[2] / heads])?.permute(&[0, 2, 1, 3])
}

/// `√scale`, applied to both Q and K as the reference does (so large scores overflow alike);
/// `scale` defaults to `1 / √head_size`.
fn root_scale(c: &Ctx, head_size: usize) -> f64 {
    let scale = if c.has("scale") { c.float("scale", 1.0) as f64 } else { 1.0 / (head_size as f64).sqrt() };
    scale.sqrt()
}

fn qk_output(c: &Ctx) -> Result<QkOutput> {
    match c.int("qk_matmul_output_mode", 0) {
        0 | 1 => Ok(QkOutput::Scores),
        2 => Ok(QkOutput::WithBias),
        3 => Ok(QkOutput::Probabilities),
        m => Err(c.err(format!("qk_matmul_output_mode {m}; it must be 0, 1, 2 or 3"))),
    }
}

/// The additive bias: the mask plus the causal, window and padding limits (0 allowed,
/// -inf not), or `None` when nothing limits the scores.
fn bias(c: &Ctx, q: &Tensor, batch: usize, q_len: usize, kv_len: usize, past_len: Option<usize>) -> Result<Option<Tensor>> {
    let mask = match c.opt(3) {
        Some(m) => Some(mask_bias(c, &m, q, kv_len)?),
        None => None,
    };
    let nonpad = match c.opt(6) {
        Some(_) if past_len.is_some() => return Err(c.err("nonpad_kv_seqlen cannot be combined with past_key and past_value")),
        Some(_) => {
            let n = c.host_ints(6)?;
            if n.len() != batch {
                return Err(c.err(format!("nonpad_kv_seqlen has {} values for a batch of {batch}", n.len())));
            }
            Some(n)
        }
        None => None,
    };
    let limits = Limits {
        causal: c.int("is_causal", 0) != 0,
        left: c.int("left_window_size", -1),
        right: c.int("right_window_size", -1),
        past: past_len.unwrap_or(0) as i64,
        nonpad,
    };
    let structural = limits.bias(q_len, kv_len)?.map(|b| b.cast(q.dtype())).transpose()?;
    Ok(match (mask, structural) {
        (Some(m), Some(s)) => Some(m.add(&s)?),
        (m, s) => m.or(s),
    })
}

/// The mask as an additive bias in Q's dtype, its last axis padded to the key length
/// (with False, or -inf).
fn mask_bias(c: &Ctx, mask: &Tensor, q: &Tensor, kv_len: usize) -> Result<Tensor> {
    let md = known_dims(c, mask)?;
    let last = *md.last().ok_or_else(|| c.err("attn_mask is a scalar; it needs at least a key axis"))?;
    if last > kv_len {
        return Err(c.err(format!("attn_mask covers {last} keys, more than the {kv_len} there are")));
    }
    let mask =
        if mask.dtype() == DType::Bool { Tensor::where_(mask, &scalar(0.0, q), &scalar(f64::NEG_INFINITY, q))? } else { mask.cast(q.dtype())? };
    if last == kv_len {
        return Ok(mask);
    }
    let mut pad = md.clone();
    *pad.last_mut().expect("rank checked above") = kv_len - last;
    let fill = Tensor::full(&pad, f64::NEG_INFINITY, q.dtype());
    Tensor::concat(&[&mask, &fill], -1)
}

/// The limits that depend only on positions: causal and sliding-window, aligned so that
/// query `i` sits at key position `i + offset` (the past length, or per batch
/// `nonpad_kv_seqlen[b] - q_len`), and the keys past `nonpad_kv_seqlen[b]`.
struct Limits {
    causal: bool,
    left: i64,
    right: i64,
    past: i64,
    nonpad: Option<Vec<i64>>,
}

impl Limits {
    /// `[q, kv]`, or `[batch, 1, q, kv]` with `nonpad_kv_seqlen`, of 0 and -inf (computed
    /// here from the sizes, so a graph holds it as a constant); `None` without limits.
    fn bias(&self, q_len: usize, kv_len: usize) -> Result<Option<Tensor>> {
        let windowed = self.left >= 0 || self.right >= 0;
        if !self.causal && !windowed && self.nonpad.is_none() {
            return Ok(None);
        }
        let offsets: Vec<Option<i64>> = match &self.nonpad {
            Some(n) => n.iter().map(|&n| Some(n)).collect(),
            None => vec![None],
        };
        let mut data = Vec::with_capacity(offsets.len() * q_len * kv_len);
        for nonpad in &offsets {
            let offset = nonpad.map_or(self.past, |n| n - q_len as i64);
            for i in 0..q_len as i64 {
                for j in 0..kv_len as i64 {
                    let diff = i + offset - j;
                    let allowed = (!self.causal || diff >= 0)
                        && (self.left < 0 || diff <= self.left)
                        && (self.right < 0 || -diff <= self.right)
                        && nonpad.is_none_or(|n| j < n);
                    data.push(if allowed { 0.0f32 } else { f32::NEG_INFINITY });
                }
            }
        }
        let dims = if self.nonpad.is_some() { vec![offsets.len(), 1, q_len, kv_len] } else { vec![q_len, kv_len] };
        Tensor::from_vec(data, &dims).map(Some)
    }
}

/// Softmax over the keys in `softmax_precision` (if given), back in `dtype`, with the rows
/// the bias masks entirely set to 0 (their scores are replaced before the softmax too, so
/// neither the values nor the gradients see the NaN of an all -inf row).
fn guarded_softmax(c: &Ctx, scores: &Tensor, bias: Option<&Tensor>, dtype: DType) -> Result<Tensor> {
    let scores = if c.has("softmax_precision") {
        let code = c.int("softmax_precision", 1) as i32;
        scores.cast(super::super::decode::dtype(code, || format!("node `{}` (Attention)'s softmax_precision", c.node.name))?)?
    } else {
        scores.clone()
    };
    let Some(bias) = bias else {
        return scores.softmax(-1)?.cast(dtype);
    };
    let dead = bias.max_axes(&[-1], true)?.eq(f64::NEG_INFINITY)?;
    let zero = scalar(0.0, &scores);
    let p = Tensor::where_(&dead, &zero, &scores)?.softmax(-1)?;
    Tensor::where_(&dead, &zero, &p)?.cast(dtype)
}
