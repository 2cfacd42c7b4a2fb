"""W8 in ONNX Runtime on the ONNX tensor-core exports: LeNet-5's forward pass on one image.

    cargo run --release -p examples --bin bench -- --onnx lenet5.onnx
    python3 examples/scripts/onnxruntime_w8.py lenet5.onnx --threads 2

Times `InferenceSession.run` as the bench binary times its calls (3 warm-up calls, then at
least 20 calls and at least --min-time seconds) and prints one JSON line in the bench
binary's format. Needs numpy and onnxruntime.
"""
import argparse
import json
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=1.0)
    args = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    t0 = time.perf_counter_ns()
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    load_us = (time.perf_counter_ns() - t0) / 1e3
    name = sess.get_inputs()[0].name
    feed = {name: np.random.default_rng(0).standard_normal((1, 1, 28, 28), dtype=np.float32)}
    for _ in range(3):
        sess.run(None, feed)
    times = []
    start = time.perf_counter_ns()
    while len(times) < 20 or time.perf_counter_ns() - start < args.min_time * 1e9:
        a = time.perf_counter_ns()
        sess.run(None, feed)
        times.append(time.perf_counter_ns() - a)
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2
    print(json.dumps({"framework": "onnxruntime", "mode": "tensor-core-onnx", "workload": "W8", "threads": args.threads,
                      "median_us": round(median / 1e3, 3), "min_us": round(times[0] / 1e3, 3), "max_us": round(times[-1] / 1e3, 3),
                      "calls": n, "load_us": round(load_us, 1), "version": ort.__version__}))


if __name__ == "__main__":
    main()
