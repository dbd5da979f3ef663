#!/usr/bin/env bash
# Two builds of bertfit's model code against each other on one machine (`bertfit bench`, random
# weights at the base sizes), alternated round by round so that the machine's drift falls on
# both alike, the order swapped every round. Per architecture (DistilBERT and BERT): a bf16
# training step at batch 32 × 128 tokens, int8 inference of one 64-token sequence, fp32
# inference at 32 × 128. Prints each run, then per measurement the median ms per step of A and
# B and the median of B/A over the rounds.
#   bench/model_ab.sh A_BINARY B_BINARY          ROUNDS=3 by default
# Run it on an otherwise idle machine (both use every core of this process's share).
set -euo pipefail
a=$1 b=$2 rounds=${ROUNDS:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cases=(
  "train --precision bf16 --batch-size 32 --seq-len 128 --steps 4 --warmup 1"
  "infer --precision int8 --batch-size 1 --seq-len 64 --steps 60 --warmup 10"
  "infer --precision fp32 --batch-size 32 --seq-len 128 --steps 5 --warmup 1"
)
run() {  # name binary arch case_index round
  local ms
  ms=$("$2" bench ${cases[$4]} --arch "$3" 2>/dev/null | tail -1 |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["ms_per_step"])')
  echo "$5 $1 $3 $4 $ms" | tee -a "$out"
}
for r in $(seq "$rounds"); do
  for arch in distilbert bert; do
    for c in "${!cases[@]}"; do
      if [ $((r % 2)) -eq 1 ]; then
        run A "$a" "$arch" "$c" "$r"; run B "$b" "$arch" "$c" "$r"
      else
        run B "$b" "$arch" "$c" "$r"; run A "$a" "$arch" "$c" "$r"
      fi
    done
  done
done
python3 - "$out" "${cases[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
cases = sys.argv[2:]
print("\n| arch | measurement | A ms (median) | B ms (median) | B / A (median over rounds) |")
print("|---|---|---|---|---|")
for arch in ("distilbert", "bert"):
    for c, text in enumerate(cases):
        ms = {n: {int(r[0]): float(r[4]) for r in rows if r[1] == n and r[2] == arch and int(r[3]) == c}
              for n in "AB"}
        ratios = [ms["B"][k] / ms["A"][k] for k in ms["A"] if k in ms["B"]]
        print(f"| {arch} | {text} | {statistics.median(ms['A'].values()):.2f} | "
              f"{statistics.median(ms['B'].values()):.2f} | {statistics.median(ratios):.3f} |")
PY
