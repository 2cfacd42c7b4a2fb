#!/usr/bin/env python3
"""A markdown table of peers/cpu_threads_round.sh's JSON lines: per workload and framework/mode,
the median µs at 1 and 2 threads (the smallest of the rounds' medians), the speed-up from 1 to
2 threads, and at each thread count the peer's time divided by tensor-core graph's (> 1:
tensor-core faster).

  python3 peers/threads_table.py OUT.jsonl
"""
import json
import sys
from collections import defaultdict

ORDER = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"]


def column(d):
    fw, mode = d.get("framework", "?"), d.get("mode", "?")
    names = {("jax", "compiled"): "JAX jit", ("tf", "compiled"): "tf.function", ("torch", "compiled"): "torch.compile",
             ("torch", "eager"): "PyTorch eager", ("ort", "compiled"): "ONNX Runtime", ("numpy", "eager"): "NumPy"}
    return names.get((fw, mode), f"{fw} {mode}")


def main(path):
    best = defaultdict(dict)  # (workload, column) -> threads -> smallest median
    for line in open(path):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "median_us" not in d or d.get("error") or "workload" not in d or d.get("case"):
            continue
        col = column(d)
        t = d.get("threads")
        cell = best[(d["workload"], col)]
        cell[t] = min(cell.get(t, float("inf")), d["median_us"])
    print("| workload | framework | 1 thread (µs) | 2 threads (µs) | 1 → 2 threads | vs graph, 1 thread | vs graph, 2 threads |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for w in ORDER:
        ours = best.get((w, "tensor-core graph"), {})
        cols = sorted({c for (wl, c) in best if wl == w}, key=lambda c: (c != "tensor-core graph", c))
        for c in cols:
            cell = best[(w, c)]
            one, two = cell.get(1), cell.get(2)
            fmt = lambda v: f"{v:,.1f}" if v is not None else "–"
            scale = f"{one / two:.2f}×" if one and two else "–"
            ratio = lambda t: f"{cell[t] / ours[t]:.2f}" if c != "tensor-core graph" and t in cell and t in ours else ""
            print(f"| {w} | {c} | {fmt(one)} | {fmt(two)} | {scale} | {ratio(1)} | {ratio(2)} |")


if __name__ == "__main__":
    main(sys.argv[1])
