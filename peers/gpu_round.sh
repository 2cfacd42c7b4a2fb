#!/usr/bin/env bash
# Interleaved rounds of the peers on the GPU, JSON lines appended to one file.
#
#   peers/gpu_round.sh OUT.jsonl                 # then: python3 peers/gpu_table.py OUT.jsonl
#   TC_BENCH="target/release/bench --device cuda --min-time 0.3" ROUNDS=2 peers/gpu_round.sh OUT.jsonl
#
# Each round, for every workload of $WORKLOADS: "$TC_BENCH --workload W" first (when TC_BENCH is
# set; it prints its own JSON lines; its failures are ignored), then the peers, each with
# --device cuda $BENCH_ARGS: torch eager, jax.jit, torch.compile default, torch.compile
# reduce-overhead (CUDA graphs); the slow compiles last, so that a spent budget cuts them first.
# Every line gets "round": R in front (0: gpu_peak.py's line). stderr goes to OUT.log.
#
# Environment (defaults in brackets):
#   ROUNDS [2]        rounds
#   WORKLOADS ["W2 W3 W5 W6 W7"]
#   PEERS ["torch:eager jax:compiled torch:compiled:default torch:compiled:reduce-overhead"]
#                     framework:mode[:compile-mode]; add jax:eager or
#                     torch:compiled:max-autotune-no-cudagraphs if there is time (autotuning is slow)
#   GROUP [1]         1: one process per peer and round runs all the workloads one after the other
#                     (bench.py --workload W2,W3,...: a torch or jax start-up once, not five times);
#                     0: one process per peer, workload and round
#   BENCH_ARGS ["--min-time 0.3 --warmup 3"]   passed to bench.py (after --device cuda)
#   BUDGET [225]      seconds for the whole script: nothing new starts after it, and every
#                     process is cut (timeout) at its end, so the script ends by BUDGET + ~10 s
#   PER_CALL [150]    seconds at most for one process (torch.compile of W7 alone can take 30-60 s)
#   PEAK [1]          1: run gpu_peak.py first (copy bandwidth, fp32 sgemm peak; a few seconds)
#   PY [python3]      the Python that has torch and jax
# Compiler caches (inductor, triton, jax) live in peers/.cache/gpu/, so round 2 reuses round 1's
# compiles; export TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR / JAX_COMPILATION_CACHE_DIR to move them.
set -u

OUT=${1:?usage: gpu_round.sh OUT_FILE (JSON lines are appended)}
ROUNDS=${ROUNDS:-2}
WORKLOADS=${WORKLOADS:-"W2 W3 W5 W6 W7"}
PEERS=${PEERS:-"torch:eager jax:compiled torch:compiled:default torch:compiled:reduce-overhead"}
GROUP=${GROUP:-1}
BENCH_ARGS=${BENCH_ARGS:-"--min-time 0.3 --warmup 3"}
BUDGET=${BUDGET:-225}
PER_CALL=${PER_CALL:-150}
PEAK=${PEAK:-1}
PY=${PY:-python3}

HERE=$(cd "$(dirname "$0")" && pwd)
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$HERE/.cache/gpu/torchinductor}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$HERE/.cache/gpu/triton}
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$HERE/.cache/gpu/jax}
mkdir -p "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR" "$JAX_COMPILATION_CACHE_DIR" 2>/dev/null
LOG="$OUT.log"
TMP=$(mktemp) || TMP=/tmp/gpu_round.$$
START=$SECONDS

log() { echo "[gpu_round +$((SECONDS - START))s] $*" | tee -a "$LOG" >&2; }

# seconds the next process may take (0: budget spent)
allowance() {
    local left=$((BUDGET - (SECONDS - START)))
    if [ "$left" -lt 5 ]; then echo 0; elif [ "$left" -lt "$PER_CALL" ]; then echo "$left"; else echo "$PER_CALL"; fi
}

# append TMP's JSON lines to OUT, tagged with the round
keep() { # $1: round
    grep '^{' "$TMP" | sed "s/^{/{\"round\": $1, /" >> "$OUT"
}

# one line per workload that printed nothing (timeout, crash, budget spent)
missing() { # $1 round, $2 framework, $3 mode, $4 compile mode or "", $5 reason, $6.. workloads
    local r=$1 fw=$2 mode=$3 cm=$4 why=$5; shift 5
    local w cmf=""
    [ -n "$cm" ] && cmf="\"compile_mode\": \"$cm\", "
    for w in "$@"; do
        if ! grep -q "\"workload\": \"$w\"" "$TMP" 2>/dev/null; then
            echo "{\"round\": $r, \"framework\": \"$fw\", \"mode\": \"$mode\", \"workload\": \"$w\", \"device\": \"cuda\", ${cmf}\"median_us\": null, \"calls\": 0, \"error\": \"$why\"}" >> "$OUT"
        fi
    done
}

run_peer() { # $1 round, $2 peer spec, $3.. workloads
    local r=$1 spec=$2; shift 2
    local fw mode cm
    IFS=: read -r fw mode cm <<< "$spec"
    local wl
    wl=$(echo "$@" | tr ' ' ',')
    local t
    t=$(allowance)
    : > "$TMP"
    if [ "$t" -eq 0 ]; then
        missing "$r" "$fw" "$mode" "$cm" "skipped: gpu_round.sh budget of ${BUDGET}s spent" "$@"
        return
    fi
    local extra=()
    [ -n "$cm" ] && extra=(--compile-mode "$cm")
    log "round $r: $fw $mode ${cm} $wl (limit ${t}s)"
    # shellcheck disable=SC2086
    timeout -k 5 "$t" "$PY" "$HERE/bench.py" --framework "$fw" --mode "$mode" ${extra[@]+"${extra[@]}"} \
        --workload "$wl" --device cuda $BENCH_ARGS > "$TMP" 2>> "$LOG"
    local rc=$?
    keep "$r"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        missing "$r" "$fw" "$mode" "$cm" "timeout: cut after ${t}s (rc $rc)" "$@"
    else
        missing "$r" "$fw" "$mode" "$cm" "no JSON line (rc $rc; see $LOG)" "$@"
    fi
}

run_tc() { # $1 round, $2 workload
    [ -n "${TC_BENCH:-}" ] || return 0
    local t
    t=$(allowance)
    [ "$t" -eq 0 ] && return 0
    : > "$TMP"
    log "round $1: tensor-core $2 (limit ${t}s)"
    timeout -k 5 "$t" bash -c "$TC_BENCH --workload $2" > "$TMP" 2>> "$LOG" || log "  tensor-core $2 exited $?"
    keep "$1"
}

log "start: ROUNDS=$ROUNDS WORKLOADS='$WORKLOADS' GROUP=$GROUP BUDGET=${BUDGET}s TC_BENCH='${TC_BENCH:-}' -> $OUT"
if [ "$PEAK" = 1 ]; then
    : > "$TMP"
    timeout -k 5 40 "$PY" "$HERE/gpu_peak.py" > "$TMP" 2>> "$LOG" || log "  gpu_peak.py exited $?"
    keep 0
fi
for r in $(seq 1 "$ROUNDS"); do
    if [ "$GROUP" = 1 ]; then
        for w in $WORKLOADS; do
            run_tc "$r" "$w"
        done
        for p in $PEERS; do
            # shellcheck disable=SC2086
            run_peer "$r" "$p" $WORKLOADS
        done
    else
        for w in $WORKLOADS; do
            run_tc "$r" "$w"
            for p in $PEERS; do
                run_peer "$r" "$p" "$w"
            done
        done
    fi
done
rm -f "$TMP"
log "done in $((SECONDS - START))s; $(grep -c '' "$OUT" 2>/dev/null) lines in $OUT"
