#!/usr/bin/env bash
# A DeBERTa-v3-base-sized model (`bertfit init --arch deberta-v2 --set vocab_size=128100`: 12
# layers of 768, 12 heads, 256 position buckets, c2p|p2c, shared keys; random weights) in
# bertfit against its peers on the same folder, in one run, the engines taking turns round by
# round (the order swapped every round) so that the shared machine's drift moves both sides of a
# ratio alike:
#   train: a bf16 training step, BATCH × T (32 × 128), THREADS threads: `bertfit bench train
#          --precision bf16` against transformers 4.28.1's DebertaV2ForSequenceClassification
#          under torch.autocast("cpu", bfloat16) with AdamW (bench/deberta_peer.py bench-train);
#   int8:  one sequence of INT8_T (64) tokens: `bertfit bench infer --precision int8` against
#          ONNX Runtime 1.30 on the same class exported by torch.onnx and quantised as
#          ../shared/peer/run-ort-peer's --int8 (bench/deberta_peer.py export-onnx --int8,
#          ../shared/peer/ort_bench.mjs).
# Prints every measurement as a JSON line on stderr, then bench/round_ratios.py's Markdown table
# (medians over ROUNDS rounds; each round's own ratio peer ms / bertfit ms, above 1 bertfit is
# faster, with the smallest and largest).
#   bench/deberta_vs_torch.sh
#   ROUNDS=2 PARTS="train" bench/deberta_vs_torch.sh
# Variables (defaults): ROUNDS (2), PARTS ("train int8"), BATCH (32), T (128), INT8_T (64),
# THREADS (2), TORCH_STEPS (3, after 2 warm-up steps), BERTFIT_STEPS (3, after 1),
# BERTFIT (build/release/apps/bertfit/bertfit), MODEL (a folder to make or reuse;
# /tmp/bertfit-deberta-base), ORACLE (/work/hf-oracle/env.sh: transformers 4.28.1 for
# /usr/bin/python3), PEER (../shared/peer), BERTFIT_PEER_CACHE (/tmp/bertfit-peer: ONNX Runtime
# and the exported model). Needs python3-onnx for the export (run-ort-peer installs it) and npm.
# One train round takes about two minutes on two cores. Run it on an otherwise idle machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-2} parts=${PARTS:-"train int8"} batch=${BATCH:-32} t=${T:-128} t8=${INT8_T:-64}
threads=${THREADS:-2} torch_steps=${TORCH_STEPS:-3} bertfit_steps=${BERTFIT_STEPS:-3}
bertfit=${BERTFIT:-$root/build/release/apps/bertfit/bertfit}
model=${MODEL:-/tmp/bertfit-deberta-base}
oracle=${ORACLE:-/work/hf-oracle/env.sh}
peer=${PEER:-$root/../shared/peer}
cache=${BERTFIT_PEER_CACHE:-/tmp/bertfit-peer}
export OMP_NUM_THREADS=$threads
out=$(mktemp)
trap 'rm -f "$out"' EXIT

if [ ! -f "$model/model.safetensors" ]; then
  "$bertfit" init --arch deberta-v2 --vocab "$root/../shared/data/deberta-spm" \
    --set vocab_size=128100 --output "$model" >&2
fi
torch_py() { (set +u; source "$oracle"; /usr/bin/python3 "$root/bench/deberta_peer.py" "$@"); }
onnx="$cache/deberta-$(printf '%s' "$(cd "$model" && pwd)$(stat -c %Y "$model/model.safetensors")" |
  sha256sum | cut -c1-16)-int8.onnx"
if [[ " $parts " == *" int8 "* ]]; then
  if [ ! -f "$cache/ort/node_modules/onnxruntime-node/package.json" ]; then
    mkdir -p "$cache/ort"
    (cd "$cache/ort" && npm install --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0 >&2)
  fi
  if [ ! -f "$onnx" ]; then
    torch_py export-onnx --model "$model" --out "$onnx.tmp" --int8 --peer-dir "$peer" >&2
    mv "$onnx.tmp" "$onnx"
  fi
fi

ms() { python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(j.get("ms_per_step", j.get("latency_ms_median")))'; }
run() {  # round part engine
  local json
  case $2/$3 in
    train/bertfit) json=$("$bertfit" bench train --model "$model" --precision bf16 --batch-size "$batch" \
      --seq-len "$t" --threads "$threads" --steps "$bertfit_steps" --warmup 1 --no-peak 2>/dev/null | tail -1) ;;
    train/peer) json=$(torch_py bench-train --model "$model" --batch-size "$batch" --seq-len "$t" \
      --threads "$threads" --warmup 2 --steps "$torch_steps" 2>/dev/null | tail -1) ;;
    int8/bertfit) json=$("$bertfit" bench infer --model "$model" --precision int8 --batch-size 1 \
      --seq-len "$t8" --threads "$threads" --steps 60 --warmup 10 --no-peak 2>/dev/null | tail -1) ;;
    int8/peer) json=$(node "$peer/ort_bench.mjs" "$cache/ort" "$onnx" 1 "$t8" "$threads" 60) ;;
  esac
  echo "$json" >&2
  echo "$1 $2 $3 $(echo "$json" | ms)" >>"$out"
}
for r in $(seq "$rounds"); do
  for part in $parts; do
    if [ $((r % 2)) -eq 1 ]; then
      run "$r" "$part" bertfit; run "$r" "$part" peer
    else
      run "$r" "$part" peer; run "$r" "$part" bertfit
    fi
  done
done
python3 "$root/bench/round_ratios.py" "$out" \
  train="bf16 training step (bertfit vs PyTorch autocast)" \
  int8="int8 latency 1 sequence (bertfit vs ONNX Runtime)"
