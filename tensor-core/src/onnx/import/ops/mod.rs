//! The op table: each ONNX op, from the opset its semantics start, as the function that
//! builds its outputs from tensor-core ops. Adding an op is one row here and its builder
//! (`math.rs`: elementwise ops and reductions; `shape.rs`: shapes, indexing, constants;
//! `nn.rs`: matmul, convolution, pooling, normalization, with `window_nd.rs` for dilated,
//! 3-D and ceil_mode convolutions and pools; `attention.rs`, `rotary.rs`,
//! `linear_attention.rs`, `causal_conv.rs`: the transformer ops; `resize.rs`: Resize and Upsample; `grid.rs`:
//! GridSample and AffineGrid).

mod attention;
mod causal_conv;
mod composed;
mod grid;
mod indexing;
mod linear_attention;
mod math;
mod nn;
mod resize;
mod rotary;
mod shape;
mod window_nd;

use super::super::proto::{attribute_type, AttributeProto, TensorProto};
use super::model::Node;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::normalize_axis;
use crate::tensor::Tensor;

/// A builder: the node's outputs from its inputs and attributes.
pub(crate) type OpFn = fn(&Ctx) -> Result<Vec<Tensor>>;

/// `(op, since, builder)`: `builder` serves opsets from `since` up to the next row of the same
/// op. An op's first row is the opset that introduced it.
#[rustfmt::skip]
const TABLE: &[(&str, i64, OpFn)] = &[
    // elementwise, one operand
    ("Abs", 1, math::abs), ("Neg", 1, math::neg), ("Exp", 1, math::exp), ("Log", 1, math::log), ("Sqrt", 1, math::sqrt),
    ("Tanh", 1, math::tanh), ("Sigmoid", 1, math::sigmoid), ("Relu", 1, math::relu), ("Sign", 9, math::sign), ("Not", 1, math::not),
    ("Erf", 9, math::erf), ("Sin", 7, math::sin), ("Cos", 7, math::cos), ("Tan", 7, math::tan), ("Sinh", 9, math::sinh),
    ("Cosh", 9, math::cosh), ("Reciprocal", 1, math::reciprocal), ("Identity", 1, math::identity),
    // activations
    ("LeakyRelu", 1, math::leaky_relu), ("Elu", 1, math::elu), ("Selu", 1, math::selu), ("Celu", 12, math::celu),
    ("HardSigmoid", 1, math::hard_sigmoid), ("HardSwish", 14, math::hard_swish), ("Softsign", 1, math::softsign),
    ("Softplus", 1, math::softplus), ("ThresholdedRelu", 10, math::thresholded_relu), ("Mish", 18, math::mish),
    ("PRelu", 1, math::prelu), ("Gelu", 20, math::gelu), ("Clip", 1, math::clip_v1), ("Clip", 11, math::clip_v11),
    // elementwise, two or more operands
    ("Add", 1, math::add), ("Sub", 1, math::sub), ("Mul", 1, math::mul), ("Div", 1, math::div), ("Pow", 1, math::pow),
    ("Max", 1, math::max), ("Min", 1, math::min), ("Sum", 1, math::sum), ("Mean", 1, math::mean),
    ("Equal", 1, math::equal), ("Less", 1, math::less), ("LessOrEqual", 12, math::less_or_equal), ("Greater", 1, math::greater),
    ("GreaterOrEqual", 12, math::greater_or_equal), ("And", 1, math::and), ("Or", 1, math::or), ("Xor", 1, math::xor),
    ("Where", 9, math::where_), ("Cast", 6, math::cast), ("CastLike", 15, math::cast_like),
    // reductions (axes an input from ReduceSum 13 and the others 18)
    ("ReduceSum", 1, math::reduce_sum_v1), ("ReduceSum", 13, math::reduce_sum_v13),
    ("ReduceMean", 1, math::reduce_mean_v1), ("ReduceMean", 18, math::reduce_mean_v18),
    ("ReduceMax", 1, math::reduce_max_v1), ("ReduceMax", 18, math::reduce_max_v18),
    ("ReduceMin", 1, math::reduce_min_v1), ("ReduceMin", 18, math::reduce_min_v18),
    ("ReduceL1", 1, math::reduce_l1_v1), ("ReduceL1", 18, math::reduce_l1_v18),
    ("ReduceL2", 1, math::reduce_l2_v1), ("ReduceL2", 18, math::reduce_l2_v18),
    ("ReduceSumSquare", 1, math::reduce_sum_square_v1), ("ReduceSumSquare", 18, math::reduce_sum_square_v18),
    ("ReduceLogSum", 1, math::reduce_log_sum_v1), ("ReduceLogSum", 18, math::reduce_log_sum_v18),
    ("ReduceLogSumExp", 1, math::reduce_log_sum_exp_v1), ("ReduceLogSumExp", 18, math::reduce_log_sum_exp_v18),
    ("ArgMax", 1, math::arg_max), ("ArgMin", 1, math::arg_min),
    ("TopK", 1, math::top_k_v1), ("TopK", 10, math::top_k_v10), ("CumSum", 11, math::cum_sum), ("Trilu", 14, math::trilu), ("Mod", 10, math::modulo),
    // shapes, indexing, constants
    ("Reshape", 5, shape::reshape), ("Flatten", 1, shape::flatten), ("Squeeze", 1, shape::squeeze_v1), ("Squeeze", 13, shape::squeeze_v13),
    ("Unsqueeze", 1, shape::unsqueeze_v1), ("Unsqueeze", 13, shape::unsqueeze_v13), ("Transpose", 1, shape::transpose),
    ("Concat", 1, shape::concat), ("Split", 1, shape::split_v1), ("Split", 13, shape::split_v13), ("Slice", 1, shape::slice_v1),
    ("Slice", 10, shape::slice_v10), ("Gather", 1, shape::gather), ("GatherElements", 11, shape::gather_elements),
    ("Expand", 8, shape::expand), ("Tile", 1, shape::tile), ("Pad", 2, shape::pad_v2), ("Pad", 11, shape::pad_v11),
    ("Shape", 1, shape::shape), ("Size", 1, shape::size), ("Constant", 1, shape::constant), ("ConstantOfShape", 9, shape::constant_of_shape),
    ("Range", 11, shape::range), ("OneHot", 9, shape::one_hot), ("Dropout", 1, shape::dropout),
    // networks
    ("MatMul", 1, nn::matmul), ("Gemm", 1, nn::gemm), ("Conv", 1, nn::conv), ("MaxPool", 1, nn::max_pool),
    ("GlobalMaxPool", 1, nn::global_max_pool), ("LpPool", 1, window_nd::lp_pool), ("Softmax", 1, nn::softmax_v1), ("Softmax", 13, nn::softmax_v13),
    ("LogSoftmax", 1, nn::log_softmax_v1), ("LogSoftmax", 13, nn::log_softmax_v13), ("Hardmax", 1, nn::hardmax_v1),
    ("Hardmax", 13, nn::hardmax_v13), ("LayerNormalization", 17, nn::layer_norm), ("InstanceNormalization", 1, nn::instance_norm),
    ("BatchNormalization", 1, nn::batch_norm), ("AveragePool", 1, nn::avg_pool), ("GlobalAveragePool", 1, nn::global_avg_pool),
    ("ConvTranspose", 1, nn::conv_transpose), ("GroupNormalization", 18, nn::group_norm_v18), ("GroupNormalization", 21, nn::group_norm_v21),
    ("RMSNormalization", 23, nn::rms_norm), ("NegativeLogLikelihoodLoss", 12, nn::nll_loss),
    ("SoftmaxCrossEntropyLoss", 12, nn::softmax_cross_entropy), ("Einsum", 12, nn::einsum),
    // transformers, resizing and sampling (issue 32's second batch)
    ("Attention", 23, attention::attention), ("RotaryEmbedding", 23, rotary::rotary_embedding),
    ("Swish", 24, math::swish), ("SwiGLU", 28, math::swiglu),
    ("Resize", 10, resize::resize_v10), ("Resize", 11, resize::resize_v11), ("Upsample", 7, resize::resize_v10),
    ("GridSample", 16, grid::grid_sample), ("AffineGrid", 20, grid::affine_grid),
    ("CausalConvWithState", 27, causal_conv::causal_conv_with_state), ("LinearAttention", 27, linear_attention::linear_attention),
    // the small ops (issue 32's conformance work): elementwise, reductions, scans
    ("Floor", 1, math::floor), ("Ceil", 1, math::ceil), ("Round", 11, math::round), ("Asin", 7, math::asin),
    ("Acos", 7, math::acos), ("Atan", 7, math::atan), ("Asinh", 9, math::asinh), ("Acosh", 9, math::acosh),
    ("Atanh", 9, math::atanh), ("IsNaN", 9, math::is_nan), ("IsInf", 10, math::is_inf),
    ("ReduceProd", 1, math::reduce_prod_v1), ("ReduceProd", 18, math::reduce_prod_v18), ("CumProd", 26, math::cum_prod),
    // indexing with indices known when the model runs
    ("Scatter", 9, indexing::scatter_elements), ("ScatterElements", 11, indexing::scatter_elements), ("ScatterND", 11, indexing::scatter_nd),
    ("GatherND", 11, indexing::gather_nd), ("Compress", 9, indexing::compress), ("ReverseSequence", 10, indexing::reverse_sequence),
    ("NonZero", 9, indexing::non_zero), ("EyeLike", 9, indexing::eye_like), ("SpaceToDepth", 1, indexing::space_to_depth),
    ("DepthToSpace", 1, indexing::depth_to_space), ("CenterCropPad", 18, indexing::center_crop_pad),
    // compositions
    ("LpNormalization", 1, composed::lp_normalization), ("MeanVarianceNormalization", 9, composed::mean_variance_normalization),
    ("LRN", 1, composed::lrn), ("Shrink", 9, composed::shrink), ("HannWindow", 17, composed::hann_window),
    ("HammingWindow", 17, composed::hamming_window), ("BlackmanWindow", 17, composed::blackman_window),
];

/// The float inputs, by op and position, whose values a builder reads on the host (see
/// [`OnnxModel::value_inputs`](super::OnnxModel::value_inputs)); integer ones are taken as
/// constants anyway.
const VALUE_INPUTS: &[(&str, &[usize])] = &[("Resize", &[1, 2, 3]), ("Upsample", &[1]), ("Dropout", &[1]), ("OneHot", &[1]), ("Range", &[0, 1, 2])];

/// Whether `op` reads its input `i` as a value on the host.
pub(crate) fn reads_value(op: &str, i: usize) -> bool {
    VALUE_INPUTS.iter().any(|(o, slots)| *o == op && slots.contains(&i))
}

/// What the table has for an op at an opset.
pub(crate) enum Lookup {
    Found(OpFn),
    /// The op exists from this later opset only.
    NotInOpset(i64),
    Unsupported,
}

/// The builder of `op` at `opset`: the row with the largest `since` not above it.
pub(crate) fn lookup(op: &str, opset: i64) -> Lookup {
    let rows = TABLE.iter().filter(|r| r.0 == op);
    match rows.clone().filter(|r| r.1 <= opset).max_by_key(|r| r.1) {
        Some(r) => Lookup::Found(r.2),
        None => rows.map(|r| r.1).min().map_or(Lookup::Unsupported, Lookup::NotInOpset),
    }
}

/// The ONNX ops import maps (at some opset), sorted.
///
/// ```
/// assert!(tensor_core::onnx::supported_ops().contains(&"Conv"));
/// ```
pub fn supported_ops() -> Vec<&'static str> {
    let mut ops: Vec<&str> = TABLE.iter().map(|r| r.0).collect();
    ops.sort_unstable();
    ops.dedup();
    ops
}

/// A node as its builder sees it: attributes, inputs (absent optional ones `None`).
pub(crate) struct Ctx<'a> {
    pub node: &'a Node,
    pub inputs: &'a [Option<Tensor>],
}

impl Ctx<'_> {
    /// An `Err` about this node.
    pub fn err(&self, problem: impl Into<String>) -> Error {
        Error::OnnxImport { node: self.node.name.clone(), op: self.node.op.clone(), problem: problem.into() }
    }

    /// Input `i`, which the op requires.
    pub fn x(&self, i: usize) -> Result<Tensor> {
        self.opt(i).ok_or_else(|| self.err(format!("input {i} is missing (the op requires it)")))
    }

    /// Input `i`, if given.
    pub fn opt(&self, i: usize) -> Option<Tensor> {
        self.inputs.get(i).cloned().flatten()
    }

    /// The inputs given, in order (for variadic ops).
    pub fn all(&self) -> Vec<Tensor> {
        self.inputs.iter().flatten().cloned().collect()
    }

    /// Whether the node asks for output `i` (names it, not empty).
    pub fn wants(&self, i: usize) -> bool {
        self.node.outputs.get(i).is_some_and(|n| !n.is_empty())
    }

    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attrs.iter().find(|a| a.name == name)
    }

    /// Integer attribute `name`, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i)
    }

    /// Integer attribute `name`, which the op requires.
    pub fn int_req(&self, name: &str) -> Result<i64> {
        self.attr(name).map(|a| a.i).ok_or_else(|| self.err(format!("attribute `{name}` is missing")))
    }

    /// Float attribute `name`, or `default`.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.attr(name).map_or(default, |a| if a.r#type == attribute_type::INT { a.i as f32 } else { a.f })
    }

    /// Integer-list attribute `name`, if present.
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }

    /// Float-list attribute `name`, if present.
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }

    /// String attribute `name`, or `default`.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.attr(name).map_or(default.to_string(), |a| String::from_utf8_lossy(&a.s).into_owned())
    }

    /// Tensor attribute `name`, if present.
    pub fn tensor_attr(&self, name: &str) -> Option<&TensorProto> {
        self.attr(name).and_then(|a| a.t.as_ref())
    }

    /// The attributes this node has, by name.
    pub fn has(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    /// Input `i`'s values as integers: it must be known when the model runs (an
    /// initializer, a constant, a model input given a value, or shape arithmetic).
    pub fn host_ints(&self, i: usize) -> Result<Vec<i64>> {
        let t = self.x(i)?;
        self.read(&t, i, |t| t.cast(DType::I64)?.to_vec::<i64>())
    }

    /// Input `i`'s values as f64 (known when the model runs, as for [`host_ints`](Self::host_ints)).
    pub fn host_floats(&self, i: usize) -> Result<Vec<f64>> {
        let t = self.x(i)?;
        self.read(&t, i, |t| t.cast(DType::F64)?.to_vec::<f64>())
    }

    fn read<T>(&self, t: &Tensor, i: usize, f: impl FnOnce(&Tensor) -> Result<T>) -> Result<T> {
        if t.is_symbolic() {
            let name = self.node.inputs.get(i).map_or("", String::as_str);
            return Err(self.err(format!(
                "input {i} (`{name}`) must be known when the model runs (tensor-core needs it as a Rust value), but inside this trace it is computed from the traced inputs; give it as an initializer or a constant, or run the model eagerly"
            )));
        }
        crate::tensor::context::eagerly(|| f(t))
    }

    /// Axis `axis` (negative: from the end) of a tensor of rank `rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize> {
        isize::try_from(axis)
            .ok()
            .and_then(|a| normalize_axis(a, rank))
            .ok_or_else(|| self.err(format!("axis {axis} is out of range for rank {rank}")))
    }

    /// Axes of rank `rank`, normalized.
    pub fn axes(&self, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
        axes.iter().map(|&a| self.axis(a, rank)).collect()
    }

    /// A dim or size read from the model, as `usize`.
    pub fn size(&self, v: i64, what: &str) -> Result<usize> {
        usize::try_from(v).ok().filter(|&v| v <= 1 << 31).ok_or_else(|| self.err(format!("{what} {v} is negative or too large")))
    }
}

/// One output.
pub(crate) fn one(t: Tensor) -> Result<Vec<Tensor>> {
    Ok(vec![t])
}

/// The concrete dims of `t` (a traced tensor's may be unknown: then an `Err` for `ctx`).
pub(crate) fn known_dims(ctx: &Ctx, t: &Tensor) -> Result<Vec<usize>> {
    let shape = t.raw_shape();
    if shape.is_unknown_rank() || !shape.is_known() {
        return Err(ctx.err(format!("needs the dims of its input, which are unknown in this trace ({shape}); trace with known dims")));
    }
    Ok(shape.dims().to_vec())
}
