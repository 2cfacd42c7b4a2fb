//! What a `tprint!` node prints: text fixed at trace time and run-time values with their
//! format options, and how a line is rendered from them when the graph runs.

use std::fmt::{self, Display};

/// A placeholder's format options.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::graph::{NodeKind, PrintPiece};
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || {
///     tprint!("{:.3}", x);
///     Ok(vec![])
/// })?;
/// let NodeKind::Print(pieces) = &f.graph().nodes[0].kind else { panic!() };
/// assert!(pieces.iter().any(|p| matches!(p, PrintPiece::Value(0, spec) if spec.precision == Some(3))), "{pieces:?}");
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FormatSpec {
    /// The fill character (`{:*>8}`).
    pub fill: Option<char>,
    /// The alignment: `<`, `^` or `>`.
    pub align: Option<char>,
    /// The minimum width.
    pub width: Option<usize>,
    /// The digits after the point (`{:.3}`).
    pub precision: Option<usize>,
    /// `{:?}` rather than `{}`.
    pub debug: bool,
}

/// One formatted piece of a `tprint!` line.
///
/// ```
/// use tensor_core::prelude::*;
/// use tensor_core::function::ConcreteFunction;
/// use tensor_core::graph::{NodeKind, PrintPiece};
/// let x = Tensor::ones(&[2], DType::F32);
/// let f = ConcreteFunction::trace("f", &[("x", &x)], || {
///     tprint!("x = {}", x);
///     Ok(vec![x.clone()])
/// })?;
/// let NodeKind::Print(pieces) = &f.graph().nodes[0].kind else { panic!("a print node") };
/// assert_eq!(pieces[0], PrintPiece::Text("x = ".into()));
/// # Ok::<(), tensor_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PrintPiece {
    /// Text fixed at trace time.
    Text(String),
    /// The run-time value of node input `i`, with the placeholder's format spec.
    Value(usize, FormatSpec),
}

/// Formats a print node's pieces with the run-time values of its inputs.
pub(crate) fn render(pieces: &[PrintPiece], values: &[crate::tensor::Tensor]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            PrintPiece::Text(t) => t.clone(),
            PrintPiece::Value(i, spec) => format_display(&values[*i], spec),
        })
        .collect()
}

/// `d` formatted with `spec`'s precision and padding.
pub(crate) fn format_display(d: &dyn Display, spec: &FormatSpec) -> String {
    let s = match spec.precision {
        Some(p) => format!("{d:.p$}"),
        None => d.to_string(),
    };
    pad(s, spec)
}

pub(crate) fn pad(s: String, spec: &FormatSpec) -> String {
    let Some(width) = spec.width else { return s };
    let len = s.chars().count();
    if len >= width {
        return s;
    }
    let fill = spec.fill.unwrap_or(' ').to_string();
    let gap = width - len;
    match spec.align.unwrap_or('<') {
        '>' => fill.repeat(gap) + &s,
        '^' => fill.repeat(gap / 2) + &s + &fill.repeat(gap - gap / 2),
        _ => s + &fill.repeat(gap),
    }
}

impl fmt::Display for FormatSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_like_std() {
        let spec = FormatSpec { width: Some(5), align: Some('>'), ..Default::default() };
        assert_eq!(pad("ab".into(), &spec), format!("{:>5}", "ab"));
        assert_eq!(format_display(&1.23456, &FormatSpec { precision: Some(2), ..Default::default() }), "1.23");
    }
}
