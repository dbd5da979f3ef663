#!/usr/bin/env bash
# Does `bertfit tune` find what the exhaustive grid finds? For each scenario (serve latency-p50
# at concurrency 1, infer throughput) on DistilBERT at its default size (random init: the speed
# does not depend on the weights' values):
#   1. the grid: every combination of a space of >= MIN_COMBOS settings, each measured once
#      (`tune --sampler grid`);
#   2. `tune` (TPE) with SEEDS seeds, TRIALS trials each;
#   3. the grid's three best settings and every tune answer re-measured alternately in one run,
#      ROUNDS rounds (`tune --compare`): an answer passes when its re-measured mean is within 5%
#      of the best re-measured grid setting's.
# Prints Markdown tables: passes per scenario, each answer against the grid's best, the knobs'
# importance (fANOVA, mean over the seeds, and the grid's own), and the grid's spread, also with
# precision held at its best value.
#   bench/tune_vs_grid.sh [serve] [infer]          (default: both)
#   MEASURE_S=2 SEEDS=5 TRIALS=20 ROUNDS=3 bench/tune_vs_grid.sh
# Run it on an otherwise idle machine: every trial shares its cores with nothing but itself.
# Needs python3-optuna and python3-sklearn for /usr/bin/python3, libtcmalloc-minimal4 and
# libjemalloc2 (scripts/setup.sh). SIZE=tiny (a 2-layer model of 32) with the FIX_* variables
# shrinks it to a smoke run (tests/cli/bench_script_cli_test.cc).
set -euo pipefail
cd "$(dirname "$0")/.."
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(serve infer)
measure_s=${MEASURE_S:-3}
seeds=${SEEDS:-5}
trials=${TRIALS:-20}
rounds=${ROUNDS:-3}
min_combos=${MIN_COMBOS:-100}
size=${SIZE:-base}
bertfit=${BERTFIT:-$PWD/build/release/apps/bertfit/bertfit}
[ -x "$bertfit" ] || bash scripts/build.sh release bertfit >/dev/null
# The spaces: serve 2 threads x 3 wait policies (passive, libgomp's default, active: the spin
# counts between them left out) x 2 bind x 3 allocators x 3 precisions = 108; infer 3 layouts
# x 3 x 2 x 3 x 3 = 162 (on 2 cores; more cores, more combinations).
fix_serve=${FIX_SERVE:---fix workers=auto --fix max_batch_tokens=1024 --fix max_batch_requests=0 --fix wait=passive,default,active}
fix_infer=${FIX_INFER:---fix batch_size=8 --fix wait=passive,default,active}
seq_infer=${SEQ_INFER:-128}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=2
case "$size" in
  base) "$bertfit" init --arch distilbert --output "$tmp/model" --num-labels 2 >/dev/null 2>&1 ;;
  tiny) "$bertfit" init --arch distilbert --output "$tmp/model" --num-labels 2 --set n_layers=2 \
          --set dim=32 --set hidden_dim=64 --set n_heads=2 >/dev/null 2>&1 ;;
  *) echo "tune_vs_grid.sh: SIZE is base or tiny, not $size" >&2; exit 1 ;;
esac

for mode in "${scenarios[@]}"; do
  case "$mode" in
    serve) flags="--measure-s $measure_s $fix_serve" ;;
    infer) flags="--measure-s $measure_s --seq-len $seq_infer $fix_infer" ;;
    *) echo "tune_vs_grid.sh: a scenario is serve or infer, not $mode" >&2; exit 1 ;;
  esac
  w=$tmp/$mode
  mkdir -p "$w"
  tune=("$bertfit" tune "$mode" --model "$tmp/model")
  combos=$("${tune[@]}" $flags --show-space | python3 -c 'import json,sys; print(json.load(sys.stdin)["combinations"])')
  if [ "$combos" -lt "$min_combos" ]; then
    echo "tune_vs_grid.sh: the $mode space has $combos combinations, fewer than $min_combos" >&2
    exit 1
  fi
  echo "$mode: grid of $combos combinations" >&2
  start=$(date +%s)
  "${tune[@]}" $flags --sampler grid --output "$w/grid" >"$w/grid.json" 2>"$w/grid.err"
  echo "$mode: grid took $(( $(date +%s) - start )) s" >&2
  for seed in $(seq 1 "$seeds"); do
    start=$(date +%s)
    "${tune[@]}" $flags --trials "$trials" --seed "$seed" --output "$w/tpe-$seed" \
      >"$w/tpe-$seed.json" 2>"$w/tpe-$seed.err"
    echo "$mode: tune seed $seed took $(( $(date +%s) - start )) s" >&2
  done
  # The grid's three best settings as tuned files, for the re-measurement.
  python3 - "$w" <<'PY'
import json, sys
w = sys.argv[1]
grid = json.load(open(f"{w}/grid/tuned.json"))
minimize = grid["unit"] == "ms"
runs = [json.loads(l) for l in open(f"{w}/grid/trials.jsonl")]
ok = sorted((r for r in runs if r["status"] == "ok"), key=lambda r: r["value"], reverse=not minimize)
for i, r in enumerate(ok[:3]):
    grid["settings"] = r["setting"]
    json.dump(grid, open(f"{w}/grid-{i + 1}.json", "w"))
PY
  files=("$w"/grid-*.json)
  for seed in $(seq 1 "$seeds"); do files+=("$w/tpe-$seed/tuned.json"); done
  start=$(date +%s)
  "${tune[@]}" $flags --output "$w/compare" --rounds "$rounds" --compare "${files[@]}" \
    >"$w/compare.json" 2>"$w/compare.err"
  echo "$mode: re-measuring took $(( $(date +%s) - start )) s" >&2
done

python3 - "$tmp" "$seeds" "${scenarios[@]}" <<'PY'
import json, statistics, sys
tmp, seeds, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for mode in scenarios:
    w = f"{tmp}/{mode}"
    grid = json.load(open(f"{w}/grid.json"))
    minimize = grid["unit"] == "ms"
    better = (lambda a, b: a < b) if minimize else (lambda a, b: a > b)
    rows = json.load(open(f"{w}/compare.json"))["compare"]
    grid_rows = [r for r in rows if "/grid-" in r["file"]]
    tpe_rows = [r for r in rows if "/tpe-" in r["file"]]
    best_grid = min((r["mean"] for r in grid_rows), key=lambda v: v if minimize else -v)
    print(f"\n### {mode}: {grid['objective']} ({grid['unit']}), tune against the grid\n")
    print("| setting | trials | re-measured mean | vs grid's best | within 5% | tune's gain over the defaults |")
    print("|---|---|---|---|---|---|")
    passes = 0
    for r in grid_rows:
        print(f"| grid {r['file'].rsplit('/', 1)[1][:-5]}: {' '.join(f'{k}={v}' for k, v in sorted(r['setting'].items()))} "
              f"| {grid['trials']} | {r['mean']:.4g} | {r['mean'] / best_grid:.3f} | | |")
    for r in tpe_rows:
        seed = r["file"].split("/tpe-")[1].split("/")[0]
        t = json.load(open(f"{w}/tpe-{seed}.json"))
        ratio = r["mean"] / best_grid
        ok = ratio <= 1.05 if minimize else ratio >= 1 / 1.05
        passes += ok
        print(f"| tune seed {seed}: {' '.join(f'{k}={v}' for k, v in sorted(r['setting'].items()))} "
              f"| {t['trials']} | {r['mean']:.4g} | {ratio:.3f} | {'yes' if ok else 'no'} "
              f"| {t.get('speedup', float('nan')):.2f}x |")
    print(f"\n{mode}: tune within 5% of the grid's best in {passes} of {len(tpe_rows)} seeds")
    # Importance: mean over the seeds (TPE's studies) and the grid's own (fANOVA of every run).
    imp = {}
    for s in range(1, seeds + 1):
        for k, v in json.load(open(f"{w}/tpe-{s}.json"))["importance"].items():
            imp.setdefault(k, []).append(v)
    grid_imp = grid["importance"]
    print("\n| knob | importance, tune (mean of seeds) | importance, grid |")
    print("|---|---|---|")
    for k in sorted(set(imp) | set(grid_imp), key=lambda k: -grid_imp.get(k, 0)):
        mean = statistics.mean(imp[k]) if k in imp else float("nan")
        print(f"| {k} | {mean:.2f} | {grid_imp.get(k, float('nan')):.2f} |")
    runs = [json.loads(l) for l in open(f"{w}/grid/trials.jsonl")]
    ok = [r for r in runs if r["status"] == "ok"]
    def spread(rs, label):
        v = sorted(r["value"] for r in rs)
        if not v:
            return
        worst, best = (v[-1], v[0]) if minimize else (v[0], v[-1])
        print(f"| {label} | {len(v)} | {best:.4g} | {statistics.median(v):.4g} | {worst:.4g} | "
              f"{max(v) / min(v):.2f} |")
    print("\n| grid | settings | best | median | worst | max/min |")
    print("|---|---|---|---|---|---|")
    spread(ok, "all")
    best_run = min(ok, key=lambda r: r["value"] if minimize else -r["value"])
    if "precision" in best_run["setting"]:
        p = best_run["setting"]["precision"]
        spread([r for r in ok if r["setting"].get("precision") == p], f"precision={p} only")
    failed = len(runs) - len(ok)
    if failed:
        print(f"\n{mode}: {failed} grid runs failed (see trials.jsonl)")
PY
