#!/usr/bin/env bash
# Every GPU check and GPU benchmark, in one run on a machine with an NVIDIA GPU and CUDA
# (docs/GPU.md). Build the binaries on any machine first:
#
#   cargo build --release -p examples --features cuda --bin gpu_check --bin bench
#   scripts/gpu_device_check.sh [OUT_DIR]
#
# It prints the GPU, runs target/release/gpu_check (every GPU op against the CPU, gradients,
# errors, graph functions, W7's step, then timings as JSON lines), the generated kernels'
# register and instruction counts (where ptxas is installed), target/release/bench's W3 and W7
# captured without and with their planned arena (`TENSOR_CORE_CUDA_ARENA`) and on one stream
# (`TENSOR_CORE_CUDA_LANES=1`), W2 graph with and without fast math (`TENSOR_CORE_CUDA_FAST_MATH`,
# two alternating rounds, against a copy), then the peers on the same card interleaved with the
# bench (peers/gpu_round.sh: PyTorch eager, torch.compile default and reduce-overhead, JAX jit),
# and ends with the table (peers/gpu_table.py) and W2's fractions of the device copy. Under 8
# minutes on an H100 with the defaults
# (ROUNDS=1, BUDGET=240 s for the peers; PEERS=0 skips them). Exit status: gpu_check's.
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-gpu-out}}
mkdir -p "$OUT_DIR"
BIN=${GPU_CHECK:-target/release/gpu_check}
START=$SECONDS

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$OUT_DIR/gpu.txt"

# CUDA's libraries (NVRTC, cuBLAS) where the toolkit or a Python wheel put them; the driver's
# libcuda is on the loader's path already.
for lib in libnvrtc.so libcublas.so; do
    if ! ldconfig -p | grep -q "$lib"; then
        dir=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu /opt /usr/local/lib/python3*/dist-packages -name "$lib*" 2>/dev/null | head -1 | xargs -r dirname)
        [ -n "$dir" ] && export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}"
    fi
done
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" | tee -a "$OUT_DIR/gpu.txt"
export TENSOR_CORE_CUDA_CACHE=${TENSOR_CORE_CUDA_CACHE:-$OUT_DIR/kernel-cache}

"$BIN" --json "$OUT_DIR/gpu.jsonl" 2>&1 | tee "$OUT_DIR/check.log"
status=${PIPESTATUS[0]}
echo "gpu_check: exit $status after $((SECONDS - START)) s" | tee -a "$OUT_DIR/check.log"
# A failure is run again with captures on one stream, to tell a lane-ordering fault apart.
if [ "$status" != 0 ]; then
    TENSOR_CORE_CUDA_LANES=1 "$BIN" 2>&1 | grep -E "FAIL|passed|failed" | tee "$OUT_DIR/check-one-lane.log"
fi

# The generated kernels' register counts and instruction counts (SASS), largest PTX first,
# where the toolkit's ptxas and cuobjdump are installed: says whether a kernel is bound by
# its arithmetic or by memory.
if command -v ptxas >/dev/null && command -v cuobjdump >/dev/null; then
    # W2's fast-math kernel (gpu_check's fast-math checks made it): the one PTX with W2's
    # five ex2.approx and ten rcp.approx (four elements a thread and the tail; the NVRTC test
    # nvrtc_compiles_every_fast_variant asserts those counts).
    w2_fast=$(for f in "$TENSOR_CORE_CUDA_CACHE"/tc_ew_*.ptx; do
        [ "$(grep -c 'ex2.approx.ftz.f32' "$f")" = 5 ] && [ "$(grep -c 'rcp.approx.ftz.f32' "$f")" = 10 ] && echo "$f"
    done 2>/dev/null | head -1)
    for ptx in $({ ls -S "$TENSOR_CORE_CUDA_CACHE"/tc_ew_*.ptx 2>/dev/null | head -4; echo "$w2_fast"; } | awk 'NF && !seen[$0]++'); do
        regs=$(ptxas -arch=sm_90 -v "$ptx" -o "$OUT_DIR/k.cubin" 2>&1 | grep -o "Used [0-9]* registers" | head -1)
        sass=$(cuobjdump -sass "$OUT_DIR/k.cubin" | grep -cE '^\s+/\*[0-9a-f]{4}\*/')
        label=$([ "$ptx" = "$w2_fast" ] && echo " (W2's fast-math kernel)")
        echo "kernel $(basename "$ptx")$label: $regs, $sass SASS instructions" | tee -a "$OUT_DIR/check.log"
    done
    rm -f "$OUT_DIR/k.cubin"
fi

# tensor-core's bench on the GPU: W3's and W7's captured graphs with their buffers in one
# planned arena and without it (TENSOR_CORE_CUDA_ARENA=1 and 0), and on one stream
# (lanes 1), alternating, two rounds; then every GPU workload beside the peers (with the GPU
# time of a call by CUDA events). (Batched launches, on by default, measured 1.11-1.15x on
# W7 against none on an H200; four lanes against one ran level: those pairs are no longer
# run.)
BENCH=${BENCH:-target/release/bench}
if [ -x "$BENCH" ]; then
    for round in 1 2; do
        for variant in "0 4" "1 4" "1 1"; do
            read -r arena lanes <<< "$variant"
            for w in W3 W7; do
                TENSOR_CORE_CUDA_ARENA=$arena TENSOR_CORE_CUDA_LANES=$lanes "$BENCH" --device cuda --workload $w --mode graph --min-time 0.3 |
                    sed "s/}$/,\"arena\":$arena,\"lanes\":$lanes,\"round\":$round}/" | tee -a "$OUT_DIR/lanes.jsonl"
            done
        done
    done
fi

# W2 graph with the CPU's bits and with fast math (TENSOR_CORE_CUDA_FAST_MATH=0 and 1, docs/GPU.md
# "Fast math"), alternating, two rounds: gpu_check --w2-bandwidth times W2 graph with calls queued
# back to back against our one-op copy (`x + 0`) timed alike in the same process, and the bench
# times it call by call beside it (its gpu_us by CUDA events). Then each line's fraction of
# the copy's bandwidth (and, at the end, of the device copy that peers/gpu_peak.py measures).
FAST_JSONL="$OUT_DIR/fastmath.jsonl"
for round in 1 2; do
    for fm in 0 1; do
        line=$(TENSOR_CORE_CUDA_FAST_MATH=$fm "$BIN" --w2-bandwidth 2>&1 | grep -v '^device')
        if grep -q '^{' <<< "$line"; then
            sed "s/}$/,\"round\":$round}/" <<< "$line" | tee -a "$FAST_JSONL"
        else
            echo "gpu_check --w2-bandwidth (fast math $fm): $line"
        fi
        if [ -x "$BENCH" ]; then
            TENSOR_CORE_CUDA_FAST_MATH=$fm "$BENCH" --device cuda --workload W2 --mode graph --min-time 0.2 |
                sed "s/}$/,\"fast_math\":$fm,\"round\":$round}/" | tee -a "$FAST_JSONL"
        fi
    done
done
# field NAME LINE: a number field of a JSON line.
field() { grep -o "\"$1\": *[0-9.]*" <<< "$2" | head -1 | sed 's/.*: *//'; }
fast_math_summary() { # $1: the device copy's GB/s, or empty
    grep '"pipelined_us"' "$FAST_JSONL" 2>/dev/null | grep '"fast_math"' | while read -r line; do
        local gbps frac
        gbps=$(field gbps "$line")
        frac=$(field frac_copy "$line")
        printf 'W2 graph, fast math %s, round %s: %s us pipelined, %s GB/s, %.0f%% of our copy (%s GB/s)%s\n' \
            "$(field fast_math "$line")" "$(field round "$line")" "$(field pipelined_us "$line")" "$gbps" \
            "$(awk "BEGIN { print 100 * $frac }")" "$(field copy_gbps "$line")" \
            "$([ -n "$1" ] && awk "BEGIN { printf \", %.0f%% of the device copy (%s GB/s)\", 100 * $gbps / $1, $1 }")"
    done | tee -a "$OUT_DIR/fastmath.txt"
    [ -z "$1" ] && grep '"median_us"' "$FAST_JSONL" 2>/dev/null | while read -r line; do
        printf 'W2 graph (bench), fast math %s, round %s: %s us a synchronized call, %s us of GPU time by events\n' \
            "$(field fast_math "$line")" "$(field round "$line")" "$(field median_us "$line")" "$(field gpu_us "$line")"
    done | tee -a "$OUT_DIR/fastmath.txt"
}
fast_math_summary ""

[ "${PEERS:-1}" = 0 ] && { echo "done after $((SECONDS - START)) s (no peers)"; exit "$status"; }
TC_BENCH=${TC_BENCH:-$( [ -x "$BENCH" ] && echo "$BENCH --device cuda --min-time 0.3")} \
    ROUNDS=${ROUNDS:-1} BUDGET=${BUDGET:-240} peers/gpu_round.sh "$OUT_DIR/gpu.jsonl" 2>&1 | tail -40
python3 peers/gpu_table.py "$OUT_DIR/gpu.jsonl" | tee "$OUT_DIR/table.md"
# W2 with and without fast math against the device copy (gpu_peak.py's line, round 0).
device_copy=$(field copy_gbps "$(grep -E '"probe": *"gpu_peak"' "$OUT_DIR/gpu.jsonl" | tail -1)")
[ -n "$device_copy" ] && fast_math_summary "$device_copy"
echo "done after $((SECONDS - START)) s"
exit "$status"
