#!/usr/bin/env bash
# Predicted data-parallel scaling past the emulated cluster: `bertfit bench scaling` (the model
# in src/comm/scaling_model.h) for DistilBERT, BERT-base and DeBERTa-v3-base on 1-64 nodes over
# 25 Gbit/s TCP and 100 / 400 Gbit/s RDMA, with the 3-epoch MRPC and QQP fine-tune's time and
# node-hours (batch 32 per node, seq 128, as the seed's recipe). Prints a Markdown table; with
# --out PREFIX writes PREFIX.csv and PREFIX.svg (efficiency against nodes).
#
#   bench/scaling_predict.sh [--overlap F] [--comm-cpu C] [--out PREFIX]
#
# Inputs (docs/PERFORMANCE.md, "Scaling model", says where each comes from):
# - compute per step on a c6i.16xlarge-like node (32 cores): DistilBERT 1.2 s (the seed's
#   measured step), BERT-base twice that (12 layers of the same width against 6), DeBERTa-v3-base
#   1.1x BERT-base (its c2p/p2c scores add ~3% of the FLOPs at seq 128, its gathers more: an
#   assumption, bertfit has no DeBERTa family to measure); override with DISTILBERT_S, BERT_S,
#   DEBERTA_S.
# - overlap and communication CPU per GB: fitted on the emulated cluster (--overlap, --comm-cpu).
# - DeBERTa-v3-base: 184M parameters, of which the word embedding is 128100 x 768.
set -euo pipefail
cd "$(dirname "$0")/.."
overlap=0.5 comm_cpu=0.5 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --overlap) overlap=$2; shift 2 ;;
    --comm-cpu) comm_cpu=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "scaling_predict: unknown option $1" >&2; exit 2 ;;
  esac
done
bertfit=${BERTFIT:-build/release/apps/bertfit/bertfit}
distilbert_s=${DISTILBERT_S:-1.2} bert_s=${BERT_S:-2.4} deberta_s=${DEBERTA_S:-2.64}
nodes=1,2,4,8,16,32,64
declare -A model=(
  [DistilBERT]="--arch distilbert --compute-s $distilbert_s"
  [BERT-base]="--arch bert --compute-s $bert_s"
  [DeBERTa-v3-base]="--params 184000000 --embedding-rows 128100 --embedding-width 768 --compute-s $deberta_s"
)
declare -A link=(
  ["25 Gbit/s TCP"]="--link-gbit 25 --latency-us 30 --comm-cpu $comm_cpu --cores-per-node 32"
  ["100 Gbit/s RDMA"]="--link-gbit 100 --latency-us 3 --comm-cpu 0 --cores-per-node 32"
  ["400 Gbit/s RDMA"]="--link-gbit 400 --latency-us 3 --comm-cpu 0 --cores-per-node 32"
)
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for m in DistilBERT BERT-base DeBERTa-v3-base; do
  for l in "25 Gbit/s TCP" "100 Gbit/s RDMA" "400 Gbit/s RDMA"; do
    # shellcheck disable=SC2086
    "$bertfit" bench scaling ${model[$m]} ${link[$l]} --overlap "$overlap" --nodes "$nodes" |
      python3 -c '
import json, math, sys
j = json.load(sys.stdin)
for p in j["points"]:
    n = p["nodes"]
    # 3 epochs at 32 samples per node and step: MRPC 3668, QQP 363846 training pairs.
    t = {k: math.ceil(3 * size / (32 * n)) * p["step_s"] for k, size in (("mrpc", 3668), ("qqp", 363846))}
    print(",".join(map(str, [sys.argv[1], sys.argv[2], n, round(p["step_s"], 4), round(p["exposed_s"], 4),
                              round(p["comm_cpu_s"], 4), round(p["speedup"], 3), round(p["efficiency"], 4),
                              round(t["mrpc"], 1), round(n * t["mrpc"] / 3600, 4), round(t["qqp"], 1),
                              round(n * t["qqp"] / 3600, 3)])))' "$m" "$l" >>"$rows"
  done
done
echo "| model | link | nodes | step (s) | exposed (s) | comm CPU (s) | speedup | efficiency | MRPC 3 epochs (s) | node-h | QQP 3 epochs (min) | node-h |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
awk -F, '$3 >= 8 || $3 == 1 { printf "| %s | %s | %d | %.3f | %.3f | %.3f | %.1fx | %.0f%% | %.0f | %.3f | %.1f | %.2f |\n", $1, $2, $3, $4, $5, $6, $7, 100 * $8, $9, $10, $11 / 60, $12 }' "$rows"
if [ -n "$out" ]; then
  { echo "model,link,nodes,step_s,exposed_s,comm_cpu_s,speedup,efficiency,mrpc_s,mrpc_node_h,qqp_s,qqp_node_h"; cat "$rows"; } >"$out.csv"
  python3 bench/plot_scaling_model.py "$out.csv" "$out.svg"
  echo "wrote $out.csv and $out.svg" >&2
fi
