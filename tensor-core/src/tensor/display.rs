//! Printing tensors the way PyTorch does: nested brackets, aligned columns, large tensors
//! summarized with `...`, and the dtype at the end. A symbolic tensor prints its name, shape
//! and dtype, since it has no values yet.

use super::{Tensor, Value};
use crate::dtype::DType;
use crate::storage::Storage;
use std::fmt;

/// Tensors with more elements than this are summarized.
const SUMMARIZE_ABOVE: usize = 1000;
/// Elements shown at each end of a summarized dim.
const EDGE_ITEMS: usize = 3;

impl fmt::Display for Tensor {
    /// ```
    /// # use tensor_core::prelude::*;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]], dtype=f32)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(sym) = crate::trace::proxy_of(self).and_then(|p| p.symbol()) {
            return write_symbolic(f, &sym.name(), &self.shape(), self.dtype());
        }
        match &*self.read_value() {
            Value::Symbolic(sym) => write_symbolic(f, &sym.name(), &self.0.shape, self.dtype()),
            Value::Concrete(s) => write_concrete(f, s),
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn write_symbolic(f: &mut fmt::Formatter<'_>, name: &str, shape: &crate::Shape, dtype: DType) -> fmt::Result {
    write!(f, "Tensor(symbolic, name={name}, shape={shape}, dtype={dtype})")
}

fn write_concrete(f: &mut fmt::Formatter<'_>, s: &Storage) -> fmt::Result {
    let standard = s.to_standard_layout();
    let dims = standard.shape().dims().to_vec();
    let summarize = standard.len() > SUMMARIZE_ABOVE;
    let cells = crate::with_array!(&standard, a => format_cells(a.as_slice().expect("standard layout")));
    let width = cells.iter().map(String::len).max().unwrap_or(0);
    let mut out = String::from("tensor(");
    let layout = Layout { dims: &dims, cells: &cells, width, summarize };
    layout.write(&mut out, 0, 0, "tensor(".len());
    out.push_str(", dtype=");
    out.push_str(standard.dtype().name());
    out.push(')');
    f.write_str(&out)
}

struct Layout<'a> {
    dims: &'a [usize],
    cells: &'a [String],
    width: usize,
    summarize: bool,
}

impl Layout<'_> {
    /// Writes the sub-array at `depth` whose first element has flat index `offset`.
    fn write(&self, out: &mut String, depth: usize, offset: usize, indent: usize) {
        if depth == self.dims.len() {
            out.push_str(&format!("{:>w$}", self.cells[offset], w = self.width));
            return;
        }
        let stride: usize = self.dims[depth + 1..].iter().product();
        let n = self.dims[depth];
        out.push('[');
        let last_dim = depth + 1 == self.dims.len();
        let sep =
            if last_dim { ", ".to_string() } else { format!(",{}{}", "\n".repeat(self.dims.len() - depth - 1), " ".repeat(indent + depth + 1)) };
        let shown = self.shown_indices(n);
        for (k, i) in shown.iter().enumerate() {
            if k > 0 {
                out.push_str(&sep);
            }
            match i {
                Some(i) => self.write(out, depth + 1, offset + i * stride, indent),
                None => out.push_str("..."),
            }
        }
        out.push(']');
    }

    fn shown_indices(&self, n: usize) -> Vec<Option<usize>> {
        if self.summarize && n > 2 * EDGE_ITEMS {
            let head = (0..EDGE_ITEMS).map(Some);
            let tail = (n - EDGE_ITEMS..n).map(Some);
            head.chain(std::iter::once(None)).chain(tail).collect()
        } else {
            (0..n).map(Some).collect()
        }
    }
}

/// Formats every element; floats follow PyTorch's choice between integer style (`1.`),
/// fixed 4-decimal style and scientific style.
fn format_cells<T: CellFormat>(values: &[T]) -> Vec<String> {
    let style = T::style(values);
    values.iter().map(|v| v.cell(style)).collect()
}

#[derive(Clone, Copy)]
enum FloatStyle {
    Integer,
    Fixed,
    Scientific,
}

trait CellFormat: Copy {
    fn style(_values: &[Self]) -> FloatStyle {
        FloatStyle::Integer
    }
    fn cell(self, style: FloatStyle) -> String;
}

macro_rules! int_cells {
    ($($t:ty),*) => {$(
        impl CellFormat for $t {
            fn cell(self, _: FloatStyle) -> String {
                self.to_string()
            }
        }
    )*};
}
int_cells!(i32, i64, bool);

macro_rules! float_cells {
    ($($t:ty),*) => {$(
        impl CellFormat for $t {
            fn style(values: &[Self]) -> FloatStyle {
                float_style(values.iter().map(|&v| v as f64))
            }
            fn cell(self, style: FloatStyle) -> String {
                float_cell(self as f64, style)
            }
        }
    )*};
}
float_cells!(f32, f64);

fn float_style(values: impl Iterator<Item = f64>) -> FloatStyle {
    let finite: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    if finite.iter().all(|v| v.fract() == 0.0) {
        let max = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        return if max > 1e8 { FloatStyle::Scientific } else { FloatStyle::Integer };
    }
    let nonzero: Vec<f64> = finite.iter().map(|v| v.abs()).filter(|&v| v > 0.0).collect();
    let max = nonzero.iter().cloned().fold(0.0, f64::max);
    let min = nonzero.iter().cloned().fold(f64::INFINITY, f64::min);
    if max / min > 1000.0 || max > 1e8 || min < 1e-4 {
        FloatStyle::Scientific
    } else {
        FloatStyle::Fixed
    }
}

fn float_cell(v: f64, style: FloatStyle) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    match style {
        FloatStyle::Integer => format!("{v:.0}."),
        FloatStyle::Fixed => format!("{v:.4}"),
        FloatStyle::Scientific => scientific(v),
    }
}

fn scientific(v: f64) -> String {
    let s = format!("{v:.4e}");
    // Rust prints `1.2340e5`; PyTorch prints `1.2340e+05`.
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = if let Some(d) = e.strip_prefix('-') { ('-', d) } else { ('+', e) };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}
