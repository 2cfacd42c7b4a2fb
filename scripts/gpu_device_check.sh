#!/usr/bin/env bash
# Every GPU check and GPU benchmark, in one run on a machine with an NVIDIA GPU and CUDA
# (docs/GPU.md). Build the check binary on any machine first:
#
#   cargo build --release -p examples --features cuda --bin gpu_check
#   scripts/gpu_device_check.sh [OUT_DIR]
#
# It prints the GPU, runs target/release/gpu_check (every GPU op against the CPU, gradients,
# errors, then W2/W5/W6 timings as JSON lines), then the peers on the same card
# (peers/gpu_round.sh: PyTorch eager, torch.compile default and reduce-overhead, JAX jit),
# and ends with the table (peers/gpu_table.py). Under 8 minutes on an H100 with the defaults
# (ROUNDS=1, BUDGET=240 s for the peers). Exit status: gpu_check's.
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

ROUNDS=${ROUNDS:-1} BUDGET=${BUDGET:-240} peers/gpu_round.sh "$OUT_DIR/gpu.jsonl" 2>&1 | tail -40
python3 peers/gpu_table.py "$OUT_DIR/gpu.jsonl" | tee "$OUT_DIR/table.md"
echo "done after $((SECONDS - START)) s"
exit "$status"
