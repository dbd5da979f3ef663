#!/usr/bin/env bash
# Inference latency of bertfit (fp32, bf16, int8) against ONNX Runtime 1.30 (fp32, and int8 as
# onnxruntime's quantize_dynamic makes it; ../shared/peer/run-ort-peer) on the same model and
# shapes, the engines alternated in each round so that a noisy shared machine affects all alike.
#   bench/compare_infer.sh [ARCH] [ROUNDS] [SHAPES...]   (defaults: distilbert 2 1x16 1x64 1x128 32x128)
# A shape is BATCHxSEQ. Prints every measurement as a JSON line, then a Markdown table of the
# median milliseconds per forward (tokenization excluded on both sides) and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-distilbert}
rounds=${2:-2}
shift 2 || shift $#
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(1x16 1x64 1x128 32x128)
bertfit=build/release/apps/bertfit/bertfit
ort=../shared/peer/run-ort-peer
[ -x "$bertfit" ] || bash scripts/build.sh release bertfit >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  for shape in "${shapes[@]}"; do
    b=${shape%x*}
    t=${shape#*x}
    common="--arch $arch --batch-size $b --seq-len $t --threads 2"
    steps=$((b > 1 ? 5 : 50))
    for p in fp32 bf16 int8; do
      OMP_NUM_THREADS=2 "$bertfit" bench infer $common --precision "$p" --steps "$steps" --warmup 3 |
        sed "s/^{/{\"who\":\"bertfit-$p\",\"shape\":\"$shape\",/" | tee -a "$out"
    done
    for p in fp32 int8; do
      flag=""
      [ "$p" = int8 ] && flag=--int8
      "$ort" bench-infer $common $flag 2>/dev/null |
        sed "s/^{/{\"who\":\"ort-$p\",\"shape\":\"$shape\",/" | tee -a "$out"
    done
  done
done
python3 - "$out" "$arch" "${shapes[@]}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
arch, shapes = sys.argv[2], sys.argv[3:]
def ms(r):
    return r["ms_per_step"] if "ms_per_step" in r else r["latency_ms_median"]
def med(who, shape):
    v = [ms(r) for r in rows if r["who"] == who and r["shape"] == shape]
    return statistics.median(v) if v else float("nan")
engines = ["bertfit-fp32", "bertfit-bf16", "bertfit-int8", "ort-fp32", "ort-int8"]
print(f"\n| {arch}, 2 threads, ms per forward | " + " | ".join(engines) +
      " | int8 / ort-int8 | bf16 / ort-fp32 | fp32 / ort-fp32 |")
print("|---" * (len(engines) + 4) + "|")
for s in shapes:
    m = {e: med(e, s) for e in engines}
    print(f"| {s} | " + " | ".join(f"{m[e]:.2f}" for e in engines) +
          f" | {m['bertfit-int8']/m['ort-int8']:.2f} | {m['bertfit-bf16']/m['ort-fp32']:.2f}"
          f" | {m['bertfit-fp32']/m['ort-fp32']:.2f} |")
PY
