//! The acceptance sequence of `#[graph_fn]` (TF's `tf.function` example): host side effects
//! (`println!`) run only while tracing, `tprint!` prints run-time values on every call, a
//! new Rust scalar value retraces, a repeated one does not. The functions run in a child
//! process (`src/bin/graph_fn_show.rs`) whose standard output is checked line by line.

use std::process::Command;

/// Runs the helper binary; returns its standard output lines and the trace count after each
/// call (written to standard error).
fn run(args: &[&str]) -> (Vec<String>, Vec<usize>) {
    let out = Command::new(env!("CARGO_BIN_EXE_graph_fn_show")).args(args).output().expect("the helper binary runs");
    let stdout = String::from_utf8(out.stdout).expect("utf-8 output");
    let stderr = String::from_utf8(out.stderr).expect("utf-8 output");
    assert!(out.status.success(), "graph_fn_show {args:?} failed:\n{stdout}\n{stderr}");
    let counts = stderr.lines().filter_map(|l| l.strip_prefix("trace count ")).map(|n| n.parse().expect("a count")).collect();
    (stdout.lines().map(str::to_string).collect(), counts)
}

#[track_caller]
fn assert_lines(got: &[String], expected: &[&str]) {
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert_eq!(g, e, "line {} differs; all output:\n{}", i + 1, got.join("\n"));
    }
    assert_eq!(got.len(), expected.len(), "number of lines; all output:\n{}", got.join("\n"));
}

/// What TF 2.21 prints for the same sequence, in this library's notation: the `println!`
/// lines (the symbolic tensor while tracing, or the Rust value) only on the tracing calls
/// (1st, 3rd, 6th, 7th), before that call's run-time lines; the `tprint!` lines on every
/// call, with run-time values.
#[test]
fn sequence_prints_what_tf_prints() {
    let (lines, counts) = run(&["sequence"]);
    assert_lines(
        &lines,
        &[
            // show(i32 tensor 1): traces
            "Tensor(symbolic, name=x, shape=[], dtype=i32)",
            "println in graph",
            "tensor(1, dtype=i32)",
            "tprint in graph",
            // show(i32 tensor 2): same signature
            "tensor(2, dtype=i32)",
            "tprint in graph",
            // show(f32 tensor 1.1): new dtype, traces
            "Tensor(symbolic, name=x, shape=[], dtype=f32)",
            "println in graph",
            "tensor(1.1000, dtype=f32)",
            "tprint in graph",
            // show(f32 tensor 2.2)
            "tensor(2.2000, dtype=f32)",
            "tprint in graph",
            // show(i32 tensor 3): the first signature again
            "tensor(3, dtype=i32)",
            "tprint in graph",
            // show(1): a Rust scalar keys by value, traces
            "1",
            "println in graph",
            "1",
            "tprint in graph",
            // show(2): a new value, traces
            "2",
            "println in graph",
            "2",
            "tprint in graph",
            // show(1): seen before
            "1",
            "tprint in graph",
        ],
    );
    assert_eq!(counts, [1, 1, 2, 2, 2, 3, 4, 4]);
}

/// Under `run_functions_eagerly(true)` the body is plain eager code: both macros print on
/// every call, with concrete values, and nothing traces.
#[test]
fn sequence_under_run_functions_eagerly() {
    let (lines, counts) = run(&["sequence", "eager"]);
    let mut expected = Vec::new();
    for value in [
        "tensor(1, dtype=i32)",
        "tensor(2, dtype=i32)",
        "tensor(1.1000, dtype=f32)",
        "tensor(2.2000, dtype=f32)",
        "tensor(3, dtype=i32)",
        "1",
        "2",
        "1",
    ] {
        expected.extend([value, value, "tprint in graph", "println in graph"]);
    }
    assert_lines(&lines, &expected);
    assert_eq!(counts, [0; 8]);
}

/// `println!("{}", executing_eagerly())` prints `false` once (while tracing);
/// `tprint!("{}", executing_eagerly())` prints `false` on every call (the value it had when
/// traced, as `tf.print(tf.executing_eagerly())` does).
#[test]
fn executing_eagerly_inside_a_graph_function() {
    let (lines, counts) = run(&["flag"]);
    assert_lines(&lines, &["false", "false", "false", "false"]);
    assert_eq!(counts, [1, 1, 1]);
}

/// Under `run_functions_eagerly(true)` both print `true` on every call.
#[test]
fn executing_eagerly_under_run_functions_eagerly() {
    let (lines, counts) = run(&["flag", "eager"]);
    assert_lines(&lines, &["true"; 6]);
    assert_eq!(counts, [0, 0, 0]);
}
