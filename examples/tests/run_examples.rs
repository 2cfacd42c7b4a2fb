//! Runs each example program with tiny settings and checks what it prints.

use std::process::Command;

/// Runs a built example with `args`; returns its standard output (it must succeed).
fn run(exe: &str, args: &[&str]) -> String {
    let out = Command::new(exe).args(args).output().unwrap_or_else(|e| panic!("cannot run {exe}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{exe} {args:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    stdout
}

fn assert_contains(output: &str, expected: &[&str]) {
    for e in expected {
        assert!(output.contains(e), "expected {e:?} in the output:\n{output}");
    }
}

#[test]
fn lenet5_trains_both_modes_identically() {
    let plot = std::env::temp_dir().join(format!("tensor-core-lenet5-{}.svg", std::process::id()));
    let plot_arg = plot.to_str().unwrap();
    let args = ["--epochs", "1", "--limit", "64", "--batch-size", "16", "--threads", "2", "--plot", plot_arg];
    let out = run(env!("CARGO_BIN_EXE_lenet5"), &args);
    assert_contains(
        &out,
        &[
            "64 train / 360 test images",
            "4 steps per epoch",
            "epoch  1/1",
            "losses identical across 4 steps",
            "final parameters identical",
            "LeNet5::train_step traced 1 time(s)",
            "| eager |",
            "| graph |",
            "speed-up of the graph",
            "loss plot:",
        ],
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("eager") && svg.contains("graph"), "{svg:.200}");
    std::fs::remove_file(&plot).unwrap();
}

#[test]
fn lenet5_single_mode_and_bad_flags() {
    let plot = std::env::temp_dir().join(format!("tensor-core-lenet5-graph-{}.svg", std::process::id()));
    let args = ["--epochs", "1", "--limit", "32", "--batch-size", "16", "--mode", "graph", "--plot", plot.to_str().unwrap()];
    let out = run(env!("CARGO_BIN_EXE_lenet5"), &args);
    assert_contains(&out, &["| graph |", "test accuracy"]);
    assert!(!out.contains("| eager |") && !out.contains("losses identical"), "{out}");
    std::fs::remove_file(&plot).unwrap();
    // A --data directory without MNIST's files is a clear error, not a panic.
    let out = Command::new(env!("CARGO_BIN_EXE_lenet5")).args(["--data", "/nonexistent-mnist-dir"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("train-images-idx3-ubyte") && !stderr.contains("panicked"), "{stderr}");
}

#[test]
fn lenet5_reads_mnist_idx_files() {
    use examples::data::idx::{encode, IdxArray};
    let dir = std::env::temp_dir().join(format!("tensor-core-lenet5-mnist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (prefix, n) in [("train", 48), ("t10k", 20)] {
        let images = IdxArray { dims: vec![n, 28, 28], data: (0..n * 784).map(|i| (i * 7 % 256) as u8).collect() };
        let labels = IdxArray { dims: vec![n], data: (0..n).map(|i| (i % 10) as u8).collect() };
        std::fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), encode(&images)).unwrap();
        std::fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), encode(&labels)).unwrap();
    }
    let plot = dir.join("loss.svg");
    let args = ["--data", dir.to_str().unwrap(), "--epochs", "1", "--batch-size", "16", "--plot", plot.to_str().unwrap()];
    let out = run(env!("CARGO_BIN_EXE_lenet5"), &args);
    assert_contains(&out, &["LeNet-5 on MNIST", "48 train / 20 test images", "losses identical across 3 steps"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn autograd_prints_the_graph_and_the_grads() {
    let out = run(env!("CARGO_BIN_EXE_autograd"), &[]);
    assert_contains(
        &out,
        &[
            "y = (w + x) * (w + 1) = 6",
            "y <MulBackward>",
            "a <AddBackward>",
            "w <AccumulateGrad>",
            "x <AccumulateGrad>",
            "w.grad = tensor(5.",
            "x.grad = tensor(2.",
            "a.grad = tensor(2.",
            "b.grad = None",
            "inside a #[graph_fn]: y = tensor(6., dtype=f32), w.grad = tensor(5., dtype=f32), x.grad = tensor(2., dtype=f32)",
        ],
    );
}

#[test]
fn tracing_shows_the_lessons() {
    let out = run(env!("CARGO_BIN_EXE_tracing"), &[]);
    assert_contains(
        &out,
        &[
            "-> 3 calls, 1 trace(s), the body's host code ran 1 time(s)",
            "scale: 4 traces",
            "executing_eagerly() = false",
            "executing_eagerly() = true",
            "digraph",
        ],
    );
    // println! ran once per trace; tprint! once per call.
    assert_eq!(out.matches("println!: tracing").count(), 1, "{out}");
    assert_eq!(out.matches("tprint!:  running").count(), 3, "{out}");
}

#[test]
fn while_loop_counts_to_twenty_both_ways_with_one_trace() {
    let out = run(env!("CARGO_BIN_EXE_while_loop"), &[]);
    assert_contains(
        &out,
        &[
            "eager (run_functions_eagerly):     first = 20, second = 20",
            "graph, first = 0, second = 10:     first = 20, second = 20",
            "graph, first = 0, second = 3:      first =  6, second =  6",
            "graph, first = 7, second = 2:      first =  7, second =  2",
            "traced 1 time(s); the graph has 1 While node(s)",
            "while_loop(cond, body, vars):      first = 20, second = 20",
        ],
    );
}
