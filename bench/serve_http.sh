#!/usr/bin/env bash
# `bertfit serve` end to end over HTTP with wrk (Debian's `wrk`), against the model alone in the
# same run, on DistilBERT at its default size (random init; the numbers do not depend on the
# weights' values):
#   1. latency at concurrency 1: one 64-token text (`hello` × 62 with [CLS] and [SEP]) posted
#      again and again to /predict on one kept-alive connection: wrk's p50 and p99, tokenization
#      included, against `bertfit bench infer` at batch 1 × 64 (median ms per forward);
#   2. throughput at saturation: 64 connections posting MRPC dev pairs (one pair a request, the
#      408 pairs in turn): requests/s, against the model's batch throughput on the same pairs,
#      tokenization included: `bertfit predict --batch-size 64` on the pairs repeated 8 times,
#      less its run on one pair (start-up and load), per pair;
#   3. the server's peak RSS (VmHWM) after both, at the default --max-batch-tokens.
# The model alone and the server alternate, LATENCY_ROUNDS rounds (default 9: 100 forwards,
# then 3 s of wrk) for 1., ROUNDS rounds (default 3) for 2.; the table gives the medians (of
# each round's own difference or ratio for those), every round on stderr.
#   bench/serve_http.sh [PRECISIONS...]   (default: int8 bf16 fp32; each gets its own server)
#   LATENCY_ROUNDS=15 ROUNDS=5 bench/serve_http.sh int8
# Needs wrk; prints a Markdown table. Run it on an otherwise idle machine: wrk shares the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
precisions=("$@")
rounds=${ROUNDS:-3}
latency_rounds=${LATENCY_ROUNDS:-9}
[ ${#precisions[@]} -gt 0 ] || precisions=(int8 bf16 fp32)
command -v wrk >/dev/null || { echo "serve_http.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
bertfit=$PWD/build/release/apps/bertfit/bertfit
[ -x "$bertfit" ] || bash scripts/build.sh release bertfit >/dev/null
mrpc=../shared/data/glue/MRPC/dev.tsv
tmp=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMP_NUM_THREADS=2

"$bertfit" init --arch distilbert --output "$tmp/model" --num-labels 2 >/dev/null

# Request bodies: the 64-token text, and one JSON body per MRPC dev pair (a line each).
python3 - "$mrpc" "$tmp" <<'PY'
import csv, json, sys
mrpc, tmp = sys.argv[1], sys.argv[2]
open(f"{tmp}/one.json", "w").write(json.dumps({"inputs": " ".join(["hello"] * 62)}))
with open(mrpc, encoding="utf-8-sig", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
with open(f"{tmp}/pairs.jsonl", "w") as out:
    for r in rows:
        out.write(json.dumps({"inputs": [r[3], r[4]]}) + "\n")
with open(f"{tmp}/pairs8.jsonl", "w") as out:
    for _ in range(8):
        for r in rows:
            out.write(json.dumps({"a": r[3], "b": r[4]}) + "\n")
with open(f"{tmp}/pair1.jsonl", "w") as out:
    out.write(json.dumps({"a": rows[0][3], "b": rows[0][4]}) + "\n")
PY
cat >"$tmp/one.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$tmp/one.json"); wrk.body = f:read("*a"); f:close()
EOF
cat >"$tmp/pairs.lua" <<EOF
local bodies, i = {}, 0
for line in io.lines("$tmp/pairs.jsonl") do bodies[#bodies + 1] = line end
request = function()
  i = i % #bodies + 1
  return wrk.format("POST", "/predict", {["Content-Type"] = "application/json"}, bodies[i])
end
EOF

seconds() { python3 -c 'import time; print(time.monotonic())'; }
echo "| precision | model 1x64 ms | HTTP c=1 p50 ms | p99 ms | p50 - model ms | model pairs/s (batch 64) | HTTP c=64 req/s | HTTP / model | server peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in "${precisions[@]}"; do
  model_ms() {
    "$bertfit" bench infer --model "$tmp/model" --batch-size 1 --seq-len 64 --threads 2 \
      --precision "$p" --steps 100 --warmup 10 |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["ms_per_step"])'
  }
  run_predict() {
    local t0 t1
    t0=$(seconds)
    "$bertfit" predict --model "$tmp/model" --input "$1" --text-a-column a --text-b-column b \
      --batch-size 64 --threads 2 --precision "$p" >/dev/null 2>&1
    t1=$(seconds)
    python3 -c "print($t1 - $t0)"
  }
  model_pairs() {
    local t_all t_one n
    t_all=$(run_predict "$tmp/pairs8.jsonl")
    t_one=$(run_predict "$tmp/pair1.jsonl")
    n=$(wc -l <"$tmp/pairs8.jsonl")
    python3 -c "print(($n - 1) / ($t_all - $t_one))"
  }

  "$bertfit" serve --model "$tmp/model" --port 0 --precision "$p" --threads 2 \
    2>"$tmp/serve.log" &
  server=$!
  port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$tmp/serve.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$tmp/serve.log" >&2; exit 1; }
  url=http://127.0.0.1:$port/predict
  wrk -t1 -c1 -d2s -s "$tmp/one.lua" "$url" >/dev/null # warm the path
  # The model alone and the server take turns, round by round, so that the machine's drift
  # (tens of percent within minutes) moves both sides of each ratio alike.
  : >"$tmp/latency.txt"
  for r in $(seq "$latency_rounds"); do
    m_ms=$(model_ms)
    wrk -t1 -c1 -d3s --latency -s "$tmp/one.lua" "$url" >"$tmp/c1.txt"
    python3 - "$m_ms" "$tmp/c1.txt" >>"$tmp/latency.txt" <<'PY'
import re, sys
model_ms, c1 = float(sys.argv[1]), open(sys.argv[2]).read()
def ms(text, pct):
    m = re.search(rf"^\s*{pct}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
    v, unit = float(m.group(1)), m.group(2)
    return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
if re.search(r"Non-2xx|Socket errors", c1):
    sys.exit("serve_http.sh: errors in wrk's run:\n" + c1)
print(model_ms, ms(c1, 50), ms(c1, 99))
PY
  done
  : >"$tmp/throughput.txt"
  for r in $(seq "$rounds"); do
    m_pairs=$(model_pairs)
    wrk -t2 -c64 -d10s -s "$tmp/pairs.lua" "$url" >"$tmp/c64.txt"
    python3 - "$m_pairs" "$tmp/c64.txt" >>"$tmp/throughput.txt" <<'PY'
import re, sys
model_pairs, c64 = float(sys.argv[1]), open(sys.argv[2]).read()
if re.search(r"Non-2xx|Socket errors", c64):
    sys.exit("serve_http.sh: errors in wrk's run:\n" + c64)
print(model_pairs, float(re.search(r"Requests/sec:\s+([\d.]+)", c64).group(1)))
PY
  done
  rss_mb=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$server/status")
  kill -TERM "$server"
  wait "$server"
  server=""
  # Medians over the rounds; the differences and ratios are the medians of each round's own.
  python3 - "$p" "$rss_mb" "$tmp/latency.txt" "$tmp/throughput.txt" <<'PY'
import statistics, sys
p, rss = sys.argv[1], sys.argv[2]
lat = [list(map(float, line.split())) for line in open(sys.argv[3])]
thr = [list(map(float, line.split())) for line in open(sys.argv[4])]
med = lambda rows, f: statistics.median(f(r) for r in rows)
print(f"| {p} | {med(lat, lambda r: r[0]):.2f} | {med(lat, lambda r: r[1]):.2f} "
      f"| {med(lat, lambda r: r[2]):.2f} | {med(lat, lambda r: r[1] - r[0]):+.2f} "
      f"| {med(thr, lambda r: r[0]):.1f} | {med(thr, lambda r: r[1]):.1f} "
      f"| {med(thr, lambda r: r[1] / r[0]):.2f} | {rss} |")
for r in lat:
    print(f"  {p} latency round: model {r[0]:.2f} ms, p50 {r[1]:.2f} ms ({r[1] - r[0]:+.2f})",
          file=sys.stderr)
for r in thr:
    print(f"  {p} throughput round: model {r[0]:.1f} pairs/s, HTTP {r[1]:.1f} req/s "
          f"({r[1] / r[0]:.2f})", file=sys.stderr)
PY
done
