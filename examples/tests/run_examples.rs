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
            "epoch  1/1  | eager: mean train loss ",
            "| graph: mean train loss ",
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
}

/// Runs lenet5 with `args`, which it must refuse; returns its standard error.
fn lenet5_refuses(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lenet5")).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} was accepted:\n{stdout}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    // Refused before any training output (the header line names the data set).
    assert!(!stdout.contains("LeNet-5 on"), "{args:?} printed the header first:\n{stdout}");
    stderr
}

#[test]
fn lenet5_refuses_counts_of_zero_naming_the_flag() {
    for flag in ["--batch-size", "--epochs", "--threads", "--limit"] {
        let stderr = lenet5_refuses(&[flag, "0"]);
        assert!(stderr.contains(&format!("invalid value '0' for '{flag} <N>': must be at least 1")), "{flag}:\n{stderr}");
    }
    let stderr = lenet5_refuses(&["--epochs", "two"]);
    assert!(stderr.contains("invalid value 'two' for '--epochs <N>'") && stderr.contains("expected a whole number"), "{stderr}");
    // A batch bigger than the training set is refused before training too.
    let stderr = lenet5_refuses(&["--limit", "10", "--batch-size", "16"]);
    assert!(stderr.starts_with("error: 10 training images make no batch of 16; lower --batch-size"), "{stderr}");
}

#[test]
fn lenet5_data_errors_print_their_message_and_accept_gz() {
    // A directory that does not exist: clap names the flag, the message says what it takes.
    let stderr = lenet5_refuses(&["--data", "/nonexistent-mnist-dir"]);
    let expected = "invalid value '/nonexistent-mnist-dir' for '--data <DIR>': no such directory; --data takes a directory \
                    holding MNIST's IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, \
                    t10k-labels-idx1-ubyte), raw or gzipped (.gz)";
    assert!(stderr.contains(expected), "{stderr}");
    // A directory without the files: the loader's message (Display, not Debug), saying .gz works.
    let dir = std::env::temp_dir().join(format!("tensor-core-lenet5-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stderr = lenet5_refuses(&["--data", dir.to_str().unwrap()]);
    let expected = format!("error: {} has no train-images-idx3-ubyte (nor train-images-idx3-ubyte.gz); expected MNIST's IDX files", dir.display());
    assert!(stderr.starts_with(&expected) && stderr.contains("raw or gzipped"), "{stderr}");
    assert!(!stderr.contains("Missing {"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lenet5_help_describes_lenet5() {
    let out = run(env!("CARGO_BIN_EXE_lenet5"), &["--help"]);
    assert_contains(
        &out,
        &[
            "Train LeNet-5 eagerly and as a traced graph, from the same seed, and compare.",
            "Usage: lenet5 [OPTIONS]",
            "--batch-size <N>",
            "[default: 32]",
            "raw or gzipped (.gz)",
            "[default: lenet5_loss.svg]",
            "Examples:",
        ],
    );
    assert!(!out.contains("Runnable programs for tensor-core"), "the package's description:\n{out}");
    assert!(!out.contains(env!("CARGO_MANIFEST_DIR")), "a path of the build machine:\n{out}");
}

#[test]
fn lenet5_plots_to_the_current_directory_by_default() {
    let dir = std::env::temp_dir().join(format!("tensor-core-lenet5-cwd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let args = ["--epochs", "2", "--limit", "32", "--batch-size", "16", "--mode", "graph"];
    let out = Command::new(env!("CARGO_BIN_EXE_lenet5")).args(args).current_dir(&dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_contains(&stdout, &["loss plot: lenet5_loss.svg", "epoch  1/2  | graph: mean train loss ", "epoch  2/2  | graph: mean train loss "]);
    assert!(!stdout.contains("NaN"), "{stdout}");
    assert!(std::fs::read_to_string(dir.join("lenet5_loss.svg")).unwrap().starts_with("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quickstart_traces_once_per_signature() {
    let out = run(env!("CARGO_BIN_EXE_quickstart"), &[]);
    assert_contains(
        &out,
        &[
            "z = (a + b) * (a + 1) = 6.0; dz/da = 5.0, dz/db = 2.0",
            "graph result == eager result, bit for bit: true",
            "affine_tanh: 3 calls, 2 traces; why each traced: [\"first call\", \"arg x: shape [2, 3] -> [4, 3]\"]",
            "its optimized graph for x: f32 [2, 3]:",
            "tanh",
        ],
    );
    // The body's println! ran once per trace: for the first signature and the new shape.
    assert_eq!(out.matches("(tracing affine_tanh for x: f32 [2, 3])").count(), 1, "{out}");
    assert_eq!(out.matches("(tracing affine_tanh for x: f32 [4, 3])").count(), 1, "{out}");
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

/// The part of an epoch line before its time (which differs between runs).
fn epoch_results(out: &str, epoch: &str) -> String {
    let line = out.lines().find(|l| l.starts_with(epoch)).unwrap_or_else(|| panic!("no line {epoch:?} in:\n{out}"));
    line.split(", time").next().unwrap().to_string()
}

#[test]
fn lenet5_resumed_from_a_checkpoint_trains_as_if_it_had_never_stopped() {
    let dir = std::env::temp_dir().join(format!("tensor-core-lenet5-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (plot, checkpoint) = (dir.join("loss.svg"), dir.join("ck.safetensors"));
    let common = ["--limit", "48", "--batch-size", "16", "--mode", "graph", "--threads", "2", "--plot", plot.to_str().unwrap()];
    let straight = run(env!("CARGO_BIN_EXE_lenet5"), &[&common[..], &["--epochs", "2"]].concat());
    let first = run(env!("CARGO_BIN_EXE_lenet5"), &[&common[..], &["--epochs", "1", "--save", checkpoint.to_str().unwrap()]].concat());
    assert_contains(&first, &["checkpoint after epoch 1: "]);
    let resumed = run(env!("CARGO_BIN_EXE_lenet5"), &[&common[..], &["--epochs", "1", "--resume", checkpoint.to_str().unwrap()]].concat());
    assert_contains(&resumed, &["resumed from ", "after epoch 1"]);
    assert_eq!(epoch_results(&first, "epoch  1/1"), epoch_results(&straight, "epoch  1/2").replace("1/2", "1/1"));
    assert_eq!(epoch_results(&resumed, "epoch  2/2"), epoch_results(&straight, "epoch  2/2"), "the same loss and accuracy after resuming");
    // A missing checkpoint is refused before training.
    let stderr = lenet5_refuses(&["--resume", dir.join("missing.safetensors").to_str().unwrap()]);
    assert!(stderr.contains("missing.safetensors: cannot read"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn serve_classifies_with_the_accuracy_lenet5_printed_for_its_export() {
    let dir = std::env::temp_dir().join(format!("tensor-core-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (plot, model, onnx) = (dir.join("loss.svg"), dir.join("lenet5.tcg"), dir.join("lenet5.onnx"));
    let args = ["--epochs", "1", "--limit", "96", "--batch-size", "16", "--mode", "graph", "--plot", plot.to_str().unwrap()];
    let out = run(env!("CARGO_BIN_EXE_lenet5"), &[&args[..], &["--export", model.to_str().unwrap(), "--onnx", onnx.to_str().unwrap()]].concat());
    let exported = out.lines().find(|l| l.starts_with("exported the forward pass for one image")).unwrap_or_else(|| panic!("{out}"));
    let accuracy = exported.split("(test accuracy ").nth(1).unwrap().trim_end_matches(')').to_string();
    assert!(out.contains(&format!("test accuracy {:>5}", accuracy.trim_end_matches('%'))), "the epoch line printed {accuracy}:\n{out}");
    assert!(std::fs::metadata(&onnx).unwrap().len() > 200_000, "the ONNX holds the weights");
    let served = run(env!("CARGO_BIN_EXE_serve"), &["--model", model.to_str().unwrap(), "--threads", "2"]);
    assert_contains(&served, &["loaded ", "`lenet5`", "argument `image`", "10 weight tensors", &format!("test accuracy {accuracy} (")]);
    assert_contains(&served, &["360 images, one at a time", "latency per image: median "]);
    // The serve program holds no model code: it knows nothing of layers or weights.
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/bin/serve.rs")).unwrap();
    // Whole identifiers only: `prelude` contains the letters of `relu`.
    let words: Vec<&str> = source.split(|c: char| !(c.is_alphanumeric() || c == '_')).collect();
    for word in ["conv2d", "matmul", "Linear", "Conv2d", "relu", "max_pool2d"] {
        assert!(!words.contains(&word), "serve.rs mentions {word}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn serve_refuses_a_damaged_model_with_its_reason() {
    let path = std::env::temp_dir().join(format!("tensor-core-serve-bad-{}.tcg", std::process::id()));
    std::fs::write(&path, b"TCGRAPH\0 cut short").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_serve")).args(["--model", path.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && !stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("not a valid tensor-core graph file") && stderr.contains("truncated"), "{stderr}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn bench_w8_serves_the_loaded_graph_and_times_the_load() {
    let out = run(env!("CARGO_BIN_EXE_bench"), &["--workload", "W8", "--mode", "graph", "--threads", "1", "--calls", "3", "--min-time", "0"]);
    assert_contains(&out, &["\"workload\":\"W8\"", "\"mode\":\"graph\"", "\"load_us\":", "\"file_bytes\":"]);
}

#[test]
fn gpt_trains_both_modes_identically_with_dropout_and_samples_text() {
    let args = [
        "--steps",
        "4",
        "--batch-size",
        "4",
        "--context",
        "16",
        "--layers",
        "1",
        "--d-model",
        "32",
        "--heads",
        "2",
        "--sample",
        "60",
        "--threads",
        "2",
    ];
    let out = run(env!("CARGO_BIN_EXE_gpt"), &args);
    assert_contains(
        &out,
        &[
            "character-level GPT on The Devil's Dictionary: 383069 characters, vocabulary 84",
            "dropout 0.1",
            "eager: train loss ",
            "graph: train loss ",
            "losses identical across 4 steps (eager vs graph, bit for bit, dropout on)",
            "final parameters identical",
            "train_step_graph traced 1 time(s)",
            "| eager |",
            "| graph |",
            "speed-up of the graph",
            "sampled from the graph model (60 characters after a newline, temperature 0.8):",
        ],
    );
    // The sample: at most 60 characters between the markers (trailing whitespace trimmed).
    let sample = out.split(">>>\n").nth(1).and_then(|s| s.split("\n<<<").next()).expect("a sample between >>> and <<<");
    assert!(sample.chars().count() <= 60 && !sample.trim().is_empty(), "{sample:?}");
}

/// The numbers after `label` on the line that starts with `prefix`.
fn numbers_after(output: &str, prefix: &str, label: &str) -> Vec<f64> {
    let line = output.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{output}"));
    let rest = &line[line.find(label).unwrap_or_else(|| panic!("no {label:?} in {line:?}")) + label.len()..];
    rest.split(|c: char| c.is_whitespace() || ",()%".contains(c)).filter_map(|w| w.parse().ok()).collect()
}

#[test]
fn port_from_pytorch_trains_as_pytorch_did_with_one_trace() {
    let dir = std::env::temp_dir().join(format!("tensor-core-port-{}", std::process::id()));
    let out = run(env!("CARGO_BIN_EXE_port_from_pytorch"), &["--out", dir.to_str().unwrap()]);
    assert_contains(
        &out,
        &[
            "loaded PyTorch's state dict strictly: 8 tensors (body.0.weight [32, 4], body.0.bias [32], body.2.weight [32], body.2.bias [32], body.3.weight [32, 32], body.3.bias [32], body.5.weight [3, 32], body.5.bias [3])",
            "Classifier::train_step_graph traced 1 time(s) in 60 steps",
            "eager and graph losses identical, bit for bit, across 60 steps",
            "the resumed run's next two steps are identical, bit for bit",
            "(any batch size); batches vs the model, bit for bit: 1: identical, 7: identical, 96: identical",
        ],
    );
    // PyTorch's first and last losses (the fixture's), and tensor-core's beside them.
    let first = numbers_after(&out, "step  1:", "loss");
    let last = numbers_after(&out, "step 60:", "loss");
    assert!((first[0] - 1.116_3).abs() < 1e-3 && (first[1] - 1.116_3).abs() < 1e-3, "{first:?}");
    assert!((last[0] - last[1]).abs() <= 1e-5 && last[1] < 0.02, "{last:?}"); // printed to 6 decimals
    assert!(numbers_after(&out, "step  1:", "lr")[0] == 0.01 && numbers_after(&out, "step 60:", "lr")[0] < 1e-4, "the cosine schedule");
    assert!(numbers_after(&out, "logits before training", "difference")[0] <= 1e-6);
    assert!(numbers_after(&out, "losses vs PyTorch's", "difference")[0] <= 1e-4);
    assert!(numbers_after(&out, "training accuracy", "accuracy")[0] >= 90.0, "{out}");
    assert!(dir.join("port_from_pytorch.safetensors").exists() && dir.join("port_from_pytorch.tcg").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gpt_refuses_bad_flags() {
    for (args, expected) in [
        (&["--dropout", "1.5"][..], "is not in [0, 1)"),
        (&["--steps", "0"][..], "must be at least 1"),
        (&["--d-model", "30", "--heads", "4"][..], "--d-model 30 is not a multiple of --heads 4"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gpt")).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(expected), "{args:?}:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    }
}

#[test]
fn onnx_finetune_trains_the_imported_cnn_and_writes_it_back() {
    let dir = std::env::temp_dir().join(format!("tensor-core-onnx-finetune-{}", std::process::id()));
    let args = ["--steps", "12", "--batch-size", "16", "--threads", "2", "--out", dir.to_str().unwrap()];
    let out = run(env!("CARGO_BIN_EXE_onnx_finetune"), &args);
    assert_contains(
        &out,
        &[
            "ops BatchNormalization, Conv, Flatten, Gemm, GlobalAveragePool, MaxPool, Relu",
            "12 weight tensors, 1770 values",
            "step   1: loss ",
            "(traces and optimizes the step)",
            "step  12: loss ",
            "train_step_graph traced 1 time(s)",
            "(imported back: same logits: true)",
        ],
    );
    let losses: Vec<f64> = out.lines().filter(|l| l.starts_with("step ")).map(|l| numbers_after(l, "step", "loss")[0]).collect();
    assert_eq!(losses.len(), 12);
    assert!(losses[11] < losses[0], "the loss must fall: {losses:?}");
    assert!(dir.join("small_cnn_finetuned.onnx").exists() && dir.join("small_cnn_finetuned.safetensors").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_w9_without_its_models_says_how_to_make_them() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--workload", "W9", "--mode", "graph", "--calls", "1", "--models", "/nonexistent/onnx-models"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && !stderr.contains("panicked"), "{stderr}");
    assert_contains(
        &stderr,
        &["/nonexistent/onnx-models/resnet18/model.onnx is not there", "scripts/onnx_real_models.py DIR resnet18 mobilenet_v2", "--models DIR"],
    );
}

#[test]
fn onnx_check_takes_a_tolerance_and_passes_the_small_cnn() {
    let case = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/onnx_models/small_cnn");
    let out = run(env!("CARGO_BIN_EXE_onnx_check"), &["--rtol", "1e-4", "--atol", "1e-6", case]);
    assert_contains(&out, &["PASS small_cnn (largest error ", "1 passed, 0 failed, 0 skipped"]);
    let bad = Command::new(env!("CARGO_BIN_EXE_onnx_check")).args(["--rtol", "x", case]).output().unwrap();
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(bad.status.code() == Some(2) && stderr.contains("--rtol x: expected a number >= 0"), "{stderr}");
}
