//! The serialized form of ops and their attributes: serde's remote derives mirror the op
//! enums here, so the IR files stay free of serialization. A new op variant fails to compile
//! here until it is given its serialized form (and its arity and checks in `check.rs`). The
//! op kinds (`UnaryOp`, `BinaryOp`, `CmpOp`, `ReduceOp`) are spelled by the wire names their
//! declarations give (`math/kinds.rs`), so a new elementwise function needs nothing here.
//!
//! JSON shapes: an op is `{"family": {"op": {attributes}}}` (`{"conv": {"conv2d": {"stride":
//! [1, 1], "padding": [2, 2]}}}`), unit ops are their name (`{"linalg": "matmul"}`), dtypes
//! are `"f32"`, a shape is a list of dims with `-1` for an unknown dim, and a scalar is
//! `{"float": 0.5}` (`"inf"`, `"-inf"`, `"nan"` for the non-finite, with the exact bits of
//! any other NaN as `"nan:0x..."`), `{"int": 3}` or `{"bool": true}`.

use crate::dim::guard::Expr;
use crate::dim::{SizeAttr, SymDim};
use crate::dtype::{DType, Scalar};
use crate::math::{BinaryOp, CmpOp, ElementwiseOp, ReduceOp, ScalarAttr, UnaryOp};
use crate::ops::{CollectiveOp, ConvOp, IndexOp, LayoutOp, LinalgOp, NnOp, Op, RandomOp, ReductionOp, SymShapeOp};
use crate::shape::{Shape, UNKNOWN};
use serde::de::{self, DeserializeSeed, EnumAccess, Unexpected, VariantAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::SmallVec;
use std::fmt;
use std::marker::PhantomData;

#[derive(Serialize, Deserialize)]
#[serde(remote = "Op", rename_all = "snake_case")]
pub(super) enum OpDef {
    Elementwise(#[serde(with = "ElementwiseOpDef")] ElementwiseOp),
    Reduction(#[serde(with = "ReductionOpDef")] ReductionOp),
    Layout(#[serde(with = "LayoutOpDef")] LayoutOp),
    Index(#[serde(with = "IndexOpDef")] IndexOp),
    Linalg(#[serde(with = "linalg_op")] LinalgOp),
    Nn(#[serde(with = "NnOpDef")] NnOp),
    Conv(#[serde(with = "ConvOpDef")] ConvOp),
    Random(#[serde(with = "RandomOpDef")] RandomOp),
    Collective(#[serde(with = "CollectiveOpDef")] CollectiveOp),
    SymShape(#[serde(with = "SymShapeOpDef")] SymShapeOp),
}

/// Sizes computed from a call's dims: each size a number, `-1` (a reshape's inferred dim), or
/// `{"sym": [..]}`, the expression's steps over the call's argument dims as the file's
/// guards write them (`{"Input": {"leaf": 0, "axis": 0, "index": 0}}`, then
/// `{"Bin": ["Mul", {"Sym": 0}, {"Const": 2}]}`, each step naming earlier ones; the last is
/// the size).
#[derive(Serialize, Deserialize)]
#[serde(remote = "SymShapeOp", rename_all = "snake_case")]
pub(super) enum SymShapeOpDef {
    Reshape(#[serde(with = "size_list")] SmallVec<[SizeAttr; 4]>),
    BroadcastTo(#[serde(with = "size_list")] SmallVec<[SizeAttr; 4]>),
    Narrow {
        axis: usize,
        #[serde(with = "size_attr")]
        start: SizeAttr,
        #[serde(with = "size_attr")]
        len: SizeAttr,
    },
    Arange {
        #[serde(with = "size_attr")]
        len: SizeAttr,
    },
}

/// One size of a [`SymShapeOp`] on the wire.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum WireSize {
    Number(i64),
    Sym { sym: Vec<Expr> },
}

impl From<&SizeAttr> for WireSize {
    fn from(a: &SizeAttr) -> WireSize {
        match a {
            SizeAttr::Fixed(d) => WireSize::Number(*d as i64),
            SizeAttr::Inferred => WireSize::Number(-1),
            SizeAttr::Sym(e) => WireSize::Sym { sym: e.exprs().to_vec() },
        }
    }
}

impl TryFrom<WireSize> for SizeAttr {
    type Error = String;
    fn try_from(w: WireSize) -> Result<SizeAttr, String> {
        match w {
            WireSize::Number(-1) => Ok(SizeAttr::Inferred),
            WireSize::Number(d) => {
                usize::try_from(d).map(SizeAttr::Fixed).map_err(|_| format!("size {d}: a size is a count, or -1 for an inferred dim"))
            }
            WireSize::Sym { sym } => SymDim::from_exprs(sym).map(SizeAttr::Sym),
        }
    }
}

pub(super) mod size_attr {
    use super::*;

    pub fn serialize<S: Serializer>(v: &SizeAttr, s: S) -> Result<S::Ok, S::Error> {
        WireSize::from(v).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SizeAttr, D::Error> {
        SizeAttr::try_from(WireSize::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

pub(super) mod size_list {
    use super::*;

    pub fn serialize<S: Serializer>(v: &SmallVec<[SizeAttr; 4]>, s: S) -> Result<S::Ok, S::Error> {
        v.iter().map(WireSize::from).collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SmallVec<[SizeAttr; 4]>, D::Error> {
        Vec::<WireSize>::deserialize(d)?.into_iter().map(SizeAttr::try_from).collect::<Result<_, _>>().map_err(serde::de::Error::custom)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "ElementwiseOp", rename_all = "snake_case")]
pub(super) enum ElementwiseOpDef {
    Unary(#[serde(with = "kind")] UnaryOp),
    Binary(#[serde(with = "kind")] BinaryOp),
    BinaryScalar {
        #[serde(with = "kind")]
        op: BinaryOp,
        #[serde(with = "scalar_attr")]
        scalar: ScalarAttr,
        scalar_first: bool,
    },
    Compare(#[serde(with = "kind")] CmpOp),
    CompareScalar {
        #[serde(with = "kind")]
        op: CmpOp,
        #[serde(with = "scalar_attr")]
        scalar: ScalarAttr,
    },
    Where,
    Clamp {
        #[serde(with = "opt_scalar_attr")]
        min: Option<ScalarAttr>,
        #[serde(with = "opt_scalar_attr")]
        max: Option<ScalarAttr>,
    },
    Cast(#[serde(with = "DTypeDef")] DType),
}

/// An op kind with its wire names: a unit variant each, as serde's derive would write it.
pub(super) trait WireKind: Copy + PartialEq + 'static {
    /// The kind's name.
    const KIND: &'static str;
    /// Every op of the kind, in declaration order.
    fn all() -> &'static [Self];
    /// The wire name of each op of `all()`, in the same order.
    fn wire_names() -> &'static [&'static str];
}

macro_rules! wire_kinds {
    ($($ty:ident),*) => {$(
        impl WireKind for $ty {
            const KIND: &'static str = stringify!($ty);
            fn all() -> &'static [Self] {
                $ty::ALL
            }
            fn wire_names() -> &'static [&'static str] {
                $ty::WIRE_NAMES
            }
        }
    )*};
}
wire_kinds!(UnaryOp, BinaryOp, CmpOp, ReduceOp);

/// An op kind as its wire name (`"exp"`), read and written as serde's derive does a unit
/// variant (the same JSON, the same errors).
pub(super) mod kind {
    use super::*;

    pub fn serialize<T: WireKind, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        let i = T::all().iter().position(|k| k == v).expect("`all` lists every op of the kind");
        s.serialize_unit_variant(T::KIND, i as u32, T::wire_names()[i])
    }

    pub fn deserialize<'de, T: WireKind, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        d.deserialize_enum(T::KIND, T::wire_names(), KindVisitor(PhantomData))
    }

    struct KindVisitor<T>(PhantomData<T>);

    impl<'de, T: WireKind> Visitor<'de> for KindVisitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "enum {}", T::KIND)
        }
        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
            let (i, variant) = data.variant_seed(VariantIndex::<T>(PhantomData))?;
            variant.unit_variant()?;
            Ok(T::all()[i])
        }
    }

    /// The index of a variant named by its wire name (or by its index).
    struct VariantIndex<T>(PhantomData<T>);

    impl<'de, T: WireKind> DeserializeSeed<'de> for VariantIndex<T> {
        type Value = usize;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
            d.deserialize_identifier(self)
        }
    }

    impl<'de, T: WireKind> Visitor<'de> for VariantIndex<T> {
        type Value = usize;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("variant identifier")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
            let n = T::all().len();
            match usize::try_from(v) {
                Ok(i) if i < n => Ok(i),
                _ => Err(E::invalid_value(Unexpected::Unsigned(v), &format!("variant index 0 <= i < {n}").as_str())),
            }
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
            T::wire_names().iter().position(|n| *n == v).ok_or_else(|| E::unknown_variant(v, T::wire_names()))
        }
        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<usize, E> {
            self.visit_str(&String::from_utf8_lossy(v))
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "ReductionOp", rename_all = "snake_case")]
pub(super) enum ReductionOpDef {
    Reduce {
        #[serde(with = "kind")]
        op: ReduceOp,
        #[serde(with = "small_list")]
        axes: SmallVec<[usize; 4]>,
        keepdim: bool,
    },
    Argmax {
        axis: usize,
        keepdim: bool,
    },
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "LayoutOp", rename_all = "snake_case")]
pub(super) enum LayoutOpDef {
    Reshape(#[serde(with = "small_list")] SmallVec<[isize; 4]>),
    Permute(#[serde(with = "small_list")] SmallVec<[usize; 4]>),
    BroadcastTo(#[serde(with = "shape_def")] Shape),
    SumTo(#[serde(with = "shape_def")] Shape),
    Concat { axis: usize },
    Narrow { axis: usize, start: usize, len: usize },
    Pad { axis: usize, before: usize, after: usize },
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "IndexOp", rename_all = "snake_case")]
pub(super) enum IndexOpDef {
    IndexSelect {
        axis: usize,
    },
    IndexAdd {
        axis: usize,
        size: usize,
    },
    Gather {
        axis: usize,
    },
    ScatterAdd {
        axis: usize,
        size: usize,
    },
    OneHot {
        classes: usize,
        #[serde(with = "DTypeDef")]
        dtype: DType,
    },
    TopK {
        axis: usize,
        k: usize,
        largest: bool,
    },
}

/// The wire forms of a matrix product: the plain product is the unit `"matmul"` (what files
/// held before the flags existed, so they still load); a product reading an operand
/// transposed is `{"matmul_t": {"transpose_a": true, "transpose_b": false}}`, with a flag set.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum WireLinalg {
    Matmul,
    MatmulT { transpose_a: bool, transpose_b: bool },
}

pub(super) mod linalg_op {
    use super::*;

    pub fn serialize<S: Serializer>(op: &LinalgOp, s: S) -> Result<S::Ok, S::Error> {
        let LinalgOp::Matmul { transpose_a, transpose_b } = *op;
        match transpose_a || transpose_b {
            true => WireLinalg::MatmulT { transpose_a, transpose_b },
            false => WireLinalg::Matmul,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LinalgOp, D::Error> {
        match WireLinalg::deserialize(d)? {
            WireLinalg::Matmul => Ok(LinalgOp::MATMUL),
            WireLinalg::MatmulT { transpose_a: false, transpose_b: false } => {
                Err(serde::de::Error::custom("a matmul_t with no flag set: the plain product is written \"matmul\""))
            }
            WireLinalg::MatmulT { transpose_a, transpose_b } => Ok(LinalgOp::Matmul { transpose_a, transpose_b }),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "NnOp", rename_all = "snake_case")]
pub(super) enum NnOpDef {
    Softmax { axis: usize },
    LogSoftmax { axis: usize },
    CrossEntropy,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "ConvOp", rename_all = "snake_case")]
pub(super) enum ConvOpDef {
    Conv2d {
        stride: [usize; 2],
        padding: [usize; 2],
    },
    Conv2dInputGrad {
        stride: [usize; 2],
        padding: [usize; 2],
        input_hw: [usize; 2],
    },
    Conv2dWeightGrad {
        stride: [usize; 2],
        padding: [usize; 2],
        kernel_hw: [usize; 2],
    },
    // A pool's padding is written when not zero, and zero when absent (files from before it).
    MaxPool2d {
        kernel: [usize; 2],
        stride: [usize; 2],
        #[serde(default, skip_serializing_if = "is_zero_pair")]
        padding: [usize; 2],
    },
    MaxPool2dGrad {
        kernel: [usize; 2],
        stride: [usize; 2],
        #[serde(default, skip_serializing_if = "is_zero_pair")]
        padding: [usize; 2],
    },
    Depthwise2d {
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
    },
    Depthwise2dInputGrad {
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        input_hw: [usize; 2],
        multiplier: usize,
    },
    Depthwise2dWeightGrad {
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        kernel_hw: [usize; 2],
    },
}

fn is_zero_pair(p: &[usize; 2]) -> bool {
    *p == [0, 0]
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "DType", rename_all = "lowercase")]
pub(super) enum DTypeDef {
    F32,
    F64,
    I32,
    I64,
    Bool,
}

/// A dtype as a value of its own (for lists and struct fields of wire types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct WireDType(#[serde(with = "DTypeDef")] pub DType);

/// A shape as a value of its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct WireShape(#[serde(with = "shape_def")] pub Shape);

/// A `SmallVec` as a JSON list.
pub(super) mod small_list {
    use super::*;

    pub fn serialize<T: Serialize, const N: usize, S: Serializer>(v: &SmallVec<[T; N]>, s: S) -> Result<S::Ok, S::Error>
    where
        [T; N]: smallvec::Array<Item = T>,
    {
        v.as_slice().serialize(s)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, const N: usize, D: Deserializer<'de>>(d: D) -> Result<SmallVec<[T; N]>, D::Error>
    where
        [T; N]: smallvec::Array<Item = T>,
    {
        Ok(SmallVec::from_vec(Vec::<T>::deserialize(d)?))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "RandomOp", rename_all = "snake_case")]
pub(super) enum RandomOpDef {
    Uniform {
        #[serde(with = "DTypeDef")]
        dtype: DType,
        #[serde(with = "opt_shape")]
        shape: Option<Shape>,
    },
    Normal {
        #[serde(with = "DTypeDef")]
        dtype: DType,
        #[serde(with = "opt_shape")]
        shape: Option<Shape>,
    },
}

/// A shape, or `null` for "the shape of another input".
pub(super) mod opt_shape {
    use super::*;

    pub fn serialize<S: Serializer>(shape: &Option<Shape>, s: S) -> Result<S::Ok, S::Error> {
        match shape {
            Some(shape) => s.serialize_some(&Wrapped(shape)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Shape>, D::Error> {
        Ok(Option::<Unwrapped>::deserialize(d)?.map(|u| u.0))
    }

    struct Wrapped<'a>(&'a Shape);
    impl Serialize for Wrapped<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            shape_def::serialize(self.0, s)
        }
    }

    struct Unwrapped(Shape);
    impl<'de> Deserialize<'de> for Unwrapped {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Unwrapped, D::Error> {
            shape_def::deserialize(d).map(Unwrapped)
        }
    }
}

/// A shape as a list of dims, `-1` for an unknown one. An unknown rank has no form: a trace
/// relaxed across ranks is refused with an error that says so.
pub(super) mod shape_def {
    use super::*;

    pub fn serialize<S: Serializer>(shape: &Shape, s: S) -> Result<S::Ok, S::Error> {
        if shape.is_unknown_rank() {
            return Err(serde::ser::Error::custom(
                "a value of unknown rank (a trace reduce_retracing relaxed across ranks) cannot be exported; export a trace of known rank",
            ));
        }
        let dims: Vec<i64> = shape.dims().iter().map(|&d| if d == UNKNOWN { -1 } else { d as i64 }).collect();
        dims.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Shape, D::Error> {
        let dims = Vec::<i64>::deserialize(d)?;
        let dims: Result<Vec<usize>, String> = dims
            .into_iter()
            .map(|d| match d {
                -1 => Ok(UNKNOWN),
                d if d >= 0 && (d as u64) < UNKNOWN as u64 => Ok(d as usize),
                d => Err(format!("dim {d} is neither a size nor -1 (unknown)")),
            })
            .collect();
        dims.map(Shape::from).map_err(serde::de::Error::custom)
    }
}

/// A scalar attribute, with the exact bits of floats.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WireScalar {
    Float(WireFloat),
    Int(i64),
    Bool(bool),
}

/// A float: a JSON number when finite, else a name (`"inf"`, `"-inf"`, `"nan"`, or
/// `"nan:0x…"` with the bits of a NaN other than the usual one).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum WireFloat {
    Finite(f64),
    Named(String),
}

impl From<Scalar> for WireScalar {
    fn from(s: Scalar) -> WireScalar {
        match s {
            Scalar::Float(v) if v.is_finite() => WireScalar::Float(WireFloat::Finite(v)),
            Scalar::Float(v) if v == f64::INFINITY => WireScalar::Float(WireFloat::Named("inf".into())),
            Scalar::Float(v) if v == f64::NEG_INFINITY => WireScalar::Float(WireFloat::Named("-inf".into())),
            Scalar::Float(v) if v.to_bits() == f64::NAN.to_bits() => WireScalar::Float(WireFloat::Named("nan".into())),
            Scalar::Float(v) => WireScalar::Float(WireFloat::Named(format!("nan:{:#018x}", v.to_bits()))),
            Scalar::Int(i) => WireScalar::Int(i),
            Scalar::Bool(b) => WireScalar::Bool(b),
        }
    }
}

impl TryFrom<WireScalar> for Scalar {
    type Error = String;
    fn try_from(w: WireScalar) -> Result<Scalar, String> {
        Ok(match w {
            WireScalar::Float(WireFloat::Finite(v)) => Scalar::Float(v),
            WireScalar::Float(WireFloat::Named(name)) => Scalar::Float(named_float(&name)?),
            WireScalar::Int(i) => Scalar::Int(i),
            WireScalar::Bool(b) => Scalar::Bool(b),
        })
    }
}

fn named_float(name: &str) -> Result<f64, String> {
    let bits = |hex: &str| u64::from_str_radix(hex, 16).ok().map(f64::from_bits).filter(|v| v.is_nan());
    match name {
        "inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        _ => name.strip_prefix("nan:0x").and_then(bits).ok_or_else(|| format!("`{name}` is not a float (a number, inf, -inf, nan or nan:0x<bits>)")),
    }
}

pub(super) mod scalar_attr {
    use super::*;

    pub fn serialize<S: Serializer>(v: &ScalarAttr, s: S) -> Result<S::Ok, S::Error> {
        WireScalar::from(v.0).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ScalarAttr, D::Error> {
        Scalar::try_from(WireScalar::deserialize(d)?).map(ScalarAttr).map_err(serde::de::Error::custom)
    }
}

pub(super) mod opt_scalar_attr {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<ScalarAttr>, s: S) -> Result<S::Ok, S::Error> {
        v.map(|a| WireScalar::from(a.0)).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ScalarAttr>, D::Error> {
        Option::<WireScalar>::deserialize(d)?.map(|w| Scalar::try_from(w).map(ScalarAttr).map_err(serde::de::Error::custom)).transpose()
    }
}

/// An op as a value of its own.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct WireOp(#[serde(with = "OpDef")] pub Op);

/// An elementwise op as a value of its own (the instructions of fused programs).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct WireElementwise(#[serde(with = "ElementwiseOpDef")] pub ElementwiseOp);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(op: Op) -> (String, Op) {
        let text = serde_json::to_string(&WireOp(op)).unwrap();
        let back: WireOp = serde_json::from_str(&text).unwrap();
        (text, back.0)
    }

    #[test]
    fn ops_read_as_their_family_and_attributes() {
        let (text, back) = round_trip(Op::Conv(ConvOp::Conv2d { stride: [1, 1], padding: [2, 2] }));
        assert_eq!(text, r#"{"conv":{"conv2d":{"stride":[1,1],"padding":[2,2]}}}"#);
        assert_eq!(back, Op::Conv(ConvOp::Conv2d { stride: [1, 1], padding: [2, 2] }));
        assert_eq!(round_trip(Op::Linalg(LinalgOp::MATMUL)), (r#"{"linalg":"matmul"}"#.to_string(), Op::Linalg(LinalgOp::MATMUL)));
        let flagged = Op::Linalg(LinalgOp::Matmul { transpose_a: false, transpose_b: true });
        assert_eq!(round_trip(flagged.clone()), (r#"{"linalg":{"matmul_t":{"transpose_a":false,"transpose_b":true}}}"#.to_string(), flagged));
        let (text, _) = round_trip(Op::Layout(LayoutOp::BroadcastTo(Shape::new(&[UNKNOWN, 3]))));
        assert_eq!(text, r#"{"layout":{"broadcast_to":[-1,3]}}"#);
    }

    #[test]
    fn scalar_attributes_keep_their_bits() {
        let odd_nan = f64::from_bits(0x7ff8_0000_0000_0123);
        for v in [0.1, -0.0, 1e300, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, odd_nan, f64::MIN_POSITIVE / 4.0] {
            let op = Op::Elementwise(ElementwiseOp::BinaryScalar { op: BinaryOp::Mul, scalar: ScalarAttr(Scalar::Float(v)), scalar_first: false });
            let (text, back) = round_trip(op.clone());
            assert_eq!(back, op, "{text}");
        }
        let clamp = Op::Elementwise(ElementwiseOp::Clamp { min: Some(ScalarAttr(Scalar::Int(-3))), max: None });
        assert_eq!(round_trip(clamp.clone()), (r#"{"elementwise":{"clamp":{"min":{"int":-3},"max":null}}}"#.to_string(), clamp));
    }

    #[test]
    fn sizes_computed_at_run_time_keep_their_expressions() {
        use crate::dim::guard::{BinOp, Term};
        let n0 = Expr::Input { leaf: 1, axis: 0, index: 0 };
        let twice = SymDim::from_exprs(vec![n0, Expr::Bin(BinOp::Mul, Term::Sym(0), Term::Const(2))]).unwrap();
        let op = Op::SymShape(SymShapeOp::Reshape(smallvec::smallvec![SizeAttr::Sym(twice.clone()), SizeAttr::Inferred, SizeAttr::Fixed(3)]));
        let (text, back) = round_trip(op.clone());
        assert_eq!(
            text,
            r#"{"sym_shape":{"reshape":[{"sym":[{"Input":{"leaf":1,"axis":0,"index":0}},{"Bin":["Mul",{"Sym":0},{"Const":2}]}]},-1,3]}}"#
        );
        assert_eq!(back, op);
        let dims = |slot: usize, axis: usize| (slot, axis).eq(&(1, 0)).then_some(5);
        assert_eq!(twice.eval(&dims), Some(10));
        // A step naming itself or a later one, no steps, a negative size: errors, not panics.
        for bad in [
            r#"{"sym_shape":{"arange":{"len":{"sym":[{"Bin":["Mul",{"Sym":0},{"Const":2}]}]}}}}"#,
            r#"{"sym_shape":{"arange":{"len":{"sym":[]}}}}"#,
            r#"{"sym_shape":{"broadcast_to":[-2, 3]}}"#,
        ] {
            assert!(serde_json::from_str::<WireOp>(bad).is_err(), "{bad}");
        }
    }

    /// `GeluTanh` -> `gelu_tanh`: what serde's derive spelled each kind before the
    /// declarations gave the names, so files written then still load.
    fn snake(variant: &str) -> String {
        variant.chars().enumerate().flat_map(|(i, c)| (c.is_uppercase() && i > 0).then_some('_').into_iter().chain(c.to_lowercase())).collect()
    }

    fn kind_round_trips<T: WireKind + std::fmt::Debug>() {
        for &k in T::all() {
            let op = serde_json::to_string(&KindOf(k)).unwrap();
            assert_eq!(op, format!("\"{}\"", snake(&format!("{k:?}"))));
            assert_eq!(serde_json::from_str::<KindOf<T>>(&op).unwrap().0, k);
        }
    }

    #[derive(Serialize, Deserialize)]
    #[serde(bound = "T: WireKind")]
    struct KindOf<T: WireKind>(#[serde(with = "kind")] T);

    #[test]
    fn op_kinds_keep_their_wire_names() {
        kind_round_trips::<UnaryOp>();
        kind_round_trips::<BinaryOp>();
        kind_round_trips::<CmpOp>();
        kind_round_trips::<ReduceOp>();
        let err = serde_json::from_str::<KindOf<CmpOp>>(r#""lte""#).map(|_| ()).unwrap_err().to_string();
        assert_eq!(err, "unknown variant `lte`, expected one of `eq`, `ne`, `lt`, `le`, `gt`, `ge` at line 1 column 5");
    }

    #[test]
    fn malformed_attributes_are_errors() {
        for bad in [
            r#"{"layout":{"broadcast_to":[-2]}}"#,
            r#"{"elementwise":{"binary_scalar":{"op":"mul","scalar":{"float":"nan:0x1"},"scalar_first":false}}}"#,
            r#"{"linalg":"dot"}"#,
            r#"{"linalg":{"matmul_t":{"transpose_a":false,"transpose_b":false}}}"#,
            r#"{"linalg":{"matmul_t":{"transpose_a":true}}}"#,
            r#"{"linalg":{"matmul_t":{"transpose_a":true,"transpose_b":false,"conj":true}}}"#,
        ] {
            assert!(serde_json::from_str::<WireOp>(bad).is_err(), "{bad}");
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "CollectiveOp", rename_all = "snake_case")]
pub(super) enum CollectiveOpDef {
    AllReduce { mean: bool, world: usize },
    Broadcast { root: usize, world: usize },
    AllGather { world: usize },
}
