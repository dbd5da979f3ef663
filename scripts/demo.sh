#!/usr/bin/env bash
# The main job end to end: installs what is missing, builds bertfit, creates a small DistilBERT
# (random init: no pretrained weights can be downloaded here), fine-tunes it on GLUE MRPC for
# 3 epochs with the standard recipe (batch 32, lr 2e-5 scaled up for a tiny random model,
# seq 128), evaluates the saved model and predicts a few dev pairs.
#
#   scripts/demo.sh                 GLUE data from ../shared/data/glue (or GLUE_DIR=/path/to/glue_data)
#   MODEL=/path/to/hf_model_folder scripts/demo.sh   fine-tune a real checkpoint instead (or a
#                                                   Hub name: MODEL=distilbert-base-uncased)
#   TASK=sst2 scripts/demo.sh        another GLUE task (folder name from the GLUE download)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== building bertfit (the first build takes a few minutes on two cores)"
bash scripts/build.sh release bertfit | { grep --line-buffered -E '^\[ *[0-9]+%\] (Built|Linking)' || true; }
bertfit=build/release/apps/bertfit/bertfit

task=${TASK:-mrpc}
glue=${GLUE_DIR:-../shared/data/glue}
case "$task" in
  mrpc) folder=MRPC ;; sst2) folder=SST-2 ;; cola) folder=CoLA ;; stsb) folder=STS-B ;;
  rte) folder=RTE ;; qnli) folder=QNLI ;; qqp) folder=QQP ;; mnli) folder=MNLI ;; wnli) folder=WNLI ;;
  *) echo "demo: unknown TASK $task" >&2; exit 2 ;;
esac
data="$glue/$folder"
if [ ! -f "$data/train.tsv" ]; then
  echo "demo: no GLUE $folder data at $data; set GLUE_DIR to the folder of your GLUE download" >&2
  exit 2
fi
work=${WORK_DIR:-out/demo}
mkdir -p "$work"

if [ -n "${MODEL:-}" ]; then
  model=$MODEL
  lr=2e-5
  echo "== fine-tuning $model"
else
  model=$work/model
  # A small DistilBERT (4 layers, hidden 256) so the demo runs in minutes on two cores.
  labels=2
  case "$task" in stsb) labels=1 ;; mnli) labels=3 ;; esac
  $bertfit init --arch distilbert --output "$model" --num-labels "$labels" --overwrite-output-dir \
    --set n_layers=4 --set dim=256 --set hidden_dim=1024 --set n_heads=4
  lr=5e-4  # a random model needs a larger step than a pretrained one (2e-5)
fi
$bertfit inspect "$model" | sed -n 1,8p  # sed reads all: no SIGPIPE under pipefail

echo "== train: 3 epochs, batch 32, seq 128"
rm -rf "$work/finetuned"
$bertfit train --model "$model" --output "$work/finetuned" --task "$task" --data "$data" \
  --epochs 3 --batch-size 32 --lr "$lr" --max-seq-len 128 --warmup-ratio 0.1 --log-every 20

echo "== eval of the saved model"
$bertfit eval --model "$work/finetuned" --task "$task" --data "$data"

echo "== predictions for the first 3 dev rows"
sed -n 2,4p "$data/dev.tsv" > "$work/sample.tsv"  # three rows, no header line
case "$task" in
  mrpc) cols="--no-header --text-a-column 3 --text-b-column 4" ;;
  sst2) cols="--no-header --text-a-column 0" ;;
  *) cols="" ;;
esac
if [ -n "$cols" ]; then
  # shellcheck disable=SC2086
  $bertfit predict --model "$work/finetuned" --input "$work/sample.tsv" $cols
fi
echo "== done: the fine-tuned model (Hugging Face layout) is in $work/finetuned"
