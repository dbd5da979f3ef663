#!/usr/bin/env bash
# Sentence-embedding throughput of `bertfit embed` and `bertfit serve`'s /embed against ONNX
# Runtime 1.30 (../shared/peer/run-ort-peer) on the same encoder, in one run, the engines taking
# turns round by round so that the shared machine's drift moves every side of a ratio alike.
#
# The encoder: a BERT made by `bertfit init` (random weights: the speed does not depend on their
# values) at SIZE=minilm (all-MiniLM-L6-v2's shape: 6 layers, hidden 384, 12 heads, intermediate
# 1536), base (bert-base) or tiny (2 layers of 128: the smoke test), made a sentence-transformers
# folder in place (modules.json, mean pooling, Normalize, max_seq_length 256). bertfit reads it
# through its modules; run-ort-peer --model exports the same weights as the
# BertForSequenceClassification they also are: the same encoder, then [CLS] + pooler + a 2-way
# classifier instead of mean pooling + Normalize (B·C² and B·T·C multiply-adds, both under 0.5%
# of the encoder's 12·T·C² + 2·T²·C a layer), so ONNX Runtime's figures are the encoder's.
#
#   1. Fixed length, batch BATCH × T for each T of SEQ_LENS, every token real on both sides: rows
#      of real text (STS-B dev sentences joined) cut to exactly T tokens (checked).
#      embed:   `bertfit embed` on TOKENS/T such rows, the whole command (tokenization, forward,
#               pooling, the JSON lines), less its run on one row (start-up, loading, weights);
#      forward: `bertfit bench infer --model` at BATCH × T (the forward alone);
#      ort:     run-ort-peer bench-infer at BATCH × T (the forward alone, fp32 or int8);
#      forward and ort time TOKENS/(BATCH·T) forwards (at least 3 and 5, at most 50).
#   2. Real sentences: the sentences of STS-B dev (both columns; ROWS of them), unpadded.
#      embed:   `bertfit embed --batch-size BATCH` on them (sorted by length, unpadded products;
#               only attention sees a batch padded to its longest row rounded to 8), less one row;
#      /embed:  CLIENTS connections (wrk, one thread, on the same two cores) posting one sentence a
#               request to `bertfit serve` on 127.0.0.1 for HTTP_SECONDS: requests/s = sentences/s;
#      ort:     estimated, as run-ort-peer only takes fixed shapes with every token real: the
#               batches a padded engine runs on these sentences (sentence-transformers' encode:
#               sorted by length, batches of BATCH, each padded to its longest row), each timed
#               at ONNX Runtime's milliseconds of the same round interpolated linearly in T
#               between the lengths of 1. (and scaled by rows for a short last batch).
# THREADS threads everywhere (OMP_NUM_THREADS too). Every measurement is a JSON line on stderr;
# stdout gets Markdown tables of the medians over ROUNDS rounds (ratios: medians of each round's
# own ratio), the padding of 2., and /embed's phases from the servers' /metrics.
#   bench/embed_vs_ort.sh
#   SIZE=base ROWS=1000 SEQ_LENS="16 32 64 128" TOKENS=16384 bench/embed_vs_ort.sh
# Variables (defaults): SIZE (minilm), ROUNDS (3), BATCH (32), SEQ_LENS (8 16 32 64 128),
# PRECISIONS (fp32 int8; bf16 is compared with ORT fp32), ROWS (all 3000), TOKENS (65536),
# CLIENTS (64), HTTP_SECONDS (10), THREADS (2), BERTFIT (build/release/apps/bertfit/bertfit).
# Needs wrk; run-ort-peer installs its own packages. Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${SIZE:-minilm}
rounds=${ROUNDS:-3}
batch=${BATCH:-32}
read -r -a seq_lens <<<"${SEQ_LENS:-8 16 32 64 128}"
read -r -a precisions <<<"${PRECISIONS:-fp32 int8}"
rows=${ROWS:-0}
tokens=${TOKENS:-65536}
clients=${CLIENTS:-64}
http_seconds=${HTTP_SECONDS:-10}
threads=${THREADS:-2}
bertfit=${BERTFIT:-$PWD/build/release/apps/bertfit/bertfit}
ort=$PWD/../shared/peer/run-ort-peer
stsb=../shared/data/glue/STS-B/dev.tsv
case $size in
  minilm) sets="--set num_hidden_layers=6 --set hidden_size=384 --set num_attention_heads=12 --set intermediate_size=1536" ;;
  base) sets="" ;;
  tiny) sets="--set num_hidden_layers=2 --set hidden_size=128 --set num_attention_heads=2 --set intermediate_size=512" ;;
  *) echo "embed_vs_ort.sh: SIZE is minilm, base or tiny, not $size" >&2; exit 2 ;;
esac
command -v wrk >/dev/null || { echo "embed_vs_ort.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
[ -x "$ort" ] || { echo "embed_vs_ort.sh: no ONNX Runtime peer at $ort" >&2; exit 1; }
[ -x "$bertfit" ] || bash scripts/build.sh release bertfit >/dev/null
export OMP_NUM_THREADS=$threads
tmp=$(mktemp -d)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  # The peer's exports of this run's model (named by its folder and mtime, see run-ort-peer).
  if [ -f "$tmp/onnx_key" ]; then
    rm -f "${BERTFIT_PEER_CACHE:-/tmp/bertfit-peer}/$(cat "$tmp/onnx_key")"{,-int8}.onnx
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
log=$tmp/measurements.jsonl
record() { echo "$1" | tee -a "$log" >&2; }

# The encoder, then its sentence-transformers modules in the same folder.
model=$tmp/model
# shellcheck disable=SC2086
"$bertfit" init --arch bert $sets --output "$model" --seed 0 >/dev/null
printf '%s' "$(cd "$model" && pwd)$(stat -c %Y "$model/model.safetensors")" | sha256sum |
  cut -c1-16 >"$tmp/onnx_key"
python3 - "$model" <<'PY'
import json, os, sys
m = sys.argv[1]
hidden = json.load(open(f"{m}/config.json"))["hidden_size"]
modules = [("0", "", "Transformer"), ("1", "1_Pooling", "Pooling"), ("2", "2_Normalize", "Normalize")]
json.dump([{"idx": i, "name": n, "path": p, "type": f"sentence_transformers.models.{t}"}
           for i, (n, p, t) in enumerate(modules)], open(f"{m}/modules.json", "w"), indent=2)
os.makedirs(f"{m}/1_Pooling")
os.makedirs(f"{m}/2_Normalize")
json.dump({"word_embedding_dimension": hidden, "pooling_mode_cls_token": False,
           "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
           "pooling_mode_mean_sqrt_len_tokens": False}, open(f"{m}/1_Pooling/config.json", "w"))
json.dump({"max_seq_length": 256, "do_lower_case": False},
          open(f"{m}/sentence_bert_config.json", "w"))
PY

# The sentences, the fixed-length rows (sentences joined until T words: at least T tokens with
# [CLS] and [SEP]), and each file's first row alone.
python3 - "$stsb" "$tmp" "$rows" "$tokens" "$batch" "${seq_lens[@]}" <<'PY'
import csv, json, sys
stsb, tmp, rows, tokens, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
with open(stsb, encoding="utf-8-sig", newline="") as f:
    table = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
header = table[0]
a, b = header.index("sentence1"), header.index("sentence2")
sents = [r[c].strip() for r in table[1:] for c in (a, b) if len(r) > b]
sents = sents[:rows] if rows > 0 else sents
def write(name, texts):
    with open(f"{tmp}/{name}.jsonl", "w") as out:
        for t in texts:
            out.write(json.dumps({"text": t}) + "\n")
    with open(f"{tmp}/{name}.one.jsonl", "w") as out:
        out.write(json.dumps({"text": texts[0]}) + "\n")
write("real", sents)
with open(f"{tmp}/bodies.txt", "w") as out:  # one /embed request body a line
    for s in sents:
        out.write(json.dumps({"inputs": s}) + "\n")
words = " ".join(sents).split()
for T in map(int, sys.argv[6:]):
    n = max(2 * batch, (tokens // T) // batch * batch)
    write(f"fixed{T}", [" ".join(words[(i * T) % (len(words) - T):][:T]) for i in range(n)])
PY

# Token counts: each fixed-length row must come out at exactly T tokens; the real sentences'
# lengths (cut at max_seq_length) give the padding a padded engine would run.
for T in "${seq_lens[@]}"; do
  "$bertfit" tokenize --model "$model" --input "$tmp/fixed$T.jsonl" --text-a-column text \
    --max-seq-len "$T" 2>/dev/null |
    python3 -c 'import json, sys
T = int(sys.argv[1]); lens = {len(json.loads(l)["input_ids"]) for l in sys.stdin}
sys.exit(0 if lens == {T} else f"embed_vs_ort.sh: fixed rows of {sorted(lens)} tokens, not {T}")' "$T"
done
"$bertfit" tokenize --model "$model" --input "$tmp/real.jsonl" --text-a-column text \
  --max-seq-len 256 2>/dev/null |
  python3 -c 'import json, sys
print(" ".join(str(len(json.loads(l)["input_ids"])) for l in sys.stdin))' >"$tmp/real_lengths.txt"

seconds() { python3 -c 'import time; print(time.monotonic())'; }
# Sentences/s of `bertfit embed` on FILE (args: name precision [--max-seq-len T]), less one row.
embed_rate() {
  local name=$1 p=$2
  shift 2
  run() {
    "$bertfit" embed --model "$model" --input "$1" --text-a-column text --batch-size "$batch" \
      --threads "$threads" --precision "$p" --truncate "${@:2}" >/dev/null 2>"$tmp/embed.err" ||
      { cat "$tmp/embed.err" >&2; exit 1; }
  }
  local t0 t1 t2 n
  t0=$(seconds)
  run "$tmp/$name.jsonl" "$@"
  t1=$(seconds)
  run "$tmp/$name.one.jsonl" "$@"
  t2=$(seconds)
  n=$(wc -l <"$tmp/$name.jsonl")
  python3 -c "import sys
d = ($t1 - $t0) - ($t2 - $t1)
sys.exit('embed_vs_ort.sh: $name.jsonl took no longer than its first row alone: too few rows '
         'to time (raise TOKENS or ROWS)') if d <= 0 else print(($n - 1) / d)"
}
ort_precision() { [ "$1" = int8 ] && echo int8 || echo fp32; }
ort_ms() {  # args: precision T
  local flag="" runs
  [ "$1" = int8 ] && flag=--int8
  runs=$((tokens / (batch * $2)))
  runs=$((runs < 5 ? 5 : runs > 50 ? 50 : runs))
  "$ort" bench-infer --model "$model" --batch-size "$batch" --seq-len "$2" --threads "$threads" \
    --runs "$runs" $flag 2>"$tmp/ort.err" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["latency_ms_median"])' ||
    { cat "$tmp/ort.err" >&2; exit 1; }
}
forward_rate() {  # args: precision T
  local steps=$((tokens / (batch * $2)))
  steps=$((steps < 3 ? 3 : steps > 50 ? 50 : steps))
  "$bertfit" bench infer --model "$model" --batch-size "$batch" --seq-len "$2" \
    --threads "$threads" --precision "$1" --steps "$steps" --warmup 3 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["samples_per_s"])'
}

# One server per precision, kept for every round.
declare -A port
for p in "${precisions[@]}"; do
  "$bertfit" serve --model "$model" --port 0 --host 127.0.0.1 --precision "$p" \
    --threads "$threads" 2>"$tmp/serve-$p.log" &
  servers+=($!)
  port[$p]=""
  for _ in $(seq 600); do
    port[$p]=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$tmp/serve-$p.log")
    [ -n "${port[$p]}" ] && break
    sleep 0.1
  done
  [ -n "${port[$p]}" ] || { cat "$tmp/serve-$p.log" >&2; exit 1; }
done
cat >"$tmp/embed.lua" <<EOF
local bodies, i = {}, 0
for line in io.lines("$tmp/bodies.txt") do bodies[#bodies + 1] = line end
request = function()
  i = i % #bodies + 1
  return wrk.format("POST", "/embed", {["Content-Type"] = "application/json"}, bodies[i])
end
EOF
http_rate() {  # args: precision seconds
  wrk -t1 -c"$clients" -d"$2"s -s "$tmp/embed.lua" "http://127.0.0.1:${port[$1]}/embed" \
    >"$tmp/wrk.txt"
  python3 - "$tmp/wrk.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
if re.search(r"Non-2xx|Socket errors", text):
    sys.exit("embed_vs_ort.sh: errors in wrk's run:\n" + text)
print(float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)))
PY
}
# Exports and warm-up, untimed: the peer's ONNX files, each server's path.
for p in "${precisions[@]}"; do
  ort_ms "$p" "${seq_lens[0]}" >/dev/null
  http_rate "$p" 1 >/dev/null
done

for r in $(seq "$rounds"); do
  # The engines' order is swapped every other round.
  engines=(bertfit ort)
  [ $((r % 2)) -eq 0 ] && engines=(ort bertfit)
  for T in "${seq_lens[@]}"; do
    for e in "${engines[@]}"; do
      for p in "${precisions[@]}"; do
        if [ "$e" = bertfit ]; then
          v=$(embed_rate "fixed$T" "$p" --max-seq-len "$T")
          record "{\"round\":$r,\"what\":\"embed\",\"precision\":\"$p\",\"T\":$T,\"per_s\":$v}"
          v=$(forward_rate "$p" "$T")
          record "{\"round\":$r,\"what\":\"forward\",\"precision\":\"$p\",\"T\":$T,\"per_s\":$v}"
        else
          q=$(ort_precision "$p")
          grep -q "\"round\":$r,\"what\":\"ort\",\"precision\":\"$q\",\"T\":$T," "$log" && continue
          v=$(ort_ms "$q" "$T")
          record "{\"round\":$r,\"what\":\"ort\",\"precision\":\"$q\",\"T\":$T,\"ms\":$v}"
        fi
      done
    done
  done
  for p in "${precisions[@]}"; do
    v=$(embed_rate real "$p")
    record "{\"round\":$r,\"what\":\"embed\",\"precision\":\"$p\",\"T\":0,\"per_s\":$v}"
    v=$(http_rate "$p" "$http_seconds")
    record "{\"round\":$r,\"what\":\"http\",\"precision\":\"$p\",\"T\":0,\"per_s\":$v}"
  done
done
for p in "${precisions[@]}"; do
  python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' \
    "http://127.0.0.1:${port[$p]}/metrics" >"$tmp/metrics-$p.txt"
done

python3 - "$log" "$tmp" "$batch" "$clients" "$size" "${precisions[@]}" <<'PY'
import json, re, statistics, sys
log, tmp, B, clients, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
precisions = sys.argv[6:]
rows = [json.loads(l) for l in open(log)]
rounds = sorted({r["round"] for r in rows})
lens = sorted(map(int, open(f"{tmp}/real_lengths.txt").read().split()))
ort_of = lambda p: "int8" if p == "int8" else "fp32"
med = statistics.median

def get(r, what, p, T):
    for x in rows:
        if (x["round"], x["what"], x["precision"], x["T"]) == (r, what, p, T):
            return x
    return None

def ort_rate(r, p, T):  # sentences/s of ONNX Runtime at B × T in round r
    return B * 1000.0 / get(r, "ort", ort_of(p), T)["ms"]

Ts = sorted({x["T"] for x in rows if x["T"] > 0})
# The batches a padded engine runs: sorted by length (longest first, as sentence-transformers'
# encode does), BATCH at a time, each padded to its longest row.
padded = [(len(lens[::-1][i:i + B]), lens[::-1][i]) for i in range(0, len(lens), B)]

def ort_real_rate(r, p):
    ms = {T: get(r, "ort", ort_of(p), T)["ms"] for T in Ts}
    def at(L):  # linear in T through the two nearest measured lengths (extended at the ends)
        if len(Ts) == 1:
            return ms[Ts[0]] * L / Ts[0]
        i = min(max(sum(T <= L for T in Ts) - 1, 0), len(Ts) - 2)
        t0, t1 = Ts[i], Ts[i + 1]
        return max(ms[t0] + (ms[t1] - ms[t0]) * (L - t0) / (t1 - t0), 0.0)
    total = sum(at(L) * n / B for n, L in padded)
    return len(lens) * 1000.0 / total

print(f"\nFixed length, {size}, batch {B}, every token real; sentences/s (medians of {len(rounds)} rounds)\n")
print("| B x T | precision | bertfit embed | bertfit forward | ORT forward | embed / ORT | forward / ORT |")
print("|---|---|---|---|---|---|---|")
for T in Ts:
    for p in precisions:
        e = [get(r, "embed", p, T)["per_s"] for r in rounds]
        f = [get(r, "forward", p, T)["per_s"] for r in rounds]
        o = [ort_rate(r, p, T) for r in rounds]
        print(f"| {B}x{T} | {p} (ORT {ort_of(p)}) | {med(e):.1f} | {med(f):.1f} | {med(o):.1f} "
              f"| {med(a / b for a, b in zip(e, o)):.2f} | {med(a / b for a, b in zip(f, o)):.2f} |")

real_tokens = sum(lens)
padded_tokens = sum(n * L for n, L in padded)
print(f"\nReal sentences: {len(lens)} of STS-B dev, {real_tokens} tokens (mean {real_tokens / len(lens):.1f}, "
      f"max {lens[-1]}); padded as a padded engine batches them (sorted, {B} a batch): "
      f"{padded_tokens} tokens ({100.0 * (padded_tokens - real_tokens) / padded_tokens:.1f}% padding)\n")
print(f"| precision | bertfit embed sent/s | /embed c={clients} req/s | ORT forward sent/s (padded, estimated) "
      "| embed / ORT | /embed / ORT | /embed / embed |")
print("|---|---|---|---|---|---|---|")
for p in precisions:
    e = [get(r, "embed", p, 0)["per_s"] for r in rounds]
    h = [get(r, "http", p, 0)["per_s"] for r in rounds]
    o = [ort_real_rate(r, p) for r in rounds]
    print(f"| {p} (ORT {ort_of(p)}) | {med(e):.1f} | {med(h):.1f} | {med(o):.1f} "
          f"| {med(a / b for a, b in zip(e, o)):.2f} | {med(a / b for a, b in zip(h, o)):.2f} "
          f"| {med(a / b for a, b in zip(h, e)):.2f} |")

print("\n/embed phases over the whole run (the servers' /metrics, warm-up included)\n")
print("| precision | inputs | batches | sequences a batch | tokens a batch | tokenization us an input "
      "| queue ms an input | forward ms a batch | forward tokens/s |")
print("|---|---|---|---|---|---|---|---|---|")
for p in precisions:
    m = open(f"{tmp}/metrics-{p}.txt").read()
    def val(name):
        return float(re.search(rf"^{name}(?:{{[^}}]*}})? ([\d.e+-]+)$", m, re.M).group(1))
    inputs, batches = val("bertfit_tokenization_seconds_count"), val("bertfit_inference_seconds_count")
    toks = val("bertfit_batch_tokens_sum")
    print(f"| {p} | {inputs:.0f} | {batches:.0f} | {val('bertfit_batch_size_sum') / batches:.1f} "
          f"| {toks / batches:.0f} | {1e6 * val('bertfit_tokenization_seconds_sum') / inputs:.1f} "
          f"| {1e3 * val('bertfit_queue_seconds_sum') / inputs:.2f} "
          f"| {1e3 * val('bertfit_inference_seconds_sum') / batches:.2f} "
          f"| {toks / val('bertfit_inference_seconds_sum'):.0f} |")
PY
