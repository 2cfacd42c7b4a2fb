//! ONNX `CausalConvWithState` (opset 27): a depthwise 1-D convolution that sees only the
//! past, its left context the previous call's state (or zeros), with an optional SiLU; the
//! last `k - 1` positions it saw are the state for the next call.

use super::{known_dims, Ctx};
use crate::error::Result;
use crate::tensor::Tensor;

pub(super) fn causal_conv_with_state(c: &Ctx) -> Result<Vec<Tensor>> {
    let (x, w) = (c.x(0)?, c.x(1)?);
    let (xd, wd) = (known_dims(c, &x)?, known_dims(c, &w)?);
    if xd.len() != 3 || wd.len() != 3 || wd[0] != xd[1] || wd[1] != 1 || wd[2] == 0 {
        return Err(c.err(format!("input {xd:?} must be [batch, channels, length] and weight {wd:?} [channels, 1, k]")));
    }
    let context = wd[2] - 1;
    let past = match c.opt(3) {
        Some(p) => p,
        None => Tensor::zeros(&[xd[0], xd[1], context], x.dtype()),
    };
    let padded = Tensor::concat(&[&past, &x], 2)?;
    let y = padded.conv1d(&w, c.opt(2).as_ref(), 1, 0, xd[1])?;
    let y = match c.string("activation", "none").as_str() {
        "none" => y,
        "silu" | "swish" => y.mul(&y.sigmoid()?)?,
        a => return Err(c.err(format!("activation `{a}`; it must be none, silu or swish"))),
    };
    let seen = known_dims(c, &padded)?[2];
    Ok(vec![y, padded.narrow(2, seen - context, context)?])
}
