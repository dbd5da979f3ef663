#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): installs missing Debian packages, then
#   1. clang-format check,
#   2. release build + every test (unit, golden parity vs Hugging Face, CLI end to end),
#   3. each libFuzzer target for a bounded time,
#   4. the tests again under AddressSanitizer + UBSan (all but those labelled no_asan).
# Tests run one per core (ctest -j): most wait on child processes, and none measures time.
# Usage: scripts/test.sh            (FUZZ_SECONDS=N to change the fuzzing time, default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}

echo "== clang-format"
git ls-files -z '*.h' '*.cc' | xargs -0 clang-format --dry-run -Werror

echo "== release build and tests"
bash scripts/build.sh release
ctest --preset release --timeout 900 -j "$(nproc)"

echo "== fuzzing (${FUZZ_SECONDS:-30} s per target)"
bash scripts/build.sh fuzz
for fuzzer in build/fuzz/fuzz/*_fuzz; do
  corpus=$(mktemp -d)
  echo "-- $(basename "$fuzzer")"
  "$fuzzer" -max_total_time="${FUZZ_SECONDS:-30}" -print_final_stats=1 "$corpus" 2>&1 | tail -n 3
  rm -rf "$corpus"
done

echo "== AddressSanitizer + UBSan build and tests"
bash scripts/build.sh asan
ctest --preset asan --timeout 1800 -LE no_asan -j "$(nproc)"
