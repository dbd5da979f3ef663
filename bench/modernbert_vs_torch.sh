#!/usr/bin/env bash
# A ModernBERT-base-sized model (`bertfit init --arch modernbert`: 22 layers of 768, 12 heads, GeGLU
# 1152, every third layer global, the others a 128-token window; random weights) in bertfit against
# transformers' ModernBertForSequenceClassification on PyTorch (the modeling code and set-up the
# golden data was made with: ../shared/golden/MODERNBERT.md, attention "eager"), on the same folder,
# in one run, the engines taking turns round by round (the order swapped every round):
#   train128:  a bf16 training step, 32 × 128, `bertfit bench train --precision bf16` against the
#              class under torch.autocast("cpu", bfloat16) with AdamW;
#   train1024: the same at 8 × 1,024;
#   infer1024: an fp32 forward at 8 × 1,024, `bertfit bench infer --precision fp32` against the
#              class in eval mode under no_grad.
# Prints every measurement as a JSON line on stderr, then bench/round_ratios.py's Markdown table
# (medians; each round's own ratio peer ms / bertfit ms, above 1 bertfit is faster).
#   bench/modernbert_vs_torch.sh
#   ROUNDS=1 PARTS="train128" bench/modernbert_vs_torch.sh
# Variables (defaults): ROUNDS (2), PARTS ("train128 train1024 infer1024"), THREADS (2),
# TORCH_STEPS (2, after 1 warm-up step), BERTFIT_STEPS (2, after 1), BERTFIT
# (build/release/apps/bertfit/bertfit), MODEL (a folder to make or reuse;
# /tmp/bertfit-modernbert-base), ORACLE (/work/hf-oracle/env.sh: transformers 4.28.1 for
# /usr/bin/python3), MODERNBERT_GIT (a snapshot of github:advpropsys/transformers, fetched with the
# search tool: /work/.mirror/advpropsys+transformers/repo), SHARED (../shared).
# Run it on an otherwise idle machine; a round takes several minutes on two cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-2} parts=${PARTS:-"train128 train1024 infer1024"} threads=${THREADS:-2}
torch_steps=${TORCH_STEPS:-2} bertfit_steps=${BERTFIT_STEPS:-2}
bertfit=${BERTFIT:-$root/build/release/apps/bertfit/bertfit}
model=${MODEL:-/tmp/bertfit-modernbert-base}
oracle=${ORACLE:-/work/hf-oracle/env.sh}
git_dir=${MODERNBERT_GIT:-/work/.mirror/advpropsys+transformers/repo}
shared=${SHARED:-$root/../shared}
export OMP_NUM_THREADS=$threads
out=$(mktemp)
src=$(mktemp -d)
trap 'rm -rf "$out" "$src"' EXIT

commit=26bf1bbeec074de6b437012f6e9b7fd4391a1555  # ../shared/golden/MODERNBERT.md
for f in modeling_modernbert.py configuration_modernbert.py; do
  git -C "$git_dir" show "$commit:src/transformers/models/modernbert/$f" >"$src/$f"
done
if [ ! -f "$model/model.safetensors" ]; then
  "$bertfit" init --arch modernbert --vocab "$shared/golden/tokenizer-modernbert/tokenizer" \
    --set vocab_size=50368 --output "$model" >&2
fi
torch_py() {
  (set +u; source "$oracle"; /usr/bin/python3 "$root/bench/modernbert_peer.py" "$@" --src "$src" \
    --model "$model" --threads "$threads" --compat-dir "$shared/peer/hf-oracle")
}
shape() {  # part -> "batch seq_len"
  case $1 in train128) echo "32 128" ;; *) echo "8 1024" ;; esac
}
run() {  # round part engine; a run that fails (out of memory) is recorded as nan
  local json b t
  read -r b t < <(shape "$2")
  case $2/$3 in
    train*/bertfit) json=$("$bertfit" bench train --model "$model" --precision bf16 --batch-size "$b" \
      --seq-len "$t" --threads "$threads" --steps "$bertfit_steps" --warmup 1 --no-peak 2>/dev/null | tail -1) || json='{"failed": true}' ;;
    train*/peer) json=$(torch_py bench-train --batch-size "$b" --seq-len "$t" --warmup 1 \
      --steps "$torch_steps" 2>/dev/null | tail -1) || json='{"failed": true}' ;;
    infer*/bertfit) json=$("$bertfit" bench infer --model "$model" --precision fp32 --batch-size "$b" \
      --seq-len "$t" --threads "$threads" --steps "$bertfit_steps" --warmup 1 --no-peak 2>/dev/null | tail -1) || json='{"failed": true}' ;;
    infer*/peer) json=$(torch_py bench-infer --batch-size "$b" --seq-len "$t" --warmup 1 \
      --steps "$torch_steps" 2>/dev/null | tail -1) || json='{"failed": true}' ;;
  esac
  echo "$json" >&2
  echo "$1 $2 $3 $(echo "$json" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(j.get("ms_per_step", j.get("latency_ms_median", "nan")))')" >>"$out"
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
  train128="bf16 training step 32 × 128 (bertfit vs PyTorch autocast)" \
  train1024="bf16 training step 8 × 1,024 (bertfit vs PyTorch autocast)" \
  infer1024="fp32 forward 8 × 1,024 (bertfit vs PyTorch eager)"
