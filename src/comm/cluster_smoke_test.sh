#!/usr/bin/env bash
# ctest smoke test of scripts/cluster: brings up 2 emulated nodes (1 Gbit/s links), runs the
# 2-rank MPI tests across them (all-reduce, broadcast, GradReducer, both progress modes) and
# tears everything down. Exits 77 (skipped) where emulation is impossible (not root, no network
# namespaces) or when a cluster is already up (it would be torn down).
# Usage: cluster_smoke_test.sh REPO_DIR TEST_BINARY
set -euo pipefail
repo=$1 binary=$2
if [ "$(id -u)" -ne 0 ] || ! command -v tc >/dev/null || ! command -v nsenter >/dev/null; then
  echo "cluster smoke test skipped: needs root, tc and nsenter"
  exit 77
fi
if ! ip netns add bf-smoke-probe 2>/dev/null; then
  echo "cluster smoke test skipped: cannot create network namespaces here"
  exit 77
fi
ip netns del bf-smoke-probe
# Never tear down a cluster someone is using (a benchmark between `up` and `down`).
if [ -e /run/bertfit-cluster/config ] || ! flock -n /run/lock/bertfit-cluster.lock true 2>/dev/null; then
  echo "cluster smoke test skipped: an emulated cluster is in use (scripts/cluster status)"
  exit 77
fi
"$repo/scripts/cluster" session 2 --rate 1gbit --delay 0 -- -np 2 "$binary"
# Nothing may be left behind.
if ip netns list | grep -q '^bf-'; then
  echo "cluster smoke test: namespaces left after teardown: $(ip netns list | tr '\n' ' ')" >&2
  exit 1
fi
