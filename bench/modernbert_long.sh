#!/usr/bin/env bash
# Long inputs on ModernBERT (issue 45, item 3): peak RSS (/usr/bin/time -v, the whole process)
# and time of an inference forward and of a training step (`bertfit bench`, random weights at
# ModernBERT-base's size: hidden 768, 22 layers, I 1152, window 128 (64 either side), every 3rd
# layer global) for T = 512, 2,048, 8,192 at batch 1 and 8, fp32 and bf16. Each run is its own
# process; the build lock is held over all the runs of one call (no build beside them: give
# each call a list of cases that fits the lock's time); prints one Markdown table row per run.
#   bench/modernbert_long.sh BINARY                          every case
#   CASES="infer:1:8192:bf16 train:8:2048:fp32" bench/modernbert_long.sh BINARY
# STEPS (default 1) timed steps after WARMUP (default 0) untimed ones: one step of these sizes
# takes seconds to minutes on a few cores. SKIP (default both train:8:8192 cases) names cases not run.
set -euo pipefail
bin=$1
lock=${LOCK:-/tmp/bertfit-build.lock}
if [ -z "${BENCH_LOCKED:-}" ]; then
  BENCH_LOCKED=1 exec flock "$lock" "$0" "$@"
fi
steps=${STEPS:-1} warmup=${WARMUP:-0}
skip=" ${SKIP:-train:8:8192:fp32 train:8:8192:bf16} "
if [ -z "${CASES:-}" ]; then
  CASES=""
  for mode in infer train; do
    for p in fp32 bf16; do
      for t in 512 2048 8192; do
        for b in 1 8; do CASES+="$mode:$b:$t:$p "; done
      done
    done
  done
fi
echo "| mode | batch × T | precision | ms per step | peak RSS (MiB) |"
echo "|---|---|---|---|---|"
for c in $CASES; do
  IFS=: read -r mode b t p <<<"$c"
  if [[ "$skip" == *" $c "* ]]; then
    echo "| $mode | $b × $t | $p | not run (SKIP) | |"
    continue
  fi
  log=$(mktemp)
  json=$(/usr/bin/time -v -o "$log" "$bin" bench "$mode" --arch modernbert \
    --batch-size "$b" --seq-len "$t" --precision "$p" --steps "$steps" --warmup "$warmup" \
    --no-peak 2>/dev/null | tail -1) || true
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$log")
  ms=$(python3 -c 'import json,sys; print(round(json.loads(sys.argv[1])["ms_per_step"]))' \
    "$json" 2>/dev/null || echo "failed")
  rm -f "$log"
  echo "| $mode | $b × $t | $p | $ms | $rss |"
done
