#!/usr/bin/env bash
# int8 inference accuracy on models fine-tuned by bertfit: for each GLUE task, the demo's recipe
# (scripts/demo.sh: a DistilBERT of 4 layers and hidden 256 from random init, batch 32, lr 5e-4,
# seq 128; 3 epochs of MRPC, 1 of SST-2's 67k examples; no pretrained weights can be downloaded
# here), then the dev set evaluated
# and predicted in fp32, bf16 and int8: the dev metrics, and the share of dev predictions that
# equal fp32's.
#   bench/int8_accuracy.sh [TASKS...]     (default: mrpc sst2; GLUE_DIR as in the demo)
# Prints a Markdown table. The fine-tuned models stay in out/int8_accuracy/TASK.
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=(mrpc sst2)
bertfit=build/release/apps/bertfit/bertfit
[ -x "$bertfit" ] || bash scripts/build.sh release bertfit >/dev/null
glue=${GLUE_DIR:-../shared/data/glue}
work=out/int8_accuracy
mkdir -p "$work"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}

rows=()
for task in "${tasks[@]}"; do
  case "$task" in
    mrpc) folder=MRPC epochs=3 cols="--no-header --text-a-column 3 --text-b-column 4" ;;
    sst2) folder=SST-2 epochs=1 cols="--no-header --text-a-column 0" ;;
    *) echo "int8_accuracy.sh: tasks: mrpc, sst2" >&2; exit 2 ;;
  esac
  data=$glue/$folder
  dir=$work/$task
  if [ ! -f "$dir/finetuned/config.json" ]; then
    "$bertfit" init --arch distilbert --output "$dir/init" --num-labels 2 --overwrite-output-dir \
      --set n_layers=4 --set dim=256 --set hidden_dim=1024 --set n_heads=4 >/dev/null
    rm -rf "$dir/finetuned"
    "$bertfit" train --model "$dir/init" --output "$dir/finetuned" --task "$task" --data "$data" \
      --epochs "$epochs" --batch-size 32 --lr 5e-4 --max-seq-len 128 --warmup-ratio 0.1 --log-every 200 \
      >"$dir/train.log" 2>&1
  fi
  tail -n +2 "$data/dev.tsv" >"$dir/dev_rows.tsv"
  for p in fp32 bf16 int8; do
    "$bertfit" eval --model "$dir/finetuned" --task "$task" --data "$data" --precision "$p" \
      >"$dir/eval_$p.json"
    # shellcheck disable=SC2086
    "$bertfit" predict --model "$dir/finetuned" --input "$dir/dev_rows.tsv" $cols \
      --precision "$p" --output "$dir/predict_$p.jsonl"
  done
  rows+=("$(python3 - "$task" "$dir" <<'PY'
import json, sys
task, d = sys.argv[1], sys.argv[2]
def metrics(p):
    m = json.load(open(f"{d}/eval_{p}.json"))
    m = m.get("metrics", m)
    return {k: m[k] for k in ("eval_accuracy", "eval_f1") if k in m}
def lines(p):
    return [json.loads(l) for l in open(f"{d}/predict_{p}.jsonl")]
ref = lines("fp32")
out = [task, str(len(ref))]
for p in ("fp32", "bf16", "int8"):
    m, got = metrics(p), lines(p)
    same = sum(a["label"] == b["label"] for a, b in zip(ref, got)) / len(ref)
    dp = max(abs(x - y) for a, b in zip(ref, got)
             for x, y in zip(a["probabilities"], b["probabilities"]))
    out.append(" / ".join(f"{100 * v:.2f}" for v in m.values()) +
               ("" if p == "fp32" else f" ({100 * same:.2f}% = fp32, max Δp {dp:.1e})"))
print("| " + " | ".join(out) + " |")
PY
)")
done
echo "| task | dev rows | fp32 acc / f1 | bf16 (predictions equal to fp32's, largest probability change) | int8 (the same) |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
