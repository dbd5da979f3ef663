#!/usr/bin/env bash
# Training-step throughput of bertfit against the PyTorch peer (../shared/peer/run-peer), measured
# alternately in the same run so that a noisy shared machine affects both alike.
#   bench/compare_peer.sh [ARCH] [ROUNDS] [STEPS]      (defaults: distilbert 2 3)
# Prints every measurement as a JSON line, then a Markdown table of medians and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-distilbert}
rounds=${2:-2}
steps=${3:-3}
bertfit=build/release/apps/bertfit/bertfit
peer=../shared/peer/run-peer
[ -x "$bertfit" ] || bash scripts/build.sh release bertfit >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
common="--arch $arch --batch-size 32 --seq-len 128 --threads 2"
for r in $(seq "$rounds"); do
  for p in fp32 bf16; do
    OMP_NUM_THREADS=2 "$bertfit" bench train $common --precision "$p" --steps "$steps" --warmup 1 |
      sed "s/^{/{\"who\":\"bertfit-$p\",/" | tee -a "$out"
    flag=""
    [ "$p" = bf16 ] && flag=--bf16
    "$peer" bench-train $common --steps "$steps" --warmup 1 $flag 2>/dev/null |
      sed "s/^{/{\"who\":\"peer-$p\",/" | tee -a "$out"
  done
done
python3 - "$out" "$arch" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(who, key):
    v = [r[key] for r in rows if r["who"] == who]
    return statistics.median(v) if v else float("nan")
print(f"\n| {sys.argv[2]}, batch 32, seq 128, 2 threads | samples/s | peak RSS MB | fraction of matmul peak |")
print("|---|---|---|---|")
for who in ["bertfit-fp32", "peer-fp32", "bertfit-bf16", "peer-bf16"]:
    frac = med(who, "fraction_of_peak") if who.startswith("bertfit") else float("nan")
    print(f"| {who} | {med(who, 'samples_per_s'):.2f} | {med(who, 'peak_rss_mb'):.0f} | "
          + (f"{frac:.2f} |" if frac == frac else "– |"))
b32, p32 = med("bertfit-fp32", "samples_per_s"), med("peer-fp32", "samples_per_s")
b16, p16 = med("bertfit-bf16", "samples_per_s"), med("peer-bf16", "samples_per_s")
print(f"\nratios: bertfit fp32 / peer fp32 = {b32/p32:.2f}; bertfit bf16 / peer bf16 = {b16/p16:.2f}; "
      f"bertfit bf16 / peer fp32 = {b16/p32:.2f}")
PY
