#!/usr/bin/env python3
"""The GPU's practical peaks, measured with PyTorch, as ONE JSON line (well under 20 s):

- copy_gbps: device-to-device copy bandwidth, dst.copy_(src) of a 1 GiB float32 buffer,
  median of 20 copies timed with CUDA events, counting read + write (2 GiB moved per copy);
- sgemm_tflops: float32 matmul 8192 x 8192 x 8192 with TF32 off (cuBLAS sgemm), median of
  10 calls timed with CUDA events, 2 * 8192^3 flop per call.

Every measurement is guarded: a failure becomes an "..._error" field, never a crash.

  python3 peers/gpu_peak.py
"""
import json
import os
import time

os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")  # cuBLAS: no TF32 for fp32, whatever the flags say


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def timed(torch, fn, reps):
    """milliseconds of each of reps calls of fn, CUDA events around each"""
    ts = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return ts


def main():
    out = {"probe": "gpu_peak"}
    t_start = time.perf_counter()
    try:
        import torch
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        out["gpu"] = torch.cuda.get_device_name(0)
        dev = torch.device("cuda:0")
        try:  # legacy flags only (see bench.py: mixing with the fp32_precision API raises)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            out["tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        except Exception as e:
            out["tf32"] = f"unknown ({type(e).__name__}: {e})"[:300]
        out["tf32_override_env"] = os.environ.get("NVIDIA_TF32_OVERRIDE")
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"[:1000]
        print(json.dumps(out), flush=True)
        return 2

    # ---- device-to-device copy, 1 GiB
    try:
        n = (1 << 30) // 4
        src = torch.ones(n, dtype=torch.float32, device=dev)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        torch.cuda.synchronize()
        ts = timed(torch, lambda: dst.copy_(src), 20)
        moved = 2 * n * 4  # read src + write dst
        out["copy_bytes"] = moved
        out["copy_ms_median"] = round(median(ts), 4)
        out["copy_gbps"] = round(moved / (median(ts) / 1e3) / 1e9, 1)
        out["copy_gbps_best"] = round(moved / (min(ts) / 1e3) / 1e9, 1)
        src = dst = None
        torch.cuda.empty_cache()
    except Exception as e:
        out["copy_error"] = f"{type(e).__name__}: {e}"[:1000]

    # ---- fp32 sgemm 8192^3, TF32 off
    try:
        m = 8192
        g = torch.Generator(device=dev)
        g.manual_seed(0)
        a = torch.randn(m, m, device=dev, generator=g)
        b = torch.randn(m, m, device=dev, generator=g)
        c = torch.empty(m, m, device=dev)
        for _ in range(2):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        ts = timed(torch, lambda: torch.mm(a, b, out=c), 10)
        flop = 2 * m ** 3
        out["sgemm_n"] = m
        out["sgemm_ms_median"] = round(median(ts), 3)
        out["sgemm_tflops"] = round(flop / (median(ts) / 1e3) / 1e12, 2)
        out["sgemm_tflops_best"] = round(flop / (min(ts) / 1e3) / 1e12, 2)
        # a sanity check that this was fp32, not TF32: one entry against a float64 dot product
        ref = float((a[0].double() * b[:, 0].double()).sum())
        out["sgemm_c00_abs_err"] = abs(float(c[0, 0]) - ref)
        a = b = c = None
        torch.cuda.empty_cache()
    except Exception as e:
        out["sgemm_error"] = f"{type(e).__name__}: {e}"[:1000]

    # ---- one CUDA graph launch: `y = x + 1` on one float, captured, replayed and synchronized
    # (the reference of W6 on the GPU: a cache hit of a one-op graph function)
    try:
        import statistics
        x = torch.ones(1, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                y = x + 1
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = x + 1
        for _ in range(10):
            graph.replay()
        torch.cuda.synchronize()
        us = []
        for _ in range(2000):
            t = time.perf_counter_ns()
            graph.replay()
            torch.cuda.synchronize()
            us.append((time.perf_counter_ns() - t) / 1e3)
        out["cuda_graph_launch_us"] = round(statistics.median(us), 2)
        t = time.perf_counter_ns()
        for _ in range(2000):
            graph.replay()
        torch.cuda.synchronize()
        out["cuda_graph_launch_pipelined_us"] = round((time.perf_counter_ns() - t) / 1e3 / 2000, 2)
    except Exception as e:
        out["cuda_graph_error"] = f"{type(e).__name__}: {e}"[:1000]

    out["wall_s"] = round(time.perf_counter() - t_start, 2)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
