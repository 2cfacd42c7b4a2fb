//! The text form and the Graphviz DOT export of a small traced graph — an argument, captures,
//! a constant, a `tprint!`, an in-place update of a capture, a `zero_grad` and a `backward`,
//! so every kind of input, node and state write shows — match the snapshots checked in under
//! `tests/snapshots/`. The *traced* graph is snapshotted (optimization passes do not change
//! it). Regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p tests --test trace_snapshot` and
//! read the diff before committing it.

use std::path::PathBuf;
use tensor_core::function::ConcreteFunction;
use tensor_core::graph::validate;
use tensor_core::prelude::*;

struct State {
    w: Tensor,
    unused: Tensor,
    steps: Tensor,
}

fn state() -> Result<State> {
    Ok(State {
        w: Tensor::from_vec(vec![0.5f32, -1.0], &[2])?.requires_grad_(true)?,
        unused: Tensor::zeros(&[3], DType::F32).requires_grad_(true)?,
        steps: Tensor::scalar(0i64),
    })
}

/// `loss = sum(tanh(x * w + [2, 3]))`, printed, differentiated, and a step counter bumped.
fn trace_small(s: &State, x: &Tensor) -> Result<ConcreteFunction> {
    ConcreteFunction::trace("small", &[("x", x)], || {
        s.unused.zero_grad()?;
        let k = Tensor::from_vec(vec![2.0f32, 3.0], &[2])?;
        let y = (x * &s.w + &k).tanh()?;
        let loss = y.sum()?;
        tprint!("loss = {} at step {}", loss, s.steps);
        loss.backward()?;
        s.steps.add_(1)?;
        Ok(vec![loss])
    })
}

fn snapshot_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("snapshots").join(file)
}

/// Compares `actual` with the snapshot `file` (or writes it when `UPDATE_SNAPSHOTS=1`).
#[track_caller]
fn assert_snapshot(file: &str, actual: &str) {
    let path = snapshot_path(file);
    if std::env::var("UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("a parent dir")).expect("create tests/snapshots");
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}; run with UPDATE_SNAPSHOTS=1 to create it", path.display()));
    if expected != actual {
        let first = expected.lines().zip(actual.lines()).position(|(e, a)| e != a).unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the snapshot, first at line {}; rerun with UPDATE_SNAPSHOTS=1 and review the diff.\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display(),
            first + 1
        );
    }
}

#[test]
fn traced_graph_text_matches_snapshot() -> Result<()> {
    let s = state()?;
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    let f = trace_small(&s, &x)?;
    let g = f.traced_graph();
    assert_eq!(validate(g), Ok(()));
    let text = g.to_text();
    // The parts the snapshot must show, whatever else changes in it.
    for part in [
        "graph small(x: f32[2]",
        "capture_0",
        "const",
        "tprint(\"loss = {} at step {}\"",
        "tanh",
        "accumulate_grad",
        "return (",
        "<-",
        ".grad <- none",
    ] {
        assert!(text.contains(part), "the text form should show `{part}`:\n{text}");
    }
    assert_eq!(g.to_string(), text, "Display is the text form");
    assert_snapshot("trace_small.txt", &format!("{text}\n"));
    Ok(())
}

#[test]
fn traced_graph_dot_matches_snapshot() -> Result<()> {
    let s = state()?;
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    let f = trace_small(&s, &x)?;
    let dot = f.traced_graph().to_dot();
    assert!(dot.starts_with("digraph \"small\" {") && dot.trim_end().ends_with('}'), "{dot}");
    for part in ["shape=ellipse", "const", "tprint", "accumulate_grad", "return", "shape=house", "->"] {
        assert!(dot.contains(part), "the DOT export should show `{part}`:\n{dot}");
    }
    assert_snapshot("trace_small.dot", &dot);
    Ok(())
}

#[test]
fn tracing_the_same_code_twice_gives_the_same_text() -> Result<()> {
    let (s1, s2) = (state()?, state()?);
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    let (f1, f2) = (trace_small(&s1, &x)?, trace_small(&s2, &x)?);
    assert_eq!(f1.traced_graph().to_text(), f2.traced_graph().to_text());
    assert_eq!(f1.traced_graph().to_dot(), f2.traced_graph().to_dot());
    Ok(())
}

#[test]
fn the_snapshotted_graph_runs_like_the_eager_code() -> Result<()> {
    let (s, e) = (state()?, state()?);
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    let f = trace_small(&s, &x)?;
    for _ in 0..2 {
        let loss = f.call(&[&x])?;
        e.unused.zero_grad()?;
        let want = (&x * &e.w + &Tensor::from_vec(vec![2.0f32, 3.0], &[2])?).tanh()?.sum()?;
        want.backward()?;
        e.steps.add_(1)?;
        tests::assert_bits_eq(&want, &loss[0]);
    }
    tests::assert_bits_eq(&e.w.grad().unwrap(), &s.w.grad().unwrap());
    assert_eq!(s.steps.item::<i64>()?, 2);
    assert!(s.unused.grad().is_none());
    Ok(())
}
