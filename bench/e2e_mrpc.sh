#!/usr/bin/env bash
# End-to-end MRPC fine-tune, bertfit against the PyTorch peer (issue: speed, padding removal).
# The job: DistilBERT (default size, random init: no pretrained weights here), GLUE MRPC,
# 3 epochs, batch 32, lr 2e-5, max seq 128, dev evaluation at the end. Measured one after the
# other in the same run, each with all cores (--threads):
#   * bertfit fp32 and bf16 with its defaults: dynamic padding, unpadded token-wise layers;
#   * the peer as HF run_glue does it: every sample padded to 128, fp32 (bench/peer_mrpc.py on
#     torch_peer.py's model, in run-peer's set-up: OpenBLAS-OpenMP, tcmalloc);
# Reports wall time of each whole command (start-up, tokenization, training, evaluation, save),
# dev accuracy / F1 and peak RSS, as a Markdown table on stdout.
#
#   bench/e2e_mrpc.sh [--epochs 3] [--threads N] [--no-peer] [--peer-bf16] [--bertfit-args "..."]
#                     [--peer-epochs E] [--no-bertfit]
# --peer-epochs E runs the peer for E epochs only (its step time is constant: every batch is
# 32 x 128) and also reports its training time scaled to --epochs, labelled as such.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=3 threads=$(nproc) peer=1 peer_bf16=0 extra="" peer_epochs="" ours=1
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    --no-bertfit) ours=0; shift ;;
    --peer-bf16) peer_bf16=1; shift ;;
    --bertfit-args) extra=$2; shift 2 ;;
    --peer-epochs) peer_epochs=$2; shift 2 ;;
    *) echo "e2e_mrpc: unknown option $1" >&2; exit 2 ;;
  esac
done
bash scripts/build.sh release bertfit >/dev/null
bertfit=$PWD/build/release/apps/bertfit/bertfit
data=$(cd ../shared/data/glue/MRPC && pwd)
work=$(mktemp -d /tmp/bertfit-e2e.XXXXXX)
trap 'rm -rf "$work"' EXIT
$bertfit init --arch distilbert --output "$work/model" --seed 42 >/dev/null
echo "$(date -u) · $(nproc) cores · $threads threads · $epochs epochs" >&2

# Runs a command, prints "wall-seconds peak-rss-MB" of it (GNU time).
timed() {
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/stdout" 2>"$work/stderr" || {
    cat "$work/stderr" >&2; exit 1; }
  awk '{ printf "%s %.0f\n", $1, $2 / 1024 }' "$work/time"
}

echo "| run | wall (s) | dev accuracy | dev F1 | peak RSS (MB) |"
echo "|---|---|---|---|---|"
for precision in fp32 bf16; do
  [ "$ours" = 1 ] || break
  read -r wall rss < <(timed "$bertfit" train --model "$work/model" --output "$work/out-$precision" \
    --task mrpc --data "$data" --epochs "$epochs" --batch-size 32 --max-seq-len 128 --lr 2e-5 \
    --eval-every end --threads "$threads" --precision "$precision" $extra)
  python3 - "$work/out-$precision/metrics.jsonl" "$wall" "$rss" "$precision" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
final = [r for r in rows if "eval_accuracy" in r][-1]
print(f"| bertfit {sys.argv[4]} | {float(sys.argv[2]):.0f} | {final['eval_accuracy']:.4f} | {final['eval_f1']:.4f} | {sys.argv[3]} |")
PY
done
if [ "$peer" = 1 ]; then
  # Token ids from bertfit's tokenizer (HF's ids exactly: tests/golden), labels from column 0.
  for split in train dev; do
    $bertfit tokenize --model "$work/model" --input "$data/$split.tsv" --text-a-column 3 \
      --text-b-column 4 --max-seq-len 128 >"$work/$split.ids.jsonl"
    tail -n +2 "$data/$split.tsv" | cut -f1 >"$work/$split.labels"
  done
  for bf16 in 0 1; do
    [ "$bf16" = 1 ] && [ "$peer_bf16" = 0 ] && continue
    flag=""; [ "$bf16" = 1 ] && flag=--bf16
    # run-peer's set-up (../shared/peer/run-peer), for our own script.
    read -r wall rss < <(timed env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
      LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
      OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
      /usr/bin/python3 bench/peer_mrpc.py --model "$work/model" \
      --train "$work/train.ids.jsonl" --train-labels "$work/train.labels" \
      --dev "$work/dev.ids.jsonl" --dev-labels "$work/dev.labels" \
      --epochs "${peer_epochs:-$epochs}" --threads "$threads" $flag)
    python3 - "$work/stdout" "$wall" "$rss" "$bf16" "$epochs" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
name = "peer, padded to 128, " + ("bf16 autocast" if sys.argv[4] == "1" else "fp32")
wall, epochs = float(sys.argv[2]), float(sys.argv[5])
if r["epochs"] != epochs:
    name += f", {r['epochs']} epoch(s) measured"
print(f"| {name} | {wall:.0f} | {r['eval_accuracy']:.4f} | {r['eval_f1']:.4f} | {sys.argv[3]} |")
if r["epochs"] != epochs:
    scaled = wall + r["train_seconds"] * (epochs / r["epochs"] - 1)
    print(f"| {name.split(', ' + str(r['epochs']))[0]}, scaled to {epochs:g} epochs (train time x {epochs / r['epochs']:g}) | {scaled:.0f} | | | |")
print(json.dumps(r), file=sys.stderr)
PY
  done
fi
