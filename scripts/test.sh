#!/usr/bin/env bash
# Builds kiln and runs the whole test suite (unit, fault, conformance, server groups).
# Usage: scripts/test.sh [LABEL]   e.g. scripts/test.sh unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
scripts/build.sh release
args=(--test-dir build/release --output-on-failure -j "$(nproc)")
[[ -n "${1:-}" ]] && args+=(-L "$1")
ctest "${args[@]}"
