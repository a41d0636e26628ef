#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release) with all cores: every target, or the
# TARGETs given. Compiles through ccache when it is installed (rebuilds of other checkouts and
# branches then reuse objects).
# Usage: scripts/build.sh [PRESET [TARGET...]]   e.g. scripts/build.sh sanitize tests_unit
# KILN_WERROR=1 makes compiler warnings errors (CI sets it for the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
targets=()
(($# > 1)) && targets=(--target "${@:2}")
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake --preset "$preset" "${launcher[@]}" -DKILN_WERROR="${KILN_WERROR:-0}" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)" "${targets[@]}"
