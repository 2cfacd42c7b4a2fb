#!/usr/bin/env bash
# Every CPU workload at 1 and 2 threads, tensor-core's graph mode beside the peers, in
# interleaved rounds; JSON lines appended to one file (each with "round"), then a table:
#
#   peers/cpu_threads_round.sh OUT.jsonl      # then: python3 peers/threads_table.py OUT.jsonl
#
# Each round, for each thread count of $THREADS: the bench binary (`--workload all --mode
# graph`), then every peer of $PEERS on its workloads (one process per peer, a comma list of
# workloads), so ours and the peers' figures of a round come from the same minutes.
#
# Environment (defaults in brackets):
#   ROUNDS [2]  THREADS ["1 2"]  MIN_TIME [1] (seconds of timed calls per workload, at least)
#   BENCH [target/release/bench]   PY [python3: jax, torch, onnxruntime, numpy]
#   TF_PY [$PY: the Python that has tensorflow-cpu, for W3 and W4 in tf.function]
#   PEERS ["jax:compiled:W1,W2,W3,W4,W5,W6,W7,W8 tf:compiled:W3,W4 torch:eager:W7,W8
#           torch:compiled:W7,W8 ort:compiled:W8 numpy:eager:W5"]   framework:mode:workloads
set -u
OUT=${1:?usage: cpu_threads_round.sh OUT_FILE (JSON lines are appended)}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-"1 2"}
MIN_TIME=${MIN_TIME:-1}
BENCH=${BENCH:-target/release/bench}
PY=${PY:-python3}
TF_PY=${TF_PY:-$PY}
PEERS=${PEERS:-"jax:compiled:W1,W2,W3,W4,W5,W6,W7,W8 tf:compiled:W3,W4 torch:eager:W7,W8 torch:compiled:W7,W8 ort:compiled:W8 numpy:eager:W5"}
cd "$(dirname "$0")/.."

# Appends stdin's JSON lines to OUT with the round in front; other lines go to OUT.log.
tag() {
    while IFS= read -r line; do
        case $line in
        "{"*) echo "{\"round\":$1,${line#\{}" >>"$OUT" ;;
        *) echo "$line" >>"$OUT.log" ;;
        esac
    done
}

for round in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
        echo "round $round, $t thread(s): tensor-core" >&2
        "$BENCH" --workload all --mode graph --threads "$t" --min-time "$MIN_TIME" 2>>"$OUT.log" | tag "$round"
        for peer in $PEERS; do
            IFS=: read -r fw mode workloads <<<"$peer"
            py=$PY
            [ "$fw" = tf ] && py=$TF_PY
            echo "round $round, $t thread(s): $fw $mode ($workloads)" >&2
            "$py" peers/bench.py --framework "$fw" --mode "$mode" --workload "$workloads" --threads "$t" \
                --min-time "$MIN_TIME" 2>>"$OUT.log" | tag "$round"
        done
    done
done
