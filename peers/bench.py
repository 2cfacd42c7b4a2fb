#!/usr/bin/env python3
"""Peer benchmark harness for the workloads in docs/WORKLOADS.md.

Usage:
  python bench.py --framework {tf,jax,torch,numpy,ort} --mode {eager,compiled,xla} \
                  --workload {W1..W9}[,W..] [--threads N] [--device {cpu,cuda}] \
                  [--compile-mode {default,reduce-overhead,max-autotune-no-cudagraphs}]

Prints ONE JSON line per workload (a comma list such as W2,W3 runs them one after the other
in one process, each from the same fixed seed, each line on its own; W9 prints one line per
case, with "case" and "batch" as the bench binary's W9 lines):
  {"framework","mode","workload","threads","median_us","min_us","max_us","calls", ...extras}

Extras: first_us (first warm-up call, i.e. includes tracing / compilation for compiled
modes), warmups, check (a checksum of the first result: the loss for W3/W4, the sum of the
output otherwise; same inputs and same initial params in every framework, so the checks of
W3/W4 must agree across frameworks), version, sync (how completion is forced), note, error.

Modes: eager = op by op; compiled = tf.function / jax.jit / torch.compile (inductor);
xla = tf.function(jit_compile=True) (tf only, an extra beside the brief).

Timing: >= 3 warm-up calls, then timed calls until >= 20 calls AND >= --min-time seconds
(capped at --max-calls); each call is timed on its own with time.perf_counter_ns and
includes forcing completion: tf -> .numpy() on the result (TF eager on CPU is synchronous
anyway; .numpy() copies the buffer, see --tf-sync), jax -> jax.block_until_ready on all
results (new params included), torch CPU -> synchronous, nothing to force, numpy -> nothing.

--device cuda (torch and jax only; tf, ort and numpy answer with "error": "not on cuda"):
inputs and parameters live on the first GPU; torch forces completion with
torch.cuda.synchronize() inside every timed call, jax with block_until_ready as on the CPU.
TF32 is off for float32 matmuls (torch.backends.cuda.matmul.allow_tf32 = False,
torch.backends.cudnn.allow_tf32 = False, jax_default_matmul_precision = "highest", and
NVIDIA_TF32_OVERRIDE=0 unless already set), so every GPU figure is fp32 against fp32. The line
gains "device", "gpu" (the card's name), "tf32", "compile_mode" (torch compiled), "gbps" for
W2 (4 bytes * n * 2 / median) and "tflops" for W5 (2 * 1024^3 / median); torch lines also get
"event_median_us" (CUDA events around each of a few more calls: GPU time without the host's
launch and sync latency) and "gbps_event" / "tflops_event" from it. No CPU affinity or thread
limit is applied on cuda unless --threads is given (then torch.set_num_threads only).
--compile-mode picks torch.compile's mode for --mode compiled (default: inductor's default,
as before); reduce-overhead (CUDA graphs) calls torch.compiler.cudagraph_mark_step_begin()
before every call. CPU runs without the new options print exactly the lines they printed before.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


ALL_WORKLOADS = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9"]

# W9's cases (docs/WORKLOADS.md), as the bench binary's: the model's folder under --models
# (scripts/onnx_real_models.py writes them) and the batch.
W9_CASES = [("resnet18", 1), ("resnet18", 8), ("mobilenet_v2", 1)]


def workload_list(s):
    ws = [w.strip() for w in s.split(",") if w.strip()]
    bad = [w for w in ws if w not in ALL_WORKLOADS]
    if not ws or bad:
        raise argparse.ArgumentTypeError(f"invalid workload(s) {bad or s!r}: choose from {ALL_WORKLOADS}, comma separated")
    return ws


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", required=True, choices=["tf", "jax", "torch", "numpy", "ort"])
    ap.add_argument("--mode", required=True, choices=["eager", "compiled", "xla"])
    ap.add_argument("--workload", required=True, type=workload_list,
                    help="W1..W9, or a comma list (W2,W3,W5): one JSON line each (W9: one per case), same process")
    ap.add_argument("--threads", type=int, default=None, help="default 2 on cpu; on cuda no limit unless given")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--compile-mode", choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
                    default="default", help="torch.compile mode for --mode compiled (torch only)")
    ap.add_argument("--onnx-file", default=None, help="W8 with --framework ort: serve this ONNX file (e.g. the one tensor-core's bench --onnx wrote) instead of PyTorch's export")
    ap.add_argument("--models", default=os.environ.get("TENSOR_CORE_ONNX_MODELS"),
                    help="W9 (--framework ort): the folder scripts/onnx_real_models.py wrote (default: $TENSOR_CORE_ONNX_MODELS)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-calls", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of timed calls at least")
    ap.add_argument("--max-calls", type=int, default=20000)
    ap.add_argument("--tf-sync", choices=["numpy", "none"], default="numpy",
                    help="numpy: call .numpy() on tf results (the brief); none: return the "
                         "EagerTensor as is (TF CPU eager is synchronous, so the op is done)")
    return ap.parse_args()


ARGS = parse()
CUDA = ARGS.device == "cuda"
# cpu: 2 threads unless told (as before); cuda: no thread limit unless --threads is given
NT = ARGS.threads if ARGS.threads is not None else (None if CUDA else 2)
NCPU = os.cpu_count()

# ---------------------------------------------------------------- thread settings (before imports)
# caches of compilers go inside this folder
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(HERE, ".cache", "torchinductor"))
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(HERE, ".cache", "triton"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if CUDA:
    # cuBLAS / cuDNN: no TF32 for float32 math, whatever the frameworks' flags say
    os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
elif ARGS.framework == "jax":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # --device cpu means the CPU even where a GPU plugin is installed
    # jax has no runtime thread knob: restrict the process to NT cores (taskset equivalent)
    # and, for 1 thread, tell XLA not to use its multi-threaded Eigen pool.
    if NT < NCPU:
        os.sched_setaffinity(0, set(range(NT)))
    if NT == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
if ARGS.framework == "numpy" and not CUDA:
    os.environ["OPENBLAS_NUM_THREADS"] = str(NT)
    os.environ["OMP_NUM_THREADS"] = str(NT)

import numpy as np  # noqa: E402

# ---------------------------------------------------------------- inputs (fixed seed, framework neutral)
RNG = np.random.default_rng(0)


def he(shape, fan_in):
    return (RNG.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))).astype(np.float32)


def inputs(w):
    if w == "W1":
        return {"x": RNG.standard_normal(16, dtype=np.float32)}
    if w == "W2":
        return {"x": RNG.standard_normal(4_194_304, dtype=np.float32)}
    if w == "W3":
        return {
            "x": RNG.standard_normal((128, 784), dtype=np.float32),
            "y": RNG.integers(0, 10, 128).astype(np.int64),
            "W1": he((784, 512), 784), "b1": np.zeros(512, np.float32),
            "W2": he((512, 256), 512), "b2": np.zeros(256, np.float32),
            "W3": he((256, 10), 256), "b3": np.zeros(10, np.float32),
        }
    if w == "W4":
        return {
            "x": RNG.standard_normal((64, 1, 28, 28), dtype=np.float32),  # NCHW
            "y": RNG.integers(0, 10, 64).astype(np.int64),
            "c1": he((6, 1, 5, 5), 25), "c1b": np.zeros(6, np.float32),      # OIHW
            "c2": he((16, 6, 5, 5), 150), "c2b": np.zeros(16, np.float32),
            "f1": he((400, 120), 400), "f1b": np.zeros(120, np.float32),     # rows in NCHW flatten order
            "f2": he((120, 84), 120), "f2b": np.zeros(84, np.float32),
            "f3": he((84, 10), 84), "f3b": np.zeros(10, np.float32),
        }
    if w == "W5":
        return {"a": RNG.standard_normal((1024, 1024), dtype=np.float32),
                "b": RNG.standard_normal((1024, 1024), dtype=np.float32)}
    if w == "W6":
        return {"x": np.ones(1, np.float32)}
    if w == "W7":
        return w7_inputs()
    if w == "W8":
        d = inputs("W4")
        d["x"] = d["x"][:1].copy()
        return d
    if w == "W9":
        return {}  # the case's images are made with its batch (build_ort)
    raise ValueError(w)


# W7: GPT-style decoder (WORKLOADS.md). Parameter names and order shared by every framework.
W7_V, W7_T, W7_B, W7_L, W7_D, W7_H, W7_F = 1024, 128, 4, 2, 256, 4, 1024
LR_W7, B1_W7, B2_W7, WD_W7 = 3e-4, 0.9, 0.95, 0.1


def w7_shapes():
    D, F = W7_D, W7_F
    sh = [("wte", (W7_V, D)), ("wpe", (W7_T, D))]
    for l in range(W7_L):
        sh += [(f"h{l}.ln1_w", (D,)), (f"h{l}.ln1_b", (D,)), (f"h{l}.attn_w", (D, 3 * D)), (f"h{l}.attn_b", (3 * D,)),
               (f"h{l}.proj_w", (D, D)), (f"h{l}.proj_b", (D,)), (f"h{l}.ln2_w", (D,)), (f"h{l}.ln2_b", (D,)),
               (f"h{l}.fc_w", (D, F)), (f"h{l}.fc_b", (F,)), (f"h{l}.fc2_w", (F, D)), (f"h{l}.fc2_b", (D,))]
    return sh + [("lnf_w", (D,)), ("lnf_b", (D,)), ("head_w", (D, W7_V))]


def w7_inputs():
    d = {"tok": RNG.integers(0, W7_V, (W7_B, W7_T)).astype(np.int64),
         "tgt": RNG.integers(0, W7_V, (W7_B, W7_T)).astype(np.int64)}
    for k, shp in w7_shapes():
        if k.endswith("ln1_w") or k.endswith("ln2_w") or k == "lnf_w":
            d[k] = np.ones(shp, np.float32)
        elif len(shp) == 1:
            d[k] = np.zeros(shp, np.float32)
        else:
            d[k] = (RNG.standard_normal(shp, dtype=np.float32) * np.float32(0.02)).astype(np.float32)
    return d


W7_NAMES = [k for k, _ in w7_shapes()]


W3_NAMES = ["W1", "b1", "W2", "b2", "W3", "b3"]
W4_NAMES = ["c1", "c1b", "c2", "c2b", "f1", "f1b", "f2", "f2b", "f3", "f3b"]
LR_SGD = 0.01
LR_ADAM, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8

NOTE = []
EXTRA = {}     # per workload: "event_timer" (torch cuda), "cg_skips0" (cudagraph skips before the run)
GPU_INFO = {}  # filled on --device cuda by jax_gpu() / torch_gpu(): "gpu", "tf32", ...


class NotOnCuda(Exception):
    pass


# ================================================================= GPU set-up (--device cuda)
def jax_gpu():
    """The first GPU as jax sees it, with fp32 matmuls at full precision (no TF32)."""
    import jax
    devs = jax.devices("gpu")  # RuntimeError when jax has no GPU backend (no jax-cuda plugin, no driver)
    dev = devs[0]
    jax.config.update("jax_default_matmul_precision", "highest")
    try:
        jax.config.update("jax_default_device", dev)
    except Exception as e:  # placement is explicit (device_put) anyway
        NOTE.append(f"jax_default_device not set: {type(e).__name__}: {e}"[:200])
    try:
        prec = jax.config.jax_default_matmul_precision
    except Exception:
        prec = "highest"
    GPU_INFO["gpu"] = getattr(dev, "device_kind", str(dev))
    GPU_INFO["tf32"] = False if prec in ("highest", "float32") else f"jax_default_matmul_precision={prec}"
    GPU_INFO["tf32_override_env"] = os.environ.get("NVIDIA_TF32_OVERRIDE")
    try:
        GPU_INFO["jax_backend"] = jax.default_backend()
    except Exception:
        pass
    return dev


def torch_gpu():
    """cuda:0 with TF32 off for fp32 matmuls and convolutions (legacy flags only: mixing them
    with the newer fp32_precision API makes torch >= 2.9 raise when it reads them back)."""
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError(f"torch.cuda.is_available() is False (torch {torch.__version__}, CUDA build {torch.version.cuda})")
    dev = torch.device("cuda:0")
    for what, fn in (("torch.backends.cuda.matmul.allow_tf32", lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", False)),
                     ("torch.backends.cudnn.allow_tf32", lambda: setattr(torch.backends.cudnn, "allow_tf32", False))):
        try:
            fn()
        except Exception as e:
            NOTE.append(f"setting {what} = False failed: {type(e).__name__}: {e}"[:300])
    try:
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
    except Exception as e:
        tf32 = f"unknown (reading matmul.allow_tf32: {type(e).__name__}: {e})"[:300]
    GPU_INFO["gpu"] = torch.cuda.get_device_name(0)
    GPU_INFO["tf32"] = tf32
    try:
        GPU_INFO["tf32_cudnn"] = bool(torch.backends.cudnn.allow_tf32)
    except Exception as e:
        GPU_INFO["tf32_cudnn"] = f"unknown ({type(e).__name__}: {e})"[:300]
    GPU_INFO["tf32_override_env"] = os.environ.get("NVIDIA_TF32_OVERRIDE")
    GPU_INFO["cuda"] = torch.version.cuda
    return dev


# ================================================================= numpy
def build_numpy(w, mode, d):
    if mode != "eager":
        raise NotImplementedError("numpy has no compiled mode")
    import threadpoolctl
    threadpoolctl.threadpool_limits(NT)
    if w == "W1":
        x0 = d["x"]

        def call():
            x = x0
            for _ in range(100):
                x = x * np.float32(1.0001) + np.float32(0.0001)
            return x
    elif w == "W2":
        x = d["x"]

        def call():
            return np.tanh(x * np.float32(1.5) + np.float32(0.5)) * (np.float32(1) / (np.float32(1) + np.exp(-x))) - x * np.float32(0.5)
    elif w == "W3":
        P = {k: d[k].copy() for k in W3_NAMES}
        x, y = d["x"], d["y"]
        B = x.shape[0]
        ar = np.arange(B)
        NOTE.append("hand-written forward+backward (numpy has no autodiff)")

        def call():
            z1 = x @ P["W1"] + P["b1"]; h1 = np.maximum(z1, 0)
            z2 = h1 @ P["W2"] + P["b2"]; h2 = np.maximum(z2, 0)
            lg = h2 @ P["W3"] + P["b3"]
            m = lg.max(1, keepdims=True); e = np.exp(lg - m); s = e.sum(1, keepdims=True)
            loss = -(lg[ar, y] - m[:, 0] - np.log(s[:, 0])).mean()
            p = e / s; p[ar, y] -= 1; dl = p / np.float32(B)
            gW3 = h2.T @ dl; gb3 = dl.sum(0)
            dz2 = (dl @ P["W3"].T) * (z2 > 0)
            gW2 = h1.T @ dz2; gb2 = dz2.sum(0)
            dz1 = (dz2 @ P["W2"].T) * (z1 > 0)
            gW1 = x.T @ dz1; gb1 = dz1.sum(0)
            for k, g in zip(W3_NAMES, [gW1, gb1, gW2, gb2, gW3, gb3]):
                P[k] -= np.float32(LR_SGD) * g
            return loss
    elif w == "W4":
        raise NotImplementedError("numpy W4 not implemented (no autodiff; hand-written conv backward out of scope)")
    elif w == "W5":
        a, b = d["a"], d["b"]

        def call():
            return a @ b
    elif w == "W6":
        x = d["x"]

        def call():
            return x + np.float32(1)
    return call, (lambda r: r), "none (numpy is synchronous)"


# ================================================================= tensorflow
def build_tf(w, mode, d):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(NT)
    tf.config.threading.set_inter_op_parallelism_threads(NT)
    if mode == "eager":
        wrap = lambda f: f
    elif mode == "compiled":
        wrap = tf.function
    else:
        wrap = lambda f: tf.function(f, jit_compile=True)

    if w == "W1":
        x0 = tf.constant(d["x"])

        def f(x):
            for _ in range(100):
                x = x * 1.0001 + 0.0001
            return x
        g = wrap(f)
        call = lambda: g(x0)
    elif w == "W2":
        x0 = tf.constant(d["x"])
        g = wrap(lambda x: tf.tanh(x * 1.5 + 0.5) * tf.sigmoid(x) - x * 0.5)
        call = lambda: g(x0)
    elif w == "W3":
        V = [tf.Variable(d[k], name=k) for k in W3_NAMES]
        x = tf.constant(d["x"]); y = tf.constant(d["y"])

        def step(x, y):
            with tf.GradientTape() as tape:
                h = tf.nn.relu(tf.matmul(x, V[0]) + V[1])
                h = tf.nn.relu(tf.matmul(h, V[2]) + V[3])
                lg = tf.matmul(h, V[4]) + V[5]
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=lg))
            gs = tape.gradient(loss, V)
            for v, gr in zip(V, gs):
                v.assign_sub(LR_SGD * gr)
            return loss
        g = wrap(step)
        call = lambda: g(x, y)
        NOTE.append("tf.Variables; SGD assign_sub inside the step" + (" (inside tf.function)" if mode != "eager" else ""))
    elif w == "W4":
        # NHWC / HWIO on CPU (TF CPU Conv2D wants NHWC); fc1 rows permuted so the math equals NCHW flatten
        x = tf.constant(d["x"].transpose(0, 2, 3, 1))
        y = tf.constant(d["y"])
        init = dict(d)
        init["c1"] = d["c1"].transpose(2, 3, 1, 0)
        init["c2"] = d["c2"].transpose(2, 3, 1, 0)
        init["f1"] = d["f1"].reshape(16, 5, 5, 120).transpose(1, 2, 0, 3).reshape(400, 120)
        V = [tf.Variable(init[k], name=k) for k in W4_NAMES]
        M = [tf.Variable(tf.zeros_like(v)) for v in V]
        S = [tf.Variable(tf.zeros_like(v)) for v in V]
        T = tf.Variable(0.0)

        def step(x, y):
            with tf.GradientTape() as tape:
                h = tf.nn.relu(tf.nn.conv2d(x, V[0], 1, [[0, 0], [2, 2], [2, 2], [0, 0]]) + V[1])
                h = tf.nn.max_pool2d(h, 2, 2, "VALID")
                h = tf.nn.relu(tf.nn.conv2d(h, V[2], 1, "VALID") + V[3])
                h = tf.nn.max_pool2d(h, 2, 2, "VALID")
                h = tf.reshape(h, [-1, 400])
                h = tf.nn.relu(tf.matmul(h, V[4]) + V[5])
                h = tf.nn.relu(tf.matmul(h, V[6]) + V[7])
                lg = tf.matmul(h, V[8]) + V[9]
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=lg))
            gs = tape.gradient(loss, V)
            t = T.assign_add(1.0)
            c1 = 1.0 - tf.pow(B1, t)
            c2 = 1.0 - tf.pow(B2, t)
            for v, m, s, gr in zip(V, M, S, gs):
                m.assign(B1 * m + (1 - B1) * gr)
                s.assign(B2 * s + (1 - B2) * tf.square(gr))
                v.assign_sub(LR_ADAM * (m / c1) / (tf.sqrt(s / c2) + EPS))
            return loss
        g = wrap(step)
        call = lambda: g(x, y)
        NOTE.append("NHWC; hand-written Adam on tf.Variables" + (" inside tf.function" if mode != "eager" else " (op by op)"))
    elif w == "W5":
        a = tf.constant(d["a"]); b = tf.constant(d["b"])
        g = wrap(lambda a, b: tf.matmul(a, b))
        call = lambda: g(a, b)
    elif w == "W6":
        x = tf.constant(d["x"])
        g = wrap(lambda x: x + 1)
        call = lambda: g(x)
    if ARGS.tf_sync == "numpy":
        return (lambda: call().numpy()), (lambda r: r), ".numpy() on the result"
    return call, (lambda r: r.numpy()), "none (TF CPU eager is synchronous; result left as EagerTensor)"


# ================================================================= jax
def build_jax(w, mode, d):
    import jax
    import jax.numpy as jnp
    from jax import lax
    jit = (lambda f, **kw: jax.jit(f, **kw)) if mode == "compiled" else (lambda f, **kw: f)
    if mode == "xla":
        raise NotImplementedError("mode xla is tf-only (jax compiled is XLA already)")
    bur = jax.block_until_ready
    if CUDA:
        dev = jax_gpu()
        A = lambda a: jax.device_put(a, dev)
    else:
        A = jnp.asarray

    if w == "W1":
        x0 = A(d["x"])

        def f(x):
            for _ in range(100):
                x = x * 1.0001 + 0.0001
            return x
        g = jit(f)
        call = lambda: bur(g(x0))
    elif w == "W2":
        x0 = A(d["x"])
        g = jit(lambda x: jnp.tanh(x * 1.5 + 0.5) * jax.nn.sigmoid(x) - x * 0.5)
        call = lambda: bur(g(x0))
    elif w == "W3":
        params = {k: A(d[k]) for k in W3_NAMES}
        x = A(d["x"]); y = A(d["y"].astype(np.int32))

        def loss_fn(p, x, y):
            h = jax.nn.relu(x @ p["W1"] + p["b1"])
            h = jax.nn.relu(h @ p["W2"] + p["b2"])
            lg = h @ p["W3"] + p["b3"]
            lp = jax.nn.log_softmax(lg)
            return -jnp.mean(jnp.take_along_axis(lp, y[:, None], axis=1))

        def step(p, x, y):
            loss, gs = jax.value_and_grad(loss_fn)(p, x, y)
            return jax.tree_util.tree_map(lambda a, b: a - LR_SGD * b, p, gs), loss
        g = jit(step, donate_argnums=0) if mode == "compiled" else step
        st = {"p": params}

        def call():
            st["p"], loss = g(st["p"], x, y)
            bur(st["p"])
            return bur(loss)
        NOTE.append("functional SGD: new params returned from the step" + (" inside jax.jit, params donated" if mode == "compiled" else ""))
    elif w == "W4":
        params = {k: A(d[k]) for k in W4_NAMES}
        x = A(d["x"]); y = A(d["y"].astype(np.int32))
        dn = ("NCHW", "OIHW", "NCHW")

        def pool(h):
            return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def loss_fn(p, x, y):
            h = lax.conv_general_dilated(x, p["c1"], (1, 1), ((2, 2), (2, 2)), dimension_numbers=dn)
            h = pool(jax.nn.relu(h + p["c1b"][None, :, None, None]))
            h = lax.conv_general_dilated(h, p["c2"], (1, 1), "VALID", dimension_numbers=dn)
            h = pool(jax.nn.relu(h + p["c2b"][None, :, None, None]))
            h = h.reshape(h.shape[0], 400)
            h = jax.nn.relu(h @ p["f1"] + p["f1b"])
            h = jax.nn.relu(h @ p["f2"] + p["f2b"])
            lg = h @ p["f3"] + p["f3b"]
            lp = jax.nn.log_softmax(lg)
            return -jnp.mean(jnp.take_along_axis(lp, y[:, None], axis=1))

        def step(state, x, y):
            p, m, s, t = state
            loss, gs = jax.value_and_grad(loss_fn)(p, x, y)
            t = t + 1.0
            c1 = 1.0 - B1 ** t
            c2 = 1.0 - B2 ** t
            m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, m, gs)
            s = jax.tree_util.tree_map(lambda s, g: B2 * s + (1 - B2) * g * g, s, gs)
            p = jax.tree_util.tree_map(lambda p, m, s: p - LR_ADAM * (m / c1) / (jnp.sqrt(s / c2) + EPS), p, m, s)
            return (p, m, s, t), loss
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        st = {"s": (params, zeros, jax.tree_util.tree_map(jnp.zeros_like, params), jnp.float32(0.0))}
        g = jit(step, donate_argnums=0) if mode == "compiled" else step

        def call():
            st["s"], loss = g(st["s"], x, y)
            bur(st["s"])
            return bur(loss)
        NOTE.append("NCHW; hand-written functional Adam" + (" inside jax.jit, state donated" if mode == "compiled" else ""))
    elif w == "W5":
        a = A(d["a"]); b = A(d["b"])
        g = jit(lambda a, b: a @ b)
        call = lambda: bur(g(a, b))
    elif w == "W6":
        x = A(d["x"])
        g = jit(lambda x: x + 1)
        call = lambda: bur(g(x))
    elif w == "W7":
        params = {k: A(d[k]) for k in W7_NAMES}
        tok = A(d["tok"].astype(np.int32)); tgt = A(d["tgt"].astype(np.int32))
        B, T, D, H = W7_B, W7_T, W7_D, W7_H
        mask = jnp.tril(jnp.ones((T, T), bool))

        def ln(x, w, b):
            m = x.mean(-1, keepdims=True)
            v = ((x - m) ** 2).mean(-1, keepdims=True)
            return (x - m) / jnp.sqrt(v + 1e-5) * w + b

        def loss_fn(p, tok, tgt):
            x = p["wte"][tok] + p["wpe"][None, :, :]
            for l in range(W7_L):
                h = ln(x, p[f"h{l}.ln1_w"], p[f"h{l}.ln1_b"])
                qkv = h @ p[f"h{l}.attn_w"] + p[f"h{l}.attn_b"]
                q, k, v = [a.reshape(B, T, H, D // H).transpose(0, 2, 1, 3) for a in jnp.split(qkv, 3, axis=-1)]
                att = (q @ k.transpose(0, 1, 3, 2)) / 8.0
                att = jax.nn.softmax(jnp.where(mask, att, -jnp.inf), axis=-1)
                y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
                x = x + y @ p[f"h{l}.proj_w"] + p[f"h{l}.proj_b"]
                h = ln(x, p[f"h{l}.ln2_w"], p[f"h{l}.ln2_b"])
                h = jax.nn.gelu(h @ p[f"h{l}.fc_w"] + p[f"h{l}.fc_b"], approximate=True)
                x = x + h @ p[f"h{l}.fc2_w"] + p[f"h{l}.fc2_b"]
            lg = ln(x, p["lnf_w"], p["lnf_b"]) @ p["head_w"]
            lp = jax.nn.log_softmax(lg, axis=-1)
            return -jnp.mean(jnp.take_along_axis(lp, tgt[..., None], axis=-1))

        def step(state, tok, tgt):
            p, m, s, t = state
            loss, gs = jax.value_and_grad(loss_fn)(p, tok, tgt)
            t = t + 1.0
            c1 = 1.0 - B1_W7 ** t
            c2 = 1.0 - B2_W7 ** t
            m = jax.tree_util.tree_map(lambda m, g: B1_W7 * m + (1 - B1_W7) * g, m, gs)
            s = jax.tree_util.tree_map(lambda s, g: B2_W7 * s + (1 - B2_W7) * g * g, s, gs)
            p = jax.tree_util.tree_map(lambda p, m, s: p * (1 - LR_W7 * WD_W7) - LR_W7 * (m / c1) / (jnp.sqrt(s / c2) + EPS), p, m, s)
            return (p, m, s, t), loss
        zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, params)
        st = {"s": (params, zeros(), zeros(), jnp.float32(0.0))}
        g = jit(step, donate_argnums=0) if mode == "compiled" else step

        def call():
            st["s"], loss = g(st["s"], tok, tgt)
            bur(st["s"])
            return bur(loss)
        NOTE.append("hand-written functional AdamW (decoupled decay)" + (" inside jax.jit, state donated" if mode == "compiled" else ""))
    elif w == "W8":
        p = {k: A(d[k]) for k in W4_NAMES}
        x = A(d["x"])
        dn = ("NCHW", "OIHW", "NCHW")

        def pool(h):
            return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def fwd(p, x):
            h = lax.conv_general_dilated(x, p["c1"], (1, 1), ((2, 2), (2, 2)), dimension_numbers=dn)
            h = pool(jax.nn.relu(h + p["c1b"][None, :, None, None]))
            h = lax.conv_general_dilated(h, p["c2"], (1, 1), "VALID", dimension_numbers=dn)
            h = pool(jax.nn.relu(h + p["c2b"][None, :, None, None]))
            h = h.reshape(h.shape[0], 400)
            h = jax.nn.relu(h @ p["f1"] + p["f1b"])
            h = jax.nn.relu(h @ p["f2"] + p["f2b"])
            return h @ p["f3"] + p["f3b"]
        g = jit(fwd)
        call = lambda: bur(g(p, x))
        NOTE.append("LeNet-5 forward, batch 1, jax.jit of the function (no export round trip)")
    return call, (lambda r: np.asarray(r)), "jax.block_until_ready on all results"


# ================================================================= torch
def build_torch(w, mode, d):
    import torch
    import torch.nn.functional as F
    if NT is not None:
        torch.set_num_threads(NT)
        try:
            torch.set_num_interop_threads(NT)
        except RuntimeError:
            pass
    if mode == "xla":
        raise NotImplementedError("mode xla is tf-only")
    cmode = ARGS.compile_mode
    if mode != "compiled":
        comp = lambda f: f
    elif cmode == "default":
        comp = torch.compile
    else:
        comp = lambda f: torch.compile(f, mode=cmode)
    dev = torch_gpu() if CUDA else None
    if CUDA:
        T = lambda a: torch.from_numpy(a.copy()).to(dev)
    else:
        T = lambda a: torch.from_numpy(a.copy())

    if w == "W1":
        x0 = T(d["x"])

        def f(x):
            for _ in range(100):
                x = x * 1.0001 + 0.0001
            return x
        g = comp(f)
        call = lambda: g(x0)
    elif w == "W2":
        x0 = T(d["x"])
        g = comp(lambda x: torch.tanh(x * 1.5 + 0.5) * torch.sigmoid(x) - x * 0.5)
        call = lambda: g(x0)
    elif w == "W3":
        P = [T(d[k]).requires_grad_() for k in W3_NAMES]
        x = T(d["x"]); y = T(d["y"])
        opt = torch.optim.SGD(P, lr=LR_SGD)

        def loss_fn(x, y):
            h = F.relu(x @ P[0] + P[1])
            h = F.relu(h @ P[2] + P[3])
            return F.cross_entropy(h @ P[4] + P[5], y)
        lf = comp(loss_fn)

        def call():
            opt.zero_grad(set_to_none=True)
            loss = lf(x, y)
            loss.backward()
            opt.step()
            return loss.detach()
        NOTE.append("torch.optim.SGD" + ("; model+loss (fwd+bwd via AOTAutograd) compiled, optimizer.step() eager" if mode == "compiled" else ""))
    elif w == "W4":
        P = [T(d[k]).requires_grad_() for k in W4_NAMES]
        x = T(d["x"]); y = T(d["y"])
        opt = torch.optim.Adam(P, lr=LR_ADAM, betas=(B1, B2), eps=EPS)

        def loss_fn(x, y):
            h = F.max_pool2d(F.relu(F.conv2d(x, P[0], P[1], padding=2)), 2, 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, P[2], P[3])), 2, 2)
            h = h.reshape(h.shape[0], 400)
            h = F.relu(h @ P[4] + P[5])
            h = F.relu(h @ P[6] + P[7])
            return F.cross_entropy(h @ P[8] + P[9], y)
        lf = comp(loss_fn)

        def call():
            opt.zero_grad(set_to_none=True)
            loss = lf(x, y)
            loss.backward()
            opt.step()
            return loss.detach()
        NOTE.append("NCHW; torch.optim.Adam (default impl)" + ("; model+loss compiled, optimizer.step() eager" if mode == "compiled" else ""))
    elif w == "W5":
        a = T(d["a"]); b = T(d["b"])
        g = comp(lambda a, b: a @ b)
        call = lambda: g(a, b)
    elif w == "W6":
        x = T(d["x"])
        g = comp(lambda x: x + 1)
        call = lambda: g(x)
    elif w == "W7":
        P = {k: T(d[k]).requires_grad_() for k in W7_NAMES}
        tok = T(d["tok"]); tgt = T(d["tgt"])
        B, Tn, D, H = W7_B, W7_T, W7_D, W7_H
        opt = torch.optim.AdamW(list(P.values()), lr=LR_W7, betas=(B1_W7, B2_W7), eps=EPS, weight_decay=WD_W7)
        mask = torch.ones(Tn, Tn, dtype=torch.bool, device=dev).tril()
        pos = torch.arange(Tn, device=dev)

        def loss_fn(tok, tgt):
            x = P["wte"][tok] + P["wpe"][pos][None]
            for l in range(W7_L):
                h = F.layer_norm(x, (D,), P[f"h{l}.ln1_w"], P[f"h{l}.ln1_b"], 1e-5)
                qkv = h @ P[f"h{l}.attn_w"] + P[f"h{l}.attn_b"]
                q, k, v = [a.reshape(B, Tn, H, D // H).transpose(1, 2) for a in qkv.split(D, dim=-1)]
                att = (q @ k.transpose(-2, -1)) / 8.0
                att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
                y = (att @ v).transpose(1, 2).reshape(B, Tn, D)
                x = x + y @ P[f"h{l}.proj_w"] + P[f"h{l}.proj_b"]
                h = F.layer_norm(x, (D,), P[f"h{l}.ln2_w"], P[f"h{l}.ln2_b"], 1e-5)
                h = F.gelu(h @ P[f"h{l}.fc_w"] + P[f"h{l}.fc_b"], approximate="tanh")
                x = x + h @ P[f"h{l}.fc2_w"] + P[f"h{l}.fc2_b"]
            lg = F.layer_norm(x, (D,), P["lnf_w"], P["lnf_b"], 1e-5) @ P["head_w"]
            return F.cross_entropy(lg.reshape(-1, W7_V), tgt.reshape(-1))
        lf = comp(loss_fn)

        def call():
            opt.zero_grad(set_to_none=True)
            loss = lf(tok, tgt)
            loss.backward()
            opt.step()
            return loss.detach()
        NOTE.append("torch.optim.AdamW (default impl); explicit attention (no SDPA kernel)" + ("; model+loss compiled, optimizer.step() eager" if mode == "compiled" else ""))
    elif w == "W8":
        P = [T(d[k]) for k in W4_NAMES]
        x = T(d["x"])

        def fwd(x):
            h = F.max_pool2d(F.relu(F.conv2d(x, P[0], P[1], padding=2)), 2, 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, P[2], P[3])), 2, 2)
            h = h.reshape(h.shape[0], 400)
            h = F.relu(h @ P[4] + P[5])
            h = F.relu(h @ P[6] + P[7])
            return h @ P[8] + P[9]
        g = comp(fwd)

        def call():
            with torch.inference_mode():
                return g(x)
        NOTE.append("LeNet-5 forward, batch 1, inference_mode")
    if not CUDA:
        return call, (lambda r: r.detach().numpy()), "none (torch CPU is synchronous)"
    # cuda: every timed call ends with torch.cuda.synchronize(); reduce-overhead (CUDA graphs)
    # marks a new step before each call, so that a replay may reuse the previous call's buffers
    # (the harness keeps no result of a previous call: the first is copied to the host at once)
    inner = call
    sync = torch.cuda.synchronize
    msb = None
    if mode == "compiled" and cmode == "reduce-overhead":
        msb = torch.compiler.cudagraph_mark_step_begin
        try:
            from torch._dynamo.utils import counters
            EXTRA["cg_skips0"] = counters["inductor"]["cudagraph_skips"]
        except Exception:
            pass

    def call():
        if msb is not None:
            msb()
        r = inner()
        sync()
        return r

    def event_timer(n):
        """GPU time of n more calls, CUDA events around each (without host launch/sync latency)"""
        ts = []
        for _ in range(n):
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            if msb is not None:
                msb()
            e0.record()
            inner()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) * 1e3)
        sync()
        return ts
    EXTRA["event_timer"] = event_timer
    return call, (lambda r: r.detach().cpu().numpy()), "torch.cuda.synchronize() after every call"


# ================================================================= ONNX Runtime (W8, W9)
def ort_session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = NT
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def build_ort_w9(case):
    """W9: the case's model as scripts/onnx_real_models.py exported it, on random images."""
    name, batch = case
    if not ARGS.models:
        raise FileNotFoundError("W9 needs --models DIR (or TENSOR_CORE_ONNX_MODELS=DIR): the folder of "
                                "`python scripts/onnx_real_models.py DIR resnet18 mobilenet_v2`")
    path = os.path.join(ARGS.models, name, "model.onnx")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is not there: make it with `python scripts/onnx_real_models.py {ARGS.models} {name}`")
    sess = ort_session(path)
    x = RNG.standard_normal((batch, 3, 224, 224), dtype=np.float32)
    feed = {sess.get_inputs()[0].name: x}
    NOTE.append(f"{path} -> onnxruntime CPU, graph optimizations default")
    return (lambda: sess.run(None, feed)[0]), (lambda r: np.asarray(r)), "none (synchronous)"


def build_ort(w, mode, d, case=None):
    """W8: LeNet-5 (W4's weights) exported from PyTorch to ONNX, served by ONNX Runtime; W9:
    the imported models (build_ort_w9)."""
    if w == "W9":
        return build_ort_w9(case)
    if w != "W8":
        raise NotImplementedError("ort runs W8 and W9 only")
    import tempfile
    import onnxruntime as ort
    import torch
    import torch.nn.functional as F
    P = [torch.from_numpy(d[k].copy()) for k in W4_NAMES]

    class LeNet(torch.nn.Module):
        def forward(self, x):
            h = F.max_pool2d(F.relu(F.conv2d(x, P[0], P[1], padding=2)), 2, 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, P[2], P[3])), 2, 2)
            h = h.reshape(h.shape[0], 400)
            h = F.relu(h @ P[4] + P[5])
            h = F.relu(h @ P[6] + P[7])
            return h @ P[8] + P[9]
    if ARGS.onnx_file:
        path = ARGS.onnx_file
        NOTE.append(f"{path} -> onnxruntime CPU, graph optimizations default")
    else:
        path = os.path.join(tempfile.mkdtemp(), "lenet5.onnx")
        torch.onnx.export(LeNet(), (torch.from_numpy(d["x"].copy()),), path, input_names=["x"], output_names=["y"], dynamo=False)
        NOTE.append("torch.onnx.export (TorchScript exporter) -> onnxruntime CPU, graph optimizations default")
    sess = ort_session(path)
    inputs = sess.get_inputs()
    x = d["x"].reshape([dim if isinstance(dim, int) else -1 for dim in inputs[0].shape]) if len(inputs[0].shape) != d["x"].ndim else d["x"]
    feed = {inputs[0].name: x}
    call = lambda: sess.run(None, feed)[0]
    return call, (lambda r: np.asarray(r)), "none (synchronous)"


# ================================================================= driver
def version(fw):
    if fw == "tf":
        import tensorflow as tf; return tf.__version__
    if fw == "jax":
        import jax, jaxlib; return f"jax {jax.__version__} jaxlib {jaxlib.__version__}"
    if fw == "torch":
        import torch; return torch.__version__
    if fw == "ort":
        import onnxruntime; return onnxruntime.__version__
    return np.__version__


def cpu_busy_s():
    """busy CPU seconds of the whole machine (all processes) from /proc/stat"""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    t = os.times()
    return t.user + t.system


def checksum(r):
    a = np.asarray(r, dtype=np.float64)
    return float(a.sum()) if a.ndim else float(a)


def gpu_extras(out, w, med_ns):
    """--device cuda: the card, the TF32 state, bandwidth / throughput, GPU-side event times"""
    out.update(GPU_INFO)
    if w == "W2":
        out["gbps"] = round(4 * 4_194_304 * 2 / (med_ns / 1e9) / 1e9, 1)
    if w == "W5":
        out["tflops"] = round(2 * 1024 ** 3 / (med_ns / 1e9) / 1e12, 2)
    if "event_timer" in EXTRA:
        try:
            ev = sorted(EXTRA["event_timer"](30))
            n = len(ev)
            em = ev[n // 2] if n % 2 else (ev[n // 2 - 1] + ev[n // 2]) / 2
            out["event_median_us"] = round(em, 3)
            out["event_min_us"] = round(ev[0], 3)
            if w == "W2":
                out["gbps_event"] = round(4 * 4_194_304 * 2 / (em / 1e6) / 1e9, 1)
            if w == "W5":
                out["tflops_event"] = round(2 * 1024 ** 3 / (em / 1e6) / 1e12, 2)
        except Exception as e:
            out["event_error"] = f"{type(e).__name__}: {e}"[:500]
    if "cg_skips0" in EXTRA:
        try:
            from torch._dynamo.utils import counters
            out["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"] - EXTRA["cg_skips0"]
        except Exception:
            pass


def run_one(w, case=None):
    global RNG
    RNG = np.random.default_rng(0)  # every workload from the same seed, alone or in a list
    NOTE.clear()
    EXTRA.clear()
    out = {"framework": ARGS.framework, "mode": ARGS.mode, "workload": w, "threads": NT}
    if case is not None:
        out.update({"case": f"{case[0]}_b{case[1]}", "batch": case[1]})
    torch_compiled = ARGS.framework == "torch" and ARGS.mode == "compiled"
    if CUDA:
        out["device"] = "cuda"
    if torch_compiled and (CUDA or ARGS.compile_mode != "default"):
        out["compile_mode"] = ARGS.compile_mode
    try:
        if CUDA and ARGS.framework not in ("torch", "jax"):
            raise NotOnCuda("not on cuda")
        d = inputs(w)
        build = {"numpy": build_numpy, "tf": build_tf, "jax": build_jax, "torch": build_torch, "ort": build_ort}[ARGS.framework]
        if w == "W9" and ARGS.framework != "ort":
            raise NotImplementedError("W9 runs in ort only (the bench binary runs tensor-core and tract)")
        call, to_np, sync = build_ort(w, ARGS.mode, d, case) if w == "W9" else build(w, ARGS.mode, d)
        t0 = time.perf_counter_ns()
        r = call()
        first = (time.perf_counter_ns() - t0) / 1e3
        check = checksum(to_np(r))
        del r  # no result of an earlier call stays alive (CUDA graphs reuse its buffers)
        for _ in range(max(0, ARGS.warmup - 1)):
            call()
        ts = []
        pc = time.perf_counter_ns
        busy0, own0 = cpu_busy_s(), own_cpu_s()
        tstart = pc()
        deadline = tstart + int(ARGS.min_time * 1e9)
        while len(ts) < ARGS.max_calls:
            a = pc()
            call()
            b = pc()
            ts.append(b - a)
            if len(ts) >= ARGS.min_calls and b >= deadline:
                break
        wall = (pc() - tstart) / 1e9
        foreign = max(0.0, (cpu_busy_s() - busy0) - (own_cpu_s() - own0)) / wall
        ts.sort()
        n = len(ts)
        med = ts[n // 2] if n % 2 else (ts[n // 2 - 1] + ts[n // 2]) / 2
        out.update({"median_us": round(med / 1e3, 3), "min_us": round(ts[0] / 1e3, 3),
                    "max_us": round(ts[-1] / 1e3, 3), "calls": n, "first_us": round(first, 1),
                    "warmups": max(ARGS.warmup, 1), "check": check, "sync": sync,
                    "version": version(ARGS.framework),
                    "foreign_cpu": round(foreign, 2), "load1": float(open("/proc/loadavg").read().split()[0])})
        if CUDA:
            gpu_extras(out, w, med)
        if NOTE:
            out["note"] = "; ".join(NOTE)
        if ARGS.framework == "tf" and ARGS.tf_sync == "none":
            out["tf_sync"] = "none"
        print(json.dumps(out), flush=True)
        return 0
    except Exception as e:  # record the failure as a JSON line
        msg = str(e) if isinstance(e, NotOnCuda) else f"{type(e).__name__}: {e}"
        out.update({"median_us": None, "min_us": None, "max_us": None, "calls": 0,
                    "error": msg[:2000]})
        if CUDA:
            out.update(GPU_INFO)
            if NOTE:
                out["note"] = "; ".join(NOTE)
        print(json.dumps(out), flush=True)
        return 2


def main():
    rc = 0
    for w in ARGS.workload:
        for case in (W9_CASES if w == "W9" else [None]):
            rc = max(rc, run_one(w, case))
    return rc


if __name__ == "__main__":
    sys.exit(main())
