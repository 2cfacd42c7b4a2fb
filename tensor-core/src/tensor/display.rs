//! Printing tensors the way PyTorch does: nested brackets, aligned columns, large tensors
//! summarized with `...`, and the dtype at the end. A symbolic tensor prints its name, shape
//! and dtype, since it has no values yet.

use super::{context, Tensor, Value};
use crate::dtype::DType;
use crate::storage::Storage;
use std::cell::RefCell;
use std::fmt;

thread_local! {
    /// While a traced `tprint!` formats its arguments, the traced tensors they print.
    static CAPTURED: RefCell<Option<Vec<Tensor>>> = const { RefCell::new(None) };
}

/// Marks where a captured tensor's run-time value goes in trace-time formatted text.
pub(crate) const PRINT_MARK: char = '\u{1}';

/// Runs `format`, recording the traced tensors it prints: each is written as its index in
/// the returned list between two `PRINT_MARK`s, for `tprint!` to print its run-time value.
pub(crate) fn capture_printed(format: impl FnOnce() -> String) -> (String, Vec<Tensor>) {
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let text = format();
    let captured = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (text, captured)
}

/// While `capture_printed` runs: records `t` and writes its marker; otherwise `None`.
fn capture(t: &Tensor, f: &mut fmt::Formatter<'_>) -> Option<fmt::Result> {
    CAPTURED.with(|c| {
        let mut c = c.borrow_mut();
        let list = c.as_mut()?;
        list.push(t.clone());
        Some(write!(f, "{PRINT_MARK}{}{PRINT_MARK}", list.len() - 1))
    })
}

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
        let stand_in = context::stand_in(self);
        let sym = stand_in.as_ref().unwrap_or(self).symbol();
        match sym {
            Some(sym) => capture(self, f).unwrap_or_else(|| write_symbolic(f, &sym.name(), &self.shape(), self.dtype())),
            // A tensor from outside the trace that the body has not used yet is external
            // state too: a traced `tprint!` must print its value at run time, not bake in
            // the value it has now.
            None if context::is_tracing() && self.0.origin_trace != context::current_trace() => {
                capture(self, f).unwrap_or_else(|| write_concrete(f, &self.storage("print").map_err(|_| fmt::Error)?))
            }
            None => match &*self.read_value() {
                Value::Concrete(s) => write_concrete(f, s),
                Value::Symbolic(_) => unreachable!("checked above"),
            },
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
    // `{:.2}` on a one-element float tensor formats its value, as Python's format() does.
    if let (Some(p), 1) = (f.precision(), s.len()) {
        match s {
            Storage::F32(a) => return write!(f, "{:.p$}", a.iter().next().expect("one element")),
            Storage::F64(a) => return write!(f, "{:.p$}", a.iter().next().expect("one element")),
            _ => {}
        }
    }
    let standard = s.to_standard_layout();
    let dims = standard.shape().dims().to_vec();
    let summarize = standard.len() > SUMMARIZE_ABOVE;
    let mut out = String::from("tensor(");
    let mut suffixes = Vec::new();
    if standard.is_empty() {
        // PyTorch prints every empty tensor as `[]`, with its size unless it is 1-d.
        out.push_str("[]");
        if dims.len() != 1 {
            suffixes.push(format!("size={}", standard.shape()));
        }
    } else {
        // As in PyTorch, the style and the column width come from the elements shown.
        let shown = shown_flat_indices(&dims, summarize);
        let (cells, width) = crate::with_array!(&standard, a => format_cells(a.as_slice().expect("standard layout"), &shown));
        let layout = Layout { dims: &dims, width, summarize };
        layout.write(&mut out, &mut cells.into_iter(), 0, "tensor(".len());
    }
    suffixes.push(format!("dtype={}", standard.dtype().name()));
    add_suffixes(&mut out, &suffixes, "tensor(".len());
    out.push(')');
    f.write_str(&out)
}

/// PyTorch's line width: rows of elements wrap to stay within it.
const LINE_WIDTH: usize = 80;

struct Layout<'a> {
    dims: &'a [usize],
    width: usize,
    summarize: bool,
}

impl Layout<'_> {
    /// Writes the sub-array at `depth`, taking its formatted elements in order from `cells`;
    /// `indent` is the column of its opening bracket.
    fn write(&self, out: &mut String, cells: &mut impl Iterator<Item = String>, depth: usize, indent: usize) {
        if depth == self.dims.len() {
            out.push_str(&self.pad(cells.next().expect("a cell per shown element")));
            return;
        }
        if depth + 1 == self.dims.len() {
            return self.write_row(out, cells, indent);
        }
        let sep = format!(",{}{}", "\n".repeat(self.dims.len() - depth - 1), " ".repeat(indent + 1));
        out.push('[');
        for (k, i) in shown_indices(self.dims[depth], self.summarize).into_iter().enumerate() {
            if k > 0 {
                out.push_str(&sep);
            }
            match i {
                Some(_) => self.write(out, cells, depth + 1, indent + 1),
                None => out.push_str("..."),
            }
        }
        out.push(']');
    }

    /// The innermost dim: as many elements per line as fit in `LINE_WIDTH` (PyTorch's
    /// `_vector_str`), with ` ...` standing for the elements a summary leaves out.
    fn write_row(&self, out: &mut String, cells: &mut impl Iterator<Item = String>, indent: usize) {
        let n = self.dims[self.dims.len() - 1];
        let items: Vec<String> = shown_indices(n, self.summarize)
            .into_iter()
            .map(|i| match i {
                Some(_) => self.pad(cells.next().expect("a cell per shown element")),
                None => " ...".to_string(),
            })
            .collect();
        let per_line = (LINE_WIDTH.saturating_sub(indent) / (self.width + 2)).max(1);
        let lines: Vec<String> = items.chunks(per_line).map(|line| line.join(", ")).collect();
        out.push('[');
        out.push_str(&lines.join(&format!(",\n{}", " ".repeat(indent + 1))));
        out.push(']');
    }

    fn pad(&self, cell: String) -> String {
        format!("{cell:>w$}", w = self.width)
    }
}

/// The indices along a dim of size `n` that print (`None`: the `...`).
fn shown_indices(n: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && n > 2 * EDGE_ITEMS {
        let head = (0..EDGE_ITEMS).map(Some);
        let tail = (n - EDGE_ITEMS..n).map(Some);
        head.chain(std::iter::once(None)).chain(tail).collect()
    } else {
        (0..n).map(Some).collect()
    }
}

/// The flat (row-major) indices of the elements that print, in print order.
fn shown_flat_indices(dims: &[usize], summarize: bool) -> Vec<usize> {
    fn walk(dims: &[usize], summarize: bool, offset: usize, out: &mut Vec<usize>) {
        match dims.split_first() {
            None => out.push(offset),
            Some((&n, rest)) => {
                let stride: usize = rest.iter().product();
                for i in shown_indices(n, summarize).into_iter().flatten() {
                    walk(rest, summarize, offset + i * stride, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dims, summarize, 0, &mut out);
    out
}

/// Appends `, suffix` for each suffix, on a new line when the line would pass `LINE_WIDTH`
/// (PyTorch's `_add_suffixes`, including how it counts the last line).
fn add_suffixes(out: &mut String, suffixes: &[String], indent: usize) {
    let mut last_line = out.rfind('\n').map_or(out.len() + 2, |p| out.len() - p + 1);
    for suffix in suffixes {
        if last_line + suffix.len() + 2 > LINE_WIDTH {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent));
            last_line = indent + suffix.len();
        } else {
            out.push_str(", ");
            last_line += suffix.len() + 2;
        }
        out.push_str(suffix);
    }
}

/// Formats the elements at the flat indices `shown` and gives the column width. Floats
/// follow PyTorch's choice between integer style (`1.`), fixed 4-decimal style and
/// scientific style; as in PyTorch only finite nonzero floats set the width (a `nan` does
/// not widen the columns).
fn format_cells<T: CellFormat>(values: &[T], shown: &[usize]) -> (Vec<String>, usize) {
    let picked: Vec<T> = shown.iter().map(|&i| values[i]).collect();
    let style = T::style(&picked);
    let cells: Vec<String> = picked.iter().map(|v| v.cell(style)).collect();
    let width = picked.iter().zip(&cells).filter(|(v, _)| v.sets_width()).map(|(_, c)| c.len()).max().unwrap_or(1).max(1);
    (cells, width)
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
    /// Whether this value's cell counts for the column width.
    fn sets_width(self) -> bool {
        true
    }
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
            fn sets_width(self) -> bool {
                self.is_finite() && self != 0.0
            }
        }
    )*};
}
float_cells!(f32, f64);

/// PyTorch's `_Formatter` rule, over the finite nonzero values: all integral -> integer
/// style unless the range is wide (max / min > 1000 or max > 1e8), then scientific;
/// otherwise fixed unless the range is wide or min < 1e-4, then scientific.
fn float_style(values: impl Iterator<Item = f64>) -> FloatStyle {
    let nonzero: Vec<f64> = values.filter(|v| v.is_finite() && *v != 0.0).map(f64::abs).collect();
    if nonzero.is_empty() {
        return FloatStyle::Integer;
    }
    let max = nonzero.iter().copied().fold(0.0, f64::max);
    let min = nonzero.iter().copied().fold(f64::INFINITY, f64::min);
    let wide = max / min > 1000.0 || max > 1e8;
    if nonzero.iter().all(|v| v.fract() == 0.0) {
        if wide {
            FloatStyle::Scientific
        } else {
            FloatStyle::Integer
        }
    } else if wide || min < 1e-4 {
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
