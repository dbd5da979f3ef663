#!/usr/bin/env bash
# CoNLL-2003 token classification (issue 33), bertfit against transformers 4.28.1 itself, from the
# same initial weights, with the same steps, batches and schedule; test-set seqeval F1 and the
# training time of both, measured one after the other in the same run with the same threads.
#
#   bench/ner_conll.sh [--bertfit BIN] [--threads N] [--steps 400] [--batch-size 32] [--lr 1e-3]
#                      [--warmup-ratio 0.1] [--weight-decay 0.01] [--max-seq-len 128] [--seed 42]
#                      [--train-seed S] [--init "--set k=v ..."]
# --seed makes the initial weights (encoder and token head); --train-seed (default: --seed) seeds
# the training runs (dropout masks; nothing else with --no-shuffle), to see the spread that
# dropout alone gives each engine.
#
# The model: a random BERT from `bertfit init --arch bert` (default: 2 layers, hidden 64, 2 heads,
# intermediate 128; the bert-base-uncased WordPiece vocabulary). `bertfit train --lr 0
# --max-steps 1` on the tagged data writes the token classifier bertfit starts from (its new
# 9-way head; the encoder unchanged: a step of lr 0 moves nothing); both engines start from that
# folder. Both take the training sentences in file order (--no-shuffle; bench/ner_peer.py the
# same), batches padded to their longest sentence. What still differs: dropout's random masks
# (each engine's own generator) and floating-point rounding.
#
# The peer (bench/ner_peer.py) runs in run-peer's set-up (OpenBLAS-OpenMP, tcmalloc, thread
# counts) on the HF oracle's sources (/tmp/hf-oracle: ../shared/peer/hf-oracle/setup.sh) and
# seqeval's sources (extracted from the mirror of chakki-works/seqeval into /tmp/seqeval-src).
# Prints a Markdown table; each engine's JSON summary goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
bertfit=$PWD/build/release/apps/bertfit/bertfit
threads=$(nproc) steps=400 batch=32 lr=1e-3 warmup=0.1 wd=0.01 seq=128 seed=42 train_seed=""
init="--set num_hidden_layers=2 --set hidden_size=64 --set num_attention_heads=2 --set intermediate_size=128"
while [ $# -gt 0 ]; do
  case "$1" in
    --bertfit) bertfit=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch-size) batch=$2; shift 2 ;;
    --lr) lr=$2; shift 2 ;;
    --warmup-ratio) warmup=$2; shift 2 ;;
    --weight-decay) wd=$2; shift 2 ;;
    --max-seq-len) seq=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --train-seed) train_seed=$2; shift 2 ;;
    --init) init=$2; shift 2 ;;
    *) echo "ner_conll: unknown option $1" >&2; exit 2 ;;
  esac
done
train_seed=${train_seed:-$seed}
data=$(cd ../shared/data/conll2003 && pwd)
oracle=/tmp/hf-oracle seqeval=/tmp/seqeval-src
[ -d "$oracle/tf/src/transformers" ] || { echo "ner_conll: no $oracle (run ../shared/peer/hf-oracle/setup.sh)" >&2; exit 1; }
if [ ! -d "$seqeval/seqeval" ]; then
  mkdir -p "$seqeval"
  git --git-dir=/work/.mirror/chakki-works+seqeval/repo archive HEAD seqeval | tar -x -C "$seqeval"
fi
work=$(mktemp -d /tmp/bertfit-ner.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086
"$bertfit" init --arch bert --output "$work/init" --vocab ../shared/data/vocab/bert-base-uncased.txt \
  $init --seed "$seed" >&2
"$bertfit" train --model "$work/init" --output "$work/start" --train-file "$data/train.txt" \
  --format conll --max-seq-len "$seq" --lr 0 --max-steps 1 --batch-size 1 --eval-every never \
  --seed "$seed" --threads "$threads" >/dev/null 2>"$work/start.log" || { cat "$work/start.log" >&2; exit 1; }
rm -rf "$work/start/checkpoint"
echo "$(date -u) · $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) · $threads threads · $steps steps of $batch · lr $lr, warmup $warmup, weight decay $wd, max seq $seq · init seed $seed, train seed $train_seed" >&2

# Runs a command, prints "wall-seconds peak-rss-MB" of it (GNU time).
timed() {
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >"$work/stdout" 2>"$work/stderr" || {
    cat "$work/stderr" >&2; exit 1; }
  awk '{ printf "%s %.0f\n", $1, $2 / 1024 }' "$work/time"
}
row() {  # row NAME WALL RSS TAG: the last JSON object of stdout as a table row; the loss log to stderr
  python3 - "$work/stdout" "$1" "$2" "$3" <<'PY'
import json, sys
r = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])
print(f"| {sys.argv[2]} | {r['eval_f1']:.4f} | {r['eval_precision']:.4f} | {r['eval_recall']:.4f} "
      f"| {r['eval_accuracy']:.4f} | {r['train_seconds']:.1f} | {float(sys.argv[3]):.1f} | {sys.argv[4]} |")
print(json.dumps(r), file=sys.stderr)
PY
  grep -E '^(peer )?step [0-9]+/' "$work/stderr" | sed "s/^/  $4: /" >&2 || true
}

echo "| engine | test F1 | precision | recall | accuracy | training (s) | whole command (s) | peak RSS (MB) |"
echo "|---|---|---|---|---|---|---|---|"
read -r wall rss < <(timed "$bertfit" train --model "$work/start" --output "$work/out" \
  --train-file "$data/train.txt" --dev-file "$data/test.txt" --format conll --no-shuffle \
  --max-steps "$steps" --batch-size "$batch" --lr "$lr" --warmup-ratio "$warmup" \
  --weight-decay "$wd" --max-seq-len "$seq" --seed "$train_seed" --threads "$threads" \
  --eval-every end --log-every 50)
row "bertfit $(basename "$bertfit")" "$wall" "$rss" bertfit
read -r wall rss < <(timed env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
  OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
  ST_IO_DIR=$oracle HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  PYTHONPATH=$seqeval:$oracle/stshim:$oracle/st:$oracle/tf/src:$oracle/hub/src \
  /usr/bin/python3 bench/ner_peer.py --model "$work/start" --train "$data/train.txt" \
  --test "$data/test.txt" --max-steps "$steps" --batch-size "$batch" --lr "$lr" \
  --warmup-ratio "$warmup" --weight-decay "$wd" --max-seq-len "$seq" --seed "$train_seed" \
  --threads "$threads")
row "transformers 4.28.1 (torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'))" "$wall" "$rss" peer
