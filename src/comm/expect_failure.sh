#!/usr/bin/env bash
# Runs a command that must fail: passes when it exits non-zero within MAX_SECONDS and its output
# matches REGEX (extended grep). Usage: expect_failure.sh MAX_SECONDS REGEX -- command...
set -uo pipefail
max_seconds=$1 regex=$2
shift 2
[ "${1:-}" = "--" ] && shift
start=$(date +%s%N)
output=$(timeout --kill-after=5 $((max_seconds * 2)) "$@" 2>&1)
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
echo "$output"
echo "expect_failure: exit code $rc after ${elapsed} s"
if [ "$rc" -eq 0 ]; then
  echo "expect_failure: FAIL: the command succeeded" >&2
  exit 1
fi
if [ "$elapsed_ms" -gt $((max_seconds * 1000)) ]; then
  echo "expect_failure: FAIL: took ${elapsed} s, bound ${max_seconds} s" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" <<<"$output"; then
  echo "expect_failure: FAIL: output does not match: $regex" >&2
  exit 1
fi
echo "expect_failure: ok"
