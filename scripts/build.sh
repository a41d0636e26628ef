#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release) with all cores. Compiles through
# ccache when it is installed (rebuilds of other checkouts and branches then reuse objects).
# KILN_WERROR=1 makes compiler warnings errors (CI sets it for the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake --preset "$preset" "${launcher[@]}" -DKILN_WERROR="${KILN_WERROR:-0}" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
