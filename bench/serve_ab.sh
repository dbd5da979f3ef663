#!/usr/bin/env bash
# Two builds of `bertfit serve` against each other on one machine, alternated round by round so
# that the machine's drift falls on both alike: the same DistilBERT (default size, random init)
# served by each binary at one precision; per round 3 s of wrk at concurrency 1 (one 64-token
# text, /predict) on each server, then 5 s at concurrency 64 (MRPC dev pairs), the servers' order
# swapped every round. Prints each
# round, then the medians: p50 at c=1 and req/s at c=64 per binary, and B's median difference /
# ratio to A. For a change to the HTTP path, whose cost does not depend on the model.
#   bench/serve_ab.sh A_BINARY B_BINARY [PRECISION (fp32)]      ROUNDS=10 by default
# Needs wrk. Run it on an otherwise idle machine: wrk and both servers share the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2 precision=${3:-fp32} rounds=${ROUNDS:-10}
command -v wrk >/dev/null || { echo "serve_ab.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
mrpc=../shared/data/glue/MRPC/dev.tsv
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMP_NUM_THREADS=2
"$b" init --arch distilbert --output "$tmp/model" --num-labels 2 >/dev/null
python3 - "$mrpc" "$tmp" <<'PY'
import csv, json, sys
mrpc, tmp = sys.argv[1], sys.argv[2]
open(f"{tmp}/one.json", "w").write(json.dumps({"inputs": " ".join(["hello"] * 62)}))
with open(mrpc, encoding="utf-8-sig", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
with open(f"{tmp}/pairs.lua", "w") as out:
    out.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nbodies = {}\n')
    for r in rows:
        out.write("table.insert(bodies, %s)\n" % json.dumps(json.dumps({"inputs": [r[3], r[4]]})))
    out.write("i = 0\nrequest = function()\n  i = i % #bodies + 1\n"
              "  return wrk.format(nil, nil, nil, bodies[i])\nend\n")
PY
cat >"$tmp/one.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$tmp/one.json"); wrk.body = f:read("*a"); f:close()
LUA
start() {  # binary, name: starts a server (its port is read by port_of)
  "$1" serve --model "$tmp/model" --precision "$precision" --port 0 >/dev/null 2>"$tmp/$2.err" &
  pids+=($!)
}
port_of() {  # name -> port, once it listens
  for _ in $(seq 600); do
    port=$(sed -n 's/^serve: listening on .*:\([0-9]*\)$/\1/p' "$tmp/$1.err")
    [ -n "$port" ] && { echo "$port"; return; }
    sleep 0.1
  done
  echo "serve_ab.sh: $1 did not start: $(cat "$tmp/$1.err")" >&2
  exit 1
}
start "$a" A
start "$b" B
pa=$(port_of A) pb=$(port_of B)
p50() {  # port -> p50 in ms
  wrk -t1 -c1 -d3s --latency -s "$tmp/one.lua" "http://127.0.0.1:$1/predict" |
    awk '$1 == "50%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
                       else if (v ~ /ms$/) sub(/ms$/, "", v); else { sub(/s$/, "", v); v *= 1000 }
                       printf "%.3f", v }'
}
rps() {  # port -> requests/s
  wrk -t2 -c64 -d5s -s "$tmp/pairs.lua" "http://127.0.0.1:$1/predict" |
    awk '$1 == "Requests/sec:" { printf "%.1f", $2 }'
}
p50 "$pa" >/dev/null; p50 "$pb" >/dev/null  # warm both
: >"$tmp/rounds"
for r in $(seq "$rounds"); do
  # Odd rounds run A first, even rounds B first: the second server's saturation run follows the
  # first's straight away and measured ~10% slower whichever binary it was.
  if [ $((r % 2)) -eq 1 ]; then
    la=$(p50 "$pa") lb=$(p50 "$pb") ta=$(rps "$pa") tb=$(rps "$pb")
  else
    lb=$(p50 "$pb") la=$(p50 "$pa") tb=$(rps "$pb") ta=$(rps "$pa")
  fi
  echo "round $r: c=1 p50 A $la B $lb ms; c=64 A $ta B $tb req/s" >&2
  echo "$la $lb $ta $tb" >>"$tmp/rounds"
done
python3 - "$tmp/rounds" "$precision" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
print(f"| precision | A p50 ms | B p50 ms | B - A ms (median of rounds) | A req/s | B req/s | B / A (median of rounds) |")
print("|---|---|---|---|---|---|---|")
print(f"| {sys.argv[2]} | {med([r[0] for r in rows]):.2f} | {med([r[1] for r in rows]):.2f} | "
      f"{med([r[1] - r[0] for r in rows]):+.2f} | {med([r[2] for r in rows]):.1f} | "
      f"{med([r[3] for r in rows]):.1f} | {med([r[3] / r[2] for r in rows]):.3f} |")
PY
