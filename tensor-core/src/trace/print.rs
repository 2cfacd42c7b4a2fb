//! `tprint!`: formats like `println!`; eagerly it prints at once, while tracing it becomes a
//! graph node that prints the run-time values on every call, in program order.
//!
//! Placeholders are positional: `{}`, `{:?}`, and `{:[[fill]align][width][.precision]}`.
//! Arguments are formatted when traced (they are constants of the graph), except the tensors
//! they print, whose values are printed when the graph runs.

use crate::error::{Error, Result};
use crate::graph::{format_display, pad, FormatSpec, NodeKind, PrintPiece};
use crate::tensor::{capture_printed, Tensor, PRINT_MARK as MARK};
use std::fmt::Display;

#[doc(hidden)]
/// Prints a line: the format string with the arguments in order. Called by `tprint!`.
///
/// Any argument whose `Display` prints a tensor — a tensor, a reference to one, a generic
/// `T: Display` that is a tensor, a struct holding tensors — shows the run-time values.
pub fn tprint_impl(template: &str, args: &[&dyn Display]) -> Result<()> {
    let parts = parse(template, args.len())?;
    if !super::is_active() {
        println!("{}", render_now(&parts, args));
        return Ok(());
    }
    let mut pieces = Vec::new();
    let mut tensors = Vec::new();
    for part in parts {
        match part {
            Part::Text(t) => pieces.push(PrintPiece::Text(t)),
            Part::Arg(i, spec) => {
                let (text, captured) = format_capturing(args[i], &spec);
                split_marks(&text, &captured, spec, &mut pieces, &mut tensors)?;
            }
        }
    }
    super::with_trace(|s| s.append_effect(NodeKind::Print(pieces), &tensors));
    Ok(())
}

/// Formats `d` with `spec`, recording the symbolic tensors it prints.
fn format_capturing(d: &dyn Display, spec: &FormatSpec) -> (String, Vec<Tensor>) {
    capture_printed(|| format_display(d, &FormatSpec { width: None, ..*spec }))
}

/// Turns trace-time text with tensor markers into print pieces and node inputs.
fn split_marks(text: &str, captured: &[Tensor], spec: FormatSpec, pieces: &mut Vec<PrintPiece>, tensors: &mut Vec<usize>) -> Result<()> {
    if captured.is_empty() {
        pieces.push(PrintPiece::Text(pad(text.to_string(), &spec)));
        return Ok(());
    }
    let whole = captured.len() == 1 && text == format!("{MARK}0{MARK}");
    for (k, chunk) in text.split(MARK).enumerate() {
        if k % 2 == 0 {
            if !chunk.is_empty() {
                pieces.push(PrintPiece::Text(chunk.to_string()));
            }
            continue;
        }
        let index: usize = chunk.parse().expect("markers hold an index");
        tensors.push(super::resolve(&captured[index], "tprint")?.symbol().expect("resolved").value);
        // A lone tensor keeps the placeholder's options; one inside other text prints plainly.
        let spec = if whole { spec } else { FormatSpec::default() };
        pieces.push(PrintPiece::Value(tensors.len() - 1, spec));
    }
    Ok(())
}

enum Part {
    Text(String),
    Arg(usize, FormatSpec),
}

fn render_now(parts: &[Part], args: &[&dyn Display]) -> String {
    parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => t.clone(),
            Part::Arg(i, spec) => format_display(args[*i], spec),
        })
        .collect()
}

/// Splits a format string into text and positional placeholders.
fn parse(template: &str, nargs: usize) -> Result<Vec<Part>> {
    let bad = |why: String| Error::invalid("tprint", "format", why);
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut chars = template.chars().peekable();
    let mut next = 0;
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                chars.next();
                text.push(c);
            }
            ('{', _) => {
                let inner: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let spec = parse_spec(&inner).ok_or_else(|| bad(format!("unsupported placeholder {{{inner}}}")))?;
                if next >= nargs {
                    return Err(bad(format!("more placeholders than the {nargs} arguments")));
                }
                parts.push(Part::Text(std::mem::take(&mut text)));
                parts.push(Part::Arg(next, spec));
                next += 1;
            }
            ('}', _) => return Err(bad("unmatched `}`".into())),
            _ => text.push(c),
        }
    }
    if next != nargs {
        return Err(bad(format!("{nargs} arguments but {next} placeholders")));
    }
    parts.push(Part::Text(text));
    Ok(parts)
}

fn parse_spec(inner: &str) -> Option<FormatSpec> {
    let mut spec = FormatSpec::default();
    let Some(rest) = inner.strip_prefix(':') else { return inner.is_empty().then_some(spec) };
    let mut rest: &str = rest;
    if let Some(r) = rest.strip_suffix('?') {
        spec.debug = true;
        rest = r;
    }
    let chars: Vec<char> = rest.chars().collect();
    let is_align = |c: char| matches!(c, '<' | '>' | '^');
    let mut i = 0;
    if chars.len() >= 2 && is_align(chars[1]) {
        spec.fill = Some(chars[0]);
        spec.align = Some(chars[1]);
        i = 2;
    } else if chars.first().is_some_and(|&c| is_align(c)) {
        spec.align = Some(chars[0]);
        i = 1;
    }
    let rest: String = chars[i..].iter().collect();
    let (w, p) = match rest.split_once('.') {
        Some((w, p)) => (w, Some(p)),
        None => (rest.as_str(), None),
    };
    if !w.is_empty() {
        spec.width = Some(w.parse().ok()?);
    }
    if let Some(p) = p {
        spec.precision = Some(p.parse().ok()?);
    }
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_placeholders_and_escapes() {
        let parts = parse("a {} b {:>6.2} {{c}}", 2).unwrap();
        assert_eq!(parts.len(), 5);
        match &parts[3] {
            Part::Arg(1, s) => assert_eq!((s.align, s.width, s.precision), (Some('>'), Some(6), Some(2))),
            _ => panic!("expected the second argument"),
        }
        assert!(parse("{} {}", 1).is_err());
        assert!(parse("{:x}", 1).is_err());
    }
}
