#!/usr/bin/env python3
"""Markdown tables from the JSON lines of peers/gpu_round.sh (or any bench.py / bench lines).

  python3 peers/gpu_table.py OUT.jsonl [--ref MODE]

Table 1: rows = workloads, columns = each framework/mode (torch.compile mode included), cells =
median_us, the smallest of the rounds' medians. Table 2 (when tensor-core lines are present):
each column's time divided by tensor-core's (its "graph" mode unless --ref names another; the
fastest tensor-core mode of the workload when the named one is missing): above 1 = tensor-core
faster. Then W2 bandwidth and W5 throughput, the GPU's peaks (gpu_peak.py's line), and errors.
Lines that are not JSON are skipped.
"""
import json
import sys
from collections import defaultdict

TC = "tensor-core"
ORDER = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"]


def column(d):
    fw, mode = d.get("framework", "?"), d.get("mode", "?")
    if fw == "torch" and mode == "compiled":
        return f"torch.compile {d.get('compile_mode', 'default')}"
    if fw == "jax" and mode == "compiled":
        return "jax jit"
    return f"{fw} {mode}"


def col_rank(c):
    pref = ["tensor-core graph", "tensor-core eager", "torch eager", "torch.compile default",
            "torch.compile reduce-overhead", "torch.compile max-autotune-no-cudagraphs", "jax jit", "jax eager"]
    if c in pref:
        return (pref.index(c), c)
    return (100 if c.startswith(TC) else 200, c)


def fmt(v):
    if v is None:
        return "–"
    if v < 10:
        return f"{v:.2f}"
    if v < 1000:
        return f"{v:.1f}"
    return f"{v:.0f}"


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    ref_mode = "graph"
    if "--ref" in argv:
        ref_mode = argv[argv.index("--ref") + 1]
        args = [a for a in args if a != ref_mode]
    if not args:
        print(__doc__)
        return 2
    lines = []
    for path in args:
        with open(path) as f:
            for raw in f:
                raw = raw.strip()
                if not raw.startswith("{"):
                    continue
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    continue

    med = defaultdict(list)      # (workload, column) -> medians of the rounds
    errs = {}                    # (workload, column) -> last error
    extra = defaultdict(dict)    # (workload, column) -> best gbps / tflops / event figures
    peaks = [d for d in lines if d.get("probe") == "gpu_peak"]
    gpus, tf32 = set(), set()
    for d in lines:
        w = d.get("workload")
        if w is None or "framework" not in d:
            continue
        c = column(d)
        if d.get("gpu"):
            gpus.add(str(d["gpu"]))
        if "tf32" in d:
            tf32.add(f"{d.get('framework')}: {d['tf32']}")
        m = d.get("median_us")
        if isinstance(m, (int, float)):
            med[(w, c)].append(float(m))
            if isinstance(d.get("gpu_us"), (int, float)):  # tensor-core's bench: GPU time by CUDA events
                d = dict(d, event_median_us=d["gpu_us"])
                if w == "W2" and d["gpu_us"] > 0:
                    d["gbps_event"] = round(4 * 4_194_304 * 2 / d["gpu_us"] / 1e3, 1)
            for k in ("gbps", "tflops", "gbps_event", "tflops_event", "event_median_us"):
                v = d.get(k)
                if isinstance(v, (int, float)):
                    prev = extra[(w, c)].get(k)
                    if prev is None or (v < prev if k == "event_median_us" else v > prev):
                        extra[(w, c)][k] = v
        elif d.get("error"):
            errs[(w, c)] = str(d["error"])

    cols = sorted({c for (_, c) in list(med) + list(errs)}, key=col_rank)
    wls = sorted({w for (w, _) in list(med) + list(errs)}, key=lambda w: (ORDER.index(w) if w in ORDER else 99, w))
    if not cols:
        print("no benchmark lines found")
        return 1
    best = {k: min(v) for k, v in med.items()}
    rounds = {k: len(v) for k, v in med.items()}

    print("median µs per call (min over rounds of the medians; `err` = failed, see below)\n")
    print("| workload | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for w in wls:
        cells = []
        for c in cols:
            if (w, c) in best:
                cells.append(fmt(best[(w, c)]))
            elif (w, c) in errs:
                cells.append("err")
            else:
                cells.append("")
        print(f"| {w} | " + " | ".join(cells) + " |")
    nr = sorted(set(rounds.values()))
    print(f"\nrounds per cell: {', '.join(map(str, nr))}")

    tc_cols = [c for c in cols if c.startswith(TC + " ")]
    if tc_cols:
        print(f"\nratio column / tensor-core (tensor-core's `{ref_mode}` mode; >1: tensor-core faster)\n")
        others = [c for c in cols if c != f"{TC} {ref_mode}"]
        print("| workload | tensor-core µs | " + " | ".join(others) + " |")
        print("|---|---:|" + "---:|" * len(others))
        for w in wls:
            ref_c = f"{TC} {ref_mode}"
            if (w, ref_c) not in best:
                cand = [(best[(w, c)], c) for c in tc_cols if (w, c) in best]
                if not cand:
                    continue
                _, ref_c = min(cand)
            ref = best[(w, ref_c)]
            label = fmt(ref) + ("" if ref_c == f"{TC} {ref_mode}" else f" ({ref_c[len(TC) + 1:]})")
            cells = []
            for c in others:
                if c == ref_c:
                    cells.append("1.00")
                elif (w, c) in best and ref > 0:
                    cells.append(f"{best[(w, c)] / ref:.2f}")
                else:
                    cells.append("")
            print(f"| {w} | {label} | " + " | ".join(cells) + " |")

    figs = []
    for (w, c), e in sorted(extra.items(), key=lambda kv: (kv[0][0], col_rank(kv[0][1]))):
        parts = []
        if "gbps" in e:
            parts.append(f"{e['gbps']} GB/s")
        if "gbps_event" in e:
            parts.append(f"{e['gbps_event']} GB/s by CUDA events")
        if "tflops" in e:
            parts.append(f"{e['tflops']} TFLOP/s")
        if "tflops_event" in e:
            parts.append(f"{e['tflops_event']} TFLOP/s by CUDA events")
        if "event_median_us" in e:
            parts.append(f"GPU time by CUDA events {fmt(e['event_median_us'])} µs")
        if parts:
            figs.append(f"- {w} {c}: " + ", ".join(parts))
    if figs:
        print("\nbandwidth (W2: 4 B × n × 2 / median) and throughput (W5: 2·1024³ / median), best round;"
              " \"by CUDA events\": from the GPU time of the call alone (torch, tensor-core)\n")
        print("\n".join(figs))
    if peaks or gpus:
        print()
        if gpus:
            print(f"- GPU: {', '.join(sorted(gpus))}; tf32: {'; '.join(sorted(tf32)) or '?'}")
        for p in peaks:
            if "error" in p:
                print(f"- gpu_peak.py: error {p['error']}")
            else:
                print(f"- gpu_peak.py: device copy {p.get('copy_gbps', '?')} GB/s (best {p.get('copy_gbps_best', '?')}), "
                      f"fp32 sgemm 8192³ {p.get('sgemm_tflops', '?')} TFLOP/s (best {p.get('sgemm_tflops_best', '?')}); "
                      f"tf32 {p.get('tf32', '?')}" + (f"; errors: {p.get('copy_error', '')} {p.get('sgemm_error', '')}"
                                                      if ("copy_error" in p or "sgemm_error" in p) else ""))
    bad = sorted(((w, c), e) for (w, c), e in errs.items() if (w, c) not in best)
    if bad:
        print("\nerrors (cells with no successful round)\n")
        for (w, c), e in bad:
            print(f"- {w} {c}: {e[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
