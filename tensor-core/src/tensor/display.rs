//! Printing tensors the way PyTorch does: nested brackets, aligned columns, large tensors
//! summarized with `...`, and the dtype at the end. A symbolic tensor prints its name, shape
//! and dtype, since it has no values yet.
//!
//! Format options, as Rust users expect them of a value that prints as text:
//!
//! - **Precision** (`{:.2}`) is the number of digits after the point of *every* float
//!   element, like NumPy's and PyTorch's `precision` print option: fixed notation with that
//!   many decimals (integral values too: `1.00`), or scientific notation with that many
//!   decimals in the mantissa where PyTorch would print scientific (a wide range or tiny
//!   values). A one-element float tensor prints as its bare value (`{:.2}` of
//!   `tensor(0.5000, dtype=f32)` is `0.50`), as Python's `format()` does for a 0-d tensor.
//!   Integer and bool tensors ignore precision, as Rust's integers do.
//! - **Width, fill and alignment** (`{:>30}`, `{:*^40}`) apply to the whole rendering, as
//!   they do to a `str`: shorter text is padded (on the right unless aligned otherwise).
//!   They are not per element because columns are already aligned to the widest element;
//!   padding the whole text is what lines tensors up in a table, and it is what `tprint!`
//!   does, in eager and graph mode alike.

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
    /// Prints like PyTorch; see the module docs for precision, width and alignment.
    ///
    /// ```
    /// # use tensor_core::prelude::*;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]], dtype=f32)");
    /// // Precision: every element's decimals.
    /// let u = Tensor::from_vec(vec![0.125f32, -2.5], &[2]).unwrap();
    /// assert_eq!(format!("{u:.2}"), "tensor([ 0.12, -2.50], dtype=f32)");
    /// assert_eq!(format!("{:.3}", Tensor::scalar(0.5f32)), "0.500");
    /// // Width and alignment: the whole text, as for a str.
    /// assert_eq!(format!("{:>8.2}|", Tensor::scalar(0.5f32)), "    0.50|");
    /// assert_eq!(format!("{:-^30}", Tensor::scalar(1i32)), "-----tensor(1, dtype=i32)-----");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stand_in = context::stand_in(self);
        let sym = stand_in.as_ref().unwrap_or(self).symbol();
        match sym {
            Some(sym) => capture(self, f).unwrap_or_else(|| pad(f, &symbolic_text(&sym.name(), &self.raw_shape(), self.dtype()))),
            // A tensor from outside the trace that the body has not used yet is external
            // state too: a traced `tprint!` must print its value at run time, not bake in
            // the value it has now.
            None if context::is_tracing() && self.0.origin_trace != context::current_trace() => capture(self, f).unwrap_or_else(|| {
                let storage = self.storage("print").map_err(|_| fmt::Error)?;
                pad(f, &concrete_text(&storage, f.precision()))
            }),
            None => match &*self.read_value() {
                Value::Concrete(s) => pad(f, &concrete_text(s, f.precision())),
                // As PyTorch does: the values, then where they live.
                Value::Device(d) => {
                    let host = crate::cuda::download(d).map_err(|_| fmt::Error)?;
                    pad(f, &format!("{}, device={}", concrete_text(&host, f.precision()), d.device))
                }
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

/// Writes `text` padded to the formatter's width with its fill, left-aligned unless it asks
/// otherwise (`Formatter::pad` would also cut the text to the precision, which here means
/// decimals).
fn pad(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    let len = text.chars().count();
    let gap = f.width().unwrap_or(0).saturating_sub(len);
    let (before, after) = match f.align() {
        Some(fmt::Alignment::Right) => (gap, 0),
        Some(fmt::Alignment::Center) => (gap / 2, gap - gap / 2),
        _ => (0, gap),
    };
    let fill = f.fill();
    (0..before).try_for_each(|_| f.write_fmt(format_args!("{fill}")))?;
    f.write_str(text)?;
    (0..after).try_for_each(|_| f.write_fmt(format_args!("{fill}")))
}

fn symbolic_text(name: &str, shape: &crate::shape::Shape, dtype: DType) -> String {
    format!("Tensor(symbolic, name={name}, shape={shape}, dtype={dtype})")
}

/// The PyTorch-style text of a concrete tensor; `precision` is the decimals of each float.
fn concrete_text(s: &Storage, precision: Option<usize>) -> String {
    // `{:.2}` on a one-element float tensor formats its value, as Python's format() does.
    if let (Some(p), 1) = (precision, s.len()) {
        match s {
            Storage::F32(a) => return format!("{:.p$}", a.iter().next().expect("one element")),
            Storage::F64(a) => return format!("{:.p$}", a.iter().next().expect("one element")),
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
        let (cells, width) = crate::storage::with_array!(&standard, a => format_cells(a.as_slice().expect("standard layout"), &shown, precision));
        let layout = Layout { dims: &dims, width, summarize };
        layout.write(&mut out, &mut cells.into_iter(), 0, "tensor(".len());
    }
    suffixes.push(format!("dtype={}", standard.dtype().name()));
    add_suffixes(&mut out, &suffixes, "tensor(".len());
    out.push(')');
    out
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
/// scientific style; `precision` sets the decimals of the last two and turns integer
/// style into fixed. As in PyTorch only finite nonzero floats set the width (a `nan` does
/// not widen the columns).
fn format_cells<T: CellFormat>(values: &[T], shown: &[usize], precision: Option<usize>) -> (Vec<String>, usize) {
    let picked: Vec<T> = shown.iter().map(|&i| values[i]).collect();
    let style = T::style(&picked);
    let cells: Vec<String> = picked.iter().map(|v| v.cell(style, precision)).collect();
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
    /// The element's text; `precision` (decimals) applies to floats only.
    fn cell(self, style: FloatStyle, precision: Option<usize>) -> String;
    /// Whether this value's cell counts for the column width.
    fn sets_width(self) -> bool {
        true
    }
}

macro_rules! int_cells {
    ($($t:ty),*) => {$(
        impl CellFormat for $t {
            fn cell(self, _: FloatStyle, _: Option<usize>) -> String {
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
            fn cell(self, style: FloatStyle, precision: Option<usize>) -> String {
                float_cell(self as f64, style, precision)
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

fn float_cell(v: f64, style: FloatStyle, precision: Option<usize>) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    match (style, precision) {
        (FloatStyle::Integer, None) => format!("{v:.0}."),
        (FloatStyle::Integer | FloatStyle::Fixed, Some(p)) => format!("{v:.p$}"),
        (FloatStyle::Fixed, None) => format!("{v:.4}"),
        (FloatStyle::Scientific, p) => scientific(v, p.unwrap_or(4)),
    }
}

/// `v` in scientific notation with `decimals` digits after the point, as PyTorch writes it.
fn scientific(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$e}");
    // Rust prints `1.2340e5`; PyTorch prints `1.2340e+05`.
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = if let Some(d) = e.strip_prefix('-') { ('-', d) } else { ('+', e) };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    fn f32s(values: &[f32], dims: &[usize]) -> Tensor {
        Tensor::from_vec(values.to_vec(), dims).unwrap()
    }

    #[test]
    fn precision_sets_the_decimals_of_every_element() {
        let t = f32s(&[1.0, 2.5, -3.25, 4.0], &[2, 2]);
        assert_eq!(format!("{t:.2}"), "tensor([[ 1.00,  2.50],\n        [-3.25,  4.00]], dtype=f32)");
        assert_eq!(format!("{:.0}", f32s(&[1.0, 2.6, -3.2], &[3])), "tensor([ 1,  3, -3], dtype=f32)");
        // Integral values print with the decimals asked for, not PyTorch's `1.`.
        assert_eq!(format!("{:.1}", f32s(&[1.0, 2.0], &[2])), "tensor([1.0, 2.0], dtype=f32)");
        // Where PyTorch goes scientific, the precision is the mantissa's decimals.
        assert_eq!(format!("{:.2}", f32s(&[1e-5, 1.0], &[2])), "tensor([1.00e-05, 1.00e+00], dtype=f32)");
        assert_eq!(format!("{:.3}", Tensor::from_vec(vec![0.1f64, 123456.0], &[2]).unwrap()), "tensor([1.000e-01, 1.235e+05], dtype=f64)");
        // Non-finite values and integer tensors are unchanged.
        assert_eq!(format!("{:.2}", f32s(&[f32::NAN, 0.5, f32::NEG_INFINITY], &[3])), "tensor([ nan, 0.50, -inf], dtype=f32)");
        assert_eq!(format!("{:.2}", Tensor::from_vec(vec![1i64, -20], &[2]).unwrap()), "tensor([  1, -20], dtype=i64)");
        // Without a precision, PyTorch's 4 decimals.
        assert_eq!(f32s(&[0.5, 1.25], &[2]).to_string(), "tensor([0.5000, 1.2500], dtype=f32)");
    }

    #[test]
    fn precision_on_one_element_prints_the_bare_value() {
        assert_eq!(format!("{:.2}", Tensor::scalar(2.0f32 / 3.0)), "0.67");
        assert_eq!(format!("{:.1}", f32s(&[-1.26], &[1, 1])), "-1.3");
        assert_eq!(format!("{:.2}", Tensor::scalar(7i32)), "tensor(7, dtype=i32)");
    }

    #[test]
    fn width_fill_and_alignment_pad_the_whole_text() {
        let x = Tensor::scalar(0.5f32);
        assert_eq!(format!("[{x:10.3}]"), "[0.500     ]"); // left, as a str
        assert_eq!(format!("[{x:>10.3}]"), "[     0.500]");
        assert_eq!(format!("[{x:*^9.1}]"), "[***0.5***]");
        let v = f32s(&[1.0, 2.0], &[2]);
        assert_eq!(format!("{v:>30}"), format!("{:>30}", v.to_string()));
        assert_eq!(format!("{v:_<30.1}"), format!("{:_<30}", "tensor([1.0, 2.0], dtype=f32)"));
        // A width narrower than the text changes nothing, and Debug takes the same options.
        assert_eq!(format!("{v:5}"), v.to_string());
        assert_eq!(format!("{v:>30?}"), format!("{v:>30}"));
        // The columns of a multi-line tensor stay aligned: the padding goes around the whole.
        let m = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        assert_eq!(format!("{m:>50}"), format!("{:>50}", m.to_string()));
    }

    #[test]
    fn summarized_tensors_take_the_precision_too() {
        let big = Tensor::from_vec((0..2000).map(|i| i as f32 / 5.0 + 10.0).collect(), &[2000]).unwrap();
        assert_eq!(format!("{big:.1}"), "tensor([ 10.0,  10.2,  10.4,  ..., 409.4, 409.6, 409.8], dtype=f32)");
    }
}
