#!/usr/bin/env bash
# Configures and builds one CMake preset: scripts/build.sh [release|asan|fuzz] [targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
shift || true
cmake --preset "$preset" >/dev/null
jobs=$(nproc)
if [ $# -gt 0 ]; then
  cmake --build --preset "$preset" -j "$jobs" --target "$@"
else
  cmake --build --preset "$preset" -j "$jobs"
fi
