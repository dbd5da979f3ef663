#!/usr/bin/env bash
# Data-parallel scaling on the emulated cluster (scripts/cluster, root): DistilBERT (default
# size, random init) fine-tuned on GLUE MRPC with the seed's recipe (batch 32 per node, seq 128,
# lr 2e-5) on 1, 2 and 4 nodes. Every node gets the same CPU share (--cpus-per-node, default
# 0.5 core: 4 nodes on this 2-core machine), so N nodes have N times the compute of one, as on
# a real cluster. Reports per-step time, samples/s, time per epoch, speedup and efficiency.
#
#   bench/scaling.sh [--rate auto|RATE] [--harsher F] [--nodes "1 2 4"] [--cpus-per-node C]
#                    [--steps S] [--precision fp32|bf16] [--grad-comm-dtype fp32|bf16]
#
# --rate auto derives the link rate that reproduces the seed's ratio of compute to bandwidth:
# their nodes computed a step in about 1.2 s and had 25 Gbit/s, i.e. 30 Gbit of link capacity
# per step of compute. With our measured single-node step time T, the equivalent rate is
# 25 Gbit/s · 1.2 s / T. --harsher F divides that rate by F (the issue asks for F = 4 too).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=auto harsher=1 nodes="1 2 4" cpus=0.5 steps=4 precision=fp32 wire=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --harsher) harsher=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --cpus-per-node) cpus=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --grad-comm-dtype) wire=$2; shift 2 ;;
    *) echo "scaling: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "scaling: needs root (network namespaces)" >&2; exit 2; }
bash scripts/build.sh release bertfit >/dev/null
bertfit=$PWD/build/release/apps/bertfit/bertfit
data=$(cd ../shared/data/glue/MRPC && pwd)
work=$(mktemp -d /tmp/bertfit-scaling.XXXXXX)
trap 'scripts/cluster down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
$bertfit init --arch distilbert --output "$work/model" --seed 42 >/dev/null

# Median step time (s) of a run's metrics.jsonl, skipping the first (warm-up) step.
median_step() {
  python3 -c '
import json, statistics, sys
t = [r["step_seconds"] for r in map(json.loads, open(sys.argv[1])) if "step_seconds" in r and r["step"] > 1]
print(statistics.median(t))' "$1"
}

run_nodes() {  # N RATE -> prints the median step time
  local n=$1 r=$2 out="$work/n$1-$2"
  scripts/cluster up "$n" --rate "$r" --cpus-per-node "$cpus" >&2
  scripts/cluster run -- -np "$n" "$bertfit" train --model "$work/model" --output "$out" \
    --task mrpc --data "$data" --batch-size 32 --max-seq-len 128 --lr 2e-5 \
    --max-steps $((steps + 1)) --log-every 1 --eval-every never --save-every 1000000 \
    --precision "$precision" --grad-comm-dtype "$wire" >&2
  scripts/cluster down >&2
  median_step "$out/metrics.jsonl"
}

if [ "$rate" = auto ]; then
  t1=$(run_nodes 1 100gbit)
  rate_mbit=$(python3 -c "print(max(1, round(25000 * 1.2 / $t1 / $harsher)))")
  rate="${rate_mbit}mbit"
  echo "single-node step: ${t1} s -> equivalent rate 25 Gbit/s * 1.2 s / ${t1} s / ${harsher} = ${rate}" >&2
fi
echo "| nodes | link | step (s) | samples/s | epoch of MRPC (s) | speedup | efficiency |"
echo "|---|---|---|---|---|---|---|"
base=""
for n in $nodes; do
  t=$(run_nodes "$n" "$rate")
  python3 - "$n" "$rate" "$t" "${base:-$t}" <<'PY'
import sys
n, rate, t, t1 = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
sps = 32 * n / t
speedup = (32 * n / t) / (32 / t1)
print(f"| {n} | {rate} | {t:.2f} | {sps:.2f} | {3668 / sps:.0f} | {speedup:.2f}x | {speedup / n:.0%} |")
PY
  [ -n "$base" ] || base=$t
done
