//! `tprint!` and host side effects: in a graph function, `tprint!` prints on
//! every call with the run-time values, in program order with other `tprint!`s, while a host
//! `println!` runs only while tracing (so on a tracing call all trace-time output comes
//! first); eagerly, `tprint!` prints at once. Standard output is captured by running the
//! `tprint_demo` binary as a child process and comparing its lines.

use std::process::Command;
use tensor_core::prelude::*;

/// The demo's standard output, as lines.
fn demo_output() -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_tprint_demo")).output().expect("the demo binary runs");
    assert!(out.status.success(), "tprint_demo failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output").lines().map(str::to_string).collect()
}

/// The lines from `== <name>` up to the next section header.
fn section(lines: &[String], name: &str) -> Vec<String> {
    let start = lines.iter().position(|l| *l == format!("== {name}")).unwrap_or_else(|| panic!("no section {name} in {lines:#?}"));
    lines[start + 1..].iter().take_while(|l| !l.starts_with("== ")).cloned().collect()
}

fn t(v: f32) -> Tensor {
    Tensor::scalar(v)
}

#[test]
fn eager_tprint_prints_at_once() {
    let lines = demo_output();
    let x = Tensor::from_vec(vec![1.5f32, -2.0], &[2]).unwrap();
    let expected = ["before".to_string(), format!("eager x = {}, twice = {:.2}", x, t(4.5)), "after".to_string()];
    assert_eq!(section(&lines, "eager"), expected);
    assert_eq!(expected[1], "eager x = tensor([ 1.5000, -2.0000], dtype=f32), twice = 4.50");
}

#[test]
fn graph_fn_tprint_prints_every_call_and_println_only_while_tracing() {
    let lines = demo_output();
    let got = section(&lines, "graph_fn");
    let mut expected = Vec::new();
    for (i, v) in [1.0f32, 2.5, -3.0].into_iter().enumerate() {
        expected.push(format!("call {v}"));
        if i == 0 {
            expected.push("trace".to_string()); // trace-time output first, once
        }
        expected.push(format!("x = {}", t(v)));
        expected.push(format!("y = {} after x = {:.1}", t(2.0 * v), t(v)));
        expected.push(format!("returned {}", 2.0 * v));
    }
    assert_eq!(got, expected);
    assert_eq!(got.iter().filter(|l| *l == "trace").count(), 1);
    assert_eq!(got[2], "x = tensor(1., dtype=f32)");
    assert_eq!(got[3], "y = tensor(2., dtype=f32) after x = 1.0");
}

#[test]
fn run_functions_eagerly_runs_the_body_on_every_call() {
    let lines = demo_output();
    let mut expected = Vec::new();
    for v in [4.0f32, 5.0] {
        expected.push(format!("call {v}"));
        expected.push("trace".to_string());
        expected.push(format!("x = {}", t(v)));
        expected.push(format!("y = {} after x = {:.1}", t(2.0 * v), t(v)));
    }
    assert_eq!(section(&lines, "run_functions_eagerly"), expected);
}

#[test]
fn concrete_function_prints_run_time_values_of_arguments_and_updated_captures() {
    let lines = demo_output();
    let expected = [
        "trace".to_string(),
        "traced".to_string(),
        "call 1".to_string(),
        format!("first {}", t(11.0)),
        format!("second {} 11.0", t(1.0)),
        "call 2".to_string(),
        format!("first {}", t(13.0)),
        format!("second {} 12.0", t(2.0)),
        "c = 12".to_string(),
    ];
    assert_eq!(section(&lines, "concrete"), expected);
    assert_eq!(lines.last().map(String::as_str), Some("== end"));
}

#[test]
fn a_capture_printed_before_any_other_use_shows_its_run_time_value() {
    let lines = demo_output();
    let mut expected = Vec::new();
    for step in 0..3i64 {
        expected.push(format!("step {}", Tensor::scalar(step)));
        expected.push(format!("now {:>3}", Tensor::scalar(step + 1)));
    }
    assert_eq!(section(&lines, "capture"), expected);
}
